#!/usr/bin/env python3
"""Checks one case of scripts/gpu-smoke.sh: a program run without and with the sharecheck shim.

    check_traces.py CASE TRACE_DIR BASELINE_OUT SHIM_OUT --baseline-rc N --shim-rc N [checks...]

BASELINE_OUT / SHIM_OUT are the stdout of the two runs. The programs print one line per event:
`CALL <fn> <rc> [...]`, `CHECK <name> ok|FAIL`, `RESOLVE ...`, `UNEXPECTED ...`, `DONE ...` (these
must be identical in both runs), `HANDLE <kind> <hex>` (IPC handle bytes, which must never reach
a trace), `NOTE ...` and `DLSYM`/`DLCALL` lines (allowed to differ).

TRACE_DIR holds the JSON Lines traces of the shim run (one file per process). Always checked: both
runs exit with --expect-rc (default 0) and with the same status, the compared output lines are
identical, and every trace line is a well-formed schema v2 record.

Expectation SPECs (repeatable flags):  [SCOPE:]FN[|FN...][=RET[,RET...]]
    SCOPE   any (default), parent (a traced process whose parent is not traced) or child
    FN      exact symbol in the records' "fn"; alternatives separated by |
    RET...  the ret values of those records, in this order, as a subsequence, in one process;
            without =RET, at least one record
  --expect SPEC        must hold
  --forbid SPEC        no record may match (RETs, if given, restrict which rets are forbidden)
  --observe SPEC       reported only (INFO), never fails

Other checks:
  --calls-match              the covered CALL/DLCALL lines of the shim run and the covered records
                             of the parent process pair up one to one: same fn and ret, same order
  --no-raw-handles           HANDLE bytes appear in no trace file (hex, base64, byte list); IPC
                             handle arguments are "fp:<16 hex>" fingerprints; each opened handle's
                             fingerprint is one a traced cuIpcGet*Handle produced
  --expect-not-forwarded FN  every record of FN has "forwarded": false (no real function)
  --expect-line TEXT         the shim run printed exactly this line
  --expect-baseline-line TEXT   the baseline run printed exactly this line
  --report-output FILE --report-rc N   `sharecheck report` over TRACE_DIR exited 0 with output

Results: a table on stdout; with --results FILE, one `STATUS<TAB>CASE<TAB>CHECK<TAB>DETAIL` line per
check is appended (STATUS PASS, FAIL or INFO). Exit status 1 if any check failed, 2 on bad usage.
"""

import argparse
import base64
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_io  # noqa: E402

COMPARED_PREFIXES = ("CALL ", "CHECK ", "RESOLVE ", "UNEXPECTED ", "DONE", "SKIP ")
# Schema v2 (README.md, "Trace records"): every record has these; a call record has "fn", "a"
# and "r", an event record "event"; the file's first record, the process record, adds "v" and
# "pid", which the records after it do not repeat.
RECORD_KEYS = ("seq", "t", "tid")
CALL_KEYS = ("fn", "a", "r")
PROCESS_KEYS = ("v", "event", "pid", "ppid", "exe", "t0_wall_ns", "t0_mono_ns")
SCOPES = ("any", "parent", "child")
FP_RE = re.compile(r"^fp:[0-9a-f]{16}$")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Used when core/src/functions.rs cannot be read (the declaration list of interposed functions).
FALLBACK_COVERED = [
    "cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess", "cuCtxDisablePeerAccess", "cuMemcpyPeer",
    "cuMemcpyPeer_ptds", "cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz", "cuStreamAttachMemAsync",
    "cuStreamAttachMemAsync_ptsz", "cuIpcGetMemHandle", "cuIpcOpenMemHandle",
    "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle", "cuIpcGetEventHandle", "cuIpcOpenEventHandle",
    "cuLogicalEndpointIdReserve", "cuLogicalEndpointIdRelease", "cuLogicalEndpointCreate",
    "cuLogicalEndpointAddDevice", "cuLogicalEndpointDestroy", "cuLogicalEndpointBindAddr",
    "cuLogicalEndpointBindMem", "cuLogicalEndpointUnbind", "cuLogicalEndpointExport",
    "cuLogicalEndpointImport", "cuLogicalEndpointQuery", "cuLogicalEndpointGetLimits",
]
IPC_GET = {"cuIpcGetMemHandle": "mem", "cuIpcGetEventHandle": "event"}
IPC_OPEN = {"cuIpcOpenMemHandle": "mem", "cuIpcOpenMemHandle_v2": "mem", "cuIpcOpenEventHandle": "event"}


def covered_functions(path):
    """The CUDA symbols the shim stands in for: every declared seed, and an `observed` declaration
    only when a check runs on it (its row in core/src/table.rs names one); an observed function
    no check runs on is handed out as the driver's own and never traced."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return set(FALLBACK_COVERED)
    declared = re.findall(r"^\s*cuda\s+(\w+)\s+\[([^\]]*)\]", text, re.M)
    if not declared:
        return set(FALLBACK_COVERED)
    try:
        with open(os.path.join(os.path.dirname(path), "table.rs"), encoding="utf-8") as f:
            table = f.read()
    except OSError:
        table = ""
    checked = {sym for sym, checks in re.findall(r"^\s*(\w+)\s*=>\s*([^;]*);", table, re.M)
               if checks.strip()}
    return {sym for sym, marks in declared if "observed" not in marks.split() or sym in checked}


# ---------------------------------------------------------------------------------------------
# Inputs.

def read_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n") for line in f]
    except OSError:
        return None


def compared(lines):
    return [l.rstrip() for l in lines if l.startswith(COMPARED_PREFIXES)]


class Process:
    def __init__(self, pid):
        self.pid = pid
        self.ppid = None
        self.exe = ""
        self.files = set()
        self.calls = []     # call records
        self.events = []    # fn == null records


def load_traces(trace_dir):
    """Returns (processes by pid, list of problems, {file: raw text})."""
    procs = {}
    problems = []
    raw = {}
    try:
        names = sorted(n for n in os.listdir(trace_dir) if trace_io.is_trace(n))
    except OSError as e:
        return procs, ["cannot list %s: %s" % (trace_dir, e)], raw
    for name in names:
        path = os.path.join(trace_dir, name)
        if not os.path.isfile(path):
            continue
        # With its ring's tail when the process ended without exit handlers (trace_io.py).
        lines = trace_io.read_lines(path)
        text = "\n".join(lines)
        raw[name] = text
        pid = None
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = "%s:%d" % (name, lineno)
            try:
                rec = json.loads(line)
            except ValueError as e:
                problems.append("%s: not JSON (%s)" % (where, e))
                continue
            if not isinstance(rec, dict):
                problems.append("%s: not an object" % where)
                continue
            keys = RECORD_KEYS + (PROCESS_KEYS if lineno == 1 else CALL_KEYS if "fn" in rec else ("event",))
            missing = [k for k in keys if k not in rec]
            if missing:
                problems.append("%s: missing %s" % (where, ", ".join(missing)))
                continue
            if lineno == 1:
                if rec["v"] != 2 or rec["event"] != "process":
                    problems.append("%s: the first record is not a v2 process record" % where)
                    continue
                pid = rec["pid"]
            elif pid is None or "v" in rec or "pid" in rec:
                problems.append("%s: v and pid belong to the file's first record only" % where)
                continue
            rec["pid"] = pid
            proc = procs.setdefault(pid, Process(pid))
            proc.files.add(name)
            if "fn" not in rec:
                rec["fn"] = None
                proc.events.append(rec)
                if rec.get("event") == "process":
                    proc.ppid = rec.get("ppid")
                    proc.exe = rec.get("exe", "")
            else:
                if not isinstance(rec["r"], int) or not isinstance(rec["a"], dict):
                    problems.append("%s: r must be an integer and a an object" % where)
                    continue
                # The rest of this script reads v1's names: ret, args (an out-parameter the driver
                # wrote, "*name": value, as name: {"value": value}) and api.
                rec["ret"] = rec["r"]
                rec["args"] = {(k[1:] if k.startswith("*") else k): ({"value": v} if k.startswith("*") else v)
                               for k, v in rec["a"].items()}
                rec["api"] = "cuda" if rec["fn"].startswith("cu") else "hip"
                proc.calls.append(rec)
    for proc in procs.values():
        # seq increases along each thread; time orders the threads' records between them.
        proc.calls.sort(key=lambda r: (r["t"], r["seq"]))
    return procs, problems, raw


def roles(procs):
    """pid -> 'parent' (its parent is not traced) or 'child'."""
    return {pid: ("child" if p.ppid in procs and p.ppid != pid else "parent")
            for pid, p in procs.items()}


# ---------------------------------------------------------------------------------------------
# Results.

class Results:
    def __init__(self, case, path):
        self.case = case
        self.path = path
        self.rows = []

    def add(self, status, check, detail):
        self.rows.append((status, check, detail))
        print("  %-5s %-34s %s" % (status, check, detail))
        sys.stdout.flush()

    def passed(self, check, detail):
        self.add("PASS", check, detail)

    def failed(self, check, detail):
        self.add("FAIL", check, detail)

    def info(self, check, detail):
        self.add("INFO", check, detail)

    def judge(self, ok, check, detail):
        self.add("PASS" if ok else "FAIL", check, detail)

    def write(self):
        if not self.path:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            for status, check, detail in self.rows:
                f.write("%s\t%s\t%s\t%s\n" % (status, self.case, check, detail.replace("\t", " ").replace("\n", " ")))

    def any_failed(self):
        return any(r[0] == "FAIL" for r in self.rows)


def short(items, limit=12):
    items = list(items)
    text = ", ".join(str(i) for i in items[:limit])
    return text + (", ... (%d in all)" % len(items) if len(items) > limit else "")


# ---------------------------------------------------------------------------------------------
# Specs.

class Spec:
    def __init__(self, text):
        self.text = text
        body = text
        self.scope = "any"
        if ":" in body:
            self.scope, body = body.split(":", 1)
            if self.scope not in SCOPES:
                raise ValueError("scope must be one of %s: %r" % ("/".join(SCOPES), text))
        self.rets = None
        if "=" in body:
            body, rets = body.split("=", 1)
            try:
                self.rets = [int(r) for r in rets.split(",") if r.strip() != ""]
            except ValueError:
                raise ValueError("RETs must be integers: %r" % text)
        self.fns = [f for f in body.split("|") if f]
        if not self.fns:
            raise ValueError("no function in %r" % text)

    def per_process(self, procs, role_of):
        """[(pid, [records of the spec's functions in time order])] for processes in scope."""
        out = []
        for pid in sorted(procs):
            if self.scope != "any" and role_of[pid] != self.scope:
                continue
            recs = [r for r in procs[pid].calls if r["fn"] in self.fns]
            if recs:
                out.append((pid, recs))
        return out


def is_subsequence(wanted, seq):
    it = iter(seq)
    return all(any(x == w for x in it) for w in wanted)


def describe(per_proc, role_of):
    parts = []
    for pid, recs in per_proc:
        by_fn = collections.OrderedDict()
        for r in recs:
            by_fn.setdefault(r["fn"], []).append(r["ret"])
        parts.append("%s %d: %s" % (role_of[pid], pid,
                                    "; ".join("%s rets [%s]" % (fn, short(rets, 16)) for fn, rets in by_fn.items())))
    return " | ".join(parts) if parts else "no record"


def eval_spec(spec, procs, role_of):
    per = spec.per_process(procs, role_of)
    if spec.rets is None:
        return bool(per), describe(per, role_of)
    ok = any(is_subsequence(spec.rets, [r["ret"] for r in recs]) for _, recs in per)
    return ok, describe(per, role_of)


def eval_forbid(spec, procs, role_of):
    per = spec.per_process(procs, role_of)
    if spec.rets is not None:
        per = [(pid, [r for r in recs if r["ret"] in spec.rets]) for pid, recs in per]
        per = [(pid, recs) for pid, recs in per if recs]
    return not per, describe(per, role_of)


# ---------------------------------------------------------------------------------------------
# Checks.

def check_exit(res, args):
    ok = args.baseline_rc == args.shim_rc == args.expect_rc
    res.judge(ok, "exit-status", "baseline %d, shim %d (expected %d)" % (args.baseline_rc, args.shim_rc, args.expect_rc))


def check_output(res, base_lines, shim_lines):
    if base_lines is None or shim_lines is None:
        res.failed("output-identical", "missing output file")
        return
    a, b = compared(base_lines), compared(shim_lines)
    if a == b:
        res.judge(bool(a), "output-identical", "%d lines compared" % len(a) if a else "no CALL/CHECK lines printed")
        return
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<end>"
        y = b[i] if i < len(b) else "<end>"
        if x != y:
            res.failed("output-identical", "line %d differs: baseline %r, shim %r (%d vs %d lines)" % (i + 1, x, y, len(a), len(b)))
            return


def check_lines(res, lines, wanted, which):
    present = set(l.rstrip() for l in (lines or []))
    for text in wanted:
        res.judge(text in present, "%s-line" % which, repr(text))


def check_wellformed(res, procs, problems, raw):
    calls = sum(len(p.calls) for p in procs.values())
    if problems:
        res.failed("trace-wellformed", "%d problem(s): %s" % (len(problems), short(problems, 3)))
    elif not raw:
        res.failed("trace-wellformed", "no trace file written")
    else:
        no_header = [str(p.pid) for p in procs.values() if p.ppid is None]
        no_exit = [str(p.pid) for p in procs.values() if not any(e.get("event") == "exit" for e in p.events)]
        detail = "%d file(s), %d process(es), %d call record(s)" % (len(raw), len(procs), calls)
        if no_header:
            res.failed("trace-wellformed", detail + "; no process record for pid " + short(no_header))
        else:
            res.passed("trace-wellformed", detail + ("; no exit record for pid %s" % short(no_exit) if no_exit else ""))


def summarize_functions(res, procs, role_of, covered):
    table = collections.OrderedDict()
    for pid in sorted(procs):
        for r in procs[pid].calls:
            entry = table.setdefault(r["fn"], {"n": 0, "rets": collections.Counter(), "roles": set()})
            entry["n"] += 1
            entry["rets"][r["ret"]] += 1
            entry["roles"].add(role_of[pid])
    if not table:
        res.info("functions", "no call record")
        return
    for fn in sorted(table):
        e = table[fn]
        rets = ", ".join("%d x%d" % (ret, n) for ret, n in sorted(e["rets"].items()))
        where = "/".join(sorted(e["roles"]))
        note = "" if fn in covered else " (not in the declaration list!)"
        res.info("fn " + fn, "%d call(s), rets {%s}, in %s%s" % (e["n"], rets, where, note))
    findings = collections.Counter()
    for p in procs.values():
        for r in p.calls + p.events:
            for f in r.get("findings") or []:
                if isinstance(f, dict):
                    findings["%s/%s" % (f.get("rule", "?"), f.get("severity", "?"))] += 1
    res.info("findings", short("%s x%d" % kv for kv in sorted(findings.items())) if findings else "none")


def check_calls_match(res, shim_lines, procs, role_of, covered):
    calls = []
    for line in shim_lines or []:
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("CALL", "DLCALL") and parts[1] in covered:
            try:
                calls.append((parts[1], int(parts[2])))
            except ValueError:
                pass
    parents = [pid for pid in sorted(procs) if role_of[pid] == "parent"]
    if not parents:
        res.failed("calls-match", "no parent process trace")
        return
    pid = max(parents, key=lambda p: len(procs[p].calls))
    recs = [(r["fn"], r["ret"]) for r in procs[pid].calls if r["fn"] in covered]
    i = 0
    matched = []
    for n, (fn, rc) in enumerate(calls):
        while i < len(recs) and recs[i][0] != fn:
            i += 1
        if i == len(recs):
            res.failed("calls-match", "CALL %s %d (covered call #%d) has no later trace record of %s" % (fn, rc, n + 1, fn))
            return
        if recs[i][1] != rc:
            res.failed("calls-match", "CALL %s %d (covered call #%d): trace record says ret %d" % (fn, rc, n + 1, recs[i][1]))
            return
        matched.append(i)
        i += 1
    if not calls:
        res.failed("calls-match", "no CALL line of a covered function")
        return
    taken = set(matched)
    extra = ["seq-order #%d %s=%d" % (j + 1, recs[j][0], recs[j][1]) for j in range(len(recs)) if j not in taken]
    if extra:
        # A record no CALL line accounts for: the shim traced a call the program did not make.
        res.failed("calls-match", "%d CALL lines matched, but %d trace record(s) have no CALL line: %s"
                   % (len(calls), len(extra), short(extra)))
        return
    res.passed("calls-match", "%d covered CALL lines = the %d trace records of pid %d (same fn, ret, order)"
               % (len(calls), len(recs), pid))


def handle_forms(hex_text):
    data = bytes.fromhex(hex_text)
    return {
        "hex": hex_text.lower(),
        "base64": base64.b64encode(data).decode().lower(),
        "byte-list": ",".join(str(b) for b in data),
        "byte-list-spaced": ", ".join(str(b) for b in data),
    }


def check_handles(res, base_lines, shim_lines, procs, raw):
    handles = []
    for line in (base_lines or []) + (shim_lines or []):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "HANDLE" and re.fullmatch(r"[0-9a-fA-F]{2,}", parts[2]):
            if (parts[1], parts[2].lower()) not in handles:
                handles.append((parts[1], parts[2].lower()))
    if not handles:
        res.failed("handles-not-in-trace", "the program printed no HANDLE line")
    else:
        lowered = {name: text.lower() for name, text in raw.items()}
        leaks = []
        for kind, hex_text in handles:
            for form, needle in handle_forms(hex_text).items():
                for name, text in lowered.items():
                    if needle and needle in text:
                        leaks.append("%s handle as %s in %s" % (kind, form, name))
        res.judge(not leaks, "handles-not-in-trace",
                  "%d handle(s) searched in %d file(s): absent" % (len(handles), len(raw)) if not leaks else short(leaks, 4))
    # Handle arguments are fingerprints.
    bad = []
    produced = collections.defaultdict(set)
    opened = []
    n = 0
    for p in procs.values():
        for r in p.calls:
            fn = r["fn"]
            if fn in IPC_GET and r["ret"] == 0:
                value = (r["args"].get("pHandle") or {}).get("value")
                n += 1
                if not (isinstance(value, str) and FP_RE.match(value)):
                    bad.append("%s seq %d pHandle.value=%r" % (fn, r["seq"], value))
                else:
                    produced[IPC_GET[fn]].add(value)
            elif fn in IPC_OPEN:
                value = r["args"].get("handle")
                n += 1
                if not (isinstance(value, str) and FP_RE.match(value)):
                    bad.append("%s seq %d handle=%r" % (fn, r["seq"], value))
                else:
                    opened.append((fn, r["seq"], p.pid, value))
    if n == 0:
        res.failed("handles-fingerprinted", "no IPC handle record in the traces")
    else:
        res.judge(not bad, "handles-fingerprinted",
                  "%d handle argument(s), all \"fp:<16 hex>\"" % n if not bad else short(bad, 3))
    if opened:
        unknown = ["%s seq %d (pid %d) %s" % o for o in opened if o[3] not in produced[IPC_OPEN[o[0]]]]
        res.judge(not unknown, "handle-fp-links",
                  "%d open(s) name handles a traced cuIpcGet*Handle produced" % len(opened) if not unknown else
                  "unknown fingerprint: " + short(unknown, 3))


def check_not_forwarded(res, procs, fns):
    for fn in fns:
        recs = [r for p in procs.values() for r in p.calls if r["fn"] == fn]
        if not recs:
            res.failed("not-forwarded " + fn, "no record")
            continue
        forwarded = [r["seq"] for r in recs if r.get("forwarded") is not False]
        res.judge(not forwarded, "not-forwarded " + fn,
                  "%d record(s) with \"forwarded\":false" % len(recs) if not forwarded else
                  "forwarded in seq " + short(forwarded))


def check_report(res, path, rc):
    if path is None:
        return
    lines = read_lines(path)
    if lines is None:
        res.failed("sharecheck-report", "no output file %s" % path)
        return
    summary = [l for l in lines if l.startswith("SUMMARY")]
    res.judge(rc == 0 and any(l.strip() for l in lines), "sharecheck-report",
              "exit %d, %d line(s)%s" % (rc, len(lines), "; " + summary[-1].strip() if summary else ""))


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], usage=__doc__.split("\n\n")[1].strip())
    p.add_argument("case")
    p.add_argument("trace_dir")
    p.add_argument("baseline_out")
    p.add_argument("shim_out")
    p.add_argument("--baseline-rc", type=int, required=True)
    p.add_argument("--shim-rc", type=int, required=True)
    p.add_argument("--expect-rc", type=int, default=0)
    p.add_argument("--expect", action="append", default=[], metavar="SPEC")
    p.add_argument("--forbid", action="append", default=[], metavar="SPEC")
    p.add_argument("--observe", action="append", default=[], metavar="SPEC")
    p.add_argument("--expect-not-forwarded", action="append", default=[], metavar="FN")
    p.add_argument("--calls-match", action="store_true")
    p.add_argument("--no-raw-handles", action="store_true")
    p.add_argument("--expect-line", action="append", default=[], metavar="TEXT")
    p.add_argument("--expect-baseline-line", action="append", default=[], metavar="TEXT")
    p.add_argument("--report-output", metavar="FILE")
    p.add_argument("--report-rc", type=int, default=0)
    p.add_argument("--results", metavar="FILE")
    p.add_argument("--functions-rs", default=os.path.join(REPO, "core", "src", "functions.rs"))
    args = p.parse_args(argv)
    try:
        args.expect = [Spec(s) for s in args.expect]
        args.forbid = [Spec(s) for s in args.forbid]
        args.observe = [Spec(s) for s in args.observe]
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv):
    args = parse_args(argv)
    covered = covered_functions(args.functions_rs)
    res = Results(args.case, args.results)
    print("== checks: %s (traces in %s)" % (args.case, args.trace_dir))

    base_lines = read_lines(args.baseline_out)
    shim_lines = read_lines(args.shim_out)
    procs, problems, raw = load_traces(args.trace_dir)
    role_of = roles(procs)

    check_exit(res, args)
    check_output(res, base_lines, shim_lines)
    check_lines(res, shim_lines, args.expect_line, "shim")
    check_lines(res, base_lines, args.expect_baseline_line, "baseline")
    check_wellformed(res, procs, problems, raw)
    for spec in args.expect:
        ok, detail = eval_spec(spec, procs, role_of)
        res.judge(ok, "expect " + spec.text, detail)
    for spec in args.forbid:
        ok, detail = eval_forbid(spec, procs, role_of)
        res.judge(ok, "forbid " + spec.text, detail)
    for spec in args.observe:
        ok, detail = eval_spec(spec, procs, role_of)
        res.info("observe " + spec.text, ("seen: " if ok else "not seen: ") + detail)
    check_not_forwarded(res, procs, args.expect_not_forwarded)
    if args.calls_match:
        check_calls_match(res, shim_lines, procs, role_of, covered)
    if args.no_raw_handles:
        check_handles(res, base_lines, shim_lines, procs, raw)
    check_report(res, args.report_output, args.report_rc)
    for pid in sorted(procs):
        p = procs[pid]
        res.info("process %d" % pid, "%s, ppid %s, exe %s, %d call(s), file %s"
                 % (role_of[pid], p.ppid, p.exe, len(p.calls), short(sorted(p.files))))
    summarize_functions(res, procs, role_of, covered)

    res.write()
    n_pass = sum(1 for r in res.rows if r[0] == "PASS")
    n_fail = sum(1 for r in res.rows if r[0] == "FAIL")
    print("== %s: %d passed, %d failed" % (args.case, n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
