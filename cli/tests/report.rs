//! `sharecheck report` on hand-written trace files.

mod common;

use common::{sharecheck, TempDir};
use sharecheck_core::schema;
use std::io::Write as _;

const PROCESS_100: &str = r#"{"v":2,"seq":0,"t":0,"tid":100,"event":"process","pid":100,"ppid":1,"exe":"/usr/bin/app","shim_version":"0.1.0","t0_wall_ns":1,"t0_mono_ns":5}"#;
const ATTACH_100: &str = r#"{"seq":1,"t":1,"tid":101,"fn":"cuStreamAttachMemAsync","a":{"length":5},"r":1,"findings":[{"rule":"CUVAL-cuStreamAttachMemAsync-length-00001","severity":"error","kind":"misuse","message":"length must be 0","doc":"https://docs.example/attach","fix":"pass 0"}]}"#;
const PEER_100: &str = r#"{"seq":2,"t":2,"tid":101,"fn":"cuCtxEnablePeerAccess","a":{},"r":0}"#;
const EXIT_100: &str = r#"{"seq":3,"t":3,"tid":100,"event":"exit","calls":2,"findings":[{"rule":"SC-ipc-leak","severity":"warning","kind":"divergence","message":"IPC handle never closed","doc":"https://docs.example/ipc"}]}"#;
const PROCESS_200: &str = r#"{"v":2,"seq":0,"t":0,"tid":200,"event":"process","pid":200,"ppid":100,"exe":"/usr/bin/app","shim_version":"0.1.0","t0_wall_ns":1,"t0_mono_ns":5}"#;
const ATTACH_200: &str = r#"{"seq":1,"t":1,"tid":201,"fn":"cuStreamAttachMemAsync_ptsz","a":{"length":8},"r":1,"findings":[{"rule":"CUVAL-cuStreamAttachMemAsync-length-00001","severity":"error","kind":"misuse","message":"length must be 0 (again)","doc":"https://docs.example/attach","fix":"pass 0"}]}"#;
const HIP_200: &str = r#"{"seq":2,"t":2,"tid":201,"fn":"hipDeviceEnablePeerAccess","a":{},"r":704,"findings":[{"rule":"HIPVAL-info","severity":"info","kind":"divergence","message":"already enabled","doc":"d"}]}"#;

fn lines(ls: &[&str]) -> String {
    ls.iter().map(|l| format!("{l}\n")).collect()
}

/// Two processes' traces in one directory.
fn two_processes() -> TempDir {
    let dir = TempDir::new("report");
    dir.write(
        "t/100.jsonl",
        &lines(&[PROCESS_100, ATTACH_100, PEER_100, EXIT_100]),
    );
    dir.write("t/200.jsonl", &lines(&[PROCESS_200, ATTACH_200, HIP_200]));
    dir
}

#[test]
fn json_output_is_exact() {
    let dir = two_processes();
    let out = sharecheck(&dir)
        .args(["report", "--format", "json", "t"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let expected = concat!(
        r#"{"calls":4,"processes":2,"suppressed":0,"findings":["#,
        r#"{"rule":"CUVAL-cuStreamAttachMemAsync-length-00001","severity":"error","kind":"misuse","message":"length must be 0","doc":"https://docs.example/attach","fix":"pass 0","fn":"cuStreamAttachMemAsync","pid":100,"tid":101,"seq":1},"#,
        r#"{"rule":"SC-ipc-leak","severity":"warning","kind":"divergence","message":"IPC handle never closed","doc":"https://docs.example/ipc","fn":null,"pid":100,"tid":100,"seq":3,"event":"exit"},"#,
        r#"{"rule":"CUVAL-cuStreamAttachMemAsync-length-00001","severity":"error","kind":"misuse","message":"length must be 0 (again)","doc":"https://docs.example/attach","fix":"pass 0","fn":"cuStreamAttachMemAsync_ptsz","pid":200,"tid":201,"seq":1},"#,
        r#"{"rule":"HIPVAL-info","severity":"info","kind":"divergence","message":"already enabled","doc":"d","fn":"hipDeviceEnablePeerAccess","pid":200,"tid":201,"seq":2}"#,
        "]}\n"
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_processes_are_merged_and_sorted_by_pid_and_seq() {
    let dir = TempDir::new("merge");
    // Records of one file out of order, files named in reverse order.
    dir.write("b.jsonl", &lines(&[PROCESS_200, HIP_200, ATTACH_200]));
    dir.write("a.jsonl", &lines(&[PROCESS_100, EXIT_100, ATTACH_100]));
    let out = sharecheck(&dir)
        .args(["report", "--format=json", "b.jsonl", "a.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["processes"], 2);
    assert_eq!(v["calls"], 3);
    let keys: Vec<(i64, i64)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["pid"].as_i64().unwrap(), f["seq"].as_i64().unwrap()))
        .collect();
    assert_eq!(keys, [(100, 1), (100, 3), (200, 1), (200, 2)]);
}

#[test]
fn text_output_groups_findings_by_rule() {
    let dir = two_processes();
    let out = sharecheck(&dir).args(["report", "t"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let has = |s: &str| assert!(text.contains(s), "missing {s:?} in:\n{text}");
    has("sharecheck report: 4 calls in 2 processes (2 trace files)");
    has("FINDINGS BY RULE (3 rules, 4 findings)");
    // One group for the rule seen in both processes, with every occurrence: where, the
    // function, its message and the call's arguments.
    has("error: CUVAL-cuStreamAttachMemAsync-length-00001 [misuse] x2");
    has("  - pid 100 tid 101 seq 1 cuStreamAttachMemAsync\n      length must be 0\n      args: {\"length\":5}\n");
    has("  - pid 200 tid 201 seq 1 cuStreamAttachMemAsync_ptsz\n      length must be 0 (again)\n      args: {\"length\":8}\n");
    has("fn:    cuStreamAttachMemAsync (1), cuStreamAttachMemAsync_ptsz (1)");
    has("doc:   https://docs.example/attach");
    has("fix:   pass 0");
    has("warning: SC-ipc-leak [divergence] x1");
    has("fn:    event exit");
    has("info: HIPVAL-info [divergence] x1");
    // Errors before warnings before infos.
    let pos = |s: &str| text.find(s).unwrap();
    assert!(
        pos("error: CUVAL") < pos("warning: SC-ipc")
            && pos("warning: SC-ipc") < pos("info: HIPVAL")
    );
    // Per-function table: failures and the most frequent failure (the number when unnamed).
    has("CALLS BY FUNCTION");
    assert!(text
        .lines()
        .any(|l| l.trim_start().starts_with("cuStreamAttachMemAsync ")
            && l.contains(" 1 ")
            && l.ends_with("CUDA_ERROR_INVALID_VALUE (1)")));
    // 704 is named from the function's API (the record carries only the number).
    assert!(text.lines().any(|l| l.contains("hipDeviceEnablePeerAccess")
        && l.ends_with("hipErrorPeerAccessAlreadyEnabled (1)")));
    assert!(text
        .lines()
        .any(|l| l.contains("cuCtxEnablePeerAccess") && l.ends_with("-")));
    has("PROCESSES");
    has("/usr/bin/app  (no exit record: it crashed, was killed or is still running)");
    assert!(
        text.ends_with("SUMMARY: 2 errors, 1 warning, 1 info\n"),
        "{text}"
    );
}

/// Process 100's row in the text report of a trace of its two peer calls and `exit`.
fn row_with_exit(dir: &TempDir, exit: &str) -> String {
    let peer3 = PEER_100.replace("\"seq\":2", "\"seq\":4");
    dir.write(
        "t/100.jsonl",
        &lines(&[PROCESS_100, PEER_100, &peer3, exit]),
    );
    let out = sharecheck(dir).args(["report", "t"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .find(|l| l.contains("/usr/bin/app"))
        .unwrap_or_else(|| panic!("no row in:\n{text}"))
        .to_string()
}

/// An exit record whose `calls_unfinished` says calls were still being recorded: the row says
/// how many of them are not in the trace, and nothing when every one of them came; and one whose
/// `calls_unchecked` counts handlers' calls recorded without their checks.
#[test]
fn calls_still_being_recorded_or_unchecked_at_exit_are_named() {
    let exit = |calls: u64, unchecked: u64| {
        format!(
            r#"{{"seq":9,"t":3,"tid":100,"event":"exit","calls":{calls},"calls_unfinished":2,"calls_unchecked":{unchecked},"findings_reported":0}}"#
        )
    };
    for (made, unchecked, note) in [
        (
            3,
            0,
            Some("1 of its calls were still being recorded when it exited"),
        ),
        (2, 0, None),
        (
            2,
            5,
            Some("5 calls made in signal handlers were recorded without their checks"),
        ),
    ] {
        let dir = TempDir::new("unfinished");
        let row = row_with_exit(&dir, &exit(made, unchecked));
        match note {
            Some(note) => assert!(row.contains(note), "{row}"),
            None => assert!(!row.contains('('), "no note: {row}"),
        }
    }
}

/// An exit record that counts more calls than the trace holds, with none still being recorded:
/// the row says the writer lost them (the defect of a record longer than a ring chunk, found on
/// R580 with PyTorch's stacks); a trace that holds them all says nothing.
#[test]
fn calls_numbered_and_never_written_are_named() {
    for (made, note) in [(3, true), (2, false)] {
        let dir = TempDir::new("lost");
        let exit = format!(
            r#"{{"seq":9,"t":3,"tid":100,"event":"exit","calls":{made},"findings_reported":0}}"#
        );
        let row = row_with_exit(&dir, &exit);
        let lost = "1 of its 3 calls are not in the trace: numbered and never written";
        assert_eq!(row.contains(lost), note, "{row}");
        if !note {
            assert!(!row.contains('('), "no note: {row}");
        }
    }
}

#[test]
fn truncated_last_line_is_a_warning() {
    let dir = TempDir::new("truncated");
    let partial = &ATTACH_200[..40];
    dir.write("200.jsonl", &format!("{PROCESS_200}\n{HIP_200}\n{partial}"));
    let out = sharecheck(&dir)
        .args(["report", "--format", "json", "200.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("sharecheck: warning: 200.jsonl:3: the last line is truncated"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["calls"], 1);
}

/// `report --format json .` over one trace file `100.jsonl` of `content`, which must exit 0:
/// its stderr and its JSON.
fn report_of_one_file(name: &str, content: &str) -> (String, serde_json::Value) {
    let dir = TempDir::new(name);
    dir.write("100.jsonl", content);
    let out = sharecheck(&dir)
        .args(["report", "--format", "json", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    (
        String::from_utf8(out.stderr).unwrap(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

#[test]
fn bad_middle_line_is_an_error_but_the_rest_is_read() {
    let (stderr, v) = report_of_one_file(
        "badline",
        &format!("{PROCESS_100}\nthis is not json\n{ATTACH_100}\n"),
    );
    assert!(
        stderr.contains("sharecheck: error: ./100.jsonl:2: not a JSON trace record"),
        "{stderr}"
    );
    assert_eq!(v["calls"], 1);
    assert_eq!(v["findings"].as_array().unwrap().len(), 1);
}

/// Garbage in quantity: the first problems are printed, the rest counted, and none prints a
/// control character raw.
#[test]
fn bad_lines_are_reported_up_to_a_cap_with_a_count_and_escaped() {
    let garbage = "not json \u{1b}[2J\n".repeat(100);
    let (stderr, v) = report_of_one_file(
        "manybad",
        &format!("{PROCESS_100}\n{garbage}{ATTACH_100}\n"),
    );
    assert_eq!(
        stderr.matches("not a JSON trace record").count(),
        20,
        "{stderr}"
    );
    assert!(
        stderr.contains("and 80 more problems with the input"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    assert_eq!(v["calls"], 1);
}

#[test]
fn nothing_readable_exits_2() {
    let dir = TempDir::new("unreadable");
    dir.write("garbage.jsonl", "not json\n{\"no\":\"version\"}\n");
    dir.mkdir("empty");
    for args in [
        &["report", "garbage.jsonl"][..],
        &["report", "missing.jsonl"],
        &["report", "empty"],
        &["report"], // no ./sharecheck-trace here
    ] {
        let out = sharecheck(&dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty());
        assert!(!out.stderr.is_empty());
    }
    // A missing input next to a good one: the report is printed, the status still says so.
    dir.write("ok.jsonl", &lines(&[PROCESS_100, PEER_100]));
    let out = sharecheck(&dir)
        .args(["report", "ok.jsonl", "missing.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUMMARY: 0 errors"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.jsonl: cannot read this trace"));
}

#[test]
fn default_trace_directory_is_read() {
    let dir = TempDir::new("default");
    dir.write(
        &format!("{}/100.jsonl", schema::DEFAULT_TRACE_DIR),
        &lines(&[PROCESS_100, PEER_100]),
    );
    let out = sharecheck(&dir).args(["report"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 call in 1 process"));
}

#[test]
fn fail_on_sets_exit_status_1() {
    let dir = two_processes();
    dir.write("warn.jsonl", &lines(&[PROCESS_100, EXIT_100]));
    dir.write("info.jsonl", &lines(&[PROCESS_200, HIP_200]));
    let status = |args: &[&str]| sharecheck(&dir).args(args).output().unwrap().status.code();
    assert_eq!(status(&["report", "--fail-on", "error", "t"]), Some(1));
    assert_eq!(status(&["report", "--fail-on", "warning", "t"]), Some(1));
    assert_eq!(status(&["report", "t"]), Some(0));
    assert_eq!(
        status(&["report", "--fail-on", "error", "warn.jsonl"]),
        Some(0)
    );
    assert_eq!(
        status(&["report", "--fail-on=warning", "warn.jsonl"]),
        Some(1)
    );
    assert_eq!(
        status(&["report", "--fail-on", "warning", "info.jsonl"]),
        Some(0)
    );
    assert_eq!(
        status(&["report", "--fail-on", "info", "info.jsonl"]),
        Some(1)
    );
    assert_eq!(
        status(&["report", "--format", "json", "--fail-on", "error", "t"]),
        Some(1)
    );
}

#[test]
fn report_usage_errors_exit_2() {
    let dir = TempDir::new("report-usage");
    for (args, why) in [
        (
            &["report", "--format", "xml", "x"][..],
            "[possible values: text, json, sarif, perfetto]",
        ),
        (
            &["report", "--format"],
            "a value is required for '--format <FORMAT>'",
        ),
        (
            &["report", "--fail-on", "fatal", "x"],
            "invalid value 'fatal'",
        ),
        (
            &["report", "--bogus", "x"],
            "unexpected argument '--bogus' found",
        ),
        (
            &["report", "--serverity", "error"],
            "a similar argument exists: '--severity'",
        ),
        (
            &["report", "--pid", "x"],
            "invalid value 'x' for '--pid <PID>'",
        ),
    ] {
        let out = sharecheck(&dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty());
    }
}

/// Filters keep the findings asked for, in what is shown and counted (and in --fail-on); the
/// limit caps the occurrences listed, and says how many more there are.
#[test]
fn filters_and_the_limit_select_what_is_shown() {
    let dir = two_processes();
    let run = |args: &[&str]| {
        let out = sharecheck(&dir)
            .arg("report")
            .args(args)
            .arg("t")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let rules = |args: &[&str]| {
        let (_, json) = run(&[&["--format", "json"], args].concat());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| format!("{}@{}", f["rule"].as_str().unwrap(), f["pid"]))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        rules(&["--rule", "HIPVAL-info,SC-ipc-leak"]),
        ["SC-ipc-leak@100", "HIPVAL-info@200"]
    );
    assert_eq!(
        rules(&["--severity", "warning"]),
        [
            "CUVAL-cuStreamAttachMemAsync-length-00001@100",
            "SC-ipc-leak@100",
            "CUVAL-cuStreamAttachMemAsync-length-00001@200"
        ]
    );
    assert_eq!(
        rules(&["--pid", "200", "--fn", "cuStreamAttachMemAsync_ptsz"]),
        ["CUVAL-cuStreamAttachMemAsync-length-00001@200"]
    );
    let (code, text) = run(&["--limit", "1"]);
    assert_eq!(code, Some(0));
    assert!(
        text.contains("  ... and 1 more (--limit 2 shows them; 0: all)"),
        "{text}"
    );
    assert!(
        text.contains("SUMMARY: 2 errors, 1 warning, 1 info"),
        "{text}"
    );
    let (_, text) = run(&["--severity", "error"]);
    assert!(
        text.contains("SUMMARY: 2 errors, 0 warnings, 0 infos"),
        "{text}"
    );
    // --fail-on sees only what the filters let through.
    assert_eq!(
        run(&["--rule", "HIPVAL-info", "--fail-on", "warning"]).0,
        Some(0)
    );
    assert_eq!(run(&["--fail-on", "warning"]).0, Some(1));
    let bad = sharecheck(&dir)
        .args(["report", "--pid", "x", "t"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // A rule ID neither the catalogue nor the traces know is a typo: a usage error naming the
    // IDs that contain it, not "FINDINGS: none" and exit 0 (an ID only the traces know, as the
    // ones above, filters as asked).
    let typo = sharecheck(&dir)
        .args([
            "report",
            "--rule",
            "cuMemcpyPeer.range-outside",
            "--fail-on",
            "error",
            "t",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no rule `cuMemcpyPeer.range-outside`; rules containing it: cuMemcpyPeer.range-outside-allocation"),
        "{stderr}"
    );
    assert!(typo.stdout.is_empty(), "no report for a typo");
    // A catalogue ID no trace holds is a filter that found nothing.
    let (code, text) = run(&["--rule", "cuMemcpyPeer.range-outside-allocation"]);
    assert_eq!(code, Some(0), "{text}");
}

/// Suppressions leave findings out (counted), matched by rule, function and stack frame globs;
/// --gen-suppressions writes lines that suppress what is shown.
#[test]
fn suppressions_leave_findings_out_and_can_be_generated() {
    let dir = two_processes();
    // A finding with a stack, in a third process.
    dir.write(
        "t/300.jsonl",
        &lines(&[
            r#"{"v":2,"seq":0,"t":0,"tid":300,"event":"process","pid":300,"ppid":1,"exe":"/app","shim_version":"0.1.0","t0_wall_ns":1,"t0_mono_ns":5}"#,
            r#"{"seq":1,"t":1,"tid":300,"fn":"cuMemcpyPeer","a":{},"r":1,"findings":[{"rule":"cuMemcpyPeer.memory-freed","severity":"error","kind":"misuse","message":"m","doc":"d","stack":[{"module":"/opt/lib/libtorch_cuda.so","offset":"0x1234","symbol":"copy","symbol_offset":"0x4"}]}]}"#,
        ]),
    );
    let report = |args: &[&str]| {
        let out = sharecheck(&dir)
            .arg("report")
            .args(args)
            .args(["--format", "json", "t"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code(), v)
    };
    let (_, all) = report(&[]);
    assert_eq!(all["findings"].as_array().unwrap().len(), 5);
    dir.write(
        "s.supp",
        "# known\nrule:CUVAL-* fn:cuStreamAttachMemAsync_ptsz\nframe:*libtorch_cuda.so+*\n",
    );
    let (code, v) = report(&["--suppressions", "s.supp"]);
    assert_eq!(code, Some(0));
    assert_eq!(v["suppressed"], 2);
    let left: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap(), f["fn"].as_str().unwrap_or("")))
        .collect();
    assert!(
        !left.contains(&("cuMemcpyPeer.memory-freed", "cuMemcpyPeer")),
        "{left:?}"
    );
    assert!(left.contains(&(
        "CUVAL-cuStreamAttachMemAsync-length-00001",
        "cuStreamAttachMemAsync"
    )));
    assert_eq!(left.len(), 3);
    // Generated suppressions suppress everything they were made from.
    let gen = sharecheck(&dir)
        .args(["report", "--gen-suppressions", "t"])
        .output()
        .unwrap();
    let text = String::from_utf8(gen.stdout).unwrap();
    assert!(
        // The innermost function of the program's own code, by the name the shim recorded (the
        // module is not on this machine).
        text.contains("rule:cuMemcpyPeer.memory-freed fn:cuMemcpyPeer ... fun:copy\n"),
        "{text}"
    );
    dir.write("gen.supp", &text);
    let (_, v) = report(&["--suppressions", "gen.supp"]);
    assert_eq!(v["findings"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["suppressed"], 5);
    // A bad file is a usage error naming the line.
    dir.write("bad.supp", "rule:x\nwhat\n");
    let bad = sharecheck(&dir)
        .args(["report", "--suppressions", "bad.supp", "t"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bad.supp:2: `what`"));
}

/// A baseline: the findings new since an earlier run and those gone, and exit 1 on new ones.
#[test]
fn a_baseline_lists_new_and_gone_findings_and_gates_on_new_ones() {
    let dir = TempDir::new("baseline");
    dir.write(
        "old/100.jsonl",
        &lines(&[PROCESS_100, ATTACH_100, EXIT_100]),
    );
    dir.write("new/200.jsonl", &lines(&[PROCESS_200, ATTACH_200, HIP_200]));
    dir.write(
        "same/100.jsonl",
        &lines(&[PROCESS_100, ATTACH_100, EXIT_100]),
    );
    let out = sharecheck(&dir)
        .args(["report", "--baseline", "old", "new"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "new findings gate: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("BASELINE old: 2 findings new, 2 gone"),
        "{text}"
    );
    assert!(
        text.contains("    new:  HIPVAL-info in hipDeviceEnablePeerAccess (x1)"),
        "{text}"
    );
    assert!(text.contains("    gone: SC-ipc-leak in ? (x1)"), "{text}");
    let json = sharecheck(&dir)
        .args(["report", "--format", "json", "--baseline", "old", "new"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["baseline"]["new"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["baseline"]["gone"].as_array().unwrap().len(), 2, "{v}");
    // The same findings again: nothing new, exit 0.
    let same = sharecheck(&dir)
        .args(["report", "--baseline", "old", "same"])
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0), "{same:?}");
    assert!(String::from_utf8_lossy(&same.stdout).contains("0 findings new, 0 gone"));
}

/// `--format sarif`: a SARIF 2.1.0 log whose tool rules are the catalogue and whose results are
/// the findings, each with its level, message, function and stack (the validator's verdict is
/// recorded by scripts/validate-sarif.sh).
#[test]
fn sarif_output_is_a_sarif_2_1_0_log_of_the_findings() {
    let dir = two_processes();
    dir.write(
        "t/300.jsonl",
        &lines(&[
            r#"{"v":2,"seq":0,"t":0,"tid":300,"event":"process","pid":300,"ppid":1,"exe":"/app","shim_version":"0.1.0","t0_wall_ns":1,"t0_mono_ns":5}"#,
            r#"{"seq":1,"t":1,"tid":300,"fn":"cuMemcpyPeer","a":{"ByteCount":64},"r":1,"findings":[{"rule":"cuMemcpyPeer.memory-freed","severity":"error","kind":"misuse","message":"freed","doc":"d","stack":[{"module":"/no/such/libapp.so","offset":"0x1234","symbol":"copy","symbol_offset":"0x4"}]}]}"#,
        ]),
    );
    let out = sharecheck(&dir)
        .args(["report", "--format", "sarif", "t"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let run = &v["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "sharecheck");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), sharecheck_core::rules::all().count());
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    let freed = results
        .iter()
        .find(|r| r["ruleId"] == "cuMemcpyPeer.memory-freed")
        .unwrap();
    assert_eq!(freed["level"], "error");
    assert_eq!(freed["message"]["text"], "freed");
    let index = freed["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[index]["id"], "cuMemcpyPeer.memory-freed");
    assert_eq!(
        freed["locations"][0]["logicalLocations"][0]["name"],
        "cuMemcpyPeer"
    );
    let frame = &freed["stacks"][0]["frames"][0];
    assert_eq!(
        frame["location"]["physicalLocation"]["artifactLocation"]["uri"],
        "file:///no/such/libapp.so"
    );
    assert_eq!(
        frame["location"]["physicalLocation"]["address"]["relativeAddress"],
        0x1234
    );
    assert_eq!(freed["properties"]["arguments"]["ByteCount"], 64);
    let info = results
        .iter()
        .find(|r| r["ruleId"] == "HIPVAL-info")
        .unwrap();
    assert_eq!(info["level"], "note");
}

/// An exporter (pid 300) and an importer (pid 400, two threads) of one IPC handle, one finding,
/// one annotation; no durations in the trace.
fn exchange() -> TempDir {
    let dir = TempDir::new("perfetto");
    let process = |pid: u32, t0: u64| {
        format!(
            r#"{{"v":2,"seq":0,"t":0,"tid":{pid},"event":"process","pid":{pid},"ppid":1,"exe":"/opt/app/bin/worker","shim_version":"0.1.0","t0_wall_ns":{t0},"t0_mono_ns":5}}"#
        )
    };
    dir.write(
        "t/300.jsonl",
        &lines(&[
            &process(300, 1_000_000),
            r#"{"seq":1,"t":2000,"tid":300,"fn":"cuIpcGetMemHandle","a":{"*pHandle":"fp:00112233aabbccdd","dptr":"0x7000000"},"r":0}"#,
            r#"{"seq":2,"t":2500,"tid":300,"event":"annotation","text":"sent"}"#,
            r#"{"seq":3,"t":9000,"tid":300,"fn":"cuMemFree_v2","a":{"dptr":"0x7000000"},"r":0}"#,
        ]),
    );
    dir.write(
        "t/400.jsonl",
        &lines(&[
            &process(400, 1_001_000),
            r#"{"seq":1,"t":3000,"tid":401,"fn":"cuIpcOpenMemHandle_v2","a":{"*pdptr":"0x9000000","handle":"fp:00112233aabbccdd","Flags":"CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"},"r":0}"#,
            r#"{"seq":2,"t":3500,"tid":400,"fn":"cuDeviceCanAccessPeer","a":{"dev":0,"peerDev":0},"r":0,"d":1250,"findings":[{"rule":"cuDeviceCanAccessPeer.same-device","severity":"info","kind":"misuse","message":"a device asked about itself","doc":"d","fix":"f"}]}"#,
        ]),
    );
    dir
}

#[test]
fn the_perfetto_timeline_has_tracks_slices_instants_and_flows() {
    let dir = exchange();
    let out = sharecheck(&dir)
        .args(["report", "--format", "perfetto", "t"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["displayTimeUnit"], "ns");
    let events = doc["traceEvents"].as_array().unwrap();
    let of =
        |ph: &str| -> Vec<&serde_json::Value> { events.iter().filter(|e| e["ph"] == ph).collect() };
    // A track per process and thread, named.
    let names: Vec<(i64, &str)> = of("M")
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_i64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [(300, "worker (pid 300)"), (400, "worker (pid 400)")]
    );
    let threads: Vec<(i64, i64)> = of("M")
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()))
        .collect();
    assert_eq!(threads, [(300, 300), (400, 401), (400, 400)]);
    // Calls as slices with their arguments and result, on one clock from the earliest start
    // (pid 300's): 300's export at 2 us, 400's open 1 us later in wall-clock terms plus 3 us.
    let slices = of("X");
    assert_eq!(slices.len(), 4);
    let open = slices
        .iter()
        .find(|e| e["name"] == "cuIpcOpenMemHandle_v2")
        .unwrap();
    assert_eq!(
        (open["pid"].as_i64(), open["tid"].as_i64()),
        (Some(400), Some(401))
    );
    assert_eq!(open["ts"].as_f64(), Some(4.0));
    assert_eq!(open["dur"].as_f64(), Some(0.0));
    assert_eq!(open["cat"], "cuda");
    assert_eq!(open["args"]["arguments"]["*pdptr"], "0x9000000");
    assert_eq!(open["args"]["result"], 0);
    assert_eq!(open["args"]["result_name"], "CUDA_SUCCESS");
    let timed = slices
        .iter()
        .find(|e| e["name"] == "cuDeviceCanAccessPeer")
        .unwrap();
    assert_eq!(timed["dur"].as_f64(), Some(1.25), "durations=1's d, in us");
    // The finding and the annotation as instant events on their threads.
    let instants = of("i");
    let finding = instants.iter().find(|e| e["cat"] == "finding").unwrap();
    assert_eq!(finding["name"], "info: cuDeviceCanAccessPeer.same-device");
    assert_eq!(
        (finding["pid"].as_i64(), finding["tid"].as_i64()),
        (Some(400), Some(400))
    );
    assert_eq!(finding["args"]["message"], "a device asked about itself");
    assert!(instants.iter().any(|e| e["name"] == "annotation: sent"));
    // The handle's export -> import as a flow arrow between the two slices.
    let (s, f) = (of("s"), of("f"));
    assert_eq!((s.len(), f.len()), (1, 1));
    assert_eq!(s[0]["id"], f[0]["id"]);
    assert_eq!(
        (s[0]["pid"].as_i64(), s[0]["ts"].as_f64()),
        (Some(300), Some(2.0))
    );
    assert_eq!(
        (f[0]["pid"].as_i64(), f[0]["tid"].as_i64()),
        (Some(400), Some(401))
    );
    assert_eq!(f[0]["bp"], "e");
    assert_eq!(s[0]["args"]["handle"], "fp:00112233aabbccdd");
    // A filter applies to the instant events, not to the calls.
    let out = sharecheck(&dir)
        .args(["report", "--format=perfetto", "--severity", "warning", "t"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(!events.iter().any(|e| e["cat"] == "finding"));
    assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 4);
}

/// The timeline passes the format's documented checks (scripts/validate-timeline.py, Python's
/// JSON parser): phases, fields, named tracks, flows bound to slices of their threads.
#[test]
fn the_perfetto_timeline_validates_against_the_trace_event_format() {
    let dir = exchange();
    let out = sharecheck(&dir)
        .args(["report", "--format", "perfetto", "t"])
        .output()
        .unwrap();
    let file = dir.write("timeline.json", &String::from_utf8(out.stdout).unwrap());
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/validate-timeline.py");
    let check = std::process::Command::new("python3")
        .arg(&script)
        .arg(&file)
        .args(["--expect-flows", "1", "--expect-instants", "2"])
        .output()
        .expect("python3 runs scripts/validate-timeline.py");
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{said}");
    assert!(said.contains(", 1 flows, 0 problems"), "{said}");
    // And the validator finds what is wrong with a broken one.
    let broken = dir.write(
        "broken.json",
        r#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":-1},{"ph":"f","name":"x","cat":"c","id":1,"pid":1,"tid":1,"ts":3}]}"#,
    );
    let check = std::process::Command::new("python3")
        .arg(&script)
        .arg(&broken)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(said.contains("no non-negative number ts"), "{said}");
    assert!(said.contains("flow end without its start"), "{said}");
}

/// Runs `sharecheck ARGS` in `dir` with stdout to `out`; its exit status and peak RSS in KB.
/// The peak is measured by a small python3 parent of its own: a child's peak counts from before
/// its exec, so a child of this (large, multi-threaded) test process would report this process's
/// size instead of its own.
fn run_measured(dir: &TempDir, args: &[&str], out: &std::path::Path) -> (i32, i64) {
    const MEASURE: &str = "import resource, subprocess, sys\n\
        with open(sys.argv[1], 'wb') as out:\n\
        \x20   rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL).returncode\n\
        print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n";
    let exe = sharecheck(dir).get_program().to_owned();
    let mut python = std::process::Command::new("python3");
    for var in common::isolated_vars() {
        python.env_remove(var);
    }
    let said = python
        .current_dir(&dir.path)
        .arg("-c")
        .arg(MEASURE)
        .arg(out)
        .arg(exe)
        .args(args)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&said.stdout).into_owned();
    let mut words = text.split_whitespace().map(|w| w.parse::<i64>().unwrap());
    (words.next().unwrap() as i32, words.next().unwrap())
}

/// Memory does not grow with the number of findings: 20,000 findings with 3 KB messages (about
/// 60 MB of trace) are reported in a few MB (when every finding was held, over 100 MB).
#[test]
fn memory_does_not_grow_with_the_number_of_findings() {
    let dir = TempDir::new("many-findings");
    // Written a line at a time: the test process stays small, and its children (whose peak
    // counts from before their exec) too.
    let path = dir.write("t/100.jsonl", &lines(&[PROCESS_100]));
    let file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    let mut file = std::io::BufWriter::new(file);
    let message = "m".repeat(3000);
    for seq in 1..=20_000u64 {
        writeln!(
            file,
            r#"{{"seq":{seq},"t":{seq},"tid":101,"fn":"cuMemcpyPeer","a":{{"ByteCount":{seq}}},"r":1,"findings":[{{"rule":"cuMemcpyPeer.range-outside-allocation","severity":"error","kind":"misuse","message":"{message}","doc":"d","fix":"f"}}]}}"#
        )
        .unwrap();
    }
    file.flush().unwrap();
    drop(file);
    let out = dir.join("report.txt");
    let (status, text_kb) = run_measured(&dir, &["report", "t"], &out);
    assert_eq!(status, 0);
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(report.contains("error: cuMemcpyPeer.range-outside-allocation [misuse] x20000"));
    assert!(report.contains("... and 19990 more"), "{report}");
    // The first ten by time are the ones shown.
    assert!(report.contains("pid 100 tid 101 seq 1 cuMemcpyPeer"));
    assert!(report.contains("pid 100 tid 101 seq 10 cuMemcpyPeer"));
    assert!(!report.contains("seq 11 cuMemcpyPeer"));
    // JSON lists all of them, from its spool, in order.
    let out = dir.join("report.json");
    let (status, json_kb) = run_measured(&dir, &["report", "--format", "json", "t"], &out);
    assert_eq!(status, 0);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let seqs: Vec<u64> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=20_000).collect::<Vec<_>>());
    assert!(text_kb < 24 << 10, "text: {text_kb} KB");
    // Far below the 60 MB of messages: they are not held. (A debug build measured 31.9 MB before
    // the report linked a symbolizer, 33.7 MB after; a release build 29.4 MB.)
    assert!(json_kb < 36 << 10, "json: {json_kb} KB");
}

/// A trace file of `lines` lines written with `line(i)` after the process record, a line at a
/// time (the test process stays small).
fn write_big(
    dir: &TempDir,
    name: &str,
    lines: u64,
    line: impl Fn(u64) -> String,
) -> std::path::PathBuf {
    let path = dir.write(name, &format!("{PROCESS_100}\n"));
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let mut file = std::io::BufWriter::new(file);
    for i in 1..=lines {
        file.write_all(line(i).as_bytes()).unwrap();
    }
    file.flush().unwrap();
    path
}

/// The readers' memory is bounded by a line, not by the input: a million bad lines (every one
/// used to be kept as a diagnostic: 519 MB for 2 M), one 64 MB line (refused past the longest
/// record the shim writes), a sparse 2 GiB ring file (refused by its header before its body is
/// read: it was read whole), and `cat` of a 64 MB trace (it was loaded whole).
#[test]
fn the_readers_memory_is_bounded_by_a_line_not_by_the_input() {
    let dir = TempDir::new("bounded-readers");
    let out = dir.join("out.txt");
    write_big(&dir, "bad/100.jsonl", 1_000_000, |_| {
        "not json at all\n".into()
    });
    let (status, kb) = run_measured(&dir, &["report", "bad"], &out);
    assert_eq!(status, 0);
    assert!(kb < 16 << 10, "a million bad lines: {kb} KB");

    let long = dir.write("long/100.jsonl", &format!("{PROCESS_100}\n"));
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&long)
            .unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            f.write_all(&chunk).unwrap();
        }
        writeln!(f, "\n{ATTACH_100}").unwrap();
    }
    let said = sharecheck(&dir)
        .args(["report", "--format", "json", "long"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&said.stderr);
    assert!(
        stderr.contains("100.jsonl:2: this line is longer than 4 MiB"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&said.stdout).unwrap();
    assert_eq!(v["calls"], 1, "the record after it is read");
    let (_, kb) = run_measured(&dir, &["report", "long"], &out);
    assert!(kb < 24 << 10, "a 64 MB line: {kb} KB");

    dir.write("ring/100.jsonl", &lines(&[PROCESS_100, PEER_100]));
    let ring = std::fs::File::create(dir.join("ring/100.jsonl.ring")).unwrap();
    let mut header = vec![0u8; 4096];
    header[..8].copy_from_slice(sharecheck_core::ring::MAGIC);
    header[8..16].copy_from_slice(&((2u64 << 30) - 4096).to_le_bytes());
    (&ring).write_all(&header).unwrap();
    ring.set_len(2 << 30).unwrap();
    for command in ["report", "cat"] {
        let said = sharecheck(&dir).args([command, "ring"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&said.stderr);
        assert!(
            stderr.contains("says its ring is 2147479552 bytes; its records are not read"),
            "{command}: {stderr}"
        );
        let (_, kb) = run_measured(&dir, &[command, "ring"], &out);
        assert!(kb < 16 << 10, "{command} of a 2 GiB ring: {kb} KB");
    }

    write_big(&dir, "big/100.jsonl", 300_000, |i| {
        format!(
            r#"{{"seq":{i},"t":{i},"tid":101,"fn":"cuCtxEnablePeerAccess","a":{{"pad":"{}"}},"r":0}}"#,
            "p".repeat(150)
        ) + "\n"
    });
    let (status, kb) = run_measured(&dir, &["cat", "big"], &out);
    assert_eq!(status, 0);
    assert_eq!(
        std::fs::read_to_string(&out).unwrap().lines().count(),
        300_001
    );
    assert!(kb < 24 << 10, "cat of a 64 MB trace: {kb} KB");
}

/// Text from a trace never reaches the terminal raw, whatever the output: DEL, a C1 control
/// (U+009B, CSI) and a bidi override (U+202E) are `\u` escapes in `cat`, JSON and SARIF, and a
/// huge value in a problem's line (a 400 KB schema version) is cut with a count.
#[test]
fn terminal_controls_from_a_trace_are_escaped_in_every_output_and_long_problems_cut() {
    let dir = TempDir::new("escapes");
    let hostile = PROCESS_100.replace("/usr/bin/app", "/usr/bin/a\u{7f}p\u{9b}2J\u{202e}p");
    let finding = ATTACH_100.replace("length must be 0", "length \u{9b}31m\u{202e} must be 0");
    dir.write("t/100.jsonl", &lines(&[&hostile, &finding]));
    let bad_v = format!("{{\"v\":{},\"seq\":0}}", "9".repeat(400_000));
    dir.write("v/100.jsonl", &format!("{bad_v}\n"));
    for args in [
        &["cat", "t"][..],
        &["report", "--format", "json", "t"],
        &["report", "--format", "sarif", "t"],
    ] {
        let out = sharecheck(&dir).args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains(['\u{7f}', '\u{9b}', '\u{202e}']),
            "{args:?}: {text}"
        );
        assert!(text.contains("\\u009b"), "{args:?}: {text}");
    }
    let out = sharecheck(&dir).args(["report", "v"]).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.len() < 2000, "{} bytes on stderr", stderr.len());
    assert!(stderr.contains("more characters)"), "{stderr}");
}

/// `report` of `dir`'s `t` through `script` (util-linux), so that its stderr is a terminal, with
/// `SHARECHECK_PROGRESS_MIN_BYTES` set to `min`: what the terminal showed.
fn report_on_a_terminal(dir: &TempDir, min: &str) -> String {
    let exe = env!("CARGO_BIN_EXE_sharecheck");
    let mut cmd = std::process::Command::new("script");
    cmd.current_dir(&dir.path)
        .args(["-qec", &format!("{exe} report t > report.txt"), "/dev/null"]);
    for var in common::isolated_vars() {
        cmd.env_remove(var);
    }
    let out = cmd
        .env(sharecheck_core::schema::env::PROGRESS_MIN_BYTES, min)
        .output()
        .expect("util-linux's `script` runs the report on a terminal");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Traces larger than the threshold get a bar on a terminal; smaller ones, and any piped
/// stderr, nothing.
#[test]
fn a_large_read_shows_progress_on_a_terminal_only() {
    let dir = two_processes();
    let shown = report_on_a_terminal(&dir, "1");
    assert!(
        shown.contains("sharecheck: reading 2 traces ["),
        "{shown:?}"
    );
    assert!(shown.contains(" left"), "{shown:?}");
    // The report itself is whole on stdout.
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("SUMMARY:"), "{report}");
    // Below the threshold: nothing on the terminal.
    assert!(!report_on_a_terminal(&dir, "100000000").contains("reading"));
    // Piped (not a terminal), whatever the threshold: nothing on stderr.
    let out = common::sharecheck(&dir)
        .args(["report", "t"])
        .env(sharecheck_core::schema::env::PROGRESS_MIN_BYTES, "1")
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A job of many processes, some with a second lane file, each with findings of several rules
/// and severities (some on the same call, some with stacks), failed frees a report-phase rule
/// explains or not, an IPC exchange the cross-process checks decide, bad lines and exits.
fn many_processes(processes: u32) -> TempDir {
    let dir = TempDir::new("report-parallel");
    let fp = |k: u32| format!("fp:{:016x}", 0xabc000 + u64::from(k % 7));
    for k in 0..processes {
        let pid = 1000 + k;
        let process = format!(
            r#"{{"v":2,"seq":0,"t":0,"tid":{pid},"event":"process","pid":{pid},"ppid":1,"exe":"/usr/bin/app{}","shim_version":"0.1.0","t0_wall_ns":{},"t0_mono_ns":5}}"#,
            k % 3,
            1_000 + u64::from(k) * 7
        );
        let mut main = vec![process.clone()];
        let mut lane = vec![process];
        for n in 1..=40u32 {
            let seq = n;
            let t = u64::from(n) * 100 + u64::from(k % 5);
            let rule = ["CUVAL-a-1", "CUVAL-b-2", "CUVAL-c-3"][(n + k) as usize % 3];
            let severity = ["error", "warning", "info"][(n * 7 + k) as usize % 3];
            let stack = format!(
                r#""stack":[{{"module":"/usr/bin/app","offset":"0x{:x}"}}]"#,
                0x1000 + (n % 4) * 16
            );
            let line = match n % 8 {
                0 => format!(
                    r#"{{"seq":{seq},"t":{t},"tid":{pid},"fn":"cuIpcGetMemHandle","a":{{"*pHandle":"{}","dptr":"0x7000{k:x}"}},"r":0}}"#,
                    fp(k)
                ),
                1 => format!(
                    r#"{{"seq":{seq},"t":{t},"tid":{pid},"fn":"cuIpcOpenMemHandle_v2","a":{{"*pdptr":"0x9000{n:x}","handle":"{}","Flags":1}},"r":0}}"#,
                    fp(k + 1)
                ),
                2 => format!(
                    r#"{{"seq":{seq},"t":{t},"tid":{pid},"fn":"cuMemFree_v2","a":{{"dptr":"0x7000{k:x}"}},"r":1,"findings":[{{"rule":"call.failed","severity":"info","kind":"misuse","message":"failed","doc":"d"}}]}}"#
                ),
                3 => format!(
                    r#"{{"seq":{seq},"t":{t},"tid":{pid},"fn":"cuMemFree_v2","a":{{"dptr":"0x7000{k:x}"}},"r":0}}"#
                ),
                4 => "not json at all".to_string(),
                _ => format!(
                    r#"{{"seq":{seq},"t":{t},"tid":{pid},"fn":"cuMemcpyPeerAsync","a":{{"ByteCount":{n}}},"r":{},"findings":[{{"rule":"{rule}","severity":"{severity}","kind":"misuse","message":"m{n}","doc":"d",{stack}}},{{"rule":"CUVAL-b-2","severity":"warning","kind":"misuse","message":"second","doc":"d"}}]}}"#,
                    n % 2
                ),
            };
            if k % 4 == 0 && n % 3 == 0 {
                lane.push(line);
            } else {
                main.push(line);
            }
        }
        if k % 5 != 0 {
            main.push(format!(
                r#"{{"seq":99,"t":9999,"tid":{pid},"event":"exit","calls":40}}"#
            ));
        }
        dir.write(
            &format!("t/{pid}.jsonl"),
            &lines(&main.iter().map(String::as_str).collect::<Vec<_>>()),
        );
        // Another process with the same pid (another host's, or a pid reused), its records at the
        // same times: findings that sort equal, kept in the order their files were read.
        if k % 10 == 3 {
            let other: Vec<String> = main.iter().map(|l| l.replace("\"m", "\"other m")).collect();
            dir.write(
                &format!("t/{pid}.jsonl.9"),
                &lines(&other.iter().map(String::as_str).collect::<Vec<_>>()),
            );
        }
        if lane.len() > 1 {
            dir.write(
                &format!("t/{pid}.lane1.jsonl"),
                &lines(&lane.iter().map(String::as_str).collect::<Vec<_>>()),
            );
        }
    }
    dir
}

/// The report read by many threads is the report read by one, byte for byte, in every format
/// and with occurrences limited or not (issue 27).
#[test]
fn a_report_read_in_parallel_is_the_report_read_in_order() {
    let dir = many_processes(150);
    let report = |jobs: &str, extra: &[&str]| {
        let out = sharecheck(&dir)
            .args(["report", "t", "--jobs", jobs])
            .args(extra)
            .output()
            .unwrap();
        (out.status.code(), out.stdout, out.stderr)
    };
    for extra in [
        &[][..],
        &["--limit", "2"],
        &["--limit", "0"],
        &["--format", "json"],
        &["--format", "sarif"],
        &["--severity", "warning"],
    ] {
        let one = report("1", extra);
        assert!(
            one.1.len() > 1000,
            "{extra:?}: {}",
            String::from_utf8_lossy(&one.1)
        );
        // Read by several threads; and with the calls written to temporary files past a few
        // in memory (issue 27), by one thread and by several.
        for (jobs, memory) in [("2", None), ("8", None), ("1", Some("3")), ("8", Some("1"))] {
            let memory = memory.map(|n| ["--memory-calls", n]);
            let extra: Vec<&str> = extra
                .iter()
                .copied()
                .chain(memory.into_iter().flatten())
                .collect();
            let many = report(jobs, &extra);
            assert!(
                one == many,
                "{extra:?} with --jobs {jobs}:\n{}\n---\n{}\n---\n{}",
                String::from_utf8_lossy(&one.1),
                String::from_utf8_lossy(&many.1),
                String::from_utf8_lossy(&many.2)
            );
        }
    }
    // The job has what the comparison is about: findings of the report phase, explained
    // failures, bad lines and several files of one process.
    let text = String::from_utf8(report("1", &["--format", "json"]).1).unwrap();
    assert!(text.contains("\"phase\":\"report\""), "{text}");
    assert!(dir.join("t/1000.lane1.jsonl").exists());
}

/// Where no temporary file can be made (TMPDIR missing), calls past `--memory-calls` stay in
/// memory: the text report is the same, and stderr says why memory grew (issue 27: bad input
/// loses nothing). (JSON and SARIF keep their findings in a temporary file, and say they cannot.)
#[test]
fn a_report_that_cannot_spill_keeps_every_call_and_says_so() {
    let dir = many_processes(20);
    let report = |tmpdir: Option<&str>, extra: &[&str]| {
        let mut cmd = sharecheck(&dir);
        cmd.args(["report", "t", "--jobs", "1"]).args(extra);
        if let Some(tmpdir) = tmpdir {
            cmd.env("TMPDIR", tmpdir);
        }
        let out = cmd.output().unwrap();
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        (out.status.code(), text(out.stdout), text(out.stderr))
    };
    let whole = report(None, &[]);
    let missing = dir.join("no-such-dir");
    let kept = report(missing.to_str(), &["--memory-calls", "2"]);
    assert_eq!((kept.0, &kept.1), (whole.0, &whole.1));
    assert!(whole.1.contains("IPC HANDLES"), "{}", whole.1);
    assert!(
        kept.2
            .contains("could not write a temporary file (TMPDIR), so every call is kept in memory"),
        "{}",
        kept.2
    );
    assert_eq!(kept.2.matches("temporary file").count(), 1, "{}", kept.2);
    assert!(!whole.2.contains("temporary"), "{}", whole.2);
}

/// `SHARECHECK_REPORT_PHASES` says on stderr how long each phase of the report took, in their
/// order, and changes nothing else; without it, stderr says nothing of phases.
#[test]
fn the_phases_of_a_report_are_timed_on_request() {
    let dir = many_processes(4);
    let report = |phases: bool, jobs: &str| {
        let mut cmd = sharecheck(&dir);
        cmd.args(["report", "t", "--jobs", jobs]);
        if phases {
            cmd.env(sharecheck_core::schema::env::REPORT_PHASES, "1");
        } else {
            cmd.env_remove(sharecheck_core::schema::env::REPORT_PHASES);
        }
        let out = cmd.output().unwrap();
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        (out.status.code(), text(out.stdout), text(out.stderr))
    };
    let plain = report(false, "2");
    assert!(!plain.2.contains("phase"), "{}", plain.2);
    for jobs in ["1", "2"] {
        let timed = report(true, jobs);
        assert_eq!((timed.0, &timed.1), (plain.0, &plain.1));
        let phases: Vec<&str> = timed
            .2
            .lines()
            .filter_map(|l| l.strip_prefix("sharecheck: phase "))
            .map(|l| l.split(':').next().unwrap())
            .filter(|p| !p.contains("batch"))
            .collect();
        assert_eq!(
            phases,
            [
                "read and merge",
                "finish the timeline",
                "cross-process checks",
                "findings",
                "write the report"
            ],
            "{}",
            timed.2
        );
        let batches = timed.2.matches("phase read a batch: ").count();
        assert_eq!(batches, usize::from(jobs == "2"), "{}", timed.2);
    }
}

/// A handle with a long history shows its first and last steps in text, and how many more
/// there are; JSON has every step.
#[test]
fn a_long_handle_history_is_shown_by_its_ends_in_text() {
    let dir = TempDir::new("report-handle-steps");
    let fp = "fp:0011223344556677";
    let exporter = [
        PROCESS_100.to_string(),
        format!(
            r#"{{"seq":1,"t":1,"tid":100,"fn":"cuIpcGetMemHandle","a":{{"*pHandle":"{fp}","dptr":"0x7000"}},"r":0}}"#
        ),
        r#"{"seq":2,"t":100000,"tid":100,"fn":"cuMemFree_v2","a":{"dptr":"0x7000"},"r":0}"#
            .to_string(),
    ];
    let mut importer = vec![PROCESS_200.to_string()];
    for k in 0..30u64 {
        importer.push(format!(
            r#"{{"seq":{},"t":{},"tid":200,"fn":"cuIpcOpenMemHandle_v2","a":{{"*pdptr":"0x9000","handle":"{fp}","Flags":1}},"r":0}}"#,
            2 * k + 1,
            10 + 100 * k
        ));
        importer.push(format!(
            r#"{{"seq":{},"t":{},"tid":200,"fn":"cuIpcCloseMemHandle","a":{{"dptr":"0x9000"}},"r":0}}"#,
            2 * k + 2,
            60 + 100 * k
        ));
    }
    let text = |l: &[String]| lines(&l.iter().map(String::as_str).collect::<Vec<_>>());
    dir.write("t/100.jsonl", &text(&exporter));
    dir.write("t/200.jsonl", &text(&importer));
    let out = sharecheck(&dir).args(["report", "t"]).output().unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    let steps = report.lines().filter(|l| l.contains(" us  pid ")).count();
    assert_eq!(steps, 20, "{report}");
    // 62 steps: the export, 30 opens, 30 closes, the free.
    assert!(
        report.contains("... 42 more steps (every step: --format json)"),
        "{report}"
    );
    let out = sharecheck(&dir)
        .args(["report", "t", "--format", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown = json["ipc"][0]["steps"].as_array().map(Vec::len);
    assert_eq!(shown, Some(62), "{json}");
}

/// Many handles seen once each: the text shows the first `--limit` handles (their steps kept,
/// not every handle's) and says how many more there are; `--limit 0` and JSON show every one.
#[test]
fn the_text_shows_the_first_handles_up_to_the_limit() {
    let dir = TempDir::new("report-many-handles");
    let (mut exporter, mut importer) =
        (vec![PROCESS_100.to_string()], vec![PROCESS_200.to_string()]);
    for k in 0..12u64 {
        let (fp, t) = (format!("fp:{:016x}", 0x100 + k), 10 * k + 1);
        exporter.push(format!(
            r#"{{"seq":{},"t":{t},"tid":100,"fn":"cuIpcGetMemHandle","a":{{"*pHandle":"{fp}","dptr":"{:#x}"}},"r":0}}"#,
            k + 1,
            0x7000 + 0x100 * k
        ));
        importer.push(format!(
            r#"{{"seq":{},"t":{},"tid":200,"fn":"cuIpcOpenMemHandle_v2","a":{{"*pdptr":"{:#x}","handle":"{fp}","Flags":1}},"r":0}}"#,
            2 * k + 1,
            t + 1,
            0x9000 + 0x100 * k
        ));
        importer.push(format!(
            r#"{{"seq":{},"t":{},"tid":200,"fn":"cuIpcCloseMemHandle","a":{{"dptr":"{:#x}"}},"r":0}}"#,
            2 * k + 2,
            t + 2,
            0x9000 + 0x100 * k
        ));
    }
    let text = |l: &[String]| lines(&l.iter().map(String::as_str).collect::<Vec<_>>());
    dir.write("t/100.jsonl", &text(&exporter));
    dir.write("t/200.jsonl", &text(&importer));
    let report = |extra: &[&str]| {
        let out = sharecheck(&dir)
            .args(["report", "t"])
            .args(extra)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = |r: &str| -> Vec<String> {
        r.lines()
            .filter(|l| l.trim_start().starts_with("fp:") && !l.contains(" us "))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let all: Vec<String> = (0..12u64)
        .map(|k| format!("fp:{:016x}", 0x100 + k))
        .collect();
    let default = report(&[]);
    assert!(default.contains("IPC HANDLES (12 handles:"), "{default}");
    assert_eq!(shown(&default), all[..10], "{default}");
    assert!(
        default.contains("    ... and 2 more handles (--limit 12 shows them; 0: all;"),
        "{default}"
    );
    let three = report(&["--limit", "3"]);
    assert_eq!(shown(&three), all[..3], "{three}");
    assert!(three.contains("... and 9 more handles"), "{three}");
    let every = report(&["--limit", "0"]);
    assert_eq!(shown(&every), all, "{every}");
    assert!(!every.contains("more handle"), "{every}");
    let json: serde_json::Value = serde_json::from_str(&report(&["--format", "json"])).unwrap();
    assert_eq!(json["ipc"].as_array().map(Vec::len), Some(12), "{json}");
}

/// Two machines' processes of one pid are two processes: two rows, each naming its machine.
#[test]
fn processes_of_one_pid_on_two_machines_are_two_rows() {
    let dir = TempDir::new("report-machines");
    for (machine, calls) in [("aaaa-1", 2), ("bbbb-2", 3)] {
        let mut l = vec![format!(
            r#"{{"v":2,"seq":0,"t":0,"tid":100,"event":"process","pid":100,"ppid":1,"exe":"/usr/bin/app","shim_version":"0.1.0","boot_id":"{machine}","host":"h","t0_wall_ns":1,"t0_mono_ns":5}}"#
        )];
        for seq in 1..=calls {
            l.push(format!(
                r#"{{"seq":{seq},"t":{seq},"tid":100,"fn":"cuCtxEnablePeerAccess","a":{{}},"r":0}}"#
            ));
        }
        dir.write(
            &format!("t/100.jsonl.{}", &machine[5..]),
            &lines(&l.iter().map(String::as_str).collect::<Vec<_>>()),
        );
    }
    let out = sharecheck(&dir).args(["report", "t"]).output().unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("2 processes"), "{report}");
    let rows: Vec<&str> = report
        .lines()
        .filter(|l| l.trim_start().starts_with("100 "))
        .collect();
    assert_eq!(rows.len(), 2, "{report}");
    assert!(
        rows[0].contains("(machine aaaa-1)") && rows[0].contains(" 2 "),
        "{report}"
    );
    assert!(
        rows[1].contains("(machine bbbb-2)") && rows[1].contains(" 3 "),
        "{report}"
    );
}

/// A directory that holds no trace itself but a tree of them (one directory per host) is read
/// whole, each host's processes apart.
#[test]
fn a_tree_of_hosts_traces_is_read_whole() {
    let dir = TempDir::new("report-tree");
    for (host, boot) in [("node-a", "aaaa"), ("node-b/rack", "bbbb")] {
        let process = format!(
            r#"{{"v":2,"seq":0,"t":0,"tid":100,"event":"process","pid":100,"ppid":1,"exe":"/usr/bin/app","shim_version":"0.1.0","boot_id":"{boot}","host":"{host}","t0_wall_ns":1,"t0_mono_ns":5}}"#
        );
        dir.write(
            &format!("t/{host}/100.jsonl"),
            &lines(&[&process, PEER_100]),
        );
    }
    // Not a trace: ignored wherever it is.
    dir.write("t/node-a/notes.txt", "hello\n");
    let out = sharecheck(&dir).args(["report", "t"]).output().unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    assert!(report.contains("2 processes"), "{report}");
    assert!(
        report.contains("(machine aaaa)") && report.contains("(machine bbbb)"),
        "{report}"
    );
    // An empty tree is still an error naming the directory.
    dir.mkdir("empty/sub");
    let out = sharecheck(&dir).args(["report", "empty"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds no"),
        "{out:?}"
    );
}

/// Four hosts' traces: `many_processes`' (cross-process IPC, findings, lanes, a pid on two
/// machines), without its bad lines, each process on host `pid % 4` (its own boot id), with
/// plain calls no check reads, some failed.
fn four_hosts() -> TempDir {
    let source = many_processes(60);
    let dir = TempDir::new("report-partial");
    for entry in std::fs::read_dir(source.join("t")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let pid: u32 = name.split('.').next().unwrap().parse().unwrap();
        let host = pid % 4;
        let boot = format!("00000000-0000-0000-0000-00000000000{host}");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut out: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| {
                l.replace(
                    "\"ppid\":1,",
                    &format!(
                        "\"ppid\":1,\"boot_id\":\"{boot}\",\"imex_domain\":\"rack-{}\",",
                        host / 2
                    ),
                )
            })
            .collect();
        // A FABRIC handle exported on host 0 and refused on host 3, in the other IMEX domain
        // (decided only where both hosts' calls meet), and imported on host 1, in the same one.
        let fabric = r#""fp:00000000000fab01","#;
        match pid {
            _ if name != format!("{pid}.jsonl") => {}
            1000 => out.push(format!(
                r#"{{"seq":300,"t":30000,"tid":{pid},"fn":"cuMemExportToShareableHandle","a":{{"*shareableHandle":{fabric}"handle":"0xa1","handleType":"CU_MEM_HANDLE_TYPE_FABRIC","flags":0}},"r":0}}"#
            )),
            1001 | 1007 => out.push(format!(
                r#"{{"seq":300,"t":30001,"tid":{pid},"fn":"cuMemImportFromShareableHandle","a":{{"handle":"0x7ffc0010","*osHandle":{fabric}"shHandleType":"CU_MEM_HANDLE_TYPE_FABRIC"}},"r":800}}"#
            )),
            _ => {}
        }
        for n in 0..30u32 {
            out.push(format!(
                r#"{{"seq":{},"t":{},"tid":{pid},"fn":"cuDeviceCanAccessPeer","a":{{"dev":0,"peerDev":1}},"r":{}}}"#,
                200 + n,
                20_000 + n,
                [0, 0, 101][n as usize % 3]
            ));
        }
        dir.write(
            &format!("hosts/h{host}/{name}"),
            &lines(&out.iter().map(String::as_str).collect::<Vec<_>>()),
        );
    }
    dir
}

/// A partial result per host, then one report of them all, is the report of every host's
/// traces read together, in every format (issue 27); the partial results keep the calls with
/// findings and those the cross-process checks read, and count the rest.
#[test]
fn the_report_of_per_host_partial_results_is_the_report_of_the_traces_together() {
    let dir = four_hosts();
    for host in 0..4 {
        let out = sharecheck(&dir)
            .args(["report", "--partial"])
            .arg(format!("parts/h{host}"))
            .arg(format!("hosts/h{host}"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("records kept whole"), "{err}");
    }
    let kept = std::fs::read_to_string(dir.join("parts/h1/1001.jsonl")).unwrap();
    let read = std::fs::read_to_string(dir.join("hosts/h1/1001.jsonl")).unwrap();
    assert!(kept.len() < read.len(), "{kept}");
    assert!(!kept.contains(r#""fn":"cuDeviceCanAccessPeer""#), "{kept}");
    assert!(kept.contains(r#""event":"partial-summary""#), "{kept}");
    assert!(kept.contains("CUDA_ERROR_INVALID_DEVICE"), "{kept}");
    for extra in [
        &[][..],
        &["--limit", "0"],
        &["--format", "json"],
        &["--format", "sarif"],
    ] {
        let report = |what: &str| {
            let out = sharecheck(&dir)
                .args(["report", what])
                .args(extra)
                .output()
                .unwrap();
            (out.status.code(), out.stdout, out.stderr)
        };
        let together = report("hosts");
        let merged = report("parts");
        assert!(together.1.len() > 1000, "{extra:?}");
        assert!(
            together == merged,
            "{extra:?}:\n{}\n---\n{}\n---\n{}",
            String::from_utf8_lossy(&together.1),
            String::from_utf8_lossy(&merged.1),
            String::from_utf8_lossy(&merged.2)
        );
    }
    let text = String::from_utf8(
        sharecheck(&dir)
            .args(["report", "parts", "--format", "json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(text.contains("\"phase\":\"report\""), "{text:.500}");
    let refused: Vec<&str> = text
        .match_indices("cuMemImportFromShareableHandle.fabric-other-imex-domain")
        .map(|(at, _)| &text[at..])
        .collect();
    assert!(!refused.is_empty(), "{text:.500}");
    for part in [&["hosts/h0", "hosts/h3"][..], &["hosts/h0", "hosts/h1"]] {
        // Each host's traces alone cannot decide it; the two domains' hosts together do.
        let out = sharecheck(&dir)
            .args(["report", "--format", "json"])
            .args(part)
            .output()
            .unwrap();
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let found = summary["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == "cuMemImportFromShareableHandle.fabric-other-imex-domain")
            .count();
        assert_eq!(found, usize::from(part[1] == "hosts/h3"), "{part:?}");
    }
}

/// A partial result is never written over the traces it reads.
#[test]
fn a_partial_result_does_not_overwrite_its_traces() {
    let dir = four_hosts();
    let before = std::fs::read(dir.join("hosts/h0/1000.jsonl")).unwrap();
    let out = sharecheck(&dir)
        .args(["report", "--partial", "hosts/h0", "hosts/h0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("one of the traces read"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read(dir.join("hosts/h0/1000.jsonl")).unwrap(),
        before
    );
}
