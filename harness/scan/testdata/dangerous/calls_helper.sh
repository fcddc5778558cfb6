#!/bin/sh
# expect: dangerous/lib/helper.sh:3 privilege-escalation critical
# expect: dangerous/lib/helper.sh:4 network high
# expect: dangerous/lib/deeper.sh:2 recursive-delete critical
# expect: dangerous/lib/tool.py:3 py-subprocess-shell high
# expect: 11 script-missing medium
# expect: 12 script-outside high
# The danger is in the scripts this one runs.
sh ./dangerous/lib/helper.sh
. dangerous/lib/helper.sh
sh dangerous/lib/missing.sh
bash /usr/share/somewhere/script.sh
