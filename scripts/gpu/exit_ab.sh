#!/usr/bin/env bash
# exit() while 64 threads call and a profiling-timer signal handler calls too
# (tests/c/writer_life.c exitstorm), on the real driver: plain, a baseline shim and the shim under
# test, interleaved, 15 rounds; counts exit statuses (3: a set-up call failed, 4 or 5: a covered
# call failed; the program's other threads race the driver's own teardown at exit, plain too).
# Usage: BASE_SHIM=old.so SHIM=new.so scripts/gpu/exit_ab.sh [signals|nosignals]
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gcc -std=gnu11 -O1 -o /tmp/wl tests/c/writer_life.c -I/usr/local/cuda/include -Iinclude -Itests/c -lcuda -pthread || exit 1
declare -A ok
for i in $(seq 1 15); do
  for which in plain base new; do
    d=/tmp/ab-$which-$i; rm -rf $d; mkdir -p $d
    pre=""; [ $which != plain ] && pre=${BASE_SHIM:?}; [ $which = new ] && pre=${SHIM:?}
    s=$(date +%s%N)
    LD_PRELOAD=$pre SHARECHECK_TRACE=$d/%p.jsonl timeout 60 /tmp/wl exitstorm 64 2000 ${1:-signals} >/dev/null 2>&1; rc=$?
    ms=$(( ($(date +%s%N)-s)/1000000 ))
    echo "$which $i rc=$rc ${ms}ms"
    key="$which:rc$rc"; ok[$key]=$(( ${ok[$key]:-0} + 1 ))
  done
done
for k in "${!ok[@]}"; do echo "SUMMARY $k ${ok[$k]}"; done | sort
