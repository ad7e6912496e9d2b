#!/usr/bin/env bash
# Bounded libFuzzer run of the parser, seeded from the golden rxe captures and the library's
# own capture. Usage: run-fuzzer.sh FUZZER SECONDS GOLDEN_DIR SAMPLE_PCAP
set -euo pipefail
fuzzer=$1 seconds=$2 golden=$3 sample=$4
work=$(mktemp -d /tmp/rnic-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$(dirname "$0")/../../tools/pcap-to-corpus.py" "$work/corpus" "$golden"/*.pcap "$sample"
cd "$work"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 corpus 2>&1 | tail -n 25
