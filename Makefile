# admitfn — see README.md. `make run` serves the example bundle, `make test`
# runs every check CI runs.

GO       ?= go
ADDR     ?= 127.0.0.1:8080
POLICIES ?= policies/examples
BIN      := bin

.PHONY: run test unit lint fmt build clean

run: ## serve policies/examples on http://127.0.0.1:8080
	$(GO) run ./functions/server -addr $(ADDR) -policies $(POLICIES)

test: lint unit ## everything CI runs

unit: ## Go tests, with the race detector
	$(GO) test -race -count=1 ./...

lint: ## gofmt and go vet
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

build: ## static binaries in bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/ ./cmd/admitfn ./functions/server

clean:
	rm -rf $(BIN) dist
