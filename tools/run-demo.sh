#!/usr/bin/env bash
# The main job: install what is missing, build, start two rnicd in two network namespaces joined
# by a veth (rnic0 and rnic1, both capturing), run Debian's unmodified ibv_rc_pingpong between
# them through our libibverbs.so.1, then show where the captures are, check them with rnic-pcap
# (every ICRC verified) and print tshark's one-line-per-packet summary. Cleans up on any exit.
#   tools/run-demo.sh [ibv_rc_pingpong options]     (default: -s 4096 -m 1024 -n 20 -c)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --main  # only what this job needs (tools/setup.sh: everything)

# Names and subnet of the bed: overridable so two runs on one machine do not collide.
export RNIC_TESTBED=${RNIC_TESTBED:-rnicdemo} RNIC_TESTBED_NET=${RNIC_TESTBED_NET:-10.78.0}
export RNIC_TESTBED_DIR=${RNIC_TESTBED_DIR:-$(mktemp -d /tmp/rnic-demo.XXXXXX)}
state=$RNIC_TESTBED_DIR
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
    tools/testbed.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT

args=("$@")
((${#args[@]})) || args=(-s 4096 -m 1024 -n 20 -c)

echo "== two rnicd: rnic0 in namespace ${RNIC_TESTBED}-a, rnic1 in ${RNIC_TESTBED}-b, veth between them"
tools/testbed.sh up --daemons both --pcap --one-run-dir
run() { ip netns exec "${RNIC_TESTBED}-a" build/verbs_shim/rnic-run --run-dir "$state/run" "$@"; }
run ibv_devices

# Both programs exchange their QP numbers over TCP on namespace A's loopback; the RDMA traffic
# goes rnic0 -> veth -> rnic1. The binaries are Debian's own (/usr/bin), unmodified.
echo "== $(command -v ibv_rc_pingpong) ${args[*]} (server on rnic0, client on rnic1)"
run ibv_rc_pingpong -d rnic0 -g 0 -p 18515 "${args[@]}" > "$state/server.log" 2>&1 &
server_pid=$!
# The client dials as soon as the server listens (bounded: 10 s).
for _ in $(seq 100); do
    ip netns exec "${RNIC_TESTBED}-a" ss -Hltn 'sport = :18515' | grep -q . && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
run timeout 60 ibv_rc_pingpong -d rnic1 -g 0 -p 18515 "${args[@]}" 127.0.0.1
wait "$server_pid"
server_pid=
echo "-- server side:"
cat "$state/server.log"

tools/testbed.sh down >/dev/null  # SIGTERM: both daemons flush their captures and exit 0
echo "== captures (rnic0 sent and received: $state/a.pcap; rnic1: $state/b.pcap)"
build/tools/rnic-pcap --quiet "$state/a.pcap" "$state/b.pcap"
echo "== tshark, one line per packet, of $state/a.pcap"
tshark -r "$state/a.pcap" 2>/dev/null
echo "captures: $state/a.pcap $state/b.pcap (open them in Wireshark: UDP 4791 decodes as InfiniBand)"
