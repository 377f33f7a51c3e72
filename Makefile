# toolgate's build, run and test entry points. `make run` and `make test`
# install what they need (Go modules, the npm MCP servers) by themselves.

GO      ?= go
NPM     ?= npm
LISTEN  ?= 127.0.0.1:8787
CONFIG  ?= examples/config.json
BIN     := bin/toolgate

.PHONY: all build run run-stdio deps test e2e unit lint fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/toolgate

# The npm MCP servers used by the example config and the end-to-end tests,
# pinned in package-lock.json.
deps: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

# Serve the example config over streamable HTTP at http://$(LISTEN)/mcp.
run: build deps
	$(BIN) serve --config $(CONFIG) --listen $(LISTEN)

# Serve the example config over stdio, as an MCP client would start it.
run-stdio: build deps
	$(BIN) serve --config $(CONFIG)

test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

unit:
	$(GO) test -race -short ./...

e2e: deps
	$(GO) test -race -count=1 ./test/e2e/...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

fuzz:
	$(GO) test -run=^$$ -fuzz=FuzzParse -fuzztime=30s ./internal/config

bench: deps
	$(GO) run ./bench/latency

clean:
	rm -rf bin
