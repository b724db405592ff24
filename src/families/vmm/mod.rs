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

#[cfg(test)]
mod tests;

use crate::engine::state::{FamilyState, Lifetime};
use crate::engine::{hex, Check, Cx};
use crate::guard::peek;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use sharecheck_core::codes::NOT_PERMITTED;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use sharecheck_core::rules::vmm::cuda;
/// Address-keyed entries in a sorted vector: a process has tens to thousands of reservations
/// and mappings, and a binary search costs a tenth of a B-tree range walk on every VMM call
/// (issue 25's budgets).
#[derive(Debug)]
struct Sorted<V>(Vec<(u64, V)>);

impl<V> Default for Sorted<V> {
    fn default() -> Self {
        Sorted(Vec::new())
    }
}

impl<V: Copy> Sorted<V> {
    /// Where `key` is, or would go.
    fn at(&self, key: u64) -> Result<usize, usize> {
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
    /// The last entry at or before `key`.
    fn at_or_before(&self, key: u64) -> Option<(u64, V)> {
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
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

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
}

/// Where VMM memory lives (`CUmemLocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    Device(i32),
    HostNuma(i32),
}

/// What is known of the memory behind a handle: what its create said (imported handles say only
/// their handle type).
#[derive(Clone, Copy, Debug, Default)]
pub struct Physical {
    pub size: Option<u64>,
    pub location: Option<Location>,
    pub handle_types: Option<u32>,
    /// The driver's minimum granularity for the create's properties.
    pub granularity: Option<u64>,
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

/// A handle this process holds references to.
#[derive(Clone, Copy, Debug)]
struct Handle {
    physical: Physical,
    /// Creates, imports and retains, less releases.
    references: u32,
}

/// What the family tracks. A forked child starts empty, as every family does.
#[derive(Default)]
pub struct VmmState {
    inner: Mutex<Vmm>,
    /// How many mappings have no access yet ([`Vmm::unaccessed`], read without the lock): while
    /// none, copies and memsets have nothing to check.
    unaccessed: AtomicUsize,
}

#[derive(Default)]
struct Vmm {
    handles: FxHashMap<u64, Handle>,
    /// Reservation start -> size.
    reservations: Sorted<u64>,
    /// Mapping start -> mapping. Changed only through [`Vmm::map`], [`Vmm::unmap_inside`] and
    /// [`Vmm::grant`], which keep `unaccessed`.
    maps: Sorted<Mapping>,
    /// How many of `maps` are not `accessible`.
    unaccessed: usize,
}

impl FamilyState for VmmState {
    const SLOT: usize = 4;
    /// Frees, releases and unmaps of VMM memory are this family's own checks.
    const FORGETS_FREED_MEMORY: bool = false;
    fn forget(&self, gone: Lifetime) {
        // What a context or device took with it is not known: nothing tracked is trusted.
        if !matches!(gone, Lifetime::MemoryFreed | Lifetime::StreamDestroyed(_)) {
            *self.inner.lock() = Vmm::default();
            self.unaccessed.store(0, Relaxed);
        }
    }
}

impl VmmState {
    /// The mapping holding `ptr`: its start and what it maps.
    pub fn mapping(&self, ptr: u64) -> Option<(u64, Mapping)> {
        self.inner.lock().mapping(ptr)
    }

    /// What is known of a handle this process holds.
    pub fn handle(&self, handle: u64) -> Option<Physical> {
        self.inner.lock().handles.get(&handle).map(|h| h.physical)
    }

    /// Changes the mappings under the lock, then publishes how many have no access.
    fn change_maps<T>(&self, f: impl FnOnce(&mut Vmm) -> T) -> T {
        let mut vmm = self.inner.lock();
        let out = f(&mut vmm);
        self.unaccessed.store(vmm.unaccessed, Relaxed);
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
    }

    /// Marks the mappings that overlap `[ptr, end)` accessible.
    fn grant(&mut self, ptr: u64, end: u64) {
        let lo = self.mapping(ptr).map_or(ptr, |(start, _)| start);
        let mut granted = 0;
        for (_, m) in self.maps.range_mut(lo, end) {
            if !m.accessible {
                m.accessible = true;
                granted += 1;
            }
        }
        self.unaccessed = self.unaccessed.saturating_sub(granted);
    }

    fn mapping(&self, ptr: u64) -> Option<(u64, Mapping)> {
        let (start, m) = self.maps.at_or_before(ptr)?;
        (ptr - start < m.size).then_some((start, m))
    }

    /// The reservation holding all of `[ptr, end)`.
    fn reservation(&self, ptr: u64, end: u64) -> Option<(u64, u64)> {
        let (start, size) = self.reservations.at_or_before(ptr)?;
        (end <= start.saturating_add(size)).then_some((start, size))
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
    let known = vmm.handles.get(&handle).map(|h| h.physical);
    let physical = physical(known);
    let h = vmm.handles.entry(handle).or_insert(Handle {
        physical,
        references: 0,
    });
    h.physical = physical;
    h.references = h.references.saturating_add(1);
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
        let Some(granularity) = cx.facts.allocation_granularity(&prop) else {
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
            let imex = cx.facts.imex();
            if !(imex.listed && imex.channel) {
                cx.shown(&cuda::FABRIC_WITHOUT_IMEX, || {
                    let missing = if imex.listed {
                        "the driver lists nvidia-caps-imex-channels in /proc/devices, but no \
                         channel file in /dev/nvidia-caps-imex-channels can be opened by this \
                         user"
                    } else {
                        "/proc/devices does not list nvidia-caps-imex-channels: the driver \
                         created no IMEX channel device"
                    };
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
            size: Some(a.size.0 as u64),
            location: location(&p),
            handle_types: Some(p.requested_handle_types),
            granularity,
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
            .get(&handle)
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
        let mut vmm = cx.states.family::<VmmState>().inner.lock();
        if let Some(h) = vmm.handles.get_mut(&a.handle.0) {
            h.references = h.references.saturating_sub(1);
            if h.references == 0 {
                // Mappings keep what they map (the memory lives until they are unmapped).
                vmm.handles.remove(&a.handle.0);
            }
        }
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
}

impl Check<args::cuMemAddressReserve> for Reserve {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemAddressReserve, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemAddressReserve, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(ptr) = a.ptr.written(Outcome::Returned(ret)) {
            let mut vmm = cx.states.family::<VmmState>().inner.lock();
            vmm.reservations.insert(ptr.0, a.size.0 as u64);
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
        cx.states.family::<VmmState>().change_maps(|vmm| {
            vmm.reservations.remove(ptr);
            vmm.unmap_inside(ptr, end);
        });
    }
}

impl Check<args::cuMemMap> for Map {
    type Plan = ();
    fn before(&self, a: &args::cuMemMap, cx: &mut Cx) {
        let (ptr, size, offset) = (a.ptr.0, a.size.0 as u64, a.offset.0 as u64);
        let end = ptr.saturating_add(size);
        let (physical, reservation, overlap) = {
            let vmm = cx.states.family::<VmmState>().inner.lock();
            let physical = vmm.handles.get(&a.handle.0).map(|h| h.physical);
            let overlap = vmm.overlapping(ptr, end).next();
            (physical, vmm.reservation(ptr, end), overlap)
        };
        let physical = physical.unwrap_or_default();
        if let Some(g) = physical.granularity {
            let off: Vec<String> = [("ptr", ptr), ("size", size), ("offset", offset)]
                .into_iter()
                .filter(|&(_, v)| !v.is_multiple_of(g))
                .map(|(name, v)| format!("{name} {v:#x}"))
                .collect();
            if !off.is_empty() {
                cx.flag(&cuda::MAP_NOT_GRANULAR, || {
                    format!(
                        "{} not a multiple of {g:#x}, the allocation's minimum granularity",
                        off.join(", ") + if off.len() == 1 { " is" } else { " are" }
                    )
                });
            }
        }
        if let Some(total) = physical.size {
            if offset.checked_add(size).is_none_or(|e| e > total) {
                cx.flag(&cuda::MAP_PAST_ALLOCATION, || {
                    format!(
                        "offset {offset:#x} + size {size:#x} runs past the allocation's \
                         {total:#x} bytes (handle {})",
                        hex(a.handle.0)
                    )
                });
            }
        }
        match reservation {
            None => cx.tracked(&cuda::MAP_NOT_RESERVED, || {
                format!(
                    "[{}, {}) is not inside one reservation this process holds \
                     (cuMemAddressReserve)",
                    hex(ptr),
                    hex(end)
                )
            }),
            Some(_) => {
                if let Some((start, m)) = overlap {
                    cx.flag(&cuda::MAP_ALREADY_MAPPED, || {
                        format!(
                            "[{}, {}) is already mapped (handle {})",
                            hex(start),
                            hex(start + m.size),
                            hex(m.handle)
                        )
                    });
                }
            }
        }
    }
    fn after(&self, a: &args::cuMemMap, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        cx.states.family::<VmmState>().change_maps(|vmm| {
            let physical = vmm
                .handles
                .get(&a.handle.0)
                .map(|h| h.physical)
                .unwrap_or_default();
            let mapping = Mapping {
                size: a.size.0 as u64,
                handle: a.handle.0,
                physical,
                accessible: false,
            };
            vmm.map(a.ptr.0, mapping);
        });
    }
}

/// The message of a range that is not whole mappings.
fn not_whole(cover: Cover, vmm_maps: Option<Mapping>) -> String {
    match (cover, vmm_maps) {
        (Cover::Partial(start), Some(m)) => format!(
            "the mapping [{}, {}) is only partly inside the range",
            hex(start),
            hex(start + m.size)
        ),
        (Cover::Gap(at), _) => format!("nothing is mapped at {}", hex(at)),
        _ => String::new(),
    }
}

/// How `[ptr, ptr + size)` lies over the known mappings, whether it is inside a reservation the
/// shim saw made (then every mapping in it is known), the mapping a `Partial` names, and whether
/// a mapping in it has no access yet.
fn cover_of(cx: &Cx, ptr: u64, size: u64) -> (Cover, bool, Option<Mapping>, bool) {
    let end = ptr.saturating_add(size);
    let vmm = cx.states.family::<VmmState>().inner.lock();
    let cover = vmm.cover(ptr, end);
    let partial = match cover {
        Cover::Partial(start) => vmm.maps.get(start),
        _ => None,
    };
    let closed = vmm.unaccessed > 0 && vmm.overlapping(ptr, end).any(|(_, m)| !m.accessible);
    (cover, vmm.reservation(ptr, end).is_some(), partial, closed)
}

impl Check<args::cuMemUnmap> for Unmap {
    type Plan = ();
    fn before(&self, a: &args::cuMemUnmap, cx: &mut Cx) {
        let (cover, seen, partial, _) = cover_of(cx, a.ptr.0, a.size.0 as u64);
        let message = || not_whole(cover, partial);
        match cover {
            Cover::Whole => {}
            // R580 accepts a range with nothing mapped: reported where the shim knows.
            Cover::Gap(_) if seen => cx.flag(&cuda::UNMAP_NOT_WHOLE, message),
            Cover::Partial(_) => cx.flag(&cuda::UNMAP_NOT_WHOLE, message),
            Cover::Gap(_) => cx.tracked(&cuda::UNMAP_NOT_WHOLE, message),
        }
    }
    fn after(&self, a: &args::cuMemUnmap, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        let end = a.ptr.0.saturating_add(a.size.0 as u64);
        cx.states
            .family::<VmmState>()
            .change_maps(|vmm| vmm.unmap_inside(a.ptr.0, end));
    }
}

impl Check<args::cuMemSetAccess> for SetAccess {
    /// Whether a mapping in the range has no access yet (what a success changes).
    type Plan = bool;
    fn before(&self, a: &args::cuMemSetAccess, cx: &mut Cx) -> bool {
        let (cover, seen, partial, closed) = cover_of(cx, a.ptr.0, a.size.0 as u64);
        let message = || not_whole(cover, partial);
        match cover {
            Cover::Whole => {}
            _ if seen => cx.flag(&cuda::SET_ACCESS_NOT_MAPPED, message),
            _ => cx.tracked(&cuda::SET_ACCESS_NOT_MAPPED, message),
        }
        closed
    }
    fn after(&self, a: &args::cuMemSetAccess, closed: bool, ret: c_int, cx: &mut Cx) {
        if ret == 0 && closed {
            let end = a.ptr.0.saturating_add(a.size.0 as u64);
            cx.states
                .family::<VmmState>()
                .change_maps(|vmm| vmm.grant(a.ptr.0, end));
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
