//! The IPC family: checks for `cuIpc*` and `hipIpc*`. Catalogue: `sharecheck_core::rules::ipc`.
//!
//! This first part holds the rules one call decides by itself (an export must name the base of
//! its allocation, an open must ask for lazy peer access) and those that need what this process
//! exported and opened: a handle is not opened where it was made, and a close names memory an
//! open returned and that is still open.

#[cfg(test)]
mod tests;

use crate::engine::facts::{HipSession, MemoryKind};
use crate::engine::state::{may_hold, pointer_bit, FamilyState, Left, Lifetime};
use crate::engine::{hex, Check, Cx, LastClean, Quick, Remember};
use parking_lot::Mutex;
use sharecheck_core::ffi::{CUcontext, Outcome};
use sharecheck_core::functions::args;
use sharecheck_core::rules::ipc::{cuda, hip};
use sharecheck_core::rules::Rule;
use std::collections::{HashMap, HashSet};
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct GetCuda;
pub struct OpenCuda;
pub struct CloseCuda;
pub struct GetHip;
pub struct OpenHip;
pub struct CloseHip;
pub struct GetEventCuda;
pub struct GetEventHip;
pub struct EventCreated;
pub struct ContextDestroyed;
pub struct OpenEventCuda;
pub struct OpenEventHip;
pub struct ExportedFreed;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const GET_CUDA: super::GetCuda = super::GetCuda;
    pub const OPEN_CUDA: super::OpenCuda = super::OpenCuda;
    pub const GET_HIP: super::GetHip = super::GetHip;
    pub const OPEN_HIP: super::OpenHip = super::OpenHip;
    pub const CLOSE_CUDA: super::CloseCuda = super::CloseCuda;
    pub const CLOSE_HIP: super::CloseHip = super::CloseHip;
    pub const GET_EVENT_CUDA: super::GetEventCuda = super::GetEventCuda;
    pub const GET_EVENT_HIP: super::GetEventHip = super::GetEventHip;
    pub const EVENT_CREATED: super::EventCreated = super::EventCreated;
    pub const CONTEXT_DESTROYED: super::ContextDestroyed = super::ContextDestroyed;
    pub const OPEN_EVENT_CUDA: super::OpenEventCuda = super::OpenEventCuda;
    pub const OPEN_EVENT_HIP: super::OpenEventHip = super::OpenEventHip;
    pub const EXPORTED_FREED: super::ExportedFreed = super::ExportedFreed;
}

/// What the family tracks: the memory handles this process exported, as keyed fingerprints (a
/// handle is a capability: its bytes are kept nowhere), and the pointers opens returned, with
/// their open count (0 once closed as often as opened). A forked child starts empty, as every
/// family does: its parent's handles are another process's there, and its mappings are gone.
/// Nothing is forgotten when memory is freed: a handle of freed memory is still this process's
/// (R580 even hands the same handle out again for memory allocated at the same address). What is
/// tracked only ever backs a finding the driver's answer confirms (an open or close the driver
/// performs drops it), so an open the shim did not see costs no false alarm.
#[derive(Default)]
pub struct IpcState {
    exported: Mutex<HashSet<u64>>,
    /// The quick digest ([`crate::fingerprint::quick`]) of the handle last put in `exported`.
    last_exported: [AtomicU64; 2],
    exported_events: Mutex<HashSet<u64>>,
    opened: Mutex<HashMap<u64, Opened>>,
    /// The pointer each opened handle (by fingerprint) was mapped at, and the context current
    /// then (0: unknown).
    mapped: Mutex<HashMap<u64, (u64, u64)>>,
    /// The flags of each live event this process created (the shim saw the creation).
    events: Mutex<HashMap<u64, u32>>,
    /// Memory this process exported while tracing, not freed since (the report may name its
    /// free: its stack is kept). The family's memory watch (`States::watch`) holds a bit
    /// per pointer of it ([`pointer_bit`]), cleared when none is left.
    exported_memory: Mutex<HashSet<u64>>,
}

/// How often an opened pointer is open, and through which API.
#[derive(Clone, Copy, Debug)]
struct Opened {
    count: u32,
    hip: bool,
}

impl FamilyState for IpcState {
    const SLOT: usize = 1;
    fn forget(&self, _: Lifetime) {}
    const FORGETS_FREED_MEMORY: bool = false;
    /// Memory opened from another process's handle and never closed
    /// (`cuIpcOpenMemHandle.never-closed`, `hipIpcOpenMemHandle.never-closed`).
    fn left_at_exit(&self) -> Vec<Left> {
        use sharecheck_core::rules::ipc::report::{HIP_NEVER_CLOSED_RULE, NEVER_CLOSED_RULE};
        let Some(opened) = self.opened.try_lock_for(crate::engine::state::AT_EXIT_WAIT) else {
            return Vec::new();
        };
        let mut open: Vec<(u64, Opened)> = opened
            .iter()
            .filter(|(_, o)| o.count > 0)
            .map(|(&p, &o)| (p, o))
            .collect();
        open.sort_unstable_by_key(|&(p, _)| p);
        open.into_iter()
            .map(|(ptr, o)| {
                let (rule, open, close) = if o.hip {
                    (
                        &HIP_NEVER_CLOSED_RULE,
                        "hipIpcOpenMemHandle",
                        "hipIpcCloseMemHandle",
                    )
                } else {
                    (
                        &NEVER_CLOSED_RULE,
                        "cuIpcOpenMemHandle",
                        "cuIpcCloseMemHandle",
                    )
                };
                let times = if o.count == 1 {
                    "once".to_string()
                } else {
                    format!("{} times", o.count)
                };
                Left {
                    rule,
                    call: format!("{open}(...) -> {}", hex(ptr)),
                    message: format!(
                        "{} was opened {times} from another process's handle and not closed \
                         ({close}) before the process exited",
                        hex(ptr)
                    ),
                }
            })
            .collect()
    }
    /// Memory opened from another process's handle (at exit: a lock another thread holds for
    /// long counts as nothing to say).
    fn imports_from_other_processes(&self) -> bool {
        self.opened
            .try_lock_for(crate::engine::state::AT_EXIT_WAIT)
            .is_some_and(|o| !o.is_empty())
    }
}

impl IpcState {
    #[link_section = ".text.hot.sharecheck"]
    fn exported(&self, handle: &[u8; 64]) {
        // The set only grows, and `last_exported` is set once the handle's fingerprint is in it:
        // a program that exports the same memory again takes no lock and no keyed hash. Two
        // exports racing can only mismatch a digest, which costs one more insert.
        let q = crate::fingerprint::quick(handle);
        let last = [&self.last_exported[0], &self.last_exported[1]].map(|a| a.load(Relaxed));
        if q != (0, 0) && (last[0], last[1]) == q {
            return;
        }
        self.exported
            .lock()
            .insert(crate::fingerprint::fingerprint(handle));
        self.last_exported[0].store(q.0, Relaxed);
        self.last_exported[1].store(q.1, Relaxed);
    }

    fn was_exported(&self, handle: &[u8; 64]) -> bool {
        let fp = crate::fingerprint::fingerprint(handle);
        self.exported.lock().contains(&fp)
    }

    fn exported_event(&self, handle: &[u8; 64]) {
        self.exported_events
            .lock()
            .insert(crate::fingerprint::fingerprint(handle));
    }

    fn was_exported_event(&self, handle: &[u8; 64]) -> bool {
        let fp = crate::fingerprint::fingerprint(handle);
        self.exported_events.lock().contains(&fp)
    }

    /// An open returned `ptr` (v2 and HIP count every open of the same handle; a legacy open of
    /// an open handle fails, so each success counts one).
    fn opened(&self, ptr: u64, hip: bool) {
        self.opened
            .lock()
            .entry(ptr)
            .or_insert(Opened { count: 0, hip })
            .count += 1;
    }

    /// An open of `handle` in context `ctx` (0: unknown) returned `ptr`.
    fn mapped(&self, handle: &[u8; 64], ptr: u64, ctx: u64) {
        self.mapped
            .lock()
            .insert(crate::fingerprint::fingerprint(handle), (ptr, ctx));
        self.opened(ptr, false);
    }

    /// Where `handle` is open in this process, and how often: `None` if it is not.
    fn open_at(&self, handle: &[u8; 64]) -> Option<(u64, u32)> {
        self.open_in(handle).map(|(ptr, n, _)| (ptr, n))
    }

    /// [`Self::open_at`], with the context it was opened in (0: unknown).
    fn open_in(&self, handle: &[u8; 64]) -> Option<(u64, u32, u64)> {
        let fp = crate::fingerprint::fingerprint(handle);
        let (ptr, ctx) = *self.mapped.lock().get(&fp)?;
        self.open_count(ptr)
            .filter(|&n| n > 0)
            .map(|n| (ptr, n, ctx))
    }

    /// A close of `ptr` succeeded.
    fn closed(&self, ptr: u64) {
        if let Some(o) = self.opened.lock().get_mut(&ptr) {
            o.count = o.count.saturating_sub(1);
        }
    }

    /// The context `ctx` was destroyed: the pointers opened in it that were still open, with
    /// their open counts (forgotten: the context took the mappings with it).
    fn context_destroyed(&self, ctx: u64) -> Vec<(u64, u32)> {
        let mut mapped = self.mapped.lock();
        let mut opened = self.opened.lock();
        let mut left = Vec::new();
        mapped.retain(|_, &mut (ptr, in_ctx)| {
            if in_ctx != ctx {
                return true;
            }
            if let Some(o) = opened.remove(&ptr).filter(|o| o.count > 0) {
                left.push((ptr, o.count));
            }
            false
        });
        left.sort_unstable();
        left
    }

    /// An event was created with `flags` (`None`: it was destroyed): the flags it had.
    fn event(&self, event: u64, flags: Option<u32>) -> Option<u32> {
        let mut events = self.events.lock();
        match flags {
            Some(flags) => events.insert(event, flags),
            None => events.remove(&event),
        }
    }

    /// `ptr` was exported by this process: a free of it may be named by the report. `watch` is
    /// the family's memory watch.
    fn exported_memory(&self, ptr: u64, watch: &AtomicU64) {
        let mut exported = self.exported_memory.lock();
        exported.insert(ptr);
        watch.fetch_or(pointer_bit(ptr), Relaxed);
    }

    /// `ptr`, which the memory watch `watch` may hold, was freed: whether this process had
    /// exported it.
    #[cold]
    #[inline(never)]
    fn freed_exported(&self, ptr: u64, watch: &AtomicU64) -> bool {
        let mut exported = self.exported_memory.lock();
        let was = exported.remove(&ptr);
        if exported.is_empty() {
            watch.store(0, Relaxed);
        }
        was
    }

    /// The flags a live event was created with, if the shim saw its creation.
    fn event_flags(&self, event: u64) -> Option<u32> {
        self.events.lock().get(&event).copied()
    }

    /// How often `ptr` is open: `None` if no open returned it.
    fn open_count(&self, ptr: u64) -> Option<u32> {
        self.opened.lock().get(&ptr).map(|o| o.count)
    }

    /// The open pointer whose mapping `ptr` lies in, given the mapping's base.
    fn open_base(&self, base: u64) -> bool {
        self.open_count(base).is_some_and(|n| n > 0)
    }
}

/// Before a close: `ptr` must be memory an open returned and that is still open (tracked state:
/// dropped if the driver closes it after all). `range` is the driver's allocation range query.
fn not_opened(
    cx: &mut Cx,
    rule: &'static Rule,
    open: &str,
    ptr: u64,
    range: impl FnOnce() -> Option<(u64, u64)>,
) {
    let message = match cx.states.family::<IpcState>().open_count(ptr) {
        Some(0) => format!(
            "{} was closed as many times as {open} returned it",
            hex(ptr)
        ),
        Some(_) => return,
        None => match range()
            .filter(|&(base, _)| base != ptr && cx.states.family::<IpcState>().open_base(base))
        {
            Some((base, _)) => format!(
                "{} is {} byte(s) into the memory {open} returned at {}: close that pointer",
                hex(ptr),
                ptr - base,
                hex(base)
            ),
            None => format!("{open} never returned {} in this process", hex(ptr)),
        },
    };
    cx.tracked(rule, || message);
}

/// Before an open: a handle this process exported (`exported`: of memory, or of an event) is
/// flagged (tracked state: dropped if the driver opens it after all).
fn same_process(cx: &mut Cx, rule: &'static Rule, exported: bool) {
    if exported {
        cx.tracked(rule, || {
            "this process exported the handle (it is opened where it was made)".into()
        });
    }
}

/// Both APIs' interprocess and disable-timing event flags (the same bits).
const EVENT_INTERPROCESS: u32 = 0x4;
const EVENT_DISABLE_TIMING: u32 = 0x2;

/// Both APIs' event exports: the event must have been created with both IPC flags (decided from
/// the flags the shim saw it created with; tracked state, dropped if the driver exports it after
/// all); a handle made is recorded.
macro_rules! get_event {
    ($($check:ident $function:ident . $out:ident, $rule:expr, $flags:literal);*) => {$(
        impl Check<args::$function> for $check {
            type Plan = ();
            fn before(&self, a: &args::$function, cx: &mut Cx) {
                let event = a.event.addr();
                let Some(flags) = cx.states.family::<IpcState>().event_flags(event) else {
                    return;
                };
                let missing = (EVENT_INTERPROCESS | EVENT_DISABLE_TIMING) & !flags;
                if missing != 0 {
                    cx.tracked($rule, || {
                        format!(
                            "event {} was created with flags {flags:#x}; an exported event needs \
                             {} (0x6)",
                            hex(event),
                            $flags
                        )
                    });
                }
            }
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if let Some(handle) = a.$out.written(Outcome::Returned(ret)) {
                    cx.states.family::<IpcState>().exported_event(&handle.reserved);
                }
            }
        }
    )*};
}

get_event!(
    GetEventCuda cuIpcGetEventHandle.pHandle, &cuda::GET_EVENT_NOT_INTERPROCESS,
        "CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING";
    GetEventHip hipIpcGetEventHandle.handle, &hip::GET_EVENT_NOT_INTERPROCESS,
        "hipEventInterprocess | hipEventDisableTiming"
);

/// `CU_EVENT_INTERPROCESS`, `hipEventInterprocess`.
const INTERPROCESS_EVENT: u32 = 0x4;

/// Event creation and destruction, observed (nothing decided): the flags of each live event.
macro_rules! event_created {
    ($($function:ident ($out:ident, $flags:ident)),*) => {$(
        impl Check<args::$function> for EventCreated {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if let Some(event) = a.$out.written(Outcome::Returned(ret)) {
                    cx.states.family::<IpcState>().event(event.addr(), Some(a.$flags.0));
                }
            }
        }
    )*};
    ($($function:ident ($event:ident)),*; destroy) => {$(
        impl Check<args::$function> for EventCreated {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if ret == 0 {
                    let flags = cx.states.family::<IpcState>().event(a.$event.addr(), None);
                    // An interprocess event's destroy may be named by the report.
                    if flags.is_some_and(|f| f & INTERPROCESS_EVENT != 0) {
                        cx.keep_stack();
                    }
                }
            }
        }
    )*};
}

event_created!(
    cuEventCreate(phEvent, Flags),
    hipEventCreateWithFlags(event, flags)
);
event_created!(cuEventDestroy_v2(hEvent), hipEventDestroy(event); destroy);

impl Check<args::cuIpcOpenEventHandle> for OpenEventCuda {
    type Plan = ();
    fn before(&self, a: &args::cuIpcOpenEventHandle, cx: &mut Cx) {
        let exported = cx
            .states
            .family::<IpcState>()
            .was_exported_event(&a.handle.reserved);
        same_process(cx, &cuda::OPEN_EVENT_SAME_PROCESS, exported);
    }
}

impl Check<args::hipIpcOpenEventHandle> for OpenEventHip {
    type Plan = ();
    fn before(&self, a: &args::hipIpcOpenEventHandle, cx: &mut Cx) {
        let exported = cx
            .states
            .family::<IpcState>()
            .was_exported_event(&a.handle.reserved);
        same_process(cx, &hip::OPEN_EVENT_SAME_PROCESS, exported);
    }
}

/// Flags `rule` when `ptr` lies inside an allocation rather than at its base: `range` gives the
/// allocation `(base, size)` of a pointer, cached (`false`) or asked again (`true`), which a
/// finding rests on.
fn not_base(
    cx: &mut Cx,
    rule: &'static Rule,
    name: &str,
    ptr: u64,
    mut range: impl FnMut(bool) -> Option<(u64, u64)>,
) {
    let inside = |r: Option<(u64, u64)>| r.filter(|&(base, size)| base != ptr && ptr - base < size);
    if inside(range(false)).is_none() {
        return;
    }
    if let Some((base, size)) = inside(range(true)) {
        cx.flag(rule, || {
            format!(
                "{name} {} is {} byte(s) into its allocation [{}, {}); the handle covers the \
                 whole allocation, and an importer maps it from {}",
                hex(ptr),
                ptr - base,
                hex(base),
                hex(base + size),
                hex(base)
            )
        });
    }
}

/// Flags the CUDA export of memory legacy IPC cannot export (decided from the driver's pointer
/// attributes, asked afresh); `true` when it did.
fn not_exportable(cx: &mut Cx, ptr: u64) -> bool {
    // Cached on the clean path (cuMemAlloc memory), asked afresh before a finding.
    let kind = cx
        .facts
        .memory_kind_confirmed(ptr, |k| matches!(k, None | Some(MemoryKind::Device)));
    let what = match kind {
        None | Some(MemoryKind::Device) => return false,
        Some(MemoryKind::Managed) => "managed memory (cuMemAllocManaged)",
        Some(MemoryKind::Pool) => {
            "stream-ordered memory of a memory pool (cuMemAllocAsync); share it with \
             cuMemPoolExportPointer"
        }
        Some(MemoryKind::Host) => "page-locked host memory",
        Some(MemoryKind::Other) => {
            "device memory the driver says legacy IPC cannot export \
             (CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE is 0): cuMemCreate memory, or a \
             mapping opened from another process's handle"
        }
    };
    cx.flag(&cuda::GET_NOT_EXPORTABLE, || {
        format!(
            "dptr {} is {what}; only cuMemAlloc memory can be exported with cuIpcGetMemHandle \
             (R580 answers CUDA_ERROR_INVALID_VALUE)",
            hex(ptr)
        )
    });
    true
}

/// Where exported memory lives, for the export's record: its context (CUDA), its device and the
/// device's UUID.
#[derive(Clone, Copy, PartialEq)]
struct Home {
    context: Option<u64>,
    device: Option<i32>,
    uuid: Option<[u8; 16]>,
}

crate::fast_thread_local! {
    /// This thread's last export of memory found clean, by pointer: the same export again in the
    /// same generation (a free, which may change what the pointer is, moves it) is clean again
    /// without asking, and its home, once a record wanted it, known without asking.
    static LAST_CLEAN_GET: LastClean<u64, Option<Home>> = LastClean::new(); "sharecheck_tls_ipc_clean_get"
}

crate::fast_thread_local! {
    /// The same for HIP (issue 24: HIP's pointer facts are not cached).
    static LAST_CLEAN_GET_HIP: LastClean<u64, Option<Home>> = LastClean::new(); "sharecheck_tls_ipc_clean_get_hip"
}

/// The home of exported `ptr` for its record: remembered with the export's clean verdict, or
/// found (and then remembered with it).
fn home_of<Q: crate::tls::Key<Value = LastClean<u64, Option<Home>>>>(
    memo: &'static crate::tls::Local<Q>,
    ptr: u64,
    find: impl FnOnce() -> Home,
) -> Home {
    // Read before the facts the home rests on.
    let generation = crate::engine::generation();
    let remembered = memo.recall(ptr, generation);
    if let Some(Some(home)) = remembered {
        return home;
    }
    let home = find();
    if remembered.is_some() {
        memo.keep(ptr, generation, Some(home));
    }
    home
}

/// Whether an export's record may leave its place out: this thread exported the same pointer
/// before in the same generation (no free since, so the same memory and handle) and that
/// export's record has the place (its home is remembered with the clean verdict). The report
/// gives the later exports of a handle the place of the first (`Timeline::finish`; issue 24:
/// the place cost a traced export 40 to 70 ns on R580).
#[derive(Clone, Copy)]
pub struct Placed(bool);

/// An export of `ptr` this thread found clean in `generation` (the first step of both exports'
/// checks, and the CUDA export's quick path): clean again, and whether its home is remembered.
#[inline(always)]
fn remembered_export<Q: crate::tls::Key<Value = LastClean<u64, Option<Home>>>>(
    memo: &'static crate::tls::Local<Q>,
    ptr: u64,
    generation: u64,
) -> Option<Placed> {
    memo.recall(ptr, generation)
        .map(|home| Placed(home.is_some()))
}

/// Writes `home` into the call's place.
fn place_at(cx: &mut Cx, home: Home) {
    let place = cx.place();
    place.context = home.context;
    place.device = home.device;
    place.uuid = home.uuid;
}

impl Check<args::cuIpcGetMemHandle> for GetCuda {
    /// Whether this thread's earlier export of the pointer, in the same generation, recorded the
    /// memory's home ([`Placed`]).
    type Plan = Placed;
    #[link_section = ".text.hot.sharecheck"]
    fn before(&self, a: &args::cuIpcGetMemHandle, cx: &mut Cx) -> Placed {
        let ptr = a.dptr.0;
        // Read before any fact the verdict rests on.
        let generation = crate::engine::generation();
        if let Some(placed) = remembered_export(&LAST_CLEAN_GET, ptr, generation) {
            return placed;
        }
        let clean_before = cx.is_clean();
        if not_exportable(cx, ptr) {
            return Placed(false);
        }
        let facts = cx.facts;
        not_base(cx, &cuda::GET_NOT_ALLOCATION_BASE, "dptr", ptr, |fresh| {
            facts.allocation_range(ptr, fresh)
        });
        if clean_before && cx.is_clean() {
            LAST_CLEAN_GET.keep(ptr, generation, None);
        }
        Placed(false)
    }
    #[link_section = ".text.hot.sharecheck"]
    fn after(&self, a: &args::cuIpcGetMemHandle, placed: Placed, ret: c_int, cx: &mut Cx) {
        if let Some(handle) = a.pHandle.written_in_place(Outcome::Returned(ret)) {
            cx.states.family::<IpcState>().exported(&handle.reserved);
            // The memory's context and device, for the report (so only when there is a record,
            // and not again where an earlier export of the same handle has it): destroying the
            // context frees the memory; an importer's device must reach the device.
            if crate::trace::enabled() && !placed.0 {
                let facts = cx.facts;
                let mut first = false;
                let home = home_of(&LAST_CLEAN_GET, a.dptr.0, || {
                    first = true;
                    let context = facts.allocation_context(a.dptr.0);
                    let device = context.and_then(|ctx| context_device(facts, ctx));
                    Home {
                        context,
                        device,
                        uuid: device.and_then(|dev| facts.device_uuid(dev)),
                    }
                });
                place_at(cx, home);
                if first {
                    // The report may name this export, and the memory's free.
                    cx.keep_stack();
                    let (ipc, watch) = cx.states.family_watched::<IpcState>();
                    ipc.exported_memory(a.dptr.0, watch);
                }
            }
        }
    }
    const QUICK: bool = true;
    /// Clean: this thread exported the same pointer clean in this generation, as `before`'s
    /// first step finds. Recorded, only where that export's record has the memory's home: the
    /// first record of a pointer wants it (and its stack), which the full path gives.
    #[inline(always)]
    fn quick(&self, a: &args::cuIpcGetMemHandle, q: &Quick) -> Option<Placed> {
        let generation = crate::engine::generation();
        remembered_export(&LAST_CLEAN_GET, a.dptr.0, generation).filter(|p| p.0 || !q.recorded)
    }
    /// As `after` on a placed or unrecorded call: the handle the driver wrote is exported.
    #[inline(always)]
    fn quick_after(&self, a: &args::cuIpcGetMemHandle, _: Placed, outcome: Outcome, q: &Quick) {
        if let Some(handle) = a.pHandle.written_in_place(outcome) {
            q.states.family::<IpcState>().exported(&handle.reserved);
        }
    }
}

/// The flags check of both exports of `cuIpcOpenMemHandle` (v1 and v2).
fn open_flags(cx: &mut Cx, flags: u32) {
    const LAZY_ENABLE_PEER_ACCESS: u32 = 1;
    if flags != LAZY_ENABLE_PEER_ACCESS {
        cx.flag(&cuda::OPEN_FLAGS, || {
            format!("Flags is {flags:#x}; it must be CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (0x1)")
        });
    }
}

/// Both exports of `cuIpcOpenMemHandle` (the legacy one and `_v2`) are checked alike. The plan is
/// where the handle was already open in this process, and how often.
macro_rules! open_cuda {
    ($($function:ident),*) => {$(
        impl Check<args::$function> for OpenCuda {
            type Plan = Option<(u64, u32)>;
            fn before(&self, a: &args::$function, cx: &mut Cx) -> Self::Plan {
                // Where the open maps, for its record (the report's context and device rules).
                cx.place().context = current_context(cx);
                record_reach(cx);
                open_flags(cx, a.Flags.0);
                let exported = cx.states.family::<IpcState>().was_exported(&a.handle.reserved);
                same_process(cx, &cuda::OPEN_SAME_PROCESS, exported);
                second_context(cx, &a.handle.reserved);
                cx.states.family::<IpcState>().open_at(&a.handle.reserved)
            }
            fn after(&self, a: &args::$function, before: Self::Plan, ret: c_int, cx: &mut Cx) {
                if let Some(ptr) = a.pdptr.written(Outcome::Returned(ret)) {
                    let ctx = cx.place().context.unwrap_or(0);
                    cx.states.family::<IpcState>().mapped(&a.handle.reserved, ptr.0, ctx);
                }
                opened_again(cx, before, ret);
            }
        }
    )*};
}

/// A context destroyed with mappings opened in it still open (after the destroy succeeded).
impl Check<args::cuCtxDestroy_v2> for ContextDestroyed {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuCtxDestroy_v2, _: &mut Cx) {}
    fn after(&self, a: &args::cuCtxDestroy_v2, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        let left = cx
            .states
            .family::<IpcState>()
            .context_destroyed(a.ctx.addr());
        if left.is_empty() {
            return;
        }
        cx.shown(&cuda::CONTEXT_DESTROYED_WHILE_OPEN, || {
            let open: Vec<String> = left
                .iter()
                .map(|&(ptr, n)| format!("{} ({n} open(s))", hex(ptr)))
                .collect();
            format!(
                "context {} was destroyed with memory cuIpcOpenMemHandle opened in it still \
                 open: {}",
                hex(a.ctx.addr()),
                open.join(", ")
            )
        });
    }
}

/// The device of context `ctx` (cached).
fn context_device(facts: &dyn crate::engine::facts::Facts, ctx: u64) -> Option<i32> {
    facts
        .context_device(CUcontext(ctx as usize as *mut std::ffi::c_void), false)
        .and_then(Result::ok)
}

/// Records the device of the place's context, its UUID and the UUIDs of the devices it cannot
/// access (`cuDeviceCanAccessPeer` 0).
fn record_reach(cx: &mut Cx) {
    let facts = cx.facts;
    let Some(dev) = cx
        .place()
        .context
        .and_then(|ctx| context_device(facts, ctx))
    else {
        return;
    };
    let place = cx.place();
    place.device = Some(dev);
    place.uuid = facts.device_uuid(dev);
    let count = facts.device_count().unwrap_or(0);
    place.unreachable = (0..count)
        .filter(|&d| d != dev && facts.can_access_peer(dev, d) == Some(false))
        .filter_map(|d| facts.device_uuid(d))
        .collect();
}

/// Records the current HIP device, its UUID and those of the devices it cannot access.
fn hip_record_device(cx: &mut Cx) {
    let facts = cx.facts;
    let mut hip = HipSession::begin(facts);
    let Some(dev) = hip.current_device() else {
        return;
    };
    let place = cx.place();
    place.device = Some(dev);
    place.uuid = hip.device_uuid(dev);
    let count = hip.device_count().unwrap_or(0);
    let mut unreachable = Vec::new();
    for d in (0..count).filter(|&d| d != dev) {
        if hip.can_access_peer(dev, d) == Some(false) {
            unreachable.extend(hip.device_uuid(d));
        }
    }
    place.unreachable = unreachable;
}

/// The current context's address, when the driver can say and one is current.
fn current_context(cx: &Cx) -> Option<u64> {
    cx.facts
        .current_context()
        .flatten()
        .map(sharecheck_core::ffi::CUcontext::addr)
}

/// Before an open: a handle this process has open in another context of the same device
/// (tracked state: dropped if the driver opens it after all).
fn second_context(cx: &mut Cx, handle: &[u8; 64]) {
    let Some((ptr, _, first)) = cx.states.family::<IpcState>().open_in(handle) else {
        return;
    };
    let Some(here) = current_context(cx).filter(|&c| first != 0 && c != first) else {
        return;
    };
    let device = |ctx: u64| {
        cx.facts
            .context_device(CUcontext(ctx as usize as *mut std::ffi::c_void), true)
            .and_then(Result::ok)
    };
    let (Some(dev), Some(first_dev)) = (device(here), device(first)) else {
        return;
    };
    if dev == first_dev {
        cx.tracked(&cuda::OPEN_SECOND_CONTEXT, || {
            format!(
                "the handle is open in this process in context {} of device {dev} (at {}); \
                 context {} of the same device cannot open that process's handles",
                hex(first),
                hex(ptr),
                hex(here)
            )
        });
    }
}

/// After an open of a handle already open here (`before`: where, and how often) that the driver
/// refused as already mapped (the legacy export does not count opens): why it failed.
fn opened_again(cx: &mut Cx, before: Option<(u64, u32)>, ret: c_int) {
    use sharecheck_core::codes::ALREADY_MAPPED;
    if let (Some((ptr, count)), ALREADY_MAPPED) = (before, ret) {
        cx.shown(&cuda::OPENED_AGAIN, || {
            format!(
                "the handle is already open here at {} ({count} open(s)); the legacy \
                 cuIpcOpenMemHandle does not count opens and answered CUDA_ERROR_ALREADY_MAPPED \
                 (208): use that pointer, or cuIpcOpenMemHandle_v2",
                hex(ptr)
            )
        });
    }
}

open_cuda!(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2);

impl Check<args::cuIpcCloseMemHandle> for CloseCuda {
    type Plan = ();
    fn before(&self, a: &args::cuIpcCloseMemHandle, cx: &mut Cx) {
        let ptr = a.dptr.0;
        let facts = cx.facts;
        not_opened(
            cx,
            &cuda::CLOSE_NOT_OPENED,
            "cuIpcOpenMemHandle",
            ptr,
            || facts.allocation_range(ptr, false),
        );
    }
    fn after(&self, a: &args::cuIpcCloseMemHandle, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            cx.states.family::<IpcState>().closed(a.dptr.0);
        }
    }
}

impl Check<args::hipIpcGetMemHandle> for GetHip {
    type Plan = Placed;
    fn before(&self, a: &args::hipIpcGetMemHandle, cx: &mut Cx) -> Placed {
        let ptr = a.devPtr.addr();
        // Read before any fact the verdict rests on.
        let generation = crate::engine::generation();
        if let Some(placed) = remembered_export(&LAST_CLEAN_GET_HIP, ptr, generation) {
            return placed;
        }
        let clean_before = cx.is_clean();
        let facts = cx.facts;
        // The runtime has one answer per pointer, not a cache: asked once.
        let (plain, range) = {
            let mut hip = HipSession::begin(facts);
            (hip.is_plain_device_memory(ptr), hip.allocation_range(ptr))
        };
        if plain == Some(false) {
            cx.flag(&hip::GET_NOT_EXPORTABLE, || {
                format!(
                    "devPtr {} is managed or host memory (hipPointerGetAttributes), not \
                     hipMalloc memory",
                    hex(ptr)
                )
            });
            return Placed(false);
        }
        not_base(cx, &hip::GET_NOT_ALLOCATION_BASE, "devPtr", ptr, |_| range);
        if clean_before && cx.is_clean() {
            LAST_CLEAN_GET_HIP.keep(ptr, generation, None);
        }
        Placed(false)
    }
    fn after(&self, a: &args::hipIpcGetMemHandle, placed: Placed, ret: c_int, cx: &mut Cx) {
        let Some(handle) = a.handle.written_in_place(Outcome::Returned(ret)) else {
            return;
        };
        cx.states.family::<IpcState>().exported(&handle.reserved);
        // The memory's device, for the report (so only when there is a record, and not again
        // where an earlier export of the same handle has it): an importer's device must reach
        // it.
        if !crate::trace::enabled() || placed.0 {
            return;
        }
        let ptr = a.devPtr.addr();
        let facts = cx.facts;
        let mut first = false;
        let home = home_of(&LAST_CLEAN_GET_HIP, ptr, || {
            first = true;
            let mut hip = HipSession::begin(facts);
            let device = hip.device_memory_owner(ptr);
            Home {
                context: None,
                device,
                uuid: device.and_then(|dev| hip.device_uuid(dev)),
            }
        });
        place_at(cx, home);
        if first {
            // The report may name this export, and the memory's free.
            cx.keep_stack();
            let (ipc, watch) = cx.states.family_watched::<IpcState>();
            ipc.exported_memory(ptr, watch);
        }
    }
}

/// The first HIP_VERSION of ROCm 6, where hipIpcMemLazyEnablePeerAccess became 0x1.
const ROCM_6: i32 = 60_000_000;

/// hipIpcMemLazyEnablePeerAccess is 0 before ROCm 6 and 0x1 from it: judged against the running
/// runtime's version (`hipRuntimeGetVersion`), or, where it cannot say, only a value that is
/// neither.
fn open_flags_hip(cx: &mut Cx, flags: u32) {
    let version = if flags <= 1 {
        HipSession::begin(cx.facts).runtime_version()
    } else {
        None
    };
    let lazy = version.map(|v| u32::from(v >= ROCM_6));
    if lazy.map_or(flags > 1, |lazy| flags != lazy) {
        cx.flag(&hip::OPEN_FLAGS, || match (version, lazy) {
            (Some(v), Some(lazy)) => format!(
                "flags is {flags:#x}; this runtime (hipRuntimeGetVersion {v}, HIP {}.{}) defines \
                 hipIpcMemLazyEnablePeerAccess as {lazy:#x}",
                v / 10_000_000,
                v / 100_000 % 100
            ),
            _ => format!(
                "flags is {flags:#x}; hipIpcMemLazyEnablePeerAccess is 0 before ROCm 6 and 0x1 \
                 from it"
            ),
        });
    }
}

impl Check<args::hipIpcOpenMemHandle> for OpenHip {
    type Plan = ();
    fn before(&self, a: &args::hipIpcOpenMemHandle, cx: &mut Cx) {
        // Where the open maps, for its record (the report's device rule).
        hip_record_device(cx);
        open_flags_hip(cx, a.flags.0);
        let exported = cx
            .states
            .family::<IpcState>()
            .was_exported(&a.handle.reserved);
        same_process(cx, &hip::OPEN_SAME_PROCESS, exported);
    }
    fn after(&self, a: &args::hipIpcOpenMemHandle, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(ptr) = a.devPtr.written(Outcome::Returned(ret)) {
            cx.states
                .family::<IpcState>()
                .opened(ptr.0 as usize as u64, true);
        }
    }
}

impl Check<args::hipIpcCloseMemHandle> for CloseHip {
    type Plan = ();
    fn before(&self, a: &args::hipIpcCloseMemHandle, cx: &mut Cx) {
        let ptr = a.devPtr.addr();
        let facts = cx.facts;
        not_opened(
            cx,
            &hip::CLOSE_NOT_OPENED,
            "hipIpcOpenMemHandle",
            ptr,
            || HipSession::begin(facts).allocation_range(ptr),
        );
    }
    fn after(&self, a: &args::hipIpcCloseMemHandle, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            cx.states.family::<IpcState>().closed(a.devPtr.addr());
        }
    }
}

/// A free of memory this process exported (while tracing) keeps its stack: the report may name
/// it (`cuMemFree.ipc-memory-open-elsewhere`, `hipFree.ipc-memory-open-elsewhere`).
macro_rules! exported_freed {
    ($($function:ident (|$a:ident| $ptr:expr)),*) => {$(
        impl Check<args::$function> for ExportedFreed {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            #[inline(always)]
            fn after(&self, $a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if ret == 0 && exported_freed(cx.states, $ptr) {
                    cx.keep_stack();
                }
            }
            /// Nothing exported while tracing: no free to keep a stack for.
            #[inline(always)]
            fn idle(&self, states: &crate::engine::state::States) -> bool {
                states.watch::<IpcState>().load(Relaxed) == 0
            }
            const QUICK: bool = true;
            /// Declined where the call is recorded and may free exported memory, whose free
            /// keeps its stack.
            #[inline(always)]
            fn quick(&self, $a: &args::$function, q: &Quick) -> Option<()> {
                let watch = q.states.watch::<IpcState>().load(Relaxed);
                (!q.recorded || !may_hold(watch, $ptr)).then_some(())
            }
            #[inline(always)]
            fn quick_after(&self, $a: &args::$function, _: (), outcome: Outcome, q: &Quick) {
                if outcome == Outcome::Returned(0) {
                    exported_freed(q.states, $ptr);
                }
            }
        }
    )*};
}

exported_freed!(cuMemFree_v2(|a| a.dptr.0), hipFree(|a| a.ptr.addr()));

/// [`ExportedFreed`]'s step once the driver freed `ptr`: whether this process exported it while
/// tracing (its free keeps a stack). Most frees are of memory never exported: the watch tells
/// them apart without reaching the family's state.
#[inline(always)]
fn exported_freed(states: &crate::engine::state::States, ptr: u64) -> bool {
    if !may_hold(states.watch::<IpcState>().load(Relaxed), ptr) {
        return false;
    }
    let (ipc, watch) = states.family_watched::<IpcState>();
    ipc.freed_exported(ptr, watch)
}
