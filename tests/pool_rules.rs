//! The stream-ordered pool rules, each shown firing alone (negative) and a correct program that
//! shares a pool and one of its pointers with a second process shown silent (positive), on the
//! simulated driver, which answers as R580 does: the probe that measured R580
//! (scripts/gpu/pool_probe.c, its answers in scripts/gpu/results/*-pool-probe.txt) gets the same
//! answers from the simulator, plain and under the shim. Program: tests/c/pool_cuda.c.

mod common;
use common::scenarios::*;
use common::*;

const NONE: &[(&str, &str)] = &[];

const CASES: &[Case] = &[
    (
        "export-none",
        NONE,
        &["cuMemPoolExportToShareableHandle.type-not-requested"],
    ),
    (
        "export-fabric",
        NONE,
        &["cuMemPoolExportToShareableHandle.type-not-requested"],
    ),
    (
        "alloc-imported",
        NONE,
        &["cuMemAllocFromPoolAsync.imported-pool"],
    ),
    (
        "export-pointer-none",
        NONE,
        &["cuMemPoolExportPointer.pool-not-shared"],
    ),
    (
        "export-pointer-not-exported",
        NONE,
        &["cuMemPoolExportPointer.pool-not-shared"],
    ),
    (
        "export-pointer-default",
        NONE,
        &["cuMemPoolExportPointer.pool-not-shared"],
    ),
    (
        "export-pointer-interior",
        NONE,
        &["cuMemPoolExportPointer.pool-not-shared"],
    ),
    (
        "import-pointer-own-pool",
        NONE,
        &["cuMemPoolImportPointer.pool-not-imported"],
    ),
    ("correct", NONE, &[]),
    // Found by the report phase only (tested below): nothing live.
    ("freed-while-imported", NONE, &[]),
];

#[test]
fn each_misuse_fires_exactly_its_rule_and_correct_use_is_silent() {
    let scratch = Scratch::new("pool_cases");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("pool_cuda.c", "pool_cuda", &[&libs, "-lcuda"]);
    check_cases(&scratch, &exe, CASES);
    // The correct program: every call succeeded, in both processes, and the exporter reads what
    // the importer wrote through the imported pointer.
    let r = run_checked(&scratch, &exe, "correct", NONE);
    let stdout = String::from_utf8_lossy(&r.out.stdout);
    assert!(
        printed_calls(&r.out).iter().all(|(_, c)| *c == 0),
        "{stdout}"
    );
    assert!(stdout.contains("SEEN 1"), "{stdout}");
    let importer_calls = fn_ret(&r.records)
        .iter()
        .filter(|(f, _)| f == "cuMemPoolImportPointer")
        .count();
    assert_eq!(importer_calls, 1, "the import child's trace is read too");
}

/// The exporter's free of a pointer another process still holds imported is found by `sharecheck
/// report` over both processes' traces, on the exporter's free; the correct exchange (the importer
/// frees first) and every live scenario draw nothing there.
#[test]
fn a_free_while_another_process_holds_the_import_is_found_by_the_report() {
    let scratch = Scratch::new("pool_report");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("pool_cuda.c", "pool_cuda", &[&libs, "-lcuda"]);
    let r = run_checked(&scratch, &exe, "freed-while-imported", NONE);
    assert_eq!(
        report_phase(&r),
        [(
            "cuMemFree.pool-pointer-imported-elsewhere".to_string(),
            "cuMemFreeAsync".to_string()
        )]
    );
    for (scenario, _, _) in CASES
        .iter()
        .filter(|(s, _, _)| *s != "freed-while-imported")
    {
        let r = run_checked(&scratch, &exe, scenario, NONE);
        assert!(
            report_phase(&r).is_empty(),
            "{scenario}: {:?}",
            report_phase(&r)
        );
    }
}

/// The pool probe's answers, `who.case` -> code, values included (`value who.what v`); the fd
/// numbers a process happens to get are left out.
fn answers(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("received-fd") && !l.trim().is_empty())
        .map(|l| l.split('\t').take(3).collect::<Vec<_>>().join("\t"))
        .collect();
    lines.sort();
    lines
}

/// The newest R580 result of the pool probe whose file name ends with `suffix`, as sorted
/// answers.
fn measured(suffix: &str) -> (std::path::PathBuf, Vec<String>) {
    let results = root().join("scripts/gpu/results");
    let measured = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .max()
        .expect("a pool probe result");
    let answers = answers(&std::fs::read_to_string(&measured).unwrap());
    (measured, answers)
}

/// scripts/gpu/pool_probe.c, built against the simulated driver.
fn probe(scratch: &Scratch) -> std::path::PathBuf {
    let exe = scratch.path("pool_probe");
    let out = std::process::Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(root().join("scripts/gpu/pool_probe.c"))
        .arg(format!("-I{}", cuda_include().display()))
        .arg(format!("-L{}", scratch.sim_libs().display()))
        .arg("-lcuda")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The simulator answers every case of the probe that measured R580 as R580 did, plain and with
/// the shim preloaded (which changes nothing the program sees).
#[test]
fn the_simulator_answers_the_pool_probe_as_r580_did() {
    let scratch = Scratch::new("pool_probe");
    let (measured, r580) = measured("-pool-probe.txt");
    assert!(r580.len() > 40, "{}: {r580:?}", measured.display());
    let exe = probe(&scratch);
    for preload in [false, true] {
        probe_answers_as_r580(&scratch, &exe, &[], preload, (&measured, &r580));
    }
}

/// Runs the probe with `args` on the simulator (`preload`: under the shim), asserts that it ends
/// normally and answers as R580 did (`measured`: the results file and its answers), and returns
/// its output.
fn probe_answers_as_r580(
    scratch: &Scratch,
    exe: &std::path::Path,
    args: &[&str],
    preload: bool,
    (file, r580): (&std::path::Path, &[String]),
) -> std::process::Output {
    let mut cmd = scratch.under_shim(exe);
    cmd.args(args).env("SHARECHECK_SIM_FABRIC_CHANNEL", "none");
    if !preload {
        cmd.env_remove("LD_PRELOAD");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let sim = answers(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(sim, r580, "preloaded: {preload}; R580: {}", file.display());
    out
}

/// FABRIC pools where the process has no IMEX channel, as R580 answered on hosts without one
/// (`pool_probe fabric`): made and allocated from, their export refused (NOT_PERMITTED), after
/// which a FABRIC-only pool's pointer export dies of SIGSEGV and one also of POSIX fd answers
/// CUDA_ERROR_UNKNOWN, with the next synchronize dying. The simulator answers each case so, plain
/// and under the shim; under the shim every pointer export of a pool never shared is found, the
/// one the driver does not return from included: reported before the call is forwarded, on
/// stderr and in the trace the dead process left.
#[test]
fn fabric_pools_without_an_imex_channel_answer_as_r580_did_and_are_found_before_a_crash() {
    let scratch = Scratch::new("pool_probe_fabric");
    let (measured, r580) = measured("-pool-probe-fabric.txt");
    assert!(
        r580.iter().any(|l| l.ends_with("signal 11")),
        "{}: {r580:?}",
        measured.display()
    );
    let exe = probe(&scratch);
    for preload in [false, true] {
        let out = probe_answers_as_r580(&scratch, &exe, &["fabric"], preload, (&measured, &r580));
        if !preload {
            continue;
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Six pointer exports of pools never shared: two never exported, three refused, the
        // POSIX fd pool's before its export.
        assert_eq!(
            stderr
                .matches("error[cuMemPoolExportPointer.pool-not-shared]")
                .count(),
            6,
            "{stderr}"
        );
        assert_eq!(
            stderr.matches("R580 dies of SIGSEGV in this call").count(),
            1,
            "{stderr}"
        );
        assert_eq!(
            stderr.matches("whose export the driver refused").count(),
            3,
            "{stderr}"
        );
    }
    // The report reads the finding of the process that died in the driver from its trace.
    let out = std::process::Command::new(cli())
        .args(["report", "--format", "json"])
        .arg(scratch.traces())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "cuMemPoolExportPointer.pool-not-shared")
        .count();
    assert_eq!(found, 6, "{report}");
}

/// A FABRIC pool's export the driver refuses for want of an IMEX channel is explained by what
/// the host lacks, whether the export asks for FABRIC or, of a FABRIC and fd pool, for a POSIX fd
/// (both refused on R580 without a channel); with a channel, the POSIX fd export succeeds and
/// nothing is said, and on a host with a channel file a refusal is the driver's to explain.
#[test]
fn a_fabric_pool_export_without_an_imex_channel_is_explained() {
    let scratch = Scratch::new("pool_fabric");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("pool_cuda.c", "pool_cuda", &[&libs, "-lcuda"]);
    let host_channel =
        std::fs::read_dir("/dev/nvidia-caps-imex-channels").is_ok_and(|mut d| d.next().is_some());
    let no_channel = [("SHARECHECK_SIM_FABRIC_CHANNEL", "none")];
    for scenario in ["export-fabric-pool", "export-fd-of-fabric-fd-pool"] {
        let r = run_checked(&scratch, &exe, scenario, &no_channel);
        assert!(
            printed_calls(&r.out).contains(&("cuMemPoolExportToShareableHandle".to_string(), 800)),
            "{scenario}: {:?}",
            printed_calls(&r.out)
        );
        let rules = r.rules_besides_failures();
        if host_channel {
            assert!(rules.is_empty(), "{scenario}: {rules:?}");
        } else {
            assert_eq!(
                rules,
                ["cuMemPoolExportToShareableHandle.fabric-without-imex-channel".to_string()].into(),
                "{scenario}: {}",
                r.stderr()
            );
        }
    }
    // With a channel the POSIX fd export of a FABRIC and fd pool succeeds: silent.
    let r = run_checked(&scratch, &exe, "export-fd-of-fabric-fd-pool", &[]);
    assert!(
        printed_calls(&r.out).iter().all(|(_, c)| *c == 0),
        "{:?}",
        printed_calls(&r.out)
    );
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
}

/// HIP's cases (tests/c/pool_hip.c), with the ROCm 6.2 runtime's answers on the simulator: each
/// misuse fires exactly its rule; a shared pool's correct life is silent, every call traced.
const HIP_CASES: &[Case] = &[
    (
        "export-flags",
        NONE,
        &["hipMemPoolExportToShareableHandle.flags-not-zero"],
    ),
    (
        "import-flags",
        NONE,
        &["hipMemPoolImportFromShareableHandle.flags-not-zero"],
    ),
    (
        "export-not-ipc",
        NONE,
        &["hipMemPoolExportToShareableHandle.pool-not-ipc-capable"],
    ),
    (
        "alloc-imported",
        NONE,
        &["hipMallocFromPoolAsync.imported-pool"],
    ),
    ("correct", NONE, &[]),
    ("shared", NONE, &[]),
    // Found by the report phase only (tested below): nothing live.
    ("freed-while-imported", NONE, &[]),
];

/// HIP: the exporter's hipFree of a pointer a child process still holds imported is found by the
/// report over both processes' traces, on that free; the exchange done right draws nothing.
#[test]
fn a_hip_free_while_another_process_holds_the_import_is_found_by_the_report() {
    let scratch = Scratch::new("pool_hip_report");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("pool_hip.c", "pool_hip", &[&libs, "-lamdhip64"]);
    let r = run_checked(&scratch, &exe, "freed-while-imported", NONE);
    assert_eq!(
        report_phase(&r),
        [(
            "hipFree.pool-pointer-imported-elsewhere".to_string(),
            "hipFree".to_string()
        )]
    );
    let r = run_checked(&scratch, &exe, "shared", NONE);
    assert!(report_phase(&r).is_empty(), "{:?}", report_phase(&r));
    assert!(
        printed_calls(&r.out).iter().all(|(_, c)| *c == 0),
        "{}",
        String::from_utf8_lossy(&r.out.stdout)
    );
    let imports = fn_ret(&r.records)
        .iter()
        .filter(|(f, ret)| f == "hipMemPoolImportPointer" && *ret == 0)
        .count();
    assert_eq!(imports, 1, "the import child's trace is read too");
}

#[test]
fn each_hip_misuse_fires_exactly_its_rule_and_correct_use_is_silent() {
    let scratch = Scratch::new("pool_hip_cases");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("pool_hip.c", "pool_hip", &[&libs, "-lamdhip64"]);
    check_cases(&scratch, &exe, HIP_CASES);
    let r = run_checked(&scratch, &exe, "correct", NONE);
    assert_eq!(
        succeeded(&r.records, &["hipMemPool", "hipMallocFromPool"]),
        [
            "hipMemPoolCreate",
            "hipMemPoolExportToShareableHandle",
            "hipMemPoolImportFromShareableHandle",
            "hipMallocFromPoolAsync",
            "hipMemPoolExportPointer",
            "hipMemPoolImportPointer",
            "hipMemPoolDestroy",
            "hipMemPoolDestroy",
        ],
        "{}",
        r.stderr()
    );
    // The pointer's export data is a capability: its records carry only its fingerprint.
    let export = calls(&r.records)
        .into_iter()
        .find(|c| c["fn"] == "hipMemPoolExportPointer")
        .expect("the pointer export is traced");
    assert!(
        export["a"]["*export_data"]
            .as_str()
            .is_some_and(|f| f.starts_with("fp:")),
        "{export}"
    );
}
