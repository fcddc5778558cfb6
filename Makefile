# cto-harness. `make demo` and `make test` need only Go, git and gcc.
GO      ?= go
BIN     := bin
RUNS    ?= runs

.PHONY: all build demo test lint bench validate-stage3 clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# Stages 1 -> 2 -> 3 on the embedded sample repositories, each validated.
demo: build
	$(BIN)/cto-harness --runs-dir $(RUNS) demo

# The focused stage 3 validation CI runs.
validate-stage3: build
	$(BIN)/validate-case-stage3 --runs-dir $(RUNS) --harness-root . --json

test:
	$(GO) test -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN)
	find $(RUNS) -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
