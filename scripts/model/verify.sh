#!/usr/bin/env bash
# Regenerates internal/embed/testdata/reference.json from an independent
# implementation and checks toolgate's Go embedder against it.
#
#   scripts/model/verify.sh [MODEL_DIR]
#
# Reference vectors come from @lat.md/embed (Hugging Face candle compiled to
# WASM) and token ids from @huggingface/tokenizers (pure JS), both run under
# Node from the locally installed model files: nothing is fetched from a
# model hub. The npm packages are installed into a temporary directory.
# Run by hand / `make verify-model`, not by CI (needs Node and npm).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${1:-"$root/.cache/models/all-MiniLM-L6-v2"}
case $dir in /*) ;; *) dir="$PWD/$dir" ;; esac
(cd "$root" && go run ./cmd/toolgate model install --dir "$dir" >/dev/null)
dir=$(cd "$dir" && pwd)

command -v node >/dev/null || { echo "verify.sh: node is required" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(
  cd "$tmp"
  npm init -y >/dev/null 2>&1
  npm install --silent --no-audit --no-fund --ignore-scripts \
    @lat.md/embed@0.2.0 @huggingface/tokenizers@0.2.0 >/dev/null
  node "$root/scripts/model/reference.mjs" "$dir" "$root/internal/embed/testdata/reference.json"
)
cd "$root"
TOOLGATE_MODEL_DIR="$dir" TOOLGATE_REQUIRE_MODEL=1 \
  go test -count=1 -run 'Reference|Tokenizer|Truncation' ./internal/embed/
git diff --stat -- internal/embed/testdata/reference.json || true
