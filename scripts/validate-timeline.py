#!/usr/bin/env python3
"""Validates a `sharecheck report --format perfetto` timeline against the Trace Event Format
(the Chrome trace-event JSON that ui.perfetto.dev and Perfetto's trace processor import:
https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU), with Python's
JSON parser. Perfetto's trace processor itself could not be installed here: the `perfetto` PyPI
package downloads its binary from commondatastorage.googleapis.com, which this machine cannot
reach; this script checks the fields the format documents instead.

Checks: the document is a JSON object with a `traceEvents` array (and `displayTimeUnit` "ms" or
"ns" if present); every event has a known `ph`, a string `name`, integer `pid` (and `tid` where
the phase needs one), a non-negative number `ts` (not for metadata) and an object `args` if any;
complete events (`X`) a non-negative `dur`; instant events (`i`/`I`) a scope `s` of g, p or t;
metadata (`M`) one of the documented names with its documented argument; flow events (`s`, `t`,
`f`) an `id` and a `cat`, every `f` a matching `s` (same cat, name and id) no later than it, and
each flow event inside a slice of its thread (the slice it binds to: `"bp":"e"`, the enclosing
one). Every thread with events has a name, and every process too.

Usage: scripts/validate-timeline.py FILE [--expect-flows N] [--expect-instants N]. Prints a summary
line; exits 1 with one line per problem."""
import json
import sys
from collections import defaultdict

METADATA = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}
PHASES = set("BEXiIbneCMsftPONDRcp") | {"(", ")"}


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    path = args[0]
    expect = {}
    for i in range(1, len(args), 2):
        expect[args[i]] = int(args[i + 1])
    problems = []

    def bad(i, event, why):
        problems.append(f"event {i} ({json.dumps(event)[:120]}): {why}")

    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        sys.exit(f"{path}: not a JSON object with a traceEvents array")
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {doc['displayTimeUnit']!r} is not ms or ns")
    events = doc["traceEvents"]
    slices = defaultdict(list)
    named_threads, named_processes, used_threads = set(), set(), set()
    flows = defaultdict(dict)
    count = defaultdict(int)
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            bad(i, e, "not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            bad(i, e, f"unknown phase {ph!r}")
            continue
        count[ph] += 1
        if not isinstance(e.get("name"), str):
            bad(i, e, "no string name")
        if not isinstance(e.get("pid"), int):
            bad(i, e, "no integer pid")
        if "args" in e and not isinstance(e["args"], dict):
            bad(i, e, "args is not an object")
        if ph == "M":
            key = METADATA.get(e.get("name"))
            if key is None:
                bad(i, e, f"unknown metadata name {e.get('name')!r}")
            elif key not in e.get("args", {}):
                bad(i, e, f"metadata without args.{key}")
            if e.get("name") == "thread_name":
                if not isinstance(e.get("tid"), int):
                    bad(i, e, "thread_name without an integer tid")
                named_threads.add((e.get("pid"), e.get("tid")))
            if e.get("name") == "process_name":
                named_processes.add(e.get("pid"))
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts < 0:
            bad(i, e, "no non-negative number ts")
            continue
        if not isinstance(e.get("tid"), int):
            bad(i, e, "no integer tid")
            continue
        used_threads.add((e["pid"], e["tid"]))
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                bad(i, e, "complete event without a non-negative dur")
                continue
            slices[(e["pid"], e["tid"])].append((ts, ts + dur))
        elif ph in "iI":
            if e.get("s", "t") not in ("g", "p", "t"):
                bad(i, e, f"instant scope {e.get('s')!r} is not g, p or t")
        elif ph in "stf":
            if "id" not in e or not isinstance(e.get("cat"), str):
                bad(i, e, "flow event without id and cat")
                continue
            if ph == "f" and e.get("bp", "e") != "e":
                bad(i, e, f"flow end binding point {e.get('bp')!r}")
            flows[(e["cat"], e["name"], str(e["id"]))][ph] = (i, e)
    for key, ends in flows.items():
        if "f" in ends and "s" not in ends:
            bad(ends["f"][0], ends["f"][1], "flow end without its start")
        if "s" in ends and "f" in ends and ends["s"][1]["ts"] > ends["f"][1]["ts"]:
            bad(ends["f"][0], ends["f"][1], "flow ends before it starts")
        for ph, (i, e) in ends.items():
            inside = any(a <= e["ts"] <= b for a, b in slices[(e["pid"], e["tid"])])
            if not inside:
                bad(i, e, "flow event in no slice of its thread (nothing to bind to)")
    for pid, tid in sorted(used_threads - named_threads):
        problems.append(f"thread {pid}/{tid} has events but no thread_name")
    for pid in sorted({p for p, _ in used_threads} - named_processes):
        problems.append(f"process {pid} has events but no process_name")
    complete_flows = sum(1 for ends in flows.values() if "s" in ends and "f" in ends)
    got = {"--expect-flows": complete_flows, "--expect-instants": count.get("i", 0) + count.get("I", 0)}
    for flag, n in expect.items():
        if flag not in got:
            sys.exit(f"unknown option {flag}")
        if got[flag] != n:
            problems.append(f"{flag} {n}: found {got[flag]}")
    for p in problems:
        print(f"{path}: {p}")
    print(
        f"{path}: {len(events)} events ({', '.join(f'{k}: {v}' for k, v in sorted(count.items()))}), "
        f"{len(used_threads)} threads, {complete_flows} flows, {len(problems)} problems"
    )
    sys.exit(1 if problems else 0)


main()
