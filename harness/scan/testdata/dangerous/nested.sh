#!/bin/bash
# expect: 10 privilege-escalation critical
# expect: 12 recursive-delete critical
# expect: 14 network high
# expect: 17 recursive-delete critical
# expect: 19 recursive-delete critical
# expect: 20 dynamic-eval medium
# expect: 21 privilege-escalation critical
# Shell code inside strings: -c arguments, eval, trap, variables.
bash -c 'sudo id'
WHERE=/etc
sh -c "rm -rf $WHERE"
CMD='curl https://example.com/x'
eval "$CMD"
eval 'rm -rf ./build'
bash -c 'echo one
  rm -rf /
  echo two'
trap 'rm -rf /tmp/*' EXIT
eval "$(some_generator)"
bash -xec $'sudo\tid'
