#!/usr/bin/env bash
# Installs Debian packages, only those missing, for one purpose:
#
#   install-test-deps.sh demo     what the real cluster of make demo and make sandbox needs:
#                                 containerd and runc, a static busybox (the shell of the
#                                 images it builds without a registry), and the network
#                                 tools its Nodes use (ip, nft, iptables, conntrack)
#   install-test-deps.sh flannel  the same, and a C compiler to build flanneld
#                                 (hack/build-flannel.sh)
#   install-test-deps.sh [test]   everything make test uses: the above, and the tools of
#                                 the datapath and end-to-end tests (tcpdump, arping,
#                                 ndisc6, iperf3, ...) and the BGP routers they peer with
#
# bird2 and frr are the BGP routers the tests peer with. The tests start their own
# daemons inside network namespaces, with their own configuration, control socket and
# pid files; the system services the packages ship are never started here and are
# disabled, so no router daemon runs in the machine's own network namespace.
set -euo pipefail

purpose=${1:-test}
# The real cluster's (every purpose).
declare -A want=(
  [ip]=iproute2 [nft]=nftables [iptables]=iptables [conntrack]=conntrack
  [containerd]=containerd [ctr]=containerd [runc]=runc [nsenter]=util-linux [unshare]=util-linux
)
# Programs that are not on PATH, by absolute path.
declare -A want_files=()
# Packages checked by name: the binary alone does not say which package provides it
# (busybox-static, not the dynamically linked busybox, goes into images).
want_packages=(busybox-static)
case ${purpose} in
demo) ;;
flannel) want[gcc]=gcc ;;
test)
  want+=(
    [ping]=iputils-ping [arping]=arping [tcpdump]=tcpdump [ethtool]=ethtool
    [traceroute]=traceroute [iperf3]=iperf3 [ncat]=ncat [ndisc6]=ndisc6 [curl]=curl
    [bird]=bird2 [birdc]=bird2 [gcc]=gcc
  )
  # FRR's BFD (the BFD tests) needs bfdd and zebra beside bgpd.
  want_files+=([/usr/lib/frr/bgpd]=frr [/usr/lib/frr/bfdd]=frr [/usr/lib/frr/zebra]=frr [/usr/bin/vtysh]=frr)
  ;;
*)
  echo "usage: $0 [demo|flannel|test]" >&2
  exit 2
  ;;
esac
# System services the packages above may install.
services=(bird frr)

missing=()
for bin in "${!want[@]}"; do
  command -v "${bin}" >/dev/null 2>&1 || missing+=("${want[${bin}]}")
done
for file in "${!want_files[@]}"; do
  [[ -x "${file}" ]] || missing+=("${want_files[${file}]}")
done
for pkg in "${want_packages[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null) == "install ok installed" ]] || missing+=("${pkg}")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) -ne 0 ]]; then
  echo "missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
# The tests start their own containerd, with their own configuration and sockets: the
# machine's service stays off when it comes with the package now (one that was already
# installed is left as it is).
if [[ " ${missing[*]} " == *" containerd "* ]]; then
  services+=(containerd)
fi

# Keep maintainer scripts from starting services during the installation: invoke-rc.d
# and deb-systemd-invoke ask /usr/sbin/policy-rc.d, and exit code 101 means "not now".
# An existing policy is left alone.
policy=/usr/sbin/policy-rc.d
if [[ ! -e "${policy}" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"${policy}"
  chmod 0755 "${policy}"
  trap 'rm -f "${policy}"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Make sure these services stay off (also across reboots).
for svc in "${services[@]}"; do
  if [[ -d /run/systemd/system ]] && systemctl list-unit-files "${svc}.service" >/dev/null 2>&1; then
    systemctl disable --now "${svc}.service" >/dev/null 2>&1 || true
  elif [[ -x "/etc/init.d/${svc}" ]]; then
    "/etc/init.d/${svc}" stop >/dev/null 2>&1 || true
    update-rc.d "${svc}" disable >/dev/null 2>&1 || true
  fi
done
