//! What `sharecheck report` (and `sharecheck run`'s one-line summary) builds from the records of
//! every trace file: processes, calls by function, findings as they stream by, and the calls the
//! report-phase checks read across processes.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::args::Severity;
use crate::findings::{Findings, Gather};
use crate::occurrence::Occurrence;
use crate::trace::{self, Diagnostics, Record};
use sharecheck_core::crossproc::{self, ReportCheck, ReportFinding, Timeline};

#[derive(Debug, Default)]
pub struct FnStats {
    pub calls: u64,
    /// Calls with `ret != 0`.
    pub failures: u64,
    /// Failure counts by `ret_name` (or the number when the name is null).
    pub failure_names: HashMap<String, u64>,
}

#[derive(Debug, Default)]
pub struct ProcessInfo {
    pub exe: Option<String>,
    pub ppid: Option<i64>,
    /// The IMEX domain its process record names (FABRIC handles are shared within one only).
    pub imex_domain: Option<String>,
    /// Call records read.
    pub calls: u64,
    pub errors: u64,
    pub warnings: u64,
    /// Findings of every severity in its records.
    pub findings: u64,
    pub exited: bool,
    /// From its `exit` record: the calls it made and the findings it reported (recorded or not).
    pub calls_made: Option<u64>,
    pub findings_reported: Option<u64>,
    /// From its `exit` record: calls still being recorded when it exited (their records may
    /// have followed, or be lost).
    pub calls_unfinished: u64,
    /// From its `exit` record: calls made in signal handlers recorded without their checks.
    pub calls_unchecked: u64,
    /// Its trace records only calls with findings (`trace_level=findings`).
    pub findings_level: bool,
    /// Its trace reached `trace_limit`.
    pub cut: bool,
    /// Tracing stopped before it exited (its exit record says so, made by the reader).
    pub stopped: bool,
    /// Whether its process record and its exit record were read (what [`ProcessInfo::absorb`]
    /// takes from a later file of the same process).
    saw_process: bool,
    saw_exit: bool,
}

impl ProcessInfo {
    /// Takes in what a later file of the same process (another lane) said, as if read after
    /// this one's records: counts add up, its process and exit records' fields replace these.
    fn absorb(&mut self, other: ProcessInfo) {
        if other.saw_process {
            self.exe = other.exe;
            self.ppid = other.ppid;
            self.imex_domain = other.imex_domain;
            self.findings_level = other.findings_level;
            self.saw_process = true;
        }
        if other.saw_exit {
            self.exited = true;
            self.stopped = other.stopped;
            self.calls_made = other.calls_made;
            self.findings_reported = other.findings_reported;
            self.calls_unfinished = other.calls_unfinished;
            self.calls_unchecked = other.calls_unchecked;
            self.saw_exit = true;
        }
        self.calls += other.calls;
        self.errors += other.errors;
        self.warnings += other.warnings;
        self.findings += other.findings;
        self.cut |= other.cut;
    }

    /// What the row says besides its numbers: how the process ended and what its trace lacks.
    pub fn notes(&self) -> String {
        let mut notes = Vec::new();
        if !self.exited {
            notes.push("no exit record: it crashed, was killed or is still running".to_string());
        }
        if self.stopped {
            notes.push(
                "exited normally; tracing had stopped (the file size limit, a full disk or a \
                 stuck append): its later calls are not in the trace"
                    .to_string(),
            );
        }
        if let (Some(made), true) = (self.calls_made, self.calls_unfinished > 0) {
            let missing = made.saturating_sub(self.calls);
            if !self.findings_level && missing > 0 {
                notes.push(format!(
                    "{missing} of its calls were still being recorded when it exited and are \
                     not in the trace"
                ));
            }
        }
        if let Some(made) = self.calls_made {
            // Every call the process numbered is in its trace unless it was still being recorded
            // (above), or the trace records only some (trace_level=findings, a trace_limit cut,
            // tracing stopped): past that, the writer lost records, which it must never do.
            let missing = made.saturating_sub(self.calls);
            let expected_whole =
                self.calls_unfinished == 0 && !self.findings_level && !self.cut && !self.stopped;
            if expected_whole && missing > 0 {
                notes.push(format!(
                    "{missing} of its {made} calls are not in the trace: numbered and never \
                     written, a defect of sharecheck's writer to report"
                ));
            }
        }
        if self.calls_unchecked > 0 {
            notes.push(format!(
                "{} calls made in signal handlers were recorded without their checks",
                self.calls_unchecked
            ));
        }
        if self.findings_level {
            notes.push(match self.calls_made {
                Some(made) => format!(
                    "trace_level=findings: {} of {made} calls recorded",
                    self.calls
                ),
                None => "trace_level=findings: only some calls recorded".to_string(),
            });
        }
        if self.cut {
            notes.push(match self.findings_reported {
                Some(reported) if reported > self.findings => format!(
                    "trace cut at trace_limit: {} more finding(s) were reported on stderr",
                    reported - self.findings
                ),
                _ => "trace cut at trace_limit".to_string(),
            });
        }
        if notes.is_empty() {
            String::new()
        } else {
            format!("  ({})", notes.join("; "))
        }
    }
}

/// The processes of the traces, by pid and machine (a pid names a process on one machine only:
/// the process record's boot id, else its host; none in older traces), in pid order.
#[derive(Debug, Default)]
pub struct Processes(BTreeMap<i64, Vec<(Option<String>, ProcessInfo)>>);

impl Processes {
    /// Process `pid` of `machine`, added if new.
    pub fn entry(&mut self, pid: i64, machine: Option<&str>) -> &mut ProcessInfo {
        let same = self.0.entry(pid).or_default();
        let at = match same.iter().position(|(m, _)| m.as_deref() == machine) {
            Some(at) => at,
            None => {
                same.push((machine.map(str::to_string), ProcessInfo::default()));
                same.len() - 1
            }
        };
        &mut same[at].1
    }

    /// Process `pid` of `machine`, if known.
    pub fn get_mut(&mut self, pid: i64, machine: Option<&str>) -> Option<&mut ProcessInfo> {
        self.0
            .get_mut(&pid)?
            .iter_mut()
            .find(|(m, _)| m.as_deref() == machine)
            .map(|(_, p)| p)
    }

    /// Every process: its pid, its machine where another process has the same pid (else
    /// `None`), and what its records said.
    pub fn iter(&self) -> impl Iterator<Item = (i64, Option<&str>, &ProcessInfo)> {
        self.0.iter().flat_map(|(&pid, same)| {
            let shared = same.len() > 1;
            same.iter()
                .map(move |(m, p)| (pid, m.as_deref().filter(|_| shared), p))
        })
    }

    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Takes in the processes of files read after these.
    fn absorb(&mut self, other: Processes) {
        for (pid, same) in other.0 {
            for (machine, process) in same {
                let mine = self.entry(pid, machine.as_deref());
                mine.absorb(process);
            }
        }
    }
}

/// Everything `report` prints: what the records of every file told ([`Tally`]), and the names
/// of the findings' frames' functions.
pub struct Summary {
    pub tally: Tally,
    /// For suppressions, baselines and the renderers (not shared between threads: each reading
    /// thread has its own while it reads).
    pub symbols: crate::symbolize::Symbols,
}

impl std::ops::Deref for Summary {
    type Target = Tally;
    fn deref(&self) -> &Tally {
        &self.tally
    }
}

impl std::ops::DerefMut for Summary {
    fn deref_mut(&mut self) -> &mut Tally {
        &mut self.tally
    }
}

/// What the records of some files told: counts, processes, findings and the calls the
/// report-phase checks read. Built by one thread per batch of files and merged in file order
/// ([`Tally::absorb`]): the same as one thread reading them all in order.
#[derive(Default)]
pub struct Tally {
    pub files: usize,
    pub records: u64,
    pub calls: u64,
    pub processes: Processes,
    /// Records without a pid still count as one process between them.
    pub records_without_pid: bool,
    /// Gathered as the records stream by ([`Findings`]).
    pub findings: Findings,
    pub functions: BTreeMap<String, FnStats>,
    /// Some input could not be opened or read.
    pub unreadable: bool,
    /// The calls report-phase checks read, across processes.
    pub timeline: Timeline,
    /// The last function seen, and whether the timeline keeps all its calls.
    last_function: Option<(String, bool)>,
}

impl Tally {
    /// A partial result's summary record: the calls it left out, counted as if read.
    fn add_left_out(&mut self, record: &Record) {
        let counted = crate::partial::counted(record.obj());
        self.records += counted.records;
        self.calls += counted.calls;
        if let Some(process) = record
            .pid()
            .and_then(|pid| self.processes.get_mut(pid, record.machine()))
        {
            process.calls += counted.calls;
        }
        for (name, left) in counted.functions {
            let stats = self.functions.entry(name).or_default();
            stats.calls += left.calls;
            stats.failures += left.failures;
            for (label, n) in left.failure_names {
                *stats.failure_names.entry(label).or_default() += n;
            }
        }
    }

    pub fn process_count(&self) -> usize {
        self.processes.len() + usize::from(self.records_without_pid)
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.findings.count(severity)
    }

    fn add(&mut self, record: &Record, symbols: &crate::symbolize::Symbols) {
        if record.func().is_none() && record.event() == Some(crate::partial::SUMMARY_EVENT) {
            self.add_left_out(record);
            return;
        }
        self.records += 1;
        // Whether the report-phase checks read a function's calls is asked once per run of
        // records of one function (a trace is mostly long runs of a few functions).
        let wanted = match (record.func(), &self.last_function) {
            (Some(f), Some((last, kept))) if f == last => {
                *kept || crossproc::mentions_fingerprint(record.args_text())
            }
            (Some(f), _) => {
                let kept = self.timeline.reads_function(f);
                self.last_function = Some((f.to_string(), kept));
                kept || crossproc::mentions_fingerprint(record.args_text())
            }
            (None, _) => self.timeline.wants(None, record.event(), None),
        };
        if wanted {
            match record.func() {
                // A call's stack is most of its line: given as written, parsed once per place.
                Some(_) => self
                    .timeline
                    .add_with_stack(&record.obj_without_stack(), record.stack_text()),
                None => self.timeline.add(record.obj()),
            }
        }
        let pid = record.pid();
        let process = match pid {
            Some(pid) => Some(self.processes.entry(pid, record.machine())),
            None => {
                self.records_without_pid = true;
                None
            }
        };
        let func = record.func();
        let event = if func.is_none() { record.event() } else { None };
        if let Some(process) = process {
            match event {
                Some("process") => {
                    let obj = record.obj();
                    process.exe = obj.get("exe").and_then(Value::as_str).map(String::from);
                    process.ppid = obj.get("ppid").and_then(Value::as_i64);
                    process.imex_domain = obj
                        .get("imex_domain")
                        .and_then(Value::as_str)
                        .map(String::from);
                    process.findings_level =
                        obj.get("trace_level").and_then(Value::as_str) == Some("findings");
                    process.saw_process = true;
                }
                Some("exit") => {
                    let obj = record.obj();
                    process.exited = true;
                    process.stopped = obj.get("tracing_stopped") == Some(&Value::Bool(true));
                    process.calls_made = obj.get("calls").and_then(Value::as_u64);
                    process.findings_reported =
                        obj.get("findings_reported").and_then(Value::as_u64);
                    let count = |key| obj.get(key).and_then(Value::as_u64).unwrap_or(0);
                    process.calls_unfinished = count("calls_unfinished");
                    process.calls_unchecked = count("calls_unchecked");
                    process.saw_exit = true;
                }
                Some(trace::LIMIT_EVENT) => process.cut = true,
                _ => {}
            }
            if func.is_some() {
                process.calls += 1;
            }
        }
        if let Some(name) = func {
            self.calls += 1;
            let stats = match self.functions.get_mut(name) {
                Some(stats) => stats,
                None => self.functions.entry(name.to_string()).or_default(),
            };
            stats.calls += 1;
            if let Some(ret) = record.ret().filter(|&r| r != 0) {
                stats.failures += 1;
                let label = record
                    .ret_name()
                    .map(str::to_string)
                    .unwrap_or_else(|| ret.to_string());
                *stats.failure_names.entry(label).or_default() += 1;
            }
        }
        if !record.has_findings() {
            return;
        }
        let findings = record.findings();
        if let Some(process) = pid.and_then(|pid| self.processes.get_mut(pid, record.machine())) {
            for f in &findings {
                process.findings += 1;
                match f.get("severity").and_then(Value::as_str) {
                    Some("error") => process.errors += 1,
                    Some("warning") => process.warnings += 1,
                    _ => {}
                }
            }
        }
        let number = |v: Option<u64>| v.map_or(Value::Null, Value::from);
        // A `before-call` event's findings belong to the call it names (reported before the call
        // was forwarded: a known driver does not return from it).
        let (found_in, found_seq) = match record.head.call_fn.as_deref() {
            Some(call) => (Some(call.to_string()), number(record.head.call_seq)),
            None => (func.map(str::to_string), number(record.seq())),
        };
        let args = record.args();
        for finding in findings {
            self.findings.add(
                Occurrence {
                    finding,
                    func: found_in.clone(),
                    pid: pid.map_or(Value::Null, Value::from),
                    tid: record.tid().map_or(Value::Null, Value::from),
                    seq: found_seq.clone(),
                    ts_ns: record.ts_ns(),
                    event: event.map(str::to_string),
                    args: args.clone(),
                },
                symbols,
            );
        }
    }
}

/// Reads `files` into a [`Summary`], pushing reading problems to `diagnostics`; the
/// report-phase checks then decide over the calls of every process.
pub fn summarize(files: &[PathBuf], diagnostics: &mut Diagnostics, gather: Gather) -> Summary {
    summarize_with(files, diagnostics, crossproc::REPORT_CHECKS, gather)
}

pub(crate) fn summarize_with(
    files: &[PathBuf],
    diagnostics: &mut Diagnostics,
    checks: &[&dyn ReportCheck],
    gather: Gather,
) -> Summary {
    let symbols = crate::symbolize::Symbols::default();
    crate::progress::phase_done("start");
    let jobs = match gather.jobs {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    let mut timeline = Timeline::for_checks(checks);
    timeline.spill_every(gather.memory_calls);
    let fresh = Tally {
        timeline,
        findings: Findings::new(gather),
        ..Tally::default()
    };
    let progress = crate::progress::Progress::for_files(files);
    let pool = (jobs > 1 && files.len() > 1)
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(jobs)
                .build()
                .ok()
        })
        .flatten();
    let mut tally = match pool {
        Some(pool) => read_in_parallel(&pool, files, diagnostics, &fresh, &progress),
        None => {
            let mut tally = fresh;
            let stats =
                trace::read_files_showing(files, diagnostics, progress, |r| tally.add(r, &symbols));
            tally.files = stats.files_read;
            tally.unreadable = stats.unreadable;
            tally
        }
    };
    crate::progress::phase_done("read and merge");
    let mut explained = std::collections::BTreeSet::new();
    if !checks.is_empty() {
        tally.timeline.finish();
        crate::progress::phase_done("finish the timeline");
        let found = crossproc::decide_on(&tally.timeline, checks, jobs);
        crate::progress::phase_done("cross-process checks");
        // A failure a report-phase rule explains needs no generic explanation beside it.
        explained = found.iter().map(|f| (f.pid, f.seq)).collect();
        for f in found {
            tally.add_report_phase(f, &symbols);
        }
    }
    tally.findings.finish(&explained, &symbols);
    crate::progress::phase_done("findings");
    Summary { tally, symbols }
}

/// Files read at once, each by a thread of the pool, before their tallies are merged in order:
/// bounds what waits to be merged (the findings JSON and SARIF keep are in a temporary file per
/// file until then).
const BATCH: usize = 64;

/// Reads `files` with the threads of `pool`, a file each at a time, each into a tally like
/// `fresh`, merged in file order: the same tally, diagnostics and progress as reading them in
/// order on one thread (issue 27).
fn read_in_parallel(
    pool: &rayon::ThreadPool,
    files: &[PathBuf],
    diagnostics: &mut Diagnostics,
    fresh: &Tally,
    progress: &crate::progress::Progress,
) -> Tally {
    use rayon::prelude::*;
    let mut tally = fresh.empty_copy();
    for batch in files.chunks(BATCH) {
        let parts: Vec<(Tally, Diagnostics)> = pool.install(|| {
            batch
                .par_iter()
                .map(|file| {
                    // The names of frames, resolved by each thread for itself (a cache).
                    let symbols = crate::symbolize::Symbols::default();
                    let mut part = fresh.empty_copy();
                    let mut found = Diagnostics::default();
                    let stats = trace::read_files_showing(
                        std::slice::from_ref(file),
                        &mut found,
                        progress.share(),
                        |r| part.add(r, &symbols),
                    );
                    part.files = stats.files_read;
                    part.unreadable = stats.unreadable;
                    (part, found)
                })
                .collect()
        });
        crate::progress::phase_done("read a batch");
        for (part, found) in parts {
            diagnostics.absorb(found);
            tally.absorb(part);
        }
        crate::progress::phase_done("merge the batch");
    }
    tally
}

impl Tally {
    /// A tally with nothing read, for the same checks and findings' settings as this one.
    fn empty_copy(&self) -> Tally {
        Tally {
            timeline: self.timeline.clone(),
            findings: Findings::new(self.findings.gather().clone()),
            ..Tally::default()
        }
    }

    /// Takes in the tally of files read after this one's, as if this one had read them too.
    fn absorb(&mut self, other: Tally) {
        self.files += other.files;
        self.records += other.records;
        self.calls += other.calls;
        self.processes.absorb(other.processes);
        self.records_without_pid |= other.records_without_pid;
        self.findings.absorb(other.findings);
        for (name, stats) in other.functions {
            let mine = self.functions.entry(name).or_default();
            mine.calls += stats.calls;
            mine.failures += stats.failures;
            for (label, n) in stats.failure_names {
                *mine.failure_names.entry(label).or_default() += n;
            }
        }
        self.unreadable |= other.unreadable;
        self.timeline.absorb(other.timeline);
    }
}

impl Tally {
    /// A finding a report-phase check decided: shown like any other, on the call it rests on,
    /// and marked `"phase":"report"`.
    fn add_report_phase(&mut self, found: ReportFinding, symbols: &crate::symbolize::Symbols) {
        let rule = found.rule;
        let mut finding = Map::new();
        finding.insert("rule".into(), rule.id.into());
        finding.insert("severity".into(), rule.severity.as_str().into());
        finding.insert("kind".into(), rule.kind.as_str().into());
        finding.insert("message".into(), found.message.into());
        finding.insert("doc".into(), rule.source.cite().into());
        if let Some(url) = rule.source.url() {
            finding.insert("doc_url".into(), url.into());
        }
        finding.insert("fix".into(), rule.fix.into());
        finding.insert("phase".into(), "report".into());
        if let Some(stack) = found.stack {
            finding.insert("stack".into(), stack);
        }
        if let Some(process) = self.processes.get_mut(found.pid, found.machine.as_deref()) {
            process.findings += 1;
            match rule.severity.as_str() {
                "error" => process.errors += 1,
                "warning" => process.warnings += 1,
                _ => {}
            }
        }
        self.findings.add(
            Occurrence {
                finding,
                func: Some(found.func),
                pid: found.pid.into(),
                tid: found.tid.map_or(Value::Null, Value::from),
                seq: found.seq.into(),
                ts_ns: Some(found.ts_ns),
                event: None,
                args: Some(Value::Object(found.args)),
            },
            symbols,
        );
    }
}
