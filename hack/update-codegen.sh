#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis: deepcopy, register, OpenAPI, the typed
# clientset (with watch and apply configurations), listers, informers and the CRD YAML.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${root}"
module=github.com/loutres/juneau
boilerplate="${root}/hack/boilerplate.go.txt"

# `go list -m` prints nothing for a module that is not in the module cache yet (a fresh
# machine), so download the generator's module first.
codegen_root=$(cd hack/tools/codegen && go mod download k8s.io/code-generator && go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z "${codegen_root}" || ! -f "${codegen_root}/kube_codegen.sh" ]]; then
  echo "k8s.io/code-generator not found in the module cache (hack/tools/codegen)" >&2
  exit 1
fi
export GOBIN="${JUNEAU_CODEGEN_BIN:-${root}/_output/codegen-bin}"
mkdir -p "${GOBIN}"
# shellcheck source=/dev/null
source "${codegen_root}/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "${boilerplate}" pkg/apis
kube::codegen::gen_register --boilerplate "${boilerplate}" pkg/apis

kube::codegen::gen_openapi \
  --output-dir pkg/generated/openapi \
  --output-pkg "${module}/pkg/generated/openapi" \
  --report-filename hack/api-violations.list \
  --update-report \
  --boilerplate "${boilerplate}" \
  pkg/apis

mkdir -p "${root}/_output"
schema="${root}/_output/openapi-schema.json"
go run ./hack/openapi-schema > "${schema}"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema "${schema}" \
  --output-dir pkg/generated \
  --output-pkg "${module}/pkg/generated" \
  --boilerplate "${boilerplate}" \
  pkg/apis

# CRDs from the types' markers; controller-gen is only a generator here.
(cd hack/tools/codegen && go build -o "${GOBIN}/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
rm -f manifests/crds/*.yaml
"${GOBIN}/controller-gen" crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config=manifests/crds

# The chart's copies of the CRDs and of the monitoring assets.
hack/update-chart.sh
