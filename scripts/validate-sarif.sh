#!/usr/bin/env bash
# Validates `sharecheck report --format sarif` with Microsoft's SARIF Multitool (npm package
# @microsoft/sarif-multitool, installed into .deps/sarif on first use: needs npm and network):
# runs tests/c/peer_cuda.c scenarios and tests/c/ipc_cuda.c's two-process ones under the shim on
# the simulated driver (findings with stacks, file:line where the report resolves them; the IPC
# ones are cross-process findings, decided by the report), writes the SARIF log, runs `validate`,
# and checks that every result has a physical location.
# Usage: scripts/validate-sarif.sh [OUTDIR]   (default: target/sarif-check). Exits non-zero when
# the validator reports an error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-target/sarif-check}"
mkdir -p "$out" .deps/sarif
out="$(cd "$out" && pwd)"
tool=.deps/sarif/node_modules/.bin/sarif-multitool
if [ ! -x "$tool" ]; then
    (cd .deps/sarif && npm install --no-audit --no-fund @microsoft/sarif-multitool > npm.log 2>&1)
fi
cargo build --workspace -q
cli="$PWD/target/debug/sharecheck"
include="${CUDA_INCLUDE:-$PWD/.deps/cuda/nvidia/cu13/include}"
sim="$out/simlib"
mkdir -p "$sim"
ln -sf "$PWD/target/debug/libsharecheck_sim.so" "$sim/libcuda.so.1"
ln -sf "$PWD/target/debug/libsharecheck_sim.so" "$sim/libcuda.so"
gcc -std=gnu11 -g -O0 -o "$out/peer_cuda" tests/c/peer_cuda.c -I"$include" -Itests/c -L"$sim" -lcuda -pthread
gcc -std=gnu11 -g -O0 -o "$out/ipc_cuda" tests/c/ipc_cuda.c -I"$include" -Itests/c -L"$sim" -lcuda -pthread
rm -rf "$out/traces"
for scenario in enable-flags memcpy-range unidirectional memcpy-freed can-access-same-device; do
    LD_LIBRARY_PATH="$sim" "$cli" run --sim --trace "$out/traces/$scenario-%p.jsonl" -- \
        "$out/peer_cuda" "$scenario" > /dev/null 2>&1 || true
done
for scenario in free-early never-close open-after-free; do
    LD_LIBRARY_PATH="$sim" "$cli" run --sim --trace "$out/traces/ipc-$scenario-%p.jsonl" -- \
        "$out/ipc_cuda" "$scenario" > /dev/null 2>&1 || true
done
"$cli" report --format sarif "$out/traces" > "$out/report.sarif"
python3 - "$out/report.sarif" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["runs"][0]["results"]
located = [r for r in results if any("physicalLocation" in l for l in r.get("locations", []))]
ipc = [r for r in results if "ipc" in r["ruleId"].lower()]
print(f"results: {len(results)}, with a physical location: {len(located)}, cross-process (IPC): {len(ipc)}")
for r in results:
    if r not in located:
        sys.exit(f"no physical location: {r['ruleId']}")
if not ipc:
    sys.exit("no cross-process (IPC) result")
PY
"$tool" validate "$out/report.sarif" | tee "$out/validate.txt"
! grep -q ": error " "$out/validate.txt"
