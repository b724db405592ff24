#!/usr/bin/env bash
# The IPC rules on a real GPU: every CUDA scenario of tests/ipc_rules.rs (tests/c/ipc_cuda.c:
# one process, or an exporter and an importer in two), run plain and under `sharecheck run`, then
# `sharecheck report` over the run's traces. A scenario passes when the program saw exactly the
# same results under the shim as plain (every CALL line and the exit status) and the findings, live
# and report-phase, are exactly the ones it stages.
#
# Usage: scripts/gpu-ipc.sh [OUTDIR]        (default OUTDIR: ./gpu-ipc-out)
#
# Needs gcc, python3, the NVIDIA driver's libcuda and CUDA headers (/usr/local/cuda/include, or
# $CUDA_INCLUDE), and the prebuilt target/release/sharecheck and libsharecheck.so. One GPU is
# enough: both processes use device 0. Writes OUTDIR/report.txt (also printed) and exits 1 if any
# scenario fails. Makes no multicast object; asks for 64 KiB of device memory at a time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

out="${1:-gpu-ipc-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cli="$PWD/target/release/sharecheck"
[ -x "$cli" ] || { echo "gpu-ipc: $cli is missing: cargo build --release --workspace" >&2; exit 1; }
include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
exe="$out/ipc_cuda"
gcc -O1 -o "$exe" tests/c/ipc_cuda.c -I"$include" -Itests/c -lcuda

# scenario | expected findings (sorted, comma-separated `rule@function`; `-` for none)
cases=(
    "export-interior|cuIpcGetMemHandle.not-allocation-base@cuIpcGetMemHandle,divergence.cuIpcGetMemHandle.interior-pointer-accepted@cuIpcGetMemHandle"
    "open-flags|cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access@cuIpcOpenMemHandle_v2,cuIpcOpenMemHandle.same-process@cuIpcOpenMemHandle_v2"
    "open-v1-flags|cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access@cuIpcOpenMemHandle,cuIpcOpenMemHandle.same-process@cuIpcOpenMemHandle"
    "open-same-process|cuIpcOpenMemHandle.same-process@cuIpcOpenMemHandle_v2"
    "event-same-process|cuIpcOpenEventHandle.same-process@cuIpcOpenEventHandle"
    "close-not-opened|cuIpcCloseMemHandle.not-opened@cuIpcCloseMemHandle"
    "close-twice|cuIpcCloseMemHandle.not-opened@cuIpcCloseMemHandle"
    "close-interior|cuIpcCloseMemHandle.not-opened@cuIpcCloseMemHandle"
    "open-v1-again|cuIpcOpenMemHandle.already-open-legacy@cuIpcOpenMemHandle"
    "free-early|cuMemFree.ipc-memory-open-elsewhere@cuMemFree_v2"
    "open-after-free|cuIpcOpenMemHandle.handle-of-freed-memory@cuIpcOpenMemHandle_v2"
    "never-close|cuIpcOpenMemHandle.never-closed@cuIpcOpenMemHandle_v2"
    "export-managed|cuIpcGetMemHandle.memory-not-exportable@cuIpcGetMemHandle"
    "export-pool|cuIpcGetMemHandle.memory-not-exportable@cuIpcGetMemHandle"
    "export-host|cuIpcGetMemHandle.memory-not-exportable@cuIpcGetMemHandle"
    "event-not-interprocess|cuIpcGetEventHandle.event-not-interprocess@cuIpcGetEventHandle"
    "open-second-context|cuIpcOpenMemHandle.second-context-same-device@cuIpcOpenMemHandle_v2"
    # The context destroyed with its mapping open (live); the report knows the mapping went with
    # it (the open's record names its context), so the exporter's exit after is not flagged.
    "destroy-context-open|cuCtxDestroy.ipc-memory-still-open@cuCtxDestroy_v2"
    "second-context-other-allocation|cuIpcOpenMemHandle.second-context-same-exporter@cuIpcOpenMemHandle_v2"
    "exporter-destroys-context|cuCtxDestroy.ipc-memory-open-elsewhere@cuCtxDestroy_v2"
    "exporter-exits|cuIpcGetMemHandle.exporter-exited-while-open@cuIpcGetMemHandle"
    "event-never-destroyed|cuIpcOpenEventHandle.never-destroyed@cuIpcOpenEventHandle"
    "event-destroyed-early|cuEventDestroy.ipc-event-open-elsewhere@cuEventDestroy_v2"
    "event-exchange|-"
    "correct|-"
    # Exported twice, freed, allocated and exported again: clean; the second export carries no
    # place (its handle's first export has it).
    "export-again|-"
)

# With two devices or more: the exporter on device 1, the importer on device 0 (tests/c/ipc_cuda.c
# `open-unreachable`). Where the devices can access each other, as on NVLink pairs, the open works
# and nothing is reported: the device rule is decided by UUID from both records.
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ]; then
    cases+=("open-unreachable|-")
fi

report="$out/report.txt"
. scripts/gpu/scenario.sh
report_head "$report" IPC scripts/gpu-ipc.sh tests/c/ipc_cuda.c
run_cases "$exe" "$out" "$report"
echo >> "$report"
echo "GPU IPC: $(( ${#cases[@]} - failed )) passed, $failed failed" >> "$report"
cat "$report"
[ "$failed" -eq 0 ]
