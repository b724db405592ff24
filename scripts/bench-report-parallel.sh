#!/usr/bin/env bash
# How `sharecheck report` scales with the CPUs reading traces (issue 27), on the simulated driver.
#
# Usage: scripts/bench-report-parallel.sh [--no-build] [--ipc] [PROCESSES] [RECORDS_EACH] [JOBS...]
#
# Builds release (skipped with --no-build; SHARECHECK_BIN names another build's directory, holding
# sharecheck, libsharecheck.so, libsharecheck_sim.so and libsharecheck_sim_hip.so), writes PROCESSES traces (default 32) of
# RECORDS_EACH correct calls each (default 250000) with the shim on the simulator
# (scripts/bench/report_load.c), then times `sharecheck report --jobs N` for each N of JOBS
# (default 1 2 4 8 16, those above the CPUs skipped) and prints a Markdown table: seconds, records
# a second, records a second per thread, speed-up over one thread, peak RSS, then the seconds of
# each phase of the report (SHARECHECK_REPORT_PHASES). Fails if any report differs from the
# one-thread report. The traces are removed afterwards.
#
# --ipc: the load is PROCESSES jobs of scripts/bench/ipc_history.c (a worker opens and closes one
# exported buffer RECORDS_EACH / 2 times; two traces each), every call one the cross-process checks
# keep: what their walk costs, shared among the threads. Needs cuda.h (CUDA_INCLUDE, else
# .deps/cuda/nvidia/cu13/include, else /usr/local/cuda/include).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
ipc=0
if [ "${1:-}" = "--ipc" ]; then ipc=1; shift; fi
processes="${1:-32}"
each="${2:-250000}"
shift $(( $# > 2 ? 2 : $# ))
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(1 2 4 8 16)
[ "$build" = 1 ] && cargo build --release --workspace -q
bin="${SHARECHECK_BIN:-$ROOT/target/release}"
cli="$bin/sharecheck"
cpus=$(nproc)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ "$ipc" = 1 ]; then
    include="${CUDA_INCLUDE:-$ROOT/.deps/cuda/nvidia/cu13/include}"
    [ -f "$include/cuda.h" ] || include=/usr/local/cuda/include
    [ -f "$include/cuda.h" ] || { echo "bench-report-parallel.sh: --ipc needs cuda.h (CUDA_INCLUDE)" >&2; exit 1; }
    # Linked against the simulator under the driver's name, as LD_PRELOAD.md says.
    mkdir -p "$tmp/lib"
    ln -s "$bin/libsharecheck_sim.so" "$tmp/lib/libcuda.so"
    cc -O2 -I"$include" -o "$tmp/history" scripts/bench/ipc_history.c -L"$tmp/lib" -lcuda
    set -- "$tmp/history" reopen $(( each / 2 ))
else
    cc -O2 -o "$tmp/load" scripts/bench/report_load.c -ldl
    set -- "$tmp/load" "$each"
fi
# Every process at once, a CPU each, each run in a directory of its own (a run folds the rings
# left in its directory when it ends: not those of processes other runs are still writing).
seq "$processes" | xargs -P "$cpus" -I{} "$cli" run --sim -q --trace "$tmp/traces/{}/%p.jsonl" -- "$@"
records=$(find "$tmp/traces" -name '*.jsonl' -exec cat {} + | wc -l)
bytes=$(du -sb "$tmp/traces" | cut -f1)
echo "$(find "$tmp/traces" -name '*.jsonl' | wc -l) traces, $records records, $(( bytes / 1000000 )) MB, $cpus CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
echo
echo "| threads (--jobs) | seconds | records/s | records/s per thread | speed-up | peak RSS MB |"
echo "|---:|---:|---:|---:|---:|---:|"
base=""
for j in "${jobs[@]}"; do
    [ "$j" -le "$cpus" ] || continue
    start=$(date +%s.%N)
    if [ -x /usr/bin/time ]; then
        SHARECHECK_REPORT_PHASES=1 /usr/bin/time -f "%M" -o "$tmp/rss" "$cli" report --jobs "$j" "$tmp"/traces/* > "$tmp/report-$j.txt" 2> "$tmp/phases-$j"
        rss=$(( $(tail -1 "$tmp/rss") / 1024 ))
    else
        SHARECHECK_REPORT_PHASES=1 "$cli" report --jobs "$j" "$tmp"/traces/* > "$tmp/report-$j.txt" 2> "$tmp/phases-$j"
        rss="?"
    fi
    end=$(date +%s.%N)
    if [ -f "$tmp/report-1.txt" ] && ! cmp -s "$tmp/report-1.txt" "$tmp/report-$j.txt"; then
        echo "bench-report-parallel.sh: the report with --jobs $j differs from --jobs 1" >&2
        diff "$tmp/report-1.txt" "$tmp/report-$j.txt" | head -20 >&2
        exit 1
    fi
    awk -v j="$j" -v s="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" -v r="$records" -v b="${base:-0}" -v m="$rss" 'BEGIN {
        rate = r / s; printf "| %d | %.2f | %.0f | %.0f | %s | %s |\n", j, s, rate, rate / j, (b > 0 ? sprintf("%.1fx", b / s) : "1.0x"), m }'
    [ -n "$base" ] || base=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
done
# Where the time went (SHARECHECK_REPORT_PHASES), phase by phase, for each number of threads.
echo
echo "| phase (seconds) |$(for j in "${jobs[@]}"; do [ "$j" -le "$cpus" ] && printf ' %s |' "$j"; done)"
echo "|---|$(for j in "${jobs[@]}"; do [ "$j" -le "$cpus" ] && printf -- '---:|'; done)"
for p in "read a batch" "merge the batch" "read and merge" "finish the timeline" "cross-process checks" "findings" "write the report"; do
    row="| $p |"
    for j in "${jobs[@]}"; do
        [ "$j" -le "$cpus" ] || continue
        row="$row $(awk -v p="sharecheck: phase $p:" 'index($0, p) == 1 { s += $(NF - 1) } END { printf "%.3f", s }' "$tmp/phases-$j") |"
    done
    echo "$row"
done
