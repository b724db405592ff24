# One rule scenario on a real GPU, for the gpu-*.sh scripts that stage rules (sourced; needs
# `$cli`, the sharecheck CLI): `run_scenario DIR EXPECTED CMD...` runs CMD plain and under
# `sharecheck run` (traces in DIR/traces), then `sharecheck report --format json` over them, and
# sets:
#   plain_rc, shim_rc  the exit statuses
#   shim_calls         the CALL lines printed under the shim, sorted, on one line
#   got                the findings as sorted `rule@function`, comma-separated (`-`: none)
#   verdict            `ok`, or `FAILED: ...` where the program saw other results under the
#                      shim, the findings differ from EXPECTED, or the report says calls were
#                      numbered and never written
run_scenario() {
    local dir="$1" expected="$2"
    shift 2
    rm -rf "$dir" && mkdir -p "$dir/traces"
    set +e
    "$@" > "$dir/plain.out" 2>&1
    plain_rc=$?
    "$cli" run --trace "$dir/traces/%p.jsonl" -- "$@" > "$dir/shim.out" 2> "$dir/shim.err"
    shim_rc=$?
    "$cli" report --format json "$dir/traces" > "$dir/report.json" 2> "$dir/report.err"
    "$cli" report "$dir/traces" > "$dir/report.txt" 2>&1
    set -e
    local plain_calls
    plain_calls="$(grep '^CALL ' "$dir/plain.out" | sort | tr '\n' ' ' || true)"
    shim_calls="$(grep '^CALL ' "$dir/shim.out" | sort | tr '\n' ' ' || true)"
    got="$(python3 - "$dir/report.json" <<'PY'
import json, sys
findings = json.load(open(sys.argv[1]))["findings"]
print(",".join(sorted("%s@%s" % (f["rule"], f["fn"]) for f in findings)) or "-")
PY
)"
    verdict=ok
    if [ "$plain_calls" != "$shim_calls" ] || [ "$plain_rc" != "$shim_rc" ]; then
        verdict="FAILED: the program saw other results under the shim"
    elif [ "$got" != "$expected" ]; then
        verdict="FAILED: expected $expected"
    elif grep -q 'numbered and never written' "$dir/report.txt"; then
        verdict="FAILED: calls numbered and never written (a writer defect): $dir/report.txt"
    fi
}

# The report's head (`report_head REPORT FAMILY SCRIPT PROGRAM`): the GPU and driver, the date,
# how each scenario ran, the shim's hash.
report_head() {
    local report="$1" family="$2" script="$3" program="$4" gpu
    gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
    {
        echo "## $family rules on a real GPU: $gpu, $(date -u '+%F %H:%M UTC')"
        echo
        echo "$script: $program (gcc, the real libcuda), each scenario plain and under"
        echo "\`sharecheck run\`, then \`sharecheck report --format json\` over its traces. Shim: $(sha256sum target/release/libsharecheck.so | cut -c1-16)."
        echo
    } > "$report"
}

# Every `scenario|expected` of the array `cases`, run with run_scenario (`run_cases PROGRAM OUT
# REPORT [PREFIX]`): each one's verdict, calls and findings appended to REPORT, with the plain
# run's lines that start with PREFIX (`SAME `, say). Adds to `failed` (0 if unset) how many did
# not pass.
run_cases() {
    local program="$1" out="$2" report="$3" prefix="${4:-}" case scenario expected shown
    failed="${failed:-0}"
    for case in "${cases[@]}"; do
        scenario="${case%%|*}"
        expected="${case#*|}"
        run_scenario "$out/$scenario" "$expected" "$program" "$scenario"
        [ "$verdict" = ok ] || failed=$((failed + 1))
        {
            echo "- $scenario: $verdict"
            echo "  calls (exit $plain_rc plain, $shim_rc shim): $shim_calls"
            echo "  findings: $got"
            if [ -n "$prefix" ]; then
                shown="$(grep "^$prefix" "$out/$scenario/plain.out" || true)"
                [ -z "$shown" ] || echo "  plain run: $shown"
            fi
        } >> "$report"
    done
}
