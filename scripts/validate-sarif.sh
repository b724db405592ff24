#!/usr/bin/env bash
# Validates `sharecheck report --format sarif` with Microsoft's SARIF Multitool (npm package
# @microsoft/sarif-multitool, installed into .deps/sarif on first use: needs npm and network):
# runs tests/c/peer_cuda.c scenarios under the shim on the simulated driver (findings with
# stacks, file:line where addr2line resolves them), writes the SARIF log, and runs `validate`.
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
rm -rf "$out/traces"
for scenario in enable-flags memcpy-range unidirectional memcpy-freed can-access-same-device; do
    LD_LIBRARY_PATH="$sim" "$cli" run --sim --trace "$out/traces/$scenario-%p.jsonl" -- \
        "$out/peer_cuda" "$scenario" > /dev/null 2>&1 || true
done
"$cli" report --format sarif "$out/traces" > "$out/report.sarif"
echo "results: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"][0]["results"]))' "$out/report.sarif")"
"$tool" validate "$out/report.sarif" | tee "$out/validate.txt"
! grep -q ": error " "$out/validate.txt"
