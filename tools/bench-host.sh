#!/usr/bin/env bash
# Issue 4's benchmark. Between two rnicd on the test bed (veth, MTU 9000, af_packet), in both
# polling modes (default adaptive, and --busy-poll): 64 KiB RDMA WRITE bandwidth and 2 B WRITE
# latency, beside the kernel's raw path on the same veth in the same run (iperf3 -u with
# 4000-byte datagrams; sockperf ping-pong), with both ratios; and each daemon's idle CPU.
#
#   tools/bench-host.sh [BUILD_DIR]      (default build/)
#
# The RNIC figures come from Debian's perftest through our libibverbs.so.1 (rnic-run):
# ib_write_bw -s 65536, ib_send_bw -s 65536 and ib_write_lat -s 2, both processes spinning as
# perftest does; and from the client-library benchmark (tests/integration/bench_host.cpp), which
# needs neither perftest nor the shim. Latency is one-way: perftest's t_typical and sockperf's
# median are both half the round trip. Every step is bounded by `timeout`; the test bed is
# taken down on exit. Environment: BENCH_SECONDS (per bandwidth/raw step, default 4),
# BENCH_MODES (default "adaptive busy-poll"), RNIC_TESTBED* as for tools/testbed.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
export RNIC_TESTBED=${RNIC_TESTBED:-rnicbench} RNIC_TESTBED_DIR=${RNIC_TESTBED_DIR:-/tmp/rnicbench}
export RNIC_TESTBED_NET=${RNIC_TESTBED_NET:-10.81.0}
secs=${BENCH_SECONDS:-4}
modes=${BENCH_MODES:-adaptive busy-poll}
net=$RNIC_TESTBED_NET tb=$here/testbed.sh state=$RNIC_TESTBED_DIR
rnicd=$build/emulator/daemon/rnicd rnic_run=$build/verbs_shim/rnic-run bench=$build/tests/integration/host_integration
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    "$tb" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
[[ -x $rnicd && -x $bench ]] || { echo "bench-host: build first ($rnicd, $bench)" >&2; exit 2; }
perftest=0
[[ -x /usr/bin/ib_write_lat && -x $rnic_run ]] && perftest=1
load() { cut -d' ' -f1 /proc/loadavg; }
echo "bench-host: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(load) at start"

# 1. The raw path: kernel addresses on both ends of the same veth, no daemons.
"$tb" up --daemons none >/dev/null
source "$state/env"
ip -n "$ns_a" addr add "$net.1/24" dev "$if_a"
ip netns exec "$ns_b" timeout $((secs + 30)) iperf3 -s -1 -p 5201 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
iperf_json=$(ip netns exec "$ns_a" timeout $((secs + 20)) iperf3 -c "$net.2" -p 5201 -u -l 4000 -b 0 -t "$secs" -J)
udp_gbps=$(python3 -c 'import json,sys; e=json.loads(sys.argv[1])["end"]["sum"]; print("%.3f" % (e["bits_per_second"]*(1-e["lost_percent"]/100)/1e9))' "$iperf_json")
ip netns exec "$ns_b" timeout $((secs + 30)) sockperf server -i "$net.2" -p 11111 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
sp=$(ip netns exec "$ns_a" timeout $((secs + 20)) sockperf ping-pong -i "$net.2" -p 11111 -t "$secs" -m 14 2>&1)
udp_lat=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp")
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()
"$tb" down >/dev/null
echo "raw path:   kernel UDP goodput $udp_gbps Gb/s (iperf3 -u -l 4000 -t $secs), one-way $udp_lat us median (sockperf ping-pong -m 14), load $(load)"

# Runs one perftest pair in namespace A (TCP set-up over its loopback): server on rnic0, client
# on rnic1; prints the client's result line.
perftest_pair() {
    local limit=$1 port=$((18515 + RANDOM % 1000))
    shift
    ip netns exec "$ns_a" timeout "$limit" "$rnic_run" --run-dir "$state/run" "$@" -x 0 -F -p "$port" -d rnic0 \
        >"$state/perftest-server.txt" 2>&1 &
    pids=($!)
    sleep 0.5
    ip netns exec "$ns_a" timeout "$limit" "$rnic_run" --run-dir "$state/run" "$@" -x 0 -F -p "$port" -d rnic1 127.0.0.1 \
        >"$state/perftest-client.txt" 2>&1 || true
    wait "${pids[0]}" 2>/dev/null || true
    pids=()
    grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$state/perftest-client.txt" | tail -1
}

# Each daemon's CPU over 5 s on an idle test bed (sum_exec_runtime, exact), % of one core.
idle_cpu() {
    local a b a0 b0 a1 b1 t0 t1
    a=$(cat "$state/rnicd-a.pid") b=$(cat "$state/rnicd-b.pid")
    sleep 1
    a0=$(cut -d' ' -f1 "/proc/$a/schedstat") b0=$(cut -d' ' -f1 "/proc/$b/schedstat") t0=$(date +%s%N)
    sleep 5
    a1=$(cut -d' ' -f1 "/proc/$a/schedstat") b1=$(cut -d' ' -f1 "/proc/$b/schedstat") t1=$(date +%s%N)
    python3 -c "import sys; a0,a1,b0,b1,t0,t1=map(int,sys.argv[1:]); print('%.2f%% and %.2f%%' % (100*(a1-a0)/(t1-t0), 100*(b1-b0)/(t1-t0)))" \
        "$a0" "$a1" "$b0" "$b1" "$t0" "$t1"
}

results=()
for mode in $modes; do
    flags=()
    [[ $mode == busy-poll ]] && flags=(--busy-poll)
    "$tb" up --daemons both --one-run-dir "${flags[@]}" --rnicd "$rnicd" >/dev/null
    source "$state/env"
    idle=$(idle_cpu)
    wbw=- sbw=- wlat=- lat_p99=-
    if ((perftest)); then
        wbw=$(perftest_pair $((secs + 40)) ib_write_bw -s 65536 -D "$secs" --report_gbits | awk '{print $4}')
        sbw=$(perftest_pair $((secs + 40)) ib_send_bw -s 65536 -D "$secs" --report_gbits | awk '{print $4}')
        # Four spinners (two daemons, two perftest processes) on two cores make --busy-poll slow:
        # fewer iterations keep it bounded.
        iters=5000
        [[ $mode == busy-poll ]] && iters=300
        line=$(perftest_pair 90 ib_write_lat -s 2 -n "$iters")
        wlat=$(awk '{print $5}' <<<"$line") lat_p99=$(awk '{print $8}' <<<"$line")
    fi
    cbw=$(RNIC_BENCH=bandwidth timeout 60 "$bench" "[.bench]" 2>&1 | sed -n 's/^BENCH write_64k_gbps \([0-9.]*\).*/\1/p' || true)
    clat=$(RNIC_BENCH=latency timeout 90 "$bench" "[.bench]" 2>&1 | sed -n 's/^BENCH write_2b_rtt_median_us [0-9.]* one_way_us \([0-9.]*\).*/\1/p' || true)
    "$tb" down >/dev/null
    echo "rnic path ($mode): ib_write_bw 64 KiB ${wbw:--} Gb/s, ib_send_bw 64 KiB ${sbw:--} Gb/s, ib_write_lat 2 B one-way ${wlat:--} us median (p99 ${lat_p99:--}); client library: WRITE 64 KiB ${cbw:--} Gb/s, 2 B one-way ${clat:--} us; idle CPU of the two daemons $idle; load $(load)"
    results+=("$mode ${wbw:--} ${wlat:--} ${cbw:--} ${clat:--}")
done

python3 - "$udp_gbps" "$udp_lat" "${results[@]}" <<'PY'
import sys
udp_gbps, udp_lat = float(sys.argv[1]), float(sys.argv[2])
def ratio(x, base):
    try:
        v = float(x)
    except ValueError:
        return "-"
    return f"{v / base:.2f}x"
for r in sys.argv[3:]:
    mode, wbw, wlat, cbw, clat = r.split()
    print(f"ratios ({mode}): bandwidth {ratio(wbw, udp_gbps)} kernel UDP (perftest), {ratio(cbw, udp_gbps)} (client library); "
          f"latency {ratio(wlat, udp_lat)} sockperf (perftest), {ratio(clat, udp_lat)} (client library)")
print("targets: bandwidth >= 1.00x, latency <= 1.50x")
PY
