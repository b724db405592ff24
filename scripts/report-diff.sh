#!/usr/bin/env bash
# Compares two builds' reports of the same random traces (IPC, logical endpoint, VMM, pool and
# FABRIC calls), byte for byte (issue 27: a report-phase check rewritten must decide as the one
# it replaces, ties in time included).
#
# Usage: scripts/report-diff.sh OLD_CLI NEW_CLI [FIRST_SEED LAST_SEED]   (default 1 300)
#
# For each seed, scripts/bench/random_traces.py writes the traces of a few processes, and
# both `sharecheck report` builds read them as text and as JSON; any difference in the output,
# the messages on stderr or the exit status is printed with its seed, and the script exits 1.
# OLD_CLI: for example a build of the commit before the change (git worktree add ... &&
# cargo build --release -p sharecheck-cli).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,11p "$0" >&2; exit 2; }
old=$1 new=$2 first=${3:-1} last=${4:-300}
gen="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bench/random_traces.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bad=0 findings=0
for seed in $(seq "$first" "$last"); do
    rm -rf "$tmp/t"
    python3 "$gen" "$seed" "$tmp/t"
    for fmt in json text; do
        a=0 b=0
        "$old" report --format "$fmt" "$tmp/t" >"$tmp/old.$fmt" 2>"$tmp/old.err" || a=$?
        "$new" report --format "$fmt" "$tmp/t" >"$tmp/new.$fmt" 2>"$tmp/new.err" || b=$?
        if [ "$a" != "$b" ] || ! cmp -s "$tmp/old.$fmt" "$tmp/new.$fmt" || ! cmp -s "$tmp/old.err" "$tmp/new.err"; then
            echo "differs: seed $seed, $fmt (exit $a and $b)"
            bad=$((bad + 1))
        fi
    done
    findings=$((findings + $({ grep -o '"rule"' "$tmp/new.json" || true; } | wc -l)))
done
echo "seeds $first..$last: $bad differing reports; $findings findings in the new build's JSON"
[ "$bad" = 0 ]
