#!/bin/sh
# helper
sudo true
curl https://example.com/
bash "$(dirname "$0")/deeper.sh"
./dangerous/lib/deeper.sh
python3 dangerous/lib/tool.py
