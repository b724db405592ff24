#!/usr/bin/env bash
# What the open issues still need from a GPU host, in one call of the device tool (30 minutes of
# device time a session: about 12 minutes here on 2x H200): the budgets' gate (issue 24), the
# VMM and pool rules and the real programs (issue 25), the exit and signal storms (issue 28).
# Each step's summary lines are printed; everything else goes into one archive,
# $OUT/open-issues.tar.gz, so that a run's hundreds of files come back as one.
#
# Usage: scripts/gpu/open-issues.sh   with target/release/{libsharecheck.so,sharecheck} present
#   (built here and carried), OUT set (default ./open-issues-out), SAMPLES=DIR a checkout of
#   NVIDIA/cuda-samples for the samples jobs (optional), STEPS=gate,vmm,pool,real,exit,signal (all),
#   PHASES_SHIM=FILE a `--features phase-times` build: the real step judges its timed jobs by the
#   shim's own time (scripts/gpu-real.sh says why).
# Steps that need two GPUs (the gate's peer path, NCCL) run their one-GPU form on one. No multicast
# object is created.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/open-issues-out}
mkdir -p "$OUT/work"
work=$(cd "$OUT/work" && pwd)
shim=$PWD/target/release/libsharecheck.so
steps=",${STEPS:-gate,vmm,pool,real,exit,signal},"
step() { [[ $steps == *",$1,"* ]]; }
say() { echo "== $1 ($(date -u +%H:%M:%S))"; }

nvidia-smi -L 2>&1 | tee "$work/gpus.txt"
echo "shim sha256 $(sha256sum "$shim" | cut -c1-16)"
if step gate; then
    say gate
    BENCH_SHIM=$shim OUT=$work/gate bash scripts/gpu/gate.sh 2>&1 | tail -4
fi
if step vmm; then
    say vmm
    bash scripts/gpu-vmm.sh "$work/vmm" >/dev/null 2>&1
    tail -1 "$work/vmm/report.txt"
fi
if step pool; then
    say pool
    bash scripts/gpu-pool.sh "$work/pool" >/dev/null 2>&1
    tail -1 "$work/pool/report.txt"
fi
if step real; then
    say real
    jobs=torch-expandable,cumem-remap,vectorAddMMAP,memMapIPCDrv,streamOrderedAllocationIPC,planted
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then jobs=nccl-cumem,$jobs; fi
    ONLY=$jobs bash scripts/gpu-real.sh "$work/real" >/dev/null 2>&1
    grep -E '^\| |GPU REAL' "$work/real/report.md"
    rm -rf "$work/real/samples"
fi
if step exit; then
    say exit
    SHIM=$shim RUNS=20 bash scripts/gpu/exitstorm.sh >"$work/exitstorm.txt" 2>&1
    tail -1 "$work/exitstorm.txt"
fi
if step signal; then
    say signal
    SHIM=$shim RUNS=20 bash scripts/gpu/sigcheck.sh >"$work/sigcheck.txt" 2>&1
    tail -1 "$work/sigcheck.txt"
fi
tar -czf "$OUT/open-issues.tar.gz" -C "$OUT" work && rm -rf "$work"
echo "archive: $OUT/open-issues.tar.gz ($(du -h "$OUT/open-issues.tar.gz" | cut -f1))"
