//! Every IPC rule, through the fake driver: a negative case where exactly that rule fires (and
//! the divergence R580 shows with it), and correct calls that stay silent. The end-to-end layer
//! is `tests/ipc_rules.rs`, with C programs on the simulated driver.

use super::{home_of, Home, LAST_CLEAN_GET};
use crate::engine::facts::MemoryKind;
use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness};
use crate::engine::Checked;
use crate::engine::Remember;
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use sharecheck_core::options::Mode;
use sharecheck_core::rules::{self, ipc};
use std::ffi::c_void;

/// 64 KiB of device memory on device 0.
const MEM: u64 = 0x10_0000;
const SIZE: u64 = 0x1_0000;
/// Where opens of another process's handle map it (64 KiB).
const IMPORTED: u64 = 0x40_0000;

/// Memory legacy IPC cannot export: managed (no device), pool, host and cuMemCreate memory.
const MANAGED: u64 = 0x20_0000;
const POOL: u64 = 0x30_0000;
const HOST: u64 = 0x50_0000;
const VMM: u64 = 0x60_0000;

fn world() -> Harness {
    let f = FakeFacts::devices(2);
    f.allocate(MEM, SIZE, Some(0));
    f.allocate(IMPORTED, SIZE, Some(0));
    f.allocate(MANAGED, SIZE, None);
    for (base, kind) in [
        (POOL, MemoryKind::Pool),
        (HOST, MemoryKind::Host),
        (VMM, MemoryKind::Other),
    ] {
        f.allocate(base, SIZE, Some(0));
        f.kinds.borrow_mut().insert(base, kind);
    }
    Harness::new(f)
}

/// Events the fake driver creates: `EVENT` for CUDA, `HIP_EVENT` for HIP.
const EVENT: u64 = 0xe0;
const HIP_EVENT: u64 = 0xe1;

/// Creates `EVENT` and `HIP_EVENT` with `flags` (the driver answers success).
fn create_events(h: &Harness, flags: u32) {
    let mut event = CUevent(EVENT as usize as *mut c_void);
    h.ok(args::cuEventCreate {
        phEvent: Out(&mut event),
        Flags: EventFlags(flags),
    });
    let mut event = hipEvent_t(HIP_EVENT as usize as *mut c_void);
    h.ok(args::hipEventCreateWithFlags {
        event: Out(&mut event),
        flags: HipEventFlags(flags),
    });
}

fn get_event(event: u64) -> args::cuIpcGetEventHandle {
    args::cuIpcGetEventHandle {
        pHandle: Out(std::ptr::null_mut()),
        event: CUevent(event as usize as *mut c_void),
    }
}

fn hip_get_event(event: u64) -> args::hipIpcGetEventHandle {
    args::hipIpcGetEventHandle {
        handle: Out(std::ptr::null_mut()),
        event: hipEvent_t(event as usize as *mut c_void),
    }
}

/// Opens another process's handle (v2); the driver answers success and `IMPORTED`.
fn import(h: &Harness) {
    let mut ptr = CUdeviceptr(IMPORTED);
    let ran = h.call(
        args::cuIpcOpenMemHandle_v2 {
            pdptr: Out(&mut ptr),
            handle: CUipcMemHandle { reserved: THEIRS },
            Flags: IpcMemFlags(1),
        },
        SUCCESS,
    );
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

fn close(ptr: u64) -> args::cuIpcCloseMemHandle {
    args::cuIpcCloseMemHandle {
        dptr: CUdeviceptr(ptr),
    }
}

fn hip_close(ptr: u64) -> args::hipIpcCloseMemHandle {
    args::hipIpcCloseMemHandle {
        devPtr: VoidPtr(ptr as usize as *mut c_void),
    }
}

fn get(ptr: u64) -> args::cuIpcGetMemHandle {
    args::cuIpcGetMemHandle {
        pHandle: Out(std::ptr::null_mut()),
        dptr: CUdeviceptr(ptr),
    }
}

/// A handle another process made (as far as this one knows).
const THEIRS: [u8; 64] = [7; 64];
/// The handle this process's exports get from the fake driver (it writes nothing: the test
/// fills the out-parameter's memory beforehand).
const OURS: [u8; 64] = [9; 64];

fn open_handle(flags: u32, handle: [u8; 64]) -> args::cuIpcOpenMemHandle_v2 {
    args::cuIpcOpenMemHandle_v2 {
        pdptr: Out(std::ptr::null_mut()),
        handle: CUipcMemHandle { reserved: handle },
        Flags: IpcMemFlags(flags),
    }
}

fn open(flags: u32) -> args::cuIpcOpenMemHandle_v2 {
    open_handle(flags, THEIRS)
}

fn open_v1(flags: u32) -> args::cuIpcOpenMemHandle {
    args::cuIpcOpenMemHandle {
        pdptr: Out(std::ptr::null_mut()),
        handle: CUipcMemHandle { reserved: THEIRS },
        Flags: IpcMemFlags(flags),
    }
}

/// Exports `MEM` with the driver answering `ret`; the handle it "wrote" is `OURS`.
fn export(h: &Harness, ret: i32) {
    let mut handle = CUipcMemHandle { reserved: OURS };
    let ran = h.call(
        args::cuIpcGetMemHandle {
            pHandle: Out(&mut handle),
            dptr: CUdeviceptr(MEM),
        },
        ret,
    );
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

fn hip_export(h: &Harness) {
    let mut handle = hipIpcMemHandle_t { reserved: OURS };
    let ran = h.call(
        args::hipIpcGetMemHandle {
            handle: Out(&mut handle),
            devPtr: VoidPtr(MEM as usize as *mut c_void),
        },
        SUCCESS,
    );
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

fn hip_open(handle: [u8; 64]) -> args::hipIpcOpenMemHandle {
    args::hipIpcOpenMemHandle {
        devPtr: Out(std::ptr::null_mut()),
        handle: hipIpcMemHandle_t { reserved: handle },
        flags: HipIpcMemFlags(1),
    }
}

fn hip_get(ptr: u64) -> args::hipIpcGetMemHandle {
    args::hipIpcGetMemHandle {
        handle: Out(std::ptr::null_mut()),
        devPtr: VoidPtr(ptr as usize as *mut c_void),
    }
}

/// Runs a call the test expects to be clean.
fn ok<A: Checked>(h: &Harness, args: A) {
    h.ok(args);
}

fn export_event(h: &Harness) {
    let mut handle = CUipcEventHandle { reserved: OURS };
    h.ok(args::cuIpcGetEventHandle {
        pHandle: Out(&mut handle),
        event: CUevent(0xe0 as *mut c_void),
    });
    let mut handle = hipIpcEventHandle_t { reserved: OURS };
    h.ok(args::hipIpcGetEventHandle {
        handle: Out(&mut handle),
        event: hipEvent_t(0xe1 as *mut c_void),
    });
}

fn open_event(handle: [u8; 64]) -> args::cuIpcOpenEventHandle {
    args::cuIpcOpenEventHandle {
        phEvent: Out(std::ptr::null_mut()),
        handle: CUipcEventHandle { reserved: handle },
    }
}

fn hip_open_event(handle: [u8; 64]) -> args::hipIpcOpenEventHandle {
    args::hipIpcOpenEventHandle {
        event: Out(std::ptr::null_mut()),
        handle: hipIpcEventHandle_t { reserved: handle },
    }
}

const NEGATIVE: &[Case] = &[
    (
        "cuda export of an interior pointer, R580's answer",
        &[
            "cuIpcGetMemHandle.not-allocation-base",
            "divergence.cuIpcGetMemHandle.interior-pointer-accepted",
        ],
        |h| h.call(get(MEM + 256), SUCCESS),
    ),
    (
        "cuda export of an interior pointer, refused as documented",
        &["cuIpcGetMemHandle.not-allocation-base"],
        |h| h.call(get(MEM + 256), INVALID_VALUE),
    ),
    (
        "cuda open without the lazy flag",
        &["cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access"],
        |h| h.call(open(0), INVALID_VALUE),
    ),
    (
        "cuda open v1 with an unknown flag",
        &["cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access"],
        |h| h.call(open_v1(3), INVALID_VALUE),
    ),
    (
        "cuda open of a handle this process exported",
        &["cuIpcOpenMemHandle.same-process"],
        |h| {
            export(h, SUCCESS);
            h.call(open_handle(1, OURS), INVALID_CONTEXT)
        },
    ),
    (
        "cuda open of its own handle with bad flags, R580's legacy answer",
        &[
            "cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
            "cuIpcOpenMemHandle.same-process",
        ],
        |h| {
            export(h, SUCCESS);
            h.call(open_handle(0, OURS), INVALID_CONTEXT)
        },
    ),
    (
        "hip open of a handle this process exported",
        &["hipIpcOpenMemHandle.same-process"],
        |h| {
            hip_export(h);
            h.call(hip_open(OURS), INVALID_CONTEXT)
        },
    ),
    (
        "cuda close of memory no open returned",
        &["cuIpcCloseMemHandle.not-opened"],
        |h| h.call(close(MEM), INVALID_VALUE),
    ),
    (
        "cuda close once more than opened",
        &["cuIpcCloseMemHandle.not-opened"],
        |h| {
            import(h);
            ok(h, close(IMPORTED));
            h.call(close(IMPORTED), INVALID_VALUE)
        },
    ),
    (
        "cuda close of a pointer inside an opened mapping",
        &["cuIpcCloseMemHandle.not-opened"],
        |h| {
            import(h);
            h.call(close(IMPORTED + 16), INVALID_VALUE)
        },
    ),
    (
        "hip close of memory no open returned",
        &["hipIpcCloseMemHandle.not-opened"],
        |h| h.call(hip_close(MEM), INVALID_VALUE),
    ),
    (
        "legacy open of a handle already open",
        &["cuIpcOpenMemHandle.already-open-legacy"],
        |h| {
            import(h);
            h.call(open_v1(1), ALREADY_MAPPED)
        },
    ),
    (
        "cuda open of an event handle this process exported",
        &["cuIpcOpenEventHandle.same-process"],
        |h| {
            export_event(h);
            h.call(open_event(OURS), INVALID_CONTEXT)
        },
    ),
    (
        "hip open of an event handle this process exported",
        &["hipIpcOpenEventHandle.same-process"],
        |h| {
            export_event(h);
            h.call(hip_open_event(OURS), INVALID_CONTEXT)
        },
    ),
    (
        "hip export of an interior pointer",
        &["hipIpcGetMemHandle.not-allocation-base"],
        |h| h.call(hip_get(MEM + 4096), SUCCESS),
    ),
    (
        "cuda open of a handle open in another context of the same device",
        &["cuIpcOpenMemHandle.second-context-same-device"],
        |h| {
            let first = h.facts.context(0xc1, 0);
            h.facts.make_current(Some(first));
            import(h);
            let second = h.facts.context(0xc2, 0);
            h.facts.make_current(Some(second));
            h.call(open(1), INVALID_HANDLE)
        },
    ),
    (
        "cuda context destroyed with memory opened in it still open",
        &["cuCtxDestroy.ipc-memory-still-open"],
        |h| {
            let ctx = h.facts.context(0xc1, 0);
            h.facts.make_current(Some(ctx));
            import(h);
            h.call(args::cuCtxDestroy_v2 { ctx }, SUCCESS)
        },
    ),
    (
        "hip open with flags no HIP version defines",
        &["hipIpcOpenMemHandle.flags-not-lazy-enable-peer-access"],
        |h| {
            let mut open = hip_open(THEIRS);
            open.flags = HipIpcMemFlags(3);
            h.call(open, INVALID_VALUE)
        },
    ),
    (
        "cuda export of managed memory",
        &["cuIpcGetMemHandle.memory-not-exportable"],
        |h| h.call(get(MANAGED), INVALID_VALUE),
    ),
    (
        "cuda export of pool memory, inside the allocation",
        &["cuIpcGetMemHandle.memory-not-exportable"],
        |h| h.call(get(POOL + 64), INVALID_VALUE),
    ),
    (
        "cuda export of host memory",
        &["cuIpcGetMemHandle.memory-not-exportable"],
        |h| h.call(get(HOST), INVALID_VALUE),
    ),
    (
        "cuda export of cuMemCreate memory",
        &["cuIpcGetMemHandle.memory-not-exportable"],
        |h| h.call(get(VMM), INVALID_VALUE),
    ),
    (
        "hip export of managed memory, which the runtime exported anyway",
        &["hipIpcGetMemHandle.memory-not-exportable"],
        |h| h.call(hip_get(MANAGED), SUCCESS),
    ),
    (
        "cuda export of an event created without the IPC flags",
        &["cuIpcGetEventHandle.event-not-interprocess"],
        |h| {
            create_events(h, 0);
            h.call(get_event(EVENT), INVALID_HANDLE)
        },
    ),
    (
        "cuda export of an event created with disable-timing only",
        &["cuIpcGetEventHandle.event-not-interprocess"],
        |h| {
            create_events(h, 2);
            h.call(get_event(EVENT), INVALID_HANDLE)
        },
    ),
    (
        "hip export of an event created without the IPC flags",
        &["hipIpcGetEventHandle.event-not-interprocess"],
        |h| {
            create_events(h, 1);
            h.call(hip_get_event(HIP_EVENT), 9) // hipErrorInvalidConfiguration
        },
    ),
];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_ipc_rule_has_one() {
    // The report phase's rules are staged across processes (tests/ipc_rules.rs).
    let report_phase = ipc::report::REPORTED_ON.iter().map(|(r, _)| r.id);
    check_negative_cases(world, NEGATIVE, &["ipc"], report_phase);
    assert!(rules::divergences::KNOWN.iter().any(|d| ipc::FAMILY
        .rules()
        .iter()
        .any(|r| std::ptr::eq(*r, d.misuse))));
}

#[test]
fn correct_exports_and_opens_are_silent() {
    let h = world();
    ok(&h, get(MEM));
    ok(&h, open(1));
    ok(&h, open_v1(1));
    ok(&h, hip_get(MEM));
    ok(&h, hip_open(THEIRS));
    // Another process's event handles.
    export_event(&h);
    ok(&h, open_event(THEIRS));
    ok(&h, hip_open_event(THEIRS));
    // A memory export is not an event's: the same bytes opened as an event are not flagged.
    let h = world();
    export(&h, SUCCESS);
    let ran = h.call(open_event(OURS), INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    // A pointer the driver does not know is its business (it answers INVALID_VALUE): no finding
    // rests on an allocation nobody can name.
    let ran = h.call(get(0xdead_0000), INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    let ran = h.call(hip_get(0xdead_0000), INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

/// Events made for IPC export silently; so do events whose creation the shim did not see, and a
/// new event at the address of a destroyed one is judged by its own flags.
#[test]
fn events_made_for_ipc_and_unseen_events_export_silently() {
    let h = world();
    create_events(&h, 6);
    ok(&h, get_event(EVENT));
    ok(&h, hip_get_event(HIP_EVENT));
    // Created before the shim was there: nothing is known, nothing is said.
    let ran = h.call(get_event(0xe9), INVALID_HANDLE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    // Destroyed, then made again at the same address with the IPC flags.
    let h = world();
    create_events(&h, 0);
    h.ok(args::cuEventDestroy_v2 {
        hEvent: CUevent(EVENT as usize as *mut c_void),
    });
    h.ok(args::hipEventDestroy {
        event: hipEvent_t(HIP_EVENT as usize as *mut c_void),
    });
    let ran = h.call(get_event(EVENT), INVALID_HANDLE);
    assert!(ran.is_quiet(), "destroyed: {:?}", ran.messages);
    create_events(&h, 6 | 1);
    ok(&h, get_event(EVENT));
    ok(&h, hip_get_event(HIP_EVENT));
    // A failed creation records nothing.
    let h = world();
    let mut event = CUevent(EVENT as usize as *mut c_void);
    let ran = h.call(
        args::cuEventCreate {
            phEvent: Out(&mut event),
            Flags: EventFlags(4),
        },
        INVALID_VALUE,
    );
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    let ran = h.call(get_event(EVENT), INVALID_HANDLE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

/// Every kind of memory but cuMemAlloc's is refused by the export rule; cuMemAlloc memory at its
/// base is not, and an interior pointer of memory that cannot be exported at all names only
/// that.
#[test]
fn only_cumemalloc_memory_is_exportable() {
    let h = world();
    for ptr in [MANAGED, POOL, HOST, VMM] {
        let ran = h.call(get(ptr + 16), INVALID_VALUE);
        assert_eq!(
            ran.rules,
            ["cuIpcGetMemHandle.memory-not-exportable"],
            "{ptr:#x}: {:?}",
            ran.messages
        );
    }
    let ran = h.call(get(POOL), INVALID_VALUE);
    assert!(
        ran.messages[0].contains("cuMemPoolExportPointer"),
        "{:?}",
        ran.messages
    );
    ok(&h, get(MEM));
    ok(&h, hip_get(MEM));
}

/// A handle counts as this process's only once the driver made it: a failed export records
/// nothing, and an open the driver performs drops the tracked finding.
#[test]
fn only_handles_the_driver_made_here_count_as_this_processs() {
    let h = world();
    export(&h, INVALID_VALUE);
    let ran = h.call(open_handle(1, OURS), INVALID_CONTEXT);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    let h = world();
    export(&h, SUCCESS);
    ok(&h, open_handle(1, THEIRS));
    // The driver opened it after all (tracked state, not a certainty): nothing is reported.
    ok(&h, open_handle(1, OURS));
}

/// v2 counts opens of the same handle: as many closes as opens are correct, one more is not.
#[test]
fn every_open_is_closed_once() {
    let h = world();
    import(&h);
    import(&h);
    ok(&h, close(IMPORTED));
    ok(&h, close(IMPORTED));
    let ran = h.call(close(IMPORTED), INVALID_VALUE);
    assert_eq!(ran.rules, ["cuIpcCloseMemHandle.not-opened"]);
    assert!(
        ran.messages[0].contains("was closed as many times as cuIpcOpenMemHandle returned it"),
        "{:?}",
        ran.messages
    );
    // A close of memory the shim never saw opened, which the driver performs (an open before
    // the shim was loaded): tracked state only, so nothing is reported.
    ok(&h, close(MEM));
    let ran = h.call(close(IMPORTED + 16), INVALID_VALUE);
    assert!(
        ran.messages[0].contains("never returned 0x400010"),
        "a closed mapping is not an open one: {:?}",
        ran.messages
    );
}

/// `_v2` counts a second open of the same handle silently (correct use); the legacy export's
/// refusal of it is explained; a handle not open here explains nothing.
#[test]
fn a_handle_opened_again_is_counted_and_the_legacy_refusal_explained() {
    let h = world();
    import(&h);
    import(&h);
    let ran = h.call(open_v1(1), ALREADY_MAPPED);
    assert_eq!(ran.rules, ["cuIpcOpenMemHandle.already-open-legacy"]);
    assert!(
        ran.messages[0].contains("already open here at 0x400000 (2 open(s))"),
        "{:?}",
        ran.messages
    );
    let h = world();
    let ran = h.call(open_v1(1), ALREADY_MAPPED);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

#[test]
fn an_interior_close_names_the_pointer_to_close() {
    let h = world();
    import(&h);
    let ran = h.call(close(IMPORTED + 16), INVALID_VALUE);
    assert!(
        ran.messages[0].contains(
            "0x400010 is 16 byte(s) into the memory cuIpcOpenMemHandle returned at 0x400000"
        ),
        "{:?}",
        ran.messages
    );
}

#[test]
fn the_message_names_the_offset_and_the_allocation() {
    let h = world();
    let ran = h.call(get(MEM + 0x100), SUCCESS);
    assert!(
        ran.messages[0].contains("256 byte(s) into its allocation [0x100000, 0x110000)"),
        "{:?}",
        ran.messages
    );
}

#[test]
fn a_cached_range_is_asked_again_before_it_is_reported() {
    let h = world();
    let before = h.facts.fresh_queries.get();
    h.call(get(MEM + 8), SUCCESS);
    assert_eq!(h.facts.fresh_queries.get(), before + 1);
    // A base pointer asks nothing more.
    h.call(get(MEM), SUCCESS);
    assert_eq!(h.facts.fresh_queries.get(), before + 1);
}

#[test]
fn strict_mode_refuses_an_interior_export_with_the_documented_code() {
    let mut h = world();
    h.mode = Mode::Strict;
    let ran = h.call(get(MEM + 8), SUCCESS);
    assert!(!ran.forwarded);
    assert_eq!(ran.ret, INVALID_VALUE);
    // The HIP rule has no documented code: strict mode forwards.
    let ran = h.call(hip_get(MEM + 8), SUCCESS);
    assert!(ran.forwarded);
    assert_eq!(ran.rules, ["hipIpcGetMemHandle.not-allocation-base"]);
}

/// One context per device per exporter: the same handle opened again in the context that opened
/// it, or in a context of another device, or after every open was closed, is correct.
#[test]
fn another_device_or_a_closed_handle_may_open_in_another_context() {
    let h = world();
    let first = h.facts.context(0xc1, 0);
    h.facts.make_current(Some(first));
    import(&h);
    import(&h);
    let other_device = h.facts.context(0xc3, 1);
    h.facts.make_current(Some(other_device));
    ok(&h, open(1));
    // Every open in the first context closed: a second context of device 0 may open it.
    h.facts.make_current(Some(first));
    ok(&h, close(IMPORTED));
    ok(&h, close(IMPORTED));
    let second = h.facts.context(0xc2, 0);
    h.facts.make_current(Some(second));
    ok(&h, open(1));
}

/// A context destroyed after its mappings were closed, or whose destroy fails, or another
/// context's destroy, says nothing; the destroyed context's mappings are forgotten.
#[test]
fn contexts_destroyed_after_their_closes_are_silent() {
    let h = world();
    let ctx = h.facts.context(0xc1, 0);
    h.facts.make_current(Some(ctx));
    import(&h);
    let other = h.facts.context(0xc2, 1);
    ok(&h, args::cuCtxDestroy_v2 { ctx: other });
    let ran = h.call(args::cuCtxDestroy_v2 { ctx }, INVALID_CONTEXT);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    ok(&h, close(IMPORTED));
    ok(&h, args::cuCtxDestroy_v2 { ctx });
    // Destroyed with the mapping open: reported once, then forgotten.
    let h = world();
    h.facts.make_current(Some(ctx));
    import(&h);
    import(&h);
    let ran = h.call(args::cuCtxDestroy_v2 { ctx }, SUCCESS);
    assert!(
        ran.messages[0].contains("(2 open(s))"),
        "{:?}",
        ran.messages
    );
    ok(&h, args::cuCtxDestroy_v2 { ctx });
}

/// The running runtime's own value of hipIpcMemLazyEnablePeerAccess is the correct one: 0 on
/// ROCm 5 (HIP 5.2 here), 0x1 on ROCm 6 (6.2); the other is a misuse of this runtime, named with
/// its version.
#[test]
fn the_lazy_flag_is_judged_against_the_running_runtime_s_version() {
    let flags_rule = "hipIpcOpenMemHandle.flags-not-lazy-enable-peer-access";
    for (version, right, wrong, named) in
        [(50_221_000, 0, 1, "HIP 5.2"), (60_241_134, 1, 0, "HIP 6.2")]
    {
        let h = world();
        h.facts.hip_runtime_version.set(Some(version));
        let mut open = hip_open(THEIRS);
        open.flags = HipIpcMemFlags(right);
        ok(&h, open);
        open.flags = HipIpcMemFlags(wrong);
        let ran = h.call(open, INVALID_VALUE);
        assert_eq!(ran.rules, [flags_rule], "{version}: {:?}", ran.messages);
        assert!(ran.messages[0].contains(named), "{:?}", ran.messages);
    }
}

/// Where the runtime cannot say its version, both values hipIpcMemLazyEnablePeerAccess has had
/// (0 before ROCm 6, 0x1 from it) are taken as correct.
#[test]
fn either_hip_lazy_flag_value_is_silent() {
    let h = world();
    for flags in [0, 1] {
        let mut open = hip_open(THEIRS);
        open.flags = HipIpcMemFlags(flags);
        ok(&h, open);
    }
}

#[test]
fn an_export_found_clean_is_checked_again_once_the_generation_moves() {
    let h = world();
    let (first, remembered) = h.remembering(|h| {
        h.facts.kinds.borrow_mut().remove(&MEM);
        let first = h.call(get(MEM), SUCCESS);
        // The memory becomes unexportable behind the shim's back: the export remembered clean
        // stays clean until the generation moves (a free moves it).
        h.facts.kinds.borrow_mut().insert(MEM, MemoryKind::Pool);
        (first, h.call_as_is(get(MEM), SUCCESS))
    });
    assert!(first.rules.is_empty(), "{:?}", first.messages);
    assert!(remembered.rules.is_empty(), "{:?}", remembered.messages);
    // Another pointer is not the one remembered.
    h.facts
        .kinds
        .borrow_mut()
        .insert(IMPORTED, MemoryKind::Pool);
    let not_exportable = "cuIpcGetMemHandle.memory-not-exportable";
    let other = h.call_as_is(get(IMPORTED), SUCCESS);
    assert!(
        other.rules.contains(&not_exportable),
        "{:?}",
        other.messages
    );
    crate::engine::moved_on();
    let checked = h.call_as_is(get(MEM), SUCCESS);
    assert!(
        checked.rules.contains(&not_exportable),
        "{:?}",
        checked.messages
    );
}

#[test]
fn a_hip_export_found_clean_is_checked_again_once_the_generation_moves() {
    let h = world();
    let set = |h: &Harness, device| {
        h.facts.allocations.borrow_mut().retain(|a| a.base != MEM);
        h.facts.allocate(MEM, SIZE, device);
    };
    let (first, remembered) = h.remembering(|h| {
        set(h, Some(0));
        let first = h.call(hip_get(MEM), SUCCESS);
        // The memory becomes managed behind the shim's back.
        set(h, None);
        (first, h.call_as_is(hip_get(MEM), SUCCESS))
    });
    assert!(first.rules.is_empty(), "{:?}", first.messages);
    assert!(remembered.rules.is_empty(), "{:?}", remembered.messages);
    crate::engine::moved_on();
    let not_exportable = "hipIpcGetMemHandle.memory-not-exportable";
    let checked = h.call_as_is(hip_get(MEM), SUCCESS);
    assert!(
        checked.rules.contains(&not_exportable),
        "{:?}",
        checked.messages
    );
}

#[test]
fn an_export_s_home_is_found_once_per_clean_verdict_and_again_once_the_generation_moves() {
    let h = world();
    let home = |n: i32| Home {
        context: Some(0xc0),
        device: Some(n),
        uuid: None,
    };
    let finds = std::cell::Cell::new(0);
    let find = |n| {
        finds.set(finds.get() + 1);
        home(n)
    };
    let (first, second) = h.remembering(|_| {
        finds.set(0);
        LAST_CLEAN_GET.keep(MEM, crate::engine::generation(), None);
        let first = home_of(&LAST_CLEAN_GET, MEM, || find(1));
        // The same export again: its home is remembered with its verdict.
        (first, home_of(&LAST_CLEAN_GET, MEM, || find(2)))
    });
    assert!(
        first == home(1) && second == home(1),
        "the first home is kept"
    );
    assert_eq!(finds.get(), 1, "found once");
    // Another pointer, never found clean: found, and not remembered.
    let _ = home_of(&LAST_CLEAN_GET, IMPORTED, || find(3));
    assert_eq!(finds.get(), 2);
    crate::engine::moved_on();
    let moved = home_of(&LAST_CLEAN_GET, MEM, || find(4));
    assert!(moved == home(4), "found again once the generation moved");
}

/// The export's quick path (issue 24): an export this thread found clean in this generation is
/// decided without the checks' context, and the handle the driver wrote still counts as this
/// process's; recorded, only once the memory's home is remembered with the verdict (the first
/// record of a pointer has it, and its stack, from the full path). Anything else, another
/// pointer or a moved generation, takes the full path, which checks it.
#[test]
fn an_export_remembered_clean_takes_the_quick_path() {
    let h = world();
    let mut written = CUipcMemHandle { reserved: OURS };
    let exporting = |handle: &mut CUipcMemHandle| args::cuIpcGetMemHandle {
        pHandle: Out(handle),
        dptr: CUdeviceptr(MEM),
    };
    let (fresh, unrecorded, recorded, placed) = h.remembering(|h| {
        let fresh = h.quick_as(get(MEM), SUCCESS, false);
        assert!(h.call_as_is(get(MEM), SUCCESS).is_quiet());
        let unrecorded = h.quick_as_is(exporting(&mut written), SUCCESS, false);
        let recorded = h.quick_as_is(get(MEM), SUCCESS, true);
        let home = Home {
            context: Some(0xc0),
            device: Some(0),
            uuid: None,
        };
        LAST_CLEAN_GET.keep(MEM, crate::engine::generation(), Some(home));
        (
            fresh,
            unrecorded,
            recorded,
            h.quick_as_is(get(MEM), SUCCESS, true),
        )
    });
    assert_eq!(fresh, None, "nothing remembered: the full path");
    assert_eq!(unrecorded, Some(SUCCESS));
    assert_eq!(recorded, None, "the first record wants the memory's home");
    assert_eq!(placed, Some(SUCCESS));
    assert_eq!(h.quick_as_is(get(IMPORTED), SUCCESS, false), None);
    // The handle the quick export wrote is this process's own: opening it here is misuse.
    let open = h.call(open_handle(1, OURS), INVALID_CONTEXT);
    assert!(
        open.rules.contains(&"cuIpcOpenMemHandle.same-process"),
        "{:?}",
        open.messages
    );
}

/// A quick export the driver refused wrote no handle: nothing counts as exported.
#[test]
fn a_refused_quick_export_exports_nothing() {
    let h = world();
    const UNWRITTEN: [u8; 64] = [5; 64];
    let mut buffer = CUipcMemHandle {
        reserved: UNWRITTEN,
    };
    let refused = h.remembering(|h| {
        assert!(h.call(get(MEM), SUCCESS).is_quiet());
        let export = args::cuIpcGetMemHandle {
            pHandle: Out(&mut buffer),
            dptr: CUdeviceptr(MEM),
        };
        h.quick_as_is(export, INVALID_VALUE, false)
    });
    assert_eq!(
        refused,
        Some(INVALID_VALUE),
        "decided quick, and the answer stands"
    );
    // R580's answer to a same-process open, which would confirm the finding were it exported.
    let open = h.call(open_handle(1, UNWRITTEN), INVALID_CONTEXT);
    assert!(
        !open.rules.contains(&"cuIpcOpenMemHandle.same-process"),
        "{:?}",
        open.messages
    );
}
