#!/usr/bin/env bash
# Copies into the Helm chart what it shares with manifests/: the CRDs (charts/juneau/crds,
# installed by Helm before the templates) and the monitoring assets (charts/juneau/files,
# which the chart's ConfigMaps hold). Helm reads no file outside the chart directory.
# test/chart checks the copies are equal.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rm -f "${root}"/charts/juneau/crds/*.yaml "${root}"/charts/juneau/files/*
cp "${root}"/manifests/crds/*.yaml "${root}/charts/juneau/crds/"
cp "${root}"/manifests/monitoring/* "${root}/charts/juneau/files/"
