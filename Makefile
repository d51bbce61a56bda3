# klasy's entry points. `make demo` and `make test` do all set-up on a fresh
# Debian 12 machine; fragments in mk/*.mk add their own set-up steps to
# TEST_SETUP / DEMO_SETUP / BENCH_SETUP and benchmarks to BENCH_PKGS.

GO        ?= go
KLASY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/klasy
export KLASY_CACHE

BIN        := bin/klasy
TEST_SETUP :=
DEMO_SETUP :=
BENCH_SETUP :=
BENCH_PKGS :=
# Tests that need a piece of the lab (a kernel, the plugin, linux-source)
# skip without it when run by hand; under `make test` its absence is a
# failure, because make test installs everything.
TEST_ENV   := KLASY_TEST_REQUIRE=all

include $(sort $(wildcard mk/*.mk))

.PHONY: all build check test demo bench lint
all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/klasy

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Unit tests only, in seconds: no set-up, no lab, plugin or kernel.
# Under -short every test that needs one skips (internal/testenv), even
# with KLASY_TEST_REQUIRE set in the environment; gcc fixtures still run.
check:
	KLASY_TEST_REQUIRE= $(GO) test -short ./...

test: $(TEST_SETUP) lint
	$(TEST_ENV) $(GO) test -count=1 -timeout 60m ./...

demo: build $(DEMO_SETUP)
	./scripts/demo.sh

bench: build $(BENCH_SETUP)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m $(or $(BENCH_PKGS),./...)
