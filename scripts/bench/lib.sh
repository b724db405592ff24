# shellcheck shell=bash
# The benchmark harness shared by scripts/bench.sh (simulated driver) and scripts/gpu-bench.sh
# (real driver). Sourced, not run. The caller sets, before bench_main:
#   BENCH_BIN        the compiled scripts/bench/bench.c
#   BENCH_TMP        a scratch directory (the caller removes it)
#   PLAIN_ENV, SHIM_ENV   arrays of NAME=value for `env`: the plain run and the shim run
#   ROUNDS REPS LOOP_MS MT_THREADS TRACED(0|1) RUN_TIMEOUT AB_PROCS
#   bench_header     a function printing the report's header lines (machine, driver, shim)
# and gets the report on stdout (progress goes to stderr). Exits 1 with a loud message when a
# run fails or writes anything on stderr.

bench_progress() { printf '[bench] %s\n' "$*" >&2; }

# The options both scripts take (and their BENCH_* defaults). Call as
# `bench_parse_args SCRIPT_NAME ALLOW_NO_BUILD(0|1) "$@"`; `usage` is the caller's.
bench_parse_args() {
    local name=$1 allow_no_build=$2
    shift 2
    TRACED=${BENCH_TRACED:-0}
    NO_BUILD=${BENCH_NO_BUILD:-0}
    ROUNDS=${BENCH_ROUNDS:-9}
    MT_THREADS=${BENCH_THREADS:-16}
    REPS=${BENCH_REPS:-15}
    LOOP_MS=${BENCH_LOOP_MS:-2}
    RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-300}
    AB_PROCS=${BENCH_AB_PROCS:-${DEFAULT_AB_PROCS:-1}}
    # The A/B's "driver quiet" figures take the processes whose own driver ns for the case are
    # within this factor of the run's fastest process. On R580 the driver's calls run at one of
    # two speeds, 1.5x to 1.9x apart, for seconds at a time while plain CPU work and memory
    # keep theirs (scripts/gpu/driver-speed.sh); 1.2 parts the two.
    AB_QUIET=1.2
    while [[ $# -gt 0 ]]; do
        case $1 in
            --traced) TRACED=1 ;;
            --no-build) [[ $allow_no_build == 1 ]] || { usage >&2; exit 2; }; NO_BUILD=1 ;;
            --rounds) ROUNDS=${2:?}; shift ;;
            --threads) MT_THREADS=${2:?}; shift ;;
            --reps) REPS=${2:?}; shift ;;
            --loop-ms) LOOP_MS=${2:?}; shift ;;
            --ab-procs) AB_PROCS=${2:?}; shift ;;
            -h | --help)
                sed -n '2,/^set -euo/p' "$ROOT/scripts/$name" | sed '$d; s/^# \{0,1\}//'
                exit 0
                ;;
            *) usage >&2; exit 2 ;;
        esac
        shift
    done
    local v
    for v in ROUNDS MT_THREADS REPS LOOP_MS AB_PROCS; do
        [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$name: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
    done
}

bench_fail() {
    printf '\nBENCH FAILED: %s\n' "$1" >&2
    if [[ -n ${2:-} && -s $2 ]]; then
        printf -- '--- %s\n' "$2" >&2
        sed -n '1,40p' "$2" >&2
    fi
    exit 1
}

# The environment of MODE (plain, shim, traced) as `env` arguments, into the array RUN_ENV.
# For traced runs the trace goes to $BENCH_TMP/trace/<tag>/.
bench_mode_env() {
    local mode=$1 tag=$2
    case $mode in
        plain) RUN_ENV=("${PLAIN_ENV[@]}") ;;
        shim) RUN_ENV=("${SHIM_ENV[@]}") ;;
        traced)
            mkdir -p "$BENCH_TMP/trace/$tag"
            RUN_ENV=("${SHIM_ENV[@]}" "SHARECHECK_TRACE=$BENCH_TMP/trace/$tag/%p.jsonl")
            ;;
        *) bench_fail "unknown mode $mode" ;;
    esac
}

# Runs the bench binary in MODE with the given arguments; stdout to OUTFILE. Fails the whole
# benchmark when it exits non-zero or writes anything on stderr: every call it makes is a correct
# use, so a finding printed by the shim would be a false alarm.
bench_exec() {
    local mode=$1 tag=$2 outfile=$3
    shift 3
    local errfile="$outfile.stderr" rc=0
    bench_mode_env "$mode" "$tag"
    timeout "$RUN_TIMEOUT" env "${RUN_ENV[@]}" "$BENCH_BIN" "$@" >"$outfile" 2>"$errfile" || rc=$?
    if [[ $rc -ne 0 ]]; then
        [[ $rc -eq 124 ]] && bench_fail "$mode run '$tag' timed out after ${RUN_TIMEOUT}s" "$errfile"
        bench_fail "$mode run '$tag' exited with status $rc" "$errfile"
    fi
    if [[ -s $errfile ]]; then
        if [[ $mode == plain ]]; then
            bench_fail "the plain run '$tag' wrote on stderr" "$errfile"
        fi
        bench_fail "the shim wrote on stderr in run '$tag' ($mode): a finding on the bench's clean \
path is a false alarm (or the shim logged a problem)" "$errfile"
    fi
    STDERR_CHECKED=$((STDERR_CHECKED + 1))
}

# Sums the trace records of one traced run per function: fn, records, bytes (lines + newline).
bench_trace_stats() {
    local dir=$1
    local files=("$dir"/*)
    if [[ ! -e ${files[0]} ]]; then
        return 0
    fi
    cat "${files[@]}" | awk '
        match($0, /"fn":"[^"]*"/) { f = substr($0, RSTART + 6, RLENGTH - 7); n[f]++; b[f] += length($0) + 1; next }
        { n["(events)"]++; b["(events)"] += length($0) + 1 }
        END { for (f in n) printf "%s\t%.0f\t%.0f\n", f, n[f], b[f] }'
}

# One run: MODE, threads, round. Appends its RESULT lines to results.tsv as
# mode threads round case median lo hi unit iters aggregate cpu.
bench_run() {
    local mode=$1 threads=$2 round=$3
    local tag="$mode-t$threads-r$round"
    local out="$BENCH_TMP/runs/$tag.out"
    bench_progress "round $round/$ROUNDS: $mode, $threads thread(s)"
    bench_exec "$mode" "$tag" "$out" --threads "$threads" --reps "$REPS" --iters "${ITERS[$mode]}"
    awk -v m="$mode" -v r="$round" -F'\t' '$1 == "RESULT" {
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m, $3, r, $2, $4, $5, $6, $7, $8, $9, $10 }' \
        "$out" >>"$BENCH_TMP/results.tsv"
    grep -q '^RESULT' "$out" || bench_fail "run '$tag' printed no RESULT line" "$out"
    if [[ $mode == traced ]]; then
        bench_trace_stats "$BENCH_TMP/trace/$tag" | sed "s/^/$threads\t/" >>"$BENCH_TMP/trace.tsv"
        rm -rf "$BENCH_TMP/trace/$tag"
    fi
}

# Markdown table comparing MODE with plain at THREADS threads; COLUMN of results.tsv: 5 the
# median wall ns per call per thread (default), 10 all threads together, 11 the median CPU ns.
bench_table() {
    local mode=$1 threads=$2 with_target=$3 column=${4:-5}
    awk -F'\t' -v mode="$mode" -v t="$threads" -v with_target="$with_target" -v col="$column" '
        function sort(a, n,    i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        }
        function med(a, n) { sort(a, n); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        $2 != t { next }
        !($4 in seen) { seen[$4] = 1; order[++ncase] = $4; unit[$4] = $8 }
        { v[$1, $4, $3] = $col; rounds[$3] = 1 }
        END {
            # The budgets (README): the peer copies <= +150 untraced and <= +250 traced, every
            # other covered call <= +20 and <= +100 (alloc_free: a pair of calls), those the shim
            # does not interpose +0.
            traced = mode == "traced"
            split("memcpy_peer_async_4B memcpy_peer_async_4B_stream0 memcpy_peer_4B", copies, " ")
            for (i in copies) target[copies[i]] = traced ? "<= +250" : "<= +150"
            split("can_access_peer memcpy_dtod_async_4B memset_d8_async_4B stream_attach ipc_get_mem_handle vmm_set_access", calls, " ")
            for (i in calls) target[calls[i]] = traced ? "<= +100" : "<= +20"
            target["alloc_free_256B"] = traced ? "<= +200" : "<= +40"
            target["vmm_map_unmap"] = traced ? "<= +200" : "<= +40"
            target["ctx_get_current"] = "+0"
            target["device_get_count"] = "+0"
            target["pointer_get_attribute"] = "+0"
            printf "| case | unit | plain ns | %s ns | overhead ns | per-round overhead min..max | shim/plain |%s\n", mode, (with_target ? (traced ? " traced target |" : " untraced target |") : "")
            printf "|---|---|---:|---:|---:|---:|---:|%s\n", with_target ? "---|" : ""
            for (i = 1; i <= ncase; i++) {
                c = order[i]; np = ns = nd = 0
                for (r in rounds) {
                    kp = "plain" SUBSEP c SUBSEP r; km = mode SUBSEP c SUBSEP r
                    if (kp in v) p[++np] = v[kp]
                    if (km in v) s[++ns] = v[km]
                    if ((kp in v) && (km in v)) d[++nd] = v[km] - v[kp]
                }
                if (np == 0 || ns == 0 || nd == 0) continue
                mp = med(p, np); ms = med(s, ns); md = med(d, nd)
                printf "| %s | %s | %.1f | %.1f | %+.1f | %+.1f..%+.1f | %.2fx |%s\n", c, unit[c], mp, ms, md, d[1], d[nd], (mp > 0 ? ms / mp : 0), (with_target ? " " target[c] " |" : "")
            }
        }' "$BENCH_TMP/results.tsv"
}

# Bytes per trace record, per function, over the traced runs at THREADS threads.
bench_trace_table() {
    local threads=$1
    awk -F'\t' -v t="$threads" '
        $1 != t { next }
        { n[$2] += $3; b[$2] += $4; if ($2 != "(events)") { tn += $3; tb += $4 } }
        END {
            print "| fn | records | bytes | bytes/record |"
            print "|---|---:|---:|---:|"
            for (f in n) printf "| %s | %.0f | %.0f | %.1f |\n", f, n[f], b[f], n[f] ? b[f] / n[f] : 0
            if (tn) printf "| all calls | %.0f | %.0f | %.1f |\n", tn, tb, tb / tn
            else print "| all calls | 0 | 0 | - |"
        }' "$BENCH_TMP/trace.tsv" | { read -r h1; read -r h2; echo "$h1"; echo "$h2"; sort; }
}

# In-process A/B (bench --ab), one thread: every repetition times the loop through the shim and
# through the driver's own entries, in the same process, so the driver's run-to-run variance (a
# 4-byte peer copy on R580 takes 1.7 to 2.8 us depending on the process) cancels. Each round
# runs every mode in AB_PROCS processes, the modes interleaved (order reversed every other
# process): on R580 a process's figure falls in one of two modes, about 20 ns apart for some
# cases, and one process per round left the median over three rounds to chance
# (scripts/gpu/results/2026-11-29-1xH200-R580-ab-many-processes.txt). Appends to ab.tsv:
# mode round case linked direct diff unit same (one line per process).
bench_ab_runs() {
    local round proc mode tag out order
    for ((round = 1; round <= ROUNDS; round++)); do
        for ((proc = 1; proc <= AB_PROCS; proc++)); do
            if ((proc % 2)); then order=("$@"); else order=(); for mode in "$@"; do order=("$mode" "${order[@]}"); done; fi
            for mode in "${order[@]}"; do
                tag="ab-$mode-r$round-p$proc"
                out="$BENCH_TMP/runs/$tag.out"
                bench_progress "A/B round $round/$ROUNDS, process $proc/$AB_PROCS: $mode"
                bench_exec "$mode" "$tag" "$out" --ab --threads 1 --reps "$REPS" --iters "${ITERS[$mode]}"
                grep -q '^AB' "$out" || bench_fail "run '$tag' printed no AB line" "$out"
                awk -v m="$mode" -v r="$round" -F'\t' '$1 == "AB" {
                    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m, r, $2, $4, $5, $6, $7, $9 }' \
                    "$out" >>"$BENCH_TMP/ab.tsv"
                rm -rf "$BENCH_TMP/trace/$tag"
            done
        done
    done
}

# The A/B table: per case, the median over the rounds of each mode's (linked - direct) (a
# round's: the median over its processes), with its lowest and highest round, and the budgets.
bench_ab_table() {
    awk -F'\t' -v quiet_x="$AB_QUIET" '
        function sort(a, n,    i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
        }
        function med(a, n) { sort(a, n); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        function cell(mode, c,    k, n, r, d) {
            n = 0
            for (r = 1; r <= rounds; r++) { k = mode SUBSEP c SUBSEP r; if (k in diff) d[++n] = diff[k] }
            if (n == 0) return "-"
            m = med(d, n)
            mid[mode, c] = m; spread[mode, c] = d[n] - d[1]
            return sprintf("%+.1f (%+.1f..%+.1f)", m, d[1], d[n])
        }
        # met / MISSED of a figure against a target "<= +N" (or "+0": within 1 ns).
        function judge(x, target,    limit) {
            limit = target; sub(/^<= \+/, "", limit); sub(/^\+/, "", limit); limit += 0
            if (target == "+0") limit = 1
            return x <= limit ? "met" : "MISSED"
        }
        function verdict(mode, c, target) { return ((mode, c) in mid) ? judge(mid[mode, c], target) : "-" }
        # The figure over the processes, of every round, that caught the driver at its quiet
        # speed: their own driver ns within QUIET x the fastest process of the run (any mode).
        function quiet(mode, c,    i, n, d) {
            n = 0
            for (i = 1; i <= all[mode, c]; i++) if (adriver[mode, c, i] <= quiet_x * fastest[c]) d[++n] = adiff[mode, c, i]
            if (n == 0) return "- (0/" all[mode, c] ")"
            qmid[mode, c] = med(d, n)
            return sprintf("%+.1f (%d/%d)", qmid[mode, c], n, all[mode, c])
        }
        function qverdict(mode, c, target) { return ((mode, c) in qmid) ? judge(qmid[mode, c], target) : "-" }
        # The budgets a view met and missed, for the summary lines.
        function tally(view, c, mode, v) {
            if (v == "met") met[view]++
            if (v == "MISSED") { missed[view]++; list[view] = list[view] (list[view] == "" ? "" : ", ") c " " mode }
        }
        function summary(view, label) {
            printf "- %s: %d budget(s) met, %d missed%s.\n", label, met[view], missed[view], (missed[view] ? ": " list[view] : "")
        }
        !($3 in seen) { seen[$3] = 1; order[++ncase] = $3; unit[$3] = $7 }
        {
            k = $1 SUBSEP $3 SUBSEP $2; p = ++procs[k]
            pdiff[k, p] = $6; pdriver[k, p] = $5
            if ($2 > rounds) rounds = $2; has[$1] = 1
            i = ++all[$1, $3]; adiff[$1, $3, i] = $6; adriver[$1, $3, i] = $5
            if (!($3 in fastest) || $5 < fastest[$3]) fastest[$3] = $5
        }
        END {
            # The figure of a round: the median over its processes.
            for (k in procs) {
                n = procs[k]
                for (p = 1; p <= n; p++) { x[p] = pdiff[k, p]; y[p] = pdriver[k, p] }
                diff[k] = med(x, n); driver[k] = med(y, n)
            }
            split("memcpy_peer_async_4B memcpy_peer_async_4B_stream0 memcpy_peer_4B", copies, " ")
            for (i in copies) { tu[copies[i]] = "<= +150"; tt[copies[i]] = "<= +250" }
            split("can_access_peer memcpy_dtod_async_4B memset_d8_async_4B stream_attach ipc_get_mem_handle vmm_set_access", calls, " ")
            for (i in calls) { tu[calls[i]] = "<= +20"; tt[calls[i]] = "<= +100" }
            tu["alloc_free_256B"] = "<= +40"; tt["alloc_free_256B"] = "<= +200"
            tu["vmm_map_unmap"] = "<= +40"; tt["vmm_map_unmap"] = "<= +200"
            tu["ctx_get_current"] = tt["ctx_get_current"] = "+0"
            tu["device_get_count"] = tt["device_get_count"] = "+0"
            tu["pointer_get_attribute"] = tt["pointer_get_attribute"] = "+0"
            printf "| case | unit | driver ns | plain: linked - direct (control) | untraced: shim - driver | untraced, driver quiet | untraced target |%s verdict | verdict, driver quiet |\n", (has["traced"] ? " traced: shim - driver | traced, driver quiet | traced target |" : "")
            printf "|---|---|---:|---:|---:|---:|---|%s---|---|\n", (has["traced"] ? "---:|---:|---|" : "")
            noisy = 0
            for (i = 1; i <= ncase; i++) {
                c = order[i]; n = 0
                for (r = 1; r <= rounds; r++) { k = "shim" SUBSEP c SUBSEP r; if (k in driver) dd[++n] = driver[k] }
                if (c == "pointer_get_attribute" && n) {
                    host = med(dd, n); m = 0
                    for (j = 1; j <= all["shim", c]; j++) if (adriver["shim", c, j] <= quiet_x * fastest[c]) q[++m] = adriver["shim", c, j]
                    if (m) qhost = sprintf("; %.1f in the %d of %d processes that caught it at its quiet speed", med(q, m), m, all["shim", c])
                }
                printf "| %s | %s | %.1f | %s | %s | %s | %s |", c, unit[c], (n ? med(dd, n) : 0), cell("plain", c), cell("shim", c), quiet("shim", c), tu[c]
                if (has["traced"]) printf " %s | %s | %s |", cell("traced", c), quiet("traced", c), tt[c]
                v = verdict("shim", c, tu[c]) (has["traced"] ? " / " verdict("traced", c, tt[c]) : "")
                qv = qverdict("shim", c, tu[c]) (has["traced"] ? " / " qverdict("traced", c, tt[c]) : "")
                # The method cannot resolve a budget its own control spreads over by half.
                limit = tu[c]; sub(/^<= \+/, "", limit); limit += 0
                if (limit > 0 && spread["plain", c] > limit / 2) { v = v ", noisy"; noisy++ }
                printf " %s | %s |\n", v, qv
                tally("all", c, "untraced", verdict("shim", c, tu[c])); tally("quiet", c, "untraced", qverdict("shim", c, tu[c]))
                if (has["traced"]) { tally("all", c, "traced", verdict("traced", c, tt[c])); tally("quiet", c, "traced", qverdict("traced", c, tt[c])) }
            }
            printf "\n"
            summary("all", "Over all processes")
            summary("quiet", "With the driver at its quiet speed")
            if (host) printf "- The driver answers cuPointerGetAttribute in %.1f ns here, the median over the rounds%s (the kind of question the checks ask: 35 to 40 ns at R580'"'"'s quiet speed, 55 to 75 in its slow state, where every overhead is about 1.5x larger).\n", host, qhost
            printf "- driver quiet: the median over the processes of every round whose own driver ns for the case were within %.1fx the fastest process of the run (k/n: how many of them). On R580 the driver'"'"'s own calls run at one of two speeds, 1.5x to 1.9x apart, for seconds at a time, while plain CPU work and memory latency keep theirs (scripts/gpu/driver-speed.sh); the shim'"'"'s cost grows with the driver'"'"'s in the slow state.\n", quiet_x
            if (noisy) printf "- noisy: the control (the driver against itself) spread over more than half the untraced budget across rounds in %d case(s); their verdicts need a quieter run.\n", noisy
        }' "$BENCH_TMP/ab.tsv"
}

# The smaller N of each case of two ITERS lists (case=N,case=N,...).
bench_min_iters() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, ","); split(b, y, ",")
        for (i = 1; i <= n; i++) {
            split(x[i], p, "="); split(y[i], q, "=")
            if (p[1] != q[1]) exit 1
            printf "%s%s=%d", (i > 1 ? "," : ""), p[1], (q[2] + 0 < p[2] + 0 ? q[2] : p[2])
        }
    }' || bench_fail "calibrations disagree on the cases: '$1' / '$2'"
}

bench_main() {
    mkdir -p "$BENCH_TMP/runs"
    : >"$BENCH_TMP/results.tsv"
    : >"$BENCH_TMP/trace.tsv"
    : >"$BENCH_TMP/ab.tsv"
    STDERR_CHECKED=0

    local modes=(plain shim)
    [[ $TRACED == 1 ]] && modes+=(traced)

    # Probe the setup (plain), then pick N per case: calibrated in each mode so that one loop
    # takes about LOOP_MS on one thread, and the smallest of plain and shim used for both (the
    # same work in both; short loops are the least exposed to preemption on a busy machine).
    # Traced runs use the smallest of that and their own.
    bench_progress "probing the driver and calibrating (${LOOP_MS} ms per loop)"
    bench_exec plain probe "$BENCH_TMP/runs/probe-plain.out" --probe
    INFO=$(awk -F'\t' '$1 == "INFO" { print $2 }' "$BENCH_TMP/runs/probe-plain.out")
    [[ -n $INFO ]] || bench_fail "the probe printed no INFO line" "$BENCH_TMP/runs/probe-plain.out"
    # What the probe says of its setup (with one device: can_access_peer left out, the peer
    # copies within device 0), for the report.
    NOTES=$(awk -F'\t' '$1 == "NOTE" { print $2 }' "$BENCH_TMP/runs/probe-plain.out")
    declare -gA ITERS=() CALIBRATED=()
    local mode
    for mode in "${modes[@]}"; do
        bench_exec "$mode" "calibrate-$mode" "$BENCH_TMP/runs/calibrate-$mode.out" --probe --calibrate "$LOOP_MS"
        CALIBRATED[$mode]=$(awk -F'\t' '$1 == "ITERS" { print $2 }' "$BENCH_TMP/runs/calibrate-$mode.out")
        [[ -n ${CALIBRATED[$mode]} ]] || bench_fail "calibration printed no ITERS line ($mode)" "$BENCH_TMP/runs/calibrate-$mode.out"
        rm -rf "$BENCH_TMP/trace/calibrate-$mode"
    done
    ITERS[plain]=$(bench_min_iters "${CALIBRATED[plain]}" "${CALIBRATED[shim]}")
    ITERS[shim]=${ITERS[plain]}
    if [[ $TRACED == 1 ]]; then
        ITERS[traced]=$(bench_min_iters "${ITERS[plain]}" "${CALIBRATED[traced]}")
    fi
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

    # Interleave: every round runs each mode once per thread count, the order reversed on every
    # other round, so drift of a noisy machine falls on both sides alike.
    local start=$SECONDS round t order
    for ((round = 1; round <= ROUNDS; round++)); do
        for t in 1 "$MT_THREADS"; do
            if ((round % 2)); then order=("${modes[@]}"); else order=(); for mode in "${modes[@]}"; do order=("$mode" "${order[@]}"); done; fi
            for mode in "${order[@]}"; do
                bench_run "$mode" "$t" "$round"
            done
        done
    done
    bench_ab_runs "${modes[@]}"
    local elapsed=$((SECONDS - start))

    # The report.
    local cpus
    cpus=$(nproc)
    echo "## sharecheck benchmark: plain driver vs shim"
    echo
    bench_header
    echo "- setup: $(tr ' ' '\n' <<<"$INFO" | grep -E '^(driver_version|devices|can_access_peer|peer_access)=' | paste -sd' ')"
    if [[ -n $NOTES ]]; then sed 's/^/- note: /' <<<"$NOTES"; fi
    echo "- load average before the runs $LOAD_BEFORE, after $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows up as noise)"
    echo "- $ROUNDS rounds of plain and shim runs$([[ $TRACED == 1 ]] && echo ' and traced shim runs'), interleaved" \
        "(order reversed every other round), each on 1 and on $MT_THREADS threads (${elapsed}s in all). A run times," \
        "per case, one warm-up loop and $REPS loops of N calls and takes the median ns per call. N: calibrated so" \
        "that a loop of the slower mode takes about ${LOOP_MS} ms on one thread; the same N plain and shim." \
        "Tables: median over the rounds; overhead = median over the rounds of (shim - plain) in the same round," \
        "with its lowest and highest round."
    echo "- N per loop (plain and shim): ${ITERS[plain]}"
    if [[ $TRACED == 1 ]]; then echo "- N per loop (traced): ${ITERS[traced]}"; fi
    echo "- alloc_free_256B: ns per cuMemAlloc_v2(256) + cuMemFree_v2 pair; vmm_map_unmap: ns per cuMemMap + cuMemUnmap pair of one granule. The cases on a stream time the enqueue only" \
        "(cuStreamSynchronize after every 64 calls, untimed). ctx_get_current, device_get_count, pointer_get_attribute: not interposed by the shim (the last is the driver's cost of the kind of question the shim's checks ask: SHARECHECK_SIM_SHIM_CALL_NS charges the simulator's answers to the shim that much)."
    echo "- $MT_THREADS threads: 'per thread' is the median over the threads of each thread's own ns per call," \
        "wall clock (with more threads than CPUs, here $cpus, a thread may wait for a CPU inside its loop, which" \
        "makes this figure noisy) and CPU time (CLOCK_THREAD_CPUTIME_ID: waiting for a CPU or sleeping on a lock" \
        "does not count; includes two clock reads per 64 copies for memcpy). 'All threads': per repetition, first" \
        "start to last end over the calls of all threads (perfect scaling: the 1-thread figure / min($MT_THREADS, $cpus))."
    echo
    echo "### in-process A/B, 1 thread: what the shim adds to each call, its driver call included"
    echo
    echo "Per round $AB_PROCS run(s) per mode, each a process of its own (bench --ab): every repetition times its loop through"
    echo "the functions as linked (the shim's, preloaded) and through the driver's own entries, alternately first, in one"
    echo "process, on the same stream and buffers. A round's figure: the median over its processes of each run's median"
    echo "per-repetition difference. Cells: median over the rounds (lowest..highest round). The plain column is the"
    echo "method's noise: both ways are the driver. This is the figure the budgets are judged on where the plain runs of"
    echo "the tables below differ from each other by more than the budget."
    echo
    bench_ab_table
    echo
    echo "### untraced, 1 thread"
    echo
    bench_table shim 1 1
    echo
    echo "### untraced, $MT_THREADS threads, per thread, wall clock"
    echo
    bench_table shim "$MT_THREADS" 1
    echo
    echo "### untraced, $MT_THREADS threads, per thread, CPU time"
    echo
    bench_table shim "$MT_THREADS" 0 11
    echo
    echo "### untraced, $MT_THREADS threads, all threads (wall ns per call made by any thread)"
    echo
    bench_table shim "$MT_THREADS" 0 10
    if [[ $TRACED == 1 ]]; then
        echo
        echo "### traced (SHARECHECK_TRACE=\$tmp/%p.jsonl), 1 thread"
        echo
        bench_table traced 1 1
        echo
        echo "### traced, $MT_THREADS threads, per thread, wall clock"
        echo
        bench_table traced "$MT_THREADS" 0
        echo
        echo "### traced, $MT_THREADS threads, per thread, CPU time"
        echo
        bench_table traced "$MT_THREADS" 0 11
        echo
        echo "### traced, $MT_THREADS threads, all threads"
        echo
        bench_table traced "$MT_THREADS" 0 10
        echo
        echo "### trace size: all traced runs at 1 thread (setup and teardown calls included)"
        echo
        bench_trace_table 1
        echo
        echo "### trace size: all traced runs at $MT_THREADS threads"
        echo
        bench_trace_table "$MT_THREADS"
    fi
    echo
    echo "stderr: empty in all $STDERR_CHECKED runs (probes and calibrations included, plain and shim): no finding on the bench's clean path."
}
