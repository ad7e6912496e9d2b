#!/usr/bin/env bash
# rnic-pcap's exit statuses: 0 sound, 2 usage or unreadable file (never a crash).
set -u
tool=$1 sample=$2
fail=0
expect() {  # expect STATUS -- ARGS...
  local want=$1; shift 2
  "$tool" "$@" >/dev/null 2>&1
  local got=$?
  if [[ $got != "$want" ]]; then echo "rnic-pcap $*: exit $got, expected $want"; fail=1; fi
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'this is not a capture' > "$tmp/garbage.pcap"
head -c 100 "$sample" > "$tmp/cut.pcap"
expect 0 -- "$sample"
expect 0 -- --quiet "$sample"
expect 2 --
expect 2 -- --bogus "$sample"
expect 2 -- "$tmp/missing.pcap"
expect 2 -- "$tmp/garbage.pcap"
expect 2 -- "$tmp/cut.pcap"
"$tool" --json "$sample" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin)["files"][0]; sys.exit(0 if d["frames"]==d["icrc_ok"]==len(d["packets"]) else 1)' \
  || { echo "--json output inconsistent"; fail=1; }
exit $fail
