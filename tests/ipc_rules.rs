//! The IPC rules, each shown firing alone (negative) and correct programs shown silent (positive),
//! on the simulated driver, which answers as R580 does unless told `documented`. Programs:
//! tests/c/ipc_cuda.c, tests/c/ipc_hip.c.

mod common;
use common::scenarios::*;
use common::*;
use sharecheck_core::rules;
use sharecheck_core::schema::env;
use std::collections::BTreeSet;
use std::path::PathBuf;

const DOCUMENTED: (&str, &str) = (env::SIM_BEHAVIOUR, "documented");

struct Programs {
    scratch: Scratch,
    cuda: PathBuf,
    hip: PathBuf,
}

fn programs(name: &str) -> Programs {
    static BUILT: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    let (cuda, hip) = BUILT.get_or_init(|| {
        let scratch = Scratch::new("ipc_programs");
        let libs = format!("-L{}", scratch.sim_libs().display());
        let cuda = scratch.compile("ipc_cuda.c", "ipc_cuda", &[&libs, "-lcuda"]);
        let hip = scratch.compile("ipc_hip.c", "ipc_hip", &[&libs, "-lamdhip64"]);
        (cuda, hip)
    });
    Programs {
        scratch: Scratch::new(name),
        cuda: cuda.clone(),
        hip: hip.clone(),
    }
}

const CUDA_CASES: &[Case] = &[
    (
        "export-interior",
        &[],
        &[
            "cuIpcGetMemHandle.not-allocation-base",
            "divergence.cuIpcGetMemHandle.interior-pointer-accepted",
        ],
    ),
    (
        "export-interior",
        &[DOCUMENTED],
        &["cuIpcGetMemHandle.not-allocation-base"],
    ),
    // Its own handle with bad flags: two misuses. `_v2` answers the flags (1), the legacy
    // export the process (201), as R580 does; either answer is explained, so no divergence.
    (
        "open-flags",
        &[],
        &[
            "cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
            "cuIpcOpenMemHandle.same-process",
        ],
    ),
    (
        "open-v1-flags",
        &[],
        &[
            "cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
            "cuIpcOpenMemHandle.same-process",
        ],
    ),
    (
        "open-same-process",
        &[],
        &["cuIpcOpenMemHandle.same-process"],
    ),
    ("close-not-opened", &[], &["cuIpcCloseMemHandle.not-opened"]),
    (
        "event-same-process",
        &[],
        &["cuIpcOpenEventHandle.same-process"],
    ),
    (
        "export-managed",
        &[],
        &["cuIpcGetMemHandle.memory-not-exportable"],
    ),
    (
        "export-pool",
        &[],
        &["cuIpcGetMemHandle.memory-not-exportable"],
    ),
    (
        "export-host",
        &[],
        &["cuIpcGetMemHandle.memory-not-exportable"],
    ),
    (
        "event-not-interprocess",
        &[],
        &["cuIpcGetEventHandle.event-not-interprocess"],
    ),
    // Two processes: opened twice, closed three times.
    (
        "open-second-context",
        &[],
        &["cuIpcOpenMemHandle.second-context-same-device"],
    ),
    (
        "destroy-context-open",
        &[],
        &["cuCtxDestroy.ipc-memory-still-open"],
    ),
    ("close-twice", &[], &["cuIpcCloseMemHandle.not-opened"]),
    ("close-interior", &[], &["cuIpcCloseMemHandle.not-opened"]),
    // Opened twice with _v2 (counted, silent), then with the legacy export: 208, explained.
    (
        "open-v1-again",
        &[],
        &["cuIpcOpenMemHandle.already-open-legacy"],
    ),
];

const HIP_CASES: &[Case] = &[
    (
        "export-interior",
        &[],
        &["hipIpcGetMemHandle.not-allocation-base"],
    ),
    (
        "open-same-process",
        &[],
        &["hipIpcOpenMemHandle.same-process"],
    ),
    (
        "open-flags",
        &[],
        &[
            "hipIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
            "hipIpcOpenMemHandle.same-process",
        ],
    ),
    // ROCm 5's value of the flag on the simulator's ROCm 6.2 runtime.
    (
        "open-flags-rocm5",
        &[],
        &[
            "hipIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
            "hipIpcOpenMemHandle.same-process",
        ],
    ),
    (
        "close-not-opened",
        &[],
        &["hipIpcCloseMemHandle.not-opened"],
    ),
    (
        "event-same-process",
        &[],
        &["hipIpcOpenEventHandle.same-process"],
    ),
    (
        "export-managed",
        &[],
        &["hipIpcGetMemHandle.memory-not-exportable"],
    ),
    (
        "event-not-interprocess",
        &[],
        &["hipIpcGetEventHandle.event-not-interprocess"],
    ),
];

#[test]
fn each_cuda_misuse_fires_exactly_its_rule() {
    let p = programs("ipc_cuda_cases");
    check_cases(&p.scratch, &p.cuda, CUDA_CASES);
}

#[test]
fn each_hip_misuse_fires_exactly_its_rule() {
    let p = programs("ipc_hip_cases");
    check_cases(&p.scratch, &p.hip, HIP_CASES);
}

/// An exporter and an importer in two processes, done right: no finding in either, and both
/// traced.
#[test]
fn correct_programs_produce_no_finding() {
    let p = programs("ipc_correct");
    let r = run_checked(&p.scratch, &p.cuda, "correct", &[]);
    assert!(r.findings().is_empty(), "{}", r.stderr());
    let processes: BTreeSet<String> = r.records.iter().map(|x| x["pid"].to_string()).collect();
    assert_eq!(
        processes.len(),
        2,
        "the exporter and the importer are traced"
    );
    let functions: BTreeSet<&str> = calls(&r.records)
        .iter()
        .filter_map(|c| c["fn"].as_str())
        .collect();
    for f in [
        "cuIpcGetMemHandle",
        "cuIpcOpenMemHandle_v2",
        "cuIpcCloseMemHandle",
    ] {
        assert!(functions.contains(f), "{f} is traced: {functions:?}");
    }
    let r = run_checked(&p.scratch, &p.hip, "export-base", &[]);
    assert!(r.findings().is_empty(), "{}", r.stderr());
}

/// The report phase's rules, each staged across two processes: no single process could tell, so
/// none is a live finding; `sharecheck report` reads both traces and finds exactly the one the
/// scenario stages, on the call that did it. The same exchange done right finds nothing.
const REPORT_CASES: &[(&str, &str, &str)] = &[
    (
        "free-early",
        "cuMemFree.ipc-memory-open-elsewhere",
        "cuMemFree_v2",
    ),
    (
        "open-after-free",
        "cuIpcOpenMemHandle.handle-of-freed-memory",
        "cuIpcOpenMemHandle_v2",
    ),
    (
        "never-close",
        "cuIpcOpenMemHandle.never-closed",
        "cuIpcOpenMemHandle_v2",
    ),
    (
        "exporter-exits",
        "cuIpcGetMemHandle.exporter-exited-while-open",
        "cuIpcGetMemHandle",
    ),
    (
        "exporter-destroys-context",
        "cuCtxDestroy.ipc-memory-open-elsewhere",
        "cuCtxDestroy_v2",
    ),
    (
        "second-context-other-allocation",
        "cuIpcOpenMemHandle.second-context-same-exporter",
        "cuIpcOpenMemHandle_v2",
    ),
    (
        "event-never-destroyed",
        "cuIpcOpenEventHandle.never-destroyed",
        "cuIpcOpenEventHandle",
    ),
    (
        "event-destroyed-early",
        "cuEventDestroy.ipc-event-open-elsewhere",
        "cuEventDestroy_v2",
    ),
];

/// The same in HIP (tests/c/ipc_hip.c).
const HIP_REPORT_CASES: &[(&str, &str, &str)] = &[
    ("free-early", "hipFree.ipc-memory-open-elsewhere", "hipFree"),
    (
        "open-after-free",
        "hipIpcOpenMemHandle.handle-of-freed-memory",
        "hipIpcOpenMemHandle",
    ),
    (
        "never-close",
        "hipIpcOpenMemHandle.never-closed",
        "hipIpcOpenMemHandle",
    ),
    (
        "exporter-exits",
        "hipIpcGetMemHandle.exporter-exited-while-open",
        "hipIpcGetMemHandle",
    ),
    (
        "event-never-destroyed",
        "hipIpcOpenEventHandle.never-destroyed",
        "hipIpcOpenEventHandle",
    ),
    (
        "event-destroyed-early",
        "hipEventDestroy.ipc-event-open-elsewhere",
        "hipEventDestroy",
    ),
];

#[test]
fn each_lifetime_mistake_across_processes_is_found_in_the_report() {
    let p = programs("ipc_report_phase");
    for (program, cases, correct) in [
        (&p.cuda, REPORT_CASES, "correct"),
        (&p.hip, HIP_REPORT_CASES, "exchange"),
    ] {
        for (scenario, rule, function) in cases {
            let r = run_checked(&p.scratch, program, scenario, &[]);
            assert!(
                r.rules_besides_failures().is_empty(),
                "{scenario}: not a live finding: {}",
                r.stderr()
            );
            assert!(doubly_explained(&r).is_empty(), "{scenario}");
            assert_eq!(
                report_phase(&r),
                [(rule.to_string(), function.to_string())],
                "{scenario}"
            );
        }
        let r = run_checked(&p.scratch, program, correct, &[]);
        assert!(r.findings().is_empty(), "{}", r.stderr());
        assert!(report_phase(&r).is_empty(), "{correct}");
        // The exchange, as the report shows it: export, open(s), close(s), free, across both
        // processes, in time order.
        let view = report_json(&r);
        let steps: Vec<&str> = view["ipc"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["fn"].as_str().unwrap())
            .collect();
        let pids: BTreeSet<i64> = view["ipc"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["pid"].as_i64().unwrap())
            .collect();
        assert_eq!(pids.len(), 2, "{view}");
        assert!(
            steps.first().unwrap().ends_with("IpcGetMemHandle"),
            "{steps:?}"
        );
        assert!(steps.last().unwrap().contains("Free"), "{steps:?}");
        assert!(
            steps.iter().any(|f| f.contains("IpcCloseMemHandle")),
            "{steps:?}"
        );
    }
}

/// A process that writes no trace hears at its exit of the memory it opened and never closed
/// (decided from its own calls), and once that the checks across processes are off (they need
/// every process's trace); a correct exchange hears only the latter.
#[test]
fn an_untraced_importer_hears_what_it_left_open() {
    let p = programs("ipc_untraced_exit");
    let stderr = |program: &std::path::Path, scenario: &str| {
        let mut cmd = p.scratch.under_shim(program);
        cmd.env_remove(sharecheck_core::schema::env::TRACE)
            .arg(scenario);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{scenario}: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let off = "wrote no trace: the checks across processes";
    for (program, rule, correct) in [
        (&p.cuda, "cuIpcOpenMemHandle.never-closed", "correct"),
        (&p.hip, "hipIpcOpenMemHandle.never-closed", "exchange"),
    ] {
        let left = stderr(program, "never-close");
        let line = left
            .lines()
            .find(|l| l.contains(&format!("warning[{rule}]")))
            .unwrap_or_else(|| panic!("no {rule} at exit:\n{left}"));
        assert!(line.contains("was opened once"), "{line}");
        assert!(left.contains(" at exit; fix: "), "{left}");
        assert!(left.contains(off), "{left}");
        let clean = stderr(program, correct);
        assert!(!clean.contains("never-closed"), "{clean}");
        assert!(clean.contains(off), "{clean}");
    }
}

#[test]
fn every_ipc_rule_has_a_negative_case() {
    let covered = [CUDA_CASES, HIP_CASES]
        .into_iter()
        .flat_map(|cases| cases.iter().flat_map(|(_, _, ids)| ids.iter().copied()))
        .chain(
            [REPORT_CASES, HIP_REPORT_CASES]
                .into_iter()
                .flat_map(|cases| cases.iter().map(|(_, rule, _)| *rule)),
        )
        // Staged with a simulator setting of its own:
        // an_importer_that_cannot_reach_the_exporters_device_is_found_in_the_report.
        .chain([
            "cuIpcOpenMemHandle.device-cannot-access-exporter",
            "hipIpcOpenMemHandle.device-cannot-access-exporter",
        ]);
    let missing = rules::without_case(&["ipc"], covered);
    assert!(
        missing.is_empty(),
        "rules without a negative test: {missing:?}"
    );
}

/// An event handle exchanged right (the importer destroys its copy before the exporter destroys
/// the event): no finding, live or in the report, and the report's view shows the exchange.
#[test]
fn a_correct_event_exchange_finds_nothing() {
    let p = programs("ipc_event_exchange");
    for (program, expected) in [
        (
            &p.cuda,
            [
                "cuIpcGetEventHandle",
                "cuIpcOpenEventHandle",
                "cuEventDestroy_v2",
                "cuEventDestroy_v2",
            ],
        ),
        (
            &p.hip,
            [
                "hipIpcGetEventHandle",
                "hipIpcOpenEventHandle",
                "hipEventDestroy",
                "hipEventDestroy",
            ],
        ),
    ] {
        let r = run_checked(&p.scratch, program, "event-exchange", &[]);
        assert!(r.findings().is_empty(), "{}", r.stderr());
        assert!(report_phase(&r).is_empty());
        let view = report_json(&r);
        let steps: Vec<&str> = view["ipc"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["fn"].as_str().unwrap())
            .collect();
        assert_eq!(steps, expected, "{view}");
    }
}

/// A context destroyed with a mapping open is found live, and the report then knows the mapping
/// went with it: the open's record names its context, so neither the importer's exit nor the
/// exporter's (which follows) is reported as leaving it open.
#[test]
fn a_mapping_ends_with_the_context_it_was_opened_in() {
    let p = programs("ipc_context_destroyed");
    let r = run_checked(&p.scratch, &p.cuda, "destroy-context-open", &[]);
    let live: Vec<&str> = r
        .findings()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        live,
        ["cuCtxDestroy.ipc-memory-still-open"],
        "{}",
        r.stderr()
    );
    assert!(report_phase(&r).is_empty(), "{:?}", report_phase(&r));
    let opens: Vec<&serde_json::Value> = calls(&r.records)
        .into_iter()
        .filter(|c| c["fn"] == "cuIpcOpenMemHandle_v2" && c["r"] == 0)
        .collect();
    assert_eq!(opens.len(), 2);
    assert!(
        opens
            .iter()
            .all(|o| o["ctx"].as_str().is_some_and(|c| c.starts_with("0x"))),
        "{opens:?}"
    );
    assert_ne!(opens[0]["ctx"], opens[1]["ctx"], "two contexts");
}

/// An importer whose device cannot access the exporter's: decided in the report by device UUID
/// (the export's record names the memory's device, the open's the devices its own cannot
/// access); the same exchange where the devices can peer finds nothing.
#[test]
fn an_importer_that_cannot_reach_the_exporters_device_is_found_in_the_report() {
    let p = programs("ipc_unreachable");
    let none = (env::SIM_PEERS, "none");
    for (program, rule, open, export_fn) in [
        (
            &p.cuda,
            "cuIpcOpenMemHandle.device-cannot-access-exporter",
            "cuIpcOpenMemHandle_v2",
            "cuIpcGetMemHandle",
        ),
        (
            &p.hip,
            "hipIpcOpenMemHandle.device-cannot-access-exporter",
            "hipIpcOpenMemHandle",
            "hipIpcGetMemHandle",
        ),
    ] {
        let r = run_checked(&p.scratch, program, "open-unreachable", &[none]);
        assert!(
            r.rules_besides_failures().is_empty(),
            "not live: {}",
            r.stderr()
        );
        assert_eq!(
            report_phase(&r),
            [(rule.to_string(), open.to_string())],
            "{rule}"
        );
        let export = calls(&r.records)
            .into_iter()
            .find(|c| c["fn"] == export_fn)
            .unwrap()
            .clone();
        assert_eq!(export["dev"], 1, "{export}");
        assert!(export["uuid"]
            .as_str()
            .is_some_and(|u| u.starts_with("GPU-")));
        let r = run_checked(&p.scratch, program, "open-unreachable", &[]);
        assert!(r.findings().is_empty(), "{}", r.stderr());
        assert!(report_phase(&r).is_empty(), "{:?}", report_phase(&r));
    }
}

/// An export of memory the thread exported before, with nothing freed since, leaves the memory's
/// place (context, device, UUID) out of its record: the first export of the handle has it, and
/// the report gives it to the later ones. After a free, the next export has its own again.
#[test]
fn an_export_again_leaves_its_place_to_the_first_export_of_its_handle() {
    let p = programs("ipc_export_again");
    let r = run_checked(&p.scratch, &p.cuda, "export-again", &[]);
    assert!(r.findings().is_empty(), "{}", r.stderr());
    let exports: Vec<&serde_json::Value> = calls(&r.records)
        .into_iter()
        .filter(|c| c["fn"] == "cuIpcGetMemHandle")
        .collect();
    assert_eq!(exports.len(), 3, "{exports:?}");
    let placed: Vec<bool> = exports
        .iter()
        .map(|e| e.get("ctx").is_some() && e.get("dev").is_some() && e.get("uuid").is_some())
        .collect();
    assert_eq!(placed, [true, false, true], "{exports:?}");
    assert!(
        exports.iter().all(|e| e.get("dev").is_none_or(|d| *d == 0)),
        "{exports:?}"
    );
    assert_eq!(exports[0]["a"]["*pHandle"], exports[1]["a"]["*pHandle"]);
}

/// An export remembered clean takes the quick path (issue 24); when the driver refuses it there,
/// the failure is explained as on the full path (`call.failed`, info), traced or not.
#[test]
fn a_remembered_export_the_driver_refuses_is_explained() {
    let p = programs("ipc_export_again_refused");
    let r = run_checked(&p.scratch, &p.cuda, "export-again-refused", &[]);
    assert_eq!(r.findings().len(), 1, "{}", r.stderr());
    assert_eq!(r.count("call.failed"), 1, "{}", r.stderr());
    let rets: Vec<i64> = fn_ret(&r.records)
        .into_iter()
        .filter(|(f, _)| f == "cuIpcGetMemHandle")
        .map(|(_, ret)| ret)
        .collect();
    assert_eq!(rets, [0, 0, 1], "{}", r.stderr());
    let stderr = p.scratch.untraced_stderr(&p.cuda, "export-again-refused");
    assert_eq!(
        stderr.matches("sharecheck: info[call.failed] ").count(),
        1,
        "{stderr}"
    );
}
