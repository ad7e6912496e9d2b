#!/usr/bin/env bash
# Issue 4's benchmark: between two rnicd on the test bed, through the client library, 64 KiB
# RDMA WRITE bandwidth and 2 B WRITE latency, beside the kernel's raw path on the same veth in
# the same run (iperf3 -u with 4000-byte datagrams; sockperf ping-pong), and the ratios.
#   tools/bench-host.sh [BUILD_DIR]      (default build/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
export RNIC_TESTBED=${RNIC_TESTBED:-rnicbench} RNIC_TESTBED_DIR=${RNIC_TESTBED_DIR:-/tmp/rnicbench}
export RNIC_TESTBED_NET=${RNIC_TESTBED_NET:-10.81.0}
net=$RNIC_TESTBED_NET tb=$here/testbed.sh
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; "$tb" down >/dev/null 2>&1 || true; }
trap cleanup EXIT

# 1. The raw path: kernel addresses on both ends of the same veth, no daemons.
"$tb" up --daemons none >/dev/null
source "$RNIC_TESTBED_DIR/env"
ip -n "$ns_a" addr add "$net.1/24" dev "$if_a"
ip netns exec "$ns_b" iperf3 -s -1 -p 5201 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
iperf_json=$(ip netns exec "$ns_a" timeout 30 iperf3 -c "$net.2" -p 5201 -u -l 4000 -b 0 -t 5 -J)
udp_gbps=$(python3 -c 'import json,sys; e=json.loads(sys.argv[1])["end"]["sum"]; print("%.3f" % (e["bits_per_second"]*(1-e["lost_percent"]/100)/1e9))' "$iperf_json")
ip netns exec "$ns_b" sockperf server -i "$net.2" -p 11111 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
sp=$(ip netns exec "$ns_a" timeout 30 sockperf ping-pong -i "$net.2" -p 11111 -t 5 -m 14 2>&1)
udp_lat=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp")
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()
"$tb" down >/dev/null

# 2. The RNIC path: two busy-polling rnicd, the client library between them.
"$tb" up --daemons both --busy-poll --rnicd "$build/emulator/daemon/rnicd" >/dev/null
out=$("$build/tests/integration/host_integration" "[.bench]" 2>&1) || { echo "$out"; exit 1; }
"$tb" down >/dev/null
rnic_gbps=$(sed -n 's/^BENCH write_64k_gbps \([0-9.]*\).*/\1/p' <<<"$out")
rnic_lat=$(sed -n 's/^BENCH write_2b_rtt_median_us [0-9.]* one_way_us \([0-9.]*\).*/\1/p' <<<"$out")
grep '^BENCH' <<<"$out"
python3 - "$udp_gbps" "$udp_lat" "$rnic_gbps" "$rnic_lat" <<'PY'
import sys
udp_gbps, udp_lat, rnic_gbps, rnic_lat = map(float, sys.argv[1:])
print(f"raw path:   kernel UDP goodput {udp_gbps:.2f} Gb/s (iperf3 -u -l 4000), one-way latency {udp_lat:.1f} us median (sockperf ping-pong)")
print(f"rnic path:  64 KiB RDMA WRITE {rnic_gbps:.2f} Gb/s, 2 B WRITE one-way {rnic_lat:.1f} us median (half the round trip)")
print(f"ratios:     bandwidth {rnic_gbps / udp_gbps:.2f}x kernel UDP, latency {rnic_lat / udp_lat:.2f}x sockperf")
PY
