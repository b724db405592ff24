//! `sharecheck report`: merges the trace files of many processes and prints the findings, as
//! text for a person or as one JSON object for a program, from the [`Summary`] it builds (which
//! `sharecheck run` prints its one-line summary from too).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::args::{Format, ReportArgs, Severity, EXIT_USAGE};
use crate::findings::Gather;
use crate::occurrence::Occurrence;
use crate::review;
use crate::summary::{summarize, FnStats, Summary};
use crate::trace::{self, Diagnostics};
use sharecheck_core::crossproc;

/// Runs `sharecheck report`; returns the exit status.
/// The TRACE arguments, or the default directory when none is given (`None`, said on stderr,
/// when that does not exist either).
/// Without a TRACE: the newest run of `./sharecheck-trace` (every run with `all`), or the
/// directory itself where it holds no run directory (traces of older versions, or written there
/// by `SHARECHECK_TRACE`).
fn traces_or_default(mut traces: Vec<PathBuf>, command: &str, all: bool) -> Option<Vec<PathBuf>> {
    if traces.is_empty() {
        let default = PathBuf::from(sharecheck_core::schema::DEFAULT_TRACE_DIR);
        if !default.is_dir() {
            eprintln!(
                "sharecheck: no TRACE given and ./{} does not exist; \
                 name the trace files or directories to read (sharecheck {command} TRACE...)",
                sharecheck_core::schema::DEFAULT_TRACE_DIR
            );
            return None;
        }
        let runs = crate::runs::run_dirs(&default);
        match runs.last() {
            Some(newest) if !all => {
                // Which run is read, when none was named.
                let what = crate::runs::describe(newest)
                    .map(|d| format!(": {}", one_line(&d)))
                    .unwrap_or_default();
                eprintln!(
                    "sharecheck: reading {}{what} (the newest of {} run{} in ./{}; name another, \
                     or --all for every one)",
                    newest.display(),
                    runs.len(),
                    if runs.len() == 1 { "" } else { "s" },
                    sharecheck_core::schema::DEFAULT_TRACE_DIR
                );
                traces.push(newest.clone());
            }
            Some(_) => {
                // Every run that wrote a trace (and loose traces of older versions).
                let has_traces =
                    |d: &PathBuf| crate::trace::jsonl_files_in(d).is_ok_and(|f| !f.is_empty());
                if has_traces(&default) {
                    traces.push(default.clone());
                }
                traces.extend(runs.into_iter().filter(has_traces));
                if traces.is_empty() {
                    traces.push(default);
                }
            }
            None => traces.push(default),
        }
    }
    Some(traces)
}

/// `sharecheck cat`: every file's records as JSON Lines (see `trace::cat_file`).
pub fn cat(traces: Vec<PathBuf>) -> i32 {
    let Some(traces) = traces_or_default(traces, "cat", false) else {
        return EXIT_USAGE;
    };
    let inputs = trace::collect_inputs(&traces);
    let mut diagnostics = inputs.diagnostics;
    let mut status = if inputs.unreadable { EXIT_USAGE } else { 0 };
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for path in &inputs.files {
        if let Err(e) = trace::cat_file(path, &mut stdout, &mut diagnostics) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return status;
            }
            eprintln!(
                "sharecheck: cannot read or print {}: {}",
                path.display(),
                trace::io_reason(&e)
            );
            status = EXIT_USAGE;
        }
    }
    if let Err(e) = stdout.flush() {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("sharecheck: cannot print: {}", trace::io_reason(&e));
            status = EXIT_USAGE;
        }
    }
    print_diagnostics(&diagnostics);
    status
}

/// The longest a problem's line is printed (a bad line's text, a schema version, are the
/// trace's): the rest is counted.
const MAX_DIAGNOSTIC_CHARS: usize = 400;

/// `text` cut after `max` characters, saying how many more there were.
fn capped(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => text.into(),
        Some((at, _)) => format!(
            "{}... ({} more characters)",
            &text[..at],
            text[at..].chars().count()
        )
        .into(),
    }
}

/// How many problems with the input are printed; the rest are counted.
const MAX_DIAGNOSTICS: usize = Diagnostics::KEPT;

/// Problems with the input on stderr: the first [`MAX_DIAGNOSTICS`], printable (a bad line's
/// text is the program's), then how many more there were.
pub(crate) fn print_diagnostics(diagnostics: &Diagnostics) {
    if diagnostics.is_empty() {
        return;
    }
    for d in diagnostics.iter().take(MAX_DIAGNOSTICS) {
        eprintln!(
            "{}",
            capped(&one_line(&d.to_string()), MAX_DIAGNOSTIC_CHARS)
        );
    }
    if diagnostics.len() > MAX_DIAGNOSTICS as u64 {
        eprintln!(
            "sharecheck: and {} more problems with the input (the first {MAX_DIAGNOSTICS} are shown)",
            diagnostics.len() - MAX_DIAGNOSTICS as u64
        );
    }
}

pub fn run(args: ReportArgs) -> i32 {
    let Some(traces) = traces_or_default(args.traces, "report", args.all) else {
        return EXIT_USAGE;
    };
    let suppressions = match review::read_suppressions(&args.suppressions) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sharecheck: {e}");
            return EXIT_USAGE;
        }
    };
    let gather = |keep_all| Gather {
        filter: args.filter.clone(),
        suppressions: suppressions.clone(),
        limit: args.limit,
        keep_all,
        jobs: args.jobs,
        memory_calls: args.memory_calls,
    };
    let keep_all = !args.gen_suppressions && matches!(args.format, Format::Json | Format::Sarif);
    let inputs = trace::collect_inputs(&traces);
    // Rings left by processes that ended without their exit handlers (4 MB each): folded into
    // their traces, where this machine ran them.
    trace::compact_all(&inputs.files, trace::Folder::Report);
    let mut diagnostics = inputs.diagnostics;
    if let Some(out) = &args.partial {
        return partial(&inputs.files, inputs.unreadable, diagnostics, out, &traces);
    }
    if args.format == Format::Perfetto && !args.gen_suppressions {
        return timeline(
            &inputs.files,
            inputs.unreadable,
            diagnostics,
            &gather(false),
            &traces,
        );
    }
    let summary = summarize(&inputs.files, &mut diagnostics, gather(keep_all));
    print_diagnostics(&diagnostics);
    if let Some(e) = summary.timeline.store_error() {
        eprintln!("sharecheck: the cross-process checks {e}");
    }
    if summary.records == 0 {
        eprintln!(
            "sharecheck: no trace record could be read from {}; nothing to report",
            describe_inputs(&traces)
        );
        return EXIT_USAGE;
    }
    // A `--rule` ID that neither this catalogue nor the traces know is a typo, not a filter that
    // found nothing: a usage error with the IDs that contain it (as `explain` says).
    let unknown: Vec<&String> = args
        .filter
        .rules
        .iter()
        .filter(|id| {
            sharecheck_core::rules::by_id(id).is_none()
                && !summary.findings.seen_rules.contains(*id)
        })
        .collect();
    if !unknown.is_empty() {
        for id in unknown {
            eprintln!("sharecheck: --rule: {}", crate::rules::unknown_rule(id));
        }
        return EXIT_USAGE;
    }
    if let Some(e) = &summary.findings.spool_error {
        eprintln!("sharecheck: {e}; the findings cannot be listed");
        return EXIT_USAGE;
    }
    if args.gen_suppressions {
        let text = review::generate(&summary.findings.suppression_lines);
        let _ = std::io::stdout().write_all(text.as_bytes());
        return 0;
    }
    // The baseline: the same filters and suppressions over an earlier run's traces.
    let mut comparison = None;
    if let Some(old) = &args.baseline {
        let inputs = trace::collect_inputs(std::slice::from_ref(old));
        let mut old_diagnostics = inputs.diagnostics;
        let before = summarize(&inputs.files, &mut old_diagnostics, gather(false));
        print_diagnostics(&old_diagnostics);
        if inputs.unreadable || before.records == 0 {
            eprintln!(
                "sharecheck: no trace record could be read from the baseline {}",
                old.display()
            );
            return EXIT_USAGE;
        }
        comparison = Some(review::compare(
            &before.findings.keys,
            &summary.findings.keys,
        ));
    }
    let worst = summary.findings.worst();
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let old = args.baseline.as_deref();
    let written = match args.format {
        Format::Json => {
            let baseline = comparison
                .as_ref()
                .map(|(new, gone)| baseline_json(old, new, gone));
            render_json_to(&summary, baseline, &mut out)
        }
        Format::Text => {
            let mut text = render_text(&summary);
            if let Some((new, gone)) = &comparison {
                text.push_str(&baseline_text(old, new, gone));
            }
            out.write_all(text.as_bytes())
        }
        // SARIF's log has no place for a baseline: the exit status still says whether anything
        // is new.
        Format::Sarif => crate::sarif::render_to(&summary, &mut out),
        // Written by `timeline` above.
        Format::Perfetto => Ok(()),
    }
    .and_then(|()| out.flush());
    crate::progress::phase_done("write the report");
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!(
                "sharecheck: cannot write the report: {}",
                trace::io_reason(&e)
            );
            return EXIT_USAGE;
        }
    }
    if inputs.unreadable || summary.unreadable {
        return EXIT_USAGE;
    }
    if comparison.as_ref().is_some_and(|(new, _)| !new.is_empty()) {
        return 1;
    }
    match args.fail_on {
        Some(threshold) if worst.is_some_and(|w| w >= threshold) => 1,
        _ => 0,
    }
}

/// `report --format perfetto`: the timeline on stdout.
fn timeline(
    files: &[PathBuf],
    unreadable: bool,
    mut diagnostics: Diagnostics,
    gather: &Gather,
    traces: &[PathBuf],
) -> i32 {
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
    let written = crate::timeline::render_to(files, &mut diagnostics, gather, &mut out)
        .and_then(|events| out.flush().map(|()| events));
    print_diagnostics(&diagnostics);
    match written {
        Ok(0) => {
            eprintln!(
                "sharecheck: no trace record could be read from {}; nothing to report",
                describe_inputs(traces)
            );
            EXIT_USAGE
        }
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!(
                "sharecheck: cannot write the report: {}",
                trace::io_reason(&e)
            );
            EXIT_USAGE
        }
        _ if unreadable => EXIT_USAGE,
        _ => 0,
    }
}

/// The comparison with a baseline in JSON: `{"of":OLD,"new":[...],"gone":[...]}`.
fn baseline_json(
    old: Option<&std::path::Path>,
    new: &[(String, usize)],
    gone: &[(String, usize)],
) -> Value {
    let old = old.map_or(String::new(), |p| p.display().to_string());
    let list = |items: &[(String, usize)]| -> Vec<Value> {
        items
            .iter()
            .map(|(k, n)| serde_json::json!({"finding": k, "count": n}))
            .collect()
    };
    serde_json::json!({"of": old, "new": list(new), "gone": list(gone)})
}

/// The comparison with a baseline, appended to the text report.
fn baseline_text(
    old: Option<&std::path::Path>,
    new: &[(String, usize)],
    gone: &[(String, usize)],
) -> String {
    let old = old.map_or(String::new(), |p| p.display().to_string());
    let mut text = format!(
        "\nBASELINE {}: {} new, {} gone\n",
        old,
        plural(new.len() as u64, "finding", "findings"),
        gone.len()
    );
    for (k, n) in new {
        let _ = writeln!(text, "    new:  {k} (x{n})");
    }
    for (k, n) in gone {
        let _ = writeln!(text, "    gone: {k} (x{n})");
    }
    printable(&text)
}

fn describe_inputs(traces: &[PathBuf]) -> String {
    let names: Vec<String> = traces.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

/// One finding of the JSON report: the finding's own members first (the schema's in schema
/// order, then any others), then the record's `fn`, `pid`, `tid`, `seq`, and `event` for event
/// records.
#[derive(serde::Serialize)]
struct FindingJson<'a> {
    #[serde(flatten)]
    members: Members<'a>,
    #[serde(rename = "fn")]
    func: Option<&'a str>,
    pid: &'a Value,
    tid: &'a Value,
    seq: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a str>,
}

/// A finding's members in schema order, without the record's own.
struct Members<'a>(&'a Map<String, Value>);

impl serde::Serialize for Members<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        const CONTEXT: [&str; 5] = ["fn", "pid", "tid", "seq", "event"];
        const FIRST: [&str; 6] = ["rule", "severity", "kind", "message", "doc", "fix"];
        let mut map = s.serialize_map(None)?;
        for key in FIRST {
            if let Some(v) = self.0.get(key) {
                map.serialize_entry(key, v)?;
            }
        }
        for (key, v) in self.0 {
            if !FIRST.contains(&key.as_str()) && !CONTEXT.contains(&key.as_str()) {
                map.serialize_entry(key, v)?;
            }
        }
        map.end()
    }
}

impl<'a> FindingJson<'a> {
    fn of(o: &'a Occurrence) -> Self {
        FindingJson {
            members: Members(&o.finding),
            func: o.func.as_deref(),
            pid: &o.pid,
            tid: &o.tid,
            seq: &o.seq,
            event: o.event.as_deref(),
        }
    }
}

/// The JSON report, streamed: the totals, every finding by process, time and `seq` (report-phase
/// findings at the time of the call they rest on), each IPC handle's exchange, and the
/// baseline's comparison when there is one.
pub fn render_json_to(
    s: &Summary,
    baseline: Option<Value>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    write!(
        out,
        "{{\"calls\":{},\"processes\":{},\"suppressed\":{},\"findings\":[",
        s.calls,
        s.process_count(),
        s.findings.suppressed
    )?;
    for (i, o) in s.findings.all().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        crate::safe_json::to_writer(&mut *out, &FindingJson::of(&o))?;
    }
    out.write_all(b"]")?;
    // Each exported memory handle's exchange across processes (only when there is one): every
    // step, held on disk until its handle is written (issue 27).
    let mut chains = crate::steps::Chains::new();
    let mut names: Vec<crossproc::Fp> = Vec::new();
    let mut failed = Ok(());
    let mut step = Vec::new();
    s.timeline.handle_steps(|view, handle, c| {
        if view == names.len() {
            names.push(*handle);
        }
        step.clear();
        let json = serde_json::json!({"pid": c.pid, "fn": c.func.as_str(), "ts_ns": c.ts_ns,
            "ptr": step_pointer(c), "r": c.ret});
        if failed.is_ok() {
            failed = crate::safe_json::to_writer(&mut step, &json)
                .map_err(std::io::Error::from)
                .and_then(|()| chains.push(view, &step));
        }
    });
    failed?;
    for (view, handle) in names.iter().enumerate() {
        out.write_all(if view == 0 { b",\"ipc\":[" } else { b"," })?;
        out.write_all(b"{\"handle\":")?;
        crate::safe_json::to_writer(&mut *out, &handle.to_string())?;
        out.write_all(b",\"steps\":[")?;
        let mut first = true;
        chains.each(view, |step| {
            if !std::mem::take(&mut first) {
                out.write_all(b",")?;
            }
            out.write_all(step)
        })?;
        out.write_all(b"]}")?;
    }
    if !names.is_empty() {
        out.write_all(b"]")?;
    }
    let posix: usize = posix_imports(s).values().sum();
    if posix > 0 {
        write!(out, ",\"vmm_posix_imports_not_matched\":{posix}")?;
    }
    if let Some(baseline) = baseline {
        out.write_all(b",\"baseline\":")?;
        crate::safe_json::to_writer(&mut *out, &baseline)?;
    }
    out.write_all(b"}\n")
}

#[cfg(test)]
pub fn render_json(s: &Summary) -> String {
    let mut out = Vec::new();
    render_json_to(s, None, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The pointer (or event) a step of an IPC exchange names: exported, returned by an open,
/// closed, freed or destroyed.
fn step_pointer(c: &crossproc::Call) -> Value {
    ["pdptr", "devPtr", "phEvent", "event"]
        .iter()
        .find_map(|k| c.out(k))
        .or_else(|| {
            ["dptr", "devPtr", "ptr", "event", "hEvent"]
                .iter()
                .find_map(|k| c.arg(k))
        })
        .cloned()
        .unwrap_or(Value::Null)
}

/// The VMM handles imported from POSIX fds, by process: never matched to the export they came
/// from. A POSIX fd names no allocation outside its process (on R580 every exported fd is
/// `/dev/nvidiactl`, one inode), so the report says so instead of guessing (issue 25).
fn posix_imports(s: &Summary) -> std::collections::BTreeMap<i64, usize> {
    let mut by_process = std::collections::BTreeMap::new();
    for c in s.timeline.walk() {
        let posix = c.arg("shHandleType").is_some_and(|t| {
            t.as_str()
                .is_some_and(|t| t.contains("POSIX_FILE_DESCRIPTOR"))
                || t.as_i64() == Some(1)
        });
        if c.func == "cuMemImportFromShareableHandle" && c.succeeded() && posix {
            *by_process.entry(c.pid).or_insert(0) += 1;
        }
    }
    by_process
}

/// The VMM IMPORTS section ([`posix_imports`]).
fn render_posix_imports_text(s: &Summary, out: &mut String) {
    let by_process = posix_imports(s);
    let total: usize = by_process.values().sum();
    if total == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "\nVMM IMPORTS\n    {} from POSIX fds (cuMemImportFromShareableHandle) in {}: not \
         matched to their exports. A POSIX fd names no allocation outside its process (on R580 \
         every exported fd is /dev/nvidiactl, one inode), so no export is guessed.",
        plural(total as u64, "handle imported", "handles imported"),
        plural(by_process.len() as u64, "process", "processes")
    );
}

/// The IPC HANDLES section: each exported memory or event handle's exchange, in time order.
/// The first and the last steps of each IPC handle shown in text (this many of each).
const HANDLE_STEPS_SHOWN: usize = 10;

/// A handle's view as text shows it: its first and last steps, and how many there were.
struct Shown {
    handle: String,
    /// Its first step's time.
    start: u64,
    steps: usize,
    /// The lines of its first steps, and its last steps (made lines when shown: most steps of
    /// a long history pass through here).
    first: Vec<String>,
    last: std::collections::VecDeque<crossproc::Call>,
}

/// A step of a handle's view as text shows it, `start` the time of the view's first step.
fn step_line(c: &crossproc::Call, start: u64) -> String {
    let ptr = step_pointer(c);
    let ptr = ptr.as_str().map_or_else(|| ptr.to_string(), str::to_string);
    let ret = c.ret.map_or_else(|| "?".to_string(), |r| r.to_string());
    format!(
        "        {:>+14.3} us  pid {:<8} {} {ptr} -> {ret}",
        (c.ts_ns - start) as f64 / 1e3,
        c.pid,
        c.func
    )
}

fn render_handles_text(s: &Summary, out: &mut String) {
    // A handle used for hours has millions of steps: its first and last ones are shown (and
    // kept, as their lines), every one is in JSON (issue 27). A job that shares a new buffer
    // each step has a handle for each: the first `--limit` handles are shown, as the first
    // occurrences of a rule are, and only theirs are kept.
    let limit = match s.findings.gather().limit {
        0 => usize::MAX,
        n => n,
    };
    let mut shown: Vec<Shown> = Vec::new();
    let mut handles = 0;
    s.timeline.handle_steps(|view, handle, c| {
        handles = handles.max(view + 1);
        if view >= limit {
            return;
        }
        if view == shown.len() {
            shown.push(Shown {
                handle: handle.to_string(),
                start: c.ts_ns,
                steps: 0,
                first: Vec::new(),
                last: Default::default(),
            });
        }
        let v = &mut shown[view];
        v.steps += 1;
        if v.first.len() < HANDLE_STEPS_SHOWN {
            v.first.push(step_line(c, v.start));
        } else {
            if v.last.len() == HANDLE_STEPS_SHOWN {
                v.last.pop_front();
            }
            v.last.push_back(c.clone());
        }
    });
    if handles == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "\nIPC HANDLES ({}: export, opens, closes, frees and destroys, in time order)",
        plural(handles as u64, "handle", "handles")
    );
    for v in &shown {
        let _ = writeln!(out, "    {}", v.handle);
        let hidden = v.steps - v.first.len() - v.last.len();
        let last = v.last.iter().map(|c| step_line(c, v.start));
        for (k, line) in v.first.iter().cloned().chain(last).enumerate() {
            if hidden > 0 && k == HANDLE_STEPS_SHOWN {
                let _ = writeln!(
                    out,
                    "        ... {} (every step: --format json)",
                    plural(hidden as u64, "more step", "more steps")
                );
            }
            let _ = writeln!(out, "{line}");
        }
    }
    if handles > shown.len() {
        let _ = writeln!(
            out,
            "    ... and {} (--limit {handles} shows them; 0: all; every step: --format json)",
            plural(
                (handles - shown.len()) as u64,
                "more handle",
                "more handles"
            )
        );
    }
}

/// `1 process`, `2 processes`.
pub fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Indents the continuation lines of a multi-line text.
fn indented(text: &str, indent: &str) -> String {
    text.lines()
        .collect::<Vec<_>>()
        .join(&format!("\n{indent}"))
}

/// Text from traces made printable: every control character but the line breaks the report
/// itself writes (C0, DEL, C1: ESC, OSC and CSI sequences among them) and every bidirectional
/// formatting character becomes a visible `\x..` / `\u{..}` escape, so a program under test
/// (which names itself and more) cannot drive the reviewer's terminal.
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c == '\n' || !(c.is_control() || bidi) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    out
}

/// A field that must stay on its line (an executable's path, a function's name): its line
/// breaks escaped too.
fn one_line(text: &str) -> String {
    printable(text).replace('\n', "\\n")
}

/// The widest a name column is padded to: longer names run past it.
const MAX_NAME_WIDTH: usize = 64;

const MAX_PROCESSES: usize = 20;

/// The text report: findings by rule with the occurrences the gathering kept (`--limit`),
/// processes, calls by function, IPC handles, totals.
pub fn render_text(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sharecheck report: {} in {} ({})",
        plural(s.calls, "call", "calls"),
        plural(s.process_count() as u64, "process", "processes"),
        plural(s.files as u64, "trace file", "trace files"),
    );
    render_findings_text(s, &mut out);
    render_processes_text(s, &mut out);
    render_functions_text(s, &mut out);
    render_handles_text(s, &mut out);
    render_posix_imports_text(s, &mut out);
    let _ = write!(
        out,
        "\nSUMMARY: {}, {}, {}",
        plural(s.count(Severity::Error) as u64, "error", "errors"),
        plural(s.count(Severity::Warning) as u64, "warning", "warnings"),
        plural(s.count(Severity::Info) as u64, "info", "infos")
    );
    if s.findings.suppressed > 0 {
        let _ = write!(out, " ({} suppressed)", s.findings.suppressed);
    }
    out.push('\n');
    printable(&out)
}

/// FINDINGS BY RULE: worst severity first, then the most frequent; per rule its occurrences
/// shown (with their stacks, file:line where known), its functions, doc and fix.
fn render_findings_text(s: &Summary, out: &mut String) {
    let groups = s.findings.groups_in_order();
    out.push('\n');
    if groups.is_empty() {
        out.push_str("FINDINGS: none\n");
    } else {
        let _ = writeln!(
            out,
            "FINDINGS BY RULE ({}, {})",
            plural(groups.len() as u64, "rule", "rules"),
            plural(s.findings.len() as u64, "finding", "findings")
        );
    }
    let shown: Vec<(&str, &crate::findings::Group, Vec<&Occurrence>)> =
        groups.into_iter().map(|(r, g)| (r, g, g.shown())).collect();
    let symbols = &s.symbols;
    for (rule, group, occ) in &shown {
        let severity = group.first_field("severity").unwrap_or("?");
        let kind = group.first_field("kind").unwrap_or("?");
        let _ = writeln!(out, "\n{severity}: {rule} [{kind}] x{}", group.count);
        for o in occ {
            let func = o.func.as_deref().or(o.event.as_deref()).unwrap_or("?");
            let _ = writeln!(out, "  - {} {}", o.location(), one_line(func));
            if let Some(message) = o.str_field("message") {
                let _ = writeln!(out, "      {}", indented(message, "      "));
            }
            if let Some(args) = o
                .args
                .as_ref()
                .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
            {
                let _ = writeln!(out, "      args: {args}");
            }
            for (i, (module, offset, symbol)) in o.stack().iter().enumerate() {
                let _ = write!(out, "      #{i} {module}+{offset:#x}");
                let functions = symbols.functions(module, *offset);
                match (functions.first(), symbol) {
                    (Some(f), _) => {
                        let _ = write!(out, " {}", f.text());
                    }
                    (None, Some(symbol)) => {
                        let _ = write!(out, " ({symbol})");
                    }
                    (None, None) => {}
                }
                out.push('\n');
                for outer in functions.iter().skip(1) {
                    let _ = writeln!(out, "         (inlined into {})", outer.text());
                }
            }
        }
        if group.count > occ.len() {
            let _ = writeln!(
                out,
                "  ... and {} more (--limit {} shows them; 0: all)",
                group.count - occ.len(),
                group.count
            );
        }
        let fns = group
            .fns
            .iter()
            .map(|(name, n)| {
                if *n == group.count {
                    name.clone()
                } else {
                    format!("{name} ({n})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(out, "    fn:    {fns}");
        if let Some(doc) = group.first_field("doc").filter(|d| !d.is_empty()) {
            let _ = writeln!(out, "    doc:   {}", indented(doc, "           "));
        }
        if let Some(url) = group.first_field("doc_url").filter(|d| !d.is_empty()) {
            let _ = writeln!(out, "           {}", one_line(url));
        }
        if let Some(fix) = group.first_field("fix").filter(|f| !f.is_empty()) {
            let _ = writeln!(out, "    fix:   {}", indented(fix, "           "));
        }
    }
}

/// `report --partial DIR`: the partial result of the traces, for a report of many hosts'
/// ([`crate::partial`]). Exit status 0, or 2 when a trace could not be read whole (the merged
/// report would lack it) or nothing was.
fn partial(
    files: &[PathBuf],
    unreadable: bool,
    mut diagnostics: Diagnostics,
    out: &std::path::Path,
    traces: &[PathBuf],
) -> i32 {
    let written = crate::partial::write(files, out, &mut diagnostics);
    print_diagnostics(&diagnostics);
    match written {
        Err(e) => {
            eprintln!("sharecheck: {e}; no partial result written");
            EXIT_USAGE
        }
        Ok(w) if w.records_read == 0 => {
            eprintln!(
                "sharecheck: no trace record could be read from {}; no partial result written",
                describe_inputs(traces)
            );
            EXIT_USAGE
        }
        Ok(w) => {
            eprintln!(
                "sharecheck: partial result of {} in {}: {} of {} records kept whole, the rest \
                 counted",
                plural(w.files as u64, "trace file", "trace files"),
                out.display(),
                w.records_kept,
                w.records_read
            );
            if unreadable || diagnostics.iter().any(|d| d.level == trace::Level::Error) {
                EXIT_USAGE
            } else {
                0
            }
        }
    }
}

/// PROCESSES: which program each pid was, and whether it exited normally.
fn render_processes_text(s: &Summary, out: &mut String) {
    if !s.processes.is_empty() {
        out.push_str("\nPROCESSES\n");
        let _ = writeln!(
            out,
            "    {:>8} {:>8} {:>8} {:>7} {:>9}  exe",
            "pid", "ppid", "calls", "errors", "warnings"
        );
        for (pid, machine, p) in s.processes.iter().take(MAX_PROCESSES) {
            let ppid = p.ppid.map_or("?".to_string(), |v| v.to_string());
            let exe = one_line(p.exe.as_deref().unwrap_or("?"));
            let mut note = p.notes();
            if let Some(domain) = &p.imex_domain {
                note = format!("  (IMEX domain {}){note}", one_line(domain));
            }
            if let Some(machine) = machine {
                // Another machine's process has this pid too.
                note = format!("  (machine {}){note}", one_line(machine));
            }
            let _ = writeln!(
                out,
                "    {pid:>8} {ppid:>8} {:>8} {:>7} {:>9}  {exe}{note}",
                p.calls, p.errors, p.warnings
            );
        }
        if s.processes.len() > MAX_PROCESSES {
            let _ = writeln!(
                out,
                "    ... and {} more",
                s.processes.len() - MAX_PROCESSES
            );
        }
    }
}

/// CALLS BY FUNCTION: the most called first, with failures and the most frequent one.
fn render_functions_text(s: &Summary, out: &mut String) {
    out.push('\n');
    if s.functions.is_empty() {
        out.push_str("CALLS BY FUNCTION: none\n");
    } else {
        out.push_str("CALLS BY FUNCTION\n");
        let mut fns: Vec<(&String, &FnStats)> = s.functions.iter().collect();
        fns.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then(a.0.cmp(b.0)));
        let width = fns
            .iter()
            .map(|(n, _)| n.len())
            .max()
            .unwrap_or(0)
            .clamp(8, MAX_NAME_WIDTH);
        let _ = writeln!(
            out,
            "    {:<width$} {:>8} {:>9}  most frequent failure",
            "function", "calls", "failures"
        );
        for (name, st) in fns {
            let name = one_line(name);
            let top = st
                .failure_names
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(n, c)| format!("{n} ({c})"))
                .unwrap_or_else(|| "-".to_string());
            let _ = writeln!(
                out,
                "    {name:<width$} {:>8} {:>9}  {top}",
                st.calls, st.failures
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::summarize_with;
    use sharecheck_core::crossproc::ipc::FREED_WHILE_OPEN;
    use sharecheck_core::crossproc::ReportCheck;

    /// Every finding kept, ten of each rule for the text.
    fn all() -> Gather {
        Gather {
            limit: crate::args::DEFAULT_LIMIT,
            keep_all: true,
            ..Gather::default()
        }
    }

    /// Two processes' traces, as the shim writes them: the exporter (10) frees at `free_at`, the
    /// importer (20) closes at 300.
    fn traces(dir: &std::path::Path, free_at: u64) -> Vec<PathBuf> {
        let fp = "fp:00112233aabbccdd";
        let exporter = format!(
            concat!(
                r#"{{"v":2,"seq":0,"t":1,"tid":10,"event":"process","pid":10,"ppid":1,"exe":"/x","shim_version":"0","t0_wall_ns":0,"t0_mono_ns":7}}"#,
                "\n",
                r#"{{"seq":1,"t":100,"tid":10,"fn":"cuIpcGetMemHandle","a":{{"*pHandle":"{fp}","dptr":"0x7000000"}},"r":0}}"#,
                "\n",
                r#"{{"seq":2,"t":{free_at},"tid":10,"fn":"cuMemFree_v2","a":{{"dptr":"0x7000000"}},"r":0}}"#,
                "\n"
            ),
            fp = fp,
            free_at = free_at
        );
        let importer = format!(
            concat!(
                r#"{{"v":2,"seq":0,"t":1,"tid":20,"event":"process","pid":20,"ppid":1,"exe":"/x","shim_version":"0","t0_wall_ns":0,"t0_mono_ns":7}}"#,
                "\n",
                r#"{{"seq":1,"t":200,"tid":20,"fn":"cuIpcOpenMemHandle_v2","a":{{"*pdptr":"0x9000000","handle":"{fp}","Flags":"CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"}},"r":0}}"#,
                "\n",
                r#"{{"seq":2,"t":300,"tid":20,"fn":"cuIpcCloseMemHandle","a":{{"dptr":"0x9000000"}},"r":0}}"#,
                "\n"
            ),
            fp = fp
        );
        std::fs::create_dir_all(dir).unwrap();
        let files = vec![dir.join("10.jsonl"), dir.join("20.jsonl")];
        std::fs::write(&files[0], exporter).unwrap();
        std::fs::write(&files[1], importer).unwrap();
        files
    }

    /// A trace written by a hostile program: a name full of terminal escapes, a function name of
    /// 65,536 characters. The report neither panics nor prints a control character raw.
    #[test]
    fn text_from_traces_cannot_drive_the_terminal_or_break_the_report() {
        let dir = std::env::temp_dir().join(format!("sharecheck-hostile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let long = "f".repeat(65_536);
        let trace = format!(
            concat!(
                r#"{{"v":2,"seq":0,"t":1,"tid":10,"event":"process","pid":10,"ppid":1,"exe":"/x\u001b]0;X\u0007\u001b[2J\n\u009b\u202e","shim_version":"0","t0_wall_ns":0,"t0_mono_ns":7}}"#,
                "\n",
                r#"{{"seq":1,"t":100,"tid":10,"fn":"{long}","a":{{}},"r":1}}"#,
                "\n",
                r#"{{"seq":2,"t":101,"tid":10,"fn":"cu\u001b[31m","a":{{}},"r":0,"findings":[{{"rule":"x\u001b[2J","severity":"info","message":"m\u0007"}}]}}"#,
                "\n"
            ),
            long = long
        );
        let file = dir.join("10.jsonl");
        std::fs::write(&file, trace).unwrap();
        let mut diagnostics = Diagnostics::default();
        let s = summarize_with(&[file], &mut diagnostics, &[], all());
        let text = render_text(&s);
        assert!(
            !text
                .chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "a control character raw: {:?}",
            text.chars().filter(|c| c.is_control()).collect::<Vec<_>>()
        );
        assert!(
            text.contains("/x\\x1b]0;X\\x07\\x1b[2J\\n\\x9b\\u{202e}"),
            "{text}"
        );
        assert!(text.contains(&long), "the long name is there, whole");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn report_phase_findings_are_reported_like_any_other_on_the_call_they_rest_on() {
        let dir =
            std::env::temp_dir().join(format!("sharecheck-report-phase-{}", std::process::id()));
        let checks: [&dyn ReportCheck; 1] = [&FREED_WHILE_OPEN];
        let mut diagnostics = Diagnostics::default();
        let correct = summarize_with(&traces(&dir, 400), &mut diagnostics, &checks, all());
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(correct.findings.len(), 0);
        let early = summarize_with(&traces(&dir, 250), &mut diagnostics, &checks, all());
        assert_eq!(early.findings.len(), 1);
        let found: Vec<Occurrence> = early.findings.all().collect();
        let o = &found[0];
        assert_eq!((o.pid.as_i64(), o.seq.as_u64()), (Some(10), Some(2)));
        assert_eq!(o.func.as_deref(), Some("cuMemFree_v2"));
        assert_eq!(o.finding["phase"], "report");
        assert_eq!(
            early
                .processes
                .iter()
                .find(|(pid, _, _)| *pid == 10)
                .map(|(_, _, p)| p.warnings),
            Some(1),
            "counted for the exporter"
        );
        let json: Value = serde_json::from_str(&render_json(&early)).unwrap();
        let id = "cuMemFree.ipc-memory-open-elsewhere";
        assert_eq!(json["findings"][0]["rule"], id);
        assert!(render_text(&early).contains(id));
        // Each exported handle's exchange, in time order, in both formats.
        let view: Value = serde_json::from_str(&render_json(&early)).unwrap();
        let steps: Vec<(i64, &str, &str)> = view["ipc"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["pid"].as_i64().unwrap(),
                    s["fn"].as_str().unwrap(),
                    s["ptr"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            steps,
            [
                (10, "cuIpcGetMemHandle", "0x7000000"),
                (20, "cuIpcOpenMemHandle_v2", "0x9000000"),
                (10, "cuMemFree_v2", "0x7000000"),
                (20, "cuIpcCloseMemHandle", "0x9000000"),
            ]
        );
        assert_eq!(view["ipc"][0]["handle"], "fp:00112233aabbccdd");
        let text = render_text(&early);
        let section = &text[text.find("IPC HANDLES (1 handle").expect("the section")..];
        let order: Vec<usize> = [
            "cuIpcGetMemHandle",
            "cuIpcOpenMemHandle_v2",
            "cuMemFree_v2",
            "cuIpcCloseMemHandle",
        ]
        .iter()
        .map(|f| section.find(f).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{section}");
        assert!(
            section.contains("+0.150 us  pid 10       cuMemFree_v2 0x7000000 -> 0"),
            "{section}"
        );
        // Production registers the check: the same traces give the same finding.
        let production = summarize(&traces(&dir, 250), &mut diagnostics, all());
        assert_eq!(production.findings.len(), 1);
        assert_eq!(
            production.findings.all().next().unwrap().finding["rule"],
            id
        );
        assert_eq!(
            summarize(&traces(&dir, 400), &mut diagnostics, all())
                .findings
                .len(),
            0
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
