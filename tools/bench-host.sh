#!/usr/bin/env bash
# The benchmarks of issues 4 and 5: between two rnicd on the test bed (veth, MTU 9000,
# af_packet), 64 KiB RDMA WRITE and SEND bandwidth and 2 B WRITE latency, beside the kernel's raw
# path on the same veth (iperf3 -u with 4000-byte datagrams; sockperf ping-pong), with ratios.
#
#   tools/bench-host.sh [BUILD_DIR]      (default build/)
#
# Timings on a shared 2-core VM wander by 2-5x within minutes, the kernel's as much as ours, so
# the raw path and the RNIC path are measured in turns: raw, rnic, raw, rnic ... (BENCH_REPS
# rounds, default 3), each round's ratio taken against the raw figures measured just before it,
# and the medians of both reported. The RNIC figures come from Debian's perftest through our
# libibverbs.so.1 (rnic-run): ib_write_bw and ib_send_bw -s 65536, ib_write_lat -s 2, both
# processes spinning as perftest does; and from the client-library benchmark
# (tests/integration/bench_host.cpp), which needs neither perftest nor the shim. Latency is
# one-way: perftest's t_typical and sockperf's median are half the round trip. Kernel UDP
# goodput is what iperf3's receiver got. Each daemon's idle CPU is measured in the first round;
# --busy-poll is measured once at the end (BENCH_BUSY_POLL=0 skips it). Every step is bounded
# by `timeout`; the test bed is taken down on exit. Environment: BENCH_SECONDS (per bandwidth /
# raw step, default 4), BENCH_REPS, RNIC_TESTBED* as for tools/testbed.sh (both daemons share a
# home core outside streams unless RNIC_TESTBED_HOME_CPU=none; not in the --busy-poll round).
#
# Message rate (issue 16): each round then measures the raw packet rate of the port with
# tools/port-rate.sh (our DPDK sender and receiver, 64 B WRITE payloads, the PMD and veth the
# daemons use) and ib_write_bw -s 64 between two rnicd with 1 and with 16 QPs (-D BENCH_SECONDS),
# each as M msg/s and as a ratio to that round's raw rate. BENCH_MSGRATE=0 skips it.
#
# Ping-pong (issue 16): each round then measures sockperf's one-way latency with a busy-polling
# client (--nonblocked), a TCP ping-pong of 4 KiB (sockperf --tcp -m 4096: its round trip is twice
# the one-way median), and Debian's ibv_rc_pingpong -s 4096 between two rnicd (its usec/iter is a
# round trip: a 4 KiB SEND each way), with the ratio of the last to the TCP round trip.
# BENCH_PINGPONG=0 skips it.
#
# BENCH_PMD=af_xdp runs every step on DPDK's af_xdp PMD instead of af_packet, the raw path on
# the same veth: testbed.sh --pmd af_xdp gives it 3500 bytes (RoCE MTU 2048; docs/daemon.md), so
# iperf3 sends 3400-byte datagrams and the client-library benchmark, which asks for path MTU
# 4096, prints "-".
#
# BENCH_PMD=ring runs every step with rnicd's own TPACKET ring port (rnicd --ring-port) on the
# same 9000-byte veth, and the raw packet rate through that port (tools/port-rate.sh --pmd ring).
#
# BENCH_SHORT=1 is the form CI runs (tests/bench/check_bench_scripts.py): one round, 1 s steps,
# fewer latency iterations, no --busy-poll round: every figure line printed, nothing judged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
export RNIC_TESTBED=${RNIC_TESTBED:-rnicbench} RNIC_TESTBED_DIR=${RNIC_TESTBED_DIR:-/tmp/rnicbench}
export RNIC_TESTBED_NET=${RNIC_TESTBED_NET:-10.81.0}
short=${BENCH_SHORT:-0}
if ((short)); then
    secs=${BENCH_SECONDS:-1} reps=${BENCH_REPS:-1} busy_round=${BENCH_BUSY_POLL:-0} lat_iters=1000 idle_secs=2 pp_iters=200
else
    secs=${BENCH_SECONDS:-4} reps=${BENCH_REPS:-3} busy_round=${BENCH_BUSY_POLL:-1} lat_iters=5000 idle_secs=5 pp_iters=2000
fi
msgrate=${BENCH_MSGRATE:-1}
pmd=${BENCH_PMD:-af_packet}
[[ $pmd =~ ^(af_packet|af_xdp|ring)$ ]] || { echo "bench-host: BENCH_PMD wants af_packet, af_xdp or ring" >&2; exit 2; }
udp_len=4000  # datagrams that fit the veth unfragmented: 9000 bytes, or 3500 with af_xdp
[[ $pmd == af_xdp ]] && udp_len=3400
pingpong=${BENCH_PINGPONG:-1}
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
echo "bench-host: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(load) at start, $reps rounds, $pmd," \
     "home core of the daemons: ${RNIC_TESTBED_HOME_CPU:-the first CPU, testbed.sh default}"

# Waits (at most 10 s) until something in namespace $1 listens on TCP port $2.
wait_listen() {
    for _ in $(seq 100); do
        ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
        sleep 0.1
    done
    return 1
}

# The raw path: kernel addresses on both ends of the same veth, no daemons. Prints
# "<goodput Gb/s> <one-way us>".
raw_path() {
    "$tb" up --daemons none --pmd "$pmd" >/dev/null
    source "$state/env"
    ip -n "$ns_a" addr add "$net.1/24" dev "$if_a"
    ip netns exec "$ns_b" timeout $((secs + 30)) iperf3 -s -1 -p 5201 >/dev/null 2>&1 & pids+=($!)
    wait_listen "$ns_b" 5201
    local iperf_json sp gbps lat
    iperf_json=$(ip netns exec "$ns_a" timeout $((secs + 20)) iperf3 -c "$net.2" -p 5201 -u -l "$udp_len" -b 0 -t "$secs" -J)
    gbps=$(python3 -c '
import json, sys
end = json.loads(sys.argv[1])["end"]
if "sum_received" in end:  # iperf >= 3.11: what the receiver got
    bps = end["sum_received"]["bits_per_second"]
else:
    bps = end["sum"]["bits_per_second"] * (1 - end["sum"]["lost_percent"] / 100)
print("%.3f" % (bps / 1e9))' "$iperf_json")
    ip netns exec "$ns_b" timeout $((secs + 30)) sockperf server -i "$net.2" -p 11111 >/dev/null 2>&1 & pids+=($!)
    sleep 0.5  # sockperf's UDP server has no listening state to wait for
    sp=$(ip netns exec "$ns_a" timeout $((secs + 20)) sockperf ping-pong -i "$net.2" -p 11111 -t "$secs" -m 14 2>&1)
    lat=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp")
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pids=()
    "$tb" down >/dev/null
    echo "$gbps ${lat:--}"
}

# One perftest pair in namespace A (TCP set-up over its loopback): server on rnic0, client on
# rnic1; prints the client's result line.
perftest_pair() {
    local limit=$1 port=$((18515 + RANDOM % 1000))
    shift
    ip netns exec "$ns_a" timeout "$limit" "$rnic_run" --run-dir "$state/run" "$@" -x 0 -F -p "$port" -d rnic0 \
        >"$state/perftest-server.txt" 2>&1 &
    pids=($!)
    wait_listen "$ns_a" "$port" || true
    ip netns exec "$ns_a" timeout "$limit" "$rnic_run" --run-dir "$state/run" "$@" -x 0 -F -p "$port" -d rnic1 127.0.0.1 \
        >"$state/perftest-client.txt" 2>&1 || true
    wait "${pids[0]}" 2>/dev/null || true
    pids=()
    grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$state/perftest-client.txt" | tail -1
}

# Each daemon's CPU over $idle_secs s on an idle test bed (sum_exec_runtime, exact), % of one core.
idle_cpu() {
    local a b a0 b0 a1 b1 t0 t1
    a=$(cat "$state/rnicd-a.pid") b=$(cat "$state/rnicd-b.pid")
    sleep 1
    a0=$(cut -d' ' -f1 "/proc/$a/schedstat") b0=$(cut -d' ' -f1 "/proc/$b/schedstat") t0=$(date +%s%N)
    sleep "$idle_secs"
    a1=$(cut -d' ' -f1 "/proc/$a/schedstat") b1=$(cut -d' ' -f1 "/proc/$b/schedstat") t1=$(date +%s%N)
    python3 -c "import sys; a0,a1,b0,b1,t0,t1=map(int,sys.argv[1:]); print('%.2f%%,%.2f%%' % (100*(a1-a0)/(t1-t0), 100*(b1-b0)/(t1-t0)))" \
        "$a0" "$a1" "$b0" "$b1" "$t0" "$t1"
}

# The RNIC path in one polling mode. Prints "<write Gb/s> <send Gb/s> <write_lat us> <p99 us>
# <client-lib Gb/s> <client-lib us> <idle CPU a,b>" ("-" for what was not measured).
rnic_path() {
    local mode=$1 measure_idle=$2 flags=() idle=- wbw=- sbw=- wlat=- p99=- cbw cl iters line
    [[ $mode == busy-poll ]] && flags=(--busy-poll)
    "$tb" up --daemons both --one-run-dir --pmd "$pmd" "${flags[@]}" --rnicd "$rnicd" >/dev/null
    source "$state/env"
    ((measure_idle)) && idle=$(idle_cpu)
    if ((perftest)); then
        wbw=$(perftest_pair $((secs + 40)) ib_write_bw -s 65536 -D "$secs" --report_gbits | awk '{print $4}')
        sbw=$(perftest_pair $((secs + 40)) ib_send_bw -s 65536 -D "$secs" --report_gbits | awk '{print $4}')
        # Four spinners (two daemons, two perftest processes) on two cores make --busy-poll slow:
        # fewer iterations keep it bounded.
        iters=$lat_iters
        [[ $mode == busy-poll ]] && iters=300
        line=$(perftest_pair 90 ib_write_lat -s 2 -n "$iters")
        wlat=$(awk '{print $5}' <<<"$line") p99=$(awk '{print $8}' <<<"$line")
    fi
    cbw=$(RNIC_BENCH=bandwidth timeout 60 "$bench" "[.bench]" 2>&1 | sed -n 's/^BENCH write_64k_gbps \([0-9.]*\).*/\1/p' || true)
    cl=$(RNIC_BENCH=latency timeout 90 "$bench" "[.bench]" 2>&1 | sed -n 's/^BENCH write_2b_rtt_median_us [0-9.]* one_way_us \([0-9.]*\).*/\1/p' || true)
    "$tb" down >/dev/null
    echo "${wbw:--} ${sbw:--} ${wlat:--} ${p99:--} ${cbw:--} ${cl:--} ${idle:--}"
}

# The message rate: the port's raw packet rate (port_rate, 64 B payloads, on a bed of its own),
# then ib_write_bw -s 64 with 1 and 16 QPs between two rnicd. Prints "<raw tx pps> <raw rx pps>
# <raw lost> <1 QP Mpps> <16 QPs Mpps>" ("-" for what was not measured).
msgrate_path() {
    local line tx=- rx=- lost=- q1=- q16=-
    line=$("$here/port-rate.sh" --size 64 --seconds "$secs" --pmd "$pmd" "$build" 2>&1 | grep '^port-rate: ' || true)
    if [[ -n $line ]]; then
        tx=$(sed -n 's/.* tx_pps=\([^ ]*\).*/\1/p' <<<"$line") rx=$(sed -n 's/.* rx_pps=\([^ ]*\).*/\1/p' <<<"$line")
        lost=$(sed -n 's/.* lost=\([^ ]*\).*/\1/p' <<<"$line")
    fi
    if ((perftest)); then
        "$tb" up --daemons both --one-run-dir --pmd "$pmd" --rnicd "$rnicd" >/dev/null
        source "$state/env"
        q1=$(perftest_pair $((secs + 40)) ib_write_bw -s 64 -q 1 -D "$secs" --report_gbits | awk '{print $5}')
        q16=$(perftest_pair $((secs + 40)) ib_write_bw -s 64 -q 16 -D "$secs" --report_gbits | awk '{print $5}')
        "$tb" down >/dev/null
    fi
    echo "${tx:--} ${rx:--} ${lost:--} ${q1:--} ${q16:--}"
}

# Ping-pong: the kernel's (busy-polling sockperf UDP, TCP 4 KiB) on the veth with kernel
# addresses, then ibv_rc_pingpong 4 KiB between two rnicd. Prints "<busy one-way us> <TCP 4 KiB
# round trip us> <rc_pingpong us/iter>".
pingpong_path() {
    local busy=- tcp=- rc=- sp port
    "$tb" up --daemons none --pmd "$pmd" >/dev/null
    source "$state/env"
    ip -n "$ns_a" addr add "$net.1/24" dev "$if_a"
    ip netns exec "$ns_b" timeout $((secs + 30)) sockperf server -i "$net.2" -p 11111 >/dev/null 2>&1 & pids+=($!)
    ip netns exec "$ns_b" timeout $((2 * secs + 40)) sockperf server --tcp -i "$net.2" -p 11112 >/dev/null 2>&1 & pids+=($!)
    wait_listen "$ns_b" 11112 || true
    sp=$(ip netns exec "$ns_a" timeout $((secs + 20)) sockperf ping-pong --nonblocked -i "$net.2" -p 11111 -t "$secs" -m 14 2>&1 || true)
    busy=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp")
    sp=$(ip netns exec "$ns_a" timeout $((secs + 20)) sockperf ping-pong --tcp -i "$net.2" -p 11112 -t "$secs" -m 4096 2>&1 || true)
    tcp=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' <<<"$sp")
    [[ -n $tcp ]] && tcp=$(python3 -c "print('%.2f' % (2 * float('$tcp')))")
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pids=()
    "$tb" down >/dev/null
    if ((perftest)); then
        "$tb" up --daemons both --one-run-dir --pmd "$pmd" --rnicd "$rnicd" >/dev/null
        source "$state/env"
        port=$((18515 + RANDOM % 1000))
        ip netns exec "$ns_a" timeout 90 "$rnic_run" --run-dir "$state/run" ibv_rc_pingpong -g 0 -s 4096 \
            -n "$pp_iters" -p "$port" -d rnic0 >"$state/pingpong-server.txt" 2>&1 &
        pids=($!)
        wait_listen "$ns_a" "$port" || true
        ip netns exec "$ns_a" timeout 90 "$rnic_run" --run-dir "$state/run" ibv_rc_pingpong -g 0 -s 4096 \
            -n "$pp_iters" -p "$port" -d rnic1 127.0.0.1 >"$state/pingpong-client.txt" 2>&1 || true
        wait "${pids[0]}" 2>/dev/null || true
        pids=()
        rc=$(sed -n 's/.* = *\([0-9.]*\) usec\/iter.*/\1/p' "$state/pingpong-client.txt" | tail -1)
        "$tb" down >/dev/null
    fi
    echo "${busy:--} ${tcp:--} ${rc:--}"
}

# "1.23x": $1 against $2; "-" when either is missing.
ratio() {
    python3 -c 'import sys
try:
    print("%.2fx" % (float(sys.argv[1]) / float(sys.argv[2])))
except (ValueError, ZeroDivisionError):
    print("-")' "$1" "$2"
}

# "1.23x": $1 (Mpps) against $2 (pps); "-" when either is missing.
msg_ratio() {
    python3 -c 'import sys
try:
    print("%.2fx" % (float(sys.argv[1]) * 1e6 / float(sys.argv[2])))
except (ValueError, ZeroDivisionError):
    print("-")' "$1" "$2"
}

rounds=() msg_rounds=() pp_rounds=()
for ((r = 1; r <= reps; r++)); do
    raw=$(raw_path)
    echo "round $r raw path:   kernel UDP goodput $(cut -d' ' -f1 <<<"$raw") Gb/s (iperf3 -u -l $udp_len -t $secs)," \
         "one-way $(cut -d' ' -f2 <<<"$raw") us median (sockperf ping-pong -m 14), load $(load)"
    rnic=$(rnic_path adaptive $((r == 1)))
    read -r wbw sbw wlat p99 cbw cl idle <<<"$rnic"
    echo "round $r rnic path:  ib_write_bw 64 KiB $wbw Gb/s, ib_send_bw 64 KiB $sbw Gb/s, ib_write_lat 2 B one-way" \
         "$wlat us median (p99 $p99); client library: WRITE 64 KiB $cbw Gb/s, 2 B one-way $cl us;" \
         "idle CPU of the two daemons ${idle/,/ and }; load $(load)"
    rounds+=("$raw $rnic")
    if ((msgrate)); then
        read -r mtx mrx mlost q1 q16 <<<"$(msgrate_path)"
        echo "round $r message rate: port_rate 64 B raw $mrx pps received ($mtx pps sent, $mlost lost);" \
             "ib_write_bw 64 B 1 QP $q1 M msg/s ($(msg_ratio "$q1" "$mrx") raw), 16 QPs $q16 M msg/s" \
             "($(msg_ratio "$q16" "$mrx") raw); load $(load)"
        msg_rounds+=("$mtx $mrx $mlost $q1 $q16")
    fi
    if ((pingpong)); then
        read -r ppbusy pptcp pprc <<<"$(pingpong_path)"
        echo "round $r ping-pong: sockperf one-way $ppbusy us median with a busy-polling client (--nonblocked);" \
             "TCP 4 KiB round trip $pptcp us (sockperf --tcp -m 4096); ibv_rc_pingpong 4 KiB $pprc us per iteration" \
             "($(ratio "$pprc" "$pptcp") TCP); load $(load)"
        pp_rounds+=("$ppbusy $pptcp $pprc")
    fi
done
busy=-
if ((busy_round)); then
    busy=$(rnic_path busy-poll 1)
    read -r wbw sbw wlat p99 cbw cl idle <<<"$busy"
    echo "busy-poll rnic path: ib_write_bw 64 KiB $wbw Gb/s, ib_send_bw 64 KiB $sbw Gb/s, ib_write_lat 2 B one-way" \
         "$wlat us median (p99 $p99); client library: WRITE 64 KiB $cbw Gb/s, 2 B one-way $cl us;" \
         "idle CPU of the two daemons ${idle/,/ and }; load $(load)"
fi

# Where the time goes: one more adaptive round with --latency-trace (clients stamp doorbells and
# kicks, a clock read each, so it is not one of the measured rounds), then each daemon's per-hop
# histograms (docs/benchmarks.md, "Where the time goes"). BENCH_TRACE=0 skips it.
if ((${BENCH_TRACE:-1} && perftest)); then
    "$tb" up --daemons both --one-run-dir --pmd "$pmd" --rnicd "$rnicd" -- --latency-trace >/dev/null
    source "$state/env"
    line=$(perftest_pair 90 ib_write_lat -s 2 -n "$lat_iters")
    echo "traced round: ib_write_lat 2 B one-way $(awk '{print $5}' <<<"$line") us median (p99 $(awk '{print $8}' <<<"$line")), load $(load)"
    for dev in rnic0 rnic1; do
        echo "  $dev hops (us):"
        "$build/tools/rnicctl" --run-dir "$run_dir" -d "$dev" latency | sed 's/^/    /' || true
        "$build/tools/rnicctl" --run-dir "$run_dir" -d "$dev" stat | grep -E '^ *loop_(naps|woken_by|last_look|turns)' | sed 's/^ */    /' || true
    done
    "$tb" down >/dev/null
fi

PP_ROUNDS=$(IFS=';'; echo "${pp_rounds[*]}") MSG_ROUNDS=$(IFS=';'; echo "${msg_rounds[*]}") python3 - "$busy" "${rounds[@]}" <<'PY'
import os
import statistics
import sys

def num(x):
    try:
        return float(x)
    except ValueError:
        return None

busy = sys.argv[1]
rounds = [[num(v) for v in r.split()[:8]] for r in sys.argv[2:]]
# fields: udp_gbps udp_lat | wbw sbw wlat p99 cbw clat
names = {"wbw": 2, "sbw": 3, "wlat": 4, "cbw": 6, "clat": 7}

def per_round(field, base_index, invert=False):
    out = []
    for r in rounds:
        v, b = r[names[field]], r[base_index]
        if v is not None and b:
            out.append(v / b)
    return out

def fmt(values):
    return ", ".join(f"{v:.2f}x" for v in values) if values else "-"

def med(values):
    return statistics.median(values) if values else None

print("ratios per round (each against the raw path measured just before it):")
for label, field, base in (("ib_write_bw / kernel UDP goodput", "wbw", 0), ("ib_send_bw / kernel UDP goodput", "sbw", 0),
                           ("client-library WRITE / kernel UDP goodput", "cbw", 0),
                           ("ib_write_lat / sockperf one-way", "wlat", 1),
                           ("client-library 2 B / sockperf one-way", "clat", 1)):
    values = per_round(field, base)
    m = med(values)
    print(f"  {label}: {fmt(values)}; median {m:.2f}x" if m is not None else f"  {label}: -")
raw_bw = [r[0] for r in rounds if r[0]]
raw_lat = [r[1] for r in rounds if r[1]]
for label, i in (("kernel UDP goodput (Gb/s)", 0), ("sockperf one-way (us)", 1), ("ib_write_bw (Gb/s)", 2),
                 ("ib_send_bw (Gb/s)", 3), ("ib_write_lat one-way (us)", 4)):
    vals = [r[i] for r in rounds if r[i] is not None]
    print(f"median {label}: {statistics.median(vals):.2f} over {len(vals)} rounds" if vals else f"median {label}: -")
if busy != "-" and raw_bw and raw_lat:
    b = [num(v) for v in busy.split()[:6]]
    bw = f"{b[0] / statistics.median(raw_bw):.2f}x" if b[0] else "-"
    lat = f"{b[2] / statistics.median(raw_lat):.2f}x" if b[2] else "-"
    print(f"busy-poll (one round, against the raw medians): ib_write_bw {bw}, ib_write_lat {lat}")
print("targets (issue 16): bandwidth >= 1.50x kernel UDP goodput, ib_write_lat <= 1.00x sockperf one-way (must: 1.50x)")
pp = [[num(v) for v in r.split()] for r in os.environ.get("PP_ROUNDS", "").split(";") if r.strip()]
if pp:
    for label, i in (("sockperf one-way, busy-polling client (us)", 0), ("TCP 4 KiB round trip (us)", 1),
                     ("ibv_rc_pingpong 4 KiB per iteration (us)", 2)):
        vals = [r[i] for r in pp if r[i] is not None]
        print(f"median {label}: {statistics.median(vals):.2f} over {len(vals)} rounds" if vals else f"median {label}: -")
    values = [r[2] / r[1] for r in pp if r[1] and r[2] is not None]
    m = med(values)
    print(f"  ibv_rc_pingpong 4 KiB / TCP 4 KiB round trip: {fmt(values)}; median {m:.2f}x" if m is not None
          else "  ibv_rc_pingpong 4 KiB / TCP 4 KiB round trip: -")
    wl = [r[4] for r in rounds if r[4] is not None]
    bl = [r[0] for r in pp if r[0]]
    if wl and bl:
        print(f"  ib_write_lat / busy-polling sockperf one-way (medians): {statistics.median(wl) / statistics.median(bl):.2f}x")
msg = [[num(v) for v in r.split()] for r in os.environ.get("MSG_ROUNDS", "").split(";") if r.strip()]
if msg:
    # fields: raw tx pps, raw rx pps, lost, 1 QP Mpps, 16 QPs Mpps
    def mmed(i, scale=1.0):
        vals = [r[i] * scale for r in msg if r[i] is not None]
        return (statistics.median(vals), len(vals)) if vals else (None, 0)
    for label, i, scale, spec in (("port_rate 64 B raw received (M pps)", 1, 1e-6, ".3f"),
                                  ("port_rate 64 B raw sent (M pps)", 0, 1e-6, ".3f"),
                                  ("ib_write_bw 64 B 1 QP (M msg/s)", 3, 1.0, ".3f"),
                                  ("ib_write_bw 64 B 16 QPs (M msg/s)", 4, 1.0, ".3f")):
        m, n = mmed(i, scale)
        print(f"median {label}: {m:{spec}} over {n} rounds" if m is not None else f"median {label}: -")
    for label, i in (("ib_write_bw 64 B 1 QP / port_rate raw", 3), ("ib_write_bw 64 B 16 QPs / port_rate raw", 4)):
        values = [r[i] * 1e6 / r[1] for r in msg if r[i] is not None and r[1]]
        m = med(values)
        print(f"  {label}: {fmt(values)}; median {m:.2f}x" if m is not None else f"  {label}: -")
    print("message-rate targets: ib_write_bw 64 B >= 1.00 M msg/s (1 and 16 QPs) and >= 0.80x the port's raw rate")
PY
