#!/usr/bin/env bash
# The CM exchanges the wire library builds (rnic-gen-pcap --cm: every CM message, REJs, SIDR,
# ClassPortInfo, IPv4 and IPv6) decode in tshark as InfiniBand CM, with no malformed or expert
# marks, to the values rnic-pcap reports. Usage: check_cm_sample.sh RNIC_GEN_PCAP RNIC_PCAP PYTHON
set -euo pipefail
gen=$1 rnic_pcap=$2 python=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$gen" --cm "$tmp/cm.pcap"
"$python" "$(dirname "$0")/check_tshark_decode.py" "$rnic_pcap" "$tmp/cm.pcap" --min-frames 23 --min-cm 21
