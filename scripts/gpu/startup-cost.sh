#!/usr/bin/env bash
# Where a short program's extra time under the shim goes (issue 25: the cuda-samples ran 2% to
# 11% longer traced on one H200). Each program runs ROUNDS times in each mode, the modes
# interleaved and their order rotated each round, and the medians of its wall time are printed:
#   plain      the program alone
#   untraced   LD_PRELOAD=libsharecheck.so, no trace
#   traced     LD_PRELOAD with SHARECHECK_TRACE in the work folder (the file system gpu-real uses)
#   shm        LD_PRELOAD with SHARECHECK_TRACE in /dev/shm
#   run        `sharecheck run -q --trace` in the work folder, as gpu-real runs it
# Every run preloads scripts/gpu/phase_probe.c (first), which splits each process's time into
# loading (launch to the first constructor), up to cuInit, cuInit, the program, its exit handlers
# and destructors (the driver's teardown), and the rest of the exit: medians per mode, the first
# process alone and all processes summed. Then, where the host has them: the file systems,
# `strace -f -c` of a plain and a traced run, and `LD_DEBUG=statistics` of an untraced one.
#
# Usage: SAMPLES=DIR scripts/gpu/startup-cost.sh [OUTDIR]   (ROUNDS=N, 9; PROGRAMS=a,b to pick;
#        needs target/release/{libsharecheck.so,sharecheck}, nvcc and g++)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$PWD
out=${1:-startup-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
ROUNDS=${ROUNDS:-9}
shim=$root/target/release/libsharecheck.so
cli=$root/target/release/sharecheck
bash scripts/gpu/build-samples.sh "$SAMPLES" "$out/samples" > "$out/samples-build.txt" 2>&1 ||
    { echo "startup-cost: the samples did not build: $out/samples-build.txt" >&2; tail -5 "$out/samples-build.txt" >&2; exit 1; }
probe=$out/phase_probe.so
gcc -O2 -shared -fPIC -o "$probe" scripts/gpu/phase_probe.c -ldl || exit 1
programs=${PROGRAMS:-vectorAddMMAP,memMapIPCDrv,streamOrderedAllocationIPC}
modes=(plain untraced traced shm run)
# With PHASES_SHIM (a `--features phase-times` build, src/phases.rs): also a traced mode under it,
# whose per-function phase times (mean ns) are printed from its first round.
[ -n "${PHASES_SHIM:-}" ] && modes+=(phases)
shmdir=/dev/shm/sharecheck-startup.$$
now() { date +%s%N; }
once() { # mode program round -> prints ms
    local mode=$1 prog=$2 r=$3 dir t0 t1 rc
    dir=$out/samples/$prog
    cd "$dir" || return
    export PROBE_OUT=$out/probe-$prog-$mode-$r.txt
    t0=$(now)
    case $mode in
        plain) LD_PRELOAD=$probe ./"$prog" >"$out/$prog-$mode-$r.out" 2>&1 ;;
        untraced) LD_PRELOAD="$probe $shim" ./"$prog" >"$out/$prog-$mode-$r.out" 2>&1 ;;
        traced) LD_PRELOAD="$probe $shim" SHARECHECK_TRACE=$out/traces-$prog-$r/%p.jsonl ./"$prog" >"$out/$prog-$mode-$r.out" 2>&1 ;;
        shm) LD_PRELOAD="$probe $shim" SHARECHECK_TRACE=$shmdir/$prog-$r/%p.jsonl ./"$prog" >"$out/$prog-$mode-$r.out" 2>&1 ;;
        phases) LD_PRELOAD="$probe $PHASES_SHIM" SHARECHECK_PHASES_OUT=$out/phases-$prog-$r.txt SHARECHECK_TRACE=$out/phases-traces-$prog-$r/%p.jsonl ./"$prog" >"$out/$prog-$mode-$r.out" 2>&1 ;;
        run) LD_PRELOAD=$probe "$cli" run -q --trace "$out/run-$prog-$r/%p.jsonl" -- ./"$prog" >"$out/$prog-$mode-$r.out" 2>&1 ;;
    esac
    rc=$?
    t1=$(now)
    cd "$root" || return
    echo "START $t0 END $t1" >> "$PROBE_OUT"
    echo "$(( (t1 - t0) / 1000 )) $rc"
}
median() { sort -g | awk '{a[NR]=$1} END { if (NR) print a[int((NR+1)/2)]; else print "-" }'; }
mkdir -p "$shmdir"
for prog in ${programs//,/ }; do
    : > "$out/$prog-times.txt"
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < ${#modes[@]}; i++)); do
            mode=${modes[$(( (i + r) % ${#modes[@]} ))]}
            read -r us rc < <(once "$mode" "$prog" "$r")
            echo "$mode $r $us $rc" >> "$out/$prog-times.txt"
        done
    done
    line="$prog (ms, median of $ROUNDS):"
    plain=$(awk '$1 == "plain" {print $3}' "$out/$prog-times.txt" | median)
    for mode in "${modes[@]}"; do
        m=$(awk -v m="$mode" '$1 == m {print $3}' "$out/$prog-times.txt" | median)
        bad=$(awk -v m="$mode" '$1 == m && $4 != 0' "$out/$prog-times.txt" | wc -l)
        line+=$(awk -v m="$m" -v p="$plain" -v n="$mode" -v b="$bad" \
            'BEGIN { printf " %s %.1f (%+.1f%s)", n, m / 1000, (m - p) / 1000, b ? ", " b " failed" : "" }')
    done
    echo "$line"
    python3 scripts/gpu/phase_split.py "$out" "$prog" "${modes[@]}"
    [ -f "$out/phases-$prog-1.txt" ] && sed 's/^/  phases: /' "$out/phases-$prog-1.txt"
    echo "  processes traced: $(find "$out"/traces-"$prog"-1 -name '*.jsonl' 2>/dev/null | wc -l)"
done
rm -rf "$shmdir"
{
    echo "== file systems"
    df -hT "$out" /dev/shm /tmp 2>&1
    echo "== mounts"; grep -E " ($(stat -c %m "$out" | sed 's,/,\\/,g')|/dev/shm) " /proc/mounts
} > "$out/filesystems.txt" 2>&1
echo "work folder: $(df -T "$out" | awk 'NR == 2 {print $2}'); /dev/shm: $(df -T /dev/shm | awk 'NR == 2 {print $2}')"
prog=${programs%%,*}
cd "$out/samples/$prog" || exit 1
if command -v strace >/dev/null; then
    strace -f -c -o "$out/strace-plain.txt" ./"$prog" >/dev/null 2>&1
    LD_PRELOAD=$shim SHARECHECK_TRACE=$out/strace-traces/%p.jsonl strace -f -c -o "$out/strace-traced.txt" ./"$prog" >/dev/null 2>&1
    LD_PRELOAD=$shim SHARECHECK_TRACE=$out/strace-traces2/%p.jsonl strace -f -tt -T -o "$out/strace-traced-tt.txt" ./"$prog" >/dev/null 2>&1
    echo "strace -c: plain $(tail -1 "$out/strace-plain.txt"); traced $(tail -1 "$out/strace-traced.txt")"
else
    echo "no strace on this host"
fi
LD_DEBUG=statistics LD_PRELOAD=$shim ./"$prog" 2>&1 >/dev/null | grep -E 'total startup|relocation processing' > "$out/ld-statistics.txt"
LD_DEBUG=statistics ./"$prog" 2>&1 >/dev/null | grep -E 'total startup|relocation processing' >> "$out/ld-statistics.txt"
cd "$root" || exit 1
rm -rf "$out/samples"
