#!/usr/bin/env bash
# The raw packet rate of the test bed's port: build/tools/port_rate sends RoCEv2 RDMA WRITE frames
# (wire library, ICRC included) from namespace A and counts them in namespace B, over the same
# DPDK PMD, EAL set-up and veth that rnicd uses (af_packet with rnicd's vdev arguments; af_xdp
# with --pmd af_xdp; rnicd's own TPACKET ring port with --pmd ring), both kernels quieted as for two rnicd (testbed.sh up --daemons none
# --quiet-b). The rate rnicd's message rate is held against (docs/benchmarks.md, "Message rate").
#
#   tools/port-rate.sh [--size N] [--seconds S] [--pmd af_packet|af_xdp|ring] [--burst B] [--nap-us US] [BUILD_DIR]
#
# The receiver naps --nap-us (default 50) after a poll that found nothing, as rnicd's loop naps
# between bursts: one that spins on the ring slows the sender down (docs/benchmarks.md).
#
# Prints the sender's and the receiver's line (port_rate tx|rx: key=value ...) and a summary:
#   port-rate: pmd=P payload=N tx_pps=X rx_pps=Y rx_gbps=G sent=S received=R lost=L load=A
# (lost = frames the sender's port took that the receiver never counted). Brings its own test
# bed up and takes it down (RNIC_TESTBED* as for tools/testbed.sh); every step under `timeout`.
# Exit status: 0 when frames arrived, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
size=64 secs=4 pmd=af_packet burst=32 nap=50 build=$here/../build
while (($#)); do
    case $1 in
        --size) size=$2; shift 2 ;;
        --seconds) secs=$2; shift 2 ;;
        --pmd) pmd=$2; shift 2 ;;
        --burst) burst=$2; shift 2 ;;
        --nap-us) nap=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "port-rate: unknown option $1" >&2; exit 2 ;;
        *) build=$1; shift ;;
    esac
done
build=$(cd "$build" && pwd)
export RNIC_TESTBED=${RNIC_TESTBED:-rnicrate} RNIC_TESTBED_DIR=${RNIC_TESTBED_DIR:-/tmp/rnicrate}
export RNIC_TESTBED_NET=${RNIC_TESTBED_NET:-10.80.0}
tb=$here/testbed.sh state=$RNIC_TESTBED_DIR port_rate=$build/tools/port_rate
[[ -x $port_rate ]] || { echo "port-rate: build first ($port_rate)" >&2; exit 2; }
rx_pid=
cleanup() {
    [[ -n $rx_pid ]] && kill "$rx_pid" 2>/dev/null || true
    "$tb" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
# --pmd: the veth rnicd would get with that PMD (testbed.sh: 3500 bytes for af_xdp, else 9000).
"$tb" up --daemons none --quiet-b --pmd "$pmd" >/dev/null
source "$state/env"
limit=$(awk -v s="$secs" 'BEGIN { printf "%d", s + 30 }')
# The receiver stops half a second after the stream ends (or S + 5 s after its first frame).
window=$(awk -v s="$secs" 'BEGIN { print s + 5 }')
ip netns exec "$ns_b" timeout "$limit" "$port_rate" rx --iface "$if_b" --pmd "$pmd" --burst "$burst" --dst-ip "$ip_b" \
    --seconds "$window" --wait 20 --nap-us "$nap" >"$state/port-rate-rx.txt" 2>"$state/port-rate-rx.err" &
rx_pid=$!
for _ in $(seq 100); do
    grep -q "ready" "$state/port-rate-rx.err" 2>/dev/null && break
    kill -0 "$rx_pid" 2>/dev/null || break
    sleep 0.1
done
tx_rc=0
ip netns exec "$ns_a" timeout "$limit" "$port_rate" tx --iface "$if_a" --pmd "$pmd" --burst "$burst" --size "$size" \
    --seconds "$secs" --dst-mac "$mac_b" --src-ip "$ip_a" --dst-ip "$ip_b" \
    >"$state/port-rate-tx.txt" 2>"$state/port-rate-tx.err" || tx_rc=$?
# A sender that failed sends nothing more: the receiver need not wait out its --wait.
((tx_rc == 0)) || kill "$rx_pid" 2>/dev/null || true
rx_rc=0
wait "$rx_pid" || rx_rc=$?
rx_pid=
tx_line=$(grep '^port_rate tx: ' "$state/port-rate-tx.txt" || true)
rx_line=$(grep '^port_rate rx: ' "$state/port-rate-rx.txt" || true)
((tx_rc == 0)) || { echo "port-rate: the sender failed ($tx_rc):" >&2; tail -5 "$state/port-rate-tx.err" >&2; }
((rx_rc == 0)) || { echo "port-rate: the receiver failed ($rx_rc):" >&2; tail -5 "$state/port-rate-rx.err" >&2; }
[[ -n $tx_line ]] && echo "$tx_line"
[[ -n $rx_line ]] && echo "$rx_line"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
sent=$(field frames "$tx_line") received=$(field frames "$rx_line")
lost=-
[[ -n $sent && -n $received ]] && lost=$((sent - received))
echo "port-rate: pmd=$pmd payload=$size tx_pps=$(field pps "$tx_line" | grep . || echo -)" \
     "rx_pps=$(field pps "$rx_line" | grep . || echo -) rx_gbps=$(field gbps "$rx_line" | grep . || echo -)" \
     "sent=${sent:--} received=${received:--} lost=$lost load=$(cut -d' ' -f1 /proc/loadavg)"
[[ -n $received && $received -gt 0 ]]
