"""Counts the call records of trace directories (every *.jsonl): call records, the exit
records' "calls", "calls_unfinished" and "calls_unchecked", findings, duplicate seqs and ring
files left. Usage: count_records.py [--check] DIR...

With --check, exits 1 unless every directory has one exit record that counts its call records
(calls <= exit <= calls + unfinished: the calls still being recorded when it was written may
follow it, or not), no seq twice and no ring file left."""
import json, sys, glob, collections

check = "--check" in sys.argv
ok = True
for d in [a for a in sys.argv[1:] if a != "--check"]:
    recs = []
    for f in glob.glob(d + "/*.jsonl"):
        for line in open(f):
            try:
                recs.append(json.loads(line))
            except Exception:
                print("BAD", f, line[:80])
                ok = False
    calls = [r for r in recs if r.get("fn")]
    seqs = collections.Counter(r["seq"] for r in calls)
    dup = sum(1 for v in seqs.values() if v > 1)
    ex = [r for r in recs if r.get("event") == "exit"]
    unfinished = sum(e.get("calls_unfinished", 0) for e in ex)
    unchecked = sum(e.get("calls_unchecked", 0) for e in ex)
    findings = sum(len(r.get("findings", [])) for r in calls)
    rings = glob.glob(d + "/*.ring")
    print(d, "calls", len(calls), "exit", [e.get("calls") for e in ex], "unfinished", unfinished,
          "unchecked", unchecked, "findings", findings, "dups", dup, "rings", rings)
    counted = len(ex) == 1 and len(calls) <= ex[0].get("calls", -1) <= len(calls) + unfinished
    ok = ok and counted and dup == 0 and not rings
sys.exit(0 if ok or not check else 1)
