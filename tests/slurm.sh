#!/usr/bin/env bash
# The README's Slurm recipe ("Many hosts"), run with a real Slurm (issue 27): a one-node cluster
# (Debian's slurm-wlm and munge) started here, four simulated hosts' traces (the bundled demo
# under `sharecheck run --sim`, a directory per host), a job array of `report --partial` tasks,
# one per host, then the report of the partial results as a job that waits for them. The merged
# report must be the report of the four hosts' traces read together, in text, JSON and SARIF.
#
# Usage: tests/slurm.sh [SHARECHECK]   (default target/debug/sharecheck)
# Needs root (munged and slurmd run here). Without root or Slurm it says so and exits 0, unless
# CI is set: there it fails. scripts/test.sh runs it after the Rust tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sc="$(realpath "${1:-target/debug/sharecheck}")"

skip() {
    if [[ -n ${CI:-} ]]; then
        echo "slurm.sh: $1" >&2
        exit 1
    fi
    echo "slurm.sh: skipped: $1"
    exit 0
}
[[ $(id -u) == 0 ]] || skip "needs root (munged and slurmd are started here)"
for tool in munged slurmctld slurmd sbatch squeue sinfo; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (apt-get install slurm-wlm munge)"
done
[[ -x $sc ]] || { echo "slurm.sh: $sc not found: cargo build first" >&2; exit 1; }

work="$(mktemp -d /tmp/sharecheck-slurm.XXXXXX)"
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ ${keep:-0} == 1 ]]; then
        echo "slurm.sh: kept $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
fail() {
    keep=1
    echo "slurm.sh: $1" >&2
    for log in "$work"/*.log "$work"/task-*.out "$work"/merge.out; do
        [[ -f $log ]] && { echo "--- $log"; tail -20 "$log"; }
    done >&2
    exit 1
}

# Four hosts' traces.
cc -O2 -o "$work/peer_demo" scripts/demo/peer_demo.c -ldl
for h in h1 h2 h3 h4; do
    "$sc" run --sim --trace "$work/traces/$h/%p.jsonl" -- "$work/peer_demo" >"$work/run-$h.log" 2>&1 || true
    compgen -G "$work/traces/$h/*.jsonl" >/dev/null || fail "no trace written for $h"
done
printf 'h1\nh2\nh3\nh4\n' >"$work/hosts.txt"

# munge, on its own socket and key.
mkdir -p "$work/munge"
head -c 1024 /dev/urandom >"$work/munge/munge.key"
chmod 400 "$work/munge/munge.key"
munged --force --foreground --key-file="$work/munge/munge.key" \
    --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
    --seed-file="$work/munge/munged.seed" >"$work/munged.log" 2>&1 &
pids+=($!)

# A one-node cluster on free ports.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
node="$(hostname -s)"
mkdir -p "$work/etc" "$work/state" "$work/spool"
cat >"$work/etc/slurm.conf" <<EOF
ClusterName=sharecheck
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(port)
SlurmdPort=$(port)
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$work/etc/slurm.conf"
slurmctld -D -i >"$work/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D >"$work/slurmd.out.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do
    state="$(sinfo -h -o %T 2>/dev/null || true)"
    [[ $state == idle* ]] && break
    sleep 0.5
done
[[ ${state:-} == idle* ]] || fail "the node did not come up (state: ${state:-none})"

# The recipe.
cd "$work"
array="$(sbatch --parsable --array=1-4 --output="$work/task-%a.out" --wrap \
    "h=\$(sed -n \"\${SLURM_ARRAY_TASK_ID}p\" hosts.txt); '$sc' report --partial partials/\"\$h\" traces/\"\$h\"")"
merge="$(sbatch --parsable --dependency=afterok:"$array" --output="$work/merge.out" --wrap \
    "'$sc' report partials/ > merged.txt; '$sc' report partials/ --format json > merged.json; '$sc' report partials/ --format sarif > merged.sarif")"
for _ in $(seq 240); do
    [[ -z $(squeue -h -j "$array,$merge" 2>/dev/null) ]] && break
    sleep 0.5
done
[[ -z $(squeue -h -j "$array,$merge" 2>/dev/null) ]] || fail "the jobs did not finish"
for h in h1 h2 h3 h4; do
    compgen -G "partials/$h/*.jsonl" >/dev/null || fail "no partial result for $h"
done
[[ -s merged.txt ]] || fail "the merge job wrote no report"

"$sc" report traces/ >together.txt || true
"$sc" report traces/ --format json >together.json || true
"$sc" report traces/ --format sarif >together.sarif || true
for f in txt json sarif; do
    cmp -s "together.$f" "merged.$f" || {
        diff "together.$f" "merged.$f" | head -20 >&2
        fail "the merged $f report differs from the report of the traces read together"
    }
done
grep -q "PROCESSES" merged.txt || fail "the merged report lists no processes"
echo "slurm.sh: a job array of 4 partial results and their report, through Slurm: the report of the traces read together ($(wc -c <merged.json) bytes of JSON)"
