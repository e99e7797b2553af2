#!/usr/bin/env bash
# fuzz.sh runs every native Go fuzz target in the module for a while each.
#   scripts/fuzz.sh [DURATION]   (default 15s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-15s}
grep -rE --include='*_test.go' -l '^func Fuzz' . | while read -r f; do
	pkg=./$(dirname "${f#./}")
	for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
		echo "== $pkg $target ($t)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg"
	done
done
