#!/usr/bin/env bash
# CUDA 13.3 logical endpoints on a real driver.
#
# 1. Lookups (any driver): tests/c/endpoint_probe.c looks each of the twelve functions up every
#    way a program does (dlsym of RTLD_DEFAULT and of the driver's handle, cuGetProcAddress_v2 at
#    13000 and at 13030) and says whether a program that probes for 13.3 would fall back. Run
#    plain and under `sharecheck run`, the two outputs must be identical, line for line: on a
#    driver without the functions (R580) the shim answers exactly as the driver does.
# 2. Scenarios (a driver that reports 13030 or later): the unicast scenarios of
#    tests/endpoint_rules.rs (tests/c/endpoint_cuda.c, unchanged), each plain and under
#    `sharecheck run`, then `sharecheck report`: the same results, and exactly the findings the
#    scenario stages. Multicast scenarios are never run on a GPU (a multicast object can take
#    GPUs out of service on shared machines), nor those that need the simulator's knobs.
#
# Usage: scripts/gpu-endpoint.sh [OUTDIR]     (default OUTDIR: ./gpu-endpoint-out)
#
# Needs gcc, python3, the driver's libcuda, CUDA headers (/usr/local/cuda/include or
# $CUDA_INCLUDE; 13.3 or later for part 2) and the prebuilt target/release/sharecheck and
# libsharecheck.so. Writes OUTDIR/report.txt (also printed); exits 1 if anything differs.
# Also runs on the simulated driver (LD_LIBRARY_PATH at its libcuda.so.1), where part 2 runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

out="${1:-gpu-endpoint-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cli="${SHARECHECK_CLI:-$PWD/target/release/sharecheck}"
[ -x "$cli" ] || { echo "gpu-endpoint: $cli is missing: cargo build --release --workspace" >&2; exit 1; }
include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
report="$out/report.txt"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
failed=0

gcc -O1 -o "$out/endpoint_probe" tests/c/endpoint_probe.c -ldl
rm -rf "$out/probe" && mkdir -p "$out/probe/traces"
"$out/endpoint_probe" > "$out/probe/plain.out"
"$cli" run --trace "$out/probe/traces/%p.jsonl" -- "$out/endpoint_probe" > "$out/probe/shim.out" 2> "$out/probe/shim.err"
driver="$(sed -n 's/^DRIVER //p' "$out/probe/plain.out")"
probe_verdict=ok
if ! diff "$out/probe/plain.out" "$out/probe/shim.out" > "$out/probe/diff.txt"; then
    probe_verdict="FAILED: the lookups answered otherwise under the shim (probe/diff.txt)"
    failed=$((failed + 1))
fi
{
    echo "## Logical endpoints on a real driver: ${gpu:-no nvidia-smi}, driver version $driver, $(date -u '+%F %H:%M UTC')"
    echo
    echo "scripts/gpu-endpoint.sh. Shim: $(sha256sum "$(dirname "$cli")/libsharecheck.so" 2>/dev/null | cut -c1-16)."
    echo
    echo "- lookups (tests/c/endpoint_probe.c, plain vs under \`sharecheck run\`): $probe_verdict"
    echo "  $(grep -c '' "$out/probe/plain.out") lines each; $(grep '^PROBE' "$out/probe/plain.out")"
    echo "  $(grep -m1 '^DLSYM cuLogicalEndpointCreate default' "$out/probe/plain.out")"
    echo "  $(grep '^GPA cuLogicalEndpointCreate' "$out/probe/plain.out" | tr '\n' ';')"
} > "$report"

if [ "${driver:-0}" -ge 13030 ]; then
    if ! grep -q cuLogicalEndpointCreate "$include/cuda.h" 2>/dev/null; then
        echo "- scenarios: FAILED: $include/cuda.h has no logical endpoints (CUDA 13.3+ headers needed)" >> "$report"
        failed=$((failed + 1))
    else
        gcc -O1 -o "$out/endpoint_cuda" tests/c/endpoint_cuda.c -I"$include" -Itests/c -lcuda
        # scenario | expected findings (sorted, comma-separated `rule@function`; `-` for none).
        # Unicast only.
        cases=(
            "release-unreserved|cuLogicalEndpointIdRelease.not-reserved@cuLogicalEndpointIdRelease"
            "release-live|cuLogicalEndpointIdRelease.endpoints-not-destroyed@cuLogicalEndpointIdRelease"
            "create-unreserved|cuLogicalEndpointCreate.id-not-reserved@cuLogicalEndpointCreate"
            "create-in-use|cuLogicalEndpointCreate.id-in-use@cuLogicalEndpointCreate"
            "import-unreserved|cuLogicalEndpointImport.id-not-reserved@cuLogicalEndpointImport"
            "import-in-use|cuLogicalEndpointImport.id-in-use@cuLogicalEndpointImport"
            "no-endpoint|endpoint.no-endpoint-on-id@cuLogicalEndpointAddDevice"
            "type-invalid|cuLogicalEndpointCreate.type-invalid@cuLogicalEndpointCreate"
            "size-not-aligned|cuLogicalEndpointCreate.size-not-aligned@cuLogicalEndpointCreate"
            "size-above-max|cuLogicalEndpointCreate.size-above-max@cuLogicalEndpointCreate"
            "flags-unknown|cuLogicalEndpointCreate.flags-unknown@cuLogicalEndpointCreate"
            "handle-type-unknown|cuLogicalEndpointCreate.handle-type-unknown@cuLogicalEndpointCreate"
            "add-unicast|cuLogicalEndpointAddDevice.not-multicast@cuLogicalEndpointAddDevice"
            "query-not-endpoint|cuLogicalEndpointQuery.id-not-endpoint@cuLogicalEndpointQuery"
            "bind-without-query|endpoint.bind-without-query@cuLogicalEndpointBindAddr"
            "bind-flags|endpoint.bind-flags-not-zero@cuLogicalEndpointBindAddr"
            "bindaddr-not-aligned|cuLogicalEndpointBindAddr.not-aligned@cuLogicalEndpointBindAddr"
            "bindmem-not-aligned|cuLogicalEndpointBindMem.not-aligned@cuLogicalEndpointBindMem"
            "bindaddr-beyond-allocation|cuLogicalEndpointBindAddr.size-beyond-allocation@cuLogicalEndpointBindAddr"
            "bindmem-beyond-allocation|cuLogicalEndpointBindMem.size-beyond-allocation@cuLogicalEndpointBindMem"
            "bind-beyond-endpoint|endpoint.bind-beyond-endpoint@cuLogicalEndpointBindAddr"
            "bindaddr-device-memory|cuLogicalEndpointBindAddr.memory-not-vmm-or-pool@cuLogicalEndpointBindAddr"
            "bindmem-released|cuLogicalEndpointBindMem.memory-not-created@cuLogicalEndpointBindMem"
            "bind-overlap|endpoint.bind-overlaps-binding@cuLogicalEndpointBindMem"
            "unbind-not-aligned|cuLogicalEndpointUnbind.not-aligned@cuLogicalEndpointUnbind"
            "unbind-offset|cuLogicalEndpointUnbind.offset-not-bound@cuLogicalEndpointUnbind"
            "unbind-size|cuLogicalEndpointUnbind.size-not-binds@cuLogicalEndpointUnbind"
            "unbind-cuts|cuLogicalEndpointUnbind.cuts-binding@cuLogicalEndpointUnbind"
            "destroy-not-created|cuLogicalEndpointDestroy.not-created@cuLogicalEndpointDestroy"
            "destroy-bound|cuLogicalEndpointDestroy.unbinds-memory@cuLogicalEndpointDestroy"
            "export-handle-type|cuLogicalEndpointExport.handle-type-not-requested@cuLogicalEndpointExport"
            "correct|-"
            "unicast|-"
        )
        # Scenarios that need a second device.
        if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] || [ -z "$gpu" ]; then
            cases+=(
                "bind-other-device|endpoint.bind-memory-of-other-device@cuLogicalEndpointBindAddr"
                "bind-not-owner|endpoint.bind-device-not-owner@cuLogicalEndpointBindAddr"
            )
        fi
        . scripts/gpu/scenario.sh
        run_cases "$out/endpoint_cuda" "$out" "$report"
    fi
else
    echo "- scenarios: not run (driver $driver has no logical endpoints)" >> "$report"
fi
echo >> "$report"
echo "failed: $failed" >> "$report"
cat "$report"
[ "$failed" = 0 ]
