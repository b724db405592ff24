//! The HIP side of the family: `hipMemPoolCreate`, `hipMemPoolDestroy`, `hipMallocFromPoolAsync`,
//! the pool's export and import and a pointer's (traced). Catalogue:
//! `sharecheck_core::rules::pool::hip`.
//!
//! HIP 5.2's sentences: export and import flags must be 0, only a pool created with a handle type
//! other than none is IPC capable, and an imported pool makes no allocations. The ROCm 6.2
//! runtime (`hipamd/src/hip_mempool.cpp`, read, not measured) refuses the first three with
//! hipErrorInvalidValue and does not look for the last. The shim keeps the pools a HIP program
//! created (their handle types) and imported, apart from CUDA's.

use super::PoolState;
use crate::engine::{hex, Check, Cx};
use crate::families::flags_not_zero;
use crate::guard::peek;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::args;
use sharecheck_core::rules::pool::hip::*;
use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;

/// A HIP program's pools: created ones with their handle types, imported ones, and the pointers
/// it exported (`hipMemPoolExportPointer`) and has not freed since (the report may name their
/// free: its stack is kept).
#[derive(Default)]
pub struct HipPools {
    created: FxHashMap<u64, u32>,
    imported: FxHashSet<u64>,
    exported: FxHashSet<u64>,
}

pub struct CreateHip;
pub struct DestroyHip;
pub struct AllocHip;
pub struct ExportHip;
pub struct ImportHip;
pub struct PointerHip;
pub struct FreedHip;

fn pools<'a>(cx: &Cx<'a>) -> &'a Mutex<HipPools> {
    &cx.states.family::<PoolState>().hip
}

impl Check<args::hipMemPoolCreate> for CreateHip {
    /// The handle types the properties ask for (read as the runtime reads them).
    type Plan = Option<u32>;
    fn before(&self, a: &args::hipMemPoolCreate, _: &mut Cx) -> Option<u32> {
        // `hipMemPoolProps`: allocType, then handleTypes.
        peek(a.pool_props.0.cast::<[u32; 2]>()).map(|p| p[1])
    }
    fn after(&self, a: &args::hipMemPoolCreate, types: Option<u32>, ret: c_int, cx: &mut Cx) {
        if let (Some(pool), Some(types)) = (a.mem_pool.written(Outcome::Returned(ret)), types) {
            pools(cx).lock().created.insert(pool.addr(), types);
        }
    }
}

impl Check<args::hipMemPoolDestroy> for DestroyHip {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::hipMemPoolDestroy, _: &mut Cx) {}
    fn after(&self, a: &args::hipMemPoolDestroy, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            let mut p = pools(cx).lock();
            p.created.remove(&a.mem_pool.addr());
            p.imported.remove(&a.mem_pool.addr());
        }
    }
}

impl Check<args::hipMallocFromPoolAsync> for AllocHip {
    type Plan = ();
    fn before(&self, a: &args::hipMallocFromPoolAsync, cx: &mut Cx) {
        let pool = a.mem_pool.addr();
        if pool != 0 && pools(cx).lock().imported.contains(&pool) {
            cx.flag(&ALLOC_FROM_IMPORTED, || {
                format!(
                    "pool {} was imported (hipMemPoolImportFromShareableHandle)",
                    hex(pool)
                )
            });
        }
    }
}

impl Check<args::hipMemPoolExportToShareableHandle> for ExportHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemPoolExportToShareableHandle, cx: &mut Cx) {
        flags_not_zero(cx, &EXPORT_FLAGS_NOT_ZERO, a.flags.0.into());
        let pool = a.mem_pool.addr();
        if pools(cx).lock().created.get(&pool) == Some(&0) {
            cx.flag(&EXPORT_NOT_IPC_CAPABLE, || {
                format!(
                    "pool {} was created with handleTypes hipMemHandleTypeNone: it is not IPC \
                     capable",
                    hex(pool)
                )
            });
        }
    }
}

impl Check<args::hipMemPoolImportFromShareableHandle> for ImportHip {
    type Plan = ();
    fn before(&self, a: &args::hipMemPoolImportFromShareableHandle, cx: &mut Cx) {
        flags_not_zero(cx, &IMPORT_FLAGS_NOT_ZERO, a.flags.0.into());
    }
    fn after(&self, a: &args::hipMemPoolImportFromShareableHandle, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(pool) = a.mem_pool.written(Outcome::Returned(ret)) {
            pools(cx).lock().imported.insert(pool.addr());
        }
    }
}

/// An exported pointer, remembered until its free.
impl Check<args::hipMemPoolExportPointer> for PointerHip {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::hipMemPoolExportPointer, _: &mut Cx) {}
    fn after(&self, a: &args::hipMemPoolExportPointer, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            let state = cx.states.family::<PoolState>();
            state.hip.lock().exported.insert(a.dev_ptr.addr());
            state.hip_exported.fetch_add(1, Relaxed);
        }
    }
}

/// Traced (the export data only as its keyed fingerprint).
impl Check<args::hipMemPoolImportPointer> for PointerHip {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::hipMemPoolImportPointer, _: &mut Cx) {}
    fn after(&self, _: &args::hipMemPoolImportPointer, _: (), _: c_int, _: &mut Cx) {}
}

/// `hipFree` of a pointer this process exported: its stack is kept (the report may name it).
impl Check<args::hipFree> for FreedHip {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::hipFree, _: &mut Cx) {}
    fn after(&self, a: &args::hipFree, _: (), ret: c_int, cx: &mut Cx) {
        let state = cx.states.family::<PoolState>();
        // One load while nothing is exported (a HIP program's every free).
        if ret == 0
            && state.hip_exported.load(Relaxed) != 0
            && state.hip.lock().exported.remove(&a.ptr.addr())
        {
            state.hip_exported.fetch_sub(1, Relaxed);
            cx.keep_stack();
        }
    }
    /// No pointer exported: nothing to keep a stack for.
    #[inline(always)]
    fn idle(&self, states: &crate::engine::state::States) -> bool {
        states.family::<PoolState>().hip_exported.load(Relaxed) == 0
    }
}
