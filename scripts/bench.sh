#!/usr/bin/env bash
# The benchmark: what the shim adds to single driver calls, on the simulated driver.
#
# Usage: scripts/bench.sh [--traced] [--no-build] [--rounds N] [--threads T] [--reps R]
#                         [--loop-ms MS] [--ab-procs P]
#
# Builds release (`cargo build --release --workspace`; skipped with --no-build or
# BENCH_NO_BUILD=1), compiles scripts/bench/bench.c against the simulated driver
# (target/release/libsharecheck_sim.so standing in as libcuda.so.1), then runs it plain and with
# the shim (LD_PRELOAD=target/release/libsharecheck.so, SHARECHECK_CUDA_LIBRARY = the simulator),
# interleaved for N rounds, on 1 thread and on T threads at once, and prints Markdown tables
# (case | plain ns | shim ns | overhead ns | ...) ready to paste into an issue. The shim runs are
# untraced; --traced adds runs with SHARECHECK_TRACE=$tmp/%p.jsonl, their tables, and the bytes
# written per trace record.
#
# Cases (scripts/bench/bench.c, which describes each): one per class of covered call. The peer
# copies on both stream kinds and the synchronous one, the observed copy and memset, stream
# attach, cuIpcGetMemHandle, cuDeviceCanAccessPeer, cuMemAlloc_v2 + cuMemFree_v2 (per pair), and
# ctx_get_current, device_get_count and pointer_get_attribute (not interposed, so +0 is expected).
# Every call is a correct use: the script fails loudly if any run writes on stderr (a finding on
# this path would be a false alarm).
#
# Options (and environment): --traced (BENCH_TRACED=1), --no-build (BENCH_NO_BUILD=1),
# --rounds N (BENCH_ROUNDS, 9), --threads T (BENCH_THREADS, 16), --reps R (BENCH_REPS, 15: timed
# loops per case and run), --loop-ms MS (BENCH_LOOP_MS, 2: N per case is calibrated so that a
# loop of the slower mode takes about MS on one thread; plain and shim run the same N),
# --ab-procs P (BENCH_AB_PROCS, 1: the in-process A/B's processes per mode and round, whose
# median is the round's figure; scripts/gpu-bench.sh takes 5),
# CC (the C compiler, cc), BENCH_RUN_TIMEOUT (seconds per run, 300). The default run takes under
# a minute on 2 cores, --traced about half as long again.
set -euo pipefail

usage() { echo "usage: scripts/bench.sh [--traced] [--no-build] [--rounds N] [--threads T] [--reps R] [--loop-ms MS] [--ab-procs P]"; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
bench_parse_args bench.sh 1 "$@"

SHIM="$ROOT/target/release/libsharecheck.so"
SIM="$ROOT/target/release/libsharecheck_sim.so"
if [[ $NO_BUILD == 1 ]]; then
    bench_progress "--no-build: using the existing release build"
else
    bench_progress "cargo build --release --workspace"
    cargo build --release --workspace >&2
fi
for f in "$SHIM" "$SIM"; do
    [[ -f $f ]] || bench_fail "$f is missing: run cargo build --release --workspace (or drop --no-build)"
done

BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sharecheck-bench.XXXXXX")
trap 'rm -rf "$BENCH_TMP"' EXIT

# The simulated driver under the names a -lcuda program links and loads.
mkdir -p "$BENCH_TMP/lib"
ln -s "$SIM" "$BENCH_TMP/lib/libcuda.so"
ln -s "$SIM" "$BENCH_TMP/lib/libcuda.so.1"
BENCH_BIN="$BENCH_TMP/bench"
bench_progress "${CC:-cc} -O2 -Wall -Wextra scripts/bench/bench.c -lcuda (the simulator)"
"${CC:-cc}" -O2 -Wall -Wextra -o "$BENCH_BIN" scripts/bench/bench.c -L"$BENCH_TMP/lib" -lcuda -lpthread -ldl \
    || bench_fail "compiling scripts/bench/bench.c failed"

# Both modes load the same simulator; only the shim differs. No inherited trace or log setting.
unset SHARECHECK_TRACE SHARECHECK_LOG
COMMON_ENV=("LD_LIBRARY_PATH=$BENCH_TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    "SHARECHECK_SIM_STATE_DIR=$BENCH_TMP/sim-state")
PLAIN_ENV=("${COMMON_ENV[@]}")
SHIM_ENV=("${COMMON_ENV[@]}" "LD_PRELOAD=$SHIM${LD_PRELOAD:+:$LD_PRELOAD}" "SHARECHECK_CUDA_LIBRARY=$SIM")

bench_header() {
    local dirty=""
    git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || dirty=" (with uncommitted changes)"
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) CPU(s): $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$dirty; shim $(stat -c '%s bytes, built %y' "$SHIM" | cut -d. -f1)"
    local sim_env
    sim_env=$(env | grep '^SHARECHECK_SIM_' | grep -v '^SHARECHECK_SIM_STATE_DIR=' | sort | paste -sd' ' || true)
    echo "- driver: the simulated driver (target/release/libsharecheck_sim.so as libcuda.so.1;" \
        "${sim_env:-its defaults})${SHARECHECK_OPTIONS:+; SHARECHECK_OPTIONS=$SHARECHECK_OPTIONS}"
}

bench_main
