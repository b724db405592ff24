//! The trace writer as a host program lives and dies (`tests/c/writer_life.c` on the simulated
//! driver): what is on disk afterwards against what the program completed.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// Held by the tests that run many threads or processes at once, so that they run one at a time:
/// together (with the rest of the suite) they oversubscribe a 2-core machine by hundreds of
/// threads, and each measures what a process does, not what a starved machine does.
fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn program() -> &'static (Scratch, PathBuf) {
    static BUILT: OnceLock<(Scratch, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let s = Scratch::new("writer_life_build");
        let libs = s.sim_libs();
        let exe = s.compile(
            "writer_life.c",
            "writer_life",
            &[&format!("-L{}", libs.display()), "-lcuda", "-pthread"],
        );
        (s, exe)
    })
}

/// Runs the program under the shim in its own scratch directory, with a time limit.
fn run(name: &str, args: &[&str]) -> (Scratch, Output) {
    run_with_options(name, args, "")
}

/// [`run`] with `SHARECHECK_OPTIONS`.
fn run_with_options(name: &str, args: &[&str], options: &str) -> (Scratch, Output) {
    let (_, exe) = program();
    let s = Scratch::new(name);
    let mut cmd = s.under_shim(exe);
    cmd.args(args)
        .current_dir(&s.dir)
        .env(sharecheck_core::schema::env::OPTIONS, options);
    let out = run_with_timeout(cmd, 120);
    (s, out)
}

/// `sharecheck report` of a scratch directory's traces: its exit status and text.
fn report_text(s: &Scratch) -> (Option<i32>, String) {
    let out = std::process::Command::new(cli())
        .arg("report")
        .arg(s.traces())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn a_findings_level_trace_keeps_the_calls_with_findings_and_those_the_report_reads() {
    let (s, out) = run_with_options(
        "writer_findings_level",
        &["findings", "20000", "1000"],
        "trace_level=findings",
    );
    assert!(out.status.success(), "{out:?}");
    let records = s.records();
    let can: Vec<&Value> = records
        .iter()
        .filter(|r| r["fn"] == "cuDeviceCanAccessPeer")
        .collect();
    assert_eq!(can.len(), 20, "only the calls with a finding");
    for r in &can {
        assert_eq!(r["a"]["peerDev"], 9);
        assert_eq!(
            r["findings"][0]["rule"],
            "cuDeviceCanAccessPeer.invalid-device"
        );
    }
    // A free is read by the report's cross-process checks: kept without a finding.
    assert_eq!(
        records.iter().filter(|r| r["fn"] == "cuMemFree_v2").count(),
        1
    );
    let process = records.iter().find(|r| r["event"] == "process").unwrap();
    assert_eq!(process["trace_level"], "findings");
    // The exit record still counts every call made.
    assert!(exit_calls(&records).unwrap() >= 20000);
    let (status, text) = report_text(&s);
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains("trace_level=findings: 21 of "), "{text}");
    assert!(text.contains("SUMMARY: 20 errors"), "{text}");
    // The full level (the default) records every call.
    let (s, out) = run("writer_calls_level", &["findings", "2000", "1000"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(can_access_calls(&s.records()), 2000);
    assert!(s
        .records()
        .iter()
        .all(|r| r["event"] != "process" || r["trace_level"].is_null()));
}

/// A record longer than a chunk of the ring (a finding's stack of over 100 frames) is written whole,
/// in a reservation of its own, as every other record is: none is lost, and the ones after it
/// follow.
#[test]
fn a_record_longer_than_a_chunk_is_kept_whole() {
    let (s, out) = run_with_options(
        "writer_long_record",
        &["deep", "3", "200"],
        "stack_depth=256",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(done(&out), 6);
    let records = s.records();
    assert_each_call_once(&records);
    assert_eq!(can_access_calls(&records), 6);
    let long: Vec<&Value> = records.iter().filter(|r| r["a"]["peerDev"] == 9).collect();
    assert_eq!(long.len(), 3, "every long record is there");
    for r in long {
        assert!(
            r.to_string().len() > 4096,
            "longer than a chunk: {}",
            r.to_string().len()
        );
        let frames = r["findings"][0]["stack"].as_array().map_or(0, Vec::len);
        assert!(frames > 100, "{frames} frames");
        assert_eq!(
            r["findings"][0]["rule"],
            "cuDeviceCanAccessPeer.invalid-device"
        );
    }
    assert_eq!(exit_calls(&records), Some(6));
}

#[test]
fn a_trace_limit_cuts_the_file_says_so_and_keeps_the_exit_record() {
    let limit = 65536u64;
    let (s, out) = run_with_options(
        "writer_trace_limit",
        &["findings", "200000", "100000"],
        &format!("trace_limit={limit}"),
    );
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("reached trace_limit (65536 bytes)").count(),
        1,
        "{stderr}"
    );
    for entry in std::fs::read_dir(s.traces()).unwrap() {
        let path = entry.unwrap().path();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= limit, "{}: {size}", path.display());
        assert!(!path
            .to_string_lossy()
            .ends_with(sharecheck_core::ring::SUFFIX));
    }
    let records = s.records();
    let n = records.len();
    assert!(
        n > 100 && can_access_calls(&records) < 200000,
        "{n} records"
    );
    // The file ends with the line that says it reached the limit, then the exit record.
    assert_eq!(records[n - 2]["event"], "trace-limit");
    assert_eq!(records[n - 2]["limit"], limit);
    assert_eq!(records[n - 1]["event"], "exit");
    assert_eq!(records[n - 1]["findings_reported"], 2);
    let (_, text) = report_text(&s);
    assert!(text.contains("reached trace_limit (65536 bytes)"), "{text}");
    assert!(
        text.contains("trace cut at trace_limit: 2 more finding(s) were reported on stderr"),
        "{text}"
    );
}

#[test]
fn a_crashed_process_appears_in_the_report_with_everything_it_recorded() {
    let (s, out) = run("writer_report_segv", &["segv", "5000"]);
    assert_eq!(out.status.code(), None, "killed by SIGSEGV: {out:?}");
    assert_eq!(done(&out), 5000);
    let (status, text) = report_text(&s);
    assert_eq!(status, Some(0), "{text}");
    // Every call it completed, read from its file and its ring, and its row says how it ended.
    assert!(
        text.contains("sharecheck report: 5000 calls in 1 process"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("writer_life") && l.contains("no exit record"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(" 5000 "), "{row}");
    // Its ring (the process is gone) is folded into its trace.
    assert!(
        text.contains("folded 1 ring file(s) left by processes that ended without their exit"),
        "{text}"
    );
}

#[test]
fn a_crashed_process_s_ring_is_not_read_past_its_trace_limit() {
    let (s, out) = run_with_options(
        "writer_trace_limit_kill9",
        &["kill9", "200000"],
        "trace_limit=64K",
    );
    assert_eq!(out.status.code(), None, "killed: {out:?}");
    // The ring stays (the process had no exit handlers); the reader stops at the limit's line.
    let (_, text) = report_text(&s);
    let calls: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("sharecheck report: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(calls > 100 && calls < 1000, "{calls} calls read: {text}");
    assert!(text.contains("no exit record"), "{text}");
}

/// The records of every trace file, as a reader of a crashed process sees them: the file (as far
/// as the ring says it was appended), then what its ring file holds past it (`sharecheck_core::ring::recover`; a record both hold is read
/// once); NUL bytes are space reserved but never filled and are skipped; every other line must be
/// a whole record.
fn records_allowing_unused_tail(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .to_string_lossy()
            .ends_with(sharecheck_core::ring::SUFFIX)
        {
            continue;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let ring_path = format!("{}{}", path.display(), sharecheck_core::ring::SUFFIX);
        if let Ok(ring) = std::fs::read(&ring_path) {
            // The file as the ring says it was when the process died: a segment whose append
            // the process's death cut short (the kernel stops a write for a fatal signal) is
            // read from the ring, as every reader does.
            let at = sharecheck_core::ring::FILE_AT;
            let appended = u64::from_le_bytes(ring[at..at + 8].try_into().unwrap());
            bytes.truncate(appended.min(bytes.len() as u64) as usize);
            let len = bytes.len() as u64;
            bytes.extend(sharecheck_core::ring::recover(len, &ring).unwrap());
        }
        let text = String::from_utf8(bytes).unwrap();
        let mut seqs = std::collections::HashSet::new();
        for piece in text.split('\0').filter(|p| !p.is_empty()) {
            for line in piece.lines().filter(|l| !l.trim().is_empty()) {
                let record: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: a cut record: {line}: {e}", path.display()));
                if seqs.insert(record["seq"].as_u64()) {
                    out.push(record);
                }
            }
        }
    }
    out
}

/// Every call record of one process is there once: no two share a sequence number.
fn assert_each_call_once(records: &[Value]) {
    let mut seqs: Vec<(String, u64)> = calls(records)
        .iter()
        .map(|r| (r["pid"].to_string(), r["seq"].as_u64().unwrap()))
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), calls(records).len(), "every record once");
}

fn done(out: &Output) -> usize {
    printed(out, "DONE").parse().unwrap()
}

fn can_access_calls(records: &[Value]) -> usize {
    records
        .iter()
        .filter(|r| r["fn"] == "cuDeviceCanAccessPeer")
        .count()
}

#[test]
fn every_completed_record_survives_a_crash_abort_underscore_exit_or_kill_9() {
    for (mode, signal) in [
        ("segv", Some(libc::SIGSEGV)),
        ("abort", Some(libc::SIGABRT)),
        ("underscore-exit", None),
        ("kill9", Some(libc::SIGKILL)),
    ] {
        let (s, out) = run(&format!("writer_{mode}"), &[mode, "3000"]);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), signal, "{mode}: {out:?}");
        let records = records_allowing_unused_tail(&s.traces());
        assert_eq!(
            can_access_calls(&records),
            done(&out),
            "{mode}: every call the program completed is on disk"
        );
        assert_eq!(
            records[0]["event"], "process",
            "{mode}: the header is first"
        );
        // `sharecheck report` folds the ring into the trace (its process is gone) and says so;
        // a second report reads every record from the trace alone.
        let calls = records.iter().filter(|r| r.get("fn").is_some()).count() as u64;
        for (pass, says) in [(0, "folded 1 ring file(s)"), (1, "")] {
            let (summary, stderr) = report_json(&s);
            assert_eq!(summary["calls"].as_u64(), Some(calls), "{mode} {pass}");
            assert!(stderr.contains(says), "{mode} {pass}: {stderr}");
            assert!(!stderr.contains("ring file,"), "{mode} {pass}: {stderr}");
        }
        assert_eq!(ring_files(&s), 0, "{mode}: the ring is gone");
    }
}

/// `sharecheck report --format json` of a scratch directory's traces: the summary and stderr.
fn report_json(s: &Scratch) -> (Value, String) {
    let report = std::process::Command::new(cli())
        .args(["report", "--format", "json"])
        .arg(s.traces())
        .output()
        .unwrap();
    assert_eq!(report.status.code(), Some(0), "{report:?}");
    (
        serde_json::from_slice(&report.stdout).unwrap(),
        String::from_utf8_lossy(&report.stderr).into_owned(),
    )
}

fn ring_files(s: &Scratch) -> usize {
    std::fs::read_dir(s.traces())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .to_string_lossy()
                .ends_with(sharecheck_core::ring::SUFFIX)
        })
        .count()
}

/// A trace whose process record names another boot (another machine's, on a shared file
/// system: its pid says nothing here) keeps its ring through `report`, which reads it; once the
/// record names this boot, `report` folds it. (30,000 calls: the writer thread has appended the
/// process record to the file, where the test rewrites it.)
#[test]
fn report_folds_only_the_rings_of_processes_of_this_boot() {
    let (s, out) = run("writer_report_fold", &["underscore-exit", "30000"]);
    assert!(out.status.success(), "{out:?}");
    let trace = s.traces().join(format!("{}.jsonl", out_pid(&s)));
    let text = std::fs::read_to_string(&trace).unwrap();
    let boot = sharecheck_core::ring::boot_id().expect("this machine's boot id");
    assert!(
        text.contains(&format!("\"boot_id\":\"{boot}\"")),
        "{text:.300}"
    );
    // And the machine by name.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert!(
        text.contains(&format!("\"host\":\"{}\"", host.trim())),
        "{text:.300}"
    );
    let other = text.replacen(&boot, "00000000-0000-0000-0000-000000000000", 1);
    std::fs::write(&trace, other).unwrap();
    let (summary, stderr) = report_json(&s);
    assert_eq!(summary["calls"], 30000, "{stderr}");
    assert!(stderr.contains("read from its ring file"), "{stderr}");
    assert_eq!(ring_files(&s), 1, "{stderr}");
    std::fs::write(&trace, text).unwrap();
    let (summary, stderr) = report_json(&s);
    assert_eq!(summary["calls"], 30000, "{stderr}");
    assert!(stderr.contains("folded 1 ring file(s)"), "{stderr}");
    assert_eq!(ring_files(&s), 0, "{stderr}");
}

/// The pid of the one trace file in a scratch directory.
fn out_pid(s: &Scratch) -> String {
    let names: Vec<String> = std::fs::read_dir(s.traces())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].trim_end_matches(".jsonl").to_string()
}

#[test]
fn a_program_that_closes_every_fd_and_reuses_the_number_keeps_its_file_to_itself() {
    let (s, out) = run("writer_closefrom", &["closefrom", "12000", "data.txt"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(s.path("data.txt")).unwrap(),
        "the program's own data\n",
        "no trace record landed in the program's file"
    );
    let records = s.records();
    assert_eq!(can_access_calls(&records), done(&out));
    // 24000 records are more than two chunks: the trace grew after its descriptor's number was
    // reused.
    let size: u64 = std::fs::read_dir(s.traces())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(size > 2 * (1 << 20), "{size} bytes");
}

#[test]
fn a_file_size_limit_stops_tracing_with_one_warning_and_never_signals_the_host() {
    // Below the writer's first chunk: nothing can be traced, and the program runs as without it.
    let (_, out) = run("writer_fsize_small", &["fsize", "262144", "100"]);
    assert_eq!(out.status.code(), Some(7), "no SIGXFSZ: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("RLIMIT_FSIZE").count(), 1, "{stderr}");
    // A limit above the ring (4 MiB): tracing stops at it; the program still exits as it meant
    // to. (More calls than the file and the ring hold together: the ring holds about 70000
    // compact records.)
    let (s, out) = run("writer_fsize_big", &["fsize", "6291456", "300000"]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let records = records_allowing_unused_tail(&s.traces());
    let traced = can_access_calls(&records);
    assert!(
        traced > 1000 && traced < 300000,
        "{traced} records before the limit"
    );
    for entry in std::fs::read_dir(s.traces()).unwrap() {
        let entry = entry.unwrap();
        let size = entry.metadata().unwrap().len();
        assert!(size <= 6291456, "{}: {size}", entry.path().display());
    }
    // The report says it exited normally with tracing stopped, not that it crashed (the ring
    // it leaves says so: its exit record could not be written).
    let (_, text) = report_text(&s);
    assert!(!text.contains("crashed"), "{text}");
    assert!(
        text.contains("exited normally; tracing had stopped"),
        "{text}"
    );
    assert!(
        text.contains("tracing stopped before the process exited"),
        "{text}"
    );
}

/// The `calls` of the process's `exit` record.
fn exit_calls(records: &[Value]) -> Option<u64> {
    let exits: Vec<&Value> = records.iter().filter(|r| r["event"] == "exit").collect();
    assert_eq!(exits.len(), 1, "one exit record");
    exits[0]["calls"].as_u64()
}

/// Along each thread, `seq` increases with `t`: threads number their records from blocks of
/// their own, and a thread's records keep its order.
fn assert_seq_follows_each_thread(records: &[Value]) {
    let mut last: std::collections::HashMap<String, (u64, u64)> = Default::default();
    for r in calls(records) {
        let at = (r["t"].as_u64().unwrap(), r["seq"].as_u64().unwrap());
        if let Some(before) = last.insert(r["tid"].to_string(), at) {
            assert!(before.1 < at.1, "tid {}: {before:?} then {at:?}", r["tid"]);
        }
    }
}

#[test]
fn a_storm_of_64_threads_writes_every_record_whole() {
    let _heavy = heavy();
    let (s, out) = run("writer_storm", &["storm", "64", "20000"]);
    assert!(out.status.success(), "{out:?}");
    let records = s.records();
    assert_eq!(can_access_calls(&records), 64 * 20000);
    assert_each_call_once(&records);
    assert_seq_follows_each_thread(&records);
    assert_eq!(exit_calls(&records), Some(64 * 20000));
    std::fs::remove_dir_all(s.traces()).unwrap();
}

#[test]
fn a_thousand_forks_under_a_4_thread_storm_never_hang_and_each_child_has_its_own_file() {
    let _heavy = heavy();
    let (s, out) = run("writer_forks", &["forks", "4", "1000", "50"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(printed(&out, "HANGS"), "0");
    assert_eq!(printed(&out, "FAILED"), "0");
    // The parent's lanes (`PID.laneK.jsonl`) aside, one file per process.
    let files = std::fs::read_dir(s.traces())
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".lane")
        })
        .count();
    assert_eq!(files, 1001, "the parent's file and one per child");
    // Each child's file on its own (the parent's storm records, millions, are not held).
    let mut children = 0;
    for entry in std::fs::read_dir(s.traces()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains(".lane") || std::fs::metadata(&path).unwrap().len() > 1 << 20 {
            continue; // the parent's
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let records: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a whole record"))
            .collect();
        let calls = records.iter().filter(|r| r["fn"].is_string()).count();
        children += usize::from(calls == 50 && exit_calls(&records) == Some(50));
    }
    assert_eq!(
        children, 1000,
        "every child traced its 50 calls and exited cleanly"
    );
}

/// Schema v2: a plain call's record holds only `seq`, `t`, `tid`, `fn`, `a` and `r` (the process
/// record says the rest once per file) and is at most 128 bytes; `durations=1` adds `d`.
#[test]
fn a_plain_call_record_is_at_most_128_bytes_and_durations_are_asked_for() {
    let check = |name: &str, options: Option<&str>, keys: &[&str]| {
        let (_, exe) = program();
        let s = Scratch::new(name);
        let mut cmd = s.under_shim(exe);
        cmd.args(["storm", "1", "2000"]).current_dir(&s.dir);
        if let Some(options) = options {
            cmd.env(sharecheck_core::schema::env::OPTIONS, options);
        }
        let out = run_with_timeout(cmd, 120);
        assert!(out.status.success(), "{out:?}");
        let files: Vec<PathBuf> = std::fs::read_dir(s.traces())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        // The space reserved ahead of the records (4 MiB at a time) is given back at exit.
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&files[0]).unwrap();
        assert!(
            meta.blocks() * 512 < meta.len() + (1 << 20),
            "{} bytes allocated to a trace of {}",
            meta.blocks() * 512,
            meta.len()
        );
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("\"cuDeviceCanAccessPeer\""))
            .collect();
        assert_eq!(lines.len(), done(&out));
        if options.is_none() {
            // What the file costs per record, the padding that closes each thread's chunk of the
            // trace (trailing spaces) included.
            let per_record = text.len() / text.lines().count();
            assert!(
                per_record <= 128,
                "{per_record} bytes per record in the file"
            );
        }
        for line in lines {
            // A record that closed its thread's chunk carries the padding as trailing spaces.
            let line = line.trim_end_matches(' ');
            let record: Value = serde_json::from_str(line).unwrap();
            let mut got: Vec<&str> = record
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            got.sort_unstable();
            assert_eq!(got, keys, "{line}");
            assert_eq!(record["a"]["*canAccessPeer"], 1, "{line}");
            // The bound is for the default record; `durations=1` adds `,"d":N` by request.
            if options.is_none() {
                assert!(
                    line.len() < 128,
                    "{} bytes with its newline: {line}",
                    line.len() + 1
                );
            }
        }
    };
    check("record_size", None, &["a", "fn", "r", "seq", "t", "tid"]);
    check(
        "record_durations",
        Some("durations=1"),
        &["a", "d", "fn", "r", "seq", "t", "tid"],
    );
}

/// Threads still alive at exit hold numbers they took for records they never made: the exit
/// record counts the calls made, not the numbers handed out.
#[test]
fn the_exit_record_counts_the_calls_of_threads_still_alive() {
    let (s, out) = run("writer_live", &["live", "7", "100"]);
    assert!(out.status.success(), "{out:?}");
    let records = s.records();
    assert_eq!(can_access_calls(&records), done(&out));
    assert_eq!(exit_calls(&records), Some(done(&out) as u64));
    assert_each_call_once(&records);
    assert_seq_follows_each_thread(&records);
}

/// A thread that made a few calls and then idles keeps its chunk of the trace open; while the
/// main thread writes many times the ring, the idle chunk is closed for it (the segment it is in
/// would otherwise hold up every later one and stop tracing after 2 s), and its records are kept.
#[test]
fn an_idle_threads_chunk_never_holds_up_the_trace() {
    // 200000 compact records are about 12 MB: three laps of the 4 MiB ring.
    let (s, out) = run("writer_idle", &["idle", "200000"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "no warning: {out:?}");
    let records = s.records();
    assert_eq!(can_access_calls(&records), done(&out));
    let mut per_thread = std::collections::BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r["fn"] == "cuDeviceCanAccessPeer")
    {
        *per_thread.entry(r["tid"].to_string()).or_insert(0) += 1;
    }
    let mut counts: Vec<i32> = per_thread.into_values().collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        [3, 200000],
        "the idle thread's calls and the main thread's"
    );
}

/// The shim's writer thread runs none of the program's signal handlers: every signal that can be
/// blocked is blocked on it. There is one per process, named `sharecheck-wr`.
#[test]
fn the_writer_thread_blocks_every_signal_but_sigsys() {
    let (_, out) = run("writer_thread", &["wrthread", "100"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(printed(&out, "WRITER_THREADS"), "1");
    let mask = u64::from_str_radix(&printed(&out, "SIGBLK"), 16).unwrap();
    // A seccomp trap of the thread's own system call: the program's handler answers it (a
    // blocked SIGSYS would kill the process), as the membarrier test shows.
    assert_eq!(
        mask & (1 << (libc::SIGSYS - 1)),
        0,
        "SIGSYS is blocked: {mask:x}"
    );
    for signal in 1..=31u32 {
        if signal == libc::SIGKILL as u32
            || signal == libc::SIGSTOP as u32
            || signal == libc::SIGSYS as u32
        {
            continue;
        }
        assert_ne!(
            mask & (1 << (signal - 1)),
            0,
            "signal {signal} is blocked: {mask:x}"
        );
    }
}

/// A thread whose first covered call is made in a signal handler calls nothing that takes
/// `malloc`'s lock (a handler may have interrupted `malloc`): libc's heap grows by exactly what it
/// grows by without the shim (the simulated driver's own). The shim's own allocations are on its
/// lock-free heap (`src/heap.rs`), which `mallinfo2` does not see; this catches a libc function
/// on the path that allocates for itself.
#[test]
fn a_threads_first_record_in_a_signal_handler_allocates_nothing() {
    let s = Scratch::new("signal_record");
    let exe = signal_record(&s);
    let plain = run_with_timeout(plain_command(&s, &exe), 60);
    assert!(plain.status.success(), "{plain:?}");
    let traced = run_with_timeout(s.under_shim(&exe), 60);
    assert!(traced.status.success(), "{traced:?}");
    assert_eq!(handler_heap(&traced), handler_heap(&plain), "{traced:?}");
    let records = s.records();
    assert_eq!(
        can_access_calls(&records),
        2,
        "the handler's call is traced"
    );
}

/// The process's first record made in a signal handler opens the trace but starts no thread
/// there: `pthread_create` allocates the new thread's TLS with `malloc` and takes the loader's
/// stack lock, which the code the handler interrupted may hold (on R580 such a handler hung 1
/// run in 10 to 28). libc's heap grows by what it grows by without the shim, no writer thread is
/// there after the handler, and one is there once the program's calls outside a handler have
/// taken a new chunk; every call is traced.
#[test]
fn the_process_first_record_in_a_signal_handler_starts_no_thread_there() {
    let s = Scratch::new("signal_record_first");
    let exe = signal_record(&s);
    let args = ["first", "300"];
    let mut plain = plain_command(&s, &exe);
    plain.args(args);
    let plain = run_with_timeout(plain, 60);
    assert!(plain.status.success(), "{plain:?}");
    assert_eq!(printed(&plain, "WRITER_THREADS"), "0");
    let mut traced = s.under_shim(&exe);
    traced.args(args);
    let traced = run_with_timeout(traced, 60);
    assert!(traced.status.success(), "{traced:?}");
    assert_eq!(handler_heap(&traced), handler_heap(&plain), "{traced:?}");
    assert_eq!(printed(&traced, "WRITER_AFTER_HANDLER"), "0", "{traced:?}");
    assert_eq!(printed(&traced, "WRITER_THREADS"), "1", "{traced:?}");
    assert_eq!(can_access_calls(&s.records()), 301);

    // A process whose only record is the handler's: no writer thread ever, and the record is
    // kept, counted by the exit record.
    let alone = Scratch::new("signal_record_first_alone");
    let mut traced = alone.under_shim(&exe);
    traced.args(["first", "0"]);
    let traced = run_with_timeout(traced, 60);
    assert!(traced.status.success(), "{traced:?}");
    assert_eq!(printed(&traced, "WRITER_THREADS"), "0", "{traced:?}");
    let records = alone.records();
    assert_eq!(can_access_calls(&records), 1, "{records:?}");
    let exits: Vec<_> = records.iter().filter(|r| r["event"] == "exit").collect();
    assert_eq!(exits.len(), 1, "{records:?}");
    assert_eq!(exits[0]["calls"], 1, "{records:?}");
}

/// A program that keeps a signal blocked with no handler (for `sigwait` or a `signalfd`) is not
/// in a handler: its first record starts the writer thread, as any program's does.
#[test]
fn a_signal_kept_blocked_without_a_handler_does_not_hold_back_the_writer_thread() {
    let s = Scratch::new("signal_record_sigwait");
    let exe = signal_record(&s);
    let mut traced = s.under_shim(&exe);
    traced.args(["sigwait", "3"]);
    let traced = run_with_timeout(traced, 60);
    assert!(traced.status.success(), "{traced:?}");
    assert_eq!(printed(&traced, "WRITER_THREADS"), "1", "{traced:?}");
    assert_eq!(can_access_calls(&s.records()), 3);
}

/// `tests/c/signal_record.c`, built in `s`.
fn signal_record(s: &Scratch) -> std::path::PathBuf {
    let libs = s.sim_libs();
    s.compile(
        "signal_record.c",
        "signal_record",
        &[&format!("-L{}", libs.display()), "-lcuda", "-pthread"],
    )
}

/// `exe` on the simulated driver, without the shim.
fn plain_command(s: &Scratch, exe: &Path) -> std::process::Command {
    let mut plain = std::process::Command::new(exe);
    plain.env("LD_LIBRARY_PATH", s.sim_libs()).env(
        sharecheck_core::schema::env::SIM_STATE_DIR,
        s.path("simstate-plain"),
    );
    plain
}

/// What `signal_record` says libc's heap grew by during the handler's call.
fn handler_heap(out: &Output) -> i64 {
    printed(out, "HANDLER_HEAP").parse().unwrap()
}

/// More threads alive at once than the writer has slots for (4095 of their own): the rest share
/// one slot, and every record of every thread is kept whole, once.
#[test]
fn more_threads_than_slots_share_one_and_lose_nothing() {
    let _heavy = heavy();
    let (s, out) = run("writer_many", &["many", "4200", "5"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "no warning: {out:?}");
    let records = s.records();
    assert_eq!(can_access_calls(&records), 4200 * 10);
    assert_each_call_once(&records);
}

/// Threads spread over lanes, then `kill -9`: every lane's file and ring together hold every
/// record the threads completed, each once.
#[test]
fn every_lane_keeps_its_records_through_kill_9() {
    let (s, out) = run("writer_storm_kill9", &["storm-kill9", "8", "3000"]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{out:?}");
    let records = records_allowing_unused_tail(&s.traces());
    assert_eq!(can_access_calls(&records), done(&out));
    let headers = records.iter().filter(|r| r["event"] == "process").count();
    let files = std::fs::read_dir(s.traces())
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .path()
                .to_string_lossy()
                .ends_with(".ring")
        })
        .count();
    assert_eq!(
        headers, files,
        "each lane's file starts with the process record"
    );
    // The 8 threads hold slots 0 to 7: every lane is used, as many as the CPUs (at most 8).
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let cpus = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        libc::CPU_COUNT(&set) as usize
    };
    assert_eq!(files, cpus.clamp(1, 8), "one file per lane");

    // `sharecheck cat` prints the same records, the rings' included, as JSON Lines.
    let cat = std::process::Command::new(common::cli())
        .arg("cat")
        .arg(s.traces())
        .output()
        .unwrap();
    assert!(cat.status.success(), "{cat:?}");
    let printed: Vec<Value> = String::from_utf8(cat.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(can_access_calls(&printed), done(&out));
    assert_eq!(printed.len(), records.len());
}

/// Two multi-threaded processes given one trace name (no `%p`): the second finds every lane's
/// name taken and writes `NAME.PID` for each, as for lane 0; nothing of the first is overwritten.
#[test]
fn lanes_whose_names_are_taken_go_to_name_dot_pid() {
    let (_, exe) = program();
    let s = Scratch::new("writer_lane_names");
    let fixed = s.traces().join("run.jsonl");
    let mut total = 0;
    for _ in 0..2 {
        total += done(&storm_traced_to(&s, exe, &fixed));
    }
    let records = s.records();
    assert_eq!(can_access_calls(&records), total);
    assert_each_call_once(&records);
    let names: Vec<String> = std::fs::read_dir(s.traces())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let taken = names.iter().filter(|n| !n.ends_with(".jsonl")).count();
    assert_eq!(
        taken * 2,
        names.len(),
        "the second run's files are NAME.PID: {names:?}"
    );
}

/// `storm 8 3000` under the shim, traced to the fixed name `trace`; it ran well and said nothing.
fn storm_traced_to(s: &Scratch, exe: &Path, trace: &Path) -> Output {
    let mut cmd = s.under_shim(exe);
    cmd.args(["storm", "8", "3000"])
        .current_dir(&s.dir)
        .env(sharecheck_core::schema::env::TRACE, trace);
    let out = run_with_timeout(cmd, 120);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    out
}

/// The shim is linked `-z nodelete`: a program that `dlopen`s and `dlclose`s it leaves it mapped,
/// so a writer thread it started never runs unmapped code.
#[test]
fn a_dlclosed_shim_stays_mapped() {
    let s = Scratch::new("dlopen_shim");
    let exe = s.compile("dlopen_shim.c", "dlopen_shim", &["-ldl"]);
    let out = run_ok(std::process::Command::new(&exe).arg(shim()));
    assert_eq!(printed(&out, "MAPPED"), "1");
}

/// `exit()` from one thread while others make calls without pause ends in bounded time: the
/// exiting thread numbers no more calls, waits a bounded time for those in flight, and then for
/// records being copied (it used to wait for bytes never counted: 4 of 8 runs hung over 120 s).
/// Every record is whole and once, and the exit record counts exactly the calls recorded. 200
/// runs, four at a time.
#[test]
fn an_exit_while_other_threads_trace_never_stalls_and_counts_what_it_recorded() {
    let _heavy = heavy();
    let runs: Vec<(Scratch, Output, std::time::Duration)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                scope.spawn(move || {
                    (0..50)
                        .map(|i| {
                            let started = std::time::Instant::now();
                            let (s, out) = run(
                                &format!("writer_exitstorm_{worker}_{i}"),
                                &["exitstorm", "6", "300"],
                            );
                            (s, out, started.elapsed())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(runs.len(), 200);
    let slowest = runs.iter().map(|r| r.2).max().unwrap();
    let mut unfinished = Vec::new();
    for (s, out, took) in &runs {
        assert!(out.status.success(), "{out:?}");
        assert!(took.as_secs() < 10, "an exit took {took:?}: {out:?}");
        let t = tally_once(s);
        assert!(t.found >= 300, "the main thread's calls at least: {t:?}");
        t.assert_counted();
        if t.unfinished > 0 {
            unfinished.push((t, *took));
        }
        std::fs::remove_dir_all(&s.dir).unwrap();
    }
    eprintln!(
        "slowest of 200 exits: {slowest:?}; exits with calls still being recorded: {unfinished:?}"
    );
}

/// `exit()` from a signal handler that interrupted the thread's own covered call, which may
/// hold a record number, a chunk being copied or the appender's flag, none of which can move
/// while the exit runs: the exit does not wait for the thread it runs on (it waited 7 s for it),
/// and its record counts such a call as still being recorded.
#[test]
fn an_exit_from_a_signal_handler_does_not_wait_for_the_call_it_interrupted() {
    let _heavy = heavy();
    let mut interrupted = 0;
    for i in 0..20 {
        let started = std::time::Instant::now();
        let (s, out) = run(
            &format!("writer_handler_exit_{i}"),
            &["handler-exit", "100"],
        );
        let took = started.elapsed();
        assert!(out.status.success(), "{out:?}");
        let t = tally_once(&s);
        assert!(t.found >= 100, "{t:?}");
        t.assert_counted();
        assert!(t.unfinished <= 1, "its own call at most: {t:?}");
        interrupted += t.unfinished;
        // A run takes 20 to 110 ms; a wait for this thread's own work lasts 1 s (a chunk being
        // copied, the appender's flag) or 5 s (a number in flight).
        assert!(took.as_millis() < 900, "the exit took {took:?} ({t:?})");
        std::fs::remove_dir_all(&s.dir).unwrap();
    }
    assert!(
        interrupted > 0,
        "the handler interrupted a call being recorded"
    );
}

/// A covered call made in a signal handler that interrupted a covered call (in the shim's own
/// work or in the driver) is recorded and counted: the trace holds exactly the calls the program
/// completed, its threads' and its handlers' (the guard used to take the handler's call for the
/// shim's own and drop it: 8,593 of 11,909 in one run).
#[test]
fn every_call_a_signal_handler_makes_is_recorded_and_counted() {
    let _heavy = heavy();
    let (s, out) = run("writer_sigstorm", &["sigstorm", "8", "40000"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "no warning: {out:?}");
    let in_handlers: usize = printed(&out, "HANDLER_CALLS").parse().unwrap();
    assert!(in_handlers > 0, "the timer interrupted the calls");
    let t = tally_once(&s);
    assert_eq!(
        (t.found, t.exit, t.unfinished),
        (done(&out) as u64, Some(done(&out) as u64), 0)
    );
}

/// A covered call made in a signal handler that interrupted the shim's work or its driver call is
/// checked too, once its thread leaves the shim: every misuse a handler made has its finding in
/// its record, and every valid call its out-parameter as the driver wrote it (copied in the
/// handler: the handler's stack is gone when the record is written). The interrupted calls used
/// to be recorded unchecked.
#[test]
fn every_call_a_signal_handler_makes_is_checked() {
    let _heavy = heavy();
    // The profiling timer's resolution is the kernel's tick (10 ms at HZ=100): where a run gets
    // too few ticks to show the handler's misuses, it is made again, longer.
    let mut misuses = 0;
    for (i, calls) in ["40000", "120000", "360000"].iter().enumerate() {
        let (s, out) = run(&format!("writer_sigcheck_{i}"), &["sigcheck", "8", calls]);
        misuses = assert_every_handler_call_checked(&s, &out);
        std::fs::remove_dir_all(&s.dir).unwrap();
        if misuses > 10 {
            break;
        }
    }
    assert!(misuses > 10, "the timer interrupted the calls: {misuses}");
}

/// A handler's covered call with a finding, made while its thread was inside `malloc` (the
/// program's own, holding its arena's lock): the finding's message is formatted in the handler,
/// on the shim's lock-free heap (`src/heap.rs`), never through `malloc`. Through `malloc` every
/// run of this program hung (on R580 3 of 8 runs of a handler storm did, in a driver call's
/// `malloc`); the plain program takes 50 ms.
#[test]
fn a_handler_s_finding_made_over_the_program_s_malloc_does_not_hang() {
    let _heavy = heavy();
    for i in 0..3 {
        let (s, out) = run(
            &format!("writer_malloc_storm_{i}"),
            &["malloc-storm", "8", "200000"],
        );
        let misuses = assert_every_handler_call_checked(&s, &out);
        assert!(misuses > 0, "the timer fired: {out:?}");
        std::fs::remove_dir_all(&s.dir).unwrap();
    }
}

/// A sigcheck-handler run (`writer_life` sigcheck, malloc-storm): it ended well, its trace holds
/// every call, each misuse of the handler with its finding and each valid call with the value the
/// driver wrote and none, and its exit record counts them all as checked. Returns the misuses.
fn assert_every_handler_call_checked(s: &Scratch, out: &Output) -> usize {
    assert!(out.status.success(), "{out:?}");
    let misuses: usize = printed(out, "HANDLER_MISUSES").parse().unwrap();
    let can: i64 = printed(out, "CAN").parse().unwrap();
    let records = s.records();
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["fn"] == "cuDeviceCanAccessPeer")
        .collect();
    assert_eq!(calls.len(), done(out));
    let (bad, good): (Vec<&Value>, Vec<&Value>) =
        calls.iter().partition(|r| r["a"]["peerDev"] == 9);
    assert_eq!(bad.len(), misuses);
    for r in &bad {
        assert_eq!(
            r["findings"][0]["rule"], "cuDeviceCanAccessPeer.invalid-device",
            "{r}"
        );
    }
    for r in &good {
        if can >= 0 {
            assert_eq!(r["a"]["*canAccessPeer"], can, "{r}");
        }
        assert!(r.get("findings").is_none(), "{r}");
    }
    let exit = records.iter().find(|r| r["event"] == "exit").unwrap();
    assert_eq!(exit["calls"], calls.len(), "{exit}");
    assert!(exit.get("calls_unchecked").is_none(), "{exit}");
    misuses
}

/// The `cuDeviceCanAccessPeer` records of a run's traces and its exit record's counts, read a
/// line at a time through `sharecheck cat` (a storm's millions of records are not held; an exit
/// that ran out of time for a thread that did not get a CPU leaves the rest in the ring, which
/// `cat` reads after the file); asserts every line is a whole record and every call record's
/// `seq` comes once.
fn tally_once(s: &Scratch) -> Tally {
    use std::io::BufRead as _;
    let mut cat = std::process::Command::new(cli())
        .arg("cat")
        .arg(s.traces())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut t = Tally::default();
    let mut seqs = std::collections::HashSet::new();
    for line in std::io::BufReader::new(cat.stdout.take().unwrap()).lines() {
        let r: Value = serde_json::from_str(&line.unwrap()).expect("a whole record");
        if r["fn"] == "cuDeviceCanAccessPeer" {
            t.found += 1;
            assert!(
                seqs.insert(r["seq"].as_u64().unwrap()),
                "every record once: {r}"
            );
        } else if r["event"] == "exit" {
            assert!(t.exit.is_none(), "one exit record");
            t.exit = r["calls"].as_u64();
            t.unfinished = r["calls_unfinished"].as_u64().unwrap_or(0);
        }
    }
    assert!(cat.wait().unwrap().success());
    t
}

/// What [`tally_once`] read: the call records found, and the exit record's `calls` (every call
/// numbered) and `calls_unfinished` (those still being recorded when it was written).
#[derive(Debug, Default)]
struct Tally {
    found: u64,
    exit: Option<u64>,
    unfinished: u64,
}

impl Tally {
    /// The exit record counts every call record found, and no more than those and the calls
    /// it says were still being recorded (whose records may have come after it, or not).
    fn assert_counted(&self) {
        let exit = self.exit.expect("an exit record");
        assert!(
            self.found <= exit && exit <= self.found + self.unfinished,
            "{self:?}"
        );
    }
}

/// The issue's whole storm: 64 threads, a signal handler making calls, and `exit()` from the main
/// thread while they run. No stall, every record whole and once, and the exit record counts them.
#[test]
fn a_64_thread_storm_with_signal_handlers_and_an_exiting_thread_keeps_every_record() {
    let _heavy = heavy();
    for i in 0..5 {
        let started = std::time::Instant::now();
        let (s, out) = run(
            &format!("writer_exitstorm64_{i}"),
            &["exitstorm", "64", "200", "signals"],
        );
        let took = started.elapsed();
        assert!(out.status.success(), "{out:?}");
        // Bounded: the exit waits for other threads only while they make progress (1 s without
        // any at most, 3 s in all per phase); a debug build's 64 threads on 2 CPUs are slow.
        assert!(took.as_secs() < 30, "the exit took {took:?}");
        let t = tally_once(&s);
        assert!(t.found >= 200, "{t:?}");
        t.assert_counted();
        std::fs::remove_dir_all(&s.dir).unwrap();
    }
}

/// A process that ends with `_exit` (as Python's and PyTorch's workers do) leaves its ring (4 MB)
/// beside its trace; `sharecheck run` folds it into the trace once the process is gone, so that
/// only the records' own bytes stay, every record once. A traced process still running when
/// `run` ends (here in the background) keeps its ring: it holds the ring's lock, and its pid is
/// alive.
#[test]
fn run_folds_the_rings_of_processes_that_ended_without_exit_handlers() {
    let (_, exe) = program();
    let s = Scratch::new("writer_fold");
    let script = format!(
        "{exe} underscore-exit 3000; {exe} linger 60 > /dev/null 2>&1 & \
         echo BACKGROUND $!; while [ ! -e {dir}/$!.jsonl.ring ]; do sleep 0.05; done; \
         {exe} underscore-exit 2000",
        exe = exe.display(),
        dir = s.traces().display()
    );
    let mut cmd = std::process::Command::new(cli());
    cmd.args(["run", "--sim", "--trace"])
        .arg(s.traces().join("%p.jsonl"))
        .args(["--", "sh", "-c", &script])
        .current_dir(&s.dir)
        .env_remove(sharecheck_core::schema::env::OPTIONS)
        .env_remove(sharecheck_core::schema::env::TRACE);
    let out = run_with_timeout(cmd, 120);
    let background: i32 = printed(&out, "BACKGROUND").parse().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let alive_ring = s.traces().join(format!("{background}.jsonl.ring"));
    let kept = alive_ring.exists();
    // SAFETY: ends the background process this test started.
    unsafe { libc::kill(background, libc::SIGKILL) };
    assert!(out.status.success(), "{out:?}");
    assert!(kept, "the running process's ring is left alone: {stderr}");
    assert!(
        stderr.contains(
            "folded 2 ring file(s) left by processes that ended without their exit handlers"
        ),
        "{stderr}"
    );
    // The background process's files (every lane's) aside.
    for entry in std::fs::read_dir(s.traces()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(&format!("{background}.")) {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let mut sizes = 0;
    for entry in std::fs::read_dir(s.traces()).unwrap() {
        sizes += entry.unwrap().metadata().unwrap().len();
    }
    assert!(sizes < 2 << 20, "the records' own bytes: {sizes}");
    let records = s.records();
    assert_eq!(can_access_calls(&records), 5000);
    assert_each_call_once(&records);
}

/// A ring file of the trace's name already there with no trace beside it (stale, or planted):
/// the trace and its ring go to `NAME.PID`, as a clash on the trace file's own name does (it used
/// to stop tracing), for lane 0 and the other lanes alike; the planted file is left as it was.
#[test]
fn a_stale_ring_without_its_trace_sends_the_trace_to_name_dot_pid() {
    let (_, exe) = program();
    let s = Scratch::new("writer_stale_ring");
    std::fs::create_dir_all(s.traces()).unwrap();
    let fixed = s.traces().join("run.jsonl");
    for planted in ["run.jsonl.ring", "run.lane1.jsonl.ring"] {
        std::fs::write(s.traces().join(planted), b"planted").unwrap();
    }
    let out = storm_traced_to(&s, exe, &fixed);
    for planted in ["run.jsonl.ring", "run.lane1.jsonl.ring"] {
        assert_eq!(std::fs::read(s.traces().join(planted)).unwrap(), b"planted");
        std::fs::remove_file(s.traces().join(planted)).unwrap();
    }
    assert!(
        !fixed.exists(),
        "the name with a ring beside it is not used"
    );
    let records = s.records();
    assert_eq!(can_access_calls(&records), done(&out));
    assert_each_call_once(&records);
}

/// The process record names the IMEX domain `SHARECHECK_IMEX_DOMAIN` gives (where the IMEX
/// service's node list is not visible), and the report's PROCESSES table shows it.
#[test]
fn the_process_record_names_the_imex_domain_given() {
    let (_, exe) = program();
    let s = Scratch::new("writer_imex_domain");
    let mut cmd = s.under_shim(exe);
    cmd.args(["underscore-exit", "10"])
        .current_dir(&s.dir)
        .env(sharecheck_core::schema::env::IMEX_DOMAIN, "rack-7");
    let out = run_with_timeout(cmd, 120);
    assert!(out.status.success(), "{out:?}");
    let trace = s.traces().join(format!("{}.jsonl", out_pid(&s)));
    let (_, text) = report_text(&s);
    let record = std::fs::read_to_string(&trace).unwrap();
    let first = record.lines().next().unwrap_or_default();
    assert!(first.contains(r#""imex_domain":"rack-7""#), "{first}");
    assert!(!first.contains("imex_nodes"), "{first}");
    assert!(text.contains("(IMEX domain rack-7)"), "{text}");
}

/// Opening the trace at the first covered call (the file, the boot id, the IMEX service's files,
/// which most machines lack) leaves the program's errno as it was.
/// The registration for expedited membarriers is the writer thread's, never the call that opens
/// the trace: in a process with threads the kernel waits for a grace period before it answers
/// (22 ms on the 2x H200 host, most of a short CUDA program's tracing cost, issue 25). The
/// program traps `membarrier` and refuses it, as a seccomp profile may: every call is still
/// traced, each once (the locked add stands in).
#[test]
fn the_membarrier_registration_is_the_writer_thread_s_not_the_first_call_s() {
    let (s, out) = run("writer_membarrier", &["membarrier", "40"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("SECCOMP_UNAVAILABLE") {
        eprintln!("skipped: no seccomp filter can be installed here");
        return;
    }
    assert!(text.contains("MEMBARRIER_REGISTER_BY other\n"), "{text}");
    let records = records_allowing_unused_tail(&s.traces());
    assert_each_call_once(&records);
    assert_eq!(can_access_calls(&records), 40);
    assert_eq!(exit_calls(&records), Some(40));
}

/// A thread whose first record opens a lane of its own (lane 1, where the process may run on two
/// CPUs: lanes are per CPU) leaves errno as it was too: that opening checks whether a ring of that
/// name is there (ENOENT) and creates its files.
#[test]
fn opening_another_lane_leaves_errno_as_it_was() {
    let (s, out) = run("writer_errno_lanes", &["errno-lanes", "3"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let lane1 = std::fs::read_dir(s.traces())
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().contains(".lane1."));
    if !lane1 {
        eprintln!("skipped: one lane here (one CPU), no second lane to open");
        return;
    }
    assert_eq!(text.matches("ERRNO_LANE 1234\n").count(), 3, "{text}");
}

#[test]
fn opening_the_trace_leaves_errno_as_it_was() {
    let (s, out) = run("writer_errno", &["errno", "3"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ERRNO 1234\n"), "{text}");
    assert!(s.traces().join(format!("{}.jsonl", out_pid(&s))).exists());
}
