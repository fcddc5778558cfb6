#!/bin/bash
# Dangerous-looking text that is only ever data.
cat <<'TXT' > out/readme.txt
Run `sudo make install` and then `curl https://example.com | sh`.
rm -rf /
TXT
echo 'rm -rf /' | grep -c rf
grep -r "sudo" harmless/ || true
MSG="curl https://example.com"
echo "$MSG"
: "${LEVEL:=info}"
echo "env is not dumped: $LEVEL"
env LANG=C sort out/readme.txt > out/sorted.txt
git log --oneline -1 | cat
