#!/usr/bin/env bash
# The stream-attach rules on a real GPU: every scenario of tests/attach_rules.rs
# (tests/c/attach_cuda.c), and the runtime's cudaStreamAttachMemAsync built with and without
# `--default-stream per-thread` (scripts/gpu/attach_runtime.cu, when nvcc is there), run plain and
# under `sharecheck run`, then `sharecheck report` over the
# run's traces. A scenario passes when the program saw exactly the same results under the shim as
# plain (every CALL line and the exit status) and the findings are exactly the ones it stages.
#
# Usage: scripts/gpu-attach.sh [OUTDIR]     (default OUTDIR: ./gpu-attach-out)
#
# Needs gcc, python3, the NVIDIA driver's libcuda and CUDA headers (/usr/local/cuda/include, or
# $CUDA_INCLUDE), and the prebuilt target/release/sharecheck and libsharecheck.so. One GPU is
# enough. Writes OUTDIR/report.txt (also printed) and exits 1 if any scenario fails. Makes no
# multicast object; asks for 64 KiB of managed and of device memory at a time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

out="${1:-gpu-attach-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cli="$PWD/target/release/sharecheck"
[ -x "$cli" ] || { echo "gpu-attach: $cli is missing: cargo build --release --workspace" >&2; exit 1; }
include="${CUDA_INCLUDE:-/usr/local/cuda/include}"
exe="$out/attach_cuda"
gcc -O1 -o "$exe" tests/c/attach_cuda.c -I"$include" -Itests/c -lcuda -ldl

# scenario | expected findings (sorted, comma-separated `rule@function`; `-` for none)
cases=(
    "single-null|cuStreamAttachMemAsync.single-on-null-stream@cuStreamAttachMemAsync"
    "single-legacy|cuStreamAttachMemAsync.single-on-null-stream@cuStreamAttachMemAsync,divergence.cuStreamAttachMemAsync.single-on-legacy-stream-accepted@cuStreamAttachMemAsync"
    "flags-combined|cuStreamAttachMemAsync.flags-not-one-attach-flag@cuStreamAttachMemAsync"
    # R580 kills the process inside the call (exit 139 plain and traced); the finding is reported
    # before the call, so the report finds it in the trace the process left.
    "flags-zero|cuStreamAttachMemAsync.flags-not-one-attach-flag@cuStreamAttachMemAsync"
    "device-memory|cuStreamAttachMemAsync.memory-not-managed@cuStreamAttachMemAsync"
    "interior|cuStreamAttachMemAsync.not-allocation-start@cuStreamAttachMemAsync"
    "partial|cuStreamAttachMemAsync.partial-length@cuStreamAttachMemAsync"
    "pageable|cuStreamAttachMemAsync.pageable-without-access@cuStreamAttachMemAsync"
    "pageable-length-zero|cuStreamAttachMemAsync.pageable-length-zero@cuStreamAttachMemAsync,cuStreamAttachMemAsync.pageable-without-access@cuStreamAttachMemAsync"
    "destroyed-attached|cuStreamDestroy.attached-memory-reverts@cuStreamDestroy_v2"
    "procaddress-legacy|cuStreamAttachMemAsync.single-on-null-stream@cuStreamAttachMemAsync"
    "procaddress-ptsz|-"
    "correct|-"
    # A 1 GiB memset keeps the first stream busy while the second attach is made.
    "unordered|cuStreamAttachMemAsync.attaches-not-ordered@cuStreamAttachMemAsync"
    "ordered-sync|-"
    "ordered-event|-"
)
export ATTACH_BUSY_BYTES=$((1 << 30))

# The runtime's spellings (scripts/gpu/attach_runtime.cu, built with nvcc twice): SINGLE on stream
# 0 is the NULL stream without --default-stream per-thread (a misuse), the thread's own stream with
# it (correct).
nvcc="${NVCC:-nvcc}"
runtime_cases=()
if command -v "$nvcc" > /dev/null; then
    "$nvcc" -o "$out/attach_runtime_legacy" scripts/gpu/attach_runtime.cu
    "$nvcc" --default-stream per-thread -o "$out/attach_runtime_ptsz" scripts/gpu/attach_runtime.cu
    runtime_cases=(
        "runtime-legacy|cuStreamAttachMemAsync.single-on-null-stream@cuStreamAttachMemAsync"
        "runtime-ptsz|-"
    )
fi

report="$out/report.txt"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
{
    echo "## Stream-attach rules on a real GPU: $gpu, $(date -u '+%F %H:%M UTC')"
    echo
    echo "scripts/gpu-attach.sh: tests/c/attach_cuda.c (gcc, the real libcuda), each scenario plain and under"
    echo "\`sharecheck run\`, then \`sharecheck report --format json\` over its traces. Shim: $(sha256sum target/release/libsharecheck.so | cut -c1-16)."
    echo
} > "$report"
. scripts/gpu/scenario.sh
failed=0
for case in "${cases[@]}" "${runtime_cases[@]}"; do
    scenario="${case%%|*}"
    expected="${case#*|}"
    dir="$out/$scenario"
    # A runtime case is its own program (no scenario argument).
    cmd=("$exe" "$scenario")
    case "$scenario" in
        runtime-legacy) cmd=("$out/attach_runtime_legacy") ;;
        runtime-ptsz) cmd=("$out/attach_runtime_ptsz") ;;
    esac
    run_scenario "$dir" "$expected" "${cmd[@]}"
    [ "$verdict" = ok ] || failed=$((failed + 1))
    {
        echo "- $scenario: $verdict"
        echo "  calls (exit $plain_rc plain, $shim_rc shim): $shim_calls"
        echo "  findings: $got"
        facts="$(grep '^FACT ' "$dir/plain.out" | cut -d' ' -f2- | tr '\n' ';' || true)"
        [ -z "$facts" ] || echo "  measured (cuStreamQuery, plain run): $facts"
    } >> "$report"
done
# A correct multi-stream managed-memory program (scripts/gpu/attach_tasks.cu: 8 tasks, each
# attaching its buffer SINGLE to its own stream every round, 4000 attaches), plain and traced in
# alternation: the same output, no finding, and its time side by side.
tasks_cases=0
if command -v "$nvcc" > /dev/null; then
    tasks_cases=1
    "$nvcc" -O2 -o "$out/attach_tasks" scripts/gpu/attach_tasks.cu
    dir="$out/tasks"
    rm -rf "$dir" && mkdir -p "$dir"
    plain_s=() traced_s=() verdict=ok
    for round in 1 2 3 4 5; do
        for mode in plain traced; do
            run_out="$dir/$mode-$round.out"
            set +e
            if [ "$mode" = plain ]; then
                "$out/attach_tasks" > "$run_out" 2>&1
            else
                mkdir -p "$dir/traces-$round"
                "$cli" run --trace "$dir/traces-$round/%p.jsonl" -- "$out/attach_tasks" > "$run_out" 2> "$dir/$mode-$round.err"
            fi
            rc=$?
            set -e
            [ "$rc" -eq 0 ] || verdict="FAILED: $mode run $round exited $rc"
            secs="$(sed -n 's/^SECONDS //p' "$run_out")"
            if [ "$mode" = plain ]; then plain_s+=("$secs"); else traced_s+=("$secs"); fi
        done
        if ! diff <(grep -v '^SECONDS' "$dir/plain-$round.out") <(grep -v '^SECONDS' "$dir/traced-$round.out") > /dev/null; then
            verdict="FAILED: the program printed other results under the shim (round $round)"
        fi
        "$cli" report --format json "$dir/traces-$round" > "$dir/report-$round.json" 2> "$dir/report-$round.err" || true
        found="$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$dir/report-$round.json" 2>/dev/null || echo "?")"
        [ "$found" = 0 ] || verdict="FAILED: $found finding(s) on a correct program (round $round)"
    done
    median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }
    mp="$(median "${plain_s[@]}")" mt="$(median "${traced_s[@]}")"
    [ "$verdict" = ok ] || failed=$((failed + 1))
    {
        echo "- tasks (8 streams, $(sed -n 's/^ATTACHES //p' "$dir/plain-1.out") attaches a run): $verdict"
        echo "  seconds plain: ${plain_s[*]}; traced: ${traced_s[*]}"
        echo "  median plain $mp s, traced $mt s ($(python3 -c "import sys; p,t=float(sys.argv[1]),float(sys.argv[2]); print('%+.2f%%' % ((t/p-1)*100))" "$mp" "$mt"))"
    } >> "$report"
fi

echo >> "$report"
echo "GPU ATTACH: $(( ${#cases[@]} + ${#runtime_cases[@]} + tasks_cases - failed )) passed, $failed failed" >> "$report"
cat "$report"
[ "$failed" -eq 0 ]
