#!/usr/bin/env bash
# RUNS (10) runs of 8 threads making calls under a 200 us profiling timer whose handler makes
# calls, every other one a misuse (tests/c/writer_life.c sigcheck), on the real driver, traced
# by SHIM: a handler's call that interrupted the shim or a driver call is checked once its thread
# leaves the shim. Each run: its time and exit status, and whether every misuse has its finding
# in its record, every valid call the value the driver wrote, and the exit record counts them
# (check_sigcheck in this script). Usage: SHIM=target/release/libsharecheck.so
# scripts/gpu/sigcheck.sh
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gcc -std=gnu11 -O1 -o /tmp/wl tests/c/writer_life.c -I/usr/local/cuda/include -Iinclude -Itests/c -lcuda -pthread || exit 1
bad=0
for i in $(seq 1 ${RUNS:-10}); do
  d=/tmp/sc$i; rm -rf $d; mkdir -p $d
  s=$(date +%s%N)
  LD_PRELOAD=$SHIM SHARECHECK_TRACE=$d/%p.jsonl timeout 120 /tmp/wl sigcheck 8 20000 >$d.out 2>$d.err; rc=$?
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
wrote = sum(1 for r in good if str(r["a"].get("*canAccessPeer")) == said.get("CAN") and "findings" not in r)
ex = [r for r in recs if r.get("event") == "exit"]
ok = (len(calls) == int(said["DONE"]) and len(bad) == int(said["HANDLER_MISUSES"]) == found
      and wrote == len(good) and len(ex) == 1 and ex[0]["calls"] == len(calls)
      and "calls_unchecked" not in ex[0])
print(f"calls {len(calls)} done {said['DONE']} handler {said['HANDLER_CALLS']} misuses {said['HANDLER_MISUSES']} "
      f"with finding {found} valid {len(good)} with the driver's value {wrote} exit {[e['calls'] for e in ex]} "
      f"unchecked {[e.get('calls_unchecked', 0) for e in ex]} {'OK' if ok else 'BAD'}")
sys.exit(0 if ok else 1)
PY
); checked=$?
  echo "run $i rc=$rc ${ms}ms $line"
  [ $rc -ne 0 ] || [ $checked -ne 0 ] && bad=$((bad+1))
done
echo "SIGCHECK: $bad bad of ${RUNS:-10}"
