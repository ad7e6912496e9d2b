#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds both trees, runs every CTest test
# (unit, sanitizer, fuzzer, tshark and rnic-pcap system tests). The last line is CTest's count.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
