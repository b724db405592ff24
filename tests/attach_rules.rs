//! The stream-attach rules, each shown firing alone (negative) and a correct program shown silent
//! (positive), on the simulated driver, which answers as R580 does unless told `documented`.
//! Program: tests/c/attach_cuda.c.

mod common;
use common::scenarios::*;
use common::*;
use sharecheck_core::rules;
use sharecheck_core::schema::env;

const DOCUMENTED: (&str, &str) = (env::SIM_BEHAVIOUR, "documented");

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
];

fn program(scratch: &Scratch) -> std::path::PathBuf {
    let libs = format!("-L{}", scratch.sim_libs().display());
    scratch.compile("attach_cuda.c", "attach_cuda", &[&libs, "-lcuda"])
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
fn every_cuda_attach_rule_has_a_case() {
    let covered = CASES.iter().flat_map(|(_, _, ids)| ids.iter().copied());
    let missing: Vec<&str> = rules::without_case(&["attach"], covered)
        .into_iter()
        .filter(|id| !id.starts_with("hip"))
        .collect();
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}
