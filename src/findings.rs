//! What validation reports: findings, attached to the record of the call that caused them, and
//! printed on stderr as one actionable line plus the evidence.

use sharecheck_core::json::JsonOut;
use sharecheck_core::rules::{Rule, Severity};
use std::sync::atomic::{AtomicU64, Ordering};

/// One broken (or noted) rule, in this call's terms.
#[derive(Clone, Debug)]
pub struct Finding {
    pub rule: &'static Rule,
    /// What the program did, with the values involved.
    pub message: String,
    /// Where in the program the call was made (empty until [`crate::engine::report`] captures
    /// it for a finding it keeps, and when `stack_depth=0`).
    pub stack: std::sync::Arc<Vec<crate::stack::Frame>>,
}

impl PartialEq for Finding {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.rule, other.rule) && self.message == other.message
    }
}

impl Finding {
    pub fn encode(&self, w: &mut JsonOut) {
        w.begin_object();
        w.kv_str("rule", self.rule.id);
        w.kv_str("severity", self.rule.severity.as_str());
        w.kv_str("kind", self.rule.kind.as_str());
        w.kv_str("message", &self.message);
        w.kv_str("doc", &self.rule.source.cite());
        if let Some(url) = self.rule.source.url() {
            w.kv_str("doc_url", &url);
        }
        w.kv_str("fix", self.rule.fix);
        encode_stack(w, &self.stack);
        w.end_object();
    }

    /// The stack as the stderr block shows it: one `    #N module+0x.. (symbol+0x..)` line a
    /// frame.
    pub fn stack_text(&self) -> String {
        self.stack
            .iter()
            .enumerate()
            .map(|(i, f)| format!("    #{i} {}\n", f.text()))
            .collect()
    }
}

/// `"findings":[...]`, written only when there is at least one (schema v2 omits an empty list).
#[inline]
pub fn encode_list(w: &mut JsonOut, findings: &[Finding]) {
    if !findings.is_empty() {
        encode_nonempty(w, findings);
    }
}

#[cold]
fn encode_nonempty(w: &mut JsonOut, findings: &[Finding]) {
    w.key("findings");
    w.begin_array();
    for f in findings {
        f.encode(w);
    }
    w.end_array();
}

static REPORTED: AtomicU64 = AtomicU64::new(0);

/// Findings reported by this process so far.
pub fn count() -> u64 {
    REPORTED.load(Ordering::Relaxed)
}

pub fn reset_after_fork() {
    REPORTED.store(0, Ordering::Relaxed);
}

/// Counts a finding that was recorded (printed or not).
pub fn counted() {
    REPORTED.fetch_add(1, Ordering::Relaxed);
}

/// Prints one finding on stderr (`log::finding`) as
/// `sharecheck: error[ID] fn(args): message`, then where it is documented, then where it happened
/// and the fix. `last_of` is the duplicate limit when this is the last report of its rule.
pub fn print(f: &Finding, call: &str, pid: u32, tid: i32, seq: u64, last_of: Option<u32>) {
    let level = match f.rule.severity {
        Severity::Error => crate::log::Level::Error,
        Severity::Warning => crate::log::Level::Warn,
        Severity::Info => crate::log::Level::Info,
    };
    if !crate::log::finding_enabled(level) {
        return;
    }
    let documented = match f.rule.source.url() {
        Some(url) => format!("{} <{url}>", f.rule.source.cite()),
        None => f.rule.source.cite(),
    };
    crate::log::finding(&crate::log::FindingEvent {
        level,
        severity: f.rule.severity.as_str(),
        rule: f.rule.id,
        call,
        message: &f.message,
        documented: &documented,
        fix: f.rule.fix,
        pid,
        tid,
        seq,
        last_of,
        stack: &f.stack_text(),
    });
}

/// `"stack":[{"module":..,"offset":"0x..","symbol":..,"symbol_offset":"0x.."},...]` of a finding
/// or a call record; nothing for an empty stack.
pub fn encode_stack(w: &mut JsonOut, stack: &[crate::stack::Frame]) {
    if stack.is_empty() {
        return;
    }
    w.key("stack");
    w.begin_array();
    for frame in stack {
        w.begin_object();
        w.kv_str("module", &frame.module);
        w.kv_hex("offset", frame.offset);
        if let Some((name, distance)) = &frame.symbol {
            w.kv_str("symbol", name);
            w.kv_hex("symbol_offset", *distance);
        }
        w.end_object();
    }
    w.end_array();
}
