#!/bin/bash
# Builds the interop VM's initramfs (gzip'ed newc cpio) from installed Debian packages only:
# busybox-static, linux-image-amd64 (rdma_rxe, rdma_ucm and their dependencies), ibverbs-providers
# (the rxe provider), ibverbs-utils, rdmacm-utils and perftest (the programs under test, with
# librdmacm1) and iproute2's `rdma`.
#
#   build-initramfs.sh CACHE_DIR      prints the path of CACHE_DIR/initramfs-<kver>.cpio.gz
#
# The image is rebuilt only when a package version or one of these scripts changed (a stamp
# beside it holds their hash), so a test run normally costs nothing here. Exit 77 when no
# kernel with rdma_rxe is installed (the caller turns that into a skip), 1 when a tool is missing
# (an incomplete set-up is a failure, not a skip).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: build-initramfs.sh CACHE_DIR}

kver=
for k in $(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V -r); do
    if [[ -e /lib/modules/$k/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko ]]; then kver=$k; break; fi
done
[[ -n $kver ]] || { echo "build-initramfs: no /boot/vmlinuz-*-amd64 with rdma_rxe.ko (apt-get install linux-image-amd64)" >&2; exit 77; }
for c in busybox rdma ibv_rc_pingpong ib_write_bw rping ucmatose cpio depmod modprobe ldd gzip; do
    command -v "$c" >/dev/null || { echo "build-initramfs: missing $c (tools/setup.sh installs it)" >&2; exit 1; }
done

out=$cache/initramfs-$kver.cpio.gz
pkgs="busybox-static linux-image-$kver libibverbs1 ibverbs-providers ibverbs-utils librdmacm1 rdmacm-utils perftest iproute2 libc6"
stamp=$( { dpkg-query -W $pkgs 2>/dev/null; md5sum "$here"/build-initramfs.sh "$here"/guest-init.sh | cut -d' ' -f1; } | md5sum | cut -d' ' -f1)
if [[ -s $out && -f $out.stamp && $(cat "$out.stamp") == "$stamp" ]]; then
    echo "$out"; exit 0
fi

mkdir -p "$cache"
root=$(mktemp -d "$cache/root.XXXXXX")
trap 'rm -rf "$root"' EXIT
cd "$root"
mkdir -p usr/bin usr/sbin usr/lib/x86_64-linux-gnu usr/lib64 etc proc sys dev tmp run root host
ln -s usr/bin bin; ln -s usr/sbin sbin; ln -s usr/lib lib; ln -s usr/lib64 lib64

copy() {  # copy a file dereferenced, keeping its path (merged /usr)
    local src=$1 dst=${2:-$1}
    case $dst in /lib/*|/lib64/*|/bin/*|/sbin/*) dst=/usr$dst ;; esac
    mkdir -p "$root$(dirname "$dst")"
    cp -L "$src" "$root$dst"
}

cp /usr/bin/busybox usr/bin/busybox
for a in $(/usr/bin/busybox --list-full); do
    d=$(dirname "/$a"); d=${d#/}
    case $d in bin) d=usr/bin ;; sbin) d=usr/sbin ;; "") continue ;; esac
    mkdir -p "$d"
    [[ -e $d/$(basename "$a") ]] || ln -s /usr/bin/busybox "$d/$(basename "$a")"
done

# Only the programs the scenarios run: every ibverbs-utils, rdmacm-utils and perftest binary,
# plus rdma. Debian's own librdmacm comes with them (ldd below): the VM is the reference side.
bins=$( (dpkg -L ibverbs-utils rdmacm-utils perftest | grep -E '^/usr/s?bin/[^/]+$'; command -v rdma) | sort -u)
prov=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so | head -1)
for b in $bins; do [[ -x $b ]] && copy "$b" "/usr/bin/$(basename "$b")"; done
copy "$prov"
mkdir -p etc/libibverbs.d
cp /etc/libibverbs.d/rxe.driver etc/libibverbs.d/
for f in $bins "$prov"; do { ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3} /^\s*\/lib/{print $1}'; done |
    sort -u | while read -r l; do copy "$l"; done
[[ -e usr/lib64/ld-linux-x86-64.so.2 ]] || copy /lib64/ld-linux-x86-64.so.2
copy /lib/x86_64-linux-gnu/libgcc_s.so.1   # glibc dlopen()s it for pthread_exit
cp -a /etc/ld.so.conf /etc/ld.so.conf.d etc/ 2>/dev/null || true
ldconfig -r "$root" 2>/dev/null || true
printf 'root:x:0:0:root:/root:/bin/sh\n' > etc/passwd
printf 'root:x:0:\n' > etc/group
printf '127.0.0.1 localhost\n' > etc/hosts

# rdma_rxe, rdma_ucm (the kernel's rdma_cm and IB CM for librdmacm), virtio-net and 9p (the job
# queue is a host directory) with their dependencies.
mods="virtio_pci virtio_net crc32_generic ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe rdma_ucm 9pnet_virtio 9p"
for m in $mods; do
    modprobe -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}'
done | sort -u | while read -r ko; do
    rel=${ko#/lib/modules/$kver/}; rel=${rel#/usr/lib/modules/$kver/}
    mkdir -p "usr/lib/modules/$kver/$(dirname "$rel")"
    cp "$ko" "usr/lib/modules/$kver/$rel"
done
[[ -n $(find usr/lib/modules -name 'rdma_rxe.ko*') ]] || { echo "build-initramfs: rdma_rxe not resolved" >&2; exit 1; }
for f in modules.order modules.builtin modules.builtin.modinfo; do
    [[ -f /lib/modules/$kver/$f ]] && cp "/lib/modules/$kver/$f" "usr/lib/modules/$kver/"
done
depmod -b "$root" "$kver"
install -m 0755 "$here/guest-init.sh" init

find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -6 > "$out.tmp"
mv "$out.tmp" "$out"
echo "$stamp" > "$out.stamp"
echo "build-initramfs: built $out ($(du -h "$out" | cut -f1), kernel $kver)" >&2
echo "$out"
