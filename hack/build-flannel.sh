#!/usr/bin/env bash
# Builds the second primary CNI of the real cluster (test/cluster, CNI=flannel) from the
# Go module proxy into a cache outside the repository, each binary only when missing:
#   flanneld  flannel itself (hack/tools/flannel), the VXLAN backend with the Kubernetes
#             subnet manager;
#   flannel   the CNI meta plugin that reads flanneld's subnet file and delegates to
#             bridge + host-local (containernetworking/plugins v0.9.1, the last release
#             holding it; hack/tools/flannel-cni);
#   bridge    the reference bridge plugin it delegates to (hack/tools/cni, beside ptp).
# Prints the directory holding them on the last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"

mkdir -p "${JUNEAU_FLANNEL_DIR}"
dir=${JUNEAU_FLANNEL_DIR}

pids=()
if [[ ! -x "${dir}/flanneld" ]]; then
  # flannel's UDP backend is written in C (flannel's own Makefile builds with cgo too);
  # the VXLAN backend the cluster uses is not, but main links every backend.
  if ! command -v "${CC:-gcc}" >/dev/null 2>&1; then
    echo "building flanneld needs a C compiler (Debian: gcc)" >&2
    exit 1
  fi
  echo "building flanneld ${FLANNEL_VERSION} (a cold build takes a few minutes)" >&2
  (cd "${root}/hack/tools/flannel" && CGO_ENABLED=1 go build -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=${FLANNEL_VERSION}" \
    -o "${dir}/flanneld" github.com/flannel-io/flannel) &
  pids+=($!)
fi
if [[ ! -x "${dir}/flannel" ]]; then
  echo "building the flannel CNI plugin of containernetworking/plugins ${FLANNEL_CNI_VERSION}" >&2
  (cd "${root}/hack/tools/flannel-cni" && CGO_ENABLED=0 go build -o "${dir}/flannel" \
    github.com/containernetworking/plugins/plugins/meta/flannel) &
  pids+=($!)
fi
if [[ ! -x "${dir}/bridge" ]]; then
  echo "building the CNI plugin bridge ${CNI_PLUGINS_VERSION}" >&2
  (cd "${root}/hack/tools/cni" && go build -o "${dir}/bridge" github.com/containernetworking/plugins/plugins/main/bridge) &
  pids+=($!)
fi
for pid in "${pids[@]}"; do
  wait "${pid}"
done
echo "${dir}"
