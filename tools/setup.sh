#!/usr/bin/env bash
# Installs the Debian packages the project needs and builds it. Idempotent and non-interactive;
# run as root on Debian 12.
#   tools/setup.sh             everything (the test suite): every package, both trees, every target
#   tools/setup.sh --main      only what the main job (tools/run-demo.sh) needs: its packages and,
#                              in build/, only rnicd, the drop-in libibverbs.so.1, rnic-sysfs and
#                              rnic-pcap (docs/packaging.md: "First run", measured)
#   tools/setup.sh --deb       only what tools/build-deb.sh needs to build the package, no build
#   tools/setup.sh --no-build  every package, no build
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case $mode in all|--main|--deb|--no-build) ;; *) echo "usage: tools/setup.sh [--main|--deb|--no-build]" >&2; exit 2 ;; esac

# The main job's packages: the compiler, the libraries `cmake -S .` requires (catch2 and Python
# only for the configure step), DPDK with its af_packet driver, the namespaces (iproute2,
# nftables), Debian's ibv_rc_pingpong and tshark. Everything else is the test suite's.
main_packages=(
  build-essential cmake pkg-config
  catch2 zlib1g-dev libisal-dev libpcap-dev nlohmann-json3-dev libibverbs-dev python3
  libdpdk-dev librte-net-af-packet23 libspdlog-dev libboost-dev
  iproute2 nftables ibverbs-utils tshark
)

packages=(
  build-essential cmake pkg-config git
  catch2 zlib1g-dev libisal-dev libpcap-dev nlohmann-json3-dev libibverbs-dev librdmacm-dev
  clang libclang-rt-14-dev libbpf-dev
  tshark python3 python3-scapy
  # tools/plot-incast.py (the DCQCN incast plots of docs/congestion.md and their CTest)
  python3-matplotlib
  libdpdk-dev librte-net-af-packet23 libspdlog-dev libboost-dev
  iproute2 nftables iputils-ping iperf3 sockperf
  perftest ibverbs-utils rdmacm-utils python3-pyverbs infiniband-diags
  # middleware that must run unmodified over rnicd (issue 14): UCX, Open MPI over UCX, libfabric
  ucx-utils openmpi-bin libopenmpi-dev libfabric-bin
  # interop with Linux Soft-RoCE (tests/interop): a qemu VM booting Debian's kernel (rdma_rxe)
  # from an initramfs built out of these packages
  qemu-system-x86 linux-image-amd64 busybox-static kmod cpio libibverbs1 ibverbs-providers
  # the Debian package and its service (docs/packaging.md): CPack's shlibdeps needs file(1);
  # the tests verify the unit with systemd-analyze and check the package with lintian
  file systemd lintian
)
[[ $mode == --main ]] && packages=("${main_packages[@]}")
# The package holds librdmacm.so.1 too (rdma_cma.h); CPack's shlibdeps runs file(1).
[[ $mode == --deb ]] && packages=("${main_packages[@]}" librdmacm-dev file)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer it up front.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  # iperf3 asks whether to run a system-wide server; the benchmarks start their own.
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[[ $mode == --no-build || $mode == --deb ]] && exit 0

jobs=$(nproc)
if [[ $mode == --main ]]; then
  # One tree, the main job's targets only (rnic-run is written at configure time).
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j "$jobs" --target rnicd rnic_verbs_shim rnic-sysfs rnic-pcap
  exit 0
fi
# The main tree (g++) and a clang tree with ASan+UBSan and the libFuzzer targets; the main
# tree registers the sanitizer tree's tests, so one ctest run covers both.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DRNIC_SANITIZE=ON -DRNIC_FUZZ=ON >/dev/null
cmake --build build-asan -j "$jobs"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNIC_SANITIZER_BUILD_DIR="$PWD/build-asan" >/dev/null
cmake --build build -j "$jobs"
