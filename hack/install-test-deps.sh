#!/usr/bin/env bash
# Installs the Debian packages the datapath, end-to-end and real-cluster tests use, only
# when missing: network tools, and for the real cluster containerd, runc and a static
# busybox (the shell of the images the cluster builds without a registry).
set -euo pipefail

declare -A want=(
  [ip]=iproute2 [ping]=iputils-ping [arping]=arping [tcpdump]=tcpdump
  [conntrack]=conntrack [nft]=nftables [ethtool]=ethtool [traceroute]=traceroute
  [iptables]=iptables [iperf3]=iperf3 [ncat]=ncat
  [containerd]=containerd [ctr]=containerd [runc]=runc
)
# Packages checked by name: the binary alone does not say which package provides it
# (busybox-static, not the dynamically linked busybox, goes into images).
packages=(busybox-static)

missing=()
for bin in "${!want[@]}"; do
  command -v "${bin}" >/dev/null 2>&1 || missing+=("${want[${bin}]}")
done
for pkg in "${packages[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null) == "install ok installed" ]] || missing+=("${pkg}")
done
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | grep .)
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The tests start their own containerd with their own configuration and sockets; on a
# systemd host, the service the package just enabled would only sit there.
if [[ " ${missing[*]} " == *" containerd "* && -d /run/systemd/system ]]; then
  systemctl disable --now containerd.service >/dev/null 2>&1 || true
fi
