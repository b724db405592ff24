#!/usr/bin/env bash
# The budgets' gate on a GPU host (issue 24), in one command: the driver's speed before
# (scripts/gpu/driver-speed.sh), scripts/gpu-bench.sh --traced --rounds 3 (its A/B table judges
# every budget over all processes and at the driver's quiet speed), and the driver's speed after.
# The A/B runs GATE_AB_PROCS (9) processes per mode and round, not gpu-bench's 5: only about a
# third of a host's processes catch the driver at its quiet speed, so the quiet figure rests on 5
# to 10 processes of 27 instead of 1 to 7 of 15 (on one H200, 2026-11-29).
# Everything goes into $OUT (default ./gate-out): gpus.txt, before/ and after/driver-speed.txt
# and gpu-bench's files; the two summary lines of the A/B table are printed at the end.
# Usage: BENCH_SHIM=/path/to/libsharecheck.so scripts/gpu/gate.sh   (two GPUs for the peer
# path; one runs the peer copies within the device). No multicast object is created.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/gate-out}
mkdir -p "$OUT"
nvidia-smi -L >"$OUT/gpus.txt" 2>&1 || true
PROCS=4 WINDOWS=20 OUT="$OUT/before" bash scripts/gpu/driver-speed.sh >/dev/null
OUT="$OUT" bash scripts/gpu-bench.sh --traced --rounds 3 --ab-procs "${GATE_AB_PROCS:-9}" >/dev/null
PROCS=4 WINDOWS=20 OUT="$OUT/after" bash scripts/gpu/driver-speed.sh >/dev/null
cat "$OUT/gpus.txt"
grep -h 'windows in' "$OUT/before/driver-speed.txt" "$OUT/after/driver-speed.txt"
grep -E '^- (Over all processes|With the driver at its quiet speed):' "$OUT/gpu-bench.txt"
