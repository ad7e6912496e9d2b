#!/usr/bin/env bash
# Bounded libFuzzer run of the host service under hostile clients (tests/fuzz/fuzz_host_service),
# seeded by the programs fuzz_host_seeds writes. A crashing input is kept in ARTIFACT_DIR (default:
# the current directory) and hex-dumped into the log; replay it with
# `RNIC_FUZZ_TRACE=1 fuzz_host_service FILE` to read what it did.
# Usage: run-host-fuzzer.sh FUZZER SEEDS_PROGRAM SECONDS [ARTIFACT_DIR [CORPUS_DIR]]
# CORPUS_DIR, when given, is kept (and grows) across runs; otherwise a temporary one is used.
set -euo pipefail
fuzzer=$(realpath "$1") seeds=$(realpath "$2") seconds=$3 artifacts=${4:-$PWD}
mkdir -p "$artifacts"
artifacts=$(realpath "$artifacts")
work=$(mktemp -d /tmp/rnic-host-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
corpus=${5:-$work/corpus}
mkdir -p "$corpus"
"$seeds" "$corpus"
rm -f "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-* "$artifacts"/slow-unit-*
status=0
# -entropic=0: with this target's tens of thousands of features the entropic schedule's
# bookkeeping took more time than the runs themselves.
(cd "$work" && "$fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=3072 -max_len=2048 -entropic=0 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus") > "$work/log" 2>&1 || status=$?
grep -E "INITED|DONE|ERROR|SUMMARY|invariant|stat::|^ *#[0-9]+ 0x" "$work/log" | head -n 80 || true
for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
  [[ -e $f ]] && { echo "== $f"; od -A d -t x1 "$f" | head -n 20; }
done
exit "$status"
