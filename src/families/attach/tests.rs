//! Every stream-attach rule through the fake driver: a negative case where exactly that rule
//! fires (and the divergence R580 shows with it), and correct calls that stay silent. The
//! end-to-end layer is `tests/attach_rules.rs`, with a C program on the simulated driver.

use crate::engine::facts::MemoryKind;
use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use sharecheck_core::rules::{self, attach};
use std::ffi::c_void;

const MANAGED: u64 = 0x10_0000;
const DEVICE: u64 = 0x20_0000;
const HOST: u64 = 0x30_0000;
const SIZE: u64 = 0x1_0000;
/// A stream the program created.
const STREAM: u64 = 0x5000;

fn world() -> Harness {
    let f = FakeFacts::devices(1);
    // Memory of no device is managed to the fake driver.
    f.allocate(MANAGED, SIZE, None);
    f.allocate(DEVICE, SIZE, Some(0));
    f.allocate(HOST, SIZE, Some(0));
    f.kinds.borrow_mut().insert(HOST, MemoryKind::Host);
    Harness::new(f)
}

fn stream(s: u64) -> CUstream {
    CUstream(s as usize as *mut c_void)
}

fn attach(s: u64, dptr: u64, length: u64, flags: u32) -> args::cuStreamAttachMemAsync {
    args::cuStreamAttachMemAsync {
        hStream: stream(s),
        dptr: CUdeviceptr(dptr),
        length: Size(length as usize),
        flags: AttachFlags(flags),
    }
}

fn attach_ptsz(s: u64, dptr: u64, length: u64, flags: u32) -> args::cuStreamAttachMemAsync_ptsz {
    args::cuStreamAttachMemAsync_ptsz {
        hStream: stream(s),
        dptr: CUdeviceptr(dptr),
        length: Size(length as usize),
        flags: AttachFlags(flags),
    }
}

fn hip_attach(flags: u32) -> args::hipStreamAttachMemAsync {
    args::hipStreamAttachMemAsync {
        stream: hipStream_t(STREAM as usize as *mut c_void),
        dev_ptr: VoidPtr(MANAGED as usize as *mut c_void),
        length: Size(0),
        flags: HipAttachFlags(flags),
    }
}

fn destroy(s: u64) -> args::cuStreamDestroy_v2 {
    args::cuStreamDestroy_v2 { hStream: stream(s) }
}

fn free(dptr: u64) -> args::cuMemFree_v2 {
    args::cuMemFree_v2 {
        dptr: CUdeviceptr(dptr),
    }
}

/// Host memory the fake driver does not know: pageable memory of this process.
static PAGEABLE: [u8; 8192] = [1; 8192];

fn pageable() -> u64 {
    PAGEABLE.as_ptr() as usize as u64
}

/// A world with a current context on device 0 that reports pageable memory access `access`.
fn pageable_world(access: Option<i32>) -> Harness {
    let h = world();
    let ctx = h.facts.context(0xc1, 0);
    h.facts.make_current(Some(ctx));
    if let Some(a) = access {
        h.facts.attributes.borrow_mut().insert((0, 88), a);
    }
    h
}

const SINGLE: u32 = 4;
const GLOBAL: u32 = 1;
const HOST_FLAG: u32 = 2;
/// Another stream the program made.
const OTHER: u64 = 0x6000;

/// Device 0, current, reporting concurrent managed access `access` (89), with two streams of the
/// program on it.
fn cma_world(access: i32) -> Harness {
    let h = world();
    let ctx = h.facts.context(0xc1, 0);
    h.facts.make_current(Some(ctx));
    h.facts.stream(STREAM, 0xc1);
    h.facts.stream(OTHER, 0xc1);
    h.facts.attributes.borrow_mut().insert((0, 89), access);
    h
}

/// `cuStreamCreate` of `s` with `flags` (1: non-blocking), the out-parameter already written as
/// the driver would.
fn create(h: &Harness, s: u64, flags: u32) {
    let mut handle = stream(s);
    h.ok(args::cuStreamCreate {
        phStream: Out(&mut handle),
        Flags: StreamFlags(flags),
    });
}

/// Memory attached to STREAM, which is busy, and OTHER created with `flags`.
fn ordering_world(flags: u32) -> Harness {
    let h = world();
    create(&h, OTHER, flags);
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.facts.busy_streams.borrow_mut().insert(STREAM);
    h
}

fn memset(dptr: u64, s: u64) -> args::cuMemsetD8Async {
    args::cuMemsetD8Async {
        dstDevice: CUdeviceptr(dptr),
        uc: UChar(0),
        N: Size(16),
        hStream: stream(s),
    }
}

fn htod(dptr: u64, s: u64) -> args::cuMemcpyHtoDAsync_v2 {
    args::cuMemcpyHtoDAsync_v2 {
        dstDevice: CUdeviceptr(dptr),
        srcHost: ConstVoidPtr(PAGEABLE.as_ptr().cast()),
        ByteCount: Size(16),
        hStream: stream(s),
    }
}

fn dtoh_ptsz(dptr: u64, s: u64) -> args::cuMemcpyDtoHAsync_v2_ptsz {
    args::cuMemcpyDtoHAsync_v2_ptsz {
        dstHost: VoidPtr(std::ptr::null_mut()),
        srcDevice: CUdeviceptr(dptr),
        ByteCount: Size(16),
        hStream: stream(s),
    }
}

const NEGATIVE: &[Case] = &[
    (
        "SINGLE on stream 0 through the legacy export",
        &["cuStreamAttachMemAsync.single-on-null-stream"],
        |h| h.call(attach(0, MANAGED, 0, SINGLE), INVALID_VALUE),
    ),
    (
        "SINGLE on CU_STREAM_LEGACY, R580's answer",
        &[
            "cuStreamAttachMemAsync.single-on-null-stream",
            "divergence.cuStreamAttachMemAsync.single-on-legacy-stream-accepted",
        ],
        |h| h.call(attach(1, MANAGED, 0, SINGLE), SUCCESS),
    ),
    (
        "SINGLE on CU_STREAM_LEGACY through _ptsz, refused as documented",
        &["cuStreamAttachMemAsync.single-on-null-stream"],
        |h| h.call(attach_ptsz(1, MANAGED, 0, SINGLE), INVALID_VALUE),
    ),
    (
        "flags GLOBAL | HOST",
        &["cuStreamAttachMemAsync.flags-not-one-attach-flag"],
        |h| h.call(attach(STREAM, MANAGED, 0, 3), INVALID_VALUE),
    ),
    (
        "flags 0",
        &["cuStreamAttachMemAsync.flags-not-one-attach-flag"],
        |h| h.call(attach(STREAM, MANAGED, 0, 0), INVALID_VALUE),
    ),
    (
        "device memory",
        &["cuStreamAttachMemAsync.memory-not-managed"],
        |h| h.call(attach(STREAM, DEVICE, 0, GLOBAL), INVALID_VALUE),
    ),
    (
        "page-locked host memory",
        &["cuStreamAttachMemAsync.memory-not-managed"],
        |h| h.call(attach(STREAM, HOST, 0, GLOBAL), INVALID_VALUE),
    ),
    (
        "a pointer inside a managed allocation, length 0",
        &["cuStreamAttachMemAsync.not-allocation-start"],
        |h| h.call(attach(STREAM, MANAGED + 4096, 0, GLOBAL), INVALID_VALUE),
    ),
    (
        "half of a managed allocation",
        &["cuStreamAttachMemAsync.partial-length"],
        |h| h.call(attach(STREAM, MANAGED, SIZE / 2, GLOBAL), INVALID_VALUE),
    ),
    (
        "a stream destroyed with memory attached singly to it",
        &["cuStreamDestroy.attached-memory-reverts"],
        |h| {
            h.ok(attach(STREAM, MANAGED, 0, SINGLE));
            h.call(destroy(STREAM), SUCCESS)
        },
    ),
    (
        "pageable memory with length 0",
        &["cuStreamAttachMemAsync.pageable-length-zero"],
        |_| pageable_world(None).call(attach(0, pageable(), 0, GLOBAL), INVALID_VALUE),
    ),
    (
        "pageable memory on a device without pageable memory access",
        &["cuStreamAttachMemAsync.pageable-without-access"],
        |_| pageable_world(Some(0)).call(attach(0, pageable(), 4096, GLOBAL), INVALID_VALUE),
    ),
    (
        "hip flags GLOBAL | HOST",
        &["hipStreamAttachMemAsync.flags-not-one-attach-flag"],
        |h| h.call(hip_attach(3), INVALID_VALUE),
    ),
    (
        "a memset on another stream, of memory attached SINGLE on a device without concurrent \
         managed access",
        &["attach.single-memory-used-by-another-stream"],
        |_| {
            let h = cma_world(0);
            h.ok(attach(STREAM, MANAGED, 0, SINGLE));
            h.call(memset(MANAGED + 64, OTHER), SUCCESS)
        },
    ),
    (
        "a copy to memory attached HOST, on a device without concurrent managed access",
        &["attach.host-memory-used-on-device"],
        |_| {
            let h = cma_world(0);
            h.ok(attach(STREAM, MANAGED, 0, HOST_FLAG));
            h.call(htod(MANAGED, STREAM), SUCCESS)
        },
    ),
    (
        "an attach to a non-blocking idle stream while the first attach's stream is busy",
        &["cuStreamAttachMemAsync.attaches-not-ordered"],
        |_| ordering_world(1).call(attach(OTHER, MANAGED, 0, SINGLE), SUCCESS),
    ),
    (
        "hip device memory (hipMalloc)",
        &["hipStreamAttachMemAsync.memory-not-managed"],
        |h| {
            let mut a = hip_attach(1);
            a.dev_ptr = VoidPtr(DEVICE as usize as *mut c_void);
            h.call(a, INVALID_VALUE)
        },
    ),
    (
        "a hip attach the runtime accepted (and, the CLR, ignores)",
        &["divergence.hipStreamAttachMemAsync.accepted-and-ignored"],
        |h| h.call(hip_attach(4), SUCCESS),
    ),
];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_attach_rule_has_one() {
    check_negative_cases(world, NEGATIVE, &["attach"], []);
    assert!(rules::divergences::KNOWN.iter().any(|d| attach::FAMILY
        .rules()
        .iter()
        .any(|r| std::ptr::eq(*r, d.misuse))));
}

/// SINGLE on a specific stream (one the program made, the per-thread stream in either spelling),
/// each flag alone, length 0 or the whole allocation, and memory the driver does not know (it may
/// be pageable memory) are all correct.
#[test]
fn correct_attaches_are_silent() {
    let h = world();
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.ok(attach(2, MANAGED, 0, SINGLE));
    h.ok(attach_ptsz(0, MANAGED, 0, SINGLE));
    h.ok(attach_ptsz(2, MANAGED, 0, SINGLE));
    for flags in [1, 2, 4] {
        h.ok(attach(STREAM, MANAGED, 0, flags));
        h.ok(attach(STREAM, MANAGED, SIZE, flags));
    }
    h.ok(attach(0, MANAGED, 0, GLOBAL));
    h.ok(attach(STREAM, 0x7f00_0000_0000, 4096, GLOBAL));
}

/// A stream destroyed with nothing attached singly to it, or whose memory was attached elsewhere
/// since, or freed, or a destroy that failed, says nothing.
#[test]
fn a_stream_destroyed_without_memory_attached_to_it_is_silent() {
    let h = world();
    h.ok(attach(STREAM, MANAGED, 0, GLOBAL));
    h.ok(destroy(STREAM));
    let h = world();
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.ok(attach(0x6000, MANAGED, 0, SINGLE));
    h.ok(destroy(STREAM));
    let h = world();
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.ok(free(MANAGED));
    h.ok(destroy(STREAM));
    let h = world();
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    let ran = h.call(destroy(STREAM), INVALID_HANDLE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    // The failed destroy left the association: a later destroy that works says it.
    let ran = h.call(destroy(STREAM), SUCCESS);
    assert_eq!(ran.rules, ["cuStreamDestroy.attached-memory-reverts"]);
}

/// Pageable memory with a length, on a device that reports pageable memory access, is correct.
#[test]
fn pageable_memory_with_access_and_a_length_is_silent() {
    pageable_world(Some(1)).ok(attach(0, pageable(), 4096, GLOBAL));
}

/// A correct HIP attach draws the runtime's divergence once per process and nothing else; one the
/// runtime refused draws nothing of it.
#[test]
fn correct_hip_attaches_draw_only_the_runtime_s_divergence_once() {
    let h = world();
    let ran = h.call(hip_attach(1), INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    let ran = h.call(hip_attach(4), SUCCESS);
    assert_eq!(
        ran.rules,
        ["divergence.hipStreamAttachMemAsync.accepted-and-ignored"]
    );
    for flags in [1, 2, 4] {
        h.ok(hip_attach(flags));
    }
}

/// Stream work on attached memory is correct on the attached stream, on a device with concurrent
/// managed access (every current Linux GPU), after the memory was attached GLOBAL again or freed,
/// and on memory no attach concerns; the per-thread stream is one stream in both spellings.
#[test]
fn stream_work_the_attaches_allow_is_silent() {
    let h = cma_world(0);
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.ok(memset(MANAGED, STREAM));
    h.ok(htod(MANAGED + 8, STREAM));
    h.ok(memset(DEVICE, OTHER));
    h.ok(attach(OTHER, MANAGED, 0, GLOBAL));
    h.ok(memset(MANAGED, STREAM));
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.ok(free(MANAGED));
    h.ok(memset(MANAGED, OTHER));

    let h = cma_world(0);
    h.ok(attach(2, MANAGED, 0, SINGLE));
    h.ok(dtoh_ptsz(MANAGED, 0));
    h.ok(dtoh_ptsz(MANAGED, 2));

    let h = cma_world(1);
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.ok(memset(MANAGED, OTHER));
    h.ok(attach(STREAM, MANAGED, 0, HOST_FLAG));
    h.ok(htod(MANAGED, OTHER));
}

/// The per-thread stream of one thread is not another thread's, nor the legacy NULL stream.
#[test]
fn another_thread_s_per_thread_stream_is_another_stream() {
    let h = cma_world(0);
    h.ok(attach(2, MANAGED, 0, SINGLE));
    let ran = h.call(memset(MANAGED, 0), SUCCESS);
    assert_eq!(ran.rules, ["attach.single-memory-used-by-another-stream"]);
}

/// Attaches something may order are not reported: the first stream is idle (synchronized), the
/// second has work pending (an event wait), the second is a blocking stream (the NULL stream's
/// work may order it) or one the shim did not see created, it is the same stream, or the driver
/// refused the second attach.
#[test]
fn attaches_that_may_be_ordered_are_silent() {
    let h = ordering_world(1);
    h.facts.busy_streams.borrow_mut().remove(&STREAM);
    h.ok(attach(OTHER, MANAGED, 0, SINGLE));

    let h = ordering_world(1);
    h.facts.busy_streams.borrow_mut().insert(OTHER);
    h.ok(attach(OTHER, MANAGED, 0, SINGLE));

    let h = ordering_world(0);
    h.ok(attach(OTHER, MANAGED, 0, SINGLE));

    let h = world();
    h.ok(attach(STREAM, MANAGED, 0, SINGLE));
    h.facts.busy_streams.borrow_mut().insert(STREAM);
    h.ok(attach(OTHER, MANAGED, 0, SINGLE));

    let h = ordering_world(1);
    h.ok(attach(STREAM, MANAGED, 0, GLOBAL));

    let h = ordering_world(1);
    let ran = h.call(attach(OTHER, MANAGED, 0, SINGLE), INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);

    // A destroyed non-blocking stream's handle, reused by a stream the shim did not see made.
    let h = ordering_world(1);
    h.ok(destroy(OTHER));
    h.ok(attach(OTHER, MANAGED, 0, SINGLE));
}

/// An attach found clean that changed nothing tracked is, for its thread, clean again while
/// nothing moves: its checks' work is skipped. A change the shim cannot see (here the fake
/// driver's memory kind) stays hidden, as a cached fact would; an attach that changes what is
/// tracked, or anything that ends, moves the generation, and the attach is checked again.
#[test]
fn an_attach_found_clean_is_checked_again_once_the_generation_moves() {
    const SINGLE: u32 = 4;
    let h = world();
    let kind = h.facts.kinds.borrow().get(&MANAGED).copied();
    let (first, remembered) = h.remembering(|h| {
        match kind {
            Some(kind) => h.facts.kinds.borrow_mut().insert(MANAGED, kind),
            None => h.facts.kinds.borrow_mut().remove(&MANAGED),
        };
        // The first attach is tracked (a change: the generation moves); the second changes
        // nothing and is remembered.
        let attach_it = |h: &Harness| h.call(attach(STREAM, MANAGED, 0, SINGLE), SUCCESS);
        let first = [attach_it(h), attach_it(h)];
        h.facts
            .kinds
            .borrow_mut()
            .insert(MANAGED, MemoryKind::Device);
        (
            first,
            h.call_as_is(attach(STREAM, MANAGED, 0, SINGLE), SUCCESS),
        )
    });
    assert!(first.iter().all(|r| r.rules.is_empty()));
    assert!(remembered.rules.is_empty(), "{:?}", remembered.messages);
    crate::engine::moved_on();
    let checked = h.call_as_is(attach(STREAM, MANAGED, 0, SINGLE), SUCCESS);
    assert!(
        checked
            .rules
            .contains(&"cuStreamAttachMemAsync.memory-not-managed"),
        "{:?}",
        checked.messages
    );
}

#[test]
fn a_hip_pointer_found_managed_is_asked_again_once_the_generation_moves() {
    let h = world();
    let not_managed = "hipStreamAttachMemAsync.memory-not-managed";
    let set = |h: &Harness, device| {
        h.facts
            .allocations
            .borrow_mut()
            .retain(|a| a.base != MANAGED);
        h.facts.allocate(MANAGED, SIZE, device);
    };
    let (first, remembered) = h.remembering(|h| {
        set(h, None);
        let first = h.call(hip_attach(1), SUCCESS);
        // The memory becomes plain device memory behind the shim's back: the pointer
        // remembered as managed is not asked about again until the generation moves (a free
        // moves it).
        set(h, Some(0));
        (first, h.call_as_is(hip_attach(1), SUCCESS))
    });
    assert!(!first.rules.contains(&not_managed), "{:?}", first.messages);
    assert!(
        !remembered.rules.contains(&not_managed),
        "{:?}",
        remembered.messages
    );
    crate::engine::moved_on();
    let asked = h.call_as_is(hip_attach(1), SUCCESS);
    assert!(asked.rules.contains(&not_managed), "{:?}", asked.messages);
}

/// A free reaches the attaches through a filter of their pointers' bits (read without the lock):
/// among more attached allocations than the filter tells apart, a freed one is forgotten (its
/// stream's destroy is silent) and the others are kept (their stream's destroy is reported),
/// and a free of memory never attached forgets nothing.
#[test]
fn a_free_forgets_exactly_its_own_attach_among_many() {
    const MANY: u64 = 100;
    let base = |i: u64| 0x100_0000 + i * SIZE;
    let f = FakeFacts::devices(1);
    for i in 0..MANY {
        f.allocate(base(i), SIZE, None);
    }
    f.allocate(DEVICE, SIZE, Some(0));
    let h = Harness::new(f);
    // Every allocation attached singly to a stream of its own.
    for i in 0..MANY {
        h.ok(attach(STREAM + i, base(i), 0, SINGLE));
    }
    h.ok(free(DEVICE));
    // Half of the frees as the shim observes them without a trace (the row's quick path).
    for i in (0..MANY).step_by(2) {
        if i % 4 == 0 {
            h.ok(free(base(i)));
        } else {
            h.observed_quickly(free(base(i)));
        }
    }
    for i in 0..MANY {
        let ran = h.call(destroy(STREAM + i), SUCCESS);
        if i % 2 == 0 {
            assert!(ran.is_quiet(), "stream {i}: {:?}", ran.messages);
        } else {
            assert_eq!(
                ran.rules,
                ["cuStreamDestroy.attached-memory-reverts"],
                "stream {i}"
            );
        }
    }
}
