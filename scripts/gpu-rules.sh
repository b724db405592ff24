#!/usr/bin/env bash
# The CUDA peer-access rules on real GPUs: every scenario of tests/c/peer_cuda.c (the program the
# simulator tests use) runs once without and once with the shim, on a machine with 2 peer-capable
# NVIDIA GPUs.
#
# Usage: scripts/gpu-rules.sh [OUTDIR]            (default OUTDIR: ./gpu-rules-out)
#
# Needs: target/release/libsharecheck.so (cargo build --release --workspace), gcc, python3 and a
# CUDA toolkit's cuda.h (CUDA_HOME, default /usr/local/cuda). No Rust, no network.
#
# For each scenario it checks that:
#   - the program printed the same CALL lines (same calls, same results) with and without the
#     shim: the shim changed nothing;
#   - the rules that fired are exactly the expected ones (the correct program: none at all).
# Scenarios the hardware cannot stage (a pair that cannot peer, unlike attributes, more peers
# than exist) are listed as SKIP with the reason. A scenario that crashes the driver itself (a
# destroyed stream, on R580) passes when it ends the same way with and without the shim.
#
# Writes OUTDIR/rules.tsv (scenario, status, expected, fired, driver results) and
# OUTDIR/runs/<build>-<scenario>.{plain,shim}.{out,err} and traces. Ends with
# `GPU RULES: N passed, M failed, K skipped`; exit status 1 if any check failed.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

case "${1:-}" in
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
OUT="${1:-./gpu-rules-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/runs" "$OUT/build" "$OUT/rules.tsv"
mkdir -p "$OUT/runs" "$OUT/build"
SHIM="$ROOT/target/release/libsharecheck.so"
[[ -f $SHIM ]] || { echo "gpu-rules: $SHIM missing: cargo build --release --workspace" >&2; exit 2; }
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
[[ -f $CUDA_HOME/include/cuda.h ]] || { echo "gpu-rules: no cuda.h under $CUDA_HOME/include" >&2; exit 2; }

for build in plain ptds; do
    flags=()
    [[ $build == ptds ]] && flags=(-DCUDA_API_PER_THREAD_DEFAULT_STREAM)
    gcc -std=gnu11 -O1 -Wall -Werror "${flags[@]}" -I"$CUDA_HOME/include" -I"$ROOT/tests/c" \
        -o "$OUT/build/peer_cuda_$build" "$ROOT/tests/c/peer_cuda.c" -lcuda -pthread
done

# scenario|build|expected rule IDs (comma-separated, "-" for none, "crash": R580 itself crashes on
# this misuse, with or without the shim; the check is that both runs end the same way)|skip reason
CASES='correct|plain|-|
correct|ptds|-|
can-access-invalid-device|plain|cuDeviceCanAccessPeer.invalid-device|
can-access-same-device|plain|cuDeviceCanAccessPeer.same-device|
enable-flags|plain|cuCtxEnablePeerAccess.flags-not-zero|
enable-no-current-context|plain|cuCtxEnablePeerAccess.no-current-context|
enable-null-peer|plain|cuCtxEnablePeerAccess.invalid-peer-context|
enable-destroyed-peer|plain|cuCtxEnablePeerAccess.invalid-peer-context,divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed|
enable-self|plain|cuCtxEnablePeerAccess.peer-is-current,divergence.cuCtxEnablePeerAccess.self-unsupported|
enable-same-device|plain|cuCtxEnablePeerAccess.peer-unsupported|
enable-unsupported|plain|cuCtxEnablePeerAccess.peer-unsupported|needs a GPU pair that cannot peer (the simulator stages it with SHARECHECK_SIM_PEERS=none)
enable-twice|plain|cuCtxEnablePeerAccess.already-enabled|
enable-attributes|plain|cuCtxEnablePeerAccess.no-unified-addressing|needs GPUs that differ in unified addressing or major compute capability
enable-too-many-peers|plain|cuCtxEnablePeerAccess.too-many-peers|needs more peers than the hardware supports (the simulator stages it with SHARECHECK_SIM_MAX_PEERS)
disable-not-enabled|plain|cuCtxDisablePeerAccess.not-enabled|
disable-other-direction|plain|cuCtxDisablePeerAccess.not-enabled|
disable-no-current-context|plain|cuCtxDisablePeerAccess.no-current-context|
disable-null-peer|plain|cuCtxDisablePeerAccess.invalid-peer-context|
disable-after-async-copies|plain|cuCtxDisablePeerAccess.unregisters-allocations|
disable-after-stream-destroyed|plain|-|
memcpy-range|plain|cuMemcpyPeer.range-outside-allocation|
memcpy-range|ptds|cuMemcpyPeer.range-outside-allocation|
memcpy-adjacent|plain|cuMemcpyPeer.range-outside-allocation|
memcpy-freed|plain|cuMemcpyPeer.memory-freed|
memcpy-wrong-context|plain|cuMemcpyPeer.pointer-not-in-context|
memcpy-null-context|plain|cuMemcpyPeer.null-context,divergence.cuMemcpyPeer.null-context-accepted|
memcpy-destroyed-stream|plain|crash|
memcpy-destroyed-stream|ptds|crash|
unidirectional|plain|peer-access.unidirectional|
unidirectional|ptds|peer-access.unidirectional|'

# With one GPU, only these scenarios can be staged (the rest need a second device to peer with).
ONE_GPU_SCENARIOS=" can-access-invalid-device can-access-same-device enable-null-peer enable-self enable-same-device disable-null-peer memcpy-destroyed-stream "
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
echo "GPUs: $gpus"

pass=0 fail=0 skip=0
printf 'scenario\tbuild\tstatus\texpected\tfired\tresults\n' >"$OUT/rules.tsv"
while IFS='|' read -r scenario build expected reason; do
    [[ -n $scenario ]] || continue
    if [[ -z $reason && ${gpus:-0} -lt 2 && $ONE_GPU_SCENARIOS != *" $scenario "* ]]; then
        reason="needs two GPUs (this machine has ${gpus:-0})"
    fi
    if [[ -n $reason ]]; then
        printf '  SKIP  %-28s %-6s %s\n' "$scenario" "$build" "$reason"
        printf '%s\t%s\tSKIP\t%s\t-\t%s\n' "$scenario" "$build" "$expected" "$reason" >>"$OUT/rules.tsv"
        skip=$((skip + 1))
        continue
    fi
    exe="$OUT/build/peer_cuda_$build"
    base="$OUT/runs/$build-$scenario"
    set +e
    timeout 60 "$exe" "$scenario" >"$base.plain.out" 2>"$base.plain.err"
    plain_rc=$?
    mkdir -p "$base.traces"
    LD_PRELOAD="$SHIM" SHARECHECK_TRACE="$base.traces/%p.jsonl" \
        timeout 60 "$exe" "$scenario" >"$base.shim.out" 2>"$base.shim.err"
    shim_rc=$?
    set -e
    verdict="$(python3 - "$base" "$expected" "$plain_rc" "$shim_rc" <<'PY'
import glob, json, os, sys
sys.path.insert(0, os.path.join(os.environ["ROOT"], "scripts", "gpu"))
import trace_io
base, expected, plain_rc, shim_rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
crash = expected == "crash"
expected = set() if expected in ("-", "crash") else set(expected.split(","))
def calls(path):
    return [l for l in open(path).read().splitlines() if l.startswith("CALL ")]
plain, shim = calls(base + ".plain.out"), calls(base + ".shim.out")
fired, results = set(), []
for path in sorted(glob.glob(base + ".traces/*.jsonl")):
    # A process that crashed leaves its last records in its ring file (trace_io.py reads them
    # too), and possibly one record cut short: not a record.
    for line in trace_io.read_lines(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        for f in r.get("findings") or []:
            fired.add(f["rule"])
        if r.get("fn"):
            results.append("%s=%s" % (r["fn"], r["r"]))
problems = []
if plain_rc != shim_rc:
    problems.append("exit %d without the shim, %d with it" % (plain_rc, shim_rc))
if sorted(plain) != sorted(shim):  # sorted: threads interleave their output
    problems.append("calls differ: %s vs %s" % (plain, shim))
if crash and plain_rc < 128:
    problems.append("expected the driver to crash, exit %d" % plain_rc)
if fired != expected and not crash:
    problems.append("fired %s" % sorted(fired))
status = "FAIL" if problems else "PASS"
print("\t".join([status, ",".join(sorted(fired)) or "-", " ".join(results) or "-",
                 "; ".join(problems) + (" (exit %d)" % shim_rc if shim_rc else "")]))
PY
)"
    IFS=$'\t' read -r status fired results problems <<<"$verdict"
    printf '  %-5s %-28s %-6s fired: %s\n' "$status" "$scenario" "$build" "$fired"
    printf '        driver: %s\n' "$results"
    [[ -n ${problems:-} ]] && printf '        %s\n' "$problems"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$scenario" "$build" "$status" "$expected" "$fired" "$results" >>"$OUT/rules.tsv"
    if [[ $status == PASS ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done <<<"$CASES"

echo "GPU RULES: $pass passed, $fail failed, $skip skipped"
[[ $fail -eq 0 ]]
