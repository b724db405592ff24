//! The stream-attach family: checks for `cuStreamAttachMemAsync` (both exports) and
//! `hipStreamAttachMemAsync`. Catalogue: `sharecheck_core::rules::attach`.
//!
//! From one call's arguments and the driver's facts: `SINGLE` on the NULL stream (whose spelling
//! depends on the export), flags that are not exactly one attach flag, and for CUDA the memory:
//! not managed (device or page-locked memory), a pointer inside a managed allocation, a length
//! that is neither 0 nor the allocation's size, pageable memory. Tracked: what each accepted
//! attach promised, until the memory is attached again, freed, or its stream destroyed; a
//! destroyed stream's memory reverts (info), and on a device without concurrent managed access
//! an asynchronous copy or memset (observed) on memory attached `SINGLE` to another stream, or
//! attached `HOST`, breaks the promise.

#[cfg(test)]
mod tests;

use crate::engine::facts::{
    HipSession, MemoryKind, ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
};
use crate::engine::state::{may_hold, pointer_bit, rewatch, FamilyState, Lifetime, States};
use crate::engine::{hex, Check, Cx, LastClean, Remember};
use parking_lot::Mutex;
use sharecheck_core::functions::args;
use sharecheck_core::rules::attach::{cuda, hip, lifetime};
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};

pub struct AttachCuda;
pub struct AccessCuda;
pub struct StreamCreated;
pub struct AttachHip;
pub struct StreamDestroyed;
pub struct MemoryFreed;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const ATTACH_CUDA: super::AttachCuda = super::AttachCuda;
    pub const ACCESS_CUDA: super::AccessCuda = super::AccessCuda;
    pub const STREAM_CREATED: super::StreamCreated = super::StreamCreated;
    pub const ATTACH_HIP: super::AttachHip = super::AttachHip;
    pub const STREAM_DESTROYED: super::StreamDestroyed = super::StreamDestroyed;
    pub const MEMORY_FREED: super::MemoryFreed = super::MemoryFreed;
}

/// Which stream an attach or a copy names: the legacy NULL stream, a thread's per-thread stream
/// (`CU_STREAM_PER_THREAD`, or 0 through a `_ptsz` export: the calling thread's), or a stream
/// the program made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKey {
    Legacy,
    PerThread(i32),
    Made(u64),
}

impl StreamKey {
    fn of(stream: u64, ptsz: bool) -> StreamKey {
        match stream {
            0 if !ptsz => StreamKey::Legacy,
            STREAM_LEGACY => StreamKey::Legacy,
            0 | STREAM_PER_THREAD => StreamKey::PerThread(crate::trace::tid()),
            handle => StreamKey::Made(handle),
        }
    }
}

/// An accepted attach of managed memory that promised something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// The attach's stream, as passed (a destroy names it so).
    stream: u64,
    key: StreamKey,
    flags: u32,
    /// The allocation's size, when the driver knew it.
    size: Option<u64>,
    /// `SINGLE`: whether the stream's device reports no concurrent managed access (the promise
    /// then holds on the device).
    exclusive: bool,
}

/// What the family tracks: the last attach the driver accepted of each allocation, by its start
/// (a later attach replaces it; its free, or for `SINGLE` the stream's destroy, ends it), and the
/// streams created non-blocking. A forked child starts empty, as every family does.
#[derive(Default)]
pub struct AttachState {
    /// The family's memory watch (`States::watch`) holds the [`pointer_bit`]s of these
    /// allocations ([`rewatch`]).
    attached: Mutex<BTreeMap<u64, Attached>>,
    non_blocking: Mutex<std::collections::HashSet<u64>>,
    /// How many attachments can concern stream work (`SINGLE` on a device without concurrent
    /// managed access, and `HOST`): when none, a copy is not looked at.
    watched: AtomicUsize,
}

impl FamilyState for AttachState {
    const SLOT: usize = 2;
    fn forget(&self, _: Lifetime) {}
    const FORGETS_FREED_MEMORY: bool = false;
}

impl AttachState {
    /// `dptr` was attached with `flags` to `stream`; whether that changed what is tracked.
    /// `watch`: the family's memory watch.
    fn attached(&self, dptr: u64, entry: Attached, watch: &AtomicU64) -> bool {
        let mut attached = self.attached.lock();
        let old = attached.insert(dptr, entry);
        watch.fetch_or(pointer_bit(dptr), Relaxed);
        drop(attached);
        self.count(old, -1);
        self.count(Some(entry), 1);
        let changed = old != Some(entry);
        if changed {
            // An attach remembered clean may rest on what changed.
            crate::engine::moved_on();
        }
        changed
    }

    /// The last accepted attach of the allocation that starts at `dptr`.
    fn last_attach(&self, dptr: u64) -> Option<Attached> {
        self.attached.lock().get(&dptr).copied()
    }

    /// A stream was created (`non_blocking`: with CU_STREAM_NON_BLOCKING), or destroyed (false).
    fn stream_flags(&self, stream: u64, non_blocking: bool) {
        let mut set = self.non_blocking.lock();
        let changed = if non_blocking {
            set.insert(stream)
        } else {
            set.remove(&stream)
        };
        drop(set);
        if changed {
            crate::engine::moved_on();
        }
    }

    fn is_non_blocking(&self, stream: u64) -> bool {
        self.non_blocking.lock().contains(&stream)
    }

    fn count(&self, entry: Option<Attached>, by: isize) {
        if entry.is_some_and(watched) {
            if by > 0 {
                self.watched.fetch_add(1, Relaxed);
            } else {
                self.watched.fetch_sub(1, Relaxed);
            }
        }
    }

    /// The memory attached singly to `stream`, which is gone now (forgotten).
    fn stream_destroyed(&self, stream: u64, watch: &AtomicU64) -> Vec<u64> {
        let mut attached = self.attached.lock();
        let gone: Vec<u64> = attached
            .iter()
            .filter(|(_, a)| a.flags == ATTACH_SINGLE && a.stream == stream)
            .map(|(&d, _)| d)
            .collect();
        for d in &gone {
            self.count(attached.remove(d), -1);
        }
        rewatch(watch, attached.keys().copied());
        drop(attached);
        crate::engine::moved_on();
        gone
    }

    /// `dptr`, which the memory watch `watch` may hold, was freed.
    #[cold]
    #[inline(never)]
    fn forget_freed(&self, dptr: u64, watch: &AtomicU64) {
        let mut attached = self.attached.lock();
        let old = attached.remove(&dptr);
        rewatch(watch, attached.keys().copied());
        drop(attached);
        self.count(old, -1);
        if old.is_some() {
            crate::engine::moved_on();
        }
    }

    /// The attachment of the allocation holding `ptr`, if one can concern stream work.
    fn watching(&self, ptr: u64) -> Option<(u64, Attached)> {
        if self.watched.load(Relaxed) == 0 || ptr == 0 {
            return None;
        }
        let attached = self.attached.lock();
        let (&base, &a) = attached.range(..=ptr).next_back()?;
        (watched(a) && a.size.is_some_and(|size| ptr - base < size)).then_some((base, a))
    }
}

/// Whether an attachment can concern stream work.
fn watched(a: Attached) -> bool {
    (a.flags == ATTACH_SINGLE && a.exclusive) || a.flags == ATTACH_HOST
}

const ATTACH_GLOBAL: u32 = 0x1;
const ATTACH_HOST: u32 = 0x2;
const ATTACH_SINGLE: u32 = 0x4;
/// `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`.
const STREAM_LEGACY: u64 = 0x1;
const STREAM_PER_THREAD: u64 = 0x2;

/// Flags that are not exactly one attach flag.
fn flags_not_one(cx: &mut Cx, rule: &'static sharecheck_core::rules::Rule, flags: u32) {
    if ![ATTACH_GLOBAL, ATTACH_HOST, ATTACH_SINGLE].contains(&flags) {
        cx.flag(rule, || {
            format!(
                "flags is {flags:#x}; it must be exactly one of GLOBAL (0x1), HOST (0x2) and \
                 SINGLE (0x4)"
            )
        });
    }
}

/// The CUDA checks of one call; `ptsz`: through the `_ptsz` export, where stream 0 is the
/// calling thread's per-thread stream.
fn attach_cuda(cx: &mut Cx, stream: u64, dptr: u64, length: u64, flags: u32, ptsz: bool) {
    let null_stream = match stream {
        0 if !ptsz => Some("stream 0 through the legacy export is the NULL stream"),
        STREAM_LEGACY => Some("CU_STREAM_LEGACY is the NULL stream"),
        _ => None,
    };
    if let (ATTACH_SINGLE, Some(why)) = (flags, null_stream) {
        cx.flag(&cuda::SINGLE_ON_NULL_STREAM, || {
            format!("CU_MEM_ATTACH_SINGLE on the NULL stream: {why}, not a specific stream")
        });
    }
    flags_not_one(cx, &cuda::FLAGS_NOT_ONE, flags);
    memory(cx, stream, dptr, length);
}

/// Whether the page holding `ptr` is mapped in this process (`mincore`: asks the kernel, reads
/// nothing through the pointer).
fn host_mapped(ptr: u64) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as u64,
        _ => return false,
    };
    let start = ptr & !(page - 1);
    if start == 0 {
        return false;
    }
    let mut resident = 0u8;
    // SAFETY: mincore reads no memory at `start`; it writes one byte (one page) into `resident`.
    unsafe {
        libc::mincore(
            start as usize as *mut libc::c_void,
            page as usize,
            &mut resident,
        ) == 0
    }
}

/// The device of the stream an attach is enqueued in: the current context's for the special
/// handles (and 0), the stream's context's otherwise.
fn stream_device(cx: &Cx, stream: u64) -> Option<i32> {
    let facts = cx.facts;
    if stream <= 2 {
        return facts.current_device();
    }
    let handle = sharecheck_core::ffi::CUstream(stream as usize as *mut std::ffi::c_void);
    let ctx = facts.stream_context(handle, false)?.ok()?;
    facts.context_device(ctx, false)?.ok()
}

/// The memory of a CUDA attach: managed, at its allocation's start, with length 0 or its size
/// (decided from the driver's pointer attributes and the allocation's range, cached on the clean
/// path and asked afresh before a finding).
/// Memory the driver does not know may be system-allocated pageable memory: nothing is decided.
fn memory(cx: &mut Cx, stream: u64, dptr: u64, length: u64) {
    // Cached on the clean path (managed memory), asked afresh before a finding.
    let kind = cx
        .facts
        .memory_kind_confirmed(dptr, |k| k == Some(MemoryKind::Managed));
    let what = match kind {
        None => return pageable(cx, stream, dptr, length),
        Some(MemoryKind::Managed) => None,
        Some(MemoryKind::Device) => Some("device memory (cuMemAlloc)"),
        Some(MemoryKind::Pool) => Some("stream-ordered pool memory (cuMemAllocAsync)"),
        Some(MemoryKind::Host) => Some("page-locked host memory"),
        Some(MemoryKind::Other) => Some("device memory (cuMemCreate, or an IPC mapping)"),
    };
    if let Some(what) = what {
        cx.flag(&cuda::MEMORY_NOT_MANAGED, || {
            format!(
                "dptr {} is {what}, not managed or pageable memory: it has no stream \
                 association to change",
                hex(dptr)
            )
        });
        return;
    }
    // The range as cached (kept until memory is freed); asked afresh before a finding rests on
    // it.
    let Some(cached) = cx.facts.allocation_range(dptr, false) else {
        return;
    };
    let fits = |(base, size): (u64, u64)| dptr == base && (length == 0 || length == size);
    let (base, size) = if fits(cached) {
        cached
    } else {
        match cx.facts.allocation_range(dptr, true) {
            Some(fresh) => fresh,
            None => return,
        }
    };
    if dptr != base {
        cx.flag(&cuda::NOT_ALLOCATION_START, || {
            format!(
                "dptr {} is {} byte(s) into the managed allocation at {} ({size} bytes): an \
                 attach covers a whole allocation, from its start",
                hex(dptr),
                dptr - base,
                hex(base)
            )
        });
    } else if length != 0 && length != size {
        cx.flag(&cuda::PARTIAL_LENGTH, || {
            format!(
                "length is {length}; the managed allocation at {} is {size} bytes: pass 0 or \
                 {size}",
                hex(base)
            )
        });
    }
}

/// Memory the driver does not know, mapped in the process: system-allocated pageable memory,
/// which needs a length and a device with pageable memory access.
fn pageable(cx: &mut Cx, stream: u64, dptr: u64, length: u64) {
    if !host_mapped(dptr) {
        return;
    }
    if length == 0 {
        cx.flag(&cuda::PAGEABLE_LENGTH_ZERO, || {
            format!(
                "dptr {} is pageable host memory (the driver does not know it) and length is 0",
                hex(dptr)
            )
        });
    }
    let Some(dev) = stream_device(cx, stream) else {
        return;
    };
    if cx.facts.attribute(dev, ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) == Some(0) {
        cx.flag(&cuda::PAGEABLE_WITHOUT_ACCESS, || {
            format!(
                "dptr {} is pageable host memory and the stream's device {dev} reports \
                 CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS 0",
                hex(dptr)
            )
        });
    }
}

macro_rules! attach_cuda_check {
    ($($function:ident: $ptsz:literal),*) => {$(
        impl Check<args::$function> for AttachCuda {
            type Plan = AttachPlan;
            #[link_section = ".text.hot.sharecheck"]
            fn before(&self, a: &args::$function, cx: &mut Cx) -> AttachPlan {
                let generation = crate::engine::generation();
                let this = CleanAttach {
                    stream: a.hStream.addr(),
                    dptr: a.dptr.0,
                    length: a.length.0 as u64,
                    flags: a.flags.0,
                    ptsz: $ptsz,
                };
                if LAST_CLEAN.recall(this, generation).is_some() {
                    // This thread's last attach, found clean and already tracked, and nothing
                    // it rested on has moved since.
                    return AttachPlan::Remembered;
                }
                let clean_before = cx.is_clean();
                attach_cuda(cx, this.stream, this.dptr, this.length, this.flags, $ptsz);
                let first = unordered_candidate(cx, this.stream, this.dptr, $ptsz);
                AttachPlan::Checked {
                    first,
                    clean: (clean_before && cx.is_clean()).then_some((this, generation)),
                }
            }
            #[link_section = ".text.hot.sharecheck"]
            fn after(&self, a: &args::$function, plan: AttachPlan, ret: c_int, cx: &mut Cx) {
                let AttachPlan::Checked { first, clean } = plan else {
                    return;
                };
                if ret == 0 {
                    if let Some(first) = first {
                        unordered(cx, a.hStream.addr(), a.dptr.0, first);
                    }
                    let changed = accepted(cx, a.hStream.addr(), a.dptr.0, a.flags.0, $ptsz);
                    // Remembered once an attach changes nothing: the same again, clean, in the
                    // same generation (its own write moves it).
                    if let Some((this, generation)) = clean.filter(|&(_, generation)| {
                        !changed
                            && first.is_none()
                            && cx.is_clean()
                            && crate::engine::generation() == generation
                    }) {
                        LAST_CLEAN.keep(this, generation, ());
                    }
                }
            }
        }
    )*};
}

/// What an attach's checks carry to after the call.
pub enum AttachPlan {
    /// Remembered clean ([`LAST_CLEAN`]): nothing to do.
    Remembered,
    /// Checked: the allocation's last attach when this one may not be ordered after it, and the
    /// attach itself and the generation it was checked in when its checks found nothing.
    Checked {
        first: Option<Attached>,
        clean: Option<(CleanAttach, u64)>,
    },
}

/// An attach the checks found clean.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CleanAttach {
    stream: u64,
    dptr: u64,
    length: u64,
    flags: u32,
    ptsz: bool,
}

crate::fast_thread_local! {
    /// This thread's last clean attach that changed nothing tracked: the same attach again, in
    /// the same generation, needs none of its checks' work (issue 24: on R580 their cache lines
    /// cost more than their instructions).
    static LAST_CLEAN: LastClean<CleanAttach> = LastClean::new(); "sharecheck_tls_attach_clean"
}

/// Before an attach of `dptr` to `stream`: the allocation's last attach, when it went to another
/// stream and nothing can order this attach after it: this stream was created non-blocking (no
/// implicit order with the NULL stream) and has nothing pending (no work, no event wait).
fn unordered_candidate(cx: &mut Cx, stream: u64, dptr: u64, ptsz: bool) -> Option<Attached> {
    let first = cx.states.family::<AttachState>().last_attach(dptr)?;
    let key = StreamKey::of(stream, ptsz);
    if first.key == key
        || !matches!(key, StreamKey::Made(_))
        || !cx.states.family::<AttachState>().is_non_blocking(stream)
    {
        return None;
    }
    (cx.facts.stream_busy(stream) == Some(false)).then_some(first)
}

/// After the attach was accepted: if the first attach's stream still has work pending, its
/// attach may take effect after this one and undo it.
fn unordered(cx: &mut Cx, stream: u64, dptr: u64, first: Attached) {
    let query = match first.key {
        StreamKey::Made(handle) => handle,
        StreamKey::Legacy => first.stream,
        // The calling thread's own per-thread stream; another thread's cannot be asked.
        StreamKey::PerThread(tid) if tid == crate::trace::tid() => STREAM_PER_THREAD,
        StreamKey::PerThread(_) => return,
    };
    if cx.facts.stream_busy(query) != Some(true) {
        return;
    }
    cx.shown(&cuda::ATTACHES_NOT_ORDERED, || {
        format!(
            "{} was attached to stream {} before, which still has work pending; this attach to \
             stream {} (non-blocking, nothing pending) is not ordered after it: the first may \
             take effect last",
            hex(dptr),
            hex(first.stream),
            hex(stream)
        )
    });
}

/// A stream created non-blocking cannot be ordered by the NULL stream's work: what the ordering
/// rule needs to know.
macro_rules! stream_created_check {
    ($($function:ident: $flags:ident),*) => {$(
        impl Check<args::$function> for StreamCreated {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if let Some(stream) = a.phStream.written(sharecheck_core::ffi::Outcome::Returned(ret)) {
                    cx.states.family::<AttachState>().stream_flags(stream.addr(), a.$flags.0 & 0x1 != 0);
                }
            }
        }
    )*};
}

stream_created_check!(cuStreamCreate: Flags, cuStreamCreateWithPriority: flags);

/// An attach the driver accepted: what it promised, tracked; whether that changed anything.
fn accepted(cx: &mut Cx, stream: u64, dptr: u64, flags: u32, ptsz: bool) -> bool {
    let key = StreamKey::of(stream, ptsz);
    let exclusive = flags == ATTACH_SINGLE
        && matches!(key, StreamKey::Made(_) | StreamKey::PerThread(_))
        && stream_device(cx, stream).is_some_and(|dev| {
            cx.facts.attribute(dev, ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == Some(0)
        });
    let size = cx
        .facts
        .allocation_range(dptr, false)
        .and_then(|(base, size)| (base == dptr).then_some(size));
    let (state, watch) = cx.states.family_watched::<AttachState>();
    state.attached(
        dptr,
        Attached {
            stream,
            key,
            flags,
            size,
            exclusive,
        },
        watch,
    )
}

/// Stream work on memory (an asynchronous copy or memset on `stream`, `ptsz`: through a `_ptsz`
/// export) that an attach promised elsewhere: memory attached `SINGLE` to another stream of a
/// device without concurrent managed access, or attached `HOST` when the stream's device has
/// none. `pointers`: the memory the work touches.
fn access(cx: &mut Cx, stream: u64, ptsz: bool, pointers: &[u64]) {
    let state = &cx.states.family::<AttachState>();
    let found: Vec<(u64, u64, Attached)> = pointers
        .iter()
        .filter_map(|&p| state.watching(p).map(|(base, a)| (p, base, a)))
        .collect();
    if found.is_empty() {
        return;
    }
    let key = StreamKey::of(stream, ptsz);
    // Decided from tracked attaches, but not withdrawn when the driver succeeds (`Cx::tracked`):
    // the driver checks nothing here ("No error checking is performed"), it always succeeds.
    for (ptr, base, a) in found {
        if a.flags == ATTACH_SINGLE && a.key != key {
            cx.flag(&cuda::SINGLE_ACCESSED_FROM_ANOTHER_STREAM, || {
                format!(
                    "{} is in managed memory at {} attached CU_MEM_ATTACH_SINGLE to stream {} \
                     of a device without concurrent managed access; this work is on stream {}",
                    hex(ptr),
                    hex(base),
                    hex(a.stream),
                    hex(stream)
                )
            });
        } else if a.flags == ATTACH_HOST {
            let Some(dev) = stream_device(cx, stream) else {
                continue;
            };
            if cx.facts.attribute(dev, ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == Some(0) {
                cx.flag(&cuda::HOST_ACCESSED_ON_DEVICE, || {
                    format!(
                        "{} is in managed memory at {} attached CU_MEM_ATTACH_HOST; this work \
                         is on stream {} of device {dev}, which reports \
                         CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 0",
                        hex(ptr),
                        hex(base),
                        hex(stream)
                    )
                });
            }
        }
    }
}

/// The address an argument of stream work names.
trait Address {
    fn address(&self) -> u64;
}

impl Address for sharecheck_core::ffi::CUdeviceptr {
    fn address(&self) -> u64 {
        self.0
    }
}

impl Address for sharecheck_core::ffi::ConstVoidPtr {
    fn address(&self) -> u64 {
        self.addr()
    }
}

impl Address for sharecheck_core::ffi::VoidPtr {
    fn address(&self) -> u64 {
        self.addr()
    }
}

macro_rules! access_check {
    ($($function:ident ($($ptr:ident),*): $ptsz:literal),* $(,)?) => {$(
        impl Check<args::$function> for AccessCuda {
            type Plan = ();
            #[inline]
            fn before(&self, a: &args::$function, cx: &mut Cx) {
                if !Check::<args::$function>::idle(self, cx.states) {
                    access(cx, a.hStream.addr(), $ptsz, &[$(Address::address(&a.$ptr)),*]);
                }
            }
            /// Nothing attached singly or to the host: no stream work can break a promise.
            #[inline(always)]
            fn idle(&self, states: &crate::engine::state::States) -> bool {
                states.family::<AttachState>().watched.load(Relaxed) == 0
            }
        }
    )*};
}

access_check!(
    cuMemcpyAsync(dst, src): false,
    cuMemcpyAsync_ptsz(dst, src): true,
    cuMemcpyDtoDAsync_v2(dstDevice, srcDevice): false,
    cuMemcpyDtoDAsync_v2_ptsz(dstDevice, srcDevice): true,
    cuMemcpyHtoDAsync_v2(dstDevice, srcHost): false,
    cuMemcpyHtoDAsync_v2_ptsz(dstDevice, srcHost): true,
    cuMemcpyDtoHAsync_v2(dstHost, srcDevice): false,
    cuMemcpyDtoHAsync_v2_ptsz(dstHost, srcDevice): true,
    cuMemsetD8Async(dstDevice): false,
    cuMemsetD8Async_ptsz(dstDevice): true,
    cuMemsetD32Async(dstDevice): false,
    cuMemsetD32Async_ptsz(dstDevice): true,
);

/// A destroyed stream's singly attached memory reverts to its allocation's default: said once
/// the destroy succeeded, for memory the driver still knows as managed at that start.
impl Check<args::cuStreamDestroy_v2> for StreamDestroyed {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuStreamDestroy_v2, _: &mut Cx) {}
    fn after(&self, a: &args::cuStreamDestroy_v2, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        let stream = a.hStream.addr();
        cx.states
            .family::<AttachState>()
            .stream_flags(stream, false);
        let facts = cx.facts;
        let (state, watch) = cx.states.family_watched::<AttachState>();
        let attached: Vec<u64> = state
            .stream_destroyed(stream, watch)
            .into_iter()
            .filter(|&d| {
                facts.memory_kind(d, true) == Some(MemoryKind::Managed)
                    && facts
                        .allocation_range(d, true)
                        .is_some_and(|(base, _)| base == d)
            })
            .collect();
        if attached.is_empty() {
            return;
        }
        cx.shown(&lifetime::STREAM_DESTROYED_WITH_ATTACHED_MEMORY, || {
            let list: Vec<String> = attached.iter().map(|&d| hex(d)).collect();
            format!(
                "stream {} was destroyed with managed memory attached singly to it ({}): the \
                 association reverts to each allocation's default once the stream's work is done",
                hex(stream),
                list.join(", ")
            )
        });
    }
}

crate::engine::on_success!(MemoryFreed, args::cuMemFree_v2, |a, states, _facts| {
    memory_freed(states, a.dptr.0);
});

/// [`MemoryFreed`]'s step once the driver freed `dptr`. Most frees are of memory never
/// attached: the watch tells them apart without reaching the family's state.
#[inline(always)]
fn memory_freed(states: &States, dptr: u64) {
    if may_hold(states.watch::<AttachState>().load(Relaxed), dptr) {
        let (state, watch) = states.family_watched::<AttachState>();
        state.forget_freed(dptr, watch);
    }
}

attach_cuda_check!(cuStreamAttachMemAsync: false, cuStreamAttachMemAsync_ptsz: true);

crate::fast_thread_local! {
    /// The pointer of this thread's last HIP attach the runtime said is not plain device memory,
    /// and the checks' generation then (a free moves it): the same pointer again in the same
    /// generation is not asked about again (issue 24: HIP's pointer facts are not cached).
    static LAST_NOT_PLAIN_HIP: LastClean<u64> = LastClean::new(); "sharecheck_tls_attach_hip_not_plain"
}

impl Check<args::hipStreamAttachMemAsync> for AttachHip {
    type Plan = ();
    fn before(&self, a: &args::hipStreamAttachMemAsync, cx: &mut Cx) {
        flags_not_one(cx, &hip::FLAGS_NOT_ONE, a.flags.0);
        let ptr = a.dev_ptr.addr();
        let generation = crate::engine::generation();
        if ptr == 0 || LAST_NOT_PLAIN_HIP.recall(ptr, generation).is_some() {
            return;
        }
        let plain = HipSession::begin(cx.facts).is_plain_device_memory(ptr);
        if plain == Some(false) {
            LAST_NOT_PLAIN_HIP.keep(ptr, generation, ());
        }
        if plain == Some(true) {
            cx.flag(&hip::MEMORY_NOT_MANAGED, || {
                format!(
                    "dev_ptr {} is device memory (hipMalloc; hipPointerGetAttributes), not \
                     managed or system-allocated memory",
                    hex(ptr)
                )
            });
        }
    }
    fn after(&self, _: &args::hipStreamAttachMemAsync, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            cx.shown_once(&hip::ATTACH_IGNORED, || {
                "HIP's AMD runtime accepted the attach and ignores it: the memory keeps the \
                 association it had (reported once per process)"
                    .to_string()
            });
        }
    }
}
