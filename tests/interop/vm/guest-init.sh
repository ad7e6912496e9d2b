#!/bin/sh
# /init of the interop VM (busybox sh as PID 1): loads rdma_rxe, configures eth0, creates rxe0
# on it, mounts the host's job directory (virtio-9p, tag "jobs") on /host and serves it:
#   host writes  ID.sh    -> the VM runs it (sh, own session) with output in ID.out, PID in
#                            ID.pid, exit status in ID.rc (written last, by rename)
#   host writes  ID.kill  -> the VM kills job ID's process group
#   host writes  quit     -> the VM powers off
# so one boot serves every scenario. Kernel command line: rxevm_ip=A.B.C.D/P, rxevm_mtu=N,
# rxevm_peer=IP (exported as $PEER). Jobs see $GID (index of the RoCE v2 GID ::ffff:<ip>; rxe
# puts the fe80:: GID at 0), $RXE_DEV, $RXE_IP, $PEER. Console markers: RXEVM READY / FAIL.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /run /host
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm

IP= PEER= MTU=9000
for p in $(cat /proc/cmdline); do
    case "$p" in
        rxevm_ip=*) IP=${p#*=} ;;
        rxevm_peer=*) PEER=${p#*=} ;;
        rxevm_mtu=*) MTU=${p#*=} ;;
    esac
done
fail() { echo "RXEVM FAIL $*"; dmesg | tail -20; poweroff -f; sleep 5; }

for m in virtio_pci virtio_net ib_core ib_uverbs rdma_rxe rdma_ucm 9pnet_virtio 9p; do
    modprobe "$m" || echo "modprobe $m failed"
done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 jobs /host || fail "9p mount"
ip link set lo up
i=0; while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
[ -e /sys/class/net/eth0 ] || fail "no eth0"
ip link set eth0 mtu "$MTU"
ip addr add "$IP" dev eth0
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add"
# librdmacm's device: rdma_ucm's misc device, made by devtmpfs once the module is in.
i=0; while [ ! -c /dev/infiniband/rdma_cm ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
[ -c /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm"

# The RoCE v2 GID whose value is eth0's IPv4 address, mapped.
want=$(echo "${IP%/*}" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1,$2,$3,$4}')
GID= i=0
while [ -z "$GID" ] && [ $i -lt 100 ]; do
    for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
        n=${g##*/}
        if [ "$(cat "$g" 2>/dev/null)" = "$want" ] &&
           [ "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$n 2>/dev/null)" = "RoCE v2" ]; then
            GID=$n; break
        fi
    done
    [ -z "$GID" ] && sleep 0.05
    i=$((i+1))
done
[ -n "$GID" ] || fail "no RoCE v2 GID for $IP"
export GID RXE_DEV=rxe0 RXE_IP="${IP%/*}" PEER
echo "gid=$GID active_mtu=$(ibv_devinfo -d rxe0 | awk '/active_mtu/{print $2; exit}') kernel=$(uname -r)" > /host/ready.tmp
mv /host/ready.tmp /host/ready
echo "RXEVM READY gid=$GID uptime=$(cut -d' ' -f1 /proc/uptime)"

while [ ! -e /host/quit ]; do
    for f in /host/*.sh; do
        [ -e "$f" ] || continue
        j=${f%.sh}
        mv "$f" "$j.run" || continue
        # setsid: the job leads its own process group, so ID.kill ends all of it.
        ( setsid sh "$j.run" > "$j.out" 2>&1 &
          echo $! > "$j.pid"
          wait $!
          echo $? > "$j.rc.tmp"; mv "$j.rc.tmp" "$j.rc" ) &
    done
    for f in /host/*.kill; do
        [ -e "$f" ] || continue
        j=${f%.kill}
        rm -f "$f"
        [ -s "$j.pid" ] && kill -TERM -- "-$(cat "$j.pid")" 2>/dev/null
    done
    sleep 0.05
done
echo "RXEVM EXIT"
umount /host
poweroff -f
sleep 10
