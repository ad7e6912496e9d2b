#!/usr/bin/env bash
# Does rnicd scale to the 16,384 QPs it advertises (max_qp)? Two measurements on the test bed:
#
# 1. The control path, one rnicd: tests/bench/qp_scale creates N RC QPs, brings each to RTS
#    connected to another QP of the same daemon (loopback), WRITEs through a few of them (the
#    last created among them) and destroys them, for N in BENCH_SCALE_QPS (default 16 1000
#    16384); QPs/s per phase, and the first and the last 1,000 brought to RTS (target: >= 5,000
#    QPs/s to RTS at 16k, not falling with the count). With the 16k QPs held in RTS, the idle
#    daemon's CPU beside its CPU with no QP at all.
# 2. The data path, two rnicd: Debian's perftest through our libibverbs.so.1 (rnic-run, server
#    on rnic0, client on rnic1, as tools/bench-host.sh), ib_write_bw -s 64 -q N for N in
#    BENCH_QPS (default 1 16 256 1024 4096 16384): message rate, its ratio to 16 QPs (target:
#    16k >= 0.8x), the connection time (client start to perftest's result header) and its
#    phases. Each N with the RNIC cache model off (--qpc-cache 0 --mpt-cache 0 --mtt-cache 0)
#    and on with the default cache sizes charging BENCH_MISS_NS (default 1000) per miss
#    (--cache-miss-ns), and each at perftest's default tx depth (128) and at -t 1 (one WRITE in
#    flight per QP, the pattern under which every packet looks its QP up again; BENCH_TX_DEPTHS,
#    default "128 1"). Every run gets fresh daemons; the QPC misses per message of the sending
#    daemon are printed beside the rate.
#
#   tools/bench-scale.sh [BUILD_DIR]      (default build/)
#
# perftest runs a number of WRITEs per QP (-n), about BENCH_MESSAGES (default 1,000,000) in all
# (at least the tx depth per QP; at -t 1 at most 10,000 per QP), and reports the rate over the
# whole run, with -N (no peak: perftest's peak search is quadratic in the WRITEs, a minute at
# 250,000 with -t 1). Not -D: perftest signals one WRITE in 100 and the engine serves the QPs in
# turn, so with many QPs the completions come in waves N x 100 WRITEs apart (6 s at 16k QPs),
# and a -D window counted 0, 1 or 2 of them (0 and 0.55 Mpps in two rounds of one
# configuration).
# The rounds (BENCH_REPS, default 3) are interleaved: each round runs every configuration once,
# the cache modes in alternating order, and the summary gives medians. Every step is bounded by
# `timeout`; the test bed is taken down on exit. Environment: the BENCH_* above, RNIC_TESTBED*
# as for tools/testbed.sh. A round takes ~6 minutes at the defaults.
#
# BENCH_SHORT=1 is the form CI runs (tests/bench/check_bench_scripts.py): one round, qp_scale at
# 16 QPs, perftest -q 1 and 16 at depth 128 with 20,000 WRITEs, shorter idle-CPU windows (the
# BENCH_* above still override it): every figure line printed, nothing judged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
export RNIC_TESTBED=${RNIC_TESTBED:-rnicscale} RNIC_TESTBED_DIR=${RNIC_TESTBED_DIR:-/tmp/rnicscale}
export RNIC_TESTBED_NET=${RNIC_TESTBED_NET:-10.82.0}
if ((${BENCH_SHORT:-0})); then
    reps=${BENCH_REPS:-1} qps_list=${BENCH_QPS:-1 16} scale_list=${BENCH_SCALE_QPS:-16}
    depths=${BENCH_TX_DEPTHS:-128} messages=${BENCH_MESSAGES:-20000} cpu_secs=1 hold_secs=3
else
    reps=${BENCH_REPS:-3} qps_list=${BENCH_QPS:-1 16 256 1024 4096 16384} scale_list=${BENCH_SCALE_QPS:-16 1000 16384}
    depths=${BENCH_TX_DEPTHS:-128 1} messages=${BENCH_MESSAGES:-1000000} cpu_secs=3 hold_secs=6
fi
miss_ns=${BENCH_MISS_NS:-1000}
tb=$here/testbed.sh state=$RNIC_TESTBED_DIR
rnicd=$build/emulator/daemon/rnicd rnic_run=$build/verbs_shim/rnic-run
qp_scale=$build/tests/bench/qp_scale rnicctl=$build/tools/rnicctl
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    "$tb" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
for f in "$rnicd" "$rnic_run" "$qp_scale" "$rnicctl"; do
    [[ -x $f ]] || { echo "bench-scale: build first ($f)" >&2; exit 2; }
done
[[ -x /usr/bin/ib_write_bw ]] || { echo "bench-scale: perftest is not installed (ib_write_bw)" >&2; exit 2; }
load() { cut -d' ' -f1 /proc/loadavg; }
echo "bench-scale: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(load) at start, $reps rounds;" \
     "perftest -q {$qps_list} at tx depths {$depths}, qp_scale {$scale_list}, misses charged $miss_ns ns"

# Waits (at most 10 s) until something in namespace $1 listens on TCP port $2.
wait_listen() {
    for _ in $(seq 100); do
        ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
        sleep 0.1
    done
    return 1
}

# Prefixes each line of stdin with the seconds since $1 (a `date +%s.%N`).
stamp() {
    python3 -u -c '
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    print(f"{time.time() - t0:.3f} {line}", end="", flush=True)' "$1"
}

# The CPU rnicd $1 (a or b) uses over $2 seconds, % of one core (sum_exec_runtime, exact).
daemon_cpu() {
    local pid c0 c1 t0 t1
    pid=$(cat "$state/rnicd-$1.pid")
    c0=$(cut -d' ' -f1 "/proc/$pid/schedstat") t0=$(date +%s%N)
    sleep "$2"
    c1=$(cut -d' ' -f1 "/proc/$pid/schedstat") t1=$(date +%s%N)
    python3 -c "import sys; c0,c1,t0,t1=map(int,sys.argv[1:]); print('%.2f' % (100*(c1-c0)/(t1-t0)))" "$c0" "$c1" "$t0" "$t1"
}

# One rnicd, qp_scale over the counts, the last held $hold_secs s in RTS while the daemon's CPU is taken.
# Prints each BENCH line with "idle_cpu_pct=<no QPs>/<N QPs held>" added to the last.
control_round() {
    "$tb" up --daemons a --rnicd "$rnicd" >/dev/null
    local empty_cpu held_cpu out=$state/qp_scale.txt
    sleep 1
    empty_cpu=$(daemon_cpu a "$cpu_secs")
    timeout 600 "$qp_scale" --run-dir "$state/run-a" --hold "$hold_secs" $scale_list >"$out" 2>&1 & pids=($!)
    local last=${scale_list##* }
    for _ in $(seq 1200); do
        grep -q "n=$last: holding" "$out" && break
        kill -0 "${pids[0]}" 2>/dev/null || break
        sleep 0.25
    done
    held_cpu=-
    grep -q "n=$last: holding" "$out" && { sleep 1; held_cpu=$(daemon_cpu a "$cpu_secs"); }
    wait "${pids[0]}" || echo "bench-scale: qp_scale failed: $(tail -3 "$out")" >&2
    pids=()
    "$tb" down >/dev/null
    grep '^BENCH qp_scale' "$out" | sed "\$s/\$/ idle_cpu_pct=$empty_cpu\/$held_cpu/"
}

# The CPU time (ns) used so far by each of the given PIDs, and the clock: "<ns>... <now ns>".
cpu_sample() {
    local p out=()
    for p in "$@"; do out+=("$(cut -d' ' -f1 "/proc/$p/schedstat" 2>/dev/null || echo 0)"); done
    echo "${out[*]} $(date +%s%N)"
}

# One ib_write_bw -s 64 -q N pair on fresh daemons. $1: off|miss, $2: tx depth, $3: N. Prints
# "<Mpps> <connect s> <open+create+INIT s> <exchange+RTR/RTS s> <exchange s> <QPC misses/msg>
# <sender rnicd us/msg> <receiver rnicd us/msg> <sender rnicd %> <receiver rnicd %> <perftest
# client %>" ("-" where there is nothing): the CPU figures are taken between perftest's result
# header and its result line, the WRITEs alone.
perftest_run() {
    local mode=$1 depth=$2 n=$3 cache=()
    if [[ $mode == off ]]; then cache=(--qpc-cache 0 --mpt-cache 0 --mtt-cache 0); else cache=(--cache-miss-ns "$miss_ns"); fi
    "$tb" up --daemons both --one-run-dir --rnicd "$rnicd" -- "${cache[@]}" >/dev/null
    source "$state/env"
    # WRITEs per QP: a whole number of perftest's completion batches (one signaled in
    # min(100, depth)), at least the tx depth.
    local batch=$((depth < 100 ? depth : 100)) iters=$(((messages + n - 1) / n))
    ((depth == 1 && iters > 10000)) && iters=10000
    ((iters < depth)) && iters=$depth
    iters=$(((iters + batch - 1) / batch * batch))
    local port=$((18515 + RANDOM % 1000)) limit=$((120 + n * iters / 20000))
    local args=(ib_write_bw -s 64 -q "$n" -t "$depth" -n "$iters" -N -x 0 -F -p "$port")
    local out=$state/perftest-client.txt t0 client=0 p s0="" s1="" result='^[0-9.]+ +64 +[0-9]+ '
    local rx_pid tx_pid
    rx_pid=$(cat "$state/rnicd-a.pid") tx_pid=$(cat "$state/rnicd-b.pid")
    ip netns exec "$ns_a" timeout "$limit" "$rnic_run" --run-dir "$state/run" "${args[@]}" -d rnic0 \
        >"$state/perftest-server.txt" 2>&1 & pids=($!)
    wait_listen "$ns_a" "$port" || true
    t0=$(date +%s.%N)
    { ip netns exec "$ns_a" timeout "$limit" "$rnic_run" --run-dir "$state/run" stdbuf -oL "${args[@]}" -d rnic1 127.0.0.1 2>&1 || true; } \
        | stamp "$t0" >"$out" & pids+=($!)
    # The WRITEs run from the result header to the result line.
    while kill -0 "${pids[1]}" 2>/dev/null && ! grep -q '#bytes' "$out"; do sleep 0.05; done
    for p in $(pgrep -x ib_write_bw); do grep -qa rnic1 "/proc/$p/cmdline" 2>/dev/null && client=$p; done
    grep -q '#bytes' "$out" && s0=$(cpu_sample "$tx_pid" "$rx_pid" "$client")
    # perftest exits right after its result line: its CPU is the last value seen before.
    local seen=0
    while kill -0 "${pids[1]}" 2>/dev/null && ! grep -Eq "$result" "$out"; do
        seen=$(cut -d' ' -f1 "/proc/$client/schedstat" 2>/dev/null || echo "$seen")
        sleep 0.05
    done
    grep -Eq "$result" "$out" && s1=$(cpu_sample "$tx_pid" "$rx_pid" "$client")
    [[ -n $s1 ]] && s1=$(awk -v c="$seen" '{ if ($3 < c) $3 = c; print }' <<<"$s1")
    wait "${pids[1]}" 2>/dev/null || true
    wait "${pids[0]}" 2>/dev/null || true
    pids=()
    local misses msgs
    misses=$("$rnicctl" --run-dir "$state/run" -d rnic1 cache 2>/dev/null | awk '$1 == "qpc_cache_misses" {print $2}' || true)
    msgs=$("$rnicctl" --run-dir "$state/run" -d rnic1 stat 2>/dev/null | awk '$1 == "host_wqes_posted" {print $2}' || true)
    "$tb" down >/dev/null
    python3 - "$out" "${misses:-0}" "${msgs:-0}" "$mode" "${s0:--}" "${s1:--}" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
def first(pattern):
    for l in lines:
        if re.search(pattern, l):
            return float(l.split()[0])
    return None
t_info, t_local, t_head = first("Data ex. method"), first("local address"), first("#bytes")
result = next((l.split() for l in lines if re.match(r"^[0-9.]+ +64 +[0-9]+ ", l)), None)
rate = result[5] if result else "-"
misses, msgs = int(sys.argv[2]), int(sys.argv[3])
def f(x, spec=".2f"):
    return "-" if x is None else format(x, spec)
phases = [t_info, None if None in (t_info, t_local) else t_local - t_info,
          None if None in (t_local, t_head) else t_head - t_local]
per_msg = f"{misses / msgs:.3f}" if msgs and sys.argv[4] != "off" else "-"
cpu = ["-"] * 5
if result and sys.argv[5] != "-" and sys.argv[6] != "-":
    a, b = [list(map(int, x.split())) for x in sys.argv[5:7]]
    wall = b[-1] - a[-1]
    writes = int(result[2])
    used = [y - x for x, y in zip(a[:-1], b[:-1])]
    cpu = [f(used[0] / 1e3 / writes), f(used[1] / 1e3 / writes)] + [f(100 * u / wall, ".0f") for u in used]
print(rate, f(t_head), *map(f, phases), per_msg, *cpu)
PY
}

results=()
for ((r = 1; r <= reps; r++)); do
    while read -r line; do
        echo "round $r control path: ${line#BENCH qp_scale }"
        results+=("qp_scale $r ${line#BENCH qp_scale }")
    done < <(control_round)
    modes=(off miss)
    ((r % 2 == 0)) && modes=(miss off)
    for mode in "${modes[@]}"; do
        for depth in $depths; do
            row="round $r perftest cache $mode, tx depth $depth:"
            for n in $qps_list; do
                read -r rate conn create connect exch miss tx_us rx_us tx_pct rx_pct cl_pct <<<"$(perftest_run "$mode" "$depth" "$n")"
                row+=" q=$n $rate Mpps (connect $conn s = $create + $connect + $exch, QPC misses/msg $miss, rnicd"
                row+=" us/msg sender $tx_us receiver $rx_us, CPU sender $tx_pct% receiver $rx_pct% perftest $cl_pct%);"
                results+=("perftest $r $mode $depth $n $rate $conn $create $connect $exch $miss $tx_us $rx_us $tx_pct $rx_pct $cl_pct")
            done
            echo "$row load $(load)"
        done
    done
done

python3 - "${results[@]}" <<'PY'
import statistics
import sys

def num(x):
    try:
        return float(x)
    except ValueError:
        return None

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def fmt(v, spec):
    return "-" if v is None else format(v, spec)

control, perf = {}, {}
for r in sys.argv[1:]:
    w = r.split()
    if w[0] == "qp_scale":
        kv = dict(x.split("=", 1) for x in w[2:])
        control.setdefault(int(kv["n"]), []).append(kv)
    else:
        _, _, mode, depth, n, *vals = w
        perf.setdefault((mode, int(depth)), {}).setdefault(int(n), []).append([num(v) for v in vals])

print("medians over the rounds")
print("control path (qp_scale, one rnicd, loopback pairs): QPs/s")
print("  N       create   to RTS  first 1k  last 1k  destroy  WRITEs")
for n, runs in sorted(control.items()):
    m = lambda k: med([num(r[k]) for r in runs])
    writes = ",".join(sorted({r["writes_ok"] for r in runs}))
    print(f"  {n:<7} {fmt(m('create_per_s'), '7.0f')}  {fmt(m('rts_per_s'), '7.0f')}  {fmt(m('rts_first_per_s'), '8.0f')}"
          f"  {fmt(m('rts_last_per_s'), '7.0f')}  {fmt(m('destroy_per_s'), '7.0f')}  {writes}")
    idle = [r["idle_cpu_pct"].split("/") for r in runs if "idle_cpu_pct" in r]
    if idle:
        print(f"  idle rnicd CPU: {fmt(med([num(a) for a, _ in idle]), '.2f')}% with no QP,"
              f" {fmt(med([num(b) for _, b in idle]), '.2f')}% with {n} QPs in RTS")
print("  target: >= 5000 QPs/s to RTS at 16k, the last 1k not slower than the first")
print("data path (ib_write_bw -s 64 between two rnicd): message rate, ratio to 16 QPs, connection time (open +")
print("create + INIT, then exchange + RTR/RTS, then perftest's second exchange), the sender's QPC misses per WRITE,")
print("CPU per WRITE of the sending and the receiving rnicd, and the CPU of the sender, receiver and perftest client")
for (mode, depth), by_n in sorted(perf.items()):
    base = med([v[0] for v in by_n.get(16, [])])
    print(f"  cache {'off' if mode == 'off' else 'on, misses charged'}, tx depth {depth}:")
    for n, runs in sorted(by_n.items()):
        rate = med([v[0] for v in runs])
        ratio = f"{rate / base:.2f}x" if rate and base else "-"
        p = [med([v[i] for v in runs]) for i in range(1, 11)]
        print(f"    q={n:<6} {fmt(rate, '.3f')} Mpps {ratio:>6}  connect {fmt(p[0], '.2f')} s"
              f" ({fmt(p[1], '.2f')} + {fmt(p[2], '.2f')} + {fmt(p[3], '.2f')})  QPC misses/msg {fmt(p[4], '.3f')}"
              f"  rnicd us/msg {fmt(p[5], '.2f')} + {fmt(p[6], '.2f')}  CPU {fmt(p[7], '.0f')}%"
              f" {fmt(p[8], '.0f')}% {fmt(p[9], '.0f')}%")
print("  target: 16k QPs >= 0.80x of 16 QPs")
PY
