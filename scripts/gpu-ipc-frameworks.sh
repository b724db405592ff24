#!/usr/bin/env bash
# IPC through PyTorch and CuPy on a real GPU (scripts/gpu/ipc_frameworks.py): a correct exchange
# in each framework, and CuPy exchanges with a planted mistake (the producer frees while the
# consumer has the memory open; the consumer never closes). Each mode runs plain and under
# `sharecheck run`; `sharecheck report --format json` reads the run's traces (producer and
# consumer). A mode passes when the program printed the same RESULT and exit status both ways and
# the report's findings are exactly the ones expected (none for a correct exchange).
#
# Usage: scripts/gpu-ipc-frameworks.sh [OUTDIR]     (default OUTDIR: ./gpu-ipc-frameworks-out)
#
# Needs python3 with torch (CUDA) and cupy, the NVIDIA driver, and the prebuilt
# target/release/sharecheck and libsharecheck.so. One GPU is enough. A framework that is missing
# is reported as skipped. Writes OUTDIR/report.txt (also printed); exits 1 if any mode fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

out="${1:-gpu-ipc-frameworks-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cli="$PWD/target/release/sharecheck"
[ -x "$cli" ] || { echo "gpu-ipc-frameworks: $cli is missing: cargo build --release --workspace" >&2; exit 1; }
prog="$PWD/scripts/gpu/ipc_frameworks.py"

# mode | framework module | expected findings (sorted `rule@function`, comma-separated; - for none)
cases=(
    "torch-correct|torch|-"
    "cupy-correct|cupy|-"
    "cupy-free-early|cupy|cuMemFree.ipc-memory-open-elsewhere@cuMemFree_v2"
    "cupy-never-close|cupy|cuIpcOpenMemHandle.never-closed@cuIpcOpenMemHandle_v2"
)

report="$out/report.txt"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
{
    echo "## IPC through PyTorch and CuPy: $gpu, $(date -u '+%F %H:%M UTC')"
    echo
    echo "scripts/gpu-ipc-frameworks.sh: scripts/gpu/ipc_frameworks.py plain and under \`sharecheck run\`,"
    echo "then \`sharecheck report --format json\` over both processes' traces. Shim: $(sha256sum target/release/libsharecheck.so | cut -c1-16)."
    python3 -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || true
    python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>/dev/null || true
    echo
} > "$report"
failed=0
ran=0
for case in "${cases[@]}"; do
    IFS='|' read -r mode module expected <<< "$case"
    if ! python3 -c "import $module" 2>/dev/null; then
        echo "- $mode: skipped ($module is not installed)" >> "$report"
        continue
    fi
    ran=$((ran + 1))
    dir="$out/$mode"
    rm -rf "$dir" && mkdir -p "$dir/traces"
    set +e
    python3 "$prog" "$mode" > "$dir/plain.out" 2> "$dir/plain.err"
    plain_rc=$?
    "$cli" run --trace "$dir/traces/%p.jsonl" -- python3 "$prog" "$mode" > "$dir/shim.out" 2> "$dir/shim.err"
    shim_rc=$?
    "$cli" report --format json "$dir/traces" > "$dir/report.json" 2> "$dir/report.err"
    "$cli" report "$dir/traces" > "$dir/report.txt" 2>&1
    set -e
    got="$(python3 - "$dir/report.json" <<'PY'
import json, sys
findings = json.load(open(sys.argv[1]))["findings"]
print(",".join(sorted(set("%s@%s" % (f["rule"], f["fn"]) for f in findings))) or "-")
PY
)"
    verdict=ok
    if [ "$(cat "$dir/plain.out")" != "$(cat "$dir/shim.out")" ] || [ "$plain_rc" != "$shim_rc" ]; then
        verdict="FAILED: the program saw other results under the shim"
    elif [ "$plain_rc" != 0 ]; then
        verdict="FAILED: the exchange itself failed (exit $plain_rc)"
    elif [ "$got" != "$expected" ]; then
        verdict="FAILED: expected $expected"
    fi
    [ "$verdict" = ok ] || failed=$((failed + 1))
    {
        echo "- $mode: $verdict"
        echo "  output (exit $plain_rc plain, $shim_rc shim): $(tr '\n' ' ' < "$dir/shim.out")"
        echo "  traced calls: $(python3 - "$dir/traces" <<'PY'
import collections, glob, json, sys
n = collections.Counter()
for f in glob.glob(sys.argv[1] + "/*.jsonl"):
    for line in open(f, errors="replace"):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "fn" in r:
            n[r["fn"]] += 1
print(", ".join("%s %d" % kv for kv in sorted(n.items())))
PY
)"
        echo "  findings: $got"
    } >> "$report"
done
echo >> "$report"
echo "GPU IPC frameworks: $((ran - failed)) passed, $failed failed, $(( ${#cases[@]} - ran )) skipped" >> "$report"
cat "$report"
[ "$failed" -eq 0 ]
