#!/usr/bin/env bash
# Bounded libFuzzer run of the parser, seeded from the golden rxe captures and the library's
# own capture. A crashing input is kept in ARTIFACT_DIR (default: the current directory) and
# hex-dumped into the log. Usage: run-fuzzer.sh FUZZER SECONDS GOLDEN_DIR SAMPLE_PCAP [ARTIFACT_DIR]
set -euo pipefail
fuzzer=$(realpath "$1") seconds=$2 golden=$3 sample=$4 artifacts=${5:-$PWD}
mkdir -p "$artifacts"
work=$(mktemp -d /tmp/rnic-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$(dirname "$0")/../../tools/pcap-to-corpus.py" "$work/corpus" "$golden"/*.pcap "$sample"
rm -f "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-*
status=0
(cd "$work" && "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" corpus) > "$work/log" 2>&1 || status=$?
grep -E "INITED|DONE|ERROR|SUMMARY|stat::|^ *#[0-9]+ 0x" "$work/log" | head -n 60 || true
for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-*; do
  [[ -e $f ]] && { echo "== $f"; od -A d -t x1 "$f" | head -n 20; }
done
exit "$status"
