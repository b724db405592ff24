#!/usr/bin/env bash
# In-process A/B of shim builds on a real driver (issue 24): for each round, each VARIANT runs
# scripts/bench/bench.c with --ab (every repetition times its loop through the shim and through
# the driver's own entries, alternately first, in one process) and the rounds are interleaved, so
# that builds are compared in one window of one host. Prints, per variant and mode, each round's
# median (shim - driver) ns per case (per pair for alloc_free_256B and vmm_map_unmap).
#
# Usage: scripts/gpu/ab.sh NAME=SHIM[:MODES] ...   e.g. head=/tmp/a.so:ut new=/tmp/b.so:ut
#   MODES: u (untraced), t (traced), or both (default ut). SHIM `none`: no shim (the method's
#   control, or with ENTRIES=link,proc the driver's exported entries against cuGetProcAddress's).
# Environment: CASES (comma-separated bench cases; default the VMM, alloc, IPC and attach ones),
#   ROUNDS (3), REPS (7), ENTRIES (bench's --entries, e.g. proc,proc: both sides through
#   cuGetProcAddress_v2, as libcudart's calls come). Writes $OUT/ab.txt and $OUT/ab-processes.tsv
#   (every process's figures) when OUT is set. No multicast object is created.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[[ $# -gt 0 ]] || { sed -n 2,12p "$0"; exit 2; }
cases="${CASES:-alloc_free_256B,vmm_map_unmap,vmm_set_access,ipc_get_mem_handle,stream_attach}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/bench" scripts/bench/bench.c -l:libcuda.so.1 -lpthread -ldl
nvidia-smi -L 2>/dev/null || true
runs=()
for spec in "$@"; do
    name="${spec%%=*}" rest="${spec#*=}"
    shim="${rest%%:*}" modes="ut"
    [[ $rest == *:* ]] && modes="${rest##*:}"
    [[ $shim == none || -f $shim ]] || { echo "ab.sh: $shim not found" >&2; exit 2; }
    for ((i = 0; i < ${#modes}; i++)); do runs+=("$name:${modes:i:1}:$shim"); done
done
for r in $(seq "${ROUNDS:-3}"); do
    for run in "${runs[@]}"; do
        IFS=: read -r name mode shim <<<"$run"
        env=(LD_PRELOAD="$shim")
        [[ $shim == none ]] && env=(LD_PRELOAD=)
        if [[ $mode == t ]]; then
            rm -rf "$work/trace" && mkdir -p "$work/trace"
            env+=(SHARECHECK_TRACE="$work/trace/%p.jsonl")
        fi
        env "${env[@]}" timeout 300 "$work/bench" --threads 1 --reps "${REPS:-7}" --ab \
            ${ENTRIES:+--entries "$ENTRIES"} --cases "$cases" >"$work/$name-$mode-$r.txt" 2>"$work/$name-$mode-$r.err" || true
    done
    echo "round $r $(date +%T)" >&2
done
{
    for run in "${runs[@]}"; do
        IFS=: read -r name mode _ <<<"$run"
        echo "== $name $mode"
        grep -h '^ENTRIES' "$work/$name-$mode-1.txt" || true
        cat "$work/$name-$mode-"*.txt | awk -F'\t' '$1 == "AB" {v[$2] = v[$2] " " $6} END {for (c in v) print c v[c]}' | sort
    done
} | tee "$work/ab.txt"
if [[ -n ${OUT:-} ]]; then
    cp "$work/ab.txt" "$OUT/ab.txt"
    # Every process's figures, for the "driver quiet" view (scripts/bench/lib.sh): variant, mode,
    # round, case, linked ns, driver ns, difference.
    for run in "${runs[@]}"; do
        IFS=: read -r name mode _ <<<"$run"
        for f in "$work/$name-$mode-"*.txt; do
            r=${f##*-}; r=${r%.txt}
            awk -F'\t' -v n="$name" -v m="$mode" -v r="$r" '$1 == "AB" {print n "\t" m "\t" r "\t" $2 "\t" $4 "\t" $5 "\t" $6}' "$f"
        done
    done >"$OUT/ab-processes.tsv"
fi
exit 0
