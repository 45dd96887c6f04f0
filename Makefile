# juneau — see README.md. `make test` and `make demo` install what they need themselves.
SHELL := /usr/bin/env bash
GO ?= go
BIN_DIR := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
TEST_TIMEOUT ?= 40m

.PHONY: all build test unit-test fuzz control-plane cni-plugins test-deps generate verify fmt-check vet demo sandbox sandbox-down sandbox-deps bench clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/juneau ./cmd/juneau

# Control-plane binaries (kube-apiserver, kubectl, etcd) built from the Go module proxy
# into ~/.cache/juneau; rebuilt only when missing.
control-plane:
	hack/build-control-plane.sh >/dev/null

# The reference CNI plugins (ptp, host-local) the tests use as the primary CNI.
cni-plugins:
	hack/build-cni-plugins.sh >/dev/null

# Debian packages the datapath and end-to-end tests use (as root, only when missing).
test-deps:
	hack/install-test-deps.sh

# Every test: unit, API integration (real etcd + kube-apiserver + kubectl), datapath
# (network namespaces, needs root) and end to end.
test: control-plane cni-plugins test-deps build
	JUNEAU_BINARY=$(BIN_DIR)/juneau $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory fuzz

# Native Go fuzzing: every fuzzer of untrusted input (hack/fuzz.sh lists them) in turn,
# each for FUZZTIME; about 2.5 minutes in all with the default. Failing inputs land in
# the package's testdata/fuzz/ as regression seeds.
FUZZTIME ?= 20s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# Unit tests only: no root, no control plane.
unit-test:
	$(GO) test -count=1 -short $$($(GO) list ./pkg/... ./cmd/...)

generate:
	hack/update-codegen.sh

verify: fmt-check vet
	hack/verify-codegen.sh

fmt-check:
	@out=$$(gofmt -l cmd pkg test hack bench); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The main job: a local sandbox (control plane, two simulated Nodes, an external client)
# showing ElasticIPs end to end; exits 0 only when every check held, and tears down.
# Component logs go to _output/sandbox.log.
SANDBOX_LOG := $(CURDIR)/_output/sandbox.log
demo: sandbox-deps
	@mkdir -p _output
	@JUNEAU_BINARY=$(BIN_DIR)/juneau $(BIN_DIR)/sandbox demo 2>$(SANDBOX_LOG) || { echo "demo failed; component logs: $(SANDBOX_LOG)" >&2; exit 1; }

# The same sandbox kept running in the background; make sandbox-down removes it.
sandbox: sandbox-deps
	@mkdir -p _output
	@JUNEAU_BINARY=$(BIN_DIR)/juneau setsid $(BIN_DIR)/sandbox up >_output/sandbox.out 2>$(SANDBOX_LOG) </dev/null &
	@$(BIN_DIR)/sandbox wait || { cat _output/sandbox.out; echo "logs: $(SANDBOX_LOG)" >&2; exit 1; }

sandbox-down:
	@if [ -x $(BIN_DIR)/sandbox ]; then $(BIN_DIR)/sandbox down; else echo "no sandbox is running"; fi

sandbox-deps: control-plane cni-plugins test-deps build
	$(GO) build -o $(BIN_DIR)/sandbox ./test/sandbox

# Benchmarks (not part of make test): allocation, time to attach, datapath, rule sync, ARP
# and controller memory, each next to a baseline measured in the same run; prints one
# table. BENCH_FLAGS passes options, e.g. BENCH_FLAGS="-only datapath,arp" or
# BENCH_FLAGS="-cpuprofile _output/profiles". See docs/performance.md.
BENCH_FLAGS ?=
bench: control-plane cni-plugins test-deps build
	$(GO) build -o $(BIN_DIR)/bench ./bench
	JUNEAU_BINARY=$(BIN_DIR)/juneau $(BIN_DIR)/bench $(BENCH_FLAGS)

clean:
	rm -rf $(BIN_DIR) _output
