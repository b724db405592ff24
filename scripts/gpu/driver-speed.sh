#!/usr/bin/env bash
# Does the driver run at one speed (issue 24)? Runs scripts/gpu/driver_speed.c in PROCS processes
# (8) of WINDOWS windows of about 100 ms each (30), plain (no shim), and sums up: a window is
# "slow" when its driver ns exceed 1.2x the fastest window of the run (the factor gpu-bench's
# "driver quiet" figures use). For quiet and slow windows apart: the medians of the core's,
# L2's and the driver's ns. On the R580 hosts of 2026-11-29 the driver's calls ran 1.5x to 1.9x
# slower for seconds at a time, within one process, while the core and L2 kept their speed.
# Usage: scripts/gpu/driver-speed.sh   (OUT set: also $OUT/driver-speed.txt). Needs cuda.h
# (CUDA_HOME, default /usr/local/cuda). No multicast object is created.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/driver_speed" scripts/gpu/driver_speed.c -I"${CUDA_HOME:-/usr/local/cuda}/include" -l:libcuda.so.1
for p in $(seq "${PROCS:-8}"); do
    "$work/driver_speed" "p$p" "${WINDOWS:-30}" >>"$work/windows.tsv"
done
{
    echo "# process, window, core ns, L2 ns, cuPointerGetAttribute ns, that call + 16 dependent L2 loads ns"
    cat "$work/windows.tsv"
    awk -F'\t' '
        function sort(a, n,    i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } }
        function med(a, n) { if (!n) return 0; sort(a, n); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        !($1 in seen) { seen[$1] = 1; procs++ }
        { n++; alu[n] = $3; l2[n] = $4; drv[n] = $5; then[n] = $6; proc[n] = $1; if (n == 1 || $5 < fastest) fastest = $5 }
        END {
            for (i = 1; i <= n; i++) {
                s = drv[i] > 1.2 * fastest ? "slow" : "quiet"
                k = ++count[s]; A[s, k] = alu[i]; L[s, k] = l2[i]; D[s, k] = drv[i]; T[s, k] = then[i]
                if (s == "slow") slowproc[proc[i]] = 1
            }
            for (p in slowproc) np++
            printf "\n%d windows in %d processes; the fastest window: the driver in %.1f ns; slow (over %.1f ns): %d windows, in %d process(es)\n", n, procs, fastest, 1.2 * fastest, count["slow"] + 0, np + 0
            printf "| windows | count | core ns | L2 ns | driver ns | driver + 16 L2 loads ns |\n|---|---:|---:|---:|---:|---:|\n"
            split("quiet slow", states, " ")
            for (j = 1; j <= 2; j++) {
                s = states[j]; m = count[s]
                for (i = 1; i <= m; i++) { a[i] = A[s, i]; l[i] = L[s, i]; d[i] = D[s, i]; t[i] = T[s, i] }
                printf "| %s | %d | %.2f | %.2f | %.1f | %.1f |\n", s, m, med(a, m), med(l, m), med(d, m), med(t, m)
            }
        }' "$work/windows.tsv"
} | tee "$work/report.txt"
[[ -n ${OUT:-} ]] && mkdir -p "$OUT" && cp "$work/report.txt" "$OUT/driver-speed.txt"
exit 0
