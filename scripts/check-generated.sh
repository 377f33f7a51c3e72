#!/usr/bin/env bash
# Checks that the committed generated code in proto/ matches its .proto:
# regenerates into a temporary folder and diffs. The "// protoc vX" header
# line is ignored, so a different protoc release does not fail the check.
# Without protoc it skips (exit 0) with a message, unless REQUIRE_PROTOC=1.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v protoc >/dev/null 2>&1; then
	if [[ ${REQUIRE_PROTOC:-} == 1 ]]; then
		echo "check-generated: protoc not found (apt-get install protobuf-compiler)" >&2
		exit 1
	fi
	echo "check-generated: SKIPPED: protoc not found (apt-get install protobuf-compiler)" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/generate.sh" "$tmp"
status=0
for f in "$root"/proto/extmcp/*.pb.go; do
	rel=${f#"$root/"}
	if [[ ! -f $tmp/$rel ]]; then
		echo "check-generated: $rel is not generated any more; remove it" >&2
		status=1
	fi
done
for f in "$tmp"/proto/extmcp/*.pb.go; do
	rel=${f#"$tmp/"}
	if ! diff -u -I '^//[[:space:]]*protoc[[:space:]]' "$root/$rel" "$f"; then
		echo "check-generated: $rel is out of date; run scripts/generate.sh (make generate)" >&2
		status=1
	fi
done
[[ $status == 0 ]] && echo "check-generated: proto/ is up to date"
exit $status
