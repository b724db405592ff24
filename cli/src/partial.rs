//! Partial results (issue 27): `sharecheck report --partial DIR` on each host, then one
//! `sharecheck report` of all the partial results, which is the report of every host's traces
//! read together.
//!
//! A partial result is a trace tree again, smaller: for each trace file read, a file of the same
//! relative name holding what the report reads of it beyond counting (the process record and
//! every other event, the calls with findings, the calls the cross-process checks read) and, at
//! its end, one [`SUMMARY_EVENT`] record with the counts of the calls left out (per function:
//! calls, failures and their codes). The report reads it as it reads any trace; the summary
//! record adds its counts as if its calls had been read. So the cross-process checks run once,
//! over every host's calls they read, and the findings arrive in the same order: the merged
//! report is the report of the traces read together, whatever the checks are.

use crate::trace::{self, Diagnostics, Record};
use serde_json::{json, Map, Value};
use sharecheck_core::crossproc::{self, Timeline};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The event of the record that counts the calls a partial result left out.
pub const SUMMARY_EVENT: &str = "partial-summary";

/// The calls of one function a partial result left out.
#[derive(Default)]
pub struct Left {
    pub calls: u64,
    pub failures: u64,
    /// Failure counts by the code's name (or its number).
    pub failure_names: BTreeMap<String, u64>,
}

/// What was written.
pub struct Written {
    pub files: usize,
    pub records_read: u64,
    pub records_kept: u64,
}

/// Writes the partial result of `files` under `out`: each file at its path relative to the
/// deepest directory that holds them all.
pub fn write(
    files: &[PathBuf],
    out: &Path,
    diagnostics: &mut Diagnostics,
) -> Result<Written, String> {
    let base = common_dir(files);
    let timeline = Timeline::for_checks(crossproc::REPORT_CHECKS);
    let inputs: std::collections::HashSet<PathBuf> = files
        .iter()
        .filter_map(|f| std::fs::canonicalize(f).ok())
        .collect();
    let mut written = Written {
        files: 0,
        records_read: 0,
        records_kept: 0,
    };
    for file in files {
        let relative = file.strip_prefix(&base).unwrap_or(file);
        let target = out.join(relative);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                format!("cannot create {}: {}", dir.display(), trace::io_reason(&e))
            })?;
        }
        if std::fs::canonicalize(&target).is_ok_and(|t| inputs.contains(&t)) {
            return Err(format!(
                "{} is one of the traces read: the partial result goes to another directory",
                target.display()
            ));
        }
        // Streamed to the file: memory stays a line and the counts, whatever the trace's size.
        let cannot_write = |e: std::io::Error| {
            format!(
                "cannot write {}: {}",
                target.display(),
                trace::io_reason(&e)
            )
        };
        let mut sink = std::io::BufWriter::with_capacity(
            1 << 16,
            std::fs::File::create(&target).map_err(cannot_write)?,
        );
        let mut failed = None;
        let mut left: BTreeMap<String, Left> = BTreeMap::new();
        let mut left_records = 0u64;
        let stats = trace::read_files(std::slice::from_ref(file), diagnostics, |r| {
            if keeps(&timeline, r) {
                if failed.is_none() {
                    failed = sink
                        .write_all(r.text())
                        .and_then(|()| sink.write_all(b"\n"))
                        .err();
                }
                written.records_kept += 1;
                return;
            }
            left_records += 1;
            if let Some(func) = r.func() {
                let entry = left.entry(func.to_string()).or_default();
                entry.calls += 1;
                if let Some(ret) = r.ret().filter(|&r| r != 0) {
                    entry.failures += 1;
                    let label = r.ret_name().map_or_else(|| ret.to_string(), str::to_string);
                    *entry.failure_names.entry(label).or_default() += 1;
                }
            }
        });
        if let Some(e) = failed {
            return Err(cannot_write(e));
        }
        if stats.files_read == 0 {
            drop(sink);
            let _ = std::fs::remove_file(&target);
            continue;
        }
        written.records_read += stats.records;
        if left_records > 0 {
            sink.write_all(summary_record(left_records, &left).as_bytes())
                .and_then(|()| sink.write_all(b"\n"))
                .map_err(cannot_write)?;
        }
        sink.flush().map_err(cannot_write)?;
        written.files += 1;
    }
    Ok(written)
}

/// Whether a partial result keeps a record whole: every event, every call with findings, and
/// every call the cross-process checks read ([`Timeline::wants`], as the report asks).
fn keeps(timeline: &Timeline, r: &Record<'_>) -> bool {
    r.func().is_none() || r.has_findings() || timeline.wants(r.func(), None, r.args_text())
}

fn summary_record(records: u64, left: &BTreeMap<String, Left>) -> String {
    let functions: Map<String, Value> = left
        .iter()
        .map(|(name, l)| {
            (
                name.clone(),
                json!({"calls": l.calls, "failures": l.failures, "failure_names": l.failure_names}),
            )
        })
        .collect();
    let calls: u64 = left.values().map(|l| l.calls).sum();
    json!({
        "seq": 0,
        "t": 0,
        "tid": 0,
        "event": SUMMARY_EVENT,
        "records": records,
        "calls": calls,
        "functions": functions,
    })
    .to_string()
}

/// The deepest directory that holds every file.
fn common_dir(files: &[PathBuf]) -> PathBuf {
    let mut dirs = files.iter().map(|f| f.parent().unwrap_or(Path::new("")));
    let Some(first) = dirs.next() else {
        return PathBuf::new();
    };
    let mut common: Vec<_> = first.components().collect();
    for dir in dirs {
        let same = common
            .iter()
            .zip(dir.components())
            .take_while(|(a, b)| *a == b)
            .count();
        common.truncate(same);
    }
    common.iter().collect()
}

/// What a summary record counts, for [`crate::summary::Tally`]: the records and calls left out,
/// and each function's.
pub struct Counted {
    pub records: u64,
    pub calls: u64,
    pub functions: Vec<(String, Left)>,
}

/// The counts of a summary record.
pub fn counted(obj: &Map<String, Value>) -> Counted {
    let number = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let functions = obj
        .get("functions")
        .and_then(Value::as_object)
        .map(|fns| {
            fns.iter()
                .map(|(name, f)| {
                    let failure_names = f
                        .get("failure_names")
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .map(|(label, n)| (label.clone(), number(Some(n))))
                                .collect()
                        })
                        .unwrap_or_default();
                    let left = Left {
                        calls: number(f.get("calls")),
                        failures: number(f.get("failures")),
                        failure_names,
                    };
                    (name.clone(), left)
                })
                .collect()
        })
        .unwrap_or_default();
    Counted {
        records: number(obj.get("records")),
        calls: number(obj.get("calls")),
        functions,
    }
}
