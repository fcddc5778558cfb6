#!/bin/sh
# expect: 19 recursive-delete critical
# expect: 20 recursive-delete critical
# expect: 21 recursive-delete critical
# expect: 22 recursive-delete critical
# expect: 23 recursive-delete critical
# expect: 24 recursive-delete critical
# expect: 26 recursive-delete critical
# expect: 27 recursive-delete-unresolved medium
# expect: 28 recursive-delete critical
# expect: 30 recursive-delete critical
# expect: 32 recursive-delete critical
# expect: 33 recursive-delete critical
# expect: 35 recursive-delete-unresolved medium
# expect: 36 recursive-delete critical
# Recursive deletion outside the fixture, spelled in ways a naive grep misses.
set -e
rm -rf build/            # inside the fixture: fine
rm -rf /
rm -r -f "$HOME"
rm -fr ../..
r''m -R '/etc'
"rm" --recursive /usr/lib/*
\rm -rf -- ~/.cache
TARGET=/var
rm -rf "$TARGET"/log
rm -rf "$NEVER_SET/"   # unknown: the config's env may set it
rm -rf "${DIR:-/opt}"
for d in build /srv; do
  rm -rf "$d"
done
find / -name '*.log' -delete
find /home -type d -exec rm -rf {} +
read -r WHERE
rm -rf "$WHERE"
rm -rf /*
