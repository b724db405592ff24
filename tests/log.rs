//! SHARECHECK_LOG: what the shim prints on stderr, on the simulated driver (tests/c/peer_cuda.c).

mod common;
use common::*;
use std::path::PathBuf;

fn peer_cuda(s: &Scratch) -> PathBuf {
    let libs = s.sim_libs();
    s.compile(
        "peer_cuda.c",
        "peer_cuda",
        &[&format!("-L{}", libs.display()), "-lcuda", "-pthread"],
    )
}

/// The shim's stderr for `peer_cuda SCENARIO` with `SHARECHECK_LOG` set to `log` (None: unset).
fn stderr_of(s: &Scratch, exe: &std::path::Path, scenario: &str, log: Option<&str>) -> String {
    let mut cmd = s.under_shim(exe);
    cmd.arg(scenario);
    if let Some(log) = log {
        cmd.env("SHARECHECK_LOG", log);
    }
    String::from_utf8_lossy(&run_ok(&mut cmd).stderr).into_owned()
}

const ERROR_HEAD: &str = "sharecheck: error[cuCtxEnablePeerAccess.flags-not-zero] ";
const WARNING_HEAD: &str = "sharecheck: warning[cuMemcpyPeer.null-context] ";

#[test]
fn levels_and_targets_select_what_is_printed() {
    let s = Scratch::new("log_levels");
    let exe = peer_cuda(&s);
    let error = |log| stderr_of(&s, &exe, "enable-flags", log);
    let warning = |log| stderr_of(&s, &exe, "memcpy-null-context", log);

    // Default: findings of every severity, no debug output.
    let default = error(None);
    assert_eq!(default.matches(ERROR_HEAD).count(), 1, "{default}");
    // The finding's three lines, then its stack.
    let block: Vec<&str> = default
        .lines()
        .filter(|l| *l != "  stack:" && !l.starts_with("    #"))
        .collect();
    assert_eq!(block.len(), 3, "{default}");
    assert!(default.contains("\n  stack:\n    #0 "), "{default}");
    assert!(warning(None).starts_with(WARNING_HEAD));

    // A bare level is the shim's own messages; findings still print.
    let debug = error(Some("debug"));
    assert!(
        debug.contains("sharecheck: debug: cuda driver: "),
        "{debug}"
    );
    assert!(debug.contains(ERROR_HEAD), "{debug}");
    assert!(warning(Some("error")).starts_with(WARNING_HEAD));

    // off silences everything; finding=LEVEL selects findings by severity.
    assert_eq!(error(Some("off")), "");
    assert_eq!(warning(Some("off")), "");
    assert_eq!(error(Some("finding=off")), "");
    assert!(error(Some("off,finding=error")).starts_with(ERROR_HEAD));
    assert_eq!(warning(Some("off,finding=error")), "");
    assert!(warning(Some("sharecheck::finding=WARN")).starts_with(WARNING_HEAD));
}

#[test]
fn a_bad_item_gets_one_warning_line_naming_it_and_the_rest_applies() {
    let s = Scratch::new("log_bad");
    let exe = peer_cuda(&s);
    let stderr = stderr_of(&s, &exe, "enable-flags", Some("verbose, debug ,x=info"));
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("sharecheck: warning: SHARECHECK_LOG"))
        .collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    assert!(warnings[0].contains("\"verbose\""), "{stderr}");
    assert!(warnings[1].contains("\"x=info\""), "{stderr}");
    assert!(stderr.contains("sharecheck: debug: "), "{stderr}");
    assert!(stderr.contains(ERROR_HEAD), "{stderr}");
    // Nothing is said when nothing may be.
    assert_eq!(stderr_of(&s, &exe, "enable-flags", Some("off,verbose")), "");
}

/// Every finding carries the host call stack of its call, from the program's side (no frame of
/// the shim): on stderr, in the trace, and in `sharecheck report` with file:line where the
/// program has debug information (the tests compile with -g) and binutils' addr2line is there.
/// `stack_depth=0` turns it off.
#[test]
fn a_finding_carries_the_programs_call_stack() {
    let s = Scratch::new("log_stack");
    let exe = peer_cuda(&s);
    let out = run_ok(s.under_shim(&exe).arg("enable-flags"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let program = exe.to_string_lossy().into_owned();
    assert!(
        stderr.contains(&format!("  stack:\n    #0 {program}+0x")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("libsharecheck"),
        "no frame of the shim: {stderr}"
    );
    let records = s.records();
    let finding = records
        .iter()
        .flat_map(|r| r["findings"].as_array().into_iter().flatten())
        .find(|f| f["rule"] == "cuCtxEnablePeerAccess.flags-not-zero")
        .expect("the finding")
        .clone();
    let stack = finding["stack"].as_array().expect("a stack");
    assert!(!stack.is_empty() && stack.len() <= 16, "{stack:?}");
    assert_eq!(stack[0]["module"], program.as_str());
    assert!(stack[0]["offset"].as_str().unwrap().starts_with("0x"));
    // The report names the source line where addr2line can.
    let report = std::process::Command::new(cli())
        .arg("report")
        .arg(s.traces())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout).into_owned();
    assert!(text.contains(&format!("      #0 {program}+0x")), "{text}");
    let has_addr2line = std::process::Command::new("addr2line")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if has_addr2line {
        assert!(
            text.contains("main at ") && text.contains("peer_cuda.c:"),
            "{text}"
        );
    }
    // Off.
    let out = run_ok(
        s.under_shim(&exe)
            .arg("enable-flags")
            .env("SHARECHECK_OPTIONS", "stack_depth=0"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[cuCtxEnablePeerAccess.flags-not-zero]"),
        "{stderr}"
    );
    assert!(!stderr.contains("stack:"), "{stderr}");
}

/// Settings are never ignored silently: options that are not UTF-8 (read lossily), a
/// `trace_limit` below what a file keeps (raised, and the process record says the limit used),
/// and a `SHARECHECK_CUDA_LIBRARY` that names no file (the driver is found as usual) each get
/// one warning line; under `sharecheck run`, whose own line says it first, a problem with the
/// options is not said again by the shim.
#[test]
fn settings_the_shim_cannot_use_as_given_are_said_once() {
    use std::os::unix::ffi::OsStrExt;
    let s = Scratch::new("log_settings");
    let exe = peer_cuda(&s);
    let mut cmd = s.under_shim(&exe);
    cmd.arg("correct")
        .env(
            sharecheck_core::schema::env::OPTIONS,
            std::ffi::OsStr::from_bytes(b"trace_limit=1:mute=\xff"),
        )
        .env(
            sharecheck_core::schema::env::CUDA_LIBRARY,
            s.path("no-such-libcuda.so"),
        );
    let out = run_ok(&mut cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("SHARECHECK_OPTIONS: not UTF-8").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("trace_limit=1 is below 4096 bytes").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("no-such-libcuda.so cannot be loaded (no such file)")
            .count(),
        1,
        "{stderr}"
    );
    let records = s.records();
    assert_eq!(records[0]["trace_limit"], 4096, "the limit used");

    let out = std::process::Command::new(cli())
        .args(["run", "--sim", "--trace"])
        .arg(s.path("run-traces/%p.jsonl"))
        .arg("--options")
        .arg("bogus=1")
        .arg("--")
        .arg(&exe)
        .arg("correct")
        .env_remove(sharecheck_core::schema::env::OPTIONS)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("unknown key `bogus`").count(), 1, "{stderr}");
}
