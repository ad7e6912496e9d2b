#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, optionally an rnicd in each. Addresses live only
# inside the namespaces (10.77.0.0/24 and the ULA prefix fd77::/64 by default). Everything is
# bounded in time; `down` kills only the PIDs `up` recorded and is safe to run any number of times.
#
#   tools/testbed.sh up   [--daemons none|a|both] [--rnicd PATH] [--pcap] [--busy-poll] [--one-run-dir]
#                         [--pmd af_packet|af_xdp|ring] [--oob [--oob-rnic-ips]] [--quiet-b] [-- rnicd args]
#   tools/testbed.sh down
#   tools/testbed.sh exec a|b CMD...     run CMD inside namespace A or B
#   tools/testbed.sh loss PCT [a|b|both]  lose PCT% of RoCEv2 frames each side sends (0: off)
#   tools/testbed.sh mark FRACTION|off [a|b|both]  mark CE that fraction of the ECT RoCEv2 frames
#                                         each side sends (0.05: 5 %), at run time
#
# Environment: RNIC_TESTBED (name prefix, default rnictb: use another to run beds side by side),
# RNIC_TESTBED_DIR (state: pid files, logs, captures, exit codes; default /tmp/$RNIC_TESTBED),
# RNIC_TESTBED_NET (first three octets, default 10.77.0), RNIC_TESTBED_NET6 (a /64 prefix ending
# in "::", default fd77::), RNIC_TESTBED_MTU (veth MTU, default 9000 so RoCE's 4096-byte path MTU
# fits, 3500 with --pmd af_xdp; 1500 limits rnicd's active MTU to 1024).
# --pmd af_xdp gives each rnicd DPDK's af_xdp vdev on its interface instead of af_packet;
# --pmd ring gives it rnicd's own TPACKET ring port (rnicd --ring-port).
# With --daemons both, both rnicd get the same home core (rnicd --home-cpu, docs/daemon.md
# polling policy 8): the first CPU this script may use, or RNIC_TESTBED_HOME_CPU (a CPU number;
# "none": no home, the scheduler places them). Not with --busy-poll: two spinners on one core
# would take turns by scheduler slices.
#
# Namespace A's interface belongs to rnicd: no IP, IPv6 off, and an nftables rule dropping UDP
# 4791 before the kernel's UDP layer, so af_packet's copy of every frame never draws a kernel
# answer (ICMP port unreachable). Each rnicd also gets ::1 (A) or ::2 (B) of the IPv6 prefix
# (--ip6) besides its link-local address. With `--daemons a`, B is a plain kernel host at .2 and
# ::2 (ping, ARP, ping -6, neighbour discovery; IPv6 enabled on its interface only); with
# `--daemons both`, B is set up like A and runs the second rnicd at .2 and ::2. --quiet-b sets B up
# like A without starting a daemon there (no kernel address): for raw DPDK senders and receivers
# on both ends (tools/port-rate.sh), which then see the kernel exactly as two rnicd would.
# Each daemon has its own control-socket directory (run-a, run-b, both named rnic0) unless
# --one-run-dir puts them side by side in $RNIC_TESTBED_DIR/run as rnic0 (A) and rnic1 (B), the
# way one host with two RNICs looks to ibv_devices.
# --oob adds a second veth pair between the namespaces with kernel addresses .1 (A) and .2 (B) of
# $RNIC_TESTBED_OOB_NET (default 10.78.0): the TCP side channel middleware needs besides the RDMA
# device (ucx_perftest's and mpirun's out-of-band exchange), kept off rnicd's link.
# --oob-rnic-ips also gives those interfaces the rnicd addresses ($RNIC_TESTBED_NET .1 and .2):
# for middleware that finds its RDMA source address among the kernel's (getifaddrs: libfabric's
# verbs provider) and opens its side channel to the peer's RDMA address (fi_pingpong). The
# kernel holds them on the side-channel link only, so rnicd's link is untouched.
set -euo pipefail

name=${RNIC_TESTBED:-rnictb}
state=${RNIC_TESTBED_DIR:-/tmp/$name}
net=${RNIC_TESTBED_NET:-10.77.0}
net6=${RNIC_TESTBED_NET6:-fd77::}
mtu=${RNIC_TESTBED_MTU:-9000}
oob_net=${RNIC_TESTBED_OOB_NET:-10.78.0}
ns_a=$name-a ns_b=$name-b
if_a=${name:0:10}a if_b=${name:0:10}b   # interface names are at most 15 bytes
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "testbed: $*" >&2; exit 1; }

# Hands a namespace's interface over to rnicd: the kernel must stay silent on it. The ingress
# rule drops RoCEv2 right after the packet sockets (af_packet's ring, the wake socket) got their
# copy and before the IP layer, which would otherwise route every frame to an error (no address
# here: IpInAddrErrors) at a cost per frame that showed in the bandwidth; the input rule stays as
# the guard for an address added later.
quiet_kernel() {
    local ns=$1 ifname=$2
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$ifname.disable_ipv6=1"
    ip netns exec "$ns" nft -f - <<NFT
table inet rnic {
  chain input { type filter hook input priority -300; udp dport 4791 drop; }
}
table netdev rnic {
  chain ingress { type filter hook ingress device "$ifname" priority -500; udp dport 4791 drop; }
}
NFT
}

start_rnicd() {  # side ns ifname ip ip6
    local side=$1 ns=$2 ifname=$3 ip=$4 ip6=$5
    local log=$state/rnicd-$side.log pidfile=$state/rnicd-$side.pid rcfile=$state/rnicd-$side.rc
    # Each daemon gets its own control-socket directory: both would otherwise claim
    # /run/rnic/rnic0.sock (namespaces share the filesystem).
    local args=(--iface "$ifname" --ip "$ip/24" --ip6 "$ip6/64")
    if ((one_run_dir)); then
        local dev=rnic0
        [[ $side == b ]] && dev=rnic1
        args+=(--run-dir "$state/run" --name "$dev")
    else
        args+=(--run-dir "$state/run-$side")
    fi
    ((pcap)) && args+=(--pcap "$state/$side.pcap")
    ((busy)) && args+=(--busy-poll)
    [[ -n $home_cpu ]] && args+=(--home-cpu "$home_cpu")
    [[ $pmd == ring ]] && args+=(--ring-port)
    args+=("${extra[@]}")
    # af_xdp's vdev names the interface, which differs per side; rnicd hands everything after
    # its own `--` to the EAL.
    if [[ $pmd == af_xdp ]]; then
        [[ " ${extra[*]} " == *" -- "* ]] || args+=(--)
        args+=(--vdev "net_af_xdp0,iface=$ifname")
    fi
    rm -f "$rcfile" "$pidfile" "$log"  # a previous run's log would look "up" at once
    # sh records its PID and execs rnicd, so the PID is rnicd's; the subshell keeps the exit
    # status for `down` (rnicd is not our child by then).
    setsid bash -c 'ip netns exec "$1" sh -c "echo \$\$ > \"$2\"; exec \"\$0\" \"\$@\"" "${@:5}" </dev/null >"$3" 2>&1; echo $? > "$4"' \
        _ "$ns" "$pidfile" "$log" "$rcfile" "$rnicd" "${args[@]}" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 100); do
        [[ -s $pidfile ]] && grep -q "rnicd up" "$log" 2>/dev/null && { echo "testbed: rnicd $side pid $(cat "$pidfile") $ip on $ns/$ifname"; return 0; }
        [[ -f $rcfile ]] && { cat "$log" >&2; die "rnicd $side exited during start-up"; }
        sleep 0.1
    done
    cat "$log" >&2
    die "rnicd $side not up within 10 s"
}

cmd_up() {
    daemons=a rnicd=$here/../build/emulator/daemon/rnicd pcap=0 busy=0 one_run_dir=0 oob=0 oob_rnic_ips=0 pmd=af_packet quiet_b=0 extra=()
    while (($#)); do
        case $1 in
            --daemons) daemons=$2; shift 2 ;;
            --rnicd) rnicd=$2; shift 2 ;;
            --pcap) pcap=1; shift ;;
            --busy-poll) busy=1; shift ;;
            --pmd) pmd=$2; shift 2 ;;
            --one-run-dir) one_run_dir=1; shift ;;
            --oob) oob=1; shift ;;
            --oob-rnic-ips) oob_rnic_ips=1; shift ;;
            --quiet-b) quiet_b=1; shift ;;
            --) shift; extra=("$@"); break ;;
            *) die "unknown option $1" ;;
        esac
    done
    [[ $daemons =~ ^(none|a|both)$ ]] || die "--daemons wants none, a or both"
    [[ $pmd =~ ^(af_packet|af_xdp|ring)$ ]] || die "--pmd wants af_packet, af_xdp or ring"
    # A veth takes a native XDP program (what DPDK's af_xdp attaches) only while its peer's MTU
    # fits a page with XDP's headroom: 3500 then (RoCE MTU 2048), unless the caller chose one.
    [[ $pmd == af_xdp && -z ${RNIC_TESTBED_MTU:-} ]] && mtu=3500
    [[ $daemons == none || -x $rnicd ]] || die "no rnicd at $rnicd (build first or pass --rnicd)"
    home_cpu=${RNIC_TESTBED_HOME_CPU:-$(awk '/^Cpus_allowed_list/ { split($2, r, /[,-]/); print r[1] }' /proc/self/status)}
    [[ $home_cpu == none || $home_cpu =~ ^[0-9]+$ ]] || die "RNIC_TESTBED_HOME_CPU wants a CPU number or none, got '$home_cpu'"
    [[ $daemons == both && $home_cpu != none ]] && ! ((busy)) && [[ " ${extra[*]} " != *" --busy-poll "* ]] || home_cpu=
    cmd_down >/dev/null
    mkdir -p "$state"
    rm -f "$state/link-a" "$state/link-b"  # a new link: no loss, no marking
    ip netns add "$ns_a"
    ip netns add "$ns_b"
    ip link add "$if_a" netns "$ns_a" mtu "$mtu" type veth peer name "$if_b" netns "$ns_b" mtu "$mtu"
    for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
    ip -n "$ns_a" link set "$if_a" up
    ip -n "$ns_b" link set "$if_b" up
    quiet_kernel "$ns_a" "$if_a"
    if ((oob)); then
        ip link add "${if_a}o" netns "$ns_a" type veth peer name "${if_b}o" netns "$ns_b"
        ip -n "$ns_a" addr add "$oob_net.1/24" dev "${if_a}o"
        ip -n "$ns_b" addr add "$oob_net.2/24" dev "${if_b}o"
        ip -n "$ns_a" link set "${if_a}o" up
        ip -n "$ns_b" link set "${if_b}o" up
        if ((oob_rnic_ips)); then
            ip -n "$ns_a" addr add "$net.1/24" dev "${if_a}o"
            ip -n "$ns_b" addr add "$net.2/24" dev "${if_b}o"
        fi
    fi
    [[ $daemons == a ]] && ((quiet_b)) && die "--quiet-b leaves B without a kernel host for daemon A: use --daemons none or both"
    if [[ $daemons == both ]] || ((quiet_b)); then
        quiet_kernel "$ns_b" "$if_b"
    else
        ip -n "$ns_b" addr add "$net.2/24" dev "$if_b"
        # The kernel host speaks IPv6 on this interface only, from an address no duplicate
        # address detection delays (nodad): it is the daemon's peer for ping -6 and ND.
        ip netns exec "$ns_b" sysctl -qw "net.ipv6.conf.$if_b.disable_ipv6=0"
        ip -n "$ns_b" addr add "${net6}2/64" dev "$if_b" nodad
    fi
    {
        echo "ns_a=$ns_a ns_b=$ns_b if_a=$if_a if_b=$if_b"
        echo "ip_a=$net.1 ip_b=$net.2"
        echo "ip6_a=${net6}1 ip6_b=${net6}2"
        ((oob)) && echo "oob_a=$oob_net.1 oob_b=$oob_net.2"
        echo "mac_a=$(ip netns exec "$ns_a" cat /sys/class/net/"$if_a"/address)"
        echo "mac_b=$(ip netns exec "$ns_b" cat /sys/class/net/"$if_b"/address)"
        if ((one_run_dir)); then
            echo "run_dir=$state/run sock_a=$state/run/rnic0.sock sock_b=$state/run/rnic1.sock"
        else
            echo "sock_a=$state/run-a/rnic0.sock sock_b=$state/run-b/rnic0.sock"
        fi
    } > "$state/env"
    [[ $daemons == none ]] && return 0
    start_rnicd a "$ns_a" "$if_a" "$net.1" "${net6}1"
    [[ $daemons == both ]] && start_rnicd b "$ns_b" "$if_b" "$net.2" "${net6}2"
    return 0
}

cmd_down() {
    local side pid
    for side in a b; do
        local pidfile=$state/rnicd-$side.pid
        [[ -f $pidfile ]] || continue
        pid=$(cat "$pidfile")
        # Only our rnicd: the PID must still be an rnicd, not a recycled number.
        if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == rnicd ]]; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
            [[ -d /proc/$pid ]] && { echo "testbed: rnicd $side ignored SIGTERM for 5 s, killing" >&2; kill -KILL "$pid" 2>/dev/null || true; }
        fi
        # The exit status lands a moment after the process is gone.
        for _ in $(seq 20); do [[ -f $state/rnicd-$side.rc ]] && break; sleep 0.05; done
        rm -f "$pidfile"
    done
    for ns in "$ns_a" "$ns_b"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    echo "testbed: down"
}

# Loss and ECN marking on the link without netem (this kernel has none): an XDP program on the
# receiving veth (tools/testbed-link.bpf.c, generic XDP: native XDP on a veth refuses a 9000-byte
# MTU). XDP runs before the packet sockets take their copy, so a dropped frame reaches neither the
# peer rnicd nor its capture, while the sender's capture still shows it as sent (as a switch
# dropping it would); a marked frame reaches both marked CE, while the sender's capture shows it
# as sent (ECT). It touches only UDP 4791, never ARP, ND or side channels. A netdev egress rule on
# the sender did not lose anything: af_packet puts a frame the egress hook drops back in its TX
# ring and sends it with the next sendto(), so frames were only delayed; netdev ingress (and tc)
# on the receiver run after the packet sockets took their copy, so marking there would never
# reach rnicd (see the .bpf.c). Each side's setting lives in $state/link-SIDE ("LOSS_PCT
# MARK_PPM"); loss and mark change one and reload the program in place (ip -force: no gap).
link_apply() {  # side
    local side=$1 ns ifname loss_pct=0 mark_ppm=0 obj
    [[ -f $state/link-$side ]] && read -r loss_pct mark_ppm < "$state/link-$side"
    # Frames side A sends are lost or marked on their way into B's interface, and the other way round.
    if [[ $side == a ]]; then ns=$ns_b ifname=$if_b; else ns=$ns_a ifname=$if_a; fi
    if ((loss_pct == 0 && mark_ppm == 0)); then
        ip -n "$ns" link set dev "$ifname" xdpgeneric off
        return 0
    fi
    obj=$state/link-$loss_pct-$mark_ppm.o
    if [[ ! -s $obj ]]; then
        clang -O2 -g -target bpf -DLOSS_PCT="$loss_pct" -DMARK_PPM="$mark_ppm" -I"/usr/include/$(gcc -dumpmachine)" \
            -c "$here/testbed-link.bpf.c" -o "$obj.tmp" && mv "$obj.tmp" "$obj" || die "cannot build the XDP link program"
    fi
    ip -force -n "$ns" link set dev "$ifname" xdpgeneric obj "$obj" sec xdp
}

link_sides() {  # a|b|both command -> $sides (not a subshell: die must end the script)
    case ${1:-both} in a) sides=(a) ;; b) sides=(b) ;; both) sides=(a b) ;; *) die "$2: a, b or both" ;; esac
}

link_set() {  # field(1 loss, 2 mark) value sides...
    local field=$1 value=$2 side cur
    shift 2
    for side in "$@"; do
        cur=(0 0)
        [[ -f $state/link-$side ]] && read -r -a cur < "$state/link-$side"
        cur[field - 1]=$value
        echo "${cur[0]} ${cur[1]}" > "$state/link-$side"
        link_apply "$side"
    done
}

cmd_loss() {
    local pct=${1:-}
    [[ $pct =~ ^[0-9]+$ && $pct -le 100 ]] || die "loss wants an integer percentage"
    [[ -f $state/env ]] || die "test bed is not up"
    source "$state/env"
    local sides
    link_sides "${2:-both}" loss
    link_set 1 "$pct" "${sides[@]}"
}

# mark FRACTION|off [a|b|both]: FRACTION (0 to 1, e.g. 0.05; --fraction F also) of the ECT
# RoCEv2 frames a side sends arrive CE-marked; the per-million granularity of the program.
cmd_mark() {
    [[ ${1:-} == --fraction ]] && shift
    local f=${1:-} ppm
    if [[ $f == off ]]; then
        ppm=0
    elif [[ $f =~ ^(0|1|0?\.[0-9]+|1\.0*)$ ]]; then
        ppm=$(awk -v f="$f" 'BEGIN { printf "%d", f * 1000000 + 0.5 }')
    else
        die "mark wants a fraction 0..1 (e.g. 0.05) or off"
    fi
    [[ -f $state/env ]] || die "test bed is not up"
    source "$state/env"
    local sides
    link_sides "${2:-both}" mark
    link_set 2 "$ppm" "${sides[@]}"
}

case ${1:-} in
    up) shift; cmd_up "$@" ;;
    loss) shift; cmd_loss "$@" ;;
    mark) shift; cmd_mark "$@" ;;
    down) cmd_down ;;
    exec)
        [[ ${2:-} =~ ^(a|b)$ ]] || die "exec wants a or b"
        ns=$name-$2; shift 2; exec ip netns exec "$ns" "$@" ;;
    *) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
