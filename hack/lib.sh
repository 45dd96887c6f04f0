# Shared settings for the hack/ scripts. Sourced, never executed.
K8S_VERSION=v1.37.2
K8S_MINOR=37
ETCD_VERSION=v3.7.3
JUNEAU_CACHE_DIR=${JUNEAU_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/juneau}
JUNEAU_BIN_DIR=${JUNEAU_BIN_DIR:-${JUNEAU_CACHE_DIR}/kube-${K8S_VERSION}-etcd-${ETCD_VERSION}}
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
KWOK_VERSION=v0.8.0
JUNEAU_KWOK_DIR=${JUNEAU_KWOK_DIR:-${JUNEAU_CACHE_DIR}/kwok-${KWOK_VERSION}}
export JUNEAU_KWOK_DIR
# The tools above, and the binaries hack/deps.sh builds for make demo and make test, are
# compiled alike, so that what they share is compiled once on a fresh machine: the
# standard library, and k8s.io/api, apimachinery and client-go, of which the juneau
# binaries are mostly made (hack/tools/k8s/go.mod requires the versions juneau's go.mod
# selects, and the reverse, for every module both builds compile). Alike means:
#   - without debug information: nobody steps through them here, and a compiler that skips
#     generating it needs about a fifth less CPU (a cold build of
#     k8s.io/client-go/kubernetes on 2 cores: 330 CPU-seconds instead of 412); the linker
#     drops what is left (-s -w). Panics still print file and line;
#   - statically linked (CGO_ENABLED=0), as juneau must be (it is also the CNI plugin, in
#     images without a C library) and as Kubernetes builds its release binaries (kubelet
#     aside; it runs here without cgo, with Go's own resolver). flanneld alone sets
#     CGO_ENABLED=1 (hack/build-flannel.sh).
case " ${GOFLAGS:-} " in
*" -gcflags=all=-dwarf=false "*) ;;
*) export GOFLAGS="${GOFLAGS:+${GOFLAGS} }-gcflags=all=-dwarf=false" ;;
esac
export CGO_ENABLED=0
