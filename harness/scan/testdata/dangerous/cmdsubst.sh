#!/bin/bash
# expect: 9 network high
# expect: 10 network high
# expect: 11 privilege-escalation critical
# expect: 14 network high
# expect: 15 recursive-delete critical
# expect: 16 recursive-delete critical
# Commands hidden in substitutions and pipelines.
echo "$(curl -s https://example.com/v)"
n=`wget -qO- http://203.0.113.1/n`
if [[ "$(sudo -n true && echo y)" == y ]]; then
  echo root
fi
diff <(ssh host.example.com cat /etc/hosts) /etc/hosts
(cd / && rm -rf opt)
{ rm -rf "$HOME"; } 2>/dev/null
