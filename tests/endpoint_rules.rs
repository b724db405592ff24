//! The logical endpoint rules (the life of ids), each shown firing alone (negative) and a correct
//! program shown silent (positive), on the simulated driver, which follows the CUDA 13.3 document
//! (no released driver on the project's GPU machine has these functions). Program:
//! tests/c/endpoint_cuda.c.

mod common;
use common::scenarios::*;
use common::*;
use sharecheck_core::rules;

const CASES: &[Case] = &[
    (
        "release-unreserved",
        &[],
        &["cuLogicalEndpointIdRelease.not-reserved"],
    ),
    (
        "release-live",
        &[],
        &["cuLogicalEndpointIdRelease.endpoints-not-destroyed"],
    ),
    (
        "create-unreserved",
        &[],
        &["cuLogicalEndpointCreate.id-not-reserved"],
    ),
    (
        "import-unreserved",
        &[],
        &["cuLogicalEndpointImport.id-not-reserved"],
    ),
    ("correct", &[], &[]),
];

fn program(scratch: &Scratch) -> std::path::PathBuf {
    let libs = format!("-L{}", scratch.sim_libs().display());
    scratch.compile("endpoint_cuda.c", "endpoint_cuda", &[&libs, "-lcuda"])
}

#[test]
fn each_misuse_fires_exactly_its_rule_and_correct_use_is_silent() {
    let scratch = Scratch::new("endpoint_cases");
    let exe = program(&scratch);
    check_cases(&scratch, &exe, CASES);
}

#[test]
fn every_endpoint_rule_has_a_case() {
    let covered = CASES.iter().flat_map(|(_, _, ids)| ids.iter().copied());
    let missing = rules::without_case(&["endpoint"], covered);
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}
