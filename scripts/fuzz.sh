#!/bin/sh
# Runs every native fuzz target of the module (each `func FuzzX` in a
# tracked _test.go file) for $FUZZTIME each, so a new target is fuzzed
# without anyone having to list it. `scripts/fuzz.sh -l` lists them.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
targets=$(git grep --full-name -e '^func Fuzz[A-Za-z0-9_]*(' -- '*_test.go' ':!examples' |
	sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#./\1 \2#' | sort -u)
if [ -z "$targets" ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi
if [ "${1:-}" = "-l" ]; then
	echo "$targets"
	exit 0
fi
echo "$targets" | while read -r dir name; do
	echo "== $name ($dir, $FUZZTIME)"
	$GO test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "$dir"
done
