#!/usr/bin/env bash
# Builds the reference CNI plugins the tests, the sandbox and the real cluster use as the
# primary CNI (ptp + host-local; loopback, which container runtimes call for every Pod's
# lo) from the Go module proxy, into a cache outside the repository, only when missing.
# Prints the directory holding them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"

if [[ ! -x "${JUNEAU_CNI_DIR}/ptp" || ! -x "${JUNEAU_CNI_DIR}/host-local" || ! -x "${JUNEAU_CNI_DIR}/loopback" ]]; then
  echo "building CNI plugins ptp, host-local and loopback ${CNI_PLUGINS_VERSION}" >&2
  mkdir -p "${JUNEAU_CNI_DIR}"
  (cd "${root}/hack/tools/cni" && go build -ldflags "-s -w" -o "${JUNEAU_CNI_DIR}/" \
    github.com/containernetworking/plugins/plugins/main/ptp \
    github.com/containernetworking/plugins/plugins/main/loopback \
    github.com/containernetworking/plugins/plugins/ipam/host-local)
fi
echo "${JUNEAU_CNI_DIR}"
