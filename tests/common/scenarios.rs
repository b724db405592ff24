//! Scenario programs under the shim: a run's findings, and checking that each negative case fires
//! exactly its rules (the rule families' end-to-end tests).

use super::*;
use serde_json::Value;
use sharecheck_core::schema::env;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

/// One run of a scenario: what the program saw, what the shim recorded and printed.
pub struct Run {
    pub out: Output,
    pub records: Vec<Value>,
    /// The directory of the run's trace files.
    pub traces: std::path::PathBuf,
}

impl Run {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// Every finding of every record, in order.
    pub fn findings(&self) -> Vec<&Value> {
        self.records
            .iter()
            .flat_map(|r| r["findings"].as_array().into_iter().flatten())
            .collect()
    }

    pub fn rule_ids(&self) -> BTreeSet<String> {
        self.findings()
            .iter()
            .map(|f| f["rule"].as_str().unwrap().to_string())
            .collect()
    }

    /// The rules found live other than the generic explanation every covered call that failed
    /// with no other finding gets: `call.failed`, or `divergence.unlisted` for a code the
    /// function's documentation does not name.
    pub fn rules_besides_failures(&self) -> BTreeSet<String> {
        self.findings()
            .iter()
            .filter(|f| {
                f["rule"] != "call.failed"
                    && !(f["rule"] == "divergence.unlisted"
                        && f["message"]
                            .as_str()
                            .is_some_and(|m| m.contains(" is not among the codes ")))
            })
            .map(|f| f["rule"].as_str().unwrap().to_string())
            .collect()
    }

    pub fn count(&self, id: &str) -> usize {
        self.findings().iter().filter(|f| f["rule"] == id).count()
    }
}

/// Runs `program scenario` under the shim in a scratch directory of its own.
pub fn run(parent: &Scratch, program: &Path, scenario: &str, env: &[(&str, &str)]) -> Run {
    let name = format!(
        "{}/{}-{scenario}-{}",
        parent.dir.file_name().unwrap().to_string_lossy(),
        program.file_name().unwrap().to_string_lossy(),
        env.iter()
            .map(|(k, v)| format!("{}{v}", k.trim_start_matches(env::PREFIX)))
            .collect::<String>()
            .replace(['/', ':', ',', '='], "_")
    );
    let scratch = Scratch::new(&name);
    let mut cmd = scratch.under_shim(program);
    cmd.arg(scenario);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn");
    let records = scratch.records();
    Run {
        out,
        records,
        traces: scratch.traces(),
    }
}

/// Runs and asserts what every run must show: the program ran to the end and saw exactly the
/// driver's answers (the calls it printed are the trace's calls, with the same results).
pub fn run_checked(parent: &Scratch, program: &Path, scenario: &str, env: &[(&str, &str)]) -> Run {
    let r = run(parent, program, scenario, env);
    assert!(
        r.out.status.success(),
        "{scenario} {env:?} failed with {}\nstderr:\n{}",
        r.out.status,
        r.stderr()
    );
    // Set-up calls the program does not print (MUST) may be traced too: compare the functions
    // it prints. Sorted: the threads of `correct` interleave their output and their records.
    let mut printed = printed_calls(&r.out);
    let mut traced: Vec<(String, i64)> = fn_ret(&r.records)
        .into_iter()
        .filter(|(f, _)| printed.iter().any(|(p, _)| p == f))
        .collect();
    printed.sort();
    traced.sort();
    assert_eq!(
        traced, printed,
        "{scenario}: the trace (left) differs from what the program saw (right)"
    );
    r
}

/// A negative case: the scenario, its environment, the rules it must report (exactly).
pub type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);

/// Runs every case and checks that each reports exactly its rules, on stderr too.
pub fn check_cases(parent: &Scratch, program: &Path, cases: &[Case]) {
    let mut wrong = Vec::new();
    for (scenario, env, expected) in cases {
        let r = run_checked(parent, program, scenario, env);
        let expected: BTreeSet<String> = expected
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        let got = r.rule_ids();
        if got != expected {
            wrong.push(format!(
                "{scenario} {env:?}: expected {expected:?}, got {got:?}\n{}",
                r.stderr()
            ));
        }
        // Each finding is printed on stderr too, as `severity[ID]`.
        for f in r.findings() {
            let head = format!(
                "sharecheck: {}[{}] ",
                f["severity"].as_str().unwrap(),
                f["rule"].as_str().unwrap()
            );
            if !r.stderr().contains(&head) {
                wrong.push(format!(
                    "{scenario}: stderr lacks {head:?}:\n{}",
                    r.stderr()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// `sharecheck report --format json` over a run's traces (every process of it).
pub fn report_json(r: &Run) -> Value {
    let out = std::process::Command::new(cli())
        .args(["report", "--format", "json"])
        .arg(&r.traces)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The calls `(pid, seq)` that have both a report-phase finding and the generic `call.failed`
/// in the report: none should (the report-phase rule explains the failure).
pub fn doubly_explained(r: &Run) -> Vec<(i64, u64)> {
    let summary = report_json(r);
    let findings = summary["findings"].as_array().unwrap();
    let key = |f: &Value| {
        (
            f["pid"].as_i64().unwrap_or(-1),
            f["seq"].as_u64().unwrap_or(0),
        )
    };
    let explained: BTreeSet<(i64, u64)> = findings
        .iter()
        .filter(|f| f["phase"] == "report")
        .map(key)
        .collect();
    findings
        .iter()
        .filter(|f| f["rule"] == "call.failed" && explained.contains(&key(f)))
        .map(key)
        .collect()
}

/// The report's findings of the report phase, `(rule, function)`, sorted.
pub fn report_phase(r: &Run) -> Vec<(String, String)> {
    let summary = report_json(r);
    let mut found: Vec<(String, String)> = summary["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["phase"] == "report")
        .map(|f| {
            // Every finding has a place in the program (issue 26): the call's thread and the
            // stack the trace kept for it.
            assert!(f["tid"].is_i64(), "a report-phase finding's thread: {f}");
            assert!(
                f["stack"].as_array().is_some_and(|s| !s.is_empty()),
                "a report-phase finding's stack: {f}"
            );
            (
                f["rule"].as_str().unwrap().to_string(),
                f["fn"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    found
}
