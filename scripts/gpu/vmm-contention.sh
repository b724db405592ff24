#!/usr/bin/env bash
# What the shim's VMM map + unmap pair costs when T threads (16) map and unmap at once, and how
# much of it any gap between a thread's driver calls would cost (issue 24): scripts/bench/bench.c's
# vmm_map_unmap case on T threads, ROUNDS (3) interleaved rounds of: plain; a forwarder with no
# state and no lock (scripts/gpu/forward_delay.c) waiting 0, 20, 40, 80 and 160 ns before each
# call; the shim (BENCH_SHIM). Prints each run's RESULT line (per-thread median ns a pair,
# lowest, highest, unit, N, all threads' ns a pair, CPU ns a pair) and the medians over the
# rounds. Usage: BENCH_SHIM=/path/to/libsharecheck.so scripts/gpu/vmm-contention.sh
# (OUT set: also $OUT/vmm-contention.txt). No multicast object is created.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SHIM=$(readlink -f "${BENCH_SHIM:?set BENCH_SHIM to the shim to measure}")
LIB=$(dirname "$(readlink -f "$(ldconfig -p | awk '$1 == "libcuda.so.1" { print $NF; exit }')")")
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/bench" scripts/bench/bench.c -L"$LIB" -l:libcuda.so.1 -lpthread -ldl
gcc -O2 -shared -fPIC -o "$work/forward.so" scripts/gpu/forward_delay.c -ldl
run() { # name preload delay
    env ${2:+LD_PRELOAD=$2} DELAY_NS="$3" "$work/bench" --threads "${T:-16}" --cases vmm_map_unmap \
        --iters "vmm_map_unmap=${ITERS:-1472}" | awk -v r="$r" -v n="$1" '$1 == "RESULT" { print r "\t" n "\t" $0 }'
}
{
    for r in $(seq "${ROUNDS:-3}"); do
        run plain "" 0
        for d in 0 20 40 80 160; do run "forward+${d}ns" "$work/forward.so" "$d"; done
        run shim "$SHIM" 0
    done >"$work/runs.tsv"
    echo "# round, variant, RESULT case threads per-thread-ns lowest highest unit N all-threads-ns cpu-ns"
    cat "$work/runs.tsv"
    echo
    echo "| variant | per thread, ns a pair | all threads, ns a pair | CPU per thread, ns a pair |"
    echo "|---|---:|---:|---:|"
    python3 - "$work/runs.tsv" <<'PY'
import collections, statistics, sys
runs = collections.OrderedDict()
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    runs.setdefault(f[1], []).append((float(f[5]), float(f[10]), float(f[11])))
for name, v in runs.items():
    print("| %s | %.0f | %.0f | %.0f |" % ((name,) + tuple(statistics.median(x[i] for x in v) for i in range(3))))
PY
} | tee ${OUT:+"$OUT/vmm-contention.txt"}
