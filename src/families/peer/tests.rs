//! Every peer rule, through the fake driver: a negative case where exactly that rule fires, and
//! correct programs that stay silent. No C compiler and no driver: the end-to-end layer is
//! `tests/peer_rules.rs`, with C programs on the simulated driver.

use super::PeerState;
use crate::engine::fake::{FakeFacts, Harness, Ran};
use crate::engine::state::Lifetime;
use crate::engine::Checked;
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::{args, FnId};
use sharecheck_core::options::Mode;
use sharecheck_core::rules::{self, peer, Kind};
use sharecheck_core::table::checks_of;
use std::ffi::c_void;

// Two devices, contexts A and C on device 0, B on device 1.
const A: u64 = 0xa000;
const B: u64 = 0xb000;
const C: u64 = 0xc000;
/// Device memory: 4 KiB on device 0 and 4 KiB on device 1.
const MEM0: u64 = 0x10_0000;
const MEM1: u64 = 0x20_0000;
const SIZE: u64 = 0x1000;
const STREAM_A: u64 = 0x5a00;
const STREAM_B: u64 = 0x5b00;

fn world() -> Harness {
    let f = FakeFacts::devices(2);
    f.context(A, 0);
    f.context(B, 1);
    f.context(C, 0);
    f.allocate(MEM0, SIZE, Some(0));
    f.allocate(MEM1, SIZE, Some(1));
    f.stream(STREAM_A, A);
    f.stream(STREAM_B, B);
    Harness::new(f)
}

fn ctx(c: u64) -> CUcontext {
    CUcontext(c as usize as *mut c_void)
}

fn stream(s: u64) -> CUstream {
    CUstream(s as usize as *mut c_void)
}

fn current(h: &Harness, c: Option<u64>) {
    h.facts.make_current(c.map(ctx));
}

fn can_access(dev: i32, peer: i32) -> args::cuDeviceCanAccessPeer {
    args::cuDeviceCanAccessPeer {
        canAccessPeer: Out(std::ptr::null_mut()),
        dev: CUdevice(dev),
        peerDev: CUdevice(peer),
    }
}

fn enable(peer: u64, flags: u32) -> args::cuCtxEnablePeerAccess {
    args::cuCtxEnablePeerAccess {
        peerContext: ctx(peer),
        Flags: ReservedFlags(flags),
    }
}

fn disable(peer: u64) -> args::cuCtxDisablePeerAccess {
    args::cuCtxDisablePeerAccess {
        peerContext: ctx(peer),
    }
}

fn copy(dst: (u64, u64), src: (u64, u64), bytes: usize) -> args::cuMemcpyPeer {
    args::cuMemcpyPeer {
        dstDevice: CUdeviceptr(dst.0),
        dstContext: ctx(dst.1),
        srcDevice: CUdeviceptr(src.0),
        srcContext: ctx(src.1),
        ByteCount: Size(bytes),
    }
}

fn copy_async(dst: (u64, u64), src: (u64, u64), bytes: usize, s: u64) -> args::cuMemcpyPeerAsync {
    args::cuMemcpyPeerAsync {
        dstDevice: CUdeviceptr(dst.0),
        dstContext: ctx(dst.1),
        srcDevice: CUdeviceptr(src.0),
        srcContext: ctx(src.1),
        ByteCount: Size(bytes),
        hStream: stream(s),
    }
}

fn hip_can_access(dev: i32, peer: i32) -> args::hipDeviceCanAccessPeer {
    args::hipDeviceCanAccessPeer {
        canAccessPeer: Out(std::ptr::null_mut()),
        deviceId: HipDevice(dev),
        peerDeviceId: HipDevice(peer),
    }
}

fn hip_enable(peer: i32, flags: u32) -> args::hipDeviceEnablePeerAccess {
    args::hipDeviceEnablePeerAccess {
        peerDeviceId: HipDevice(peer),
        flags: ReservedFlags(flags),
    }
}

fn hip_disable(peer: i32) -> args::hipDeviceDisablePeerAccess {
    args::hipDeviceDisablePeerAccess {
        peerDeviceId: HipDevice(peer),
    }
}

fn hip_copy(dst: (u64, i32), src: (u64, i32), bytes: usize) -> args::hipMemcpyPeer {
    args::hipMemcpyPeer {
        dst: VoidPtr(dst.0 as usize as *mut c_void),
        dstDeviceId: HipDevice(dst.1),
        src: ConstVoidPtr(src.0 as usize as *const c_void),
        srcDeviceId: HipDevice(src.1),
        sizeBytes: Size(bytes),
    }
}

fn hip_copy_async(
    dst: (u64, i32),
    src: (u64, i32),
    bytes: usize,
    s: u64,
) -> args::hipMemcpyPeerAsync {
    args::hipMemcpyPeerAsync {
        dst: VoidPtr(dst.0 as usize as *mut c_void),
        dstDeviceId: HipDevice(dst.1),
        src: ConstVoidPtr(src.0 as usize as *const c_void),
        srcDevice: HipDevice(src.1),
        sizeBytes: Size(bytes),
        stream: hipStream_t(s as usize as *mut c_void),
    }
}

/// Runs a call the test expects to be clean.
fn ok<A: Checked>(h: &Harness, args: A) {
    h.ok(args);
}

/// A negative case: its name, the rules its last call must report (exactly), and the scenario.
type Case = (
    &'static str,
    &'static [&'static str],
    fn(&Harness) -> (Ran, FnId),
);

/// A successful cuMemFree of the allocation at `base`, which the driver then no longer knows.
fn free_and_forget(h: &Harness, base: u64) {
    h.ok(args::cuMemFree_v2 {
        dptr: CUdeviceptr(base),
    });
    h.facts.allocations.borrow_mut().retain(|a| a.base != base);
}

/// A free observed as the shim does without a trace (the row's quick path) is kept among the
/// recent frees with the size the pointer cache knew, as the full path keeps it.
#[test]
fn a_free_observed_quickly_is_kept_with_its_size() {
    let h = world();
    let size = crate::engine::facts::Facts::cached_range(&h.facts, MEM1).map(|(_, s)| s);
    assert!(size.is_some(), "the fake driver knows MEM1");
    h.observed_quickly(args::cuMemFree_v2 {
        dptr: CUdeviceptr(MEM1),
    });
    assert_eq!(h.states.frees.recent().first(), Some(&(MEM1, size)));
}

/// The case's last call: what it gave, and which function it was.
fn last<A: Checked>(h: &Harness, args: A, driver_ret: i32) -> (Ran, FnId) {
    (h.call(args, driver_ret), A::ID)
}

const NEGATIVE: &[Case] = &[
    (
        "cuda can-access invalid device",
        &["cuDeviceCanAccessPeer.invalid-device"],
        |h| last(h, can_access(0, 5), INVALID_DEVICE),
    ),
    (
        "cuda can-access same device",
        &["cuDeviceCanAccessPeer.same-device"],
        |h| last(h, can_access(1, 1), SUCCESS),
    ),
    (
        "cuda enable flags",
        &["cuCtxEnablePeerAccess.flags-not-zero"],
        |h| {
            current(h, Some(A));
            last(h, enable(B, 1), INVALID_VALUE)
        },
    ),
    (
        "cuda enable without a current context",
        &["cuCtxEnablePeerAccess.no-current-context"],
        |h| {
            current(h, None);
            last(h, enable(B, 0), INVALID_CONTEXT)
        },
    ),
    (
        "cuda enable of a non-context",
        &["cuCtxEnablePeerAccess.invalid-peer-context"],
        |h| {
            current(h, Some(A));
            last(h, enable(0xdead0, 0), INVALID_CONTEXT)
        },
    ),
    (
        "cuda enable of the current context",
        &["cuCtxEnablePeerAccess.peer-is-current"],
        |h| {
            current(h, Some(A));
            last(h, enable(A, 0), INVALID_CONTEXT)
        },
    ),
    (
        "cuda enable of a pair that cannot peer",
        &["cuCtxEnablePeerAccess.peer-unsupported"],
        |h| {
            h.facts.peers.borrow_mut().clear();
            current(h, Some(A));
            last(h, enable(B, 0), PEER_ACCESS_UNSUPPORTED)
        },
    ),
    (
        "cuda enable twice",
        &["cuCtxEnablePeerAccess.already-enabled"],
        |h| {
            current(h, Some(A));
            ok(h, enable(B, 0));
            last(h, enable(B, 0), PEER_ACCESS_ALREADY_ENABLED)
        },
    ),
    (
        "cuda enable twice, the second with flags",
        &["cuCtxEnablePeerAccess.flags-not-zero"],
        |h| {
            current(h, Some(A));
            ok(h, enable(B, 0));
            last(h, enable(B, 1), INVALID_VALUE)
        },
    ),
    (
        "cuda enable without unified addressing",
        &["cuCtxEnablePeerAccess.no-unified-addressing"],
        |h| {
            h.facts
                .attributes
                .borrow_mut()
                .insert((1, crate::engine::facts::ATTRIBUTE_UNIFIED_ADDRESSING), 0);
            current(h, Some(A));
            last(h, enable(B, 0), SUCCESS)
        },
    ),
    (
        "cuda enable across compute capabilities",
        &["cuCtxEnablePeerAccess.compute-capability-mismatch"],
        |h| {
            h.facts.attributes.borrow_mut().insert(
                (1, crate::engine::facts::ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                8,
            );
            current(h, Some(A));
            last(h, enable(B, 0), SUCCESS)
        },
    ),
    (
        "cuda enable beyond the peer limit",
        &["cuCtxEnablePeerAccess.too-many-peers"],
        |h| {
            current(h, Some(A));
            last(h, enable(B, 0), TOO_MANY_PEERS)
        },
    ),
    (
        "cuda disable never enabled",
        &["cuCtxDisablePeerAccess.not-enabled"],
        |h| {
            current(h, Some(A));
            last(h, disable(B), PEER_ACCESS_NOT_ENABLED)
        },
    ),
    (
        "cuda disable without a current context",
        &["cuCtxDisablePeerAccess.no-current-context"],
        |h| {
            current(h, None);
            last(h, disable(B), INVALID_CONTEXT)
        },
    ),
    (
        "cuda disable of a non-context",
        &["cuCtxDisablePeerAccess.invalid-peer-context"],
        |h| {
            current(h, Some(A));
            last(h, disable(0xdead0), INVALID_CONTEXT)
        },
    ),
    (
        "cuda disable while peer copies are in flight",
        &["cuCtxDisablePeerAccess.unregisters-allocations"],
        |h| {
            current(h, Some(A));
            ok(h, enable(B, 0));
            ok(h, copy_async((MEM0, A), (MEM1, B), 64, STREAM_A));
            h.facts.busy_streams.borrow_mut().insert(STREAM_A);
            last(h, disable(B), SUCCESS)
        },
    ),
    (
        "cuda copy past the allocation",
        &["cuMemcpyPeer.range-outside-allocation"],
        |h| {
            current(h, Some(A));
            last(h, copy((MEM0 + SIZE - 32, A), (MEM1, B), 64), INVALID_VALUE)
        },
    ),
    (
        // One finding for the call, naming both arguments (issue 26: it was one per argument).
        "cuda copy past both allocations",
        &["cuMemcpyPeer.range-outside-allocation"],
        |h| {
            current(h, Some(A));
            last(
                h,
                copy((MEM0 + SIZE - 32, A), (MEM1 + SIZE - 32, B), 64),
                INVALID_VALUE,
            )
        },
    ),
    (
        "cuda copy from one allocation into the adjacent one (R580 refuses it)",
        &["cuMemcpyPeer.range-outside-allocation"],
        |h| {
            h.facts.allocate(MEM0 + SIZE, SIZE, Some(0));
            current(h, Some(A));
            last(h, copy((MEM0 + SIZE - 32, A), (MEM1, B), 64), INVALID_VALUE)
        },
    ),
    (
        "cuda copy from memory freed",
        &["cuMemcpyPeer.memory-freed"],
        |h| {
            current(h, Some(A));
            free_and_forget(h, MEM1);
            last(h, copy((MEM0, A), (MEM1 + 64, B), 64), INVALID_VALUE)
        },
    ),
    (
        "cuda copy with a pointer of another context",
        &["cuMemcpyPeer.pointer-not-in-context"],
        |h| {
            current(h, Some(A));
            last(h, copy((MEM1, A), (MEM1 + 64, B), 64), SUCCESS)
        },
    ),
    (
        "cuda copy with a NULL context",
        &["cuMemcpyPeer.null-context"],
        |h| {
            current(h, Some(A));
            last(h, copy((MEM0, 0), (MEM1, B), 64), INVALID_CONTEXT)
        },
    ),
    (
        "cuda async copy on a dead stream",
        &["cuMemcpyPeerAsync.invalid-stream"],
        |h| {
            current(h, Some(A));
            last(
                h,
                copy_async((MEM0, A), (MEM1, B), 64, 0x9990),
                INVALID_HANDLE,
            )
        },
    ),
    (
        "copy against the one-way grant",
        &["peer-access.unidirectional"],
        |h| {
            current(h, Some(B));
            ok(h, enable(A, 0));
            current(h, Some(A));
            last(h, copy((MEM0, A), (MEM1, B), 64), SUCCESS)
        },
    ),
    (
        "hip can-access invalid device",
        &["hipDeviceCanAccessPeer.invalid-device"],
        |h| last(h, hip_can_access(0, 7), INVALID_DEVICE),
    ),
    (
        "hip can-access same device",
        &["hipDeviceCanAccessPeer.same-device"],
        |h| last(h, hip_can_access(1, 1), SUCCESS),
    ),
    (
        "hip enable invalid device",
        &["hipDeviceEnablePeerAccess.invalid-device"],
        |h| last(h, hip_enable(9, 0), INVALID_DEVICE),
    ),
    (
        "hip enable self",
        &["hipDeviceEnablePeerAccess.self"],
        |h| {
            current(h, Some(A));
            last(h, hip_enable(0, 0), INVALID_DEVICE)
        },
    ),
    (
        "hip enable flags",
        &["hipDeviceEnablePeerAccess.flags-not-zero"],
        |h| {
            current(h, Some(A));
            last(h, hip_enable(1, 1), INVALID_VALUE)
        },
    ),
    (
        "hip enable twice",
        &["hipDeviceEnablePeerAccess.already-enabled"],
        |h| {
            current(h, Some(A));
            ok(h, hip_enable(1, 0));
            last(h, hip_enable(1, 0), PEER_ACCESS_ALREADY_ENABLED)
        },
    ),
    (
        "hip enable of a pair that cannot peer",
        &["hipDeviceEnablePeerAccess.peer-unsupported"],
        |h| {
            h.facts.peers.borrow_mut().clear();
            current(h, Some(A));
            last(h, hip_enable(1, 0), INVALID_DEVICE)
        },
    ),
    (
        "hip disable invalid device",
        &["hipDeviceDisablePeerAccess.invalid-device"],
        |h| last(h, hip_disable(9), INVALID_DEVICE),
    ),
    (
        "hip disable never enabled",
        &["hipDeviceDisablePeerAccess.not-enabled"],
        |h| {
            current(h, Some(A));
            last(h, hip_disable(1), PEER_ACCESS_NOT_ENABLED)
        },
    ),
    (
        "hip copy with an invalid device",
        &["hipMemcpyPeer.invalid-device"],
        |h| last(h, hip_copy((MEM0, 5), (MEM1, 1), 64), INVALID_DEVICE),
    ),
    (
        "hip copy past the allocation",
        &["hipMemcpyPeer.range-outside-allocation"],
        |h| {
            last(
                h,
                hip_copy((MEM0 + SIZE - 32, 0), (MEM1, 1), 64),
                INVALID_VALUE,
            )
        },
    ),
    (
        "hip copy past both allocations",
        &["hipMemcpyPeer.range-outside-allocation"],
        |h| {
            last(
                h,
                hip_copy((MEM0 + SIZE - 32, 0), (MEM1 + SIZE - 32, 1), 64),
                INVALID_VALUE,
            )
        },
    ),
    (
        "hip copy with a pointer of another device",
        &["hipMemcpyPeer.pointer-not-on-device"],
        |h| last(h, hip_copy((MEM1, 0), (MEM1 + 64, 1), 64), SUCCESS),
    ),
    (
        "hip async copy on a dead stream",
        &["hipMemcpyPeerAsync.invalid-stream"],
        |h| {
            h.facts.hip_stream_get_device.set(false);
            last(
                h,
                hip_copy_async((MEM0, 0), (MEM1, 1), 64, 0x9990),
                INVALID_HANDLE,
            )
        },
    ),
    // Divergences: the driver answers a misuse with another code than documented.
    (
        "R580 answers enable-self with 217",
        &[
            "cuCtxEnablePeerAccess.peer-is-current",
            "divergence.cuCtxEnablePeerAccess.self-unsupported",
        ],
        |h| {
            current(h, Some(A));
            last(h, enable(A, 0), PEER_ACCESS_UNSUPPORTED)
        },
    ),
    (
        "R580 answers a destroyed peer context with 709",
        &[
            "cuCtxEnablePeerAccess.invalid-peer-context",
            "divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed",
        ],
        |h| {
            current(h, Some(A));
            h.facts.contexts.borrow_mut().remove(&B);
            last(h, enable(B, 0), CONTEXT_IS_DESTROYED)
        },
    ),
    (
        "R580 copies with a NULL context",
        &[
            "cuMemcpyPeer.null-context",
            "divergence.cuMemcpyPeer.null-context-accepted",
        ],
        |h| {
            current(h, Some(A));
            last(h, copy((MEM0, 0), (MEM1, B), 64), SUCCESS)
        },
    ),
    (
        "CLR answers disable of an unsupported pair with 101",
        &[
            "hipDeviceDisablePeerAccess.not-enabled",
            "divergence.hipDeviceDisablePeerAccess.unsupported-pair-invalid-device",
        ],
        |h| {
            current(h, Some(A));
            last(h, hip_disable(1), INVALID_DEVICE)
        },
    ),
    (
        "an answer nobody listed",
        &[
            "cuCtxEnablePeerAccess.flags-not-zero",
            "divergence.unlisted",
        ],
        |h| {
            current(h, Some(A));
            last(h, enable(B, 1), 998)
        },
    ),
];

#[test]
fn each_negative_case_reports_exactly_its_rules() {
    for (name, expected, scenario) in NEGATIVE {
        let h = world();
        let (ran, function) = scenario(&h);
        assert_eq!(ran.rules, *expected, "{name}: {:?}", ran.messages);
        assert!(ran.forwarded, "{name}: report mode forwards");
        // A check reports only the rules its catalogue entry says it can.
        let reportable: Vec<&str> = checks_of(function)
            .iter()
            .flat_map(|c| c.rules.iter().map(|r| r.id))
            .collect();
        for rule in &ran.rules {
            let r = rules::by_id(rule).unwrap();
            assert!(
                r.kind == Kind::Divergence || reportable.contains(rule),
                "{name}: {rule} is not among {function:?}'s checks' rules"
            );
        }
    }
}

#[test]
fn every_peer_and_divergence_rule_has_a_negative_case() {
    // Other families' rules, and the divergences of their misuses, are theirs to test.
    let covered = NEGATIVE.iter().flat_map(|(_, ids, _)| ids.iter().copied());
    let missing = rules::without_case(&["peer", "divergences"], covered);
    assert!(
        missing.is_empty(),
        "rules without a negative unit test: {missing:?}"
    );
    assert!(peer::FAMILY.rules().len() > 30);
}

#[test]
fn a_copy_past_its_allocation_says_which_allocation_and_how_many_bytes() {
    let h = world();
    current(&h, Some(A));
    let ran = h.call(copy((MEM0 + SIZE - 32, A), (MEM1, B), 64), INVALID_VALUE);
    assert_eq!(
        ran.messages,
        [
            "dstDevice 0x100fe0 + ByteCount 64 leaves its allocation [0x100000, 0x101000): the \
          last 32 byte(s) lie past the memory the copy may use"
        ]
    );
}

#[test]
fn a_divergence_is_reported_once_per_process() {
    let h = world();
    current(&h, Some(A));
    let first = h.call(enable(A, 0), PEER_ACCESS_UNSUPPORTED);
    let second = h.call(enable(A, 0), PEER_ACCESS_UNSUPPORTED);
    assert_eq!(first.rules.len(), 2);
    assert_eq!(second.rules, ["cuCtxEnablePeerAccess.peer-is-current"]);
}

#[test]
fn a_correct_cuda_program_is_silent() {
    let h = world();
    ok(&h, can_access(0, 1));
    current(&h, Some(A));
    ok(&h, enable(B, 0));
    current(&h, Some(B));
    ok(&h, enable(A, 0));
    current(&h, Some(A));
    ok(&h, copy((MEM1, B), (MEM0, A), 64));
    ok(&h, copy((MEM0 + 64, A), (MEM1 + 64, B), SIZE as usize - 64));
    ok(&h, copy_async((MEM1, B), (MEM0, A), 64, STREAM_A));
    ok(&h, copy_async((MEM1, B), (MEM0, A), 64, STREAM_B));
    ok(&h, copy_async((MEM1, B), (MEM0, A), 64, 0));
    ok(&h, copy((MEM0, A), (MEM0, C), 64));
    ok(&h, disable(B));
    ok(&h, enable(B, 0));
    ok(&h, disable(B));
}

#[test]
fn a_correct_hip_program_is_silent() {
    let h = world();
    current(&h, Some(A));
    ok(&h, hip_can_access(0, 1));
    ok(&h, hip_enable(1, 0));
    ok(&h, hip_copy((MEM1, 1), (MEM0, 0), 64));
    ok(&h, hip_copy_async((MEM1, 1), (MEM0, 0), 64, STREAM_A));
    ok(&h, hip_copy_async((MEM1, 1), (MEM0, 0), 64, 0));
    ok(&h, hip_disable(1));
    ok(&h, hip_enable(1, 0));
}

#[test]
fn ending_a_context_device_or_stream_forgets_what_the_family_tracked() {
    for gone in [
        Lifetime::ContextDestroyed(B),
        Lifetime::ContextDestroyed(A),
        Lifetime::PrimaryContextEnded(1),
    ] {
        let h = world();
        current(&h, Some(A));
        ok(&h, enable(B, 0));
        h.states.forget(gone);
        // Had the grant survived, this correct enable would be reported as a second one.
        let ran = h.call(enable(B, 0), SUCCESS);
        assert!(ran.is_quiet(), "{gone:?}: {:?}", ran.rules);
        // In strict mode a stale grant would refuse the correct enable with 704.
        let mut h = world();
        h.mode = Mode::Strict;
        current(&h, Some(A));
        ok(&h, enable(B, 0));
        h.states.forget(gone);
        assert!(h.call(enable(B, 0), SUCCESS).forwarded, "{gone:?}");
    }
    let h = world();
    current(&h, Some(A));
    ok(&h, hip_enable(1, 0));
    h.states.forget(Lifetime::HipDeviceReset(Some(0)));
    ok(&h, hip_enable(1, 0));
    // A destroyed stream is never asked about when access is disabled.
    let h = world();
    current(&h, Some(A));
    ok(&h, enable(B, 0));
    ok(&h, copy_async((MEM0, A), (MEM1, B), 64, STREAM_A));
    h.facts.busy_streams.borrow_mut().insert(STREAM_A);
    h.states.forget(Lifetime::StreamDestroyed(STREAM_A));
    ok(&h, disable(B));
}

#[test]
fn strict_mode_refuses_certain_misuse_and_forwards_correct_calls() {
    let mut h = world();
    h.mode = Mode::Strict;
    current(&h, Some(A));
    let refused = h.call(enable(B, 1), SUCCESS);
    assert!(!refused.forwarded);
    assert_eq!(refused.ret, INVALID_VALUE);
    assert_eq!(refused.rules, ["cuCtxEnablePeerAccess.flags-not-zero"]);
    let forwarded = h.call(enable(B, 0), SUCCESS);
    assert!(forwarded.forwarded && forwarded.rules.is_empty());
    // Tracked state decides a refusal too: the second enable gets 704 without the driver.
    let again = h.call(enable(B, 0), SUCCESS);
    assert!(!again.forwarded);
    assert_eq!(again.ret, PEER_ACCESS_ALREADY_ENABLED);
}

#[test]
fn a_tracked_finding_the_driver_contradicts_is_withdrawn() {
    let h = world();
    current(&h, Some(A));
    ok(&h, enable(B, 0));
    // Access was disabled by a path the shim does not see: the driver accepts the enable.
    let ran = h.call(enable(B, 0), SUCCESS);
    assert!(ran.is_quiet(), "{:?}", ran.rules);
}

#[test]
fn a_cached_fact_is_asked_again_before_a_finding_rests_on_it() {
    let h = world();
    current(&h, Some(A));
    let before = h.facts.fresh_queries.get();
    ok(&h, copy((MEM0, A), (MEM1, B), 64));
    assert_eq!(
        h.facts.fresh_queries.get(),
        before,
        "the clean path asks nothing twice"
    );
    let ran = h.call(copy((MEM1, A), (MEM1 + 64, B), 64), SUCCESS);
    assert_eq!(ran.rules, ["cuMemcpyPeer.pointer-not-in-context"]);
    assert!(
        h.facts.fresh_queries.get() > before,
        "the finding was confirmed uncached"
    );
}

#[test]
fn hip_checks_leave_the_threads_last_error_as_the_program_left_it() {
    // An earlier error stands: no query runs, so none can change it.
    let h = world();
    h.facts.hip_last_error.set(INVALID_VALUE);
    let ran = h.call(hip_copy((MEM0, 5), (MEM1, 1), 64), INVALID_DEVICE);
    assert!(ran.is_quiet(), "nothing is decided without the queries");
    assert_eq!(h.facts.hip_last_error.get(), INVALID_VALUE);
    assert_eq!(h.facts.hip_cleared.get(), 0);
    // A query that fails (a pointer the runtime does not know) is cleared again.
    let h = world();
    ok(&h, hip_copy((MEM1, 1), (0x7777_0000, 0), 64));
    assert_eq!(h.facts.hip_last_error.get(), SUCCESS);
    assert_eq!(h.facts.hip_cleared.get(), 1);
}

#[test]
fn a_listed_divergence_explains_a_code_only_the_driver_showed() {
    // The shim sees a live peer context; the driver then says it was destroyed (709): the finding
    // rests on the driver's answer, and R580's code is a known divergence, reported once.
    let h = world();
    current(&h, Some(A));
    let ran = h.call(enable(B, 0), CONTEXT_IS_DESTROYED);
    assert_eq!(
        ran.rules,
        [
            "cuCtxEnablePeerAccess.invalid-peer-context",
            "divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed"
        ]
    );
    let again = h.call(enable(B, 0), CONTEXT_IS_DESTROYED);
    assert_eq!(again.rules, ["cuCtxEnablePeerAccess.invalid-peer-context"]);
}

#[test]
fn a_peer_context_the_program_destroyed_is_never_asked_about() {
    // R580 answered cuCtxGetDevice_v2 about a destroyed context from freed memory, or crashed.
    let h = world();
    current(&h, Some(A));
    h.facts.contexts.borrow_mut().remove(&B);
    h.facts.destroyed.borrow_mut().insert(B);
    let ran = h.call(enable(B, 0), CONTEXT_IS_DESTROYED);
    assert_eq!(
        ran.rules,
        [
            "cuCtxEnablePeerAccess.invalid-peer-context",
            "divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed"
        ]
    );
    assert!(!h.facts.asked_device_of.borrow().contains(&B));
}

#[test]
fn a_destroyed_handle_reused_by_a_new_context_is_silent_and_live_again() {
    let h = world();
    current(&h, Some(A));
    h.facts.destroyed.borrow_mut().insert(B); // B's handle now names a new, live context
    ok(&h, enable(B, 0));
    assert!(!h.facts.destroyed.borrow().contains(&B));
}

#[test]
fn a_grant_written_on_one_thread_is_read_on_every_other() {
    let h = world();
    current(&h, Some(A));
    ok(&h, enable(B, 0));
    let pair = super::grants::ContextPair { from: A, to: B };
    for shard in 0..crate::guard::SHARDS {
        assert!(
            h.states
                .family::<PeerState>()
                .read(shard, |g| g.cuda(pair).is_some()),
            "shard {shard}"
        );
    }
    ok(&h, disable(B));
    for shard in 0..crate::guard::SHARDS {
        assert!(
            h.states
                .family::<PeerState>()
                .read(shard, |g| g.cuda(pair).is_none()),
            "shard {shard}"
        );
    }
}

#[test]
fn a_muted_rule_has_no_message_yet_still_decides_refusal_and_divergence() {
    let mut h = world();
    h.mute = vec!["cuDeviceCanAccessPeer.same-device"];
    // No documented code: it decides nothing, so it is not even kept.
    assert!(h.call(can_access(1, 1), SUCCESS).rules.is_empty());
    // With a documented code it is kept, without a message (report drops it).
    h.mute = vec!["cuDeviceCanAccessPeer.invalid-device"];
    let muted = h.call(can_access(0, 5), INVALID_DEVICE);
    assert_eq!(muted.rules, ["cuDeviceCanAccessPeer.invalid-device"]);
    assert_eq!(muted.messages, [""], "never built");
    // The divergence a muted misuse explains is still found.
    h.mute = vec!["cuCtxEnablePeerAccess.peer-is-current"];
    current(&h, Some(A));
    let ran = h.call(enable(A, 0), PEER_ACCESS_UNSUPPORTED);
    assert_eq!(
        ran.rules,
        [
            "cuCtxEnablePeerAccess.peer-is-current",
            "divergence.cuCtxEnablePeerAccess.self-unsupported"
        ]
    );
    h.mute = vec!["cuCtxEnablePeerAccess.flags-not-zero"];
    h.mode = Mode::Strict;
    let refused = h.call(enable(B, 1), SUCCESS);
    assert!(
        !refused.forwarded,
        "strict mode still refuses a muted misuse"
    );
    assert_eq!(refused.ret, INVALID_VALUE);
}

/// Copies across the edge of VMM mappings side by side (R580 copies them), to memory allocated
/// again where freed memory was, and of memory the process never knew: no finding.
#[test]
fn copies_across_vmm_mappings_and_into_memory_allocated_again_are_silent() {
    use crate::engine::facts::MemoryKind;
    let h = world();
    current(&h, Some(A));
    h.facts.allocate(MEM0 + SIZE, SIZE, Some(0));
    h.facts.kinds.borrow_mut().insert(MEM0, MemoryKind::Other);
    h.ok(copy((MEM0 + SIZE - 32, A), (MEM1, B), 64));
    free_and_forget(&h, MEM1);
    h.facts.allocate(MEM1, SIZE, Some(1));
    h.ok(copy((MEM0, A), (MEM1, B), 64));
    // Never allocated, never freed: the driver's answer stands alone.
    let ran = h.call(copy((MEM0, A), (0x7700_0000, B), 64), INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

/// A copy found clean is, for its thread, clean again while nothing moves (the same arguments,
/// the same issuing context, the same generation): its checks' work is skipped. What it rested
/// on changing without anything the shim sees (here the fake driver's allocation table) stays
/// hidden, as a cached fact would; once the generation moves (anything ended, a grant written),
/// the copy is checked again and the finding comes.
#[test]
fn a_copy_found_clean_is_checked_again_once_the_generation_moves() {
    let h = world();
    current(&h, Some(A));
    ok(&h, enable(B, 0));
    let again = || copy_async((MEM0, A), (MEM1, B), 64, STREAM_A);
    let set = |h: &Harness, size| {
        h.facts.allocations.borrow_mut().retain(|a| a.base != MEM0);
        h.facts.allocate(MEM0, size, Some(0));
    };
    let (first, remembered) = h.remembering(|h| {
        set(h, SIZE);
        // The first copy on the stream is remembered on it (a grant written: the generation
        // moves); the second is the one remembered clean.
        let first = [h.call(again(), SUCCESS), h.call(again(), SUCCESS)];
        // The destination shrinks behind the shim's back: the copy now runs past it.
        set(h, 32);
        (first, h.call_as_is(again(), SUCCESS))
    });
    assert!(first.iter().all(|r| r.rules.is_empty()));
    assert!(remembered.rules.is_empty(), "{:?}", remembered.messages);
    // A different copy is not the one remembered.
    let other = h.call_as_is(copy_async((MEM0, A), (MEM1, B), 48, STREAM_A), SUCCESS);
    let past = "cuMemcpyPeer.range-outside-allocation";
    assert!(other.rules.contains(&past), "{:?}", other.messages);
    crate::engine::moved_on();
    let checked = h.call_as_is(again(), SUCCESS);
    assert!(checked.rules.contains(&past), "{:?}", checked.messages);
}

#[test]
fn a_hip_copy_found_clean_is_checked_again_once_the_generation_moves() {
    let h = world();
    let again = || hip_copy((MEM1, 1), (MEM0, 0), 64);
    let set = |h: &Harness, size| {
        h.facts.allocations.borrow_mut().retain(|a| a.base != MEM1);
        h.facts.allocate(MEM1, size, Some(1));
    };
    let (first, remembered) = h.remembering(|h| {
        set(h, SIZE);
        let first = h.call(again(), SUCCESS);
        // The destination shrinks behind the shim's back: the same copy stays the one
        // remembered clean until the generation moves (a free moves it).
        set(h, 32);
        (first, h.call_as_is(again(), SUCCESS))
    });
    assert!(first.rules.is_empty(), "{:?}", first.messages);
    assert!(remembered.rules.is_empty(), "{:?}", remembered.messages);
    let past = "hipMemcpyPeer.range-outside-allocation";
    let other = h.call_as_is(hip_copy((MEM1, 1), (MEM0, 0), 48), SUCCESS);
    assert!(other.rules.contains(&past), "{:?}", other.messages);
    crate::engine::moved_on();
    let checked = h.call_as_is(again(), SUCCESS);
    assert!(checked.rules.contains(&past), "{:?}", checked.messages);
}
