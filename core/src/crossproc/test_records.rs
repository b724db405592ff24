//! Records as the CLI's reader hands them to the report phase, for the families' report-check
//! tests (`pid` and `ts_ns` added from the process record; `seq` and `t` the time given).

use crate::crossproc::{decide, ReportCheck, Timeline};
use serde_json::{json, Map, Value};

/// A call of `func` with arguments `args` (an out-parameter as `"*name"`), answered `ret`.
pub fn record(pid: i64, ts: u64, func: &str, args: Value, ret: i64) -> Map<String, Value> {
    json!({"seq": ts, "t": ts, "tid": pid, "fn": func, "a": args, "r": ret,
        "pid": pid, "ts_ns": ts})
    .as_object()
    .unwrap()
    .clone()
}

/// Process `pid`'s exit record.
pub fn exit(pid: i64, ts: u64) -> Map<String, Value> {
    json!({"event": "exit", "pid": pid, "ts_ns": ts})
        .as_object()
        .unwrap()
        .clone()
}

/// Process `pid`'s process record on `machine`, naming its IMEX domain (`None`: none known).
pub fn process(pid: i64, machine: &str, domain: Option<&str>) -> Map<String, Value> {
    let mut r = json!({"event": "process", "pid": pid, "ts_ns": 0, "machine": machine});
    if let Some(domain) = domain {
        r["imex_domain"] = domain.into();
    }
    r.as_object().unwrap().clone()
}

/// [`record`] of a process on `machine` (as the reader gives every record of its file).
pub fn on(machine: &str, mut record: Map<String, Value>) -> Map<String, Value> {
    record.insert("machine".into(), machine.into());
    record
}

/// `check`'s findings over `records`: each one's time and message.
pub fn found(check: &dyn ReportCheck, records: &[Map<String, Value>]) -> Vec<(u64, String)> {
    let mut t = Timeline::for_checks(&[check]);
    for r in records {
        t.add(r);
    }
    t.finish();
    decide(&t, &[check])
        .into_iter()
        .map(|f| (f.ts_ns, f.message))
        .collect()
}
