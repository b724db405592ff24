//! `sharecheck report --format perfetto`: the traces as a timeline in the Chrome trace-event
//! format (JSON), which ui.perfetto.dev, Perfetto's trace processor and chrome://tracing load.
//!
//! - a track per process (named by its executable and pid) and per thread;
//! - each call a complete event (`"ph":"X"`) named by its function, at the time it entered the
//!   shim, lasting its time in the driver where the trace has it (`durations=1`; else 0), with
//!   its arguments, result (and the result's name) and `seq` as arguments;
//! - each finding an instant event on its thread (`"ph":"i"`), named `severity: rule`, with the
//!   message, documentation and fix (the report's filters and suppressions apply);
//! - annotations, exits and the end of a cut trace as instant events;
//! - each handle exported in one process and imported in another (IPC memory and event
//!   handles, logical endpoints, matched by fingerprint) a flow arrow from the export's slice to
//!   the import's (`"ph":"s"` / `"ph":"f"` with `"bp":"e"`, one flow per import).
//!
//! Times are microseconds (three decimals: nanoseconds) from the earliest process start of the
//! traces read. Streamed: memory holds the threads seen and the (rare) exports and imports.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::findings::Gather;
use crate::occurrence::Occurrence;
use crate::trace::{self, Diagnostics, Record};

/// One end of a handle's exchange.
#[derive(Clone)]
struct End {
    pid: i64,
    tid: i64,
    ts: u64,
    func: String,
}

struct Writer<'a, W: Write> {
    out: &'a mut W,
    t_min: u64,
    first: bool,
    threads: BTreeSet<(i64, i64)>,
    exports: BTreeMap<String, End>,
    imports: Vec<(String, End)>,
    error: Option<io::Error>,
    gather: &'a Gather,
    /// The frames' functions, for suppressions that name them.
    symbols: crate::symbolize::Symbols,
    pub events: u64,
}

impl<W: Write> Writer<'_, W> {
    fn emit(&mut self, event: &Value) {
        if self.error.is_some() {
            return;
        }
        let sep: &[u8] = if self.first { b"\n" } else { b",\n" };
        self.first = false;
        let written = self.out.write_all(sep).and_then(|()| {
            crate::safe_json::to_writer(&mut *self.out, event).map_err(io::Error::from)
        });
        match written {
            Ok(()) => self.events += 1,
            Err(e) => self.error = Some(e),
        }
    }

    fn us(&self, ts_ns: Option<u64>) -> f64 {
        let rel = ts_ns.unwrap_or(self.t_min).saturating_sub(self.t_min);
        // Microseconds with nanoseconds as three decimals.
        (rel / 1000) as f64 + (rel % 1000) as f64 / 1000.0
    }

    fn thread(&mut self, pid: i64, tid: i64) {
        if self.threads.insert((pid, tid)) {
            let name = if pid == tid {
                format!("main thread {tid}")
            } else {
                format!("thread {tid}")
            };
            self.emit(
                &json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                "args": {"name": name}}),
            );
        }
    }

    fn add(&mut self, r: &Record) {
        let Some(pid) = r.pid() else {
            return;
        };
        let tid = r.tid().unwrap_or(pid);
        let ts = self.us(r.ts_ns());
        match (r.func(), r.event()) {
            (None, Some("process")) => {
                let exe = r.obj().get("exe").and_then(Value::as_str).unwrap_or("?");
                let short = exe.rsplit('/').next().unwrap_or(exe);
                self.emit(&json!({"ph": "M", "name": "process_name", "pid": pid,
                    "args": {"name": format!("{short} (pid {pid})")}}));
                self.emit(&json!({"ph": "M", "name": "process_labels", "pid": pid,
                    "args": {"labels": exe}}));
            }
            (None, Some(event)) => {
                self.thread(pid, tid);
                let mut args = r.obj().clone();
                for k in ["seq", "t", "tid", "event", "pid", "ts_ns", "findings"] {
                    args.remove(k);
                }
                let name = match event {
                    "annotation" => format!(
                        "annotation: {}",
                        args.get("text").and_then(Value::as_str).unwrap_or("")
                    ),
                    other => other.to_string(),
                };
                self.emit(&json!({"ph": "i", "s": "t", "name": name, "cat": "event",
                    "pid": pid, "tid": tid, "ts": ts, "args": args}));
            }
            (Some(func), _) => {
                self.thread(pid, tid);
                let dur = r
                    .head
                    .d
                    .map_or(0.0, |d| (d / 1000) as f64 + (d % 1000) as f64 / 1000.0);
                let mut args = serde_json::Map::new();
                if let Some(a) = r.args() {
                    args.insert("arguments".into(), a);
                }
                if let Some(ret) = r.ret() {
                    args.insert("result".into(), ret.into());
                    if let Some(name) = r.ret_name() {
                        args.insert("result_name".into(), name.into());
                    }
                }
                if let Some(seq) = r.seq() {
                    args.insert("seq".into(), seq.into());
                }
                let cat = if func.starts_with("hip") {
                    "hip"
                } else {
                    "cuda"
                };
                self.emit(
                    &json!({"ph": "X", "name": func, "cat": cat, "pid": pid, "tid": tid,
                    "ts": ts, "dur": dur, "args": args}),
                );
                self.exchange(r, pid, tid, func);
            }
            (None, None) => return,
        }
        if r.has_findings() {
            self.findings(r, pid, tid, ts);
        }
    }

    /// A handle's export (an out-parameter that is a fingerprint) or import (an argument that
    /// is one), remembered for its flow arrow.
    fn exchange(&mut self, r: &Record, pid: i64, tid: i64, func: &str) {
        if r.ret() != Some(0) || !sharecheck_core::crossproc::mentions_fingerprint(r.args_text()) {
            return;
        }
        let Some(Value::Object(args)) = r.args() else {
            return;
        };
        let end = End {
            pid,
            tid,
            ts: r.ts_ns().unwrap_or(self.t_min),
            func: func.to_string(),
        };
        for (key, value) in &args {
            let Some(fp) = value
                .as_str()
                .filter(|v| sharecheck_core::crossproc::is_fingerprint(v))
            else {
                continue;
            };
            if key.starts_with('*') {
                self.exports.entry(fp.to_string()).or_insert(end.clone());
            } else {
                self.imports.push((fp.to_string(), end.clone()));
            }
        }
    }

    fn findings(&mut self, r: &Record, pid: i64, tid: i64, ts: f64) {
        for finding in r.findings() {
            let o = Occurrence {
                finding,
                func: r.head.call_fn.as_deref().or(r.func()).map(str::to_string),
                pid: pid.into(),
                tid: tid.into(),
                seq: r.seq().map_or(Value::Null, Value::from),
                ts_ns: r.ts_ns(),
                event: r.event().map(str::to_string),
                args: None,
            };
            if !o.matches(&self.gather.filter)
                || self
                    .gather
                    .suppressions
                    .iter()
                    .any(|s| s.matches(&o, &self.symbols))
            {
                continue;
            }
            let text = |k: &str| o.str_field(k).unwrap_or("");
            let name = format!("{}: {}", text("severity"), o.rule());
            self.emit(&json!({"ph": "i", "s": "t", "name": name, "cat": "finding",
                "pid": pid, "tid": tid, "ts": ts,
                "args": {"rule": o.rule(), "severity": text("severity"), "kind": text("kind"),
                    "message": text("message"), "doc": text("doc"), "fix": text("fix"),
                    "function": o.func}}));
        }
    }

    /// One flow arrow per import whose handle was exported in the traces read.
    fn flows(&mut self) {
        let imports = std::mem::take(&mut self.imports);
        for (id, (fp, to)) in imports.iter().enumerate() {
            let Some(from) = self.exports.get(fp).cloned() else {
                continue;
            };
            if (from.pid, from.ts) == (to.pid, to.ts) {
                continue;
            }
            let name = format!("{} -> {}", from.func, to.func);
            let id = id + 1;
            let (from_ts, to_ts) = (self.us(Some(from.ts)), self.us(Some(to.ts)));
            self.emit(&json!({"ph": "s", "name": name, "cat": "handle", "id": id,
                "pid": from.pid, "tid": from.tid, "ts": from_ts, "args": {"handle": fp}}));
            self.emit(
                &json!({"ph": "f", "bp": "e", "name": name, "cat": "handle", "id": id,
                "pid": to.pid, "tid": to.tid, "ts": to_ts, "args": {"handle": fp}}),
            );
        }
    }
}

/// Writes the timeline of `files`; the number of events written.
pub fn render_to(
    files: &[PathBuf],
    diagnostics: &mut Diagnostics,
    gather: &Gather,
    out: &mut impl Write,
) -> io::Result<u64> {
    let t_min = files
        .iter()
        .filter_map(|f| trace::first_t0(f))
        .min()
        .unwrap_or(0);
    out.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"sharecheck ")?;
    out.write_all(env!("CARGO_PKG_VERSION").as_bytes())?;
    out.write_all(b"\"},\"traceEvents\":[")?;
    let mut w = Writer {
        out,
        t_min,
        first: true,
        threads: BTreeSet::new(),
        exports: BTreeMap::new(),
        imports: Vec::new(),
        error: None,
        gather,
        symbols: crate::symbolize::Symbols::default(),
        events: 0,
    };
    trace::read_files(files, diagnostics, |r| w.add(r));
    w.flows();
    if let Some(e) = w.error.take() {
        return Err(e);
    }
    let events = w.events;
    out.write_all(b"\n]}\n")?;
    Ok(events)
}
