//! The trace file itself: creation, fork, many threads, handle fingerprints.

mod common;
use common::*;
use sharecheck_core::schema::env;
use std::os::unix::fs::PermissionsExt;

#[test]
fn threads_and_fork_give_whole_records_in_one_file_per_process() {
    let s = Scratch::new("threads_fork");
    let libs = s.sim_libs();
    let exe = s.compile(
        "threads_fork.c",
        "threads_fork",
        &[&format!("-L{}", libs.display()), "-lcuda", "-lpthread"],
    );
    let (threads, per_thread, child_calls) = (8, 500, 7);
    let out = run_ok(s.under_shim(&exe).args([
        threads.to_string(),
        per_thread.to_string(),
        child_calls.to_string(),
    ]));
    let child: u64 = printed(&out, "CHILD").parse().unwrap();

    let files: Vec<_> = std::fs::read_dir(s.traces())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // One file per process and writer lane: the parent's threads are spread over lanes
    // (`PID.jsonl`, `PID.laneK.jsonl`, at most 8), the single-threaded child writes one.
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let child_files = names
        .iter()
        .filter(|n| n.starts_with(&format!("{child}.")))
        .count();
    assert_eq!(child_files, 1, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".jsonl")), "{names:?}");
    assert!((2..=9).contains(&files.len()), "{names:?}");
    // read_records parses every line and checks that no file ends with a cut record.
    let records = s.records();
    let parent_calls: Vec<_> = calls(&records)
        .into_iter()
        .filter(|r| r["pid"] != child)
        .collect();
    let child_records: Vec<_> = records.iter().filter(|r| r["pid"] == child).collect();
    assert_eq!(parent_calls.len(), threads * per_thread + 1);
    let child_calls_seen = child_records.iter().filter(|r| !r["fn"].is_null()).count();
    assert_eq!(
        child_calls_seen, child_calls,
        "the child must not repeat the parent's records"
    );
    // The child's file starts with its own process record and counts from 1 again.
    assert_eq!(child_records[0]["event"], "process");
    let first_child_call = child_records.iter().find(|r| !r["fn"].is_null()).unwrap();
    assert_eq!(first_child_call["seq"], 1);
    assert_eq!(
        first_child_call["tid"].as_u64(),
        Some(child),
        "tid after fork is the child's"
    );
    // Sequence numbers are unique per process.
    let mut seqs: Vec<u64> = parent_calls
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    seqs.sort();
    seqs.dedup();
    assert_eq!(seqs.len(), parent_calls.len());
    // Both processes end with an exit record carrying their own totals.
    for pid in [child, parent_calls[0]["pid"].as_u64().unwrap()] {
        let exit = records
            .iter()
            .find(|r| r["pid"] == pid && r["event"] == "exit")
            .expect("exit record");
        let expected = if pid == child {
            child_calls
        } else {
            threads * per_thread + 1
        };
        assert_eq!(exit["calls"].as_u64(), Some(expected as u64));
    }
}

#[test]
fn trace_files_are_private_and_never_overwritten_or_followed() {
    let s = Scratch::new("trace_create");
    let libs = s.sim_libs();
    let exe = s.compile(
        "direct_cuda.c",
        "direct_cuda",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    let fixed = s.traces().join("fixed.jsonl");
    // An existing file of that name is kept as it was; the trace goes to NAME.<pid>.
    std::fs::write(&fixed, "precious\n").unwrap();
    run_ok(s.under_shim(&exe).env(env::TRACE, &fixed));
    assert_eq!(std::fs::read_to_string(&fixed).unwrap(), "precious\n");
    let written: Vec<_> = std::fs::read_dir(s.traces())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != &fixed)
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let mode = std::fs::metadata(&written[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(written[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("fixed.jsonl."));

    // A symlink planted at the trace path is not followed (and its target not touched).
    let victim = s.path("victim");
    std::fs::write(&victim, "victim\n").unwrap();
    let link = s.path("link.jsonl");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = s.under_shim(&exe).env(env::TRACE, &link).output().unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim\n");
}

#[test]
fn a_process_that_never_calls_the_driver_writes_nothing() {
    let s = Scratch::new("no_gpu");
    let out = s
        .under_shim(std::path::Path::new("/bin/true"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_dir(s.traces()).unwrap().count(), 0);
}

#[test]
fn ipc_handles_are_fingerprinted_alike_across_processes_and_never_written_raw() {
    let s = Scratch::new("ipc_pair");
    let libs = s.sim_libs();
    let exe = s.compile(
        "ipc_pair.c",
        "ipc_pair",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    let out = run_ok(s.under_shim(&exe).current_dir(&s.dir));
    let raw_handle = printed(&out, "HANDLE");
    assert_eq!(raw_handle.len(), 128);
    let records = s.records();
    let get = calls(&records)
        .into_iter()
        .find(|r| r["fn"] == "cuIpcGetMemHandle")
        .unwrap()
        .clone();
    let open = calls(&records)
        .into_iter()
        .find(|r| r["fn"] == "cuIpcOpenMemHandle_v2")
        .unwrap()
        .clone();
    assert_ne!(
        get["pid"], open["pid"],
        "the import happens in the child process"
    );
    assert_eq!(open["r"], 0);
    let exported = get["a"]["*pHandle"].as_str().unwrap();
    assert!(exported.starts_with("fp:"), "{exported}");
    assert_eq!(
        open["a"]["handle"].as_str().unwrap(),
        exported,
        "same handle, same fingerprint"
    );
    // The event handle too.
    let ev_get = calls(&records)
        .into_iter()
        .find(|r| r["fn"] == "cuIpcGetEventHandle")
        .unwrap()
        .clone();
    let ev_open = calls(&records)
        .into_iter()
        .find(|r| r["fn"] == "cuIpcOpenEventHandle")
        .unwrap()
        .clone();
    assert_eq!(ev_get["a"]["*pHandle"], ev_open["a"]["handle"]);
    // No trace file contains the handle's bytes (or any 16-byte run of them) in hex.
    for entry in std::fs::read_dir(s.traces()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for window in raw_handle.as_bytes().chunks(32) {
            assert!(
                !text.contains(std::str::from_utf8(window).unwrap()),
                "raw handle bytes in the trace"
            );
        }
    }
    // A different job key gives a different fingerprint for the same handle bytes.
    let s2 = Scratch::new("ipc_pair_other_key");
    let libs2 = s2.sim_libs();
    let exe2 = s2.compile(
        "ipc_pair.c",
        "ipc_pair",
        &[&format!("-L{}", libs2.display()), "-lcuda"],
    );
    run_ok(
        s2.under_shim(&exe2)
            .current_dir(&s2.dir)
            .env(env::JOB_KEY, "ffeeddccbbaa99887766554433221100"),
    );
    let other = s2.records();
    let get2 = calls(&other)
        .into_iter()
        .find(|r| r["fn"] == "cuIpcGetMemHandle")
        .unwrap()
        .clone();
    assert_ne!(get2["a"]["*pHandle"], get["a"]["*pHandle"]);
}

/// The report phase on real traces: the exporter's and importer's records carry what matching
/// needs (pid, seq, time, the handle as a fingerprint, the exporter's free), so a check over the
/// timeline of both processes decides what neither process could alone.
#[test]
fn a_report_phase_check_matches_exporter_and_importer_by_fingerprint() {
    use sharecheck_core::crossproc::ipc::FREED_WHILE_OPEN;
    use sharecheck_core::crossproc::{decide, ReportCheck, Timeline};
    let findings_of = |mode: &[&str]| {
        let s = Scratch::new(&format!("ipc_pair_report{}", mode.len()));
        let libs = s.sim_libs();
        let exe = s.compile(
            "ipc_pair.c",
            "ipc_pair",
            &[&format!("-L{}", libs.display()), "-lcuda"],
        );
        run_ok(s.under_shim(&exe).current_dir(&s.dir).args(mode));
        let checks: [&dyn ReportCheck; 1] = [&FREED_WHILE_OPEN];
        let mut timeline = Timeline::for_checks(&checks);
        let records = s.records();
        for r in &records {
            timeline.add(r.as_object().unwrap());
        }
        timeline.finish();
        let free = calls(&records)
            .into_iter()
            .find(|r| r["fn"] == "cuMemFree_v2")
            .expect("the exporter's free is recorded (an observed call)")
            .clone();
        (decide(&timeline, &checks), free)
    };
    let (correct, _) = findings_of(&[]);
    assert!(
        correct.is_empty(),
        "freed after the importer closed: {correct:?}"
    );
    let (early, free) = findings_of(&["early"]);
    assert_eq!(early.len(), 1, "{early:?}");
    assert_eq!(early[0].rule.id, "cuMemFree.ipc-memory-open-elsewhere");
    assert_eq!(
        (early[0].pid, early[0].seq),
        (free["pid"].as_i64().unwrap(), free["seq"].as_u64().unwrap()),
        "attached to the exporter's free"
    );
}

/// Without a job key, the root process makes a random one and its children inherit it: the
/// exporter and the importer still agree, and two runs never do (nothing another user of the host
/// could read derives the key).
#[test]
fn without_a_job_key_each_process_tree_gets_its_own_random_key() {
    let fingerprints = |name: &str| {
        let s = Scratch::new(name);
        let libs = s.sim_libs();
        let exe = s.compile(
            "ipc_pair.c",
            "ipc_pair",
            &[&format!("-L{}", libs.display()), "-lcuda"],
        );
        run_ok(
            s.under_shim(&exe)
                .current_dir(&s.dir)
                .env_remove(env::JOB_KEY),
        );
        let records = s.records();
        let find = |f: &str| {
            calls(&records)
                .into_iter()
                .find(|r| r["fn"] == f)
                .unwrap()
                .clone()
        };
        let exported = find("cuIpcGetMemHandle")["a"]["*pHandle"].clone();
        let imported = find("cuIpcOpenMemHandle_v2")["a"]["handle"].clone();
        (exported, imported)
    };
    let (a_export, a_import) = fingerprints("no_job_key_a");
    assert_eq!(a_export, a_import, "one process tree, one key");
    let (b_export, b_import) = fingerprints("no_job_key_b");
    assert_eq!(b_export, b_import);
    assert_ne!(a_export, b_export, "another run, another key");
}

/// Children started by `posix_spawn` and by `vfork` + `exec` inherit the shim and are traced, each
/// in its own file with its own process record.
#[test]
fn posix_spawn_and_vfork_children_are_traced_as_their_own_processes() {
    let s = Scratch::new("spawn_children");
    let libs = s.sim_libs();
    let exe = s.compile(
        "spawn_children.c",
        "spawn_children",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    run_ok(&mut s.under_shim(&exe));
    let files = std::fs::read_dir(s.traces()).unwrap().count();
    assert_eq!(files, 3, "the parent and two children");
    let records = s.records();
    let processes: std::collections::BTreeSet<u64> = records
        .iter()
        .filter(|r| r["event"] == "process")
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(processes.len(), 3);
    let child_calls = calls(&records)
        .iter()
        .filter(|r| r["a"]["dev"] == 1)
        .count();
    assert_eq!(child_calls, 2, "each child's call, in its own process");
}

/// What a user means by a trace path: missing directories are made; `/dev/null` means no trace
/// (no `/dev/null.PID`, no warning); `%q{VAR}` cannot lead out of the directory named.
#[test]
fn trace_paths_do_what_a_user_means() {
    let s = Scratch::new("trace_paths");
    let libs = s.sim_libs();
    let exe = s.compile(
        "peer_cuda.c",
        "peer_cuda",
        &[&format!("-L{}", libs.display()), "-lcuda", "-pthread"],
    );
    let deep = s.path("made/on/demand");
    let out = run_ok(
        s.under_shim(&exe)
            .arg("correct")
            .env(env::TRACE, deep.join("%p.jsonl")),
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made: Vec<String> = std::fs::read_dir(&deep)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(made.iter().any(|n| n.ends_with(".jsonl")), "{made:?}");
    let before: Vec<_> = std::fs::read_dir("/dev")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    let out = run_ok(
        s.under_shim(&exe)
            .arg("correct")
            .env(env::TRACE, "/dev/null"),
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after: Vec<_> = std::fs::read_dir("/dev")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(
        !after
            .iter()
            .any(|n| n.to_string_lossy().starts_with("null.") && !before.contains(n)),
        "a /dev/null.PID appeared"
    );
    let out = run_ok(
        s.under_shim(&exe)
            .arg("correct")
            .env(env::TRACE, s.path("jail").join("%q{ESCAPE}-%p.jsonl"))
            .env("ESCAPE", "../outside"),
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(s.path("jail"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.starts_with(".._outside-") && n.ends_with(".jsonl")),
        "{names:?}"
    );
    assert!(!s.path("outside").exists() && !s.dir.join("outside").exists());
}
