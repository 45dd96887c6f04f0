# Shared settings for the hack/ scripts. Sourced, never executed.
K8S_VERSION=v1.37.2
K8S_MINOR=37
ETCD_VERSION=v3.7.3
JUNEAU_CACHE_DIR=${JUNEAU_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/juneau}
JUNEAU_BIN_DIR=${JUNEAU_BIN_DIR:-${JUNEAU_CACHE_DIR}/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}}
export JUNEAU_BIN_DIR
CNI_PLUGINS_VERSION=v1.10.0
JUNEAU_CNI_DIR=${JUNEAU_CNI_DIR:-${JUNEAU_CACHE_DIR}/cni-plugins-${CNI_PLUGINS_VERSION}}
export JUNEAU_CNI_DIR
FLANNEL_VERSION=v0.28.10
FLANNEL_CNI_VERSION=v0.9.1
JUNEAU_FLANNEL_DIR=${JUNEAU_FLANNEL_DIR:-${JUNEAU_CACHE_DIR}/flannel-${FLANNEL_VERSION}-cni-${FLANNEL_CNI_VERSION}}
export JUNEAU_FLANNEL_DIR
HELM_VERSION=v3.22.0
PROMETHEUS_VERSION=v0.316.0
JUNEAU_OPS_DIR=${JUNEAU_OPS_DIR:-${JUNEAU_CACHE_DIR}/ops-helm-${HELM_VERSION}-prometheus-${PROMETHEUS_VERSION}}
export JUNEAU_OPS_DIR
# The tools above are built without debug information: nobody steps through them here, and
# a compiler that skips generating it needs about a fifth less CPU (a cold build of
# k8s.io/client-go/kubernetes on 2 cores: 330 CPU-seconds instead of 412). The linker
# drops what is left (-s -w). Only these scripts source this file; juneau's own binaries
# keep their debug information.
export GOFLAGS="${GOFLAGS:+${GOFLAGS} }-gcflags=all=-dwarf=false"
