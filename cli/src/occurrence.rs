//! One finding of a trace, with the record it came from: what filters, suppressions, baselines
//! and every output read of it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::args::{Filter, Severity};

/// One finding with the record it came from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Occurrence {
    pub finding: Map<String, Value>,
    pub func: Option<String>,
    /// Raw `pid`, `tid`, `seq` of the record (`null` if absent).
    pub pid: Value,
    pub tid: Value,
    pub seq: Value,
    /// When the record's call began (the reader's `ts_ns`): orders findings of one process.
    pub ts_ns: Option<u64>,
    /// Event name, for findings of event records only.
    pub event: Option<String>,
    /// The call's arguments as its record wrote them (`"a"`), for findings of call records.
    pub args: Option<Value>,
}

impl Occurrence {
    pub fn severity(&self) -> Option<Severity> {
        self.str_field("severity").and_then(Severity::parse)
    }
    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.finding.get(key).and_then(Value::as_str)
    }
    pub fn rule(&self) -> &str {
        self.str_field("rule").unwrap_or("(no rule)")
    }
    /// By process, then time, then `seq` (unique in a process, increasing along each thread).
    pub fn sort_key(&self) -> (Option<i64>, Option<u64>, Option<u64>) {
        (self.pid.as_i64(), self.ts_ns, self.seq.as_u64())
    }
    /// Whether the report's filters let this finding through.
    pub fn matches(&self, f: &Filter) -> bool {
        (f.rules.is_empty() || f.rules.iter().any(|r| r == self.rule()))
            && f.severity
                .is_none_or(|min| self.severity().is_some_and(|s| s >= min))
            && (f.pids.is_empty() || self.pid.as_i64().is_some_and(|p| f.pids.contains(&p)))
            && (f.fns.is_empty()
                || self
                    .func
                    .as_deref()
                    .is_some_and(|name| f.fns.iter().any(|n| n == name)))
    }

    /// The finding's host call stack: `(module, offset, symbol text)` a frame.
    pub fn stack(&self) -> Vec<(String, u64, Option<String>)> {
        let Some(frames) = self.finding.get("stack").and_then(Value::as_array) else {
            return Vec::new();
        };
        frames
            .iter()
            .filter_map(|f| {
                let module = f.get("module")?.as_str()?.to_string();
                let offset = f.get("offset")?.as_str().and_then(parse_hex)?;
                let symbol = f.get("symbol").and_then(Value::as_str).map(|s| {
                    match f.get("symbol_offset").and_then(Value::as_str) {
                        Some(d) => format!("{s}+{d}"),
                        None => s.to_string(),
                    }
                });
                Some((module, offset, symbol))
            })
            .collect()
    }

    pub fn location(&self) -> String {
        let show = |v: &Value| match v {
            Value::Null => "?".to_string(),
            other => other.to_string(),
        };
        format!(
            "pid {} tid {} seq {}",
            show(&self.pid),
            show(&self.tid),
            show(&self.seq)
        )
    }

    /// The name the report lists the finding under: its function, or its event.
    pub fn where_name(&self) -> String {
        match (&self.func, &self.event) {
            (Some(f), _) => f.clone(),
            (None, Some(e)) => format!("event {e}"),
            (None, None) => "?".to_string(),
        }
    }
}

pub fn parse_hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.strip_prefix("0x")?, 16).ok()
}
