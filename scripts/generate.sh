#!/usr/bin/env bash
# Regenerates the Go code of the ExtMCP gRPC contract (proto/extmcp) from
# its .proto. Needs protoc (Debian: apt-get install protobuf-compiler); the
# Go plugins are installed at the pinned versions below into a cache folder.
#
#   scripts/generate.sh            write proto/extmcp/*.pb.go
#   scripts/generate.sh OUTDIR     write them under OUTDIR instead (for the check)
set -euo pipefail

# Pinned generator versions. protoc-gen-go follows google.golang.org/protobuf
# in go.mod.
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root}

if ! command -v protoc >/dev/null 2>&1; then
	echo "generate: protoc not found; install it (Debian: apt-get install protobuf-compiler)" >&2
	exit 2
fi

bin=${TOOLGATE_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate/bin/protoc-gen-go-$PROTOC_GEN_GO_VERSION-grpc-$PROTOC_GEN_GO_GRPC_VERSION}
if [[ ! -x $bin/protoc-gen-go || ! -x $bin/protoc-gen-go-grpc ]]; then
	mkdir -p "$bin"
	GOBIN=$bin GOFLAGS= go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
	GOBIN=$bin GOFLAGS= go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

mkdir -p "$out/proto"
cd "$root/proto"
PATH="$bin:$PATH" protoc \
	--go_out="$out/proto" --go_opt=paths=source_relative \
	--go-grpc_out="$out/proto" --go-grpc_opt=paths=source_relative \
	extmcp/ext_mcp.proto
