#!/usr/bin/env bash
# How `sharecheck report` scales with one handle's history (issue 27), on the simulated driver.
#
# Usage: scripts/bench-history.sh [--no-build] [REOPEN_STEPS...] [-- REALLOC_ROUNDS...]
#
# Builds release (skipped with --no-build), then for each size runs scripts/bench/ipc_history.c
# under `sharecheck run --sim` (reopen: a worker opens and closes one exported buffer N times;
# realloc: N rounds of allocate, export, open and close in the worker, free, the allocator handing
# out the same address each round) and times `sharecheck report` of its traces (text to
# /dev/null), printing a Markdown table: the steps the handle went through, the trace's size, the
# report's seconds and peak RSS (GNU time's %M). Defaults: reopen 2000 8000 100000, realloc 400
# 800 10000. Every program is correct: a report with a finding is a false alarm and fails the run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
reopen=()
realloc=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do reopen+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
realloc=("$@")
[ ${#reopen[@]} -gt 0 ] || reopen=(2000 8000 100000)
[ ${#realloc[@]} -gt 0 ] || realloc=(400 800 10000)
[ "$build" = 1 ] && cargo build --release --workspace -q
command -v /usr/bin/time >/dev/null || { echo "bench-history.sh: needs GNU time (/usr/bin/time)" >&2; exit 1; }
cli="$ROOT/target/release/sharecheck"
include="$ROOT/.deps/cuda/nvidia/cu13/include"
[ -f "$include/cuda.h" ] || { echo "bench-history.sh: no cuda.h in $include (scripts/fetch-deps.sh)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Linked against the simulator under the driver's name, as LD_PRELOAD.md says.
mkdir -p "$tmp/lib"
ln -s "$ROOT/target/release/libsharecheck_sim.so" "$tmp/lib/libcuda.so"
cc -O2 -I"$include" -o "$tmp/ipc_history" scripts/bench/ipc_history.c -L"$tmp/lib" -lcuda
echo "| program | steps of the handle | trace MB | report seconds | report peak RSS MB |"
echo "|---|---:|---:|---:|---:|"
measure() { # mode N steps
    rm -rf "$tmp/trace"
    "$cli" run --sim -q --trace "$tmp/trace/%p.jsonl" -- "$tmp/ipc_history" "$1" "$2"
    local out secs kb
    out="$( { /usr/bin/time -f "%e %M" "$cli" report "$tmp/trace" > "$tmp/report.txt"; } 2>&1 | tail -1)"
    read -r secs kb <<< "$out"
    if ! grep -q "^SUMMARY: 0 errors, 0 warnings, 0 infos" "$tmp/report.txt"; then
        echo "bench-history.sh: the report of a correct program has findings:" >&2
        grep -v "^ " "$tmp/report.txt" | head -20 >&2
        exit 1
    fi
    awk -v m="$1" -v n="$2" -v st="$3" -v b="$(du -sb "$tmp/trace" | cut -f1)" -v s="$secs" -v k="$kb" 'BEGIN {
        printf "| %s %d | %d | %.0f | %.2f | %.1f |\n", m, n, st, b / 1e6, s, k / 1024 }'
}
for n in "${reopen[@]}"; do measure reopen "$n" $((2 * n + 2)); done
for n in "${realloc[@]}"; do measure realloc "$n" $((4 * n)); done
