#!/usr/bin/env bash
# Builds the tools users operate juneau with, from the Go module proxy into a cache
# outside the repository, each only when it is missing: helm (the chart's tests install,
# upgrade, roll back and uninstall with it), prometheus and promtool (the monitoring
# tests scrape the real cluster and check the alert rules). Each comes from a tools
# module of its own (hack/tools/helm, hack/tools/prometheus); the two builds run side by
# side. Prometheus is built with only its Kubernetes service discovery (the build tags
# its plugins/ directory defines), which is all juneau's scrape configuration uses.
# Prints the directory holding them on the last line of stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib.sh
source "${root}/hack/lib.sh"

mkdir -p "${JUNEAU_OPS_DIR}"

build_helm() {
  echo "building helm ${HELM_VERSION}" >&2
  # The Kubernetes version helm assumes without a cluster (helm template, helm lint), as
  # helm's own Makefile sets it from the client-go it builds with: 1.37 here.
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
  ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${K8S_MINOR}"
  ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${K8S_MINOR}"
  (cd "${root}/hack/tools/helm" && go build -ldflags "${ldflags}" -o "${JUNEAU_OPS_DIR}/helm" helm.sh/helm/v3/cmd/helm)
}

build_prometheus() {
  echo "building prometheus and promtool ${PROMETHEUS_VERSION}" >&2
  (cd "${root}/hack/tools/prometheus" && go build -tags remove_all_sd,enable_kubernetes_sd -ldflags "-s -w" \
    -o "${JUNEAU_OPS_DIR}/" github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool)
}

pids=()
if [[ ! -x "${JUNEAU_OPS_DIR}/helm" ]]; then
  build_helm &
  pids+=($!)
fi
if [[ ! -x "${JUNEAU_OPS_DIR}/prometheus" || ! -x "${JUNEAU_OPS_DIR}/promtool" ]]; then
  build_prometheus &
  pids+=($!)
fi
for pid in "${pids[@]}"; do
  wait "${pid}"
done
echo "${JUNEAU_OPS_DIR}"
