#!/usr/bin/env bash
# The stream-ordered pool rules on a real GPU: every scenario of tests/pool_rules.rs
# (tests/c/pool_cuda.c), run plain and under `sharecheck run`, then `sharecheck report` over the
# run's traces; and the pool probe (scripts/gpu/pool_probe.c) plain and under the shim, whose
# answers must be the same. A scenario passes when the program saw exactly the same results under
# the shim as plain (every CALL line and the exit status) and the findings are exactly the ones
# it stages.
#
# Usage: scripts/gpu-pool.sh [OUTDIR]     (default OUTDIR: ./gpu-pool-out)
#
# Needs gcc, python3, the NVIDIA driver's libcuda and CUDA headers (/usr/local/cuda/include, or
# $CUDA_INCLUDE), and the prebuilt target/release/sharecheck and libsharecheck.so. One GPU is
# enough. Writes OUTDIR/report.txt (also printed) and exits 1 if any scenario fails. Makes no
# multicast object; allocates a few MiB of device memory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

out="${1:-gpu-pool-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cli="$PWD/target/release/sharecheck"
[ -x "$cli" ] || { echo "gpu-pool: $cli is missing: cargo build --release --workspace" >&2; exit 1; }
include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
exe="$out/pool_cuda"
gcc -O1 -o "$exe" tests/c/pool_cuda.c -I"$include" -Itests/c -lcuda -ldl
probe="$out/pool_probe"
gcc -O1 -o "$probe" scripts/gpu/pool_probe.c -I"$include" -lcuda

# scenario | expected findings (sorted, comma-separated `rule@function`; `-` for none)
cases=(
    "export-none|cuMemPoolExportToShareableHandle.type-not-requested@cuMemPoolExportToShareableHandle"
    "export-fabric|cuMemPoolExportToShareableHandle.type-not-requested@cuMemPoolExportToShareableHandle"
    "alloc-imported|cuMemAllocFromPoolAsync.imported-pool@cuMemAllocFromPoolAsync"
    "export-pointer-none|cuMemPoolExportPointer.pool-not-shared@cuMemPoolExportPointer"
    "export-pointer-not-exported|cuMemPoolExportPointer.pool-not-shared@cuMemPoolExportPointer"
    "export-pointer-default|cuMemPoolExportPointer.pool-not-shared@cuMemPoolExportPointer"
    "export-pointer-interior|cuMemPoolExportPointer.pool-not-shared@cuMemPoolExportPointer"
    "import-pointer-own-pool|cuMemPoolImportPointer.pool-not-imported@cuMemPoolImportPointer"
    "correct|-"
    "freed-while-imported|cuMemFree.pool-pointer-imported-elsewhere@cuMemFreeAsync"
)

report="$out/report.txt"
. scripts/gpu/scenario.sh
report_head "$report" Pool scripts/gpu-pool.sh tests/c/pool_cuda.c
run_cases "$exe" "$out" "$report" "SEEN "
# The probe: every answer the same under the shim (fd numbers aside).
"$probe" > "$out/probe-plain.txt" 2> "$out/probe-plain.err" || true
LD_PRELOAD="$PWD/target/release/libsharecheck.so" "$probe" > "$out/probe-shim.txt" 2> "$out/probe-shim.err" || true
if diff <(grep -v received-fd "$out/probe-plain.txt" | cut -f1-2 | sort) \
        <(grep -v received-fd "$out/probe-shim.txt" | cut -f1-2 | sort) > "$out/probe.diff"; then
    echo "- probe: ok ($(wc -l < "$out/probe-plain.txt") answers, the same under the shim)" >> "$report"
else
    echo "- probe: FAILED (answers differ under the shim: $out/probe.diff)" >> "$report"
    failed=$((failed + 1))
fi
echo >> "$report"
echo "GPU POOL: $(( ${#cases[@]} + 1 - failed )) passed, $failed failed" >> "$report"
cat "$report"
[ "$failed" -eq 0 ]
