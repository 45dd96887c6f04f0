#!/usr/bin/env bash
# Installs the Debian packages the datapath and end-to-end tests use, only when missing.
set -euo pipefail

declare -A want=(
  [ip]=iproute2 [ping]=iputils-ping [arping]=arping [tcpdump]=tcpdump
  [conntrack]=conntrack [nft]=nftables [ethtool]=ethtool [traceroute]=traceroute
  [iptables]=iptables [iperf3]=iperf3 [ncat]=ncat
)
missing=()
for bin in "${!want[@]}"; do
  command -v "${bin}" >/dev/null 2>&1 || missing+=("${want[${bin}]}")
done
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
