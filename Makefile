# juneau — see README.md. `make test` and `make demo` install what they need themselves.
SHELL := /usr/bin/env bash
GO ?= go
BIN_DIR := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
TEST_TIMEOUT ?= 40m
# Every go command compiles as hack/lib.sh's builds do (statically linked, without debug
# information), so that on a fresh machine go vet, the tests, juneau's binaries and the
# Kubernetes binaries share one compile of each package they have in common (the standard
# library, k8s.io/api, apimachinery, client-go) instead of compiling it twice.
export CGO_ENABLED := 0
ifeq ($(findstring -gcflags=all=-dwarf=false,$(GOFLAGS)),)
export GOFLAGS := $(strip $(GOFLAGS) -gcflags=all=-dwarf=false)
endif

.PHONY: all build box image test test-prereqs unit-test fuzz control-plane cni-plugins flannel ops-tools kwok test-deps generate verify fmt-check vet demo sandbox sandbox-down sandbox-deps bench scale soak clean

all: build

# Statically linked: the binary is also the CNI plugin the runtime runs on every Node,
# and goes into images without a C library.
# bin/kubectl-juneau is the kubectl plugin (copy it onto PATH: `kubectl juneau`).
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/juneau ./cmd/juneau
	CGO_ENABLED=0 $(GO) build -o $(BIN_DIR)/kubectl-juneau ./cmd/kubectl-juneau

# The juneau image without Docker or a registry: bin/juneau in the Dockerfile's layout on
# Debian's busybox-static, as a docker-archive (ctr -n k8s.io images import bin/juneau-image.tar).
IMAGE ?= ghcr.io/loutres/juneau:$(VERSION)
image: build test-deps
	$(GO) run ./test/images/mkimage -juneau $(BIN_DIR)/juneau -o $(BIN_DIR)/juneau-image.tar -name $(IMAGE)

# Kubernetes binaries (kube-apiserver, kubectl, etcd; kubelet, kube-controller-manager,
# kube-scheduler, kube-proxy for the real cluster) built from the Go module proxy into
# ~/.cache/juneau; each rebuilt only when missing.
control-plane:
	hack/build-control-plane.sh >/dev/null

# helm, prometheus and promtool (the chart's and the monitoring tests), built from the Go
# module proxy into ~/.cache/juneau when missing.
ops-tools:
	hack/build-ops-tools.sh >/dev/null

# kwok, which simulates Nodes and their Pods for make scale, built from the Go module proxy
# into ~/.cache/juneau when missing.
kwok:
	hack/build-kwok.sh >/dev/null

# The reference CNI plugins (ptp, host-local, loopback) the tests use as the primary CNI.
cni-plugins:
	hack/build-cni-plugins.sh >/dev/null

# The second primary CNI of the real cluster: flanneld, the flannel CNI meta plugin and
# bridge, built from the Go module proxy into ~/.cache/juneau when missing.
flannel:
	hack/build-flannel.sh >/dev/null

# Debian packages the datapath and end-to-end tests use, and containerd, runc and
# busybox-static for the real cluster (as root, only when missing).
test-deps:
	hack/install-test-deps.sh test

# The workload binary of the real cluster's images (test/images/box).
box:
	@CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $(BIN_DIR)/box ./test/images/box

# Every test: unit, API integration (real etcd + kube-apiserver + kubectl), datapath
# (network namespaces, needs root) and end to end on simulated Nodes; then, alone, the
# real-cluster tier (test/realcluster: kubelets, containerd, kube-proxy; juneau installed,
# used and uninstalled with the steps of README.md and docs/, taken from the Markdown by
# test/doctest) on a dual-stack cluster with ptp as the primary CNI (its Node failure
# times printed after it, docs/operations.md#a-node-dies), then its scenarios
# for flannel on one with flannel (component logs kept in _output/realcluster-logs/ and
# _output/realcluster-flannel-logs/); then every fuzzer for TEST_FUZZTIME (10 s: a short
# pass beyond the seed corpora, which the unit tests replay; make fuzz explores longer).
# What they need is made ready first, in parallel (hack/deps.sh test).
TEST_ENV := JUNEAU_BINARY=$(BIN_DIR)/juneau JUNEAU_BOX_BINARY=$(BIN_DIR)/box JUNEAU_KUBECTL_PLUGIN=$(BIN_DIR)/kubectl-juneau
REALCLUSTER_TIMEOUT ?= 30m
TEST_FUZZTIME ?= 10s
# helm, prometheus and promtool (hack/build-ops-tools.sh) are built, when missing, while
# the packages that do not use them are tested: a cold build of the tools is mostly CPU,
# most of those tests mostly wait. test/chart and the real-cluster tier run after it.
OPS_TOOL_TESTS := /test/realcluster|/test/chart
test: test-prereqs
	@mkdir -p _output
	@hack/build-ops-tools.sh >_output/ops-tools.log 2>&1 & ops=$$!; \
	$(TEST_ENV) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -Ev '$(OPS_TOOL_TESTS)'); status=$$?; \
	if ! wait $$ops; then cat _output/ops-tools.log; exit 1; fi; exit $$status
	$(TEST_ENV) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/chart/
	$(TEST_ENV) JUNEAU_REALCLUSTER_LOGS=$(CURDIR)/_output/realcluster-logs JUNEAU_NODE_FAILURE_REPORT=$(CURDIR)/_output/node-failure.txt \
		JUNEAU_REACH_REPORT=$(CURDIR)/_output/time-to-reachable.txt \
		$(GO) test -count=1 -timeout $(REALCLUSTER_TIMEOUT) ./test/realcluster/
	@cat _output/time-to-reachable.txt _output/node-failure.txt
	$(TEST_ENV) JUNEAU_REALCLUSTER_CNI=flannel JUNEAU_REALCLUSTER_LOGS=$(CURDIR)/_output/realcluster-flannel-logs \
		$(GO) test -count=1 -timeout $(REALCLUSTER_TIMEOUT) ./test/realcluster/
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

test-prereqs:
	@VERSION=$(VERSION) hack/deps.sh test

# Native Go fuzzing: every fuzzer of untrusted input (hack/fuzz.sh lists them) in turn,
# each for FUZZTIME; about 5 minutes in all with the default. Failing inputs land in
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

# The main job: a real two-Node dual-stack Kubernetes cluster on this machine
# (test/cluster), juneau installed with kubectl apply -k manifests/, manifests/examples/
# and manifests/examples/ipv6/ applied, the ElasticIPs (IPv4 and IPv6, by NAT and
# directly) checked from an external client; exits 0 only when every check held, and
# tears down. Component logs are kept in _output/demo-logs/. CNI=flannel runs flannel
# (VXLAN) as the primary CNI instead of ptp.
CNI ?= ptp
demo: sandbox-deps
	@$(TEST_ENV) $(BIN_DIR)/sandbox demo -cni=$(CNI)

# The same cluster kept running in the background; prints how to use kubectl against it.
# make sandbox-down removes it (logs kept in _output/sandbox-logs/).
sandbox: sandbox-deps
	@mkdir -p _output
	@$(TEST_ENV) setsid $(BIN_DIR)/sandbox up -cni=$(CNI) >_output/sandbox.log 2>&1 </dev/null & \
		$(BIN_DIR)/sandbox wait -pid $$! -log _output/sandbox.log

sandbox-down:
	@CGO_ENABLED=0 $(GO) build -o $(BIN_DIR)/sandbox ./test/sandbox && $(BIN_DIR)/sandbox down

# Only what the demo runs, made ready in parallel (hack/deps.sh demo): the Debian
# packages of the real cluster, the Kubernetes binaries, the CNI plugins of CNI, and
# bin/juneau, bin/box, bin/sandbox.
sandbox-deps:
	@CNI=$(CNI) VERSION=$(VERSION) hack/deps.sh demo

# Benchmarks (not part of make test): allocation, time to attach, datapath, rule sync, ARP
# and controller memory, each next to a baseline measured in the same run; prints one
# table. BENCH_FLAGS passes options, e.g. BENCH_FLAGS="-only datapath,arp" or
# BENCH_FLAGS="-cpuprofile _output/profiles". See docs/performance.md.
BENCH_FLAGS ?=
bench: control-plane cni-plugins test-deps build
	$(GO) build -o $(BIN_DIR)/bench ./bench
	JUNEAU_BINARY=$(BIN_DIR)/juneau $(BIN_DIR)/bench $(BENCH_FLAGS)

# Scale (not part of make test or make bench; an hour or more at the default sizes):
# 1,000 Nodes simulated by kwok, Pods with automatic ElasticIPs up to 10,000, 30,000 and
# 100,000, the controller and the webhook real; then one real node agent with 10,000,
# 50,000 and 100,000 mappings on its Node (docs/performance.md#scale). SCALE_FLAGS
# passes options, e.g. SCALE_FLAGS="-scale-sizes 1000,3000 -scale-nodes 100
# -agent-sizes 1000,5000"; SCALE_ONLY=agent-scale runs the agent's part alone.
SCALE_FLAGS ?=
SCALE_ONLY ?= scale,agent-scale
scale: control-plane cni-plugins test-deps kwok build
	$(GO) build -o $(BIN_DIR)/bench ./bench
	JUNEAU_BINARY=$(BIN_DIR)/juneau $(BIN_DIR)/bench -only $(SCALE_ONLY) $(SCALE_FLAGS)

# Soak (not part of make test, at most 15 minutes): 10,000 ElasticIPs created, attached,
# detached and deleted in rounds by test/soak; fails on a leaked claim, advertisement,
# NetworkInterface or nftables element, or on controller or agent RSS growing more than
# 10% after warm-up; prints a table. SOAK_FLAGS passes options (go run ./test/soak -h).
SOAK_FLAGS ?=
soak: control-plane cni-plugins test-deps build
	$(GO) build -o $(BIN_DIR)/soak ./test/soak
	JUNEAU_BINARY=$(BIN_DIR)/juneau $(BIN_DIR)/soak $(SOAK_FLAGS)

clean:
	rm -rf $(BIN_DIR) _output
