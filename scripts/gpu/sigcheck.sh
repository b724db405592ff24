#!/usr/bin/env bash
# RUNS (10) runs of 8 threads making calls under a 200 us profiling timer whose handler makes
# calls, every other one a misuse (tests/c/writer_life.c sigcheck), on the real driver, traced
# by SHIM: a handler's call that interrupted the shim or a driver call is checked once its thread
# leaves the shim. Each run: its time and exit status, and whether every misuse has its finding
# in its record, every valid call the value the driver wrote, and the exit record counts them
# (check_sigcheck in this script). Usage: SHIM=target/release/libsharecheck.so
# scripts/gpu/sigcheck.sh
#
# R580 is not async-signal-safe: a handler's call that interrupts a driver call of its own thread
# waits forever on the driver's lock, without the shim too (2026-11-26, 2x H100, 580.159.04: the
# plain run stopped making progress within a second, every storm thread in FUTEX_WAIT on one
# address; scripts/gpu/results/2026-11-26-2xH100-R580-sigcheck-plain-deadlock.txt). So the script
# first runs the program plain (PLAIN_TIMEOUT, 20 s) and says whether the driver deadlocks, then
# runs the shim with OUTSIDE=1 by default (WRITER_LIFE_HANDLER_OUTSIDE: the handler makes no call
# while its thread is in one; every handler call is then checked in the handler itself). OUTSIDE=0
# runs the original storm, which the simulator passes and R580 deadlocks.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gcc -std=gnu11 -O1 -o /tmp/wl tests/c/writer_life.c -I/usr/local/cuda/include -Iinclude -Itests/c -lcuda -pthread || exit 1
export WRITER_LIFE_HANDLER_OUTSIDE=${OUTSIDE:-1}
s=$(date +%s%N)
WRITER_LIFE_HANDLER_OUTSIDE=0 timeout "${PLAIN_TIMEOUT:-20}" /tmp/wl sigcheck 8 20000 >/tmp/sc-plain.out 2>&1; rc=$?
echo "plain, handler calls anywhere: rc=$rc $(( ($(date +%s%N)-s)/1000000 ))ms$([ $rc -eq 124 ] && echo ': the driver deadlocked without the shim')"
s=$(date +%s%N)
WRITER_LIFE_HANDLER_OUTSIDE=1 timeout "${PLAIN_TIMEOUT:-20}" /tmp/wl sigcheck 8 20000 >/tmp/sc-plain.out 2>&1; rc=$?
echo "plain, handler calls outside calls: rc=$rc $(( ($(date +%s%N)-s)/1000000 ))ms $(tr '\n' ' ' </tmp/sc-plain.out)"
echo "with the shim, WRITER_LIFE_HANDLER_OUTSIDE=$WRITER_LIFE_HANDLER_OUTSIDE:"
bad=0
for i in $(seq 1 ${RUNS:-10}); do
  d=/tmp/sc$i; rm -rf $d; mkdir -p $d
  s=$(date +%s%N)
  LD_PRELOAD=$SHIM SHARECHECK_TRACE=$d/%p.jsonl timeout 30 /tmp/wl sigcheck 8 20000 >$d.out 2>$d.err; rc=$?
  ms=$(( ($(date +%s%N)-s)/1000000 ))
  line=$(python3 - "$d" "$d.out" <<'PY'
import json, glob, sys
d, out = sys.argv[1], sys.argv[2]
said = dict(l.split()[:2] for l in open(out) if len(l.split()) >= 2)
recs = [json.loads(l) for f in glob.glob(d + "/*.jsonl") for l in open(f)]
calls = [r for r in recs if r.get("fn") == "cuDeviceCanAccessPeer"]
bad = [r for r in calls if r["a"].get("peerDev") == 9]
good = [r for r in calls if r["a"].get("peerDev") != 9]
found = sum(1 for r in bad if r.get("findings", [{}])[0].get("rule") == "cuDeviceCanAccessPeer.invalid-device")
# One GPU: the valid calls ask about device 0 and itself, each an info finding (same-device).
benign = {"cuDeviceCanAccessPeer.same-device"}
wrote = sum(1 for r in good if str(r["a"].get("*canAccessPeer")) == said.get("CAN")
            and all(f.get("rule") in benign for f in r.get("findings", [])))
ex = [r for r in recs if r.get("event") == "exit"]
ok = (len(calls) == int(said["DONE"]) and len(bad) == int(said["HANDLER_MISUSES"]) == found
      and wrote == len(good) and len(ex) == 1 and ex[0]["calls"] == len(calls)
      and "calls_unchecked" not in ex[0])
print(f"calls {len(calls)} done {said['DONE']} handler {said['HANDLER_CALLS']} skipped {said.get('HANDLER_SKIPPED', '?')} misuses {said['HANDLER_MISUSES']} "
      f"with finding {found} valid {len(good)} with the driver's value {wrote} exit {[e['calls'] for e in ex]} "
      f"unchecked {[e.get('calls_unchecked', 0) for e in ex]} {'OK' if ok else 'BAD'}")
sys.exit(0 if ok else 1)
PY
); checked=$?
  echo "run $i rc=$rc ${ms}ms $line"
  [ $rc -ne 0 ] || [ $checked -ne 0 ] && bad=$((bad+1))
done
echo "SIGCHECK: $bad bad of ${RUNS:-10}"
