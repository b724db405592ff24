#!/usr/bin/env bash
# The benchmark of scripts/bench.sh on a real GPU machine: plain driver vs shim, side by side.
#
# Usage: scripts/gpu-bench.sh [--traced] [--rounds N] [--threads T] [--reps R] [--loop-ms MS]
#                             [--ab-procs P]
#
# Needs gcc (or $CC), the NVIDIA driver's libcuda.so.1 and the prebuilt shim
# target/release/libsharecheck.so (carried from a machine with Rust: cargo build --release
# --workspace); no Rust, no CUDA toolkit, no network. Compiles scripts/bench/bench.c with
# -lcuda (-l:libcuda.so.1 where the libcuda.so link is missing), then runs it plain and with
# LD_PRELOAD=libsharecheck.so, interleaved, on 1 and on T threads, and prints the same Markdown
# tables as scripts/bench.sh (see there for the cases and the columns). Exits 1, loudly, if a run
# fails or anything is written on stderr (every call of the bench is a correct use, so a finding
# would be a false alarm). The bench makes no multicast object and starts nothing that could
# (NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 are set anyway).
#
# Output: the report on stdout; when $OUT is set also $OUT/gpu-bench.txt (the report, or why it
# failed), $OUT/gpu-bench.log (progress), $OUT/gpu-bench-results.tsv (every run's figures) and
# $OUT/gpu-bench-ab.tsv (every A/B process's: mode, round, case, linked, driver, difference, unit).
#
# Environment: BENCH_SHIM (the shim, default target/release/libsharecheck.so),
# BENCH_LIBCUDA_DIR (a directory holding the libcuda.so.1 to use, also put on LD_LIBRARY_PATH;
# default: the one the dynamic linker finds, `ldconfig -p`), CC (gcc), and the options' variables
# BENCH_TRACED, BENCH_ROUNDS (9), BENCH_THREADS (16), BENCH_REPS (15), BENCH_LOOP_MS (2),
# BENCH_AB_PROCS (5: the in-process A/B's processes per mode and round, whose median is the
# round's figure; on R580 a process's figure falls in one of two modes, about 20 ns apart for
# some cases), BENCH_RUN_TIMEOUT (seconds per run, 300).
set -euo pipefail
# Never touch NVLink multicast (NVLS) from anything started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

usage() { echo "usage: scripts/gpu-bench.sh [--traced] [--rounds N] [--threads T] [--reps R] [--loop-ms MS] [--ab-procs P]"; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
DEFAULT_AB_PROCS=5
bench_parse_args gpu-bench.sh 0 "$@"

BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/sharecheck-gpu-bench.XXXXXX")
if [[ -n ${OUT:-} ]]; then
    mkdir -p "$OUT"
    exec 2> >(tee "$OUT/gpu-bench.log" >&2)
fi
finish() {
    local rc=$?
    if [[ -n ${OUT:-} ]]; then
        if [[ $rc -eq 0 && -s $BENCH_TMP/report.txt ]]; then
            cp "$BENCH_TMP/report.txt" "$OUT/gpu-bench.txt"
        else
            {
                echo "gpu-bench FAILED (exit status $rc); the end of gpu-bench.log:"
                echo
                tail -n 40 "$OUT/gpu-bench.log" 2>/dev/null || true
            } >"$OUT/gpu-bench.txt"
        fi
        [[ -s $BENCH_TMP/results.tsv ]] && cp "$BENCH_TMP/results.tsv" "$OUT/gpu-bench-results.tsv"
        [[ -s $BENCH_TMP/ab.tsv ]] && cp "$BENCH_TMP/ab.tsv" "$OUT/gpu-bench-ab.tsv"
    fi
    rm -rf "$BENCH_TMP"
    return "$rc"
}
trap finish EXIT

SHIM=${BENCH_SHIM:-$ROOT/target/release/libsharecheck.so}
[[ -f $SHIM ]] || bench_fail "the shim $SHIM is missing: build it (cargo build --release --workspace) and carry target/release/libsharecheck.so here, or set BENCH_SHIM"
SHIM=$(cd "$(dirname "$SHIM")" && pwd)/$(basename "$SHIM")
CC=${CC:-gcc}
command -v "$CC" >/dev/null || bench_fail "no C compiler '$CC' (set CC)"

# The ELF machine (bytes 18-19) of a file, to pick the libcuda.so.1 of this architecture.
elf_machine() { od -An -tx1 -j18 -N2 "$1" 2>/dev/null | tr -d ' \n'; }

# The libcuda.so.1 to use: BENCH_LIBCUDA_DIR, else what ldconfig knows, else the usual places.
# Never a stub library (the CUDA toolkit's lib64/stubs): it only links, it does not run.
find_libcuda() {
    local c want
    want=$(elf_machine /proc/self/exe)
    if [[ -n ${BENCH_LIBCUDA_DIR:-} ]]; then
        [[ -e $BENCH_LIBCUDA_DIR/libcuda.so.1 ]] || return 1
        echo "$BENCH_LIBCUDA_DIR/libcuda.so.1"
        return 0
    fi
    while read -r c; do
        [[ -e $c && $c != */stubs/* && $(elf_machine "$c") == "$want" ]] && { echo "$c"; return 0; }
    done < <(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF }'
        for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib \
            /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/wsl/lib /usr/local/cuda/compat; do
            echo "$d/libcuda.so.1"
        done)
    return 1
}

LIBCUDA=$(find_libcuda) || bench_fail "no libcuda.so.1 found (ldconfig -p, the usual directories${BENCH_LIBCUDA_DIR:+, BENCH_LIBCUDA_DIR=$BENCH_LIBCUDA_DIR}); set BENCH_LIBCUDA_DIR"
LIBCUDA_DIR=$(dirname "$LIBCUDA")
bench_progress "libcuda.so.1: $LIBCUDA -> $(readlink -f "$LIBCUDA")"

BENCH_BIN="$BENCH_TMP/bench"
if [[ -e $LIBCUDA_DIR/libcuda.so ]]; then
    LINK=(-L"$LIBCUDA_DIR" -lcuda)
else
    LINK=(-L"$LIBCUDA_DIR" -l:libcuda.so.1)
fi
bench_progress "$CC -O2 -Wall -Wextra scripts/bench/bench.c ${LINK[*]} -lpthread -ldl"
"$CC" -O2 -Wall -Wextra -o "$BENCH_BIN" scripts/bench/bench.c "${LINK[@]}" -lpthread -ldl \
    || bench_fail "compiling scripts/bench/bench.c failed"

# Run against that library: through LD_LIBRARY_PATH when asked for, or when the dynamic linker
# would not find it (or would find another one) by itself.
unset SHARECHECK_TRACE SHARECHECK_LOG SHARECHECK_CUDA_LIBRARY
RUN_LD_PATH=${LD_LIBRARY_PATH:-}
resolved() { env LD_LIBRARY_PATH="$RUN_LD_PATH" ldd "$BENCH_BIN" 2>/dev/null | awk '/libcuda\.so/ { print $3; exit }'; }
if [[ -n ${BENCH_LIBCUDA_DIR:-} || $(readlink -f "$(resolved)" 2>/dev/null) != "$(readlink -f "$LIBCUDA")" ]]; then
    RUN_LD_PATH="$LIBCUDA_DIR${RUN_LD_PATH:+:$RUN_LD_PATH}"
fi
LOADED=$(resolved)
[[ -n $LOADED && $(readlink -f "$LOADED") == "$(readlink -f "$LIBCUDA")" ]] \
    || bench_fail "the bench would load '${LOADED:-nothing}' as libcuda, not $LIBCUDA (ldd: $(env LD_LIBRARY_PATH="$RUN_LD_PATH" ldd "$BENCH_BIN" 2>&1 | grep -i cuda || true))"
bench_progress "the bench loads $LOADED${RUN_LD_PATH:+ (LD_LIBRARY_PATH=$RUN_LD_PATH)}"

# The state directory is read only by the simulated driver (when it stands in, for a test of
# this script): kept inside the scratch directory, so nothing is left behind.
COMMON_ENV=("SHARECHECK_SIM_STATE_DIR=$BENCH_TMP/sim-state")
if [[ -n $RUN_LD_PATH ]]; then COMMON_ENV+=("LD_LIBRARY_PATH=$RUN_LD_PATH"); fi
PLAIN_ENV=("${COMMON_ENV[@]}")
SHIM_ENV=("${COMMON_ENV[@]}" "LD_PRELOAD=$SHIM${LD_PRELOAD:+:$LD_PRELOAD}")

# Which driver the shim forwards to (its debug log says), once, before the measured runs.
FORWARDS=$(env "${SHIM_ENV[@]}" SHARECHECK_LOG=debug timeout "$RUN_TIMEOUT" "$BENCH_BIN" --probe 2>&1 >/dev/null \
    | grep -m1 'cuda driver' || true)
[[ -n $FORWARDS ]] || bench_fail "the shim did not say which CUDA driver it forwards to (SHARECHECK_LOG=debug, bench --probe)"
bench_progress "shim: $FORWARDS"

bench_header() {
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n) ($(uname -r)), $(nproc) CPU(s): $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>/dev/null \
            | sed 's/^/- GPU /' || echo "- nvidia-smi failed"
    else
        echo "- nvidia-smi: not found"
    fi
    echo "- driver library: $LIBCUDA -> $(readlink -f "$LIBCUDA"); the shim's log: ${FORWARDS#sharecheck: debug: }"
    echo "- shim: $SHIM ($(stat -c '%s bytes, built %y' "$SHIM" | cut -d. -f1), sha256 $(sha256sum "$SHIM" | cut -c1-16)); repo commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (a copied tree may carry an older .git: the sha256 names the build)"
    echo "- compiler: $("$CC" --version | head -n1); linked with ${LINK[*]}${SHARECHECK_OPTIONS:+; SHARECHECK_OPTIONS=$SHARECHECK_OPTIONS}"
}

bench_main >"$BENCH_TMP/report.txt"
cat "$BENCH_TMP/report.txt"
