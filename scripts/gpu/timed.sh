#!/usr/bin/env bash
# Runs a program and prints `TIME <seconds>` of its wall time on stdout after it ends, keeping its
# exit status: for scripts/gpu-real.sh, which compares the program's own time plain and under
# `sharecheck run` (not the time `sharecheck run` spends before and after it).
start=$(date +%s%N)
"$@"
rc=$?
awk -v s="$start" -v e="$(date +%s%N)" 'BEGIN { printf "TIME %.4f\n", (e - s) / 1e9 }'
exit "$rc"
