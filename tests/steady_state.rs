//! The steady state of the clean path, counted in driver calls: once warm, how many calls the
//! shim itself makes into the driver for each call of the program. On the simulator they cost
//! nanoseconds; on R580 each is a call into the real driver (issue 24: the copy path's cost on a
//! GPU). Every number here is stated with its reason; a fact the shim stops caching, or a new
//! question a check starts asking, changes a number and fails the test.
//!
//! Programs: tests/c/steady.c, tests/c/steady_hip.c. The simulated driver's call log (`SHARECHECK_SIM_CALL_LOG`) holds
//! every call it received, the program's and the shim's; the program writes markers (a call the
//! shim does not interpose) around its N identical calls.

mod common;
use common::*;
use sharecheck_core::schema::env;
use std::collections::BTreeMap;

/// The program's calls per case, once warm.
const N: usize = 8;

/// A driver call the shim makes per call of the program: its symbol, how many, and why.
type Asked = (&'static str, usize, &'static str);

/// Per case: the function the program calls, and the driver calls the shim makes for each.
const STEADY: &[(&str, &str, &[Asked])] = &[
    ("can-access", "cuDeviceCanAccessPeer", &[]),
    (
        "copy-stream0",
        "cuMemcpyPeerAsync",
        &[(
            "cuCtxGetCurrent",
            1,
            "a copy on the NULL stream is issued in the calling thread's current context, which \
             the driver keeps per thread and the shim cannot cache (cuCtxSetCurrent and \
             cuCtxPushCurrent are not interposed): it tells which way the copy goes, for the \
             peer grant it relies on",
        )],
    ),
    ("copy-own-stream", "cuMemcpyPeerAsync", &[]),
    (
        "copy-sync",
        "cuMemcpyPeer",
        &[(
            "cuCtxGetCurrent",
            1,
            "as for a copy on the NULL stream: the synchronous copy is issued in the current \
             context",
        )],
    ),
    // The memory's kind and range, and the allocation's context (for the record), are cached
    // until memory is freed.
    ("attach", "cuStreamAttachMemAsync", &[]),
    ("ipc-get", "cuIpcGetMemHandle", &[]),
    ("ipc-get-event", "cuIpcGetEventHandle", &[]),
    ("dtod", "cuMemcpyDtoDAsync_v2", &[]),
    ("memset", "cuMemsetD8Async", &[]),
    ("alloc-free", "cuMemAlloc_v2+cuMemFree_v2", &[]),
    (
        "disable-enable",
        "cuCtxDisablePeerAccess+cuCtxEnablePeerAccess",
        &[(
            "cuCtxGetCurrent",
            2,
            "each of the pair acts on the calling thread's current context, which the driver \
             keeps per thread and the shim cannot cache; the context's device is cached",
        )],
    ),
    ("endpoint-limits", "cuLogicalEndpointGetLimits", &[]),
    // The granularity of a create's properties is the driver's answer, kept for the last
    // properties asked about (a program creates its chunks alike).
    ("vmm-create-release", "cuMemCreate+cuMemRelease", &[]),
    (
        "vmm-reserve-free",
        "cuMemAddressReserve+cuMemAddressFree",
        &[],
    ),
    ("vmm-map-unmap", "cuMemMap+cuMemUnmap", &[]),
    (
        "vmm-retain-release",
        "cuMemRetainAllocationHandle+cuMemRelease",
        &[],
    ),
    ("vmm-set-access", "cuMemSetAccess", &[]),
    ("vmm-export", "cuMemExportToShareableHandle", &[]),
    // A pool's allocations and exports ask the driver nothing: what the pool family knows it
    // saw made.
    (
        "pool-alloc-free",
        "cuMemAllocFromPoolAsync+cuMemFreeAsync",
        &[],
    ),
    ("pool-alloc-default", "cuMemAllocAsync+cuMemFreeAsync", &[]),
    ("pool-export-pointer", "cuMemPoolExportPointer", &[]),
];

/// HIP's clean path asks more: a call's questions start with a read of the thread's last error
/// (`hipPeekAtLastError`, so that the program's own is kept), and HIP's pointer facts are not
/// cached yet (its device count and UUIDs are): a copy or an attach found clean is remembered per
/// thread until the checks' generation moves, so that repeating it asks no pointer question.
const HIP_PEEK: Asked = (
    "hipPeekAtLastError",
    1,
    "the thread's last HIP error, read before the shim's own questions and kept for the program",
);
const HIP_CURRENT: Asked = (
    "hipGetDevice",
    1,
    "the calling thread's current device, which a copy on the NULL stream (or a synchronous one) \
     is issued on: HIP keeps it per thread, and hipSetDevice is not interposed; the copy \
     remembered clean is the same copy issued on the same device",
);

const STEADY_HIP: &[(&str, &str, &[Asked])] = &[
    ("can-access", "hipDeviceCanAccessPeer", &[HIP_PEEK]),
    (
        "copy-stream0",
        "hipMemcpyPeerAsync",
        &[HIP_PEEK, HIP_CURRENT],
    ),
    // The stream's device is cached.
    ("copy-own-stream", "hipMemcpyPeerAsync", &[HIP_PEEK]),
    ("copy-sync", "hipMemcpyPeer", &[HIP_PEEK, HIP_CURRENT]),
    // The pointer the runtime said is managed, remembered: no question at all.
    ("attach", "hipStreamAttachMemAsync", &[]),
    // The export remembered clean, and its device and UUID for the record: no question.
    ("ipc-get", "hipIpcGetMemHandle", &[]),
];

/// Each symbol of the call log between the program's two markers, counted: the program's own
/// calls as their symbol, the shim's (the simulator asks it: `sharecheck_asking_driver`) as
/// `shim SYMBOL`.
fn between_markers(log: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    let mut markers = 0;
    for line in log.lines() {
        if line == "cuDriverGetVersion" || line == "hipDriverGetVersion" {
            markers += 1;
        } else if markers == 1 {
            *counts.entry(line.to_string()).or_insert(0) += 1;
        }
    }
    assert_eq!(markers, 2, "the program's two markers");
    counts
}

/// Runs every case of `cases` under the shim, traced and not, and compares the driver calls
/// between the markers with what the cases state. `quiet`: the findings a case may print (none
/// but a known divergence reported once per process).
fn count(name: &str, source: &str, lib: &str, cases: &[(&str, &str, &[Asked])], quiet: &[&str]) {
    let s = Scratch::new(name);
    let libs = s.sim_libs();
    let exe = s.compile(source, name, &[&format!("-L{}", libs.display()), lib]);
    for traced in [false, true] {
        for (case, function, asked) in cases {
            let log = s.path(&format!("{case}-{traced}.log"));
            let mut cmd = s.under_shim(&exe);
            cmd.args([case.to_string(), N.to_string()])
                .env(env::SIM_CALL_LOG, &log);
            if !traced {
                cmd.env_remove(env::TRACE);
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{case}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr
                    .lines()
                    .all(|l| l.starts_with("  ") || quiet.iter().any(|q| l.contains(q))),
                "{case}: no finding but {quiet:?}: {stderr}"
            );
            // A case may make a pair of calls per step (`A+B`).
            let mut want: BTreeMap<String, usize> =
                function.split('+').map(|f| (f.to_string(), N)).collect();
            for (symbol, per_call, why) in *asked {
                assert!(!why.is_empty());
                *want.entry(format!("shim {symbol}")).or_insert(0) += per_call * N;
            }
            let got = between_markers(&std::fs::read_to_string(&log).unwrap());
            assert_eq!(
                got, want,
                "{case} (traced: {traced}): driver calls per {N} calls"
            );
        }
    }
}

#[test]
fn once_warm_the_shim_asks_the_driver_only_what_its_families_state() {
    count("steady", "steady.c", "-lcuda", STEADY, &[]);
}

#[test]
fn once_warm_the_shim_asks_hip_only_what_its_families_state() {
    count(
        "steady_hip",
        "steady_hip.c",
        "-lamdhip64",
        STEADY_HIP,
        &["divergence.hipStreamAttachMemAsync.accepted-and-ignored"],
    );
}

/// Without the shim, the window holds the program's calls alone: what the test counts above
/// beyond them is the shim's.
#[test]
fn without_the_shim_the_window_holds_only_the_programs_calls() {
    let s = Scratch::new("steady_state_plain");
    let libs = s.sim_libs();
    let exe = s.compile(
        "steady.c",
        "steady",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    let log = s.path("plain.log");
    let out = s
        .under_shim(&exe)
        .env_remove("LD_PRELOAD")
        .args(["copy-stream0", &N.to_string()])
        .env(env::SIM_CALL_LOG, &log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        between_markers(&std::fs::read_to_string(&log).unwrap()),
        BTreeMap::from([("cuMemcpyPeerAsync".to_string(), N)])
    );
}
