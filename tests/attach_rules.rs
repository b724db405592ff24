//! The stream-attach rules, each shown firing alone (negative) and a correct program shown silent
//! (positive), on the simulated driver, which answers as R580 does unless told `documented`, and
//! on the simulated HIP runtime, which answers as the CLR does. Programs: tests/c/attach_cuda.c,
//! tests/c/attach_hip.c.

mod common;
use common::scenarios::*;
use common::*;
use sharecheck_core::rules;
use sharecheck_core::schema::env;

const DOCUMENTED: (&str, &str) = (env::SIM_BEHAVIOUR, "documented");
/// Device 0 reports CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 0.
const NO_CONCURRENT_MANAGED_ACCESS: (&str, &str) = (env::SIM_ATTRS, "0:89=0");

const CASES: &[Case] = &[
    (
        "single-null",
        &[],
        &["cuStreamAttachMemAsync.single-on-null-stream"],
    ),
    // R580 accepts SINGLE on CU_STREAM_LEGACY: the misuse, and the driver's silence.
    (
        "single-legacy",
        &[],
        &[
            "cuStreamAttachMemAsync.single-on-null-stream",
            "divergence.cuStreamAttachMemAsync.single-on-legacy-stream-accepted",
        ],
    ),
    (
        "single-legacy",
        &[DOCUMENTED],
        &["cuStreamAttachMemAsync.single-on-null-stream"],
    ),
    (
        "flags-combined",
        &[],
        &["cuStreamAttachMemAsync.flags-not-one-attach-flag"],
    ),
    (
        "device-memory",
        &[],
        &["cuStreamAttachMemAsync.memory-not-managed"],
    ),
    (
        "interior",
        &[],
        &["cuStreamAttachMemAsync.not-allocation-start"],
    ),
    ("partial", &[], &["cuStreamAttachMemAsync.partial-length"]),
    // The simulated device, as an H200, reports no pageable memory access.
    (
        "pageable",
        &[],
        &["cuStreamAttachMemAsync.pageable-without-access"],
    ),
    (
        "pageable-length-zero",
        &[],
        &[
            "cuStreamAttachMemAsync.pageable-length-zero",
            "cuStreamAttachMemAsync.pageable-without-access",
        ],
    ),
    (
        "destroyed-attached",
        &[],
        &["cuStreamDestroy.attached-memory-reverts"],
    ),
    // Stream work on a device without concurrent managed access (a Jetson, WSL: an H200 reports
    // 1, where the same program is correct).
    (
        "single-other-stream",
        &[NO_CONCURRENT_MANAGED_ACCESS],
        &["attach.single-memory-used-by-another-stream"],
    ),
    ("single-other-stream", &[], &[]),
    (
        "host-on-device",
        &[NO_CONCURRENT_MANAGED_ACCESS],
        &["attach.host-memory-used-on-device"],
    ),
    ("host-on-device", &[], &[]),
    ("stream-work", &[NO_CONCURRENT_MANAGED_ACCESS], &[]),
    // Attaching again elsewhere while the first stream is busy, with nothing ordering the two;
    // ordered by a synchronization or an event wait (the waiting stream has work pending, as
    // R580 answers): silent.
    (
        "unordered",
        &[],
        &["cuStreamAttachMemAsync.attaches-not-ordered"],
    ),
    ("ordered-sync", &[], &[]),
    ("ordered-event", &[], &[]),
    // Through cuGetProcAddress, as the runtime resolves it: the legacy stream's function.
    (
        "procaddress-legacy",
        &[],
        &["cuStreamAttachMemAsync.single-on-null-stream"],
    ),
];

/// HIP's cases: the CLR checks the flags, and accepts (and ignores) a correct attach.
const HIP_CASES: &[Case] = &[
    (
        "flags-combined",
        &[],
        &["hipStreamAttachMemAsync.flags-not-one-attach-flag"],
    ),
    (
        "device-memory",
        &[],
        &[
            "hipStreamAttachMemAsync.memory-not-managed",
            "divergence.hipStreamAttachMemAsync.accepted-and-ignored",
        ],
    ),
    (
        "correct",
        &[],
        &["divergence.hipStreamAttachMemAsync.accepted-and-ignored"],
    ),
];

fn hip_program(scratch: &Scratch) -> std::path::PathBuf {
    let libs = format!("-L{}", scratch.sim_libs().display());
    scratch.compile("attach_hip.c", "attach_hip", &[&libs, "-lamdhip64"])
}

/// HIP: each misuse fires exactly its rule, and three correct attaches draw only the runtime's
/// divergence, once, with every call traced.
#[test]
fn hip_cases_fire_exactly_their_rules() {
    let scratch = Scratch::new("attach_hip_cases");
    let exe = hip_program(&scratch);
    check_cases(&scratch, &exe, HIP_CASES);
    let r = run_checked(&scratch, &exe, "correct", &[]);
    assert_eq!(r.findings().len(), 1, "{}", r.stderr());
    assert_eq!(
        calls(&r.records)
            .iter()
            .filter(|c| c["fn"] == "hipStreamAttachMemAsync" && c["r"] == 0)
            .count(),
        3
    );
}

fn program(scratch: &Scratch) -> std::path::PathBuf {
    let libs = format!("-L{}", scratch.sim_libs().display());
    scratch.compile("attach_cuda.c", "attach_cuda", &[&libs, "-lcuda", "-ldl"])
}

#[test]
fn each_misuse_fires_exactly_its_rule() {
    let scratch = Scratch::new("attach_cases");
    let exe = program(&scratch);
    check_cases(&scratch, &exe, CASES);
}

/// SINGLE on specific streams in every spelling, each flag, length 0 and the whole allocation:
/// no finding, and every call traced with the driver's answer.
#[test]
fn a_correct_program_produces_no_finding() {
    let scratch = Scratch::new("attach_correct");
    let exe = program(&scratch);
    // The per-thread flavour: stream 0 is the thread's own stream there.
    let r = run_checked(&scratch, &exe, "procaddress-ptsz", &[]);
    assert!(r.findings().is_empty(), "{}", r.stderr());
    let r = run_checked(&scratch, &exe, "correct", &[]);
    assert!(r.findings().is_empty(), "{}", r.stderr());
    assert_eq!(
        calls(&r.records)
            .iter()
            .filter(|c| c["fn"]
                .as_str()
                .is_some_and(|f| f.starts_with("cuStreamAttachMemAsync")))
            .count(),
        6
    );
}

#[test]
fn every_attach_rule_has_a_case() {
    let covered = CASES
        .iter()
        .chain(HIP_CASES)
        .flat_map(|(_, _, ids)| ids.iter().copied());
    let missing: Vec<&str> = rules::without_case(&["attach"], covered);
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}

/// Flags 0: R580 never returns (SIGSEGV inside the call), and the simulator does the same. The
/// finding is reported before the call is forwarded: it is on stderr, and `sharecheck report`
/// finds it in the trace the dead process left (a `before-call` event).
#[test]
fn a_call_the_driver_does_not_return_from_is_reported_before_it() {
    use std::os::unix::process::ExitStatusExt;
    let scratch = Scratch::new("attach_flags_zero");
    let exe = program(&scratch);
    // The process dies: its trace is read by `sharecheck report` (the ring's tail included).
    let dead = Scratch::new("attach_flags_zero_run");
    let out = dead.under_shim(&exe).arg("flags-zero").output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cuStreamAttachMemAsync.flags-not-one-attach-flag"),
        "{stderr}"
    );
    let out = std::process::Command::new(cli())
        .args(["report", "--format", "json"])
        .arg(dead.traces())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        ["cuStreamAttachMemAsync.flags-not-one-attach-flag"],
        "{report}"
    );
    // On the call it was made for, though the call never returned.
    assert_eq!(
        report["findings"][0]["fn"], "cuStreamAttachMemAsync",
        "{report}"
    );
    // With the documented answer (1), the call returns: reported once, before it.
    let r = run_checked(&scratch, &exe, "flags-zero", &[DOCUMENTED]);
    assert_eq!(
        r.count("cuStreamAttachMemAsync.flags-not-one-attach-flag"),
        1,
        "{}",
        r.stderr()
    );
}
