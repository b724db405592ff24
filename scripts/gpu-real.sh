#!/usr/bin/env bash
# Zero false alarms on real programs nobody here wrote: framework jobs on real GPUs, each plain and
# under `sharecheck run` with a trace.
#
#   torch-peer  PyTorch copies between the two GPUs (scripts/gpu/real_jobs.py), timed (1000 round
#               trips of 64 MiB: the H200 pair runs them in two speeds, 0.378 and ~0.39-0.40 s,
#               plain and traced alike, so the medians need 9 rounds)
#   nccl        NCCL all_reduce of 64 MiB across 2 processes on 2 GPUs through torch.distributed
#               (scripts/gpu/real_jobs.py), timed between barriers after a warm-up
#   torch-train a PyTorch training job (forked DataLoader workers) that ends with NCCL all_reduce
#               across 2 processes (scripts/gpu/torch_job.py --ranks 2)
#   torch-mp    torch.multiprocessing CUDA tensor sharing (scripts/gpu/ipc_frameworks.py)
#   cupy-peer   CuPy peer access and peer copies (scripts/gpu/real_jobs.py)
#   cupy-ipc    CuPy IPC between two processes (scripts/gpu/ipc_frameworks.py)
#   attach      a multi-stream managed-memory program, one SINGLE attach per task and round
#               (scripts/gpu/attach_tasks.cu, built with nvcc)
#   nccl-cumem  the nccl job with NCCL_CUMEM_ENABLE=1: NCCL's buffers are cuMem mappings shared
#               between the ranks as POSIX fds (issue 25), timed
#   torch-expandable  torch.multiprocessing tensor sharing with expandable segments (VMM memory
#               exported as POSIX fds; scripts/gpu/vmm_frameworks.py)
#   cumem-remap a cuMem allocator of the program's own, in a PyTorch process, that sleeps (unmap,
#               release) and wakes (create, map, access) as vLLM's sleep mode does
#   vectorAddMMAP, memMapIPCDrv, streamOrderedAllocationIPC
#               cuda-samples programs (VMM across devices, VMM handles across processes, pools
#               across processes), built from $SAMPLES (a cuda-samples checkout) when it is set,
#               timed by their wall time (scripts/gpu/timed.sh)
#
# Then one planted mistake in a framework program must be found: cumem-remap-no-access, whose
# wake maps new memory without giving access again; its report must hold vmm.used-before-access.
#
# A job passes when the plain and traced runs exit alike and print the same CHECK/RESULT/SUM
# lines, and `sharecheck report` finds no error and no warning in its traces (infos are listed)
# and no call numbered and never written;
# the timed jobs also when the median of the traced runs' TIME is at most 1% above the plain
# runs' (rounds interleaved, order alternating). With PHASES_SHIM (a `--features phase-times`
# build, src/phases.rs) the shim's own time is measured too: the median, over PHASE_ROUNDS (3)
# more traced runs under that build, of every wrapped call's time outside the driver, its
# constructor and its exit, summed over the job's processes (the program's own: a sample runs
# without its timing wrapper there). A job timed whole (the cuda-samples, TIME is the
# process's wall time) is then judged by it instead: at most 1% of the plain median. Wall-time
# medians cannot tell 1% on a program of a second whose plain runs alone spread by 12% (the
# cuda-samples on 2x H200: cuInit, context creation, the kernel's teardown); the wall-time
# figure is still printed. A job that times a section (the frameworks' timed rounds, after
# their start-up) stays judged by that section's wall time, which its own time (start-up
# included) cannot be compared with; that own time is printed. A framework that is missing is
# reported as skipped.
#
# Usage: scripts/gpu-real.sh [OUTDIR]     (default ./gpu-real-out; ROUNDS=N for the timed jobs, 9;
#        ONLY=job,job to run some jobs; SAMPLES=DIR for the cuda-samples jobs; PHASES_SHIM=FILE)
# Needs 2 GPUs, python3 with torch (and cupy for the CuPy jobs), nvcc, and the prebuilt
# target/release/sharecheck and libsharecheck.so. NVLink multicast stays off. Writes
# OUTDIR/report.md (also printed); exits 1 if any job fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROUNDS=${ROUNDS:-9}
PHASE_ROUNDS=${PHASE_ROUNDS:-3}
out="${1:-gpu-real-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
root="$PWD"
cli="$PWD/target/release/sharecheck"
for f in "$cli" target/release/libsharecheck.so; do
    [ -f "$f" ] || { echo "gpu-real: $f is missing: cargo build --release --workspace" >&2; exit 1; }
done
have() { python3 -c "import $1" 2>/dev/null; }
attach_ok=0
if command -v nvcc >/dev/null && nvcc -O2 -o "$out/attach_tasks" scripts/gpu/attach_tasks.cu 2>"$out/nvcc.err"; then
    attach_ok=1
fi

samples_ok=0
if [ -n "${SAMPLES:-}" ] && command -v nvcc >/dev/null; then
    if bash scripts/gpu/build-samples.sh "$SAMPLES" "$out/samples" > "$out/samples-build.txt" 2>&1; then
        samples_ok=1
    fi
fi

# name | timed (0: not; section: the job prints TIME of its timed rounds; whole: timed.sh
# prints the process's wall time, and the phase runs run the command after it) | needs |
# command (run in the job's directory where the command names one: the samples find their
# kernels beside them)
jobs=(
    "torch-peer|section|torch|python3 scripts/gpu/real_jobs.py torch-peer 1000"
    "nccl|section|torch|python3 scripts/gpu/real_jobs.py nccl 2000"
    "torch-train|0|torch|python3 scripts/gpu/torch_job.py --samples 4096 --epochs 2 --nccl 200 --ranks 2"
    "torch-mp|0|torch|python3 scripts/gpu/ipc_frameworks.py torch-correct"
    "cupy-peer|0|cupy|python3 scripts/gpu/real_jobs.py cupy-peer"
    "cupy-ipc|0|cupy|python3 scripts/gpu/ipc_frameworks.py cupy-correct"
    "attach|0|attach|$out/attach_tasks 8 500"
    "nccl-cumem|section|torch|env NCCL_CUMEM_ENABLE=1 python3 scripts/gpu/real_jobs.py nccl 2000"
    "torch-expandable|0|torch|python3 scripts/gpu/vmm_frameworks.py torch-expandable-mp"
    "cumem-remap|0|torch|python3 scripts/gpu/vmm_frameworks.py cumem-remap"
    "vectorAddMMAP|whole|samples|$root/scripts/gpu/timed.sh $out/samples/vectorAddMMAP/vectorAddMMAP"
    "memMapIPCDrv|whole|samples|$root/scripts/gpu/timed.sh $out/samples/memMapIPCDrv/memMapIPCDrv"
    "streamOrderedAllocationIPC|whole|samples|$root/scripts/gpu/timed.sh $out/samples/streamOrderedAllocationIPC/streamOrderedAllocationIPC"
)

report="$out/report.md"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd';' || echo unknown)"
{
    echo "## Real frameworks under the shim: $gpu, $(date -u '+%F %H:%M UTC')"
    echo
    echo "scripts/gpu-real.sh, shim $(sha256sum target/release/libsharecheck.so | cut -c1-16); $ROUNDS rounds for the timed jobs."
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null || true
    python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>/dev/null || true
    echo
    echo "| job | runs | same output | errors | warnings | infos (rules) | plain s (median) | traced s (median) | overhead | result |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$report"

median() { sort -g | awk '{a[NR]=$1} END { if (NR) print a[int((NR+1)/2)]; else print "" }'; }
lines() { grep -E '^(CHECK|RESULT|SUM|DONE|ATTACHES) ' "$1" | sort || true; }
failed=0
for job in "${jobs[@]}"; do
    IFS='|' read -r name timed needs cmd <<< "$job"
    if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        continue
    fi
    if { [ "$needs" = attach ] && [ "$attach_ok" = 0 ]; } || { [ "$needs" = samples ] && [ "$samples_ok" = 0 ]; } ||
        { [ "$needs" != attach ] && [ "$needs" != samples ] && ! have "$needs"; }; then
        echo "| $name | - | - | - | - | - | - | - | - | skipped ($needs missing) |" >> "$report"
        continue
    fi
    rounds=1
    [ "$timed" != 0 ] && rounds=$ROUNDS
    dir="$out/$name"
    rm -rf "$dir" && mkdir -p "$dir"
    same=yes
    problems=()
    for ((r = 1; r <= rounds; r++)); do
        if ((r % 2)); then order=(plain traced); else order=(traced plain); fi
        for mode in "${order[@]}"; do
            set +e
            if [ "$needs" = samples ]; then cd "$(dirname "${cmd##* }")"; fi
            if [ "$mode" = plain ]; then
                $cmd > "$dir/plain-$r.out" 2> "$dir/plain-$r.err"
            else
                "$cli" run -q --trace "$dir/traces-$r/%p.jsonl" -- $cmd > "$dir/traced-$r.out" 2> "$dir/traced-$r.err"
            fi
            echo $? > "$dir/$mode-$r.rc"
            cd "$root"
            set -e
        done
        if ! cmp -s "$dir/plain-$r.rc" "$dir/traced-$r.rc"; then
            same=no; problems+=("round $r: exit $(cat "$dir/plain-$r.rc") plain, $(cat "$dir/traced-$r.rc") traced")
        fi
        if [ "$(cat "$dir/plain-$r.rc")" != 0 ]; then
            problems+=("round $r: the plain run failed: $(tail -2 "$dir/plain-$r.err" | tr '\n' ' ')")
        fi
        if ! diff <(lines "$dir/plain-$r.out") <(lines "$dir/traced-$r.out") > "$dir/diff-$r.txt"; then
            same=no; problems+=("round $r: output differs ($dir/diff-$r.txt)")
        fi
    done
    if [ "$(cat "$dir/plain-1.rc")" = 3 ] && grep -q '^SKIP' "$dir/plain-1.out"; then
        echo "| $name | - | - | - | - | - | - | - | - | skipped ($(grep -m1 '^SKIP' "$dir/plain-1.out")) |" >> "$report"
        continue
    fi
    # Findings of every traced round.
    errors=0; warnings=0; infos=0; rules=""
    for ((r = 1; r <= rounds; r++)); do
        if ! "$cli" report --format json "$dir/traces-$r" > "$dir/report-$r.json" 2> "$dir/report-$r.err"; then
            problems+=("round $r: no trace could be reported: $(tail -1 "$dir/report-$r.err")")
            continue
        fi
        read -r e w i rr < <(python3 - "$dir/report-$r.json" <<'PY'
import collections, json, sys
r = json.load(open(sys.argv[1]))
c = collections.Counter(f.get("severity") for f in r["findings"])
rules = collections.Counter(f["rule"] for f in r["findings"] if f.get("severity") == "info")
print(c["error"], c["warning"], c["info"], ",".join("%s:%d" % kv for kv in sorted(rules.items())) or "-")
PY
)
        errors=$((errors + e)); warnings=$((warnings + w)); infos=$((infos + i))
        [ "$r" = 1 ] && rules="$rr"
        # Every call a process numbered must be in its trace: the text report names any that
        # is not (a writer defect, as records longer than a ring chunk were before 00287d5).
        "$cli" report "$dir/traces-$r" > "$dir/report-$r.txt" 2>&1 || true
        if grep -q 'numbered and never written' "$dir/report-$r.txt"; then
            problems+=("round $r: calls numbered and never written: $dir/report-$r.txt")
        fi
    done
    [ $((errors + warnings)) -gt 0 ] && problems+=("$errors error(s), $warnings warning(s): $dir/report-*.json")
    plain_t=""; traced_t=""; overhead="-"
    if [ "$timed" != 0 ]; then
        plain_t=$(for ((r = 1; r <= rounds; r++)); do awk '$1 == "TIME" {print $2}' "$dir/plain-$r.out"; done | median)
        traced_t=$(for ((r = 1; r <= rounds; r++)); do awk '$1 == "TIME" {print $2}' "$dir/traced-$r.out"; done | median)
        if [ -n "$plain_t" ] && [ -n "$traced_t" ]; then
            overhead=$(awk -v p="$plain_t" -v t="$traced_t" 'BEGIN { printf "%+.2f%%", (t - p) / p * 100 }')
            if [ -n "${PHASES_SHIM:-}" ]; then
                # What the shim adds, from its phase build (the header says why).
                # A job timed whole runs as itself: its timing wrapper's processes are not the
                # program's.
                phase_cmd=$cmd
                if [ "$timed" = whole ]; then phase_cmd=${cmd##* }; fi
                for ((r = 1; r <= PHASE_ROUNDS; r++)); do
                    set +e
                    if [ "$needs" = samples ]; then cd "$(dirname "$phase_cmd")"; fi
                    SHARECHECK_SHIM="$PHASES_SHIM" SHARECHECK_PHASES_OUT="$dir/phases-$r.txt" \
                        "$cli" run -q --trace "$dir/phase-traces-$r/%p.jsonl" -- $phase_cmd > /dev/null 2>&1
                    cd "$root"
                    set -e
                done
                own=$(python3 scripts/gpu/phase_split.py --own "$dir"/phases-*.txt 2>/dev/null || true)
                if [ -z "$own" ]; then
                    problems+=("the phase build wrote no times ($dir/phases-*.txt)")
                else
                    share=$(awk -v o="$own" -v p="$plain_t" 'BEGIN { printf "%.2f", o / 1000 / p * 100 }')
                    if [ "$timed" = whole ]; then
                        overhead="$overhead wall; shim ${own} ms = ${share}%"
                        if awk -v s="$share" 'BEGIN { exit !(s > 1) }'; then
                            problems+=("the shim's own time, ${own} ms, is more than 1% of plain ${plain_t}s")
                        fi
                    else
                        overhead="$overhead wall; shim ${own} ms in the whole job"
                        if awk -v p="$plain_t" -v t="$traced_t" 'BEGIN { exit !((t - p) / p > 0.01) }'; then
                            problems+=("traced median ${traced_t}s is more than 1% above plain ${plain_t}s")
                        fi
                    fi
                fi
            elif awk -v p="$plain_t" -v t="$traced_t" 'BEGIN { exit !((t - p) / p > 0.01) }'; then
                problems+=("traced median ${traced_t}s is more than 1% above plain ${plain_t}s")
            fi
        else
            problems+=("no TIME line")
        fi
    fi
    result=pass
    if [ "${#problems[@]}" -gt 0 ]; then result="FAIL: $(IFS='; '; echo "${problems[*]}")"; failed=1; fi
    echo "| $name | $rounds+$rounds | $same | $errors | $warnings | $infos ($rules) | ${plain_t:--} | ${traced_t:--} | $overhead | $result |" >> "$report"
done
# The planted mistake: found, named, and the program's own answer unchanged.
if [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",planted,"* ]]; then
    if have torch; then
        dir="$out/planted"; rm -rf "$dir" && mkdir -p "$dir"
        set +e
        python3 scripts/gpu/vmm_frameworks.py cumem-remap-no-access > "$dir/plain.out" 2> "$dir/plain.err"
        plain_rc=$?
        "$cli" run -q --trace "$dir/traces/%p.jsonl" -- python3 scripts/gpu/vmm_frameworks.py cumem-remap-no-access \
            > "$dir/traced.out" 2> "$dir/traced.err"
        traced_rc=$?
        "$cli" report "$dir/traces" > "$dir/report.txt" 2>&1
        set -e
        found=$(grep -c 'vmm.used-before-access' "$dir/report.txt" || true)
        same=no; diff <(lines "$dir/plain.out") <(lines "$dir/traced.out") > /dev/null && same=yes
        result=pass
        if [ "$plain_rc" != 0 ] || [ "$traced_rc" != 0 ] || [ "$same" = no ] || [ "$found" = 0 ]; then
            result="FAIL: exit $plain_rc plain, $traced_rc traced; same output: $same; vmm.used-before-access lines: $found ($dir/report.txt)"
            failed=1
        fi
        echo "| planted: cumem-remap-no-access | 1+1 | $same | - | - | vmm.used-before-access found: $found line(s) | - | - | - | $result |" >> "$report"
    fi
fi
echo >> "$report"
if [ "$failed" = 0 ]; then echo "GPU REAL: every job passed" >> "$report"; else echo "GPU REAL: FAILED" >> "$report"; fi
cat "$report"
exit "$failed"
