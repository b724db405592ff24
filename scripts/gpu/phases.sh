#!/usr/bin/env bash
# Where a covered call's time goes on a real driver (issue 24), with a measurement build of the
# shim: `cargo build --release --features phase-times` (src/phases.rs), carried here as SHIM. Runs
# scripts/bench/bench.c's cases on 1 thread untraced and traced under it; the shim writes, per
# function, the calls and the mean ns of each phase (enter, context, before, driver, after,
# number: a traced call's time and record number, settle: each includes one TSC read, about 20 to
# 30 ns on the GPU hosts) to $OUT/phases-<mode>.txt (or
# /tmp). Compare `driver` with the plain figure the bench prints in the same run.
# Usage: SHIM=/path/to/phase-build/libsharecheck.so scripts/gpu/phases.sh
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=${OUT:-/tmp}
gcc -O2 -o /tmp/phases-bench scripts/bench/bench.c -l:libcuda.so.1 -lpthread -ldl || exit 1
for mode in plain untraced traced; do
  rm -rf /tmp/phases-trace; mkdir -p /tmp/phases-trace
  case $mode in
    plain) e=() ;;
    untraced) e=(LD_PRELOAD="$SHIM" SHARECHECK_PHASES_OUT="$O/phases-$mode.txt") ;;
    traced) e=(LD_PRELOAD="$SHIM" SHARECHECK_PHASES_OUT="$O/phases-$mode.txt" SHARECHECK_TRACE=/tmp/phases-trace/%p.jsonl) ;;
  esac
  env "${e[@]}" timeout 120 /tmp/phases-bench --threads 1 --reps 5 > "$O/phases-bench-$mode.txt" || echo "$mode: rc=$?"
  echo "== $mode"; grep RESULT "$O/phases-bench-$mode.txt" | cut -f2,4
  [ -f "$O/phases-$mode.txt" ] && grep -v 'calls=[12] ' "$O/phases-$mode.txt"
done
