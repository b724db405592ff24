# One rule scenario on a real GPU, for the gpu-*.sh scripts that stage rules (sourced; needs
# `$cli`, the sharecheck CLI): `run_scenario DIR EXPECTED CMD...` runs CMD plain and under
# `sharecheck run` (traces in DIR/traces), then `sharecheck report --format json` over them, and
# sets:
#   plain_rc, shim_rc  the exit statuses
#   shim_calls         the CALL lines printed under the shim, sorted, on one line
#   got                the findings as sorted `rule@function`, comma-separated (`-`: none)
#   verdict            `ok`, or `FAILED: ...` where the program saw other results under the
#                      shim or the findings differ from EXPECTED
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
    fi
}
