#!/usr/bin/env bash
# GPU smoke test of the sharecheck shim on a real machine with 2 peer-capable NVIDIA GPUs.
#
# Usage: scripts/gpu-smoke.sh [OUTDIR]            (default OUTDIR: ./gpu-smoke-out)
#
# Needs: the prebuilt target/release/libsharecheck.so and target/release/sharecheck (cargo build
# --release --workspace), nvcc, gcc, python3, and for the PyTorch case a python with torch. No Rust
# and no network. Builds scripts/gpu/peer_runtime.cu (4 ways) and scripts/gpu/peer_driver.cu (2
# ways), runs every case once without the shim and once with it, and checks with
# scripts/gpu/check_traces.py that the shim changed nothing and traced what it should.
#
# Cases (binary: how the shim is loaded):
#   rt_static, rt_static_ptds, rt_shared_ptds  peer_runtime built with static/shared cudart and
#                                              legacy/per-thread default stream: LD_PRELOAD
#   rt_shared                                  peer_runtime, shared cudart: `sharecheck run`
#   drv                                        peer_driver (libcuda only): `sharecheck run`
#   drv_ptds                                   peer_driver with -DCUDA_API_PER_THREAD_DEFAULT_STREAM: LD_PRELOAD
#   torch                                      scripts/gpu/torch_peer.py: `sharecheck run`
#
# Writes OUTDIR/report.txt (everything printed), OUTDIR/results.tsv (one line per check),
# OUTDIR/traces/<case>/*.jsonl (the traces), OUTDIR/cases/<case>/ (outputs of both runs and the
# `sharecheck report` text) and OUTDIR/build/ (binaries and build logs).
# Ends with `GPU SMOKE: N passed, M failed`; exit status 1 if any check failed.
#
# Environment: NVCC (nvcc to use), PYTHON (python with torch), CASE_TIMEOUT (seconds per run, 60).
set -euo pipefail
# Never touch NVLink multicast (NVLS) from anything started here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

usage() { echo "usage: scripts/gpu-smoke.sh [OUTDIR]   (default OUTDIR: ./gpu-smoke-out)"; }
case "${1:-}" in
    -h | --help)
        # The header comment is the help text.
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    -*) usage >&2; exit 2 ;;
esac
[[ $# -le 1 ]] || { usage >&2; exit 2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-./gpu-smoke-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/traces" "$OUT/cases" "$OUT/build" "$OUT/results.tsv" "$OUT/report.txt"
mkdir -p "$OUT/traces" "$OUT/cases" "$OUT/build"

# Every case shares memory between two devices (peer copies, IPC imported on device 1): with one
# GPU they cannot be staged, and running them would only report the missing device.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -lt 2 ]]; then
    echo "gpu-smoke: needs two GPUs; this machine has ${gpus:-0} (scripts/gpu-rules.sh and" \
        "scripts/gpu-bench.sh run on one)" | tee "$OUT/report.txt" >&2
    exit 3
fi

SHIM="$ROOT/target/release/libsharecheck.so"
SHARECHECK="$ROOT/target/release/sharecheck"
CHECKER="$ROOT/scripts/gpu/check_traces.py"
RESULTS="$OUT/results.tsv"
BUILD="$OUT/build"
CASE_TIMEOUT="${CASE_TIMEOUT:-60}"

section() { printf '\n==================== %s\n' "$*"; }
# A check decided here (not by check_traces.py): STATUS CASE CHECK DETAIL.
result() {
    printf '  %-5s %-34s %s\n' "$1" "$3" "$4"
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"
}
indent() { sed 's/^/    /'; }

find_nvcc() {
    local c
    for c in "${NVCC:-}" "$(command -v nvcc || true)" /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
        if [[ -n $c && -x $c ]]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

find_torch_python() {
    local c
    for c in "${PYTHON:-}" python3 python "${VIRTUAL_ENV:-/nonexistent}/bin/python3" /opt/*/bin/python3 \
        "${HOME:-/root}"/*/bin/python3 "${HOME:-/root}"/.venv/bin/python3 /venv/bin/python3 /workspace/*/bin/python3; do
        if [[ -n $c ]] && command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then
            command -v "$c"
            return 0
        fi
    done
    return 1
}

# ---------------------------------------------------------------------------------------------
# 1. Environment.

print_environment() {
    section "environment"
    echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
    echo "host: $(uname -n) ($(uname -r))"
    echo "repo: $ROOT ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
    echo "--- nvidia-smi --query-gpu=name,driver_version"
    nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv 2>&1 | indent || true
    echo "--- nvidia-smi topo -m"
    nvidia-smi topo -m 2>&1 | indent || true
    echo "--- nvcc --version"
    if [[ -n $NVCC_BIN ]]; then "$NVCC_BIN" --version 2>&1 | indent || true; else echo "    nvcc not found"; fi
    echo "--- gcc: $(gcc --version 2>/dev/null | head -n1 || echo 'not found')"
    echo "--- python3 (checks): $(python3 --version 2>&1)"
    echo "--- torch"
    if [[ -n $TORCH_PY ]]; then
        "$TORCH_PY" -c 'import torch, sys; print("    %s: torch %s, CUDA %s, %d GPU(s)" % (sys.executable, torch.__version__, torch.version.cuda, torch.cuda.device_count()))' 2>&1 || true
    else
        echo "    no python with torch found (set PYTHON=...)"
    fi
    echo "--- shim"
    stat -c '%n: %s bytes, modified %y' "$SHIM" "$SHARECHECK" 2>&1 | indent || true
    "$SHARECHECK" --version 2>&1 | indent || true
}

# ---------------------------------------------------------------------------------------------
# 2./3. Builds.

declare -A BUILT=()   # binary name -> 1 when built

build() {
    local name=$1
    shift
    local log="$BUILD/$name.log"
    if "$NVCC_BIN" "$@" -o "$BUILD/$name" >"$log" 2>&1 \
        || "$NVCC_BIN" -allow-unsupported-compiler "$@" -o "$BUILD/$name" >>"$log" 2>&1; then
        BUILT[$name]=1
        result PASS "$name" build "$name: nvcc $*"
    else
        result FAIL "$name" build "$name: nvcc $* (log: $log)"
        tail -n 20 "$log" | indent
    fi
}

build_all() {
    section "build"
    if [[ -z $NVCC_BIN ]]; then
        local b
        for b in rt_static rt_shared rt_static_ptds rt_shared_ptds drv drv_ptds; do
            result FAIL "$b" build "$b: nvcc not found (set NVCC=...)"
        done
        return 0
    fi
    local cuda_home lib rpath=()
    cuda_home="$(cd "$(dirname "$NVCC_BIN")/.." && pwd)"
    for lib in "$cuda_home/lib64" "$cuda_home/lib" "$cuda_home/targets/x86_64-linux/lib"; do
        [[ -d $lib ]] && rpath+=(-Xlinker -rpath -Xlinker "$lib")
    done
    local rt="$ROOT/scripts/gpu/peer_runtime.cu" drv="$ROOT/scripts/gpu/peer_driver.cu"
    local common=(-arch=sm_90 -O2 "${rpath[@]}")
    build rt_static "${common[@]}" "$rt"
    build rt_shared "${common[@]}" -cudart shared "$rt"
    build rt_static_ptds "${common[@]}" --default-stream per-thread "$rt"
    build rt_shared_ptds "${common[@]}" -cudart shared --default-stream per-thread "$rt"
    # Plain host C++ with no CUDA runtime at all: only libcuda.
    build drv -x c++ "${common[@]}" -cudart none "$drv" -lcuda -ldl
    build drv_ptds -x c++ "${common[@]}" -cudart none -DCUDA_API_PER_THREAD_DEFAULT_STREAM "$drv" -lcuda -ldl
}

# ---------------------------------------------------------------------------------------------
# 4./5. Cases: each runs without the shim, then with it, then gets checked.

# run_case NAME MODE BINARY_KEY -- COMMAND...   (checks for check_traces.py in the CHECKS array)
#   MODE preload: LD_PRELOAD + SHARECHECK_TRACE set directly; cli: `sharecheck run --trace`.
#   BINARY_KEY: a BUILT[] entry that must exist, or "-".
run_case() {
    local name=$1 mode=$2 needs=$3
    shift 4
    local dir="$OUT/cases/$name" traces="$OUT/traces/$name"
    mkdir -p "$dir" "$traces"
    section "case $name ($([[ $mode == cli ]] && echo 'sharecheck run' || echo 'LD_PRELOAD'))"
    echo "command: $*"
    if [[ $needs != - && -z ${BUILT[$needs]:-} ]]; then
        result FAIL "$name" run "not run: $needs was not built"
        return 0
    fi

    local brc=0 src=0 rrc=0 t0 t1
    t0=$(date +%s)
    timeout -k 5 "$CASE_TIMEOUT" env -u SHARECHECK_TRACE -u SHARECHECK_JOB_KEY "$@" \
        >"$dir/baseline.out" 2>"$dir/baseline.err" || brc=$?
    t1=$(date +%s)
    echo "--- without the shim: exit $brc ($((t1 - t0)) s); stdout:"
    indent <"$dir/baseline.out"
    if [[ -s $dir/baseline.err ]]; then
        echo "--- stderr (last 15 lines):"
        tail -n 15 "$dir/baseline.err" | indent
    fi

    t0=$(date +%s)
    if [[ $mode == cli ]]; then
        timeout -k 5 "$CASE_TIMEOUT" "$SHARECHECK" run --trace "$traces/%p.jsonl" -- "$@" \
            >"$dir/shim.out" 2>"$dir/shim.err" || src=$?
    else
        timeout -k 5 "$CASE_TIMEOUT" env SHARECHECK_TRACE="$traces/%p.jsonl" \
            LD_PRELOAD="$SHIM${LD_PRELOAD:+:$LD_PRELOAD}" "$@" \
            >"$dir/shim.out" 2>"$dir/shim.err" || src=$?
    fi
    t1=$(date +%s)
    echo "--- with the shim: exit $src ($((t1 - t0)) s); stdout differs from the run without it in:"
    if diff <(grep -E '^(CALL|CHECK|RESOLVE|UNEXPECTED|DONE|SKIP)' "$dir/baseline.out") \
        <(grep -E '^(CALL|CHECK|RESOLVE|UNEXPECTED|DONE|SKIP)' "$dir/shim.out") >"$dir/diff.txt"; then
        echo "    (no compared line)"
    else
        indent <"$dir/diff.txt"
    fi
    grep -E '^(DLSYM|DLCALL)' "$dir/shim.out" | sed 's/^/    shim: /' || true
    if [[ -s $dir/shim.err ]]; then
        echo "--- stderr with the shim (last 15 lines):"
        tail -n 15 "$dir/shim.err" | indent
    fi
    echo "--- trace files: $(find "$traces" -type f | wc -l) in $traces"

    "$SHARECHECK" report --format text "$traces" >"$dir/sharecheck-report.txt" 2>&1 || rrc=$?
    echo "--- sharecheck report --format text $traces (exit $rrc):"
    indent <"$dir/sharecheck-report.txt"

    python3 "$CHECKER" "$name" "$traces" "$dir/baseline.out" "$dir/shim.out" \
        --baseline-rc "$brc" --shim-rc "$src" --expect-rc 0 \
        --report-output "$dir/sharecheck-report.txt" --report-rc "$rrc" \
        --results "$RESULTS" "${CHECKS[@]}" || true
}

runtime_checks() {
    local ptds=$1
    CHECKS=(
        --no-raw-handles
        --expect 'cuDeviceCanAccessPeer=0'
        --expect 'parent:cuCtxEnablePeerAccess=0,704'
        --expect 'parent:cuCtxDisablePeerAccess=0'
        --expect 'parent:cuIpcGetMemHandle=0'
        --expect 'parent:cuIpcGetEventHandle=0'
        --expect 'child:cuIpcOpenEventHandle=0'
        --expect 'child:cuIpcOpenMemHandle_v2=0'
        --expect 'child:cuIpcCloseMemHandle=0'
        --observe 'parent:cuCtxDisablePeerAccess=0,705'
        --observe 'parent:cuIpcOpenMemHandle_v2=201'
        --observe 'cuIpcOpenMemHandle'
        --observe 'cuMemcpyPeer'
        --observe 'cuMemcpyPeer_ptds'
        --observe 'cuMemcpyPeerAsync'
        --observe 'cuMemcpyPeerAsync_ptsz'
    )
    if [[ $ptds == 1 ]]; then
        CHECKS+=(--expect 'cuStreamAttachMemAsync_ptsz=0' --observe 'cuStreamAttachMemAsync')
    else
        CHECKS+=(--expect 'cuStreamAttachMemAsync=0' --observe 'cuStreamAttachMemAsync_ptsz')
    fi
}

driver_checks() {
    local ptds=$1
    CHECKS=(
        --calls-match
        --no-raw-handles
        --expect 'cuDeviceCanAccessPeer=0,0'
        --expect 'cuCtxEnablePeerAccess=1,0,704'
        --expect 'cuCtxDisablePeerAccess=0,705'
        --expect 'cuIpcGetMemHandle=0'
        --expect 'cuIpcOpenMemHandle_v2=201,1'
        --expect 'cuIpcGetEventHandle=0'
        --expect 'cuIpcOpenEventHandle'
        --forbid 'cuIpcOpenMemHandle'
        # Resolved through cuGetProcAddress with LEGACY and PER_THREAD flags: both forms appear.
        --expect 'cuMemcpyPeer=0'
        --expect 'cuMemcpyPeer_ptds=0'
        # Logical endpoints: R580 (CUDA 13.0 driver) has none, and dlsym says so under the shim
        # too (its own export is not handed out for a function the driver lacks).
        --expect-baseline-line 'DLSYM cuLogicalEndpointIdReserve absent'
        --expect-line 'DLSYM cuLogicalEndpointIdReserve absent'
        --forbid 'cuLogicalEndpointIdReserve'
    )
    if [[ $ptds == 1 ]]; then
        CHECKS+=(--expect 'cuMemcpyPeerAsync_ptsz=0' --forbid 'cuMemcpyPeerAsync')
    else
        CHECKS+=(--expect 'cuMemcpyPeerAsync=0' --forbid 'cuMemcpyPeerAsync_ptsz')
    fi
}

run_all() {
    local b="$BUILD"
    runtime_checks 0
    run_case rt_static preload rt_static -- "$b/rt_static"
    runtime_checks 0
    run_case rt_shared cli rt_shared -- "$b/rt_shared"
    runtime_checks 1
    run_case rt_static_ptds preload rt_static_ptds -- "$b/rt_static_ptds"
    runtime_checks 1
    run_case rt_shared_ptds preload rt_shared_ptds -- "$b/rt_shared_ptds"
    driver_checks 0
    run_case drv cli drv -- "$b/drv"
    driver_checks 1
    run_case drv_ptds preload drv_ptds -- "$b/drv_ptds"

    if [[ -z $TORCH_PY ]]; then
        section "case torch"
        result FAIL torch run "no python with torch found (set PYTHON=...)"
    else
        CHECKS=(--expect 'cuDeviceCanAccessPeer|cuCtxEnablePeerAccess'
            --observe 'cuDeviceCanAccessPeer' --observe 'cuCtxEnablePeerAccess'
            --observe 'cuMemcpyPeer|cuMemcpyPeer_ptds|cuMemcpyPeerAsync|cuMemcpyPeerAsync_ptsz')
        run_case torch cli - -- "$TORCH_PY" "$ROOT/scripts/gpu/torch_peer.py"
    fi
}

summarize() {
    section "summary"
    local passed failed
    passed=$(grep -c '^PASS' "$RESULTS" || true)
    failed=$(grep -c '^FAIL' "$RESULTS" || true)
    printf '  %-16s %6s %6s\n' case passed failed
    awk -F'\t' '$1 != "INFO" { c[$2]; if ($1 == "PASS") p[$2]++; else f[$2]++ }
        END { for (k in c) printf "  %-16s %6d %6d\n", k, p[k], f[k] }' "$RESULTS" | sort
    if [[ $failed -gt 0 ]]; then
        echo "  failed checks:"
        awk -F'\t' '$1 == "FAIL" { printf "    %s / %s: %s\n", $2, $3, $4 }' "$RESULTS"
    fi
    echo
    echo "GPU SMOKE: $passed passed, $failed failed"
    echo "(report: $OUT/report.txt, traces: $OUT/traces/)"
    [[ $failed -eq 0 ]]
}

main() {
    local start=$SECONDS
    NVCC_BIN="$(find_nvcc || true)"
    TORCH_PY="$(find_torch_python || true)"
    : >"$RESULTS"
    print_environment
    if [[ ! -f $SHIM || ! -x $SHARECHECK ]]; then
        result FAIL setup shim "missing $SHIM or $SHARECHECK: build with cargo build --release --workspace"
    fi
    build_all
    run_all
    echo
    echo "elapsed: $((SECONDS - start)) s"
    summarize
}

main 2>&1 | tee "$OUT/report.txt"
exit "${PIPESTATUS[0]}"
