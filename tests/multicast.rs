//! Multicast objects (issue 25), on the simulated driver only (no multicast object is ever
//! created on the project's GPU machines): every `cuMulticast*` call, through its export and
//! through `cuGetProcAddress`, is forwarded and recorded with what the program saw; each rule
//! fires alone on its misuse (negative) and a correct team draws no finding (positive). Program:
//! tests/c/multicast_cuda.c.

mod common;
use common::scenarios::*;
use common::*;

const NONE: &[(&str, &str)] = &[];

const CASES: &[Case] = &[
    (
        "create-size",
        NONE,
        &["cuMulticastCreate.size-not-granular"],
    ),
    ("create-flags", NONE, &["cuMulticastCreate.flags-not-zero"]),
    ("add-full", NONE, &["cuMulticastAddDevice.team-full"]),
    (
        "bind-not-granular",
        NONE,
        &["cuMulticastBindMem.not-granular"],
    ),
    (
        "bindaddr-not-granular",
        NONE,
        &["cuMulticastBindAddr.not-granular"],
    ),
    (
        "bind-past-memory",
        NONE,
        &["cuMulticastBindMem.past-memory"],
    ),
    (
        "bind-past-object",
        NONE,
        &["cuMulticastBindMem.past-object"],
    ),
    (
        "bindaddr-past-object",
        NONE,
        &["cuMulticastBindAddr.past-object"],
    ),
    (
        "bind-not-on-team",
        NONE,
        &["multicast.bind-memory-not-on-team"],
    ),
    ("bind-flags", NONE, &["multicast.bind-flags-not-zero"]),
    (
        "unbind-not-granular",
        NONE,
        &["cuMulticastUnbind.not-granular"],
    ),
    (
        "unbind-past-object",
        NONE,
        &["cuMulticastUnbind.past-object"],
    ),
    ("unbind-not-a-bind", NONE, &["cuMulticastUnbind.not-a-bind"]),
    (
        "bind-not-on-dev",
        NONE,
        &["multicast.bind-memory-not-on-dev"],
    ),
    (
        "bind-dev-not-in-team",
        NONE,
        &["multicast.bind-dev-not-in-team"],
    ),
    (
        "bind-not-shareable",
        NONE,
        &["multicast.bind-memory-not-shareable"],
    ),
    ("team", NONE, &[]),
];

fn program(scratch: &Scratch) -> std::path::PathBuf {
    let libs = format!("-L{}", scratch.sim_libs().display());
    scratch.compile("multicast_cuda.c", "multicast_cuda", &[&libs, "-lcuda"])
}

/// The functions of `r`'s trace whose name starts with `cuMulticast`, with their results.
fn multicast_calls(r: &Run) -> Vec<(String, i64)> {
    fn_ret(&r.records)
        .into_iter()
        .filter(|(f, _)| f.starts_with("cuMulticast"))
        .collect()
}

#[test]
fn each_misuse_fires_exactly_its_rule_and_correct_use_is_silent() {
    let scratch = Scratch::new("multicast_cases");
    let exe = program(&scratch);
    check_cases(&scratch, &exe, CASES);
}

#[test]
fn a_team_is_traced_call_by_call_and_draws_no_finding() {
    let scratch = Scratch::new("multicast_team");
    let exe = program(&scratch);
    // run_checked: every printed call is in the trace with the result the program saw.
    let r = run_checked(&scratch, &exe, "team", NONE);
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    let calls = multicast_calls(&r);
    let names: Vec<&str> = calls.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        names,
        [
            "cuMulticastGetGranularity",
            "cuMulticastGetGranularity",
            "cuMulticastCreate",
            "cuMulticastAddDevice",
            "cuMulticastAddDevice",
            "cuMulticastBindMem",
            "cuMulticastBindMem_v2",
            "cuMulticastBindAddr",
            "cuMulticastBindAddr_v2",
            "cuMulticastUnbind",
            "cuMulticastUnbind",
            "cuMulticastUnbind",
            "cuMulticastUnbind",
        ]
    );
    assert!(calls.iter().all(|(_, ret)| *ret == 0), "{calls:?}");
    // The properties are recorded field by field, the granularity the driver wrote with them.
    let create = r
        .records
        .iter()
        .find(|c| c["fn"] == "cuMulticastCreate")
        .unwrap();
    assert_eq!(create["a"]["prop"]["numDevices"], 2, "{create}");
    assert_eq!(
        create["a"]["prop"]["handleTypes"], "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
        "{create}"
    );
    let granularity = r
        .records
        .iter()
        .find(|c| c["fn"] == "cuMulticastGetGranularity")
        .unwrap();
    assert_eq!(granularity["a"]["*granularity"], 2 << 20, "{granularity}");
}

/// A bind before the whole team was added blocks in a driver, forever if the team is never
/// filled: the watchdog reports it while it blocks (here after 300 ms), naming the devices this
/// process added, on stderr and in the trace; the simulator then gives up (1.5 s) and answers
/// CUDA_ERROR_ILLEGAL_STATE, saying so, and the trace has the answer.
#[test]
fn a_bind_blocked_on_a_team_never_filled_is_reported_while_it_blocks() {
    let scratch = Scratch::new("multicast_incomplete");
    let exe = program(&scratch);
    let started = std::time::Instant::now();
    let r = run_checked(
        &scratch,
        &exe,
        "incomplete",
        &[
            ("SHARECHECK_SIM_MULTICAST_WAIT_MS", "1500"),
            ("SHARECHECK_OPTIONS", "blocked_bind_ms=300"),
        ],
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(1500));
    let blocked: Vec<&serde_json::Value> = r
        .records
        .iter()
        .filter(|rec| rec["event"] == "multicast-watchdog")
        .collect();
    assert_eq!(blocked.len(), 1, "{:?}", r.records);
    let finding = &blocked[0]["findings"][0];
    assert_eq!(finding["rule"], "multicast.bind-blocked", "{finding}");
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains("cuMulticastBindMem of multicast object")
            && message.contains("this process added 1 of the team's 2 devices ([0])"),
        "{message}"
    );
    assert!(
        r.stderr()
            .contains("sharecheck: warning[multicast.bind-blocked] "),
        "{}",
        r.stderr()
    );
    assert!(
        multicast_calls(&r).contains(&("cuMulticastBindMem".to_string(), 401)),
        "{:?}",
        multicast_calls(&r)
    );
    assert!(
        r.stderr().contains("1 of 2 devices added"),
        "{}",
        r.stderr()
    );
    // A map of the object blocks as a bind does.
    let m = run_checked(
        &scratch,
        &exe,
        "map-incomplete",
        &[
            ("SHARECHECK_SIM_MULTICAST_WAIT_MS", "1500"),
            ("SHARECHECK_OPTIONS", "blocked_bind_ms=300"),
        ],
    );
    let blocked: Vec<&serde_json::Value> = m
        .records
        .iter()
        .filter(|rec| rec["event"] == "multicast-watchdog")
        .collect();
    assert_eq!(blocked.len(), 1, "{:?}", m.records);
    assert_eq!(blocked[0]["findings"][0]["rule"], "multicast.map-blocked");
    assert_eq!(blocked[0]["call"], "cuMemMap");
}

/// A multicast object the process exits holding is found on the create that made it: by
/// `sharecheck report` from the trace, and live at exit when no trace is written; every other
/// scenario gives back what it made.
#[test]
fn a_multicast_object_never_released_is_found_at_exit() {
    let scratch = Scratch::new("multicast_leak");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "leak", NONE);
    assert_eq!(
        report_phase(&r),
        [(
            "cuMemCreate.never-released".to_string(),
            "cuMulticastCreate".to_string()
        )]
    );
    for (scenario, _, _) in CASES {
        let r = run_checked(&scratch, &exe, scenario, NONE);
        assert!(
            report_phase(&r).is_empty(),
            "{scenario}: {:?}",
            report_phase(&r)
        );
    }
    let mut cmd = scratch.under_shim(&exe);
    cmd.env_remove(sharecheck_core::schema::env::TRACE)
        .arg("leak");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("[cuMemCreate.never-released]"))
        .unwrap_or_else(|| panic!("no finding at exit in:\n{stderr}"));
    assert!(
        line.starts_with("sharecheck: info[")
            && line.contains("the multicast object 0x")
            && line.contains("was never released"),
        "{line}"
    );
}

/// One thread per device: a bind made before the last device is added blocks until it is, and
/// returns; blocked for less than `blocked_bind_ms`, it draws no finding.
#[test]
fn a_bind_that_waits_briefly_for_the_team_is_silent() {
    let scratch = Scratch::new("multicast_late_add");
    let exe = program(&scratch);
    let r = run_checked(
        &scratch,
        &exe,
        "late-add",
        &[("SHARECHECK_OPTIONS", "blocked_bind_ms=3000")],
    );
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    assert!(
        multicast_calls(&r).contains(&("cuMulticastBindMem".to_string(), 0)),
        "{:?}",
        multicast_calls(&r)
    );
}

/// The runtime's way in: the 13.1 bind (`cuMulticastBindMem_v2`) and the unbind through
/// `cuGetProcAddress`, recorded under their own symbols.
#[test]
fn the_binds_are_traced_through_get_proc_address() {
    let scratch = Scratch::new("multicast_procaddress");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "procaddress", NONE);
    let calls = multicast_calls(&r);
    assert!(
        calls.contains(&("cuMulticastBindMem_v2".to_string(), 0))
            && calls.contains(&("cuMulticastUnbind".to_string(), 0)),
        "{calls:?}"
    );
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
}
