#!/usr/bin/env bash
# Fails when generated code or CRDs are stale: regenerates into a scratch copy of the
# repository and compares it with the checked-in files.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d -t juneau-verify-XXXXXX)
trap 'rm -rf "${scratch}"' EXIT

tar -C "${root}" --exclude=./.git --exclude=./_output --exclude=./bin -cf - . | tar -C "${scratch}" -xf -
export JUNEAU_CODEGEN_BIN="${root}/_output/codegen-bin"
(cd "${scratch}" && hack/update-codegen.sh >/dev/null)

status=0
for path in pkg/apis/juneau/v1alpha1 pkg/generated manifests/crds charts/juneau/crds charts/juneau/files hack/api-violations.list; do
  if ! diff -ruN "${root}/${path}" "${scratch}/${path}"; then
    status=1
  fi
done
if ((status != 0)); then
  echo "generated files are stale: run hack/update-codegen.sh (make generate)" >&2
  exit 1
fi
echo "generated files are up to date"
