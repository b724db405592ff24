#!/usr/bin/env bash
# The virtual memory management rules on a real GPU: every scenario of tests/vmm_rules.rs
# (tests/c/vmm_cuda.c), run plain and under `sharecheck run`, then `sharecheck report` over the
# run's traces. A scenario passes when the program saw exactly the same results under the shim as
# plain (every CALL line and the exit status) and the findings are exactly the ones it stages.
#
# Usage: scripts/gpu-vmm.sh [OUTDIR]     (default OUTDIR: ./gpu-vmm-out)
#
# Needs gcc, python3, the NVIDIA driver's libcuda and CUDA headers (/usr/local/cuda/include, or
# $CUDA_INCLUDE), and the prebuilt target/release/sharecheck and libsharecheck.so. One GPU is
# enough. Writes OUTDIR/report.txt (also printed) and exits 1 if any scenario fails. Makes no
# multicast object; creates at most four granules (8 MiB on H100/H200) of device memory at a time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

out="${1:-gpu-vmm-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cli="$PWD/target/release/sharecheck"
[ -x "$cli" ] || { echo "gpu-vmm: $cli is missing: cargo build --release --workspace" >&2; exit 1; }
include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
exe="$out/vmm_cuda"
gcc -O1 -o "$exe" tests/c/vmm_cuda.c -I"$include" -Itests/c -lcuda -ldl

# scenario | expected findings (sorted, comma-separated `rule@function`; `-` for none)
cases=(
    "create-size|cuMemCreate.size-not-granular@cuMemCreate"
    "map-not-granular|cuMemMap.not-granular@cuMemMap"
    "map-past-allocation|cuMemMap.past-allocation@cuMemMap"
    "map-not-reserved|cuMemMap.not-in-reservation@cuMemMap"
    "map-already-mapped|cuMemMap.already-mapped@cuMemMap"
    "unmap-sub-range|cuMemUnmap.not-whole-mapping@cuMemUnmap"
    # R580 answers 0 and unmaps nothing.
    "unmap-nothing|cuMemUnmap.not-whole-mapping@cuMemUnmap"
    "set-access-not-mapped|cuMemSetAccess.range-not-mapped@cuMemSetAccess"
    "address-free-part|cuMemAddressFree.not-reservation@cuMemAddressFree"
    "export-not-requested|cuMemExportToShareableHandle.type-not-requested@cuMemExportToShareableHandle"
    "memset-before-access|vmm.used-before-access@cuMemsetD8_v2"
    "release-twice|cuMemRelease.handle-not-live@cuMemRelease"
    "leak|cuMemAddressReserve.never-freed@cuMemAddressReserve,cuMemCreate.never-released@cuMemCreate,cuMemMap.never-unmapped@cuMemMap"
    "fd-leak|cuMemExportToShareableHandle.fd-never-closed@cuMemExportToShareableHandle"
    # The fd closed, then a buffer allocated and kept: R580's own descriptors are not exports'.
    "fd-closed|-"
    "correct|-"
)
# A FABRIC create: refused (CUDA_ERROR_NOT_PERMITTED) where the user has no IMEX channel file.
if ls /dev/nvidia-caps-imex-channels/channel* > /dev/null 2>&1; then
    cases+=("fabric-no-imex|-")
else
    cases+=("fabric-no-imex|cuMemCreate.fabric-without-imex-channel@cuMemCreate")
fi

report="$out/report.txt"
. scripts/gpu/scenario.sh
report_head "$report" VMM scripts/gpu-vmm.sh tests/c/vmm_cuda.c
run_cases "$exe" "$out" "$report" "SAME "
# The same at-exit rule decided live, at the exit of a process that writes no trace.
live=0
for scenario in fd-leak fd-closed; do
    set +e
    LD_PRELOAD="$PWD/target/release/libsharecheck.so" "$exe" "$scenario" \
        > "$out/$scenario/live.out" 2> "$out/$scenario/live.err"
    set -e
    n="$(grep -c 'fd-never-closed' "$out/$scenario/live.err" || true)"
    want=0
    [ "$scenario" = fd-leak ] && want=1
    if [ "$n" = "$want" ]; then verdict=ok; else verdict="FAILED: $n live findings, expected $want"; failed=$((failed + 1)); fi
    live=$((live + 1))
    {
        echo "- $scenario, untraced: $verdict"
        grep 'fd-never-closed' "$out/$scenario/live.err" | sed 's/^/  live: /' || true
    } >> "$report"
done
echo >> "$report"
echo "GPU VMM: $(( ${#cases[@]} + live - failed )) passed, $failed failed" >> "$report"
cat "$report"
[ "$failed" -eq 0 ]
