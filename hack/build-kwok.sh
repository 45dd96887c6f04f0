#!/usr/bin/env bash
# Builds kwok, which simulates Nodes and the Pods bound to them against a real API server
# (make scale, docs/performance.md#scale), from the Go module proxy into a cache outside
# the repository, only when it is missing. kwok's own go.mod pins its dependencies.
# Prints the directory holding it on the last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"

mkdir -p "${JUNEAU_KWOK_DIR}"
if [[ ! -x "${JUNEAU_KWOK_DIR}/kwok" ]]; then
  echo "building kwok ${KWOK_VERSION} (a cold build takes a few minutes)" >&2
  GOBIN="${JUNEAU_KWOK_DIR}" CGO_ENABLED=0 go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
fi
echo "${JUNEAU_KWOK_DIR}"
