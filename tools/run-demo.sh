#!/usr/bin/env bash
# The main job, for now: install, build, regenerate the library's own capture and check it and
# a Linux rxe golden capture with rnic-pcap (ICRC verified) and tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
out=$(mktemp -d /tmp/rnic-demo.XXXXXX)
build/tools/rnic-gen-pcap "$out/wire_all_opcodes.pcap"
echo "== rnic-pcap on frames built by the wire library"
build/tools/rnic-pcap "$out/wire_all_opcodes.pcap"
echo "== tshark's view of the same file"
tshark -r "$out/wire_all_opcodes.pcap" 2>/dev/null | head -n 12
golden=../shared/pcaps-rxe/rxe_rc_pingpong_mtu1024_s4096.pcap
if [[ -f "$golden" ]]; then
  echo "== rnic-pcap on a Linux rxe capture ($golden)"
  build/tools/rnic-pcap "$golden" | head -n 12
  build/tools/rnic-pcap --quiet "$golden"
fi
echo "capture written to $out/wire_all_opcodes.pcap"
