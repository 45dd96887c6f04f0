#!/usr/bin/env bash
# Builds the local control-plane binaries (kube-apiserver, kubectl, etcd) from the
# Go module proxy into a cache outside the repository, and only when they are missing.
# Prints the directory holding them on the last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"

mkdir -p "${JUNEAU_BIN_DIR}"

build_k8s() {
  local ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=${K8S_MINOR}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=${K8S_MINOR}"
  echo "building kube-apiserver and kubectl ${K8S_VERSION} (cold build takes several minutes)" >&2
  (cd "${root}/hack/tools/k8s" && go build -ldflags "${ldflags}" -o "${JUNEAU_BIN_DIR}/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
}

build_etcd() {
  echo "building etcd ${ETCD_VERSION}" >&2
  (cd "${root}/hack/tools/etcd" && go build -o "${JUNEAU_BIN_DIR}/etcd" go.etcd.io/etcd/server/v3)
}

if [[ ! -x "${JUNEAU_BIN_DIR}/kube-apiserver" || ! -x "${JUNEAU_BIN_DIR}/kubectl" ]]; then
  build_k8s
fi
if [[ ! -x "${JUNEAU_BIN_DIR}/etcd" ]]; then
  build_etcd
fi
echo "${JUNEAU_BIN_DIR}"
