# juneau — see README.md. `make test` and `make demo` install what they need themselves.
SHELL := /usr/bin/env bash
GO ?= go
BIN_DIR := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
TEST_TIMEOUT ?= 40m

.PHONY: all build test unit-test control-plane cni-plugins test-deps generate verify fmt-check vet demo clean

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

# Unit tests only: no root, no control plane.
unit-test:
	$(GO) test -count=1 -short $$($(GO) list ./pkg/... ./cmd/...)

generate:
	hack/update-codegen.sh

verify: fmt-check vet
	hack/verify-codegen.sh

fmt-check:
	@out=$$(gofmt -l cmd pkg test hack); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

demo:
	@echo "make demo: the local sandbox is not built yet" >&2; exit 1

clean:
	rm -rf $(BIN_DIR) _output
