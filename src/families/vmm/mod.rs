//! The virtual memory management family: checks for `cuMemCreate`, `cuMemRelease`, the calls
//! that take a reference to a handle (`cuMemRetainAllocationHandle`,
//! `cuMemImportFromShareableHandle`), `cuMemAddressReserve` / `cuMemAddressFree`, `cuMemMap` /
//! `cuMemUnmap` and `cuMemSetAccess`. Catalogue: `sharecheck_core::rules::vmm`.
//!
//! What this process did with VMM memory since the shim was loaded is tracked here: its handles
//! (what their create said, the granularity the driver gives for it, and how many references
//! the process holds), its reservations and its mappings. The logical endpoint family reads it
//! (what a bind's memory is).
//!
//! A create's properties are read before the call through [`crate::guard::peek`] (the driver
//! reads them) and the driver is asked their granularity, so granularity rules are certain. So
//! are the rules on mappings inside a reservation the shim saw made: every map and unmap in it
//! went through the shim. Elsewhere (memory that may predate the shim) a finding rests on
//! tracked state and is withdrawn when the driver accepts the call. A context's or device's end
//! clears what is tracked. No lock is held across a driver call.

mod hip;
#[cfg(test)]
mod tests;

use crate::engine::state::{FamilyState, Left, Lifetime};
use crate::engine::{hex, Check, Cx, LastClean, Quick, Remember};
use crate::guard::peek;
use rustc_hash::FxHashMap;
use sharecheck_core::codes::NOT_PERMITTED;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use sharecheck_core::rules::vmm::{cuda, report};
/// Address-keyed entries in a sorted vector: a process has tens to thousands of reservations
/// and mappings, and a binary search costs a tenth of a B-tree range walk on every VMM call
/// (issue 25's budgets).
#[derive(Clone, Debug)]
struct Sorted<V>(Vec<(u64, V)>);

impl<V> Default for Sorted<V> {
    fn default() -> Self {
        Sorted(Vec::new())
    }
}

impl<V: Copy> Sorted<V> {
    /// Where `key` is, or would go. The last entry is looked at first: a map usually lies after
    /// every earlier one, and an unmap usually takes the latest (issue 24: the search's code and
    /// its chained reads stay off the VMM pair's path).
    #[inline(always)]
    fn at(&self, key: u64) -> Result<usize, usize> {
        let n = self.0.len();
        match self.0.last() {
            None => Err(0),
            Some(&(k, _)) if k == key => Ok(n - 1),
            Some(&(k, _)) if k < key => Err(n),
            Some(_) => self.search(key),
        }
    }
    #[cold]
    #[inline(never)]
    fn search(&self, key: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&key, |&(k, _)| k)
    }
    fn get(&self, key: u64) -> Option<V> {
        self.at(key).ok().map(|i| self.0[i].1)
    }
    fn insert(&mut self, key: u64, value: V) -> Option<V> {
        match self.at(key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }
    fn remove(&mut self, key: u64) -> Option<V> {
        self.at(key).ok().map(|i| self.0.remove(i).1)
    }
    /// The last entry at or before `key` (the last entry looked at first, as in [`Sorted::at`]).
    #[inline(always)]
    fn at_or_before(&self, key: u64) -> Option<(u64, V)> {
        match self.0.last() {
            Some(&(k, v)) if k <= key => Some((k, v)),
            Some(_) => self.before_last(key),
            None => None,
        }
    }
    #[cold]
    #[inline(never)]
    fn before_last(&self, key: u64) -> Option<(u64, V)> {
        let i = self.0.partition_point(|&(k, _)| k <= key);
        i.checked_sub(1).map(|i| self.0[i])
    }
    /// The entries with keys in `[from, end)`, in order.
    fn range(&self, from: u64, end: u64) -> &[(u64, V)] {
        let lo = self.0.partition_point(|&(k, _)| k < from);
        let hi = self.0.partition_point(|&(k, _)| k < end);
        &self.0[lo..hi.max(lo)]
    }
    fn range_mut(&mut self, from: u64, end: u64) -> &mut [(u64, V)] {
        let lo = self.0.partition_point(|&(k, _)| k < from);
        let hi = self.0.partition_point(|&(k, _)| k < end);
        &mut self.0[lo..hi.max(lo)]
    }
}
use std::ffi::c_int;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

pub struct Create;
pub struct Release;
pub struct Referenced;
pub struct Export;
pub struct Reserve;
pub struct AddressFree;
pub struct Map;
pub struct Unmap;
pub struct SetAccess;
pub struct Use;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const CREATE: super::Create = super::Create;
    pub const RELEASE: super::Release = super::Release;
    pub const REFERENCED: super::Referenced = super::Referenced;
    pub const EXPORT: super::Export = super::Export;
    pub const RESERVE: super::Reserve = super::Reserve;
    pub const ADDRESS_FREE: super::AddressFree = super::AddressFree;
    pub const MAP: super::Map = super::Map;
    pub const UNMAP: super::Unmap = super::Unmap;
    pub const SET_ACCESS: super::SetAccess = super::SetAccess;
    pub const USE: super::Use = super::Use;
    pub const CREATE_HIP: super::hip::CreateHip = super::hip::CreateHip;
    pub const RELEASE_HIP: super::hip::ReleaseHip = super::hip::ReleaseHip;
    pub const REFERENCED_HIP: super::hip::ReferencedHip = super::hip::ReferencedHip;
    pub const EXPORT_HIP: super::hip::ExportHip = super::hip::ExportHip;
    pub const RESERVE_HIP: super::hip::ReserveHip = super::hip::ReserveHip;
    pub const ADDRESS_FREE_HIP: super::hip::AddressFreeHip = super::hip::AddressFreeHip;
    pub const MAP_HIP: super::hip::MapHip = super::hip::MapHip;
    pub const UNMAP_HIP: super::hip::UnmapHip = super::hip::UnmapHip;
    pub const SET_ACCESS_HIP: super::hip::SetAccessHip = super::hip::SetAccessHip;
}

/// Where VMM memory lives (`CUmemLocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    Device(i32),
    HostNuma(i32),
}

/// What is known of the memory behind a handle: what its create said (imported handles say only
/// their handle type).
/// Kept with every mapping, so it is small: a mapping and its address fill one cache line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Physical {
    pub size: Option<NonZeroU64>,
    pub location: Option<Location>,
    pub handle_types: Option<u32>,
    /// The driver's minimum granularity for the create's properties.
    pub granularity: Option<NonZeroU64>,
}

/// One mapping made with `cuMemMap`.
#[derive(Clone, Copy, Debug)]
pub struct Mapping {
    pub size: u64,
    pub handle: u64,
    pub physical: Physical,
    /// Whether `cuMemSetAccess` gave it access (to any device) since it was mapped.
    pub accessible: bool,
}

// A mapping with its address fits one cache line (the map and unmap checks' search touches it).
const _: () = assert!(std::mem::size_of::<(u64, Mapping)>() <= 64);
// The lock and what the clean paths read (the latest reservation and the remembered handle among
// it): two lines. (The lock's data is its last field: it may be unsized.)
const _: () = assert!(
    std::mem::offset_of!(VmmState, inner) + std::mem::size_of::<Lock<Vmm>>()
        - std::mem::size_of::<Vmm>()
        + std::mem::offset_of!(Vmm, handles)
        + std::mem::offset_of!(Handles, table)
        <= 128
);

/// A handle this process holds references to.
#[derive(Clone, Copy, Debug)]
struct Handle {
    physical: Physical,
    /// Creates, imports and retains, less releases.
    references: u32,
    /// Mapped at least once (the first map keeps its stack for the report).
    mapped: bool,
}

/// The handles this process holds, with a copy of the entry a map most likely names: the one
/// last taken (a map follows its create, import or retain) or mapped. A map that names it reads
/// no line of the table (issue 24: the table's control bytes and bucket were two chained reads on
/// the VMM pair's path, after the family's own line).
#[derive(Clone, Default)]
#[repr(C)]
struct Handles {
    /// `(handle, entry)`: always the table's entry of that handle, at every change.
    recent: Option<(u64, Handle)>,
    table: FxHashMap<u64, Handle>,
}

impl Handles {
    fn get(&self, handle: u64) -> Option<Handle> {
        match self.recent {
            Some((h, entry)) if h == handle => Some(entry),
            _ => self.table.get(&handle).copied(),
        }
    }

    /// [`Handles::get`], remembering the entry found.
    #[inline(always)]
    fn get_remembered(&mut self, handle: u64) -> Option<Handle> {
        match self.recent {
            Some((h, entry)) if h == handle => Some(entry),
            _ => self.remember(handle),
        }
    }

    #[cold]
    #[inline(never)]
    fn remember(&mut self, handle: u64) -> Option<Handle> {
        let entry = self.table.get(&handle).copied()?;
        self.recent = Some((handle, entry));
        Some(entry)
    }

    /// Changes the entry of `handle` (made from `physical`, with no reference, if there is
    /// none), and remembers it.
    fn change(&mut self, handle: u64, physical: Physical, f: impl FnOnce(&mut Handle)) {
        let entry = self.table.entry(handle).or_insert(Handle {
            physical,
            references: 0,
            mapped: false,
        });
        f(entry);
        self.recent = Some((handle, *entry));
    }

    /// A handle's first map (whose stack the report keeps) was made.
    fn mark_mapped(&mut self, handle: u64) {
        if self.table.contains_key(&handle) {
            self.change(handle, Physical::default(), |h| h.mapped = true);
        }
    }

    /// One reference given back; the entry goes with the last.
    fn release(&mut self, handle: u64) {
        let Some(entry) = self.table.get_mut(&handle) else {
            return;
        };
        entry.references = entry.references.saturating_sub(1);
        if entry.references == 0 {
            self.table.remove(&handle);
            if self.recent.is_some_and(|(h, _)| h == handle) {
                self.recent = None;
            }
        } else {
            self.recent = Some((handle, *entry));
        }
    }

    /// The entries, in no order.
    fn iter(&self) -> impl Iterator<Item = (&u64, &Handle)> {
        self.table.iter()
    }
}

/// The family's lock: a spin lock whose release is a plain store (one locked operation per
/// section, not two), yielding the CPU while another thread holds it. No section calls out of
/// the shim.
type Lock<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;

/// What the family tracks. A forked child starts empty, as every family does. The counts a use
/// reads, the lock and what a map and an unmap read ([`Vmm`]'s first fields) come first, on two
/// lines of their own (issue 24).
#[derive(Default)]
#[repr(C, align(64))]
pub struct VmmState {
    /// How many mappings have no access yet ([`Vmm::unaccessed`], read without the lock): while
    /// none, copies and memsets have nothing to check.
    unaccessed: AtomicUsize,
    /// [`Vmm::generation`], read without the lock: a remembered clean verdict holds while it
    /// has not moved.
    generation: AtomicU64,
    inner: Lock<Vmm>,
    /// What a HIP program holds ([`hip::HipVmm`]), apart from CUDA's.
    hip: Lock<hip::HipVmm>,
    /// The POSIX fds the process exported ([`Exported`]).
    exported: Lock<Exported>,
}

/// The POSIX fds a process exported (`cuMemExportToShareableHandle`): number -> the handle
/// exported, the latest export at each number (a number the kernel hands out again was closed
/// first), and the kind of file its first export was.
#[derive(Default)]
struct Exported {
    fds: FxHashMap<c_int, u64>,
    kind: Option<FileKind>,
}

/// The kind of file a descriptor is: the device of its file system, the device it is (for a
/// device file) and its type. R580 exports every POSIX fd as /dev/nvidiactl (one inode), and the
/// descriptors its own later work opens are other devices (/dev/nvidia0) and eventfds
/// (`scripts/gpu/results/2026-11-27-2xH200-R580-export-fd-probe.txt`): so a process's first
/// export names the kind of all, and an export is told apart at exit with no system call on the
/// export's own path but the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileKind {
    dev: u64,
    rdev: u64,
    format: u32,
}

impl FileKind {
    /// `fd`'s kind; `None` when it is not open. The caller's errno is kept.
    fn of(fd: c_int) -> Option<FileKind> {
        crate::guard::keeping_errno(|| {
            // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: fstat of a descriptor number into a live local; the result is checked.
            (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(FileKind {
                dev: st.st_dev,
                rdev: st.st_rdev,
                format: st.st_mode & libc::S_IFMT,
            })
        })
    }
}

impl VmmState {
    /// The fds exported and still open, of the first export's kind, with the handle each
    /// exported, in order (at exit: the lock is waited for at most `AT_EXIT_WAIT`).
    fn still_exported(&self) -> Vec<(c_int, u64)> {
        let Some(exported) = try_lock_for(&self.exported, crate::engine::state::AT_EXIT_WAIT)
        else {
            return Vec::new();
        };
        let Some(kind) = exported.kind else {
            return Vec::new();
        };
        let mut fds: Vec<(c_int, u64)> = exported.fds.iter().map(|(&fd, &h)| (fd, h)).collect();
        drop(exported);
        fds.sort_unstable();
        fds.retain(|&(fd, _)| FileKind::of(fd) == Some(kind));
        fds
    }
}

/// In this order (`repr(C)`): what a map and an unmap read and change comes first, on the
/// state's first two lines with its lock; the tables they leave alone (the handles', the
/// reservations') come after.
#[derive(Clone, Default)]
#[repr(C)]
struct Vmm {
    /// Mapping start -> mapping. Changed only through [`Vmm::map`], [`Vmm::unmap_inside`],
    /// [`Vmm::take`] and [`Vmm::grant`], which keep `unaccessed` and `generation`.
    maps: Sorted<Mapping>,
    /// How many of `maps` are not `accessible`.
    unaccessed: usize,
    /// Moved by every change of the reservations or mappings.
    generation: u64,
    /// The latest reservation, `(start, size)` (size 0: none): the one a map most likely lies
    /// in, read without the sorted table's lines. Changed only through [`Vmm::reserve`] and
    /// [`Vmm::unreserve`].
    latest_reservation: (u64, u64),
    handles: Handles,
    /// Reservation start -> size (see `latest_reservation`).
    reservations: Sorted<u64>,
}

/// What one API's at-exit findings name: its rules, the calls that make and give back each
/// thing, for the messages.
pub(crate) struct AtExit {
    never_released: &'static sharecheck_core::rules::Rule,
    never_unmapped: &'static sharecheck_core::rules::Rule,
    never_freed: &'static sharecheck_core::rules::Rule,
    release: &'static str,
    map: &'static str,
    unmap: &'static str,
    reserve: &'static str,
    address_free: &'static str,
}

pub(crate) const CUDA_AT_EXIT: AtExit = AtExit {
    never_released: &report::NEVER_RELEASED_RULE,
    never_unmapped: &report::NEVER_UNMAPPED_RULE,
    never_freed: &report::NEVER_FREED_RULE,
    release: "cuMemRelease",
    map: "cuMemMap",
    unmap: "cuMemUnmap",
    reserve: "cuMemAddressReserve",
    address_free: "cuMemAddressFree",
};

pub(crate) const HIP_AT_EXIT: AtExit = AtExit {
    never_released: &report::HIP_NEVER_RELEASED_RULE,
    never_unmapped: &report::HIP_NEVER_UNMAPPED_RULE,
    never_freed: &report::HIP_NEVER_FREED_RULE,
    release: "hipMemRelease",
    map: "hipMemMap",
    unmap: "hipMemUnmap",
    reserve: "hipMemAddressReserve",
    address_free: "hipMemAddressFree",
};

impl AtExit {
    /// `n` references to handle `h`, taken by `call` (`how`: how they may have been taken).
    fn reference(&self, call: &str, how: &str, h: u64, n: u32) -> Left {
        Left {
            rule: self.never_released,
            call: format!("{call}(handle={})", hex(h)),
            message: format!(
                "{n} reference{} to handle {} ({how}) never released ({}) before the process \
                 exited",
                if n == 1 { "" } else { "s" },
                hex(h),
                self.release
            ),
        }
    }
    fn mapping(&self, start: u64, size: u64, handle: u64) -> Left {
        Left {
            rule: self.never_unmapped,
            call: format!("{}(ptr={}, size={size:#x})", self.map, hex(start)),
            message: format!(
                "the mapping [{}, {}) of handle {} was never unmapped ({}) before the process \
                 exited",
                hex(start),
                hex(start.saturating_add(size)),
                hex(handle),
                self.unmap
            ),
        }
    }
    fn reservation(&self, start: u64, size: u64) -> Left {
        Left {
            rule: self.never_freed,
            call: format!("{}(size={size:#x}) -> {}", self.reserve, hex(start)),
            message: format!(
                "the reservation [{}, {}) was never freed ({}) before the process exited",
                hex(start),
                hex(start.saturating_add(size)),
                self.address_free
            ),
        }
    }
}

impl FamilyState for VmmState {
    const SLOT: usize = 4;
    /// Handles still referenced, mappings never unmapped and reservations never freed: the rules
    /// `sharecheck report` decides from a trace (`sharecheck_core::rules::vmm::report`).
    fn left_at_exit(&self) -> Vec<Left> {
        let Some(vmm) = try_lock_for(&self.inner, crate::engine::state::AT_EXIT_WAIT) else {
            return Vec::new();
        };
        let mut left = Vec::new();
        let mut handles: Vec<(&u64, &Handle)> = vmm
            .handles
            .iter()
            .filter(|(_, h)| h.references > 0)
            .collect();
        handles.sort_by_key(|(h, _)| **h);
        for (&h, handle) in handles {
            let (call, how) = if handle.physical.size.is_some() {
                ("cuMemCreate", "created, imported or retained")
            } else {
                ("cuMemImportFromShareableHandle", "imported or retained")
            };
            left.push(CUDA_AT_EXIT.reference(call, how, h, handle.references));
        }
        for &(start, m) in &vmm.maps.0 {
            left.push(CUDA_AT_EXIT.mapping(start, m.size, m.handle));
        }
        for &(start, size) in &vmm.reservations.0 {
            left.push(CUDA_AT_EXIT.reservation(start, size));
        }
        drop(vmm);
        for (fd, h) in self.still_exported() {
            left.push(Left {
                rule: &sharecheck_core::rules::vmm::report::FD_NEVER_CLOSED_RULE,
                call: format!("cuMemExportToShareableHandle(handle={}) -> fd {fd}", hex(h)),
                message: format!(
                    "the POSIX fd {fd} exported from handle {} was still open when the process \
                     exited (never closed): while a process holds it, the allocation stays \
                     allocated",
                    hex(h)
                ),
            });
        }
        if let Some(hip) = try_lock_for(&self.hip, crate::engine::state::AT_EXIT_WAIT) {
            hip.left_at_exit(&mut left);
        }
        left
    }
    fn exported_fds_open(&self) -> Vec<i32> {
        self.still_exported()
            .into_iter()
            .map(|(fd, _)| fd)
            .collect()
    }
    /// Frees, releases and unmaps of VMM memory are this family's own checks.
    const FORGETS_FREED_MEMORY: bool = false;
    fn forget(&self, gone: Lifetime) {
        // What a context or device took with it is not known: nothing tracked is trusted.
        if !matches!(gone, Lifetime::MemoryFreed | Lifetime::StreamDestroyed(_)) {
            self.with(|vmm| {
                *vmm = Vmm {
                    generation: vmm.generation + 1,
                    ..Vmm::default()
                }
            });
        }
    }
}

/// The lock, waited for at most `wait` (at exit, when another thread may never release it).
fn try_lock_for<T>(
    lock: &Lock<T>,
    wait: std::time::Duration,
) -> Option<spin::mutex::SpinMutexGuard<'_, T>> {
    let until = std::time::Instant::now() + wait;
    loop {
        if let Some(guard) = lock.try_lock() {
            return Some(guard);
        }
        if std::time::Instant::now() >= until {
            return None;
        }
        std::thread::yield_now();
    }
}

impl VmmState {
    /// The mapping holding `ptr`: its start and what it maps.
    pub fn mapping(&self, ptr: u64) -> Option<(u64, Mapping)> {
        self.inner.lock().mapping(ptr)
    }

    /// What is known of a handle this process holds.
    pub fn handle(&self, handle: u64) -> Option<Physical> {
        self.inner.lock().handles.get(handle).map(|h| h.physical)
    }

    /// Runs `f` under the lock, then publishes how many mappings have no access and the
    /// generation. One lock per call on the clean path: a check reads and changes in one go.
    #[inline(always)]
    fn with<T>(&self, f: impl FnOnce(&mut Vmm) -> T) -> T {
        let mut vmm = self.inner.lock();
        let out = f(&mut vmm);
        self.unaccessed.store(vmm.unaccessed, Relaxed);
        self.generation.store(vmm.generation, Relaxed);
        out
    }
}

/// How a range lies over the mappings the shim knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cover {
    /// Exactly whole mappings, without a gap.
    Whole,
    /// A mapping only partly inside the range: its start.
    Partial(u64),
    /// Some of the range has nothing mapped: its first such address.
    Gap(u64),
}

impl Vmm {
    fn map(&mut self, start: u64, mapping: Mapping) {
        if let Some(old) = self.maps.insert(start, mapping) {
            self.unaccessed = self.unaccessed.saturating_sub(usize::from(!old.accessible));
        }
        self.unaccessed += usize::from(!mapping.accessible);
        self.generation += 1;
    }

    /// Removes the mapping at `start` if it is `mapping` (what a staged map put there).
    fn take(&mut self, start: u64, mapping: Mapping) -> Option<Mapping> {
        let i = self.maps.at(start).ok()?;
        let m = self.maps.0[i].1;
        if m.size != mapping.size || m.handle != mapping.handle {
            return None;
        }
        self.maps.0.remove(i);
        self.unaccessed = self.unaccessed.saturating_sub(usize::from(!m.accessible));
        self.generation += 1;
        Some(m)
    }

    /// The mapping that is exactly `[ptr, ptr + size)`: its index.
    fn exact(&self, ptr: u64, size: u64) -> Option<usize> {
        self.maps
            .at(ptr)
            .ok()
            .filter(|&i| self.maps.0[i].1.size == size)
    }

    /// Removes the mappings wholly inside `[ptr, end)`.
    fn unmap_inside(&mut self, ptr: u64, end: u64) {
        let entries = &mut self.maps.0;
        let lo = entries.partition_point(|&(k, _)| k < ptr);
        // Mappings do not overlap: of those starting in the range, only the last may end past it.
        let hi = entries.partition_point(|&(k, m)| k < end && k.saturating_add(m.size) <= end);
        if lo < hi {
            let closed = entries[lo..hi]
                .iter()
                .filter(|(_, m)| !m.accessible)
                .count();
            entries.drain(lo..hi);
            self.unaccessed = self.unaccessed.saturating_sub(closed);
        }
        self.generation += 1;
    }

    /// Marks the mappings that overlap `[ptr, end)` accessible, or not.
    fn grant(&mut self, ptr: u64, end: u64, accessible: bool) {
        let lo = self.mapping(ptr).map_or(ptr, |(start, _)| start);
        let mut changed = 0;
        for (_, m) in self.maps.range_mut(lo, end) {
            if m.accessible != accessible {
                m.accessible = accessible;
                changed += 1;
            }
        }
        if accessible {
            self.unaccessed = self.unaccessed.saturating_sub(changed);
        } else {
            self.unaccessed += changed;
        }
        self.generation += 1;
    }

    fn mapping(&self, ptr: u64) -> Option<(u64, Mapping)> {
        let (start, m) = self.maps.at_or_before(ptr)?;
        (ptr - start < m.size).then_some((start, m))
    }

    /// The reservation holding all of `[ptr, end)`: the latest one, or one found in the table.
    #[inline(always)]
    fn reservation(&self, ptr: u64, end: u64) -> Option<(u64, u64)> {
        let (start, size) = self.latest_reservation;
        if size != 0 && start <= ptr && end <= start.saturating_add(size) {
            return Some((start, size));
        }
        self.reservation_in_table(ptr, end)
    }

    #[cold]
    #[inline(never)]
    fn reservation_in_table(&self, ptr: u64, end: u64) -> Option<(u64, u64)> {
        let (start, size) = self.reservations.at_or_before(ptr)?;
        (end <= start.saturating_add(size)).then_some((start, size))
    }

    /// A reservation made.
    fn reserve(&mut self, start: u64, size: u64) {
        self.reservations.insert(start, size);
        self.latest_reservation = (start, size);
        self.generation += 1;
    }

    /// A reservation freed: its size, when it was one.
    fn unreserve(&mut self, start: u64) -> Option<u64> {
        if self.latest_reservation.0 == start {
            self.latest_reservation = (0, 0);
        }
        self.reservations.remove(start)
    }

    /// The first mapping that overlaps `[ptr, end)` (mappings do not overlap each other: the
    /// one before `ptr` if it reaches past it, else the first that starts in the range).
    fn first_overlap(&self, ptr: u64, end: u64) -> Option<(u64, Mapping)> {
        let entries = &self.maps.0;
        let i = entries.partition_point(|&(k, _)| k < ptr);
        if let Some(&(start, m)) = i.checked_sub(1).map(|j| &entries[j]) {
            if start.saturating_add(m.size) > ptr {
                return Some((start, m));
            }
        }
        entries.get(i).copied().filter(|&(k, _)| k < end)
    }

    /// The mappings that overlap `[ptr, end)`, in address order.
    fn overlapping(&self, ptr: u64, end: u64) -> impl Iterator<Item = (u64, Mapping)> + '_ {
        let before = self.mapping(ptr).filter(|&(start, _)| start < ptr);
        before
            .into_iter()
            .chain(self.maps.range(ptr, end).iter().copied())
    }

    fn cover(&self, ptr: u64, end: u64) -> Cover {
        let mut at = ptr;
        for (start, m) in self.overlapping(ptr, end) {
            if start < ptr || start + m.size > end {
                return Cover::Partial(start);
            }
            if start > at {
                return Cover::Gap(at);
            }
            at = start + m.size;
        }
        if at < end {
            Cover::Gap(at)
        } else {
            Cover::Whole
        }
    }

    /// How `[ptr, end)` lies over the known mappings ([`Over`]), for a range that is not one
    /// whole mapping.
    fn over(&self, ptr: u64, end: u64) -> Over {
        let cover = self.cover(ptr, end);
        let partial = match cover {
            Cover::Partial(start) => self.maps.get(start),
            _ => None,
        };
        Over {
            cover,
            seen: self.reservation(ptr, end).is_some(),
            partial,
            closed: self.unaccessed > 0 && self.overlapping(ptr, end).any(|(_, m)| !m.accessible),
        }
    }
}

/// How a range lies over the known mappings: its [`Cover`], whether it is inside a reservation
/// the shim saw made (then every mapping in it is known), the mapping a `Partial` names, and
/// whether a mapping in it has no access yet.
struct Over {
    cover: Cover,
    seen: bool,
    partial: Option<Mapping>,
    closed: bool,
}

/// `CU_MEM_LOCATION_TYPE_DEVICE` / `_HOST_NUMA` of a create's properties.
fn location(p: &CUmemAllocationPropHead) -> Option<Location> {
    match p.location_type {
        CU_MEM_LOCATION_TYPE_DEVICE => Some(Location::Device(p.location_id)),
        CU_MEM_LOCATION_TYPE_HOST_NUMA => Some(Location::HostNuma(p.location_id)),
        _ => None,
    }
}

/// A reference to `handle` taken (created, imported, retained), with what is known of it.
fn referenced(cx: &Cx, handle: u64, physical: impl FnOnce(Option<Physical>) -> Physical) {
    let mut vmm = cx.states.family::<VmmState>().inner.lock();
    let known = vmm.handles.get(handle).map(|h| h.physical);
    let physical = physical(known);
    vmm.handles.change(handle, physical, |h| {
        h.physical = physical;
        h.references = h.references.saturating_add(1);
    });
}

/// What a create's checks learned before the call: the handle types its properties request and
/// the granularity the driver gives for them.
#[derive(Default)]
pub struct CreatePlan {
    requested: Option<u32>,
    granularity: Option<u64>,
}

impl Check<args::cuMemCreate> for Create {
    type Plan = CreatePlan;
    fn before(&self, a: &args::cuMemCreate, cx: &mut Cx) -> CreatePlan {
        // The driver reads the whole structure (32 bytes); a pointer it would fault on is not
        // read here.
        let Some(prop) = peek(a.prop.0.cast::<[u64; 4]>()) else {
            return CreatePlan::default();
        };
        // `requestedHandleTypes`: the second 32-bit field.
        let requested = Some((prop[0] >> 32) as u32);
        let Some(granularity) = cx
            .facts
            .granularity(crate::engine::facts::GranularityOf::Allocation, &prop)
        else {
            return CreatePlan {
                requested,
                granularity: None,
            };
        };
        let size = a.size.0 as u64;
        if !size.is_multiple_of(granularity) {
            cx.flag(&cuda::CREATE_SIZE_NOT_GRANULAR, || {
                format!(
                    "size {size:#x} is not a multiple of {granularity:#x}, the minimum \
                     granularity cuMemGetAllocationGranularity gives for these properties"
                )
            });
        }
        CreatePlan {
            requested,
            granularity: Some(granularity),
        }
    }
    fn after(&self, a: &args::cuMemCreate, plan: CreatePlan, ret: c_int, cx: &mut Cx) {
        let fabric = plan
            .requested
            .is_some_and(|t| t & CU_MEM_HANDLE_TYPE_FABRIC != 0);
        if ret == NOT_PERMITTED && fabric {
            if let Some(missing) = cx.facts.imex().missing() {
                cx.shown(&cuda::FABRIC_WITHOUT_IMEX, || {
                    format!(
                        "the create requests CU_MEM_HANDLE_TYPE_FABRIC and the driver refused it \
                         (CUDA_ERROR_NOT_PERMITTED): {missing}"
                    )
                });
            }
        }
        let granularity = plan.granularity;
        let outcome = Outcome::Returned(ret);
        let (Some(handle), Some(p)) = (a.handle.written(outcome), a.prop.read(outcome)) else {
            return;
        };
        let physical = Physical {
            size: NonZeroU64::new(a.size.0 as u64),
            location: location(&p),
            handle_types: Some(p.requested_handle_types),
            granularity: granularity.and_then(NonZeroU64::new),
        };
        referenced(cx, handle.0, |_| physical);
    }
}

impl Check<args::cuMemImportFromShareableHandle> for Referenced {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemImportFromShareableHandle, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemImportFromShareableHandle, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(handle) = a.handle.written(Outcome::Returned(ret)) {
            // What the exporter created is not known here; the memory was shareable.
            referenced(cx, handle.0, |known| Physical {
                handle_types: Some(a.shHandleType.0),
                ..known.unwrap_or_default()
            });
        }
    }
}

impl Check<args::cuMemRetainAllocationHandle> for Referenced {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemRetainAllocationHandle, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemRetainAllocationHandle, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(handle) = a.handle.written(Outcome::Returned(ret)) {
            let mapped = cx
                .states
                .family::<VmmState>()
                .mapping(a.addr.addr())
                .map(|(_, m)| m.physical);
            referenced(cx, handle.0, |known| known.or(mapped).unwrap_or_default());
        }
    }
}

impl Check<args::cuMemRelease> for Release {
    type Plan = ();
    fn before(&self, a: &args::cuMemRelease, cx: &mut Cx) {
        let handle = a.handle.0;
        let held = cx
            .states
            .family::<VmmState>()
            .inner
            .lock()
            .handles
            .get(handle)
            .is_some_and(|h| h.references > 0);
        if !held {
            cx.tracked(&cuda::RELEASE_NOT_LIVE, || {
                format!(
                    "handle {} is not one this process holds: never created, imported or \
                     retained here, or released as often as it was",
                    hex(handle)
                )
            });
        }
    }
    fn after(&self, a: &args::cuMemRelease, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        // Mappings keep what they map (the memory lives until they are unmapped).
        let mut vmm = cx.states.family::<VmmState>().inner.lock();
        vmm.handles.release(a.handle.0);
    }
}

impl Check<args::cuMemExportToShareableHandle> for Export {
    type Plan = ();
    fn before(&self, a: &args::cuMemExportToShareableHandle, cx: &mut Cx) {
        let wanted = a.handleType.0;
        let created = cx.states.family::<VmmState>().handle(a.handle.0);
        // What a create requested (an import says only its own type).
        let Some(requested) = created
            .filter(|p| p.size.is_some())
            .and_then(|p| p.handle_types)
        else {
            return;
        };
        if requested & wanted == 0 {
            cx.flag(&cuda::EXPORT_TYPE_NOT_REQUESTED, || {
                format!(
                    "handle {} was created with requestedHandleTypes {requested:#x}; handleType \
                     {wanted:#x} is not among them",
                    hex(a.handle.0)
                )
            });
        }
    }
    /// A POSIX fd exported: its number kept for the exit (and, at the process's first export,
    /// the kind of file it is: one fstat).
    fn after(&self, a: &args::cuMemExportToShareableHandle, _: (), ret: c_int, cx: &mut Cx) {
        let outcome = Outcome::Returned(ret);
        let Some(fd) = a.shareableHandle.written_fd(outcome, a.handleType.0) else {
            return;
        };
        let exported = &cx.states.family::<VmmState>().exported;
        let first = {
            let mut e = exported.lock();
            e.fds.insert(fd, a.handle.0);
            e.kind.is_none()
        };
        if first {
            if let Some(kind) = FileKind::of(fd) {
                exported.lock().kind.get_or_insert(kind);
            }
        }
    }
}

impl Check<args::cuMemAddressReserve> for Reserve {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemAddressReserve, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemAddressReserve, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(ptr) = a.ptr.written(Outcome::Returned(ret)) {
            cx.states
                .family::<VmmState>()
                .with(|vmm| vmm.reserve(ptr.0, a.size.0 as u64));
        }
    }
}

impl Check<args::cuMemAddressFree> for AddressFree {
    type Plan = ();
    fn before(&self, a: &args::cuMemAddressFree, cx: &mut Cx) {
        let (ptr, size) = (a.ptr.0, a.size.0 as u64);
        let reserved = cx
            .states
            .family::<VmmState>()
            .inner
            .lock()
            .reservations
            .get(ptr);
        if reserved != Some(size) {
            cx.tracked(&cuda::ADDRESS_FREE_NOT_RESERVATION, || match reserved {
                Some(r) => format!(
                    "the reservation at {} is {r:#x} bytes; size is {size:#x}",
                    hex(ptr)
                ),
                None => format!(
                    "{} is not the start of a reservation this process holds \
                     (cuMemAddressReserve)",
                    hex(ptr)
                ),
            });
        }
    }
    fn after(&self, a: &args::cuMemAddressFree, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        let (ptr, end) = (a.ptr.0, a.ptr.0.saturating_add(a.size.0 as u64));
        cx.states.family::<VmmState>().with(|vmm| {
            vmm.unreserve(ptr);
            vmm.unmap_inside(ptr, end);
        });
    }
}

/// Whether `v` is a multiple of the granularity `g`: a mask where `g` is a power of two (every
/// granularity R580 gives), which spares the call path a division.
#[inline]
pub(crate) fn granular(v: u64, g: u64) -> bool {
    if g.is_power_of_two() {
        v & (g - 1) == 0
    } else {
        v.is_multiple_of(g)
    }
}

/// What a map found, in one pass under the lock ([`Vmm::stage_map_verdict`], [`Vmm::stage_any_map`]), in one word (returned in a
/// register): the rules it breaks (the low byte), whether its mapping was put in the tracked state
/// before the driver's call (nothing overlapped it: taken back if the driver refuses, so a
/// success needs no second lock), and whether it is the first map of a handle the shim saw taken
/// (its stack is kept for the report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapSeen(u16);

impl MapSeen {
    const STAGED: u16 = 1 << 8;
    const FIRST: u16 = 1 << 9;
    fn bad(self) -> u8 {
        self.0 as u8
    }
    fn staged(self) -> bool {
        self.0 & Self::STAGED != 0
    }
    fn first(self) -> bool {
        self.0 & Self::FIRST != 0
    }
}

/// What a map's findings name, written only when it breaks a rule: the allocation's minimum
/// granularity and size (0: not known), and the first mapping the range overlaps (start, size,
/// handle).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MapDetail {
    granularity: u64,
    total: u64,
    overlap: (u64, u64, u64),
}

const NOT_GRANULAR: u8 = 1;
const PAST_ALLOCATION: u8 = 2;
const NOT_RESERVED: u8 = 4;
const ALREADY_MAPPED: u8 = 8;

/// Whether `ptr`, `size` and `offset` are all multiples of the granularity `g` (not 0): one mask
/// where `g` is a power of two (every granularity R580 gives).
#[inline(always)]
fn all_granular(ptr: u64, size: u64, offset: u64, g: u64) -> bool {
    if g.is_power_of_two() {
        (ptr | size | offset) & (g - 1) == 0
    } else {
        all_granular_divided(ptr, size, offset, g)
    }
}

#[cold]
#[inline(never)]
fn all_granular_divided(ptr: u64, size: u64, offset: u64, g: u64) -> bool {
    [ptr, size, offset].into_iter().all(|v| granular(v, g))
}

impl Vmm {
    /// A map's rules and its mapping staged, in one pass: the quick path's whole work (issue 24:
    /// on R580 the driver's call evicts what the check touches, so it touches little). What the
    /// findings name is not kept: a map with a finding takes the full path, which stages it
    /// again with [`Vmm::stage_any_map`].
    #[inline(always)]
    fn stage_map_verdict(&mut self, ptr: u64, size: u64, offset: u64, handle: u64) -> MapSeen {
        match self.stage_usual_map(ptr, size, offset, handle) {
            Some(seen) => seen,
            None => self.stage_any_map(ptr, size, offset, handle, &mut None),
        }
    }

    /// [`Vmm::stage_map_verdict`] of the usual map, in a few instructions (issue 24: on R580 the
    /// staging's code lines, evicted by the driver's work, were half the map's cost): the handle
    /// last taken or mapped (its sizes known), whole granules inside its allocation and inside
    /// the latest reservation, after every mapping. `None`: not that map; nothing changed.
    #[inline(always)]
    fn stage_usual_map(
        &mut self,
        ptr: u64,
        size: u64,
        offset: u64,
        handle: u64,
    ) -> Option<MapSeen> {
        let (h, entry) = self.handles.recent.as_ref()?;
        let (g, total) = (
            entry.physical.granularity?.get(),
            entry.physical.size?.get(),
        );
        let (start, length) = self.latest_reservation;
        let end = ptr.checked_add(size)?;
        let after_all = self
            .maps
            .0
            .last()
            .is_none_or(|&(k, m)| k.saturating_add(m.size) <= ptr);
        if *h != handle
            || !g.is_power_of_two()
            || (ptr | size | offset) & (g - 1) != 0
            || size == 0
            || offset.checked_add(size)? > total
            || ptr < start
            || end > start.saturating_add(length)
            || length == 0
            || !after_all
        {
            return None;
        }
        let mapping = Mapping {
            size,
            handle,
            physical: entry.physical,
            accessible: false,
        };
        let first = !entry.mapped;
        self.maps.0.push((ptr, mapping));
        self.unaccessed += 1;
        self.generation += 1;
        Some(MapSeen(
            MapSeen::STAGED | if first { MapSeen::FIRST } else { 0 },
        ))
    }

    /// A map's rules and its mapping staged, whatever the map, with what the findings name
    /// written to `detail` (only when there are some).
    #[cold]
    #[inline(never)]
    fn stage_any_map(
        &mut self,
        ptr: u64,
        size: u64,
        offset: u64,
        handle: u64,
        detail: &mut Option<MapDetail>,
    ) -> MapSeen {
        let end = ptr.saturating_add(size);
        let (physical, first) = match self.handles.get_remembered(handle) {
            Some(h) => (h.physical, !h.mapped),
            None => (Physical::default(), false),
        };
        let g = physical.granularity.map_or(0, NonZeroU64::get);
        let total = physical.size.map_or(0, NonZeroU64::get);
        let mut bad = 0;
        if g != 0 && !all_granular(ptr, size, offset, g) {
            bad |= NOT_GRANULAR;
        }
        if total != 0 && offset.checked_add(size).is_none_or(|e| e > total) {
            bad |= PAST_ALLOCATION;
        }
        if self.reservation(ptr, end).is_none() {
            bad |= NOT_RESERVED;
        }
        // Where the mapping would go; mappings do not overlap each other, so only the one
        // before it and the one at it can overlap the range.
        let (Ok(i) | Err(i)) = self.maps.at(ptr);
        let before = i.checked_sub(1).map(|j| self.maps.0[j]);
        let overlap = before
            .filter(|&(start, m)| start.saturating_add(m.size) > ptr)
            .or_else(|| self.maps.0.get(i).copied().filter(|&(k, _)| k < end));
        let mut seen = if first { MapSeen::FIRST } else { 0 };
        match overlap {
            Some(_) if bad & NOT_RESERVED == 0 => bad |= ALREADY_MAPPED,
            Some(_) => {}
            None if end > ptr => {
                let mapping = Mapping {
                    size,
                    handle,
                    physical,
                    accessible: false,
                };
                // After every mapping (the usual map), pushed: no shift to test for.
                if i == self.maps.0.len() {
                    self.maps.0.push((ptr, mapping));
                } else {
                    self.maps.0.insert(i, (ptr, mapping));
                }
                self.unaccessed += 1;
                self.generation += 1;
                seen |= MapSeen::STAGED;
            }
            None => {}
        }
        if bad != 0 {
            *detail = Some(MapDetail {
                granularity: g,
                total,
                overlap: overlap.map_or((0, 0, 0), |(start, m)| (start, m.size, m.handle)),
            });
        }
        MapSeen(seen | u16::from(bad))
    }

    /// Takes out the mapping that is exactly `[ptr, ptr + size)`, if there is one: an unmap's
    /// clean path. What is kept of it ([`Unstaged`]) fits two registers.
    #[inline(always)]
    fn stage_unmap(&mut self, ptr: u64, size: u64) -> Option<Unstaged> {
        let i = self.maps.at(ptr).ok()?;
        if self.maps.0[i].1.size != size {
            return None;
        }
        // Only the two fields kept are read (the mapping is not copied out whole). The last
        // mapping (the usual unmap of the latest map) is cut off: no call to `memmove` (another
        // library's code lines and its GOT entry, all cold after the driver's call).
        let m = &self.maps.0[i].1;
        let kept = Unstaged {
            handle: m.handle,
            accessible: m.accessible,
        };
        if i + 1 == self.maps.0.len() {
            self.maps.0.truncate(i);
        } else {
            self.maps.0.remove(i);
        }
        self.unaccessed = self
            .unaccessed
            .saturating_sub(usize::from(!kept.accessible));
        self.generation += 1;
        Some(kept)
    }
}

/// What an unmap's check keeps of the mapping it took out before the driver's call, to put it
/// back if the driver refuses: its handle and access (its size is the call's; what the handle's
/// memory is comes from the handle, while this process holds it).
#[derive(Clone, Copy)]
pub struct Unstaged {
    handle: u64,
    accessible: bool,
}

impl Map {
    /// The findings of a map that is not clean.
    #[cold]
    #[inline(never)]
    fn report(a: &args::cuMemMap, bad: u8, detail: Option<MapDetail>, cx: &mut Cx) {
        let (ptr, size, offset) = (a.ptr.0, a.size.0 as u64, a.offset.0 as u64);
        let detail = detail.unwrap_or_default();
        let g = detail.granularity;
        if bad & NOT_GRANULAR != 0 {
            cx.flag(&cuda::MAP_NOT_GRANULAR, || {
                let off: Vec<String> = [("ptr", ptr), ("size", size), ("offset", offset)]
                    .into_iter()
                    .filter(|&(_, v)| !granular(v, g))
                    .map(|(name, v)| format!("{name} {v:#x}"))
                    .collect();
                format!(
                    "{} not a multiple of {g:#x}, the allocation's minimum granularity",
                    off.join(", ") + if off.len() == 1 { " is" } else { " are" }
                )
            });
        }
        if bad & PAST_ALLOCATION != 0 {
            let total = detail.total;
            cx.flag(&cuda::MAP_PAST_ALLOCATION, || {
                format!(
                    "offset {offset:#x} + size {size:#x} runs past the allocation's \
                     {total:#x} bytes (handle {})",
                    hex(a.handle.0)
                )
            });
        }
        if bad & NOT_RESERVED != 0 {
            cx.tracked(&cuda::MAP_NOT_RESERVED, || {
                format!(
                    "[{}, {}) is not inside one reservation this process holds \
                     (cuMemAddressReserve)",
                    hex(ptr),
                    hex(ptr.saturating_add(size))
                )
            });
        }
        if bad & ALREADY_MAPPED != 0 {
            let (start, size, handle) = detail.overlap;
            cx.flag(&cuda::MAP_ALREADY_MAPPED, || {
                format!(
                    "[{}, {}) is already mapped (handle {})",
                    hex(start),
                    hex(start + size),
                    hex(handle)
                )
            });
        }
    }

    /// After the call, what the clean path leaves: a handle's first map, a mapping not staged
    /// (added once the driver accepted it), a staged one the driver refused (taken back).
    #[cold]
    #[inline(never)]
    fn settle(a: &args::cuMemMap, seen: MapSeen, ret: c_int, cx: &mut Cx) {
        let state = cx.states.family::<VmmState>();
        let (ptr, size, handle) = (a.ptr.0, a.size.0 as u64, a.handle.0);
        if ret == 0 && seen.first() {
            Map::first_mapped(a, cx.states);
            cx.keep_stack();
        }
        match (ret, seen.staged()) {
            (0, false) => state.with(|vmm| {
                let physical = vmm.handles.get(handle).map(|h| h.physical);
                let mapping = Mapping {
                    size,
                    handle,
                    physical: physical.unwrap_or_default(),
                    accessible: false,
                };
                vmm.map(ptr, mapping);
            }),
            (r, true) if r != 0 => Map::take_back(a, state),
            _ => {}
        }
    }

    /// A handle's first map succeeded (its later maps are not first).
    #[cold]
    #[inline(never)]
    fn first_mapped(a: &args::cuMemMap, states: &crate::engine::state::States) {
        let handle = a.handle.0;
        states
            .family::<VmmState>()
            .with(|vmm| vmm.handles.mark_mapped(handle));
    }

    /// A staged mapping the driver refused (or that the full path will stage again): taken out.
    #[cold]
    #[inline(never)]
    fn take_back(a: &args::cuMemMap, state: &VmmState) {
        let staged = Mapping {
            size: a.size.0 as u64,
            handle: a.handle.0,
            physical: Physical::default(),
            accessible: false,
        };
        state.with(|vmm| vmm.take(a.ptr.0, staged));
    }
}

impl Check<args::cuMemMap> for Map {
    type Plan = MapSeen;
    #[inline]
    fn before(&self, a: &args::cuMemMap, cx: &mut Cx) -> MapSeen {
        let (ptr, size, offset) = (a.ptr.0, a.size.0 as u64, a.offset.0 as u64);
        let mut detail = None;
        let seen = cx.states.family::<VmmState>().with(|vmm| {
            vmm.stage_usual_map(ptr, size, offset, a.handle.0)
                .unwrap_or_else(|| vmm.stage_any_map(ptr, size, offset, a.handle.0, &mut detail))
        });
        if seen.bad() != 0 {
            Map::report(a, seen.bad(), detail, cx);
        }
        seen
    }
    #[inline]
    fn after(&self, a: &args::cuMemMap, seen: MapSeen, ret: c_int, cx: &mut Cx) {
        if seen.first() || (ret == 0) != seen.staged() {
            Map::settle(a, seen, ret, cx);
        }
    }
    const QUICK: bool = true;
    /// Clean: staged, with nothing to flag. A handle's first map keeps its stack in a record:
    /// recorded, it takes the full path; unrecorded, the handle is marked mapped after the call.
    #[inline(always)]
    fn quick(&self, a: &args::cuMemMap, q: &Quick) -> Option<MapSeen> {
        let (ptr, size, offset) = (a.ptr.0, a.size.0 as u64, a.offset.0 as u64);
        let state = q.states.family::<VmmState>();
        // What a finding names is not kept here: a map with one takes the full path.
        let seen = state.with(|vmm| vmm.stage_map_verdict(ptr, size, offset, a.handle.0));
        if seen.bad() == 0 && seen.staged() && !(q.recorded && seen.first()) {
            return Some(seen);
        }
        if seen.staged() {
            Map::take_back(a, state);
        }
        None
    }
    #[inline(always)]
    fn quick_after(&self, a: &args::cuMemMap, seen: MapSeen, outcome: Outcome, q: &Quick) {
        match outcome {
            Outcome::Returned(0) if seen.first() => Map::first_mapped(a, q.states),
            Outcome::Returned(0) => {}
            _ => Map::take_back(a, q.states.family::<VmmState>()),
        }
    }
}

/// The message of a range that is not whole mappings.
fn not_whole(over: &Over) -> String {
    match (over.cover, over.partial) {
        (Cover::Partial(start), Some(m)) => format!(
            "the mapping [{}, {}) is only partly inside the range",
            hex(start),
            hex(start + m.size)
        ),
        (Cover::Gap(at), _) => format!("nothing is mapped at {}", hex(at)),
        _ => String::new(),
    }
}

impl Unmap {
    /// An unmap of a range that is not exactly one mapping: whole mappings, or not.
    #[cold]
    #[inline(never)]
    fn not_one(a: &args::cuMemUnmap, cx: &mut Cx) {
        let (ptr, size) = (a.ptr.0, a.size.0 as u64);
        let over = cx
            .states
            .family::<VmmState>()
            .with(|vmm| vmm.over(ptr, ptr.saturating_add(size)));
        let message = || not_whole(&over);
        match over.cover {
            Cover::Whole => {}
            // R580 accepts a range with nothing mapped: reported where the shim knows.
            Cover::Gap(_) if over.seen => cx.flag(&cuda::UNMAP_NOT_WHOLE, message),
            Cover::Partial(_) => cx.flag(&cuda::UNMAP_NOT_WHOLE, message),
            Cover::Gap(_) => cx.tracked(&cuda::UNMAP_NOT_WHOLE, message),
        }
    }

    /// After the call, what the clean path leaves: the mappings inside a range that was not one
    /// mapping (removed once the driver accepted it), a staged one the driver refused (put back).
    #[cold]
    #[inline(never)]
    fn settle(a: &args::cuMemUnmap, staged: Option<Unstaged>, ret: c_int, cx: &mut Cx) {
        let state = cx.states.family::<VmmState>();
        let (ptr, end) = (a.ptr.0, a.ptr.0.saturating_add(a.size.0 as u64));
        match (ret, staged) {
            (0, None) => state.with(|vmm| vmm.unmap_inside(ptr, end)),
            (r, Some(u)) if r != 0 => Unmap::put_back(a, u, state),
            _ => {}
        }
    }

    /// A mapping taken out that the driver kept (it refused the unmap): put back as it was,
    /// unless something now overlaps it.
    #[cold]
    #[inline(never)]
    fn put_back(a: &args::cuMemUnmap, u: Unstaged, state: &VmmState) {
        let (ptr, end) = (a.ptr.0, a.ptr.0.saturating_add(a.size.0 as u64));
        state.with(|vmm| {
            if vmm.first_overlap(ptr, end).is_none() {
                let physical = vmm.handles.get(u.handle).map(|h| h.physical);
                let m = Mapping {
                    size: a.size.0 as u64,
                    handle: u.handle,
                    physical: physical.unwrap_or_default(),
                    accessible: u.accessible,
                };
                vmm.map(ptr, m);
            }
        });
    }
}

impl Check<args::cuMemUnmap> for Unmap {
    /// The mapping that was exactly the range, taken out of the tracked state before the
    /// driver's call (put back if the driver refuses); `None`: the range is not one mapping.
    type Plan = Option<Unstaged>;
    #[inline]
    fn before(&self, a: &args::cuMemUnmap, cx: &mut Cx) -> Option<Unstaged> {
        let (ptr, size) = (a.ptr.0, a.size.0 as u64);
        let staged = cx
            .states
            .family::<VmmState>()
            .with(|vmm| vmm.stage_unmap(ptr, size));
        if staged.is_none() {
            Unmap::not_one(a, cx);
        }
        staged
    }
    #[inline]
    fn after(&self, a: &args::cuMemUnmap, staged: Option<Unstaged>, ret: c_int, cx: &mut Cx) {
        if (ret == 0) == staged.is_none() {
            Unmap::settle(a, staged, ret, cx);
        }
    }
    const QUICK: bool = true;
    /// Clean: the range is exactly one mapping (taken out).
    #[inline(always)]
    fn quick(&self, a: &args::cuMemUnmap, q: &Quick) -> Option<Option<Unstaged>> {
        let (ptr, size) = (a.ptr.0, a.size.0 as u64);
        let staged = q
            .states
            .family::<VmmState>()
            .with(|vmm| vmm.stage_unmap(ptr, size))?;
        Some(Some(staged))
    }
    #[inline(always)]
    fn quick_after(
        &self,
        a: &args::cuMemUnmap,
        staged: Option<Unstaged>,
        outcome: Outcome,
        q: &Quick,
    ) {
        if let (false, Some(u)) = (outcome == Outcome::Returned(0), staged) {
            Unmap::put_back(a, u, q.states.family::<VmmState>());
        }
    }
}

/// What a set access changes in the tracked state.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AccessPlan {
    /// Nothing: every mapping in the range had access.
    Nothing,
    /// The one mapping the range is was given access before the call (taken back if the driver
    /// refuses).
    Staged,
    /// Mappings in the range have no access yet: given after a success.
    Later,
}

crate::fast_thread_local! {
    /// This thread's last clean `cuMemSetAccess` that changed nothing: (ptr, size, the checks'
    /// generation), in the family's generation. The checks' generation moves at a fork, whose
    /// child's family generation starts again.
    static LAST_CLEAN_ACCESS: LastClean<(u64, u64, u64)> = LastClean::new(); "sharecheck_tls_vmm_clean_access"
}

impl SetAccess {
    /// The clean path's whole work: `Ok` when the range is exactly one mapping (given access
    /// before the call when it had none: `Staged`), or the thread's last clean call again;
    /// `Err` with what the range covers otherwise (a finding's matter).
    #[inline(always)]
    fn stage(a: &args::cuMemSetAccess, state: &VmmState) -> Result<AccessPlan, Over> {
        let (ptr, size) = (a.ptr.0, a.size.0 as u64);
        let key = (ptr, size, crate::engine::generation());
        if LAST_CLEAN_ACCESS
            .recall(key, state.generation.load(Relaxed))
            .is_some()
        {
            return Ok(AccessPlan::Nothing);
        }
        let (plan, generation) = state.with(|vmm| match vmm.exact(ptr, size) {
            Some(i) => {
                let plan = if vmm.maps.0[i].1.accessible {
                    AccessPlan::Nothing
                } else {
                    vmm.grant(ptr, ptr + size, true);
                    AccessPlan::Staged
                };
                Ok((plan, vmm.generation))
            }
            None => Err(vmm.over(ptr, ptr.saturating_add(size))),
        })?;
        if plan == AccessPlan::Nothing {
            LAST_CLEAN_ACCESS.keep(key, generation, ());
        }
        Ok(plan)
    }

    /// Access given before the call, taken back (the driver refused, or the call was not made).
    #[cold]
    #[inline(never)]
    fn take_back(a: &args::cuMemSetAccess, state: &VmmState) {
        let (ptr, end) = (a.ptr.0, a.ptr.0.saturating_add(a.size.0 as u64));
        state.with(|vmm| vmm.grant(ptr, end, false));
    }
}

impl Check<args::cuMemSetAccess> for SetAccess {
    type Plan = AccessPlan;
    #[link_section = ".text.hot.sharecheck"]
    fn before(&self, a: &args::cuMemSetAccess, cx: &mut Cx) -> AccessPlan {
        let over = match SetAccess::stage(a, cx.states.family::<VmmState>()) {
            Ok(plan) => return plan,
            Err(over) => over,
        };
        let message = || not_whole(&over);
        match over.cover {
            Cover::Whole => {}
            _ if over.seen => cx.flag(&cuda::SET_ACCESS_NOT_MAPPED, message),
            _ => cx.tracked(&cuda::SET_ACCESS_NOT_MAPPED, message),
        }
        if over.closed {
            AccessPlan::Later
        } else {
            AccessPlan::Nothing
        }
    }
    fn after(&self, a: &args::cuMemSetAccess, plan: AccessPlan, ret: c_int, cx: &mut Cx) {
        let (ptr, end) = (a.ptr.0, a.ptr.0.saturating_add(a.size.0 as u64));
        match (ret, plan) {
            (0, AccessPlan::Later) => cx
                .states
                .family::<VmmState>()
                .with(|vmm| vmm.grant(ptr, end, true)),
            (r, AccessPlan::Staged) if r != 0 => {
                SetAccess::take_back(a, cx.states.family::<VmmState>());
            }
            _ => {}
        }
    }
    const QUICK: bool = true;
    /// Clean: the range is exactly one mapping (or the thread's last clean call again).
    #[inline(always)]
    fn quick(&self, a: &args::cuMemSetAccess, q: &Quick) -> Option<AccessPlan> {
        SetAccess::stage(a, q.states.family::<VmmState>()).ok()
    }
    #[inline(always)]
    fn quick_after(&self, a: &args::cuMemSetAccess, plan: AccessPlan, outcome: Outcome, q: &Quick) {
        if plan == AccessPlan::Staged && outcome != Outcome::Returned(0) {
            SetAccess::take_back(a, q.states.family::<VmmState>());
        }
    }
}

/// Copies and memsets that name memory mapped and never given access.
fn used(cx: &mut Cx, addresses: &[(&'static str, u64)]) {
    for &(name, ptr) in addresses {
        let Some((start, m)) = cx.states.family::<VmmState>().mapping(ptr) else {
            continue;
        };
        if !m.accessible {
            cx.tracked(&cuda::USED_BEFORE_ACCESS, || {
                format!(
                    "{name} {} is in the mapping [{}, {}) of handle {} (cuMemMap), which \
                     cuMemSetAccess never gave access to",
                    hex(ptr),
                    hex(start),
                    hex(start + m.size),
                    hex(m.handle)
                )
            });
        }
    }
}

/// The address an argument names.
trait Address {
    fn address(&self) -> u64;
}

impl Address for CUdeviceptr {
    fn address(&self) -> u64 {
        self.0
    }
}

impl Address for ConstVoidPtr {
    fn address(&self) -> u64 {
        self.addr()
    }
}

impl Address for VoidPtr {
    fn address(&self) -> u64 {
        self.addr()
    }
}

macro_rules! use_check {
    ($($function:ident ($($ptr:ident),*)),* $(,)?) => {$(
        impl Check<args::$function> for Use {
            type Plan = ();
            #[inline]
            fn before(&self, a: &args::$function, cx: &mut Cx) {
                if !Check::<args::$function>::idle(self, cx.states) {
                    used(cx, &[$((stringify!($ptr), Address::address(&a.$ptr))),*]);
                }
            }
            /// Every mapping has access: no copy can use one before it.
            #[inline(always)]
            fn idle(&self, states: &crate::engine::state::States) -> bool {
                states.family::<VmmState>().unaccessed.load(Relaxed) == 0
            }
        }
    )*};
}

use_check!(
    cuMemcpyAsync(dst, src),
    cuMemcpyAsync_ptsz(dst, src),
    cuMemcpyDtoDAsync_v2(dstDevice, srcDevice),
    cuMemcpyDtoDAsync_v2_ptsz(dstDevice, srcDevice),
    cuMemcpyHtoDAsync_v2(dstDevice),
    cuMemcpyHtoDAsync_v2_ptsz(dstDevice),
    cuMemcpyDtoHAsync_v2(srcDevice),
    cuMemcpyDtoHAsync_v2_ptsz(srcDevice),
    cuMemsetD8Async(dstDevice),
    cuMemsetD8Async_ptsz(dstDevice),
    cuMemsetD32Async(dstDevice),
    cuMemsetD32Async_ptsz(dstDevice),
    cuMemcpyHtoD_v2(dstDevice),
    cuMemcpyHtoD_v2_ptds(dstDevice),
    cuMemcpyDtoH_v2(srcDevice),
    cuMemcpyDtoH_v2_ptds(srcDevice),
    cuMemcpyDtoD_v2(dstDevice, srcDevice),
    cuMemcpyDtoD_v2_ptds(dstDevice, srcDevice),
    cuMemsetD8_v2(dstDevice),
    cuMemsetD8_v2_ptds(dstDevice),
);
