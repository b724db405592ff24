#!/usr/bin/env bash
# RUNS (20) exits of a 64-thread storm with a signal handler making calls (tests/c/writer_life.c
# exitstorm), on the real driver, traced by SHIM: each run's time, exit status, and whether its
# traces hold every call record once with the exit record counting them (count_records.py
# --check) and no ring left; then 3
# plain runs for the time. Usage: SHIM=target/release/libsharecheck.so scripts/gpu/exitstorm.sh
# The handler makes no call while its thread is in one (WRITER_LIFE_HANDLER_OUTSIDE=1; OUTSIDE=0
# to make it anyway): R580 deadlocks on its own lock when a handler's call interrupted a driver
# call of its thread, with or without a shim (2026-11-26-2xH100-R580-sigcheck-plain-deadlock.txt;
# here 1 run in about 200 hung so, 2026-11-29-2xH200-R580-exitstorm-hang.txt).
set -u
export WRITER_LIFE_HANDLER_OUTSIDE=${OUTSIDE:-1}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gcc -std=gnu11 -O1 -o /tmp/wl tests/c/writer_life.c -I/usr/local/cuda/include -Iinclude -Itests/c -lcuda -pthread || exit 1
worst=0; bad=0; deinit=0
for i in $(seq 1 ${RUNS:-20}); do
  d=/tmp/es$i; rm -rf $d; mkdir -p $d
  s=$(date +%s%N)
  LD_PRELOAD=$SHIM SHARECHECK_TRACE=$d/%p.jsonl timeout 60 /tmp/wl exitstorm 64 2000 signals >/dev/null 2>$d.err; rc=$?
  ms=$(( ($(date +%s%N)-s)/1000000 )); [ $ms -gt $worst ] && worst=$ms
  line=$(python3 scripts/gpu/count_records.py --check $d); counted=$?
  echo "run $i rc=$rc ${ms}ms $line$([ $rc -ne 0 ] && echo " stderr: $(grep -m1 '^HANDLER_FAILED' $d.err) $(head -c 300 $d.err | tr "\n" " ")")"
  [ $counted -ne 0 ] && bad=$((bad+1))
  # Exit status 5: a handler's call failed. R580 answers CUDA_ERROR_DEINITIALIZED to a call made
  # while exit() shuts the driver down, plain too (seen 2026-11-26): the driver's, when its
  # records are whole; anything else is bad.
  # The program says `HANDLER_FAILED <code>`; 4 is CUDA_ERROR_DEINITIALIZED.
  if [ $rc -eq 5 ] && grep -qE 'CUDA_ERROR_DEINITIALIZED|^HANDLER_FAILED 4$' $d.err; then
    deinit=$((deinit+1))
  elif [ $rc -ne 0 ]; then
    bad=$((bad+1))
  fi
done
for i in 1 2 3; do s=$(date +%s%N); timeout 60 /tmp/wl exitstorm 64 2000 signals >/dev/null 2>/tmp/es-plain.err; echo "plain run rc=$? $(( ($(date +%s%N)-s)/1000000 ))ms $(head -c 100 /tmp/es-plain.err)"; done
echo "EXITSTORM (WRITER_LIFE_HANDLER_OUTSIDE=$WRITER_LIFE_HANDLER_OUTSIDE): worst ${worst}ms, $bad bad of ${RUNS:-20}; $deinit where the driver answered a handler DEINITIALIZED during exit"
