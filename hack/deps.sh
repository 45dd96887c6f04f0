#!/usr/bin/env bash
# Makes ready what a make target runs, the independent parts at once (downloads and
# package installation overlap the compilers; on a fresh machine the compilers are most
# of the time of a first make demo):
#
#   deps.sh demo   make demo and make sandbox (CNI=ptp|flannel): the Debian packages of
#                  the real cluster (hack/install-test-deps.sh demo), the Kubernetes
#                  binaries and etcd (hack/build-control-plane.sh), the CNI plugins
#                  (hack/build-cni-plugins.sh; with CNI=flannel, hack/build-flannel.sh
#                  too), and bin/juneau, bin/box and bin/sandbox
#   deps.sh test   make test: every Debian package the tests use, the same binaries,
#                  flannel's (the real-cluster tier runs on both primary CNIs) and
#                  bin/kubectl-juneau
#
# bin/juneau, bin/box, bin/sandbox (and bin/kubectl-juneau) come from one go build,
# statically linked like make build, so the packages they share are compiled once; with
# the flags of the tools' builds (hack/lib.sh), so that the standard library, k8s.io/api,
# apimachinery and client-go are compiled once for them and Kubernetes.
# Each part prints its lines prefixed with its name; the script fails if any part does.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${root}"
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"
mode=${1:-}
cni=${CNI:-ptp}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}

extra_binaries=()
case ${mode} in
demo)
  packages=demo
  flannel=false
  if [[ ${cni} == flannel ]]; then packages=flannel flannel=true; fi
  if [[ ${cni} != ptp && ${cni} != flannel ]]; then
    echo "CNI=${cni}: ptp or flannel" >&2
    exit 2
  fi
  ;;
test) packages=test flannel=true extra_binaries=(./cmd/kubectl-juneau) ;;
*)
  echo "usage: $0 demo|test" >&2
  exit 2
  ;;
esac

names=()
pids=()
# part NAME CMD...: runs CMD in the background, its output prefixed with NAME.
part() {
  local name=$1
  shift
  (
    set -o pipefail
    "$@" 2>&1 | sed -u "s/^/${name}: /"
  ) &
  names+=("${name}")
  pids+=($!)
}

# flanneld is built with cgo: after the packages, which bring the C compiler.
packages_then_flannel() {
  hack/install-test-deps.sh "${packages}"
  if [[ ${flannel} == true ]]; then
    hack/build-flannel.sh >/dev/null
  fi
}

# The modules of the tools' builds, fetched while the compiler runs.
download_tool_modules() {
  local dir
  for dir in k8s etcd cni; do
    (cd "hack/tools/${dir}" && go mod download)
  done
}

# juneau's binaries, then the tools side by side: one after the other, because two go
# builds running at once would each compile what they share (the standard library,
# client-go); built first, juneau's leave them in the build cache for Kubernetes.
binaries_then_tools() {
  local pids=() pid
  go build -ldflags "-X main.version=${version}" -o bin/ \
    ./cmd/juneau ./test/images/box ./test/sandbox "${extra_binaries[@]}"
  hack/build-control-plane.sh >/dev/null &
  pids+=($!)
  hack/build-cni-plugins.sh >/dev/null &
  pids+=($!)
  for pid in "${pids[@]}"; do
    wait "${pid}"
  done
}

mkdir -p bin
part packages packages_then_flannel
part downloads download_tool_modules
part builds binaries_then_tools

failed=()
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed+=("${names[$i]}")
  fi
done
if ((${#failed[@]} > 0)); then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
