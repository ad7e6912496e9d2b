#!/usr/bin/env bash
# Interoperability with Linux Soft-RoCE: runs tests/interop/run_interop.py (one qemu VM with
# rdma_rxe, rnicd on the host side of a private namespace) against the build in build/ (or
# $RNIC_BUILD_DIR); with `cm` first, tests/interop/run_interop_cm.py (rdma_cm: rdmacm-utils and
# perftest -R over the VM's librdmacm and ours). Needs root and the packages tools/setup.sh
# installs. Examples:
#   tools/interop.sh                                         every scenario, both directions
#   tools/interop.sh --list                                  the scenario names
#   tools/interop.sh --only '^ibv_rc_pingpong -m 1024' --direction vm-client --workdir /tmp/ix
#   tools/interop.sh cm                                      rdma_cm, every phase
#   tools/interop.sh cm --phases reference,tools --only rping --workdir /tmp/ixcm
# Captures (bridge-*.pcap, rnicd-*.pcap), the VM console and results.json stay in --workdir.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RNIC_BUILD_DIR:-$root/build}
if [[ ${1:-} == cm ]]; then
    shift
    exec /usr/bin/python3 "$root/tests/interop/run_interop_cm.py" --rnicd "$build/emulator/daemon/rnicd" \
        --rnic-run "$build/verbs_shim/rnic-run" --rnic-pcap "$build/tools/rnic-pcap" \
        --rnicctl "$build/tools/rnicctl" "$@"
fi
exec /usr/bin/python3 "$root/tests/interop/run_interop.py" --rnicd "$build/emulator/daemon/rnicd" \
    --rnic-run "$build/verbs_shim/rnic-run" --rnic-pcap "$build/tools/rnic-pcap" \
    --rdma-check "$build/tests/interop/rdma_check" "$@"
