//! What validation reports: findings, attached to the record of the call that caused them.
//!
//! The rule engine (see the contract-validation issue) produces these; this module defines their
//! shape, how they are written into a trace record, and how they are printed on stderr.

use sharecheck_core::json::JsonOut;
use std::sync::atomic::{AtomicU64, Ordering};

// Constructed by the rule engine, which lands with the contract-validation issue.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The program broke a documented requirement.
    Misuse,
    /// The driver answered other than its documentation says.
    Divergence,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Misuse => "misuse",
            Kind::Divergence => "divergence",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub kind: Kind,
    /// What the program did, in this call's terms.
    pub message: String,
    /// The documented requirement and where it is written.
    pub doc: &'static str,
    pub fix: &'static str,
}

impl Finding {
    pub fn encode(&self, w: &mut JsonOut) {
        w.begin_object();
        w.kv_str("rule", self.rule);
        w.kv_str("severity", self.severity.as_str());
        w.kv_str("kind", self.kind.as_str());
        w.kv_str("message", &self.message);
        w.kv_str("doc", self.doc);
        if !self.fix.is_empty() {
            w.kv_str("fix", self.fix);
        }
        w.end_object();
    }
}

pub fn encode_list(w: &mut JsonOut, findings: &[Finding]) {
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

/// Prints findings on stderr as `sharecheck: error[ID] fn(args): message` plus evidence lines.
pub fn report(findings: &[Finding], call: &str, pid: u32, tid: i32, seq: u64) {
    for f in findings {
        REPORTED.fetch_add(1, Ordering::Relaxed);
        let mut block = format!(
            "sharecheck: {}[{}] {}: {}\n  documented: {}\n  at: pid {} tid {} call #{}",
            f.severity.as_str(),
            f.rule,
            call,
            f.message,
            f.doc,
            pid,
            tid,
            seq
        );
        if !f.fix.is_empty() {
            block.push_str("; fix: ");
            block.push_str(f.fix);
        }
        let level = match f.severity {
            Severity::Error => tracing::Level::ERROR,
            Severity::Warning => tracing::Level::WARN,
            Severity::Info => tracing::Level::INFO,
        };
        crate::log::finding(level, &block);
    }
}
