//! The engine's lifecycle observers: calls that end something tracked state may refer to. Each
//! tells every family and the driver-fact caches, after the driver succeeded.

use crate::engine::facts::Facts;
use crate::engine::state::{Lifetime, States};
use crate::engine::{Check, Cx, Quick};
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::args;
use std::ffi::c_int;

/// Tells every family that `gone` ended, once the driver succeeded.
#[inline(always)]
fn ended(cx: &mut Cx, ret: c_int, gone: Option<Lifetime>) {
    if let (0, Some(gone)) = (ret, gone) {
        cx.forget(gone);
    }
}

pub struct ContextDestroyed;
pub struct PrimaryReleased;
pub struct PrimaryReset;
pub struct StreamDestroyed;
pub struct HipDeviceReset;
pub struct MemoryFreed;
pub struct PointerFreed;

pub mod checks {
    pub const CONTEXT_DESTROYED: super::ContextDestroyed = super::ContextDestroyed;
    pub const PRIMARY_RELEASED: super::PrimaryReleased = super::PrimaryReleased;
    pub const PRIMARY_RESET: super::PrimaryReset = super::PrimaryReset;
    pub const STREAM_DESTROYED: super::StreamDestroyed = super::StreamDestroyed;
    pub const HIP_DEVICE_RESET: super::HipDeviceReset = super::HipDeviceReset;
    pub const MEMORY_FREED: super::MemoryFreed = super::MemoryFreed;
    pub const POINTER_FREED: super::PointerFreed = super::PointerFreed;
}

/// Any call that frees, releases or unmaps memory (the table says which).
impl<A> Check<A> for MemoryFreed {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &A, _: &mut Cx) {}
    #[inline(always)]
    fn after(&self, _: &A, _: (), ret: c_int, cx: &mut Cx) {
        ended(cx, ret, Some(Lifetime::MemoryFreed));
    }
    const QUICK: bool = true;
    #[inline(always)]
    fn quick(&self, _: &A, _: &Quick) -> Option<()> {
        Some(())
    }
    #[inline(always)]
    fn quick_after(&self, _: &A, _: (), outcome: Outcome, q: &Quick) {
        if outcome == Outcome::Returned(0) {
            let _ = q.memory_freed();
        }
    }
}

// `cuMemFree_v2`: the memory ends, as for [`MemoryFreed`], and the free is kept in the process's
// recent frees (`States::frees`) with the size the pointer cache knew, under the number of the
// end's own locked add (issue 24: one locked operation per free).
crate::engine::on_success!(PointerFreed, args::cuMemFree_v2, |a, states, facts| {
    pointer_freed(states, facts, a.dptr.0);
});

/// [`PointerFreed`]'s step once the driver freed `base`.
#[inline(always)]
fn pointer_freed(states: &States, facts: &dyn Facts, base: u64) {
    // Read before the end moves the pointer epoch, which forgets it.
    let size = crate::engine::cached_range(facts, base)
        .filter(|&(b, _)| b == base)
        .map(|(_, s)| s);
    let n = crate::engine::memory_freed(states, facts);
    states.frees.put(n, base, size);
}

impl Check<args::cuCtxDestroy_v2> for ContextDestroyed {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuCtxDestroy_v2, _: &mut Cx) {}
    fn after(&self, a: &args::cuCtxDestroy_v2, _: (), ret: c_int, cx: &mut Cx) {
        ended(cx, ret, Some(Lifetime::ContextDestroyed(a.ctx.addr())));
    }
}

impl Check<args::cuStreamDestroy_v2> for StreamDestroyed {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuStreamDestroy_v2, _: &mut Cx) {}
    fn after(&self, a: &args::cuStreamDestroy_v2, _: (), ret: c_int, cx: &mut Cx) {
        ended(cx, ret, Some(Lifetime::StreamDestroyed(a.hStream.addr())));
    }
}

impl Check<args::cuDevicePrimaryCtxReset_v2> for PrimaryReset {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuDevicePrimaryCtxReset_v2, _: &mut Cx) {}
    fn after(&self, a: &args::cuDevicePrimaryCtxReset_v2, _: (), ret: c_int, cx: &mut Cx) {
        ended(cx, ret, Some(Lifetime::PrimaryContextEnded(a.dev.0)));
    }
}

impl Check<args::cuDevicePrimaryCtxRelease_v2> for PrimaryReleased {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuDevicePrimaryCtxRelease_v2, _: &mut Cx) {}
    fn after(&self, a: &args::cuDevicePrimaryCtxRelease_v2, _: (), ret: c_int, cx: &mut Cx) {
        // The primary context ends when its last reference is released; ask whether it did.
        let dev = a.dev.0;
        let ended_now = ret == 0 && cx.facts.primary_context_active(dev) != Some(true);
        ended(
            cx,
            ret,
            ended_now.then_some(Lifetime::PrimaryContextEnded(dev)),
        );
    }
}

impl Check<args::hipDeviceReset> for HipDeviceReset {
    type Plan = Option<i32>;
    fn before(&self, _: &args::hipDeviceReset, cx: &mut Cx) -> Option<i32> {
        crate::engine::facts::HipSession::begin(cx.facts).current_device()
    }
    fn after(&self, _: &args::hipDeviceReset, dev: Option<i32>, ret: c_int, cx: &mut Cx) {
        ended(cx, ret, Some(Lifetime::HipDeviceReset(dev)));
    }
}
