#!/usr/bin/env bash
# What tracing costs a real job: a PyTorch training job (forked DataLoader workers, then NCCL
# all_reduce steps), timed plain and under `sharecheck run` with a trace, interleaved.
#
# Usage: scripts/gpu-overhead.sh [ROUNDS]        (default 5)
#
# Needs: the prebuilt target/release/libsharecheck.so and target/release/sharecheck (carried from
# a machine with Rust), a python with torch ($PYTHON, default python3), one NVIDIA GPU (two for
# JOB_ARGS with --ranks 2: NCCL across two GPUs, the second rank a spawned process). Runs
# scripts/gpu/torch_job.py ROUNDS times plain and ROUNDS times traced, alternating which goes
# first, and prints each run's time, the medians and the overhead of the traced runs in percent.
# Fails (exit 1) if a traced run's CHECK lines differ from the plain run's, or if
# `sharecheck report --fail-on error` finds an error in a trace (every call of the job is correct,
# so a finding would be a false alarm). NVLink multicast stays off.
#
# Output: the report on stdout; with $OUT set, also $OUT/gpu-overhead.txt and the traces in
# $OUT/overhead-traces/. Environment: PYTHON, JOB_ARGS (torch_job.py's arguments, default
# "--samples 8192 --epochs 3 --nccl 200").
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=${1:-5}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/gpu-overhead.sh [ROUNDS]" >&2; exit 2; }
PYTHON=${PYTHON:-python3}
read -r -a JOB <<<"${JOB_ARGS:---samples 8192 --epochs 3 --nccl 200}"
SHARECHECK="$ROOT/target/release/sharecheck"
for f in "$SHARECHECK" "$ROOT/target/release/libsharecheck.so"; do
    [[ -f $f ]] || { echo "gpu-overhead: $f is missing (cargo build --release --workspace)" >&2; exit 1; }
done
WORK=${OUT:-$(mktemp -d)}
mkdir -p "$WORK/overhead-traces"
REPORT="$WORK/gpu-overhead.txt"
: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }

run_job() { # MODE ROUND -> prints the run's output into $WORK/MODE-ROUND.out
    local mode=$1 round=$2 out="$WORK/$1-$2.out"
    if [[ $mode == plain ]]; then
        "$PYTHON" "$ROOT/scripts/gpu/torch_job.py" "${JOB[@]}" >"$out" 2>"$out.err"
    else
        mkdir -p "$WORK/overhead-traces/r$round"
        "$SHARECHECK" run -q --trace "$WORK/overhead-traces/r$round/%p.jsonl" -- \
            "$PYTHON" "$ROOT/scripts/gpu/torch_job.py" "${JOB[@]}" >"$out" 2>"$out.err"
    fi
}

say "## PyTorch job, plain vs traced ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
say ""
say "- job: scripts/gpu/torch_job.py ${JOB[*]}; $ROUNDS rounds, order alternating; traced: sharecheck run --trace"
fail=0
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then order=(plain traced); else order=(traced plain); fi
    for mode in "${order[@]}"; do
        run_job "$mode" "$r" || { say "- round $r $mode: exit $? ($(tail -3 "$WORK/$mode-$r.out.err" | tr '\n' ' '))"; fail=1; }
    done
    if ! diff <(grep '^CHECK' "$WORK/plain-$r.out") <(grep '^CHECK' "$WORK/traced-$r.out") >/dev/null; then
        say "- round $r: CHECK lines differ: $(grep '^CHECK' "$WORK/plain-$r.out" | tr '\n' ' ') vs $(grep '^CHECK' "$WORK/traced-$r.out" | tr '\n' ' ')"
        fail=1
    fi
    if ! "$SHARECHECK" report --fail-on error "$WORK/overhead-traces/r$r" >"$WORK/report-$r.txt" 2>&1; then
        say "- round $r: sharecheck report found an error (or no trace): $(tail -3 "$WORK/report-$r.txt" | tr '\n' ' ')"
        fail=1
    fi
done
times() { for ((r = 1; r <= ROUNDS; r++)); do awk '$1 == "TIME" { print $2 }' "$WORK/$1-$r.out"; done; }
mapfile -t plain < <(times plain)
mapfile -t traced < <(times traced)
say "- plain s: ${plain[*]}"
say "- traced s: ${traced[*]}"
summary=$(printf '%s\n' "${plain[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
summary_t=$(printf '%s\n' "${traced[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
say "- median: plain ${summary}s, traced ${summary_t}s, overhead $(awk -v p="$summary" -v t="$summary_t" 'BEGIN { printf "%+.2f%%", (t - p) / p * 100 }')"
r1="$WORK/report-1.txt"
say "- traced run 1: $(grep -m1 'calls in' "$r1" || echo '?'); $(grep -m1 '^SUMMARY' "$r1" || echo '?')"
say "- trace bytes (round 1): $(du -sb "$WORK/overhead-traces/r1" | cut -f1) in $(ls "$WORK/overhead-traces/r1" | wc -l) file(s)"
exit "$fail"
