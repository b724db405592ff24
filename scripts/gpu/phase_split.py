#!/usr/bin/env python3
"""Splits the runs of scripts/gpu/startup-cost.sh by phase (scripts/gpu/phase_probe.c's lines):
for each mode, the median over rounds of each phase of the first process (the one started
first) and of all its processes summed, in ms.

Usage: phase_split.py OUTDIR PROGRAM MODE...   (reads OUTDIR/probe-PROGRAM-MODE-ROUND.txt)
       phase_split.py --own FILE...   the median of the shim's own time in phase-build runs, ms
"""
import glob
import statistics
import sys

PHASES = ["load", "to-init", "init", "program", "exit", "last", "tail"]


def phases(line, start, end, first):
    # PROBE pid ctor C init I0 I1 exit E dtor D last L
    f = line.split()
    ctor, i0, i1, ex, dtor, last = (int(f[i]) for i in (3, 5, 6, 8, 10, 12))
    p = dict.fromkeys(PHASES, 0)
    p["load"] = ctor - start if first else 0
    if i0:
        p["to-init"], p["init"] = i0 - ctor, i1 - i0
        p["program"] = (ex or dtor) - i1
    else:
        p["program"] = (ex or dtor) - ctor
    p["exit"] = dtor - ex if ex else 0
    p["last"] = last - dtor
    p["tail"] = end - last if first else 0
    return p


def marks(line):
    """The marked functions' first calls of a probe line: {name: (entry, return)}."""
    f = line.split()[13:]
    return {f[i]: (int(f[i + 1]), int(f[i + 2])) for i in range(0, len(f) - 2, 3) if int(f[i + 1])}


def main():
    if sys.argv[1] == "--own":
        # scripts/gpu-real.sh: the median own time of the phase runs FILE..., in ms.
        runs = own_times(sys.argv[2:])
        print(f"{statistics.median(r[0] for r in runs):.3f}" if runs else "")
        return
    out, prog, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
    if "phases" in modes:
        shim_time(out, prog)
    for mode in modes:
        first, total, count, timeline = [], [], [], []
        for path in sorted(glob.glob(f"{out}/probe-{prog}-{mode}-*.txt")):
            lines = open(path).read().split("\n")
            se = [l for l in lines if l.startswith("START ")]
            procs = sorted((l for l in lines if l.startswith("PROBE ")),
                           key=lambda l: int(l.split()[3]))
            # The CLI of `sharecheck run` never calls cuInit: its line is not the program's.
            if mode == "run":
                procs = [l for l in procs if l.split()[5] != "0"] or procs
            if not se or not procs:
                continue
            _, start, _, end = se[-1].split()
            split = [phases(l, int(start), int(end), i == 0) for i, l in enumerate(procs)]
            first.append(split[0])
            # The first process's marked calls, in ms after cuInit returned (else its
            # constructor): where it entered each, how long each took, and then its destructor.
            f0 = procs[0].split()
            base = int(f0[6]) or int(f0[3])
            timeline.append({name: ((a - base) / 1e6, (b - a) / 1e6)
                             for name, (a, b) in marks(procs[0]).items()}
                            | {"dtor": ((int(f0[10]) - base) / 1e6, 0)})
            total.append({k: sum(p[k] for p in split) for k in PHASES})
            count.append(len(procs))
        if not first:
            print(f"  {mode}: no probe lines")
            continue
        med = lambda rows, k: statistics.median(r[k] for r in rows) / 1e6
        print(f"  {mode:8} first: " + " ".join(f"{k} {med(first, k):.1f}" for k in PHASES)
              + f" | {max(count)} processes, summed: "
              + " ".join(f"{k} {med(total, k):.1f}" for k in PHASES[1:-1]))
        names = [n for n in timeline[0] if all(n in t for t in timeline)]
        if len(names) > 1:
            print(f"  {'':8} calls: " + " ".join(
                f"{n} {statistics.median(t[n][0] for t in timeline):.1f}"
                f" (+{statistics.median(t[n][1] for t in timeline):.1f})" for n in names))


def own_times(paths):
    """The shim's own time in each run of a phase build (one file per run, its processes' lines
    appended): every wrapped call's phases but the driver's, and the constructor's and the exit's
    time ("(constructor)", "(exit)" lines), in ms; and the wrapped calls. "[part]" lines time
    parts of the calls (src/phases.rs, `Part`) and are not added."""
    runs = []
    for path in paths:
        ns, calls = 0.0, 0
        for line in open(path):
            fields = line.split()
            if fields[0].startswith("["):
                continue  # a part of the calls' time, counted in their lines already
            f = dict(kv.split("=") for kv in fields[1:])
            n = int(f["calls"])
            if not fields[0].startswith("("):
                calls += n
            ns += n * sum(float(v) for k, v in f.items() if k not in ("calls", "driver"))
        runs.append((ns / 1e6, calls))
    return runs


def shim_time(out, prog):
    """Prints the median of [`own_times`] over the `phases` mode's rounds of `prog`."""
    rounds = own_times(sorted(glob.glob(f"{out}/phases-{prog}-*.txt")))
    if rounds:
        ms = statistics.median(r[0] for r in rounds)
        print(f"  shim's own time on the program's path (phase build, traced): median {ms:.2f} ms "
              f"of {len(rounds)} rounds, {rounds[0][1]} wrapped calls a run; every round: "
              + " ".join(f"{r[0]:.2f}" for r in rounds))


if __name__ == "__main__":
    main()
