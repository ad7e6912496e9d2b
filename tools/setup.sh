#!/usr/bin/env bash
# Installs every Debian package the project needs and builds it. Idempotent and
# non-interactive; run as root on Debian 12. Usage: tools/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

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
)

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

[[ "${1:-}" == "--no-build" ]] && exit 0

jobs=$(nproc)
# The main tree (g++) and a clang tree with ASan+UBSan and the libFuzzer targets; the main
# tree registers the sanitizer tree's tests, so one ctest run covers both.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DRNIC_SANITIZE=ON -DRNIC_FUZZ=ON >/dev/null
cmake --build build-asan -j "$jobs"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNIC_SANITIZER_BUILD_DIR="$PWD/build-asan" >/dev/null
cmake --build build -j "$jobs"
