#!/bin/sh
# expect: 12 privilege-escalation critical
# expect: 13 privilege-escalation critical
# expect: 14 privilege-escalation critical
# expect: 15 privilege-escalation critical
# expect: 15 script-missing medium
# expect: 16 privilege-escalation critical
# expect: 17 privilege-escalation critical
# expect: 18 privilege-escalation critical
# expect: 18 recursive-delete critical
# Privilege escalation, direct and wrapped.
sudo apt-get install -y jq
su -c 'id' root
doas make install
env FOO=1 sudo -E ./run.sh
nohup /usr/bin/sudo true &
x=$(sudo cat /etc/shadow)
timeout 5 sudo -n rm -rf /root
