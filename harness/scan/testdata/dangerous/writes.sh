#!/bin/bash
# expect: 18 write-outside high
# expect: 19 write-outside high
# expect: 20 write-outside high
# expect: 21 write-outside high
# expect: 22 write-outside high
# expect: 23 write-outside high
# expect: 24 write-outside high
# expect: 25 write-outside high
# expect: 27 write-outside high
# expect: 28 write-outside high
# expect: 29 write-outside high
# Writes outside the fixture and the allowed roots.
mkdir -p out
echo ok > out/result.txt
echo ok >/dev/null 2>&1
echo done >&2
echo "owned" > /etc/motd
echo x >> "$HOME/.bashrc"
date | tee out/a.log /var/tmp/leak.log
cp bin/tool /usr/local/bin/
mv out/result.txt /tmp/result.txt
install -m 0755 bin/tool /opt/tool
dd if=/dev/zero of=/dev/sda bs=1M count=1
cp -t /srv/www out/index.html
echo fine > /work/allowed-root/notes.txt
touch ../outside.txt
ln -s "$PWD/out" /usr/share/out
echo log &> /var/log/app.log
