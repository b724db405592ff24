//! The peer-access rules, each shown firing alone (negative) and correct programs shown silent
//! (positive), on the simulated driver. Any unexpected finding fails a test: every scenario's
//! findings must be exactly the expected set. Programs: tests/c/peer_cuda.c, tests/c/peer_hip.c.

mod common;
use common::scenarios::*;
use common::*;
use sharecheck_core::rules::{self, Kind};
use sharecheck_core::schema::env;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

struct Programs {
    scratch: Scratch,
    cuda: PathBuf,
    cuda_ptds: PathBuf,
    hip: PathBuf,
}

/// The scenario programs, compiled once per test run (every test shares them).
struct Built {
    cuda: PathBuf,
    cuda_ptds: PathBuf,
    hip: PathBuf,
}

static BUILT: std::sync::OnceLock<Built> = std::sync::OnceLock::new();

fn programs(name: &str) -> Programs {
    let built = BUILT.get_or_init(|| {
        let scratch = Scratch::new("peer_programs");
        let libs = scratch.sim_libs();
        let link_cuda = [&format!("-L{}", libs.display()), "-lcuda", "-pthread"];
        let cuda = scratch.compile("peer_cuda.c", "peer_cuda", &link_cuda);
        let mut ptds_args = link_cuda.to_vec();
        ptds_args.push("-DCUDA_API_PER_THREAD_DEFAULT_STREAM");
        let cuda_ptds = scratch.compile("peer_cuda.c", "peer_cuda_ptds", &ptds_args);
        let hip = scratch.compile(
            "peer_hip.c",
            "peer_hip",
            &[&format!("-L{}", libs.display()), "-lamdhip64"],
        );
        Built {
            cuda,
            cuda_ptds,
            hip,
        }
    });
    Programs {
        scratch: Scratch::new(name),
        cuda: built.cuda.clone(),
        cuda_ptds: built.cuda_ptds.clone(),
        hip: built.hip.clone(),
    }
}

const DOCUMENTED: (&str, &str) = (env::SIM_BEHAVIOUR, "documented");
const NO_PEERS: (&str, &str) = (env::SIM_PEERS, "none");

const CUDA_CASES: &[Case] = &[
    (
        "can-access-invalid-device",
        &[],
        &["cuDeviceCanAccessPeer.invalid-device"],
    ),
    (
        "can-access-same-device",
        &[],
        &["cuDeviceCanAccessPeer.same-device"],
    ),
    (
        "enable-flags",
        &[],
        &["cuCtxEnablePeerAccess.flags-not-zero"],
    ),
    (
        "enable-no-current-context",
        &[],
        &["cuCtxEnablePeerAccess.no-current-context"],
    ),
    (
        "enable-null-peer",
        &[],
        &["cuCtxEnablePeerAccess.invalid-peer-context"],
    ),
    (
        "enable-destroyed-peer",
        &[],
        &["cuCtxEnablePeerAccess.invalid-peer-context"],
    ),
    (
        "enable-self",
        &[DOCUMENTED],
        &["cuCtxEnablePeerAccess.peer-is-current"],
    ),
    (
        "enable-unsupported",
        &[NO_PEERS],
        &["cuCtxEnablePeerAccess.peer-unsupported"],
    ),
    (
        "enable-same-device",
        &[],
        &["cuCtxEnablePeerAccess.peer-unsupported"],
    ),
    (
        "enable-twice",
        &[],
        &["cuCtxEnablePeerAccess.already-enabled"],
    ),
    (
        "enable-attributes",
        &[(env::SIM_ATTRS, "1:41=0")],
        &["cuCtxEnablePeerAccess.no-unified-addressing"],
    ),
    (
        "enable-attributes",
        &[(env::SIM_ATTRS, "1:75=8")],
        &["cuCtxEnablePeerAccess.compute-capability-mismatch"],
    ),
    (
        "enable-too-many-peers",
        &[(env::SIM_DEVICES, "3"), (env::SIM_MAX_PEERS, "1")],
        &["cuCtxEnablePeerAccess.too-many-peers"],
    ),
    (
        "disable-not-enabled",
        &[],
        &["cuCtxDisablePeerAccess.not-enabled"],
    ),
    (
        "disable-other-direction",
        &[],
        &["cuCtxDisablePeerAccess.not-enabled"],
    ),
    (
        "disable-no-current-context",
        &[],
        &["cuCtxDisablePeerAccess.no-current-context"],
    ),
    (
        "disable-null-peer",
        &[],
        &["cuCtxDisablePeerAccess.invalid-peer-context"],
    ),
    (
        "disable-after-async-copies",
        &[],
        &["cuCtxDisablePeerAccess.unregisters-allocations"],
    ),
    (
        "memcpy-range",
        &[],
        &["cuMemcpyPeer.range-outside-allocation"],
    ),
    (
        "memcpy-adjacent",
        &[],
        &["cuMemcpyPeer.range-outside-allocation"],
    ),
    ("memcpy-freed", &[], &["cuMemcpyPeer.memory-freed"]),
    (
        "memcpy-wrong-context",
        &[],
        &["cuMemcpyPeer.pointer-not-in-context"],
    ),
    (
        "memcpy-null-context",
        &[DOCUMENTED],
        &["cuMemcpyPeer.null-context"],
    ),
    (
        "memcpy-destroyed-stream",
        &[],
        &["cuMemcpyPeerAsync.invalid-stream"],
    ),
    ("unidirectional", &[], &["peer-access.unidirectional"]),
    // The divergence path: the simulator answers as driver R580 does.
    (
        "enable-self",
        &[],
        &[
            "cuCtxEnablePeerAccess.peer-is-current",
            "divergence.cuCtxEnablePeerAccess.self-unsupported",
        ],
    ),
    (
        "memcpy-null-context",
        &[],
        &[
            "cuMemcpyPeer.null-context",
            "divergence.cuMemcpyPeer.null-context-accepted",
        ],
    ),
];

/// Scenarios whose copies take the per-thread spellings in a per-thread build.
const CUDA_PTDS_CASES: &[Case] = &[
    (
        "memcpy-range",
        &[],
        &["cuMemcpyPeer.range-outside-allocation"],
    ),
    (
        "memcpy-destroyed-stream",
        &[],
        &["cuMemcpyPeerAsync.invalid-stream"],
    ),
    ("unidirectional", &[], &["peer-access.unidirectional"]),
];

const HIP_CASES: &[Case] = &[
    (
        "can-access-invalid-device",
        &[],
        &["hipDeviceCanAccessPeer.invalid-device"],
    ),
    (
        "can-access-same-device",
        &[],
        &["hipDeviceCanAccessPeer.same-device"],
    ),
    (
        "enable-invalid-device",
        &[],
        &["hipDeviceEnablePeerAccess.invalid-device"],
    ),
    ("enable-self", &[], &["hipDeviceEnablePeerAccess.self"]),
    (
        "enable-flags",
        &[],
        &["hipDeviceEnablePeerAccess.flags-not-zero"],
    ),
    (
        "enable-twice",
        &[],
        &["hipDeviceEnablePeerAccess.already-enabled"],
    ),
    (
        "enable-unsupported",
        &[NO_PEERS],
        &["hipDeviceEnablePeerAccess.peer-unsupported"],
    ),
    (
        "disable-invalid-device",
        &[],
        &["hipDeviceDisablePeerAccess.invalid-device"],
    ),
    (
        "disable-not-enabled",
        &[],
        &["hipDeviceDisablePeerAccess.not-enabled"],
    ),
    // The CLR answers hipErrorInvalidDevice where the document says PeerAccessNotEnabled.
    (
        "disable-self",
        &[],
        &[
            "hipDeviceDisablePeerAccess.not-enabled",
            "divergence.hipDeviceDisablePeerAccess.unsupported-pair-invalid-device",
        ],
    ),
    (
        "memcpy-invalid-device",
        &[],
        &["hipMemcpyPeer.invalid-device"],
    ),
    (
        "memcpy-range",
        &[],
        &["hipMemcpyPeer.range-outside-allocation"],
    ),
    (
        "memcpy-wrong-device",
        &[],
        &["hipMemcpyPeer.pointer-not-on-device"],
    ),
    (
        "memcpy-destroyed-stream",
        &[],
        &["hipMemcpyPeerAsync.invalid-stream"],
    ),
    ("unidirectional", &[], &["peer-access.unidirectional"]),
];

/// Runs every case; collects all mismatches so one failure shows them all.
#[test]
fn each_cuda_misuse_fires_exactly_its_rule() {
    let p = programs("rules_cuda");
    check_cases(&p.scratch, &p.cuda, CUDA_CASES);
}

#[test]
fn per_thread_spellings_are_checked_like_the_legacy_ones() {
    let p = programs("rules_cuda_ptds");
    check_cases(&p.scratch, &p.cuda_ptds, CUDA_PTDS_CASES);
    let r = run_checked(&p.scratch, &p.cuda_ptds, "memcpy-range", &[]);
    assert!(
        r.records.iter().any(|x| x["fn"] == "cuMemcpyPeer_ptds"
            && x["findings"][0]["rule"] == "cuMemcpyPeer.range-outside-allocation"),
        "the finding is on the _ptds record"
    );
}

#[test]
fn each_hip_misuse_fires_exactly_its_rule() {
    let p = programs("rules_hip");
    check_cases(&p.scratch, &p.hip, HIP_CASES);
}

#[test]
fn correct_programs_produce_no_finding() {
    let p = programs("rules_correct");
    for (program, env) in [
        (&p.cuda, &[][..]),
        (&p.cuda, &[DOCUMENTED][..]),
        (&p.cuda_ptds, &[][..]),
        (&p.hip, &[][..]),
    ] {
        let r = run_checked(&p.scratch, program, "correct", env);
        assert!(
            r.findings().is_empty(),
            "{} {env:?}: {:?}\n{}",
            program.display(),
            r.rule_ids(),
            r.stderr()
        );
        assert!(!r.stderr().contains("sharecheck:"), "{}", r.stderr());
        let calls = calls(&r.records).len();
        assert!(calls >= 15, "the correct program made only {calls} calls");
    }
}

#[test]
fn every_rule_has_a_negative_case() {
    // Other families' rules, and the divergences of their misuses, are theirs to stage.
    let covered = [CUDA_CASES, CUDA_PTDS_CASES, HIP_CASES]
        .into_iter()
        .flat_map(|cases| cases.iter().flat_map(|(_, _, ids)| ids.iter().copied()));
    let missing: Vec<&str> = rules::without_case(&["peer", "divergences"], covered)
        .into_iter()
        // Staged by the unit tests through the fake driver (src/families/peer/tests.rs) and, for the destroyed context, on
        // a real R580 driver by scripts/gpu-rules.sh: the simulator answers as documented there.
        .filter(|id| {
            ![
                "divergence.unlisted",
                "divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed",
            ]
            .contains(id)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a negative test: {missing:?}"
    );
    assert!(rules::all().any(|r| r.kind == Kind::Divergence));
}

#[test]
fn a_divergence_is_reported_once_per_process() {
    let p = programs("rules_divergence_once");
    // enable-self calls twice: the misuse is reported twice, the divergence once.
    let r = run_checked(&p.scratch, &p.cuda, "enable-self", &[]);
    assert_eq!(r.count("cuCtxEnablePeerAccess.peer-is-current"), 2);
    assert_eq!(
        r.count("divergence.cuCtxEnablePeerAccess.self-unsupported"),
        1
    );
    let rets: Vec<i64> = fn_ret(&r.records).iter().map(|(_, ret)| *ret).collect();
    assert_eq!(rets, vec![217, 217], "R580's answer reaches the program");
}

#[test]
fn the_shim_leaves_hips_last_error_as_the_program_left_it() {
    let p = programs("rules_last_error");
    let r = run_checked(&p.scratch, &p.hip, "last-error-kept", &[]);
    assert_eq!(printed(&r.out, "SET"), "101");
    assert_eq!(printed(&r.out, "LAST"), "101", "an earlier error survives");
    assert_eq!(
        printed(&r.out, "PEEK"),
        "0",
        "a failed query leaves nothing"
    );
    assert!(r.findings().is_empty(), "{:?}", r.rule_ids());
}

// ---- What the user controls: SHARECHECK_OPTIONS ----------------------------------------------

/// Lines of the simulator's call log naming `symbol`.
fn driver_calls(log: &Path, symbol: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == symbol)
        .count()
}

#[test]
fn strict_mode_returns_the_documented_code_without_calling_the_driver() {
    let p = programs("options_strict");
    let log = p.scratch.path("calls.log");
    let log_env = (env::SIM_CALL_LOG, log.to_str().unwrap());
    let enable = "cuCtxEnablePeerAccess";

    // Report mode (the default) forwards the misuse: the driver itself answers 1.
    let r = run_checked(&p.scratch, &p.cuda, "enable-flags", &[log_env]);
    assert_eq!(printed_calls(&r.out), [(enable.to_string(), 1)]);
    assert_eq!(driver_calls(&log, enable), 1);
    std::fs::remove_file(&log).unwrap();

    // Strict: same answer, from the shim; the driver never saw the call.
    let strict = (env::OPTIONS, "mode=strict");
    let r = run_checked(&p.scratch, &p.cuda, "enable-flags", &[log_env, strict]);
    assert_eq!(printed_calls(&r.out), [(enable.to_string(), 1)]);
    assert_eq!(
        driver_calls(&log, enable),
        0,
        "strict mode forwarded the call"
    );
    let record = calls(&r.records)
        .into_iter()
        .find(|x| x["fn"] == enable)
        .unwrap()
        .clone();
    assert_eq!(record["forwarded"], false);
    assert_eq!(
        record["findings"][0]["rule"],
        "cuCtxEnablePeerAccess.flags-not-zero"
    );
    std::fs::remove_file(&log).unwrap();

    // A refusal from tracked state: the second enable returns 704 without reaching the driver.
    let r = run_checked(&p.scratch, &p.cuda, "enable-twice", &[log_env, strict]);
    assert_eq!(
        printed_calls(&r.out),
        [(enable.to_string(), 0), (enable.to_string(), 704)]
    );
    assert_eq!(driver_calls(&log, enable), 1);
    std::fs::remove_file(&log).unwrap();

    // Correct use is forwarded in strict mode, and a warning without a documented code is too.
    let r = run_checked(&p.scratch, &p.cuda, "correct", &[log_env, strict]);
    assert!(r.findings().is_empty(), "{:?}", r.rule_ids());
    let enables = printed_calls(&r.out)
        .iter()
        .filter(|(f, _)| f == enable)
        .count();
    assert_eq!(driver_calls(&log, enable), enables);
    std::fs::remove_file(&log).unwrap();
    // The same for HIP; both correct programs end tracked state (context destroy, primary
    // release and reset, HIP device reset) before enabling again: a stale grant would be refused.
    let r = run_checked(&p.scratch, &p.hip, "correct", &[log_env, strict]);
    assert!(r.findings().is_empty(), "{:?}", r.rule_ids());
    let hip_enable = "hipDeviceEnablePeerAccess";
    let enables = printed_calls(&r.out)
        .iter()
        .filter(|(f, ret)| f == hip_enable && *ret == 0)
        .count();
    assert!(enables >= 3);
    assert_eq!(driver_calls(&log, hip_enable), enables);
    std::fs::remove_file(&log).unwrap();
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "can-access-same-device",
        &[log_env, strict],
    );
    assert_eq!(driver_calls(&log, "cuDeviceCanAccessPeer"), 1);
    assert_eq!(printed(&r.out, "CAN"), "0");
}

#[test]
fn a_destroyed_stream_is_never_asked_about() {
    let p = programs("rules_stream_destroyed");
    let log = p.scratch.path("calls.log");
    let log_env = (env::SIM_CALL_LOG, log.to_str().unwrap());
    // While the copy's stream lives, the disable asks whether it is idle...
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "disable-after-async-copies",
        &[log_env],
    );
    assert_eq!(
        driver_calls(&log, "shim cuStreamQuery"),
        1,
        "{:?}",
        r.rule_ids()
    );
    std::fs::remove_file(&log).unwrap();
    // ...once the program destroyed it, the handle is forgotten, not passed to the driver.
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "disable-after-stream-destroyed",
        &[log_env],
    );
    assert_eq!(driver_calls(&log, "shim cuStreamQuery"), 0);
    assert_eq!(driver_calls(&log, "cuStreamQuery"), 0);
    assert!(r.findings().is_empty(), "{:?}", r.rule_ids());
}

#[test]
fn mute_drops_exactly_the_named_rules() {
    let p = programs("options_mute");
    let muted = (env::OPTIONS, "mute=cuCtxEnablePeerAccess.peer-is-current");
    let r = run_checked(&p.scratch, &p.cuda, "enable-self", &[muted]);
    assert_eq!(
        r.rule_ids(),
        BTreeSet::from(["divergence.cuCtxEnablePeerAccess.self-unsupported".to_string()])
    );
    assert!(!r.stderr().contains("peer-is-current"), "{}", r.stderr());
}

#[test]
fn duplicate_limit_stops_printing_and_says_which_report_was_the_last() {
    let p = programs("options_duplicates");
    let id = "cuCtxEnablePeerAccess.flags-not-zero";
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "enable-flags-repeated",
        &[(env::OPTIONS, "duplicate_limit=2")],
    );
    let stderr = r.stderr();
    assert_eq!(
        stderr.matches(&format!("error[{id}]")).count(),
        2,
        "{stderr}"
    );
    assert_eq!(stderr.matches("this is the last report").count(), 1);
    let last = stderr.rfind(&format!("error[{id}]")).unwrap();
    assert!(stderr[last..].contains("duplicate_limit=2"), "{stderr}");
    assert_eq!(r.count(id), 5, "the trace keeps every finding");
    // The default limit is 10; 0 means none.
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "enable-flags-repeated",
        &[(env::OPTIONS, "duplicate_limit=0")],
    );
    assert_eq!(r.stderr().matches(&format!("error[{id}]")).count(), 5);
    assert!(!r.stderr().contains("last report"));
}

#[test]
fn halt_on_error_aborts_after_the_first_error_is_recorded() {
    use std::os::unix::process::ExitStatusExt;
    let p = programs("options_halt");
    let r = run(
        &p.scratch,
        &p.cuda,
        "enable-flags",
        &[(env::OPTIONS, "halt_on_error=1")],
    );
    assert_eq!(r.out.status.signal(), Some(libc::SIGABRT), "{}", r.stderr());
    assert!(!String::from_utf8_lossy(&r.out.stdout).contains("AFTER"));
    assert!(r.stderr().contains("halt_on_error=1"), "{}", r.stderr());
    assert_eq!(r.count("cuCtxEnablePeerAccess.flags-not-zero"), 1);
    // A warning does not halt.
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "can-access-same-device",
        &[(env::OPTIONS, "halt_on_error=1")],
    );
    assert_eq!(r.count("cuDeviceCanAccessPeer.same-device"), 1);
}

#[test]
fn bad_options_are_named_and_the_defaults_apply() {
    let p = programs("options_bad");
    let log = p.scratch.path("calls.log");
    let r = run_checked(
        &p.scratch,
        &p.cuda,
        "enable-flags",
        &[
            (env::OPTIONS, "mode=loud:colour=red:duplicate_limit=x"),
            (env::SIM_CALL_LOG, log.to_str().unwrap()),
        ],
    );
    let stderr = r.stderr();
    for needle in [
        "mode=\"loud\"",
        "unknown key `colour`",
        "duplicate_limit=\"x\"",
    ] {
        assert!(stderr.contains(needle), "{needle} missing from:\n{stderr}");
        assert_eq!(
            stderr.matches(needle).count(),
            1,
            "reported once:\n{stderr}"
        );
    }
    assert_eq!(
        driver_calls(&log, "cuCtxEnablePeerAccess"),
        1,
        "report mode"
    );
    assert_eq!(r.count("cuCtxEnablePeerAccess.flags-not-zero"), 1);
}

#[test]
fn a_finding_on_stderr_is_one_actionable_line_then_the_evidence() {
    let p = programs("stderr_format");
    let r = run_checked(&p.scratch, &p.cuda, "enable-flags", &[]);
    let stderr = r.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.starts_with("sharecheck: error["))
        .unwrap_or_else(|| panic!("no finding line:\n{stderr}"));
    let record = calls(&r.records)
        .into_iter()
        .find(|x| x["fn"] == "cuCtxEnablePeerAccess")
        .unwrap()
        .clone();
    let ctx = record["a"]["peerContext"].as_str().unwrap();
    assert_eq!(
        lines[first],
        format!(
            "sharecheck: error[cuCtxEnablePeerAccess.flags-not-zero] \
             cuCtxEnablePeerAccess(peerContext={ctx}, Flags=1): Flags is 0x1; it must be 0"
        )
    );
    assert_eq!(
        lines[first + 1],
        "  documented: CUDA Driver API, Peer Context Memory Access, cuCtxEnablePeerAccess \
         <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html>"
    );
    let at = format!("  at: pid {} tid ", record["pid"].as_u64().unwrap());
    assert!(lines[first + 2].starts_with(&at), "{}", lines[first + 2]);
    assert!(
        lines[first + 2].ends_with(&format!(
            "call #{}; fix: pass 0 as Flags",
            record["seq"].as_u64().unwrap()
        )),
        "{}",
        lines[first + 2]
    );
    // The trace record carries the same finding.
    let f = &record["findings"][0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["kind"], "misuse");
    assert_eq!(f["message"], "Flags is 0x1; it must be 0");
    assert_eq!(
        f["doc"],
        "CUDA Driver API, Peer Context Memory Access, cuCtxEnablePeerAccess"
    );
    assert_eq!(f["fix"], "pass 0 as Flags");
}

/// Without a trace, frees and destroys take a shorter path (their checks only observe): the
/// correct program, which destroys a context, resets and releases primary contexts and enables
/// again, must still be forwarded in full in strict mode (a grant not forgotten would be refused
/// with 704), and its calls and results must be those of the traced run.
#[test]
fn without_a_trace_lifecycle_observers_still_end_tracked_state() {
    let p = programs("untraced_lifecycle");
    let strict = (env::OPTIONS, "mode=strict");
    let traced = run_checked(&p.scratch, &p.cuda, "correct", &[strict]);
    let mut cmd = p.scratch.under_shim(&p.cuda);
    cmd.arg("correct")
        .env(strict.0, strict.1)
        .env_remove(env::TRACE);
    let out = run_ok(&mut cmd);
    // Sorted: two threads of the program interleave their lines.
    let sorted = |mut calls: Vec<(String, i64)>| {
        calls.sort();
        calls
    };
    assert_eq!(
        sorted(printed_calls(&out)),
        sorted(printed_calls(&traced.out))
    );
    assert!(printed_calls(&out).iter().all(|(_, ret)| *ret == 0));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("sharecheck: "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Without a trace a free is observed on its quick path (no checks' context: issue 28's budget),
/// which must keep the free as the full path does: a peer copy of the freed memory is then
/// explained as memory this process freed, on stderr, with its size where a copy before the free
/// taught the shim the allocation's range (the free reads the pointer cache only then).
#[test]
fn without_a_trace_a_free_is_still_kept_for_the_copy_that_names_it() {
    let p = programs("untraced_free");
    let freed = |scenario: &str| {
        let mut cmd = p.scratch.under_shim(&p.cuda);
        cmd.arg(scenario).env_remove(env::TRACE);
        let out = cmd.output().expect("the scenario runs");
        assert!(
            printed_calls(&out).contains(&("cuMemFree_v2".to_string(), 0)),
            "{:?}",
            printed_calls(&out)
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            stderr.contains("cuMemcpyPeer.memory-freed")
                && stderr.contains("is memory this process freed"),
            "{scenario}: {stderr}"
        );
        stderr
    };
    let unknown = freed("memcpy-freed");
    assert!(!unknown.contains(" bytes); the driver"), "{unknown}");
    let known = freed("memcpy-freed-after-copy");
    assert!(
        known.contains(&format!(", {} bytes); the driver", 1 << 20)),
        "{known}"
    );
}
