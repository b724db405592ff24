//! The logical endpoint rules (the life of ids), each shown firing alone (negative) and a correct
//! program shown silent (positive), on the simulated driver, which follows the CUDA 13.3 document
//! (no released driver on the project's GPU machine has these functions). Program:
//! tests/c/endpoint_cuda.c.

mod common;
use common::scenarios::*;
use common::*;
use sharecheck_core::rules;
use sharecheck_core::schema::env;

/// The simulator's attribute overrides (`device:attribute=value,...`).
const SIM_ATTRS: &str = "SHARECHECK_SIM_ATTRS";

/// Multicast endpoints: the simulated devices advertise them (attribute 154) only when asked.
const MULTICAST: &[(&str, &str)] = &[(SIM_ATTRS, "0:154=1,1:154=1")];
/// Three devices with multicast.
const THREE: &[(&str, &str)] = &[
    (env::SIM_DEVICES, "3"),
    (SIM_ATTRS, "0:154=1,1:154=1,2:154=1"),
];
/// Device 0 without fabric handles (attribute 128).
const NO_FABRIC: &[(&str, &str)] = &[(SIM_ATTRS, "0:128=0")];
/// Device 1's closest host NUMA node is 1 (device 0's is 0).
const NUMA: &[(&str, &str)] = &[(SIM_ATTRS, "1:134=1")];
const NONE: &[(&str, &str)] = &[];

const CASES: &[Case] = &[
    (
        "release-unreserved",
        NONE,
        &["cuLogicalEndpointIdRelease.not-reserved"],
    ),
    (
        "release-live",
        NONE,
        &["cuLogicalEndpointIdRelease.endpoints-not-destroyed"],
    ),
    (
        "create-unreserved",
        NONE,
        &["cuLogicalEndpointCreate.id-not-reserved"],
    ),
    (
        "create-in-use",
        NONE,
        &["cuLogicalEndpointCreate.id-in-use"],
    ),
    (
        "import-unreserved",
        NONE,
        &["cuLogicalEndpointImport.id-not-reserved"],
    ),
    (
        "import-in-use",
        NONE,
        &["cuLogicalEndpointImport.id-in-use"],
    ),
    ("no-endpoint", NONE, &["endpoint.no-endpoint-on-id"]),
    (
        "type-invalid",
        NONE,
        &["cuLogicalEndpointCreate.type-invalid"],
    ),
    ("team-empty", NONE, &["cuLogicalEndpointCreate.team-empty"]),
    (
        "size-not-aligned",
        NONE,
        &["cuLogicalEndpointCreate.size-not-aligned"],
    ),
    (
        "size-above-max",
        NONE,
        &["cuLogicalEndpointCreate.size-above-max"],
    ),
    (
        "flags-unknown",
        NONE,
        &["cuLogicalEndpointCreate.flags-unknown"],
    ),
    (
        "handle-type-unknown",
        NONE,
        &["cuLogicalEndpointCreate.handle-type-unknown"],
    ),
    (
        "handle-type-not-supported",
        NO_FABRIC,
        &["cuLogicalEndpointCreate.handle-type-not-supported"],
    ),
    (
        "add-unicast",
        NONE,
        &["cuLogicalEndpointAddDevice.not-multicast"],
    ),
    (
        "team-full",
        MULTICAST,
        &["cuLogicalEndpointAddDevice.team-full"],
    ),
    (
        "add-twice",
        MULTICAST,
        &["cuLogicalEndpointAddDevice.device-already-added"],
    ),
    (
        "add-after-bind",
        THREE,
        &["cuLogicalEndpointAddDevice.after-bind"],
    ),
    (
        "query-not-endpoint",
        NONE,
        &["cuLogicalEndpointQuery.id-not-endpoint"],
    ),
    ("bind-without-query", NONE, &["endpoint.bind-without-query"]),
    (
        "bind-before-ready",
        MULTICAST,
        &["endpoint.bind-before-ready"],
    ),
    ("bind-flags", NONE, &["endpoint.bind-flags-not-zero"]),
    (
        "bindaddr-not-aligned",
        NONE,
        &["cuLogicalEndpointBindAddr.not-aligned"],
    ),
    (
        "bindmem-not-aligned",
        NONE,
        &["cuLogicalEndpointBindMem.not-aligned"],
    ),
    (
        "bindaddr-beyond-allocation",
        NONE,
        &["cuLogicalEndpointBindAddr.size-beyond-allocation"],
    ),
    (
        "bindmem-beyond-allocation",
        NONE,
        &["cuLogicalEndpointBindMem.size-beyond-allocation"],
    ),
    (
        "bind-beyond-endpoint",
        NONE,
        &["endpoint.bind-beyond-endpoint"],
    ),
    (
        "bindaddr-device-memory",
        NONE,
        &["cuLogicalEndpointBindAddr.memory-not-vmm-or-pool"],
    ),
    (
        "bindmem-released",
        NONE,
        &["cuLogicalEndpointBindMem.memory-not-created"],
    ),
    (
        "bind-other-device",
        NONE,
        &["endpoint.bind-memory-of-other-device"],
    ),
    (
        "bind-numa",
        NUMA,
        &["endpoint.bind-host-memory-not-closest-numa"],
    ),
    (
        "bind-not-in-team",
        MULTICAST,
        &["endpoint.bind-device-not-in-team"],
    ),
    ("bind-not-owner", NONE, &["endpoint.bind-device-not-owner"]),
    (
        "bind-not-shareable",
        MULTICAST,
        &["endpoint.bind-memory-not-shareable"],
    ),
    ("bind-overlap", NONE, &["endpoint.bind-overlaps-binding"]),
    (
        "unbind-not-aligned",
        NONE,
        &["cuLogicalEndpointUnbind.not-aligned"],
    ),
    (
        "unbind-offset",
        NONE,
        &["cuLogicalEndpointUnbind.offset-not-bound"],
    ),
    (
        "unbind-size",
        NONE,
        &["cuLogicalEndpointUnbind.size-not-binds"],
    ),
    (
        "unbind-cuts",
        NONE,
        &["cuLogicalEndpointUnbind.cuts-binding"],
    ),
    (
        "destroy-not-created",
        NONE,
        &["cuLogicalEndpointDestroy.not-created"],
    ),
    (
        "destroy-bound",
        NONE,
        &["cuLogicalEndpointDestroy.unbinds-memory"],
    ),
    (
        "export-handle-type",
        NONE,
        &["cuLogicalEndpointExport.handle-type-not-requested"],
    ),
    (
        "import-not-permitted",
        NONE,
        &["cuLogicalEndpointImport.not-permitted"],
    ),
    (
        "import-not-supported",
        NONE,
        &["cuLogicalEndpointImport.not-supported"],
    ),
    ("correct", NONE, &[]),
    ("unicast", NONE, &[]),
    ("multicast", MULTICAST, &[]),
    ("two-process", MULTICAST, &[]),
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

/// The report phase's rules: what a process left at its exit, and a bind of an endpoint another
/// process exported as unicast (no process alone can tell). None is a live finding; `sharecheck
/// report` over the run's traces finds exactly these, on these calls.
const REPORT_CASES: &[(&str, &[(&str, &str)])] = &[
    (
        "leak-ids",
        &[(
            "cuLogicalEndpointIdReserve.never-released",
            "cuLogicalEndpointIdReserve",
        )],
    ),
    (
        "leak-endpoint",
        &[
            (
                "cuLogicalEndpointCreate.never-destroyed",
                "cuLogicalEndpointCreate",
            ),
            (
                "cuLogicalEndpointIdReserve.never-released",
                "cuLogicalEndpointIdReserve",
            ),
        ],
    ),
    (
        "bind-imported-unicast",
        &[(
            "endpoint.bind-imported-unicast",
            "cuLogicalEndpointBindAddr",
        )],
    ),
];

/// The report phase's findings of this family (the programs' VMM memory, which they keep to the
/// end, is the VMM family's to report: tests/vmm_rules.rs).
fn endpoint_report_phase(r: &Run) -> Vec<(String, String)> {
    let family = rules::FAMILIES
        .iter()
        .find(|f| f.name == "endpoint")
        .unwrap();
    report_phase(r)
        .into_iter()
        .filter(|(rule, _)| family.rules().iter().any(|r| r.id == rule))
        .collect()
}

#[test]
fn what_a_process_leaves_or_binds_across_processes_is_found_in_the_report() {
    let scratch = Scratch::new("endpoint_report_phase");
    let exe = program(&scratch);
    for (scenario, expected) in REPORT_CASES {
        let r = run_checked(&scratch, &exe, scenario, NONE);
        assert!(
            r.rules_besides_failures().is_empty(),
            "{scenario}: not a live finding: {}",
            r.stderr()
        );
        assert!(doubly_explained(&r).is_empty(), "{scenario}");
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(rule, f)| (rule.to_string(), f.to_string()))
            .collect();
        assert_eq!(endpoint_report_phase(&r), expected, "{scenario}");
    }
    for (scenario, env) in [("unicast", NONE), ("two-process", MULTICAST)] {
        let r = run_checked(&scratch, &exe, scenario, env);
        assert!(endpoint_report_phase(&r).is_empty(), "{scenario}");
    }
}

/// Untraced, the same leftovers are heard at the process's exit (decided from its own calls),
/// and a correct program hears none.
#[test]
fn an_untraced_process_hears_the_endpoints_and_ids_it_left() {
    let scratch = Scratch::new("endpoint_untraced_exit");
    let exe = program(&scratch);
    let stderr = |scenario: &str| scratch.untraced_stderr(&exe, scenario);
    let left = stderr("leak-endpoint");
    for rule in [
        "cuLogicalEndpointCreate.never-destroyed",
        "cuLogicalEndpointIdReserve.never-released",
    ] {
        assert!(
            left.contains(&format!("warning[{rule}]")),
            "{rule}:\n{left}"
        );
    }
    let clean = stderr("unicast");
    assert!(!clean.contains("never-destroyed"), "{clean}");
    assert!(!clean.contains("IdReserve.never-released"), "{clean}");
}

#[test]
fn every_endpoint_rule_has_a_case() {
    let covered = CASES
        .iter()
        .flat_map(|(_, _, ids)| ids.iter().copied())
        .chain(
            REPORT_CASES
                .iter()
                .flat_map(|(_, found)| found.iter().map(|(rule, _)| *rule)),
        );
    let missing = rules::without_case(&["endpoint"], covered);
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}

/// The two-process multicast team: the export and the import are recorded in their own
/// processes with the same keyed fingerprint of the handle, and no trace file holds the handle's
/// bytes (a capability).
#[test]
fn endpoint_handles_are_fingerprinted_alike_across_processes_and_never_written_raw() {
    let scratch = Scratch::new("endpoint_handles");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "two-process", MULTICAST);
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    let stdout = String::from_utf8_lossy(&r.out.stdout).into_owned();
    let raw = stdout
        .lines()
        .find_map(|l| l.strip_prefix("HANDLE "))
        .expect("the program prints the handle it passes on");
    assert_eq!(raw.len(), 128);
    let find = |f: &str| {
        r.records
            .iter()
            .find(|c| c["fn"] == f)
            .unwrap_or_else(|| panic!("no {f} record"))
            .clone()
    };
    let (export, import) = (
        find("cuLogicalEndpointExport"),
        find("cuLogicalEndpointImport"),
    );
    assert_ne!(export["pid"], import["pid"], "the import is the child's");
    assert_eq!(
        (export["r"].as_i64(), import["r"].as_i64()),
        (Some(0), Some(0))
    );
    let exported = export["a"]["*handle"].as_str().unwrap();
    assert!(exported.starts_with("fp:"), "{exported}");
    assert_eq!(import["a"]["*handle"].as_str(), Some(exported));
    for entry in std::fs::read_dir(&r.traces).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for window in raw.as_bytes().chunks(32) {
            assert!(
                !text.contains(std::str::from_utf8(window).unwrap()),
                "raw handle bytes in the trace"
            );
        }
        let binary: Vec<u8> = (0..64)
            .map(|i| u8::from_str_radix(&raw[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        // The handle's first 32 bytes name the export (process, export number, nonce): no
        // 16 of them in a row in a binary ring either.
        for chunk in binary[..32].chunks(16) {
            assert!(
                !bytes.windows(16).any(|w| w == chunk),
                "raw handle bytes (binary) in a trace file"
            );
        }
    }
}

/// A covered call that fails with no rule to explain it gets `call.failed` (info): the code and
/// what cuda.h says it means, traced or not (cuLogicalEndpointGetLimits has no checks of its own,
/// so untraced it takes the shortest path through the shim).
#[test]
fn a_failure_no_rule_explains_is_explained_by_its_code() {
    let scratch = Scratch::new("endpoint_call_failed");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "limits-refused", NONE);
    let failed: Vec<&serde_json::Value> = r
        .findings()
        .into_iter()
        .filter(|f| f["rule"] == "call.failed")
        .collect();
    assert_eq!(failed.len(), 1, "{}", r.stderr());
    let message = failed[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the driver returned CUDA_ERROR_INVALID_VALUE (1): This indicates"),
        "{message}"
    );
    assert!(
        r.stderr().contains("sharecheck: info[call.failed] "),
        "{}",
        r.stderr()
    );
    // Untraced: the same explanation on stderr.
    let stderr = scratch.untraced_stderr(&exe, "limits-refused");
    assert_eq!(
        stderr.matches("sharecheck: info[call.failed] ").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("CUDA_ERROR_INVALID_VALUE (1)"), "{stderr}");
}
