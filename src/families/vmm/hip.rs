//! The HIP side of the family: `hipMemCreate`, `hipMemRelease`, imports and retains,
//! `hipMemExportToShareableHandle`, `hipMemAddressReserve` / `hipMemAddressFree`, `hipMemMap`,
//! `hipMemUnmap` and `hipMemSetAccess`. Catalogue: `sharecheck_core::rules::vmm::hip`.
//!
//! HIP 5.2 documents few sentences for these calls (they are "beta"): flags and the map's offset
//! must be zero, a release is of a handle `hipMemCreate` made, an address free is of a
//! reservation `hipMemAddressReserve` made. What the ROCm 6.2 runtime does with each misuse is read
//! in its source (`hipamd/src/hip_vm.cpp`): it checks the flags and the offset, and it does not
//! look before a release (a second release is a use after free) or before an address free of an
//! address it does not know (rocclr's `Device::virtualFree` logs, then dereferences the missing
//! entry; the current CLR answers hipErrorInvalidValue instead). So the shim tracks the handles,
//! reservations and mappings a HIP program holds, apart from CUDA's, reports a release of a
//! handle it saw released, and an address free of a reservation it saw freed (or inside one, not
//! at its start), before the call is made, and at the exit of a process that writes no trace what
//! it never gave back (HIP's own at-exit rules: `sharecheck_core::rules::vmm::report`).

use super::{Lock, Sorted, VmmState, HIP_AT_EXIT};
use crate::engine::state::Left;
use crate::engine::{hex, Check, Cx};
use crate::families::flags_not_zero;
use rustc_hash::{FxHashMap, FxHashSet};
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::args;
use sharecheck_core::rules::vmm::hip::*;
use std::ffi::c_int;

/// How many released handles [`HipVmm::released`] (and freed reservations, [`HipVmm::freed`])
/// are remembered (past that, a release of an unknown handle, or an address free of an unknown
/// address, rests on tracked state only).
const RELEASED_KEPT: usize = 4096;

/// Remembers what was given back (a handle released, a reservation freed), forgetting all once
/// [`RELEASED_KEPT`] are held: the set stays bounded whatever the program does.
fn remember(given_back: &mut FxHashSet<u64>, value: u64) {
    if given_back.len() >= RELEASED_KEPT {
        given_back.clear();
    }
    given_back.insert(value);
}

/// What a HIP program holds: its handles (references taken less released), the handles it
/// released as often as it took them (a handle value the runtime hands out again leaves the set),
/// its reservations (start -> size), the starts of the reservations it freed (a start the runtime
/// hands out again leaves the set) and its mappings (start -> size and handle).
#[derive(Default)]
pub struct HipVmm {
    handles: FxHashMap<u64, u32>,
    released: FxHashSet<u64>,
    reservations: Sorted<u64>,
    freed: FxHashSet<u64>,
    maps: Sorted<(u64, u64)>,
}

impl HipVmm {
    /// Removes the mappings wholly inside `[ptr, end)` (an unmap, or an address free that takes
    /// its mappings with it).
    fn unmap_inside(&mut self, ptr: u64, end: u64) {
        self.maps
            .0
            .retain(|&(start, (size, _))| start < ptr || start.saturating_add(size) > end);
    }

    /// What the process still holds at its exit ([`crate::engine::state::FamilyState::left_at_exit`]):
    /// references never released, mappings never unmapped, reservations never freed.
    pub(super) fn left_at_exit(&self, left: &mut Vec<Left>) {
        let mut handles: Vec<(u64, u32)> = self
            .handles
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&h, &n)| (h, n))
            .collect();
        handles.sort_unstable();
        for (h, n) in handles {
            let how = "created, imported or retained";
            left.push(HIP_AT_EXIT.reference("hipMemCreate", how, h, n));
        }
        for &(start, (size, handle)) in &self.maps.0 {
            left.push(HIP_AT_EXIT.mapping(start, size, handle));
        }
        for &(start, size) in &self.reservations.0 {
            left.push(HIP_AT_EXIT.reservation(start, size));
        }
    }
}

pub struct CreateHip;
pub struct ReleaseHip;
pub struct ReferencedHip;
pub struct ExportHip;
pub struct ReserveHip;
pub struct AddressFreeHip;
pub struct MapHip;
pub struct UnmapHip;
pub struct SetAccessHip;

fn hip<'a>(cx: &Cx<'a>) -> &'a Lock<HipVmm> {
    &cx.states.family::<VmmState>().hip
}

/// A reference to `handle` taken (created, imported, retained).
fn referenced(cx: &Cx, handle: u64) {
    let mut vmm = hip(cx).lock();
    vmm.released.remove(&handle);
    let n = vmm.handles.entry(handle).or_insert(0);
    *n = n.saturating_add(1);
}

impl Check<args::hipMemCreate> for CreateHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemCreate, cx: &mut Cx) {
        flags_not_zero(cx, &CREATE_FLAGS_NOT_ZERO, a.flags.0);
    }
    fn after(&self, a: &args::hipMemCreate, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(handle) = a.handle.written(Outcome::Returned(ret)) {
            referenced(cx, handle.0);
        }
    }
}

macro_rules! referenced_hip {
    ($($function:ident),*) => {$(
        /// A reference taken by an import or a retain.
        impl Check<args::$function> for ReferencedHip {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if let Some(handle) = a.handle.written(Outcome::Returned(ret)) {
                    referenced(cx, handle.0);
                }
            }
        }
    )*};
}

referenced_hip!(
    hipMemImportFromShareableHandle,
    hipMemRetainAllocationHandle
);

impl Check<args::hipMemRelease> for ReleaseHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemRelease, cx: &mut Cx) {
        let handle = a.handle.0;
        if handle == 0 {
            // The runtime refuses NULL itself (hipErrorInvalidValue).
            return;
        }
        let (held, released) = {
            let vmm = hip(cx).lock();
            (
                vmm.handles.get(&handle).is_some_and(|&n| n > 0),
                vmm.released.contains(&handle),
            )
        };
        let message = || {
            format!(
                "handle {} is not one this process holds: {}",
                hex(handle),
                if released {
                    "it was released as often as it was created, imported or retained"
                } else {
                    "never created, imported or retained here"
                }
            )
        };
        if released {
            cx.flag(&RELEASE_NOT_HELD, message);
        } else if !held {
            cx.tracked(&RELEASE_NOT_HELD, message);
        }
    }
    fn after(&self, a: &args::hipMemRelease, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        let handle = a.handle.0;
        let mut vmm = hip(cx).lock();
        if let Some(n) = vmm.handles.get_mut(&handle) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                vmm.handles.remove(&handle);
                remember(&mut vmm.released, handle);
            }
        }
    }
}

impl Check<args::hipMemExportToShareableHandle> for ExportHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemExportToShareableHandle, cx: &mut Cx) {
        flags_not_zero(cx, &EXPORT_FLAGS_NOT_ZERO, a.flags.0);
    }
}

impl Check<args::hipMemAddressReserve> for ReserveHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemAddressReserve, cx: &mut Cx) {
        flags_not_zero(cx, &RESERVE_FLAGS_NOT_ZERO, a.flags.0);
    }
    fn after(&self, a: &args::hipMemAddressReserve, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(ptr) = a.ptr.written(Outcome::Returned(ret)) {
            let start = ptr.0 as usize as u64;
            let mut vmm = hip(cx).lock();
            vmm.freed.remove(&start);
            vmm.reservations.insert(start, a.size.0 as u64);
        }
    }
}

impl Check<args::hipMemAddressFree> for AddressFreeHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemAddressFree, cx: &mut Cx) {
        let ptr = a.devPtr.addr();
        if ptr == 0 || a.size.0 == 0 {
            // The runtime refuses these itself (hipErrorInvalidValue).
            return;
        }
        // What the shim knows of `ptr`: inside a reservation it saw made but not its start, or
        // the start of one it saw freed, is certain (reservations do not overlap), and reported
        // before the call: the ROCm 6.2 runtime dereferences the entry it does not find.
        let known = {
            let vmm = hip(cx).lock();
            match vmm.reservations.at_or_before(ptr) {
                Some((start, _)) if start == ptr => return,
                Some((start, size)) if ptr - start < size => Some(format!(
                    "{} is inside the reservation [{}, {}) (hipMemAddressReserve), not its start",
                    hex(ptr),
                    hex(start),
                    hex(start.saturating_add(size))
                )),
                _ => vmm.freed.contains(&ptr).then(|| {
                    format!(
                        "{} is a reservation this process freed already (hipMemAddressFree)",
                        hex(ptr)
                    )
                }),
            }
        };
        match known {
            Some(message) => cx.flag(&ADDRESS_FREE_NOT_RESERVATION, || message),
            None => cx.tracked(&ADDRESS_FREE_NOT_RESERVATION, || {
                format!(
                    "{} is not the start of a reservation this process holds \
                     (hipMemAddressReserve)",
                    hex(ptr)
                )
            }),
        }
    }
    fn after(&self, a: &args::hipMemAddressFree, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            let ptr = a.devPtr.addr();
            let mut vmm = hip(cx).lock();
            if vmm.reservations.remove(ptr).is_some() {
                remember(&mut vmm.freed, ptr);
            }
            vmm.unmap_inside(ptr, ptr.saturating_add(a.size.0 as u64));
        }
    }
}

impl Check<args::hipMemMap> for MapHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemMap, cx: &mut Cx) {
        flags_not_zero(cx, &MAP_FLAGS_NOT_ZERO, a.flags.0);
        let offset = a.offset.0;
        if offset != 0 {
            cx.flag(&MAP_OFFSET_NOT_ZERO, || {
                format!("offset is {offset:#x}; HIP maps an allocation from its start (0)")
            });
        }
    }
    fn after(&self, a: &args::hipMemMap, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            let mapping = (a.size.0 as u64, a.handle.0);
            hip(cx).lock().maps.insert(a.ptr.addr(), mapping);
        }
    }
}

/// HIP 5.2 says nothing an unmap could break: what it unmapped is no longer held.
impl Check<args::hipMemUnmap> for UnmapHip {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::hipMemUnmap, _: &mut Cx) {}
    fn after(&self, a: &args::hipMemUnmap, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            let ptr = a.ptr.addr();
            hip(cx)
                .lock()
                .unmap_inside(ptr, ptr.saturating_add(a.size.0 as u64));
        }
    }
}

/// Traced; HIP 5.2 says nothing a set access could break.
impl Check<args::hipMemSetAccess> for SetAccessHip {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::hipMemSetAccess, _: &mut Cx) {}
    fn after(&self, _: &args::hipMemSetAccess, _: (), _: c_int, _: &mut Cx) {}
}

#[cfg(test)]
mod remember_tests {
    /// What was given back is remembered up to the bound, then forgotten all at once.
    #[test]
    fn what_was_given_back_is_remembered_up_to_a_bound() {
        let mut set = rustc_hash::FxHashSet::default();
        for v in 0..super::RELEASED_KEPT as u64 {
            super::remember(&mut set, v);
        }
        assert_eq!(set.len(), super::RELEASED_KEPT);
        assert!(set.contains(&0));
        super::remember(&mut set, u64::MAX);
        assert_eq!(set.len(), 1);
        assert!(set.contains(&u64::MAX) && !set.contains(&0));
    }
}
