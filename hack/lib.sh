# Shared settings for the hack/ scripts. Sourced, never executed.
K8S_VERSION=v1.37.2
K8S_MINOR=37
ETCD_VERSION=v3.7.3
JUNEAU_CACHE_DIR=${JUNEAU_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/juneau}
JUNEAU_BIN_DIR=${JUNEAU_BIN_DIR:-${JUNEAU_CACHE_DIR}/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}}
export JUNEAU_BIN_DIR
