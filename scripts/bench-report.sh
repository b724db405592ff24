#!/usr/bin/env bash
# How fast `sharecheck report` reads traces, and how much memory it takes, on this machine.
#
# Usage: scripts/bench-report.sh [--no-build] [RECORDS] [FINDINGS]
#
# Builds release (skipped with --no-build), writes two traces with the shim on the simulated
# driver (scripts/bench/report_load.c): RECORDS correct calls (default 2000000) and FINDINGS calls
# that each carry a finding with its call stack (default 200000), then times `sharecheck report`
# on each (text, and json/sarif for the findings), and prints records per second and peak RSS
# (GNU time's %M) as a Markdown table; then the partial result of each (`report --partial`) and the
# report of it. The traces are removed afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
records="${1:-2000000}"
findings="${2:-200000}"
[ "$build" = 1 ] && cargo build --release --workspace -q
command -v /usr/bin/time >/dev/null || { echo "bench-report.sh: needs GNU time (/usr/bin/time)" >&2; exit 1; }
cli="$ROOT/target/release/sharecheck"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/load" scripts/bench/report_load.c -ldl
"$cli" run --sim -q --trace "$tmp/plain/%p.jsonl" -- "$tmp/load" "$records"
"$cli" run --sim -q --trace "$tmp/found/%p.jsonl" -- "$tmp/load" "$findings" bad 2>/dev/null || true
bytes() { du -sb "$1" | cut -f1; }
echo "| trace | records | MB | format | seconds | records/s | peak RSS MB |"
echo "|---|---|---|---|---|---|---|"
measure() { # name dir records format
    local out
    out="$( { /usr/bin/time -f "%e %M" "$cli" report --format "$4" "$2" > /dev/null; } 2>&1 | tail -1)"
    read -r secs kb <<< "$out"
    awk -v n="$1" -v r="$3" -v b="$(bytes "$2")" -v f="$4" -v s="$secs" -v k="$kb" 'BEGIN {
        printf "| %s | %d | %.0f | %s | %.2f | %.0f | %.1f |\n", n, r, b / 1e6, f, s, (s > 0 ? r / s : 0), k / 1024 }'
}
measure "correct calls" "$tmp/plain" "$records" text
measure "calls with findings" "$tmp/found" "$findings" text
measure "calls with findings" "$tmp/found" "$findings" json
measure "calls with findings" "$tmp/found" "$findings" sarif
# A partial result (`report --partial`, the per-host step of a cluster's review) of each trace,
# then the report of the partial result: how much smaller it is, and what each step takes.
echo
echo "| trace | partial step: seconds | MB in | MB out | report of the partial: seconds | peak RSS MB |"
echo "|---|---|---|---|---|---|"
partial() { # name dir
    local out1 out2
    /usr/bin/time -o "$tmp/time" -f "%e" "$cli" report --partial "$tmp/partial-$1" "$2" > /dev/null 2>&1
    out1="$(tail -1 "$tmp/time")"
    out2="$( { /usr/bin/time -f "%e %M" "$cli" report "$tmp/partial-$1" > /dev/null; } 2>&1 | tail -1)"
    read -r secs2 kb <<< "$out2"
    awk -v n="$1" -v s1="$out1" -v i="$(bytes "$2")" -v o="$(bytes "$tmp/partial-$1")" -v s2="$secs2" -v k="$kb" 'BEGIN {
        printf "| %s | %.2f | %.0f | %.1f | %.2f | %.1f |\n", n, s1, i / 1e6, o / 1e6, s2, k / 1024 }'
}
partial "correct calls" "$tmp/plain"
partial "calls with findings" "$tmp/found"
