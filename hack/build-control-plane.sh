#!/usr/bin/env bash
# Builds the local Kubernetes binaries from the Go module proxy into a cache outside the
# repository, each only when it is missing: kube-apiserver, kubectl and etcd (the control
# plane of the integration tests), and kubelet, kube-controller-manager, kube-scheduler and
# kube-proxy (the real cluster of test/cluster), the Kubernetes ones as one binary. The
# build flags never change, so the Go build cache serves every later build. The two
# builds (Kubernetes, etcd) run at once: one downloads or links while the other compiles.
# Prints the directory holding them on the last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"

mkdir -p "${JUNEAU_BIN_DIR}"

k8s_commands=(kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy)

# build_k8s builds those commands as one binary, kube (hack/tools/k8s/main.go: the
# packages they share compiled once, one link instead of six), and links each command's
# name to it; kube runs the command it is started as.
build_k8s() {
  local ldflags="-s -w" cmd
  ldflags+=" -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=${K8S_MINOR}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=${K8S_MINOR}"
  echo "building ${k8s_commands[*]} ${K8S_VERSION} as one binary (a cold build takes several minutes)" >&2
  (cd "${root}/hack/tools/k8s" && go build -ldflags "${ldflags}" -o "${JUNEAU_BIN_DIR}/kube" .)
  for cmd in "${k8s_commands[@]}"; do
    ln -f "${JUNEAU_BIN_DIR}/kube" "${JUNEAU_BIN_DIR}/${cmd}"
  done
}

build_etcd() {
  echo "building etcd ${ETCD_VERSION}" >&2
  (cd "${root}/hack/tools/etcd" && go build -ldflags "-s -w" -o "${JUNEAU_BIN_DIR}/etcd" go.etcd.io/etcd/server/v3)
}

missing=false
for cmd in kube "${k8s_commands[@]}"; do
  [[ -x "${JUNEAU_BIN_DIR}/${cmd}" ]] || missing=true
done
pids=()
if [[ ${missing} == true ]]; then
  build_k8s &
  pids+=($!)
fi
if [[ ! -x "${JUNEAU_BIN_DIR}/etcd" ]]; then
  build_etcd &
  pids+=($!)
fi
for pid in "${pids[@]}"; do
  wait "${pid}"
done
echo "${JUNEAU_BIN_DIR}"
