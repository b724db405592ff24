//! The virtual memory management rules, each shown firing alone (negative) and a correct program
//! shown silent (positive), on the simulated driver, which answers each misuse as R580 does
//! (scripts/gpu/results/*-vmm-probe.txt). Program: tests/c/vmm_cuda.c.

mod common;
use common::scenarios::*;
use common::*;

const NONE: &[(&str, &str)] = &[];

const CASES: &[Case] = &[
    ("create-size", NONE, &["cuMemCreate.size-not-granular"]),
    ("map-not-granular", NONE, &["cuMemMap.not-granular"]),
    ("map-past-allocation", NONE, &["cuMemMap.past-allocation"]),
    ("map-not-reserved", NONE, &["cuMemMap.not-in-reservation"]),
    ("map-already-mapped", NONE, &["cuMemMap.already-mapped"]),
    ("unmap-sub-range", NONE, &["cuMemUnmap.not-whole-mapping"]),
    ("unmap-nothing", NONE, &["cuMemUnmap.not-whole-mapping"]),
    (
        "set-access-not-mapped",
        NONE,
        &["cuMemSetAccess.range-not-mapped"],
    ),
    (
        "address-free-part",
        NONE,
        &["cuMemAddressFree.not-reservation"],
    ),
    (
        "export-not-requested",
        NONE,
        &["cuMemExportToShareableHandle.type-not-requested"],
    ),
    ("memset-before-access", NONE, &["vmm.used-before-access"]),
    ("release-twice", NONE, &["cuMemRelease.handle-not-live"]),
    ("correct", NONE, &[]),
];

fn program(scratch: &Scratch) -> std::path::PathBuf {
    let libs = format!("-L{}", scratch.sim_libs().display());
    scratch.compile("vmm_cuda.c", "vmm_cuda", &[&libs, "-lcuda"])
}

#[test]
fn each_misuse_fires_exactly_its_rule_and_correct_use_is_silent() {
    let scratch = Scratch::new("vmm_cases");
    let exe = program(&scratch);
    check_cases(&scratch, &exe, CASES);
}

/// What a process leaves at its exit, found by `sharecheck report` on the calls that made it;
/// the negative scenarios give back what they set up, and the correct program leaves nothing.
#[test]
fn what_a_process_leaves_at_exit_is_found_by_the_report() {
    let scratch = Scratch::new("vmm_report");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "leak", NONE);
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    let found = report_phase(&r);
    let expected: Vec<(String, String)> = [
        ("cuMemAddressReserve.never-freed", "cuMemAddressReserve"),
        ("cuMemCreate.never-released", "cuMemCreate"),
        ("cuMemMap.never-unmapped", "cuMemMap"),
    ]
    .iter()
    .map(|(rule, f)| (rule.to_string(), f.to_string()))
    .collect();
    assert_eq!(found, expected);
    for (scenario, _, _) in CASES {
        let r = run_checked(&scratch, &exe, scenario, NONE);
        assert!(
            report_phase(&r).is_empty(),
            "{scenario}: {:?}",
            report_phase(&r)
        );
    }
}

/// A handle mapped again and again, traced: its first map's record keeps the stack (the report
/// shows where the handle was first mapped), the later maps and unmaps are recorded as clean
/// calls (the quick path's), and the report finds exactly what the process left: the handle, the
/// reservation and the last mapping, with the first map's stack.
#[test]
fn a_remapped_handle_keeps_its_first_map_s_stack_and_the_rest_is_recorded_plainly() {
    let scratch = Scratch::new("vmm_remap");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "remap", NONE);
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    let maps: Vec<&serde_json::Value> = calls(&r.records)
        .into_iter()
        .filter(|c| c["fn"] == "cuMemMap" || c["fn"] == "cuMemUnmap")
        .collect();
    let shape: Vec<(&str, i64, bool)> = maps
        .iter()
        .map(|c| {
            (
                c["fn"].as_str().unwrap(),
                c["r"].as_i64().unwrap(),
                c.get("stack").is_some(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("cuMemMap", 0, true),
            ("cuMemUnmap", 0, false),
            ("cuMemMap", 0, false),
            ("cuMemUnmap", 0, false),
            ("cuMemMap", 0, false),
            ("cuMemUnmap", 0, false),
            ("cuMemMap", 0, false),
        ]
    );
    // Every map names the same handle and size; the last is two granules on.
    let first_ptr = u64::from_str_radix(
        maps[0]["a"]["ptr"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let last_ptr = u64::from_str_radix(
        maps[6]["a"]["ptr"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let size = maps[0]["a"]["size"].as_u64().unwrap();
    assert_eq!(last_ptr, first_ptr + size);
    for m in maps.iter().filter(|c| c["fn"] == "cuMemMap") {
        assert_eq!(m["a"]["handle"], maps[0]["a"]["handle"]);
        assert_eq!(m["a"]["size"], maps[0]["a"]["size"]);
    }
    let found = report_phase(&r);
    assert_eq!(
        found,
        [
            ("cuMemAddressReserve.never-freed", "cuMemAddressReserve"),
            ("cuMemCreate.never-released", "cuMemCreate"),
            ("cuMemMap.never-unmapped", "cuMemMap"),
        ]
        .map(|(rule, f)| (rule.to_string(), f.to_string()))
    );
    // The mapping left is the last map's, shown where its handle was first mapped.
    let summary = report_json(&r);
    let left = summary["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "cuMemMap.never-unmapped")
        .expect("the mapping left");
    assert_eq!(left["seq"], maps[6]["seq"]);
    assert_eq!(left["stack"], maps[0]["stack"]);
    let message = left["message"].as_str().unwrap();
    assert!(
        message.ends_with(&format!(
            "(the stack shown is where its handle was first mapped, cuMemMap call #{})",
            maps[0]["seq"]
        )),
        "{message}"
    );
}

/// A process that writes no trace gets what it left at its exit reported live, at exit, by the
/// same rules; a correct process gets nothing, and a traced one leaves the decision to `sharecheck
/// report` (nothing live).
#[test]
fn an_untraced_process_hears_what_it_left_at_exit() {
    let scratch = Scratch::new("vmm_exit_live");
    let exe = program(&scratch);
    let untraced_with =
        |scenario: &str, options: &str| untraced(&scratch, &exe, scenario, options).1;
    let stderr = untraced_with("leak", "");
    heard_at_exit(
        &stderr,
        &[
            "cuMemCreate.never-released",
            "cuMemMap.never-unmapped",
            "cuMemAddressReserve.never-freed",
        ],
    );
    // A muted rule is left out at exit too.
    let stderr = untraced_with("leak", "mute=cuMemMap.never-unmapped");
    assert_eq!(stderr.matches(" at exit; fix: ").count(), 2, "{stderr}");
    assert!(!stderr.contains("never-unmapped"), "{stderr}");
    let stderr = untraced_with("correct", "");
    assert!(!stderr.contains("never-"), "{stderr}");
    let traced = run_checked(&scratch, &exe, "leak", NONE);
    assert!(!traced.stderr().contains("never-"), "{}", traced.stderr());
}

/// An exported POSIX fd the process never closed: found on its export by `sharecheck report`
/// (the exit record lists it) and live at the exit of a process that writes no trace; closed, it
/// is not, though the simulated driver's own later descriptors are of the same kind.
#[test]
fn an_exported_fd_never_closed_is_found_at_exit() {
    let scratch = Scratch::new("vmm_fd_leak");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "fd-leak", NONE);
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    assert_eq!(
        report_phase(&r),
        [(
            "cuMemExportToShareableHandle.fd-never-closed".to_string(),
            "cuMemExportToShareableHandle".to_string()
        )]
    );
    let fd = printed_fd(&String::from_utf8_lossy(&r.out.stdout));
    let exit = r
        .records
        .iter()
        .find(|rec| rec["event"] == "exit")
        .expect("an exit record");
    assert_eq!(exit["exported_fds_open"], serde_json::json!([fd]), "{exit}");
    let closed = run_checked(&scratch, &exe, "fd-closed", NONE);
    assert!(
        report_phase(&closed).is_empty(),
        "{:?}",
        report_phase(&closed)
    );
    let exit = closed
        .records
        .iter()
        .find(|rec| rec["event"] == "exit")
        .expect("an exit record");
    assert!(exit.get("exported_fds_open").is_none(), "{exit}");
    let (stdout, stderr) = untraced(&scratch, &exe, "fd-leak", "");
    let fd = printed_fd(&stdout);
    let line = heard_at_exit(&stderr, &["cuMemExportToShareableHandle.fd-never-closed"])[0];
    assert!(line.contains(&format!("-> fd {fd}")), "{line}");
    let (_, stderr) = untraced(&scratch, &exe, "fd-closed", "");
    assert!(!stderr.contains("fd-never-closed"), "{stderr}");
}

/// `exe SCENARIO` under the shim with no trace (`options`: SHARECHECK_OPTIONS), which must
/// succeed: its stdout and stderr.
fn untraced(
    scratch: &Scratch,
    exe: &std::path::Path,
    scenario: &str,
    options: &str,
) -> (String, String) {
    let mut cmd = scratch.under_shim(exe);
    cmd.env_remove(sharecheck_core::schema::env::TRACE)
        .env(sharecheck_core::schema::env::OPTIONS, options)
        .arg(scenario);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{scenario}: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Each of `rules` heard live at exit, once, as info (what a process holds at its end is freed
/// then), and nothing else at exit: their lines, in `rules`' order.
fn heard_at_exit<'a>(stderr: &'a str, rules: &[&str]) -> Vec<&'a str> {
    let lines: Vec<&str> = rules
        .iter()
        .map(|rule| {
            let line = stderr
                .lines()
                .find(|l| l.contains(&format!("[{rule}]")))
                .unwrap_or_else(|| panic!("no {rule} in:\n{stderr}"));
            assert!(line.starts_with("sharecheck: info["), "{line}");
            line
        })
        .collect();
    assert_eq!(
        stderr.matches(" at exit; fix: ").count(),
        rules.len(),
        "{stderr}"
    );
    lines
}

/// The descriptor a `vmm_cuda fd-leak` run printed (`FD n`).
fn printed_fd(stdout: &str) -> i64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("FD "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the program prints its fd")
}

/// A FABRIC create the driver refuses for want of an IMEX channel is explained by what the host
/// lacks; on a host with a channel file the refusal is the driver's to explain.
#[test]
fn a_fabric_create_without_an_imex_channel_is_explained() {
    let scratch = Scratch::new("vmm_fabric");
    let exe = program(&scratch);
    let r = run_checked(
        &scratch,
        &exe,
        "fabric-no-imex",
        &[("SHARECHECK_SIM_FABRIC_CHANNEL", "none")],
    );
    assert_eq!(printed_calls(&r.out), [("cuMemCreate".to_string(), 800)]);
    let channel =
        std::fs::read_dir("/dev/nvidia-caps-imex-channels").is_ok_and(|mut d| d.next().is_some());
    let rules = r.rules_besides_failures();
    if channel {
        assert!(rules.is_empty(), "{rules:?}");
    } else {
        assert_eq!(
            rules,
            ["cuMemCreate.fabric-without-imex-channel".to_string()].into(),
            "{}",
            r.stderr()
        );
    }
}

/// A FABRIC handle crosses processes: imported where the importer shares the exporter's IMEX
/// channel (the memory the exporter wrote reads back, and nothing is said), refused in a process
/// of another IMEX domain, which the report explains from both processes' records. The export and
/// the imports carry the handle's keyed fingerprint only, the same in all three.
#[test]
fn a_fabric_handle_is_imported_in_its_imex_domain_and_refused_in_another() {
    use std::io::BufRead;
    let scratch = Scratch::new("vmm_fabric_domains");
    let exe = program(&scratch);
    let domain = sharecheck_core::schema::env::IMEX_DOMAIN;
    let mut exporter = scratch.under_shim(&exe);
    exporter
        .arg("fabric-export")
        .env(domain, "rack-1")
        .env("SHARECHECK_SIM_FABRIC_CHANNEL", "0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut exporter = exporter.spawn().unwrap();
    let mut lines = std::io::BufReader::new(exporter.stdout.take().unwrap()).lines();
    let handle = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("HANDLE ").map(str::to_string))
        .expect("the exporter prints its handle");
    let import = |rack: &str, channel: &str| {
        let mut cmd = scratch.under_shim(&exe);
        cmd.args(["fabric-import", &handle])
            .env(domain, rack)
            .env("SHARECHECK_SIM_FABRIC_CHANNEL", channel);
        run_ok(&mut cmd)
    };
    let same = import("rack-1", "0");
    assert_eq!(
        printed_calls(&same)
            .iter()
            .find(|(f, _)| f == "cuMemImportFromShareableHandle"),
        Some(&("cuMemImportFromShareableHandle".to_string(), 0))
    );
    assert_eq!(printed(&same, "VALUE"), "42");
    let other = import("rack-2", "1");
    assert_eq!(
        printed_calls(&other),
        [("cuMemImportFromShareableHandle".to_string(), 800)]
    );
    drop(exporter.stdin.take());
    assert!(exporter.wait().unwrap().success());
    assert!(
        !handle.is_empty()
            && scratch
                .records()
                .iter()
                .all(|r| !r.to_string().contains(&handle[..32]))
    );
    let fps: Vec<String> = calls(&scratch.records())
        .iter()
        .filter_map(|c| {
            let a = &c["a"];
            a.get("*shareableHandle")
                .or_else(|| a.get("*osHandle"))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        })
        .collect();
    assert_eq!(fps.len(), 3, "{fps:?}");
    assert!(
        fps.iter().all(|fp| fp.starts_with("fp:") && *fp == fps[0]),
        "{fps:?}"
    );
    let out = std::process::Command::new(cli())
        .args(["report", "--format", "json"])
        .arg(scratch.traces())
        .output()
        .unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found: Vec<(String, String, i64)> = summary["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["phase"] == "report" || f["severity"] != "info")
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or("").to_string(),
                f["fn"].as_str().unwrap_or("").to_string(),
                f["pid"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        found,
        [(
            "cuMemImportFromShareableHandle.fabric-other-imex-domain".to_string(),
            "cuMemImportFromShareableHandle".to_string(),
            other_pid(&scratch, "rack-2"),
        )],
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The pid of the process whose record names IMEX domain `domain`.
fn other_pid(scratch: &Scratch, domain: &str) -> i64 {
    scratch
        .records()
        .iter()
        .find(|r| r["event"] == "process" && r["imex_domain"] == domain)
        .and_then(|r| r["pid"].as_i64())
        .expect("a process record names the domain")
}

#[test]
fn every_vmm_rule_has_a_case() {
    let covered = CASES
        .iter()
        .chain(HIP_CASES)
        .flat_map(|(_, _, ids)| ids.iter().copied())
        .chain(["cuMemCreate.fabric-without-imex-channel"])
        .chain(
            sharecheck_core::rules::vmm::report::REPORTED_ON
                .iter()
                .map(|(rule, _)| rule.id),
        );
    let missing = sharecheck_core::rules::without_case(&["vmm"], covered);
    assert!(missing.is_empty(), "rules without a case: {missing:?}");
}

/// The simulated driver answers as R580 did: each misuse's code, a release past the references
/// refused, an unmap of nothing accepted, and memory imported from the process's own export is
/// the same memory (a memset through the import reads back through the first mapping).
#[test]
fn the_simulated_driver_answers_as_r580() {
    let scratch = Scratch::new("vmm_answers");
    let exe = program(&scratch);
    // The misuse is the symbol's first call in the scenario, its second where the set-up made
    // one before it (the calls after it give back what was set up).
    for (scenario, symbol, nth, code) in [
        ("create-size", "cuMemCreate", 0, 1),
        ("map-not-granular", "cuMemMap", 0, 801),
        ("map-past-allocation", "cuMemMap", 0, 801),
        ("map-not-reserved", "cuMemMap", 0, 801),
        ("map-already-mapped", "cuMemMap", 1, 1),
        ("unmap-sub-range", "cuMemUnmap", 0, 1),
        ("unmap-nothing", "cuMemUnmap", 0, 0),
        ("set-access-not-mapped", "cuMemSetAccess", 0, 1),
        ("address-free-part", "cuMemAddressFree", 0, 1),
        ("export-not-requested", "cuMemExportToShareableHandle", 0, 1),
        ("memset-before-access", "cuMemsetD8_v2", 0, 1),
    ] {
        let r = run_checked(&scratch, &exe, scenario, NONE);
        let calls = printed_calls(&r.out);
        let misuse = calls.iter().filter(|(f, _)| f == symbol).nth(nth);
        assert_eq!(misuse.map(|(_, c)| *c), Some(code), "{scenario}: {calls:?}");
        assert!(
            calls
                .iter()
                .skip_while(|c| Some(*c) != misuse)
                .skip(1)
                .all(|(_, c)| *c == 0),
            "{scenario}: what it set up is given back: {calls:?}"
        );
    }
    let r = run_checked(&scratch, &exe, "release-twice", NONE);
    let releases: Vec<i64> = printed_calls(&r.out)
        .into_iter()
        .filter(|(f, _)| f == "cuMemRelease")
        .map(|(_, c)| c)
        .collect();
    assert_eq!(releases, [0, 1]);
    let r = run_checked(&scratch, &exe, "correct", NONE);
    let stdout = String::from_utf8_lossy(&r.out.stdout);
    assert!(
        printed_calls(&r.out).iter().all(|(_, c)| *c == 0),
        "{stdout}"
    );
    assert!(stdout.contains("SAME 1"), "{stdout}");
}

/// A handle imported from a POSIX fd is not matched to an export (an fd names no allocation
/// outside its process): the report says how many and that it guessed none; a program that
/// imports nothing hears nothing of it.
#[test]
fn posix_fd_imports_are_said_not_matched() {
    let scratch = Scratch::new("vmm_posix_imports");
    let exe = program(&scratch);
    let r = run_checked(&scratch, &exe, "correct", NONE);
    assert_eq!(report_json(&r)["vmm_posix_imports_not_matched"], 1);
    let r = run_checked(&scratch, &exe, "leak", NONE);
    assert!(report_json(&r)
        .get("vmm_posix_imports_not_matched")
        .is_none());
}

/// HIP's cases (tests/c/vmm_hip.c), with the ROCm 6.2 runtime's answers on the simulator: each
/// misuse fires exactly its rule; a correct life is silent and every call is traced.
const HIP_CASES: &[Case] = &[
    ("create-flags", NONE, &["hipMemCreate.flags-not-zero"]),
    (
        "reserve-flags",
        NONE,
        &["hipMemAddressReserve.flags-not-zero"],
    ),
    (
        "export-flags",
        NONE,
        &["hipMemExportToShareableHandle.flags-not-zero"],
    ),
    ("map-flags", NONE, &["hipMemMap.flags-not-zero"]),
    ("map-offset", NONE, &["hipMemMap.offset-not-zero"]),
    ("release-twice", NONE, &["hipMemRelease.not-held"]),
    (
        "address-free-twice",
        NONE,
        &["hipMemAddressFree.not-reservation"],
    ),
    ("correct", NONE, &[]),
];

#[test]
fn each_hip_misuse_fires_exactly_its_rule_and_correct_use_is_silent() {
    let scratch = Scratch::new("vmm_hip_cases");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("vmm_hip.c", "vmm_hip", &[&libs, "-lamdhip64"]);
    check_cases(&scratch, &exe, HIP_CASES);
    let r = run_checked(&scratch, &exe, "correct", NONE);
    assert_eq!(
        succeeded(&r.records, &["hipMem"]),
        [
            "hipMemCreate",
            "hipMemAddressReserve",
            "hipMemMap",
            "hipMemSetAccess",
            "hipMemExportToShareableHandle",
            "hipMemImportFromShareableHandle",
            "hipMemRelease",
            "hipMemUnmap",
            "hipMemRelease",
            "hipMemAddressFree",
        ],
        "{}",
        r.stderr()
    );
    // The export's descriptor is in its record, as for CUDA (a number, never a handle's bytes).
    let export = calls(&r.records)
        .into_iter()
        .find(|c| c["fn"] == "hipMemExportToShareableHandle")
        .expect("the export is traced");
    assert!(export["a"]["*shareableHandle"].is_i64(), "{export}");
}

/// What a HIP process leaves at its exit: found by `sharecheck report` by HIP's rules on the
/// calls that made it, and heard live at the exit of a process that writes no trace; every other
/// scenario gives back what it took.
#[test]
fn what_a_hip_process_leaves_at_exit_is_found_by_hip_s_rules() {
    let scratch = Scratch::new("vmm_hip_exit");
    let libs = format!("-L{}", scratch.sim_libs().display());
    let exe = scratch.compile("vmm_hip.c", "vmm_hip", &[&libs, "-lamdhip64"]);
    let r = run_checked(&scratch, &exe, "leak", NONE);
    assert!(r.rule_ids().is_empty(), "{}", r.stderr());
    let expected: Vec<(String, String)> = [
        ("hipMemAddressReserve.never-freed", "hipMemAddressReserve"),
        ("hipMemCreate.never-released", "hipMemCreate"),
        ("hipMemMap.never-unmapped", "hipMemMap"),
    ]
    .iter()
    .map(|(rule, f)| (rule.to_string(), f.to_string()))
    .collect();
    assert_eq!(report_phase(&r), expected);
    for (scenario, _, _) in HIP_CASES {
        let r = run_checked(&scratch, &exe, scenario, NONE);
        assert!(
            report_phase(&r).is_empty(),
            "{scenario}: {:?}",
            report_phase(&r)
        );
    }
    let (_, stderr) = untraced(&scratch, &exe, "leak", "");
    heard_at_exit(
        &stderr,
        &[
            "hipMemCreate.never-released",
            "hipMemMap.never-unmapped",
            "hipMemAddressReserve.never-freed",
        ],
    );
    let (_, stderr) = untraced(&scratch, &exe, "correct", "");
    assert!(!stderr.contains("never-"), "{stderr}");
}
