//! The stream-ordered memory pool family: checks for `cuMemPoolCreate` / `cuMemPoolDestroy`,
//! allocations (`cuMemAllocFromPoolAsync`, `cuMemAllocAsync`, and their frees), and the sharing
//! calls (`cuMemPoolExportToShareableHandle`, `cuMemPoolImportFromShareableHandle`,
//! `cuMemPoolExportPointer`, `cuMemPoolImportPointer`). Catalogue: `sharecheck_core::rules::pool`.
//!
//! What this process did with pools since the shim was loaded is tracked: the pools it created
//! (with the handle types they were created with) and imported, and the allocations it made from
//! pools (with their size and where they came from). A finding about a pool the shim saw created
//! or imported is certain; one about an allocation's origin is withdrawn when the driver accepts
//! (the memory may predate the shim). No lock is held across a driver call, and a free takes no
//! lock while no pool allocation is tracked.

mod hip;
#[cfg(test)]
mod tests;

use crate::engine::state::{may_hold, pointer_bit, rewatch, FamilyState, Lifetime, States};
use crate::engine::{hex, Check, Cx, Quick};
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use sharecheck_core::codes::NOT_PERMITTED;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use sharecheck_core::rules::pool::cuda;
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

pub struct Create;
pub struct Destroy;
pub struct Alloc;
pub struct AllocDefault;
pub struct Freed;
pub struct Export;
pub struct Import;
pub struct ExportPointer;
pub struct ImportPointer;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const CREATE: super::Create = super::Create;
    pub const DESTROY: super::Destroy = super::Destroy;
    pub const ALLOC: super::Alloc = super::Alloc;
    pub const ALLOC_DEFAULT: super::AllocDefault = super::AllocDefault;
    pub const FREED: super::Freed = super::Freed;
    pub const EXPORT: super::Export = super::Export;
    pub const IMPORT: super::Import = super::Import;
    pub const EXPORT_POINTER: super::ExportPointer = super::ExportPointer;
    pub const IMPORT_POINTER: super::ImportPointer = super::ImportPointer;
    pub const CREATE_HIP: super::hip::CreateHip = super::hip::CreateHip;
    pub const DESTROY_HIP: super::hip::DestroyHip = super::hip::DestroyHip;
    pub const ALLOC_HIP: super::hip::AllocHip = super::hip::AllocHip;
    pub const EXPORT_HIP: super::hip::ExportHip = super::hip::ExportHip;
    pub const IMPORT_HIP: super::hip::ImportHip = super::hip::ImportHip;
    pub const POINTER_HIP: super::hip::PointerHip = super::hip::PointerHip;
    pub const FREED_HIP: super::hip::FreedHip = super::hip::FreedHip;
}

/// Where an allocation came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A pool the process made: its handle, and the handle types it was created with when the
    /// shim saw the create.
    Pool { pool: u64, types: Option<u32> },
    /// A device's default pool (`cuMemAllocAsync`).
    Default,
}

/// What the family tracks. A forked child starts empty, as every family does.
#[derive(Default)]
pub struct PoolState {
    /// What is tracked of CUDA's pools. The family's memory watch (`States::watch`) holds
    /// the [`pointer_bit`]s of its allocations ([`rewatch`]; a bit may also outlive its
    /// allocation after a device's end forgot them all).
    inner: Mutex<Pools>,
    /// A HIP program's pools ([`hip::HipPools`]), apart from CUDA's.
    hip: Mutex<hip::HipPools>,
    /// How many pointers a HIP program exported and has not freed (read without the lock): while
    /// none, a `hipFree` has nothing to keep.
    hip_exported: AtomicUsize,
}

#[derive(Clone, Copy, Debug)]
struct Created {
    types: u32,
    exported: bool,
    /// The code of the last export the driver refused, while none succeeded (R580 refuses a
    /// FABRIC pool's export without an IMEX channel, then dies exporting its pointers).
    refused: Option<c_int>,
}

#[derive(Default)]
struct Pools {
    /// Pools this process created: handle -> the handle types of its create, and whether it was
    /// exported since (only then do its pointers export: R580).
    created: FxHashMap<u64, Created>,
    /// Pools this process imported (`cuMemPoolImportFromShareableHandle`).
    imported: FxHashSet<u64>,
    /// Allocations from pools: base -> (size, origin).
    allocations: BTreeMap<u64, (u64, Origin)>,
}

impl FamilyState for PoolState {
    const SLOT: usize = 5;
    /// A free of pool memory is this family's own check.
    const FORGETS_FREED_MEMORY: bool = false;
    /// A pool imported.
    fn imports_from_other_processes(&self) -> bool {
        self.inner
            .try_lock_for(crate::engine::state::AT_EXIT_WAIT)
            .is_some_and(|p| !p.imported.is_empty())
    }
    fn forget(&self, gone: Lifetime) {
        // Pools belong to no context ("not associated with any CUDA context"); what a device's
        // end takes with it is not known: nothing tracked is trusted then.
        if matches!(
            gone,
            Lifetime::PrimaryContextEnded(_) | Lifetime::HipDeviceReset(_)
        ) {
            self.with(|p| *p = Pools::default());
            *self.hip.lock() = hip::HipPools::default();
            self.hip_exported.store(0, Relaxed);
        }
    }
}

impl PoolState {
    /// Memory that the memory watch `watch` may hold was freed: whether it was a pool allocation
    /// whose pool was exported (its pointers may be held by other processes, and the report may
    /// name this free).
    #[cold]
    #[inline(never)]
    fn forget_allocation(&self, dptr: u64, watch: &AtomicU64) -> bool {
        self.with(|p| {
            let gone = p.allocations.remove(&dptr);
            rewatch(watch, p.allocations.keys().copied());
            match gone {
                Some((_, Origin::Pool { pool, .. })) => {
                    p.created.get(&pool).is_some_and(|c| c.exported)
                }
                _ => false,
            }
        })
    }

    /// Runs `f` under the lock.
    fn with<T>(&self, f: impl FnOnce(&mut Pools) -> T) -> T {
        f(&mut self.inner.lock())
    }
}

fn state<'a>(cx: &Cx<'a>) -> &'a PoolState {
    cx.states.family::<PoolState>()
}

impl Check<args::cuMemPoolCreate> for Create {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemPoolCreate, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemPoolCreate, _: (), ret: c_int, cx: &mut Cx) {
        let outcome = Outcome::Returned(ret);
        if let (Some(pool), Some(props)) = (a.pool.written(outcome), a.poolProps.read(outcome)) {
            state(cx).with(|p| {
                p.imported.remove(&pool.addr());
                p.created.insert(
                    pool.addr(),
                    Created {
                        types: props.requested_handle_types,
                        exported: false,
                        refused: None,
                    },
                )
            });
        }
    }
}

impl Check<args::cuMemPoolDestroy> for Destroy {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemPoolDestroy, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemPoolDestroy, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            // Its allocations live on until freed (R580 frees them later without complaint).
            let pool = a.pool.addr();
            state(cx).with(|p| {
                p.created.remove(&pool);
                p.imported.remove(&pool);
            });
        }
    }
}

/// An allocation the driver returned, kept with its origin.
fn allocated(cx: &Cx, dptr: Out<CUdeviceptr>, size: Size, ret: c_int, origin: Origin) {
    if let Some(ptr) = dptr.written(Outcome::Returned(ret)) {
        let (state, watch) = cx.states.family_watched::<PoolState>();
        state.with(|p| {
            p.allocations.insert(ptr.0, (size.0 as u64, origin));
            watch.fetch_or(pointer_bit(ptr.0), Relaxed);
        });
    }
}

macro_rules! alloc_from_pool {
    ($($function:ident),*) => {$(
        impl Check<args::$function> for Alloc {
            /// The pool's handle types, when the shim saw it created.
            type Plan = Option<u32>;
            fn before(&self, a: &args::$function, cx: &mut Cx) -> Option<u32> {
                let pool = a.pool.addr();
                let (imported, types) = state(cx).with(|p| {
                    (p.imported.contains(&pool), p.created.get(&pool).map(|c| c.types))
                });
                if imported {
                    cx.flag(&cuda::ALLOC_FROM_IMPORTED, || {
                        format!(
                            "pool {} was imported (cuMemPoolImportFromShareableHandle); only \
                             the exporting process allocates from it",
                            hex(pool)
                        )
                    });
                }
                types
            }
            fn after(&self, a: &args::$function, types: Option<u32>, ret: c_int, cx: &mut Cx) {
                let origin = Origin::Pool { pool: a.pool.addr(), types };
                allocated(cx, a.dptr, a.bytesize, ret, origin);
            }
        }
    )*};
}

alloc_from_pool!(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz);

macro_rules! alloc_default {
    ($($function:ident),*) => {$(
        impl Check<args::$function> for AllocDefault {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                allocated(cx, a.dptr, a.bytesize, ret, Origin::Default);
            }
        }
    )*};
}

alloc_default!(cuMemAllocAsync, cuMemAllocAsync_ptsz);

macro_rules! freed {
    ($($function:ident),*) => {$(
        impl Check<args::$function> for Freed {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &args::$function, _: &mut Cx) {}
            #[inline(always)]
            fn after(&self, a: &args::$function, _: (), ret: c_int, cx: &mut Cx) {
                if ret == 0 && freed(cx.states, a.dptr.0) {
                    cx.keep_stack();
                }
            }
            /// No pool allocation tracked: nothing to forget.
            #[inline(always)]
            fn idle(&self, states: &States) -> bool {
                states.watch::<PoolState>().load(Relaxed) == 0
            }
            const QUICK: bool = true;
            /// Declined where the call is recorded and may free a pool allocation, whose free
            /// keeps its stack.
            #[inline(always)]
            fn quick(&self, a: &args::$function, q: &Quick) -> Option<()> {
                let watch = q.states.watch::<PoolState>().load(Relaxed);
                (!q.recorded || !may_hold(watch, a.dptr.0)).then_some(())
            }
            #[inline(always)]
            fn quick_after(&self, a: &args::$function, _: (), outcome: Outcome, q: &Quick) {
                if outcome == Outcome::Returned(0) {
                    freed(q.states, a.dptr.0);
                }
            }
        }
    )*};
}

freed!(cuMemFree_v2, cuMemFreeAsync, cuMemFreeAsync_ptsz);

/// [`Freed`]'s step once the driver freed `dptr`: whether it was a pool allocation this process
/// tracked (its free keeps a stack). Most frees are of memory no pool made: the watch tells them
/// apart without reaching the family's state.
#[inline(always)]
fn freed(states: &States, dptr: u64) -> bool {
    if !may_hold(states.watch::<PoolState>().load(Relaxed), dptr) {
        return false;
    }
    let (state, watch) = states.family_watched::<PoolState>();
    state.forget_allocation(dptr, watch)
}

impl Check<args::cuMemPoolExportToShareableHandle> for Export {
    type Plan = ();
    fn after(&self, a: &args::cuMemPoolExportToShareableHandle, _: (), ret: c_int, cx: &mut Cx) {
        Export::exported(a, ret, cx);
        if ret == NOT_PERMITTED {
            Export::refused(a, cx);
        }
    }
    fn before(&self, a: &args::cuMemPoolExportToShareableHandle, cx: &mut Cx) {
        let pool = a.pool.addr();
        let wanted = a.handleType.0;
        let Some(types) = state(cx).with(|p| p.created.get(&pool).map(|c| c.types)) else {
            return;
        };
        if wanted == 0 || types & wanted != wanted {
            cx.flag(&cuda::EXPORT_TYPE_NOT_REQUESTED, || {
                if types == 0 {
                    format!(
                        "pool {} was created with CU_MEM_HANDLE_TYPE_NONE: it is not IPC capable",
                        hex(pool)
                    )
                } else {
                    format!(
                        "pool {} was created with handleTypes {types:#x}; handleType \
                         {wanted:#x} is not among them",
                        hex(pool)
                    )
                }
            });
        }
    }
}

impl Export {
    /// An export refused with CUDA_ERROR_NOT_PERMITTED: a FABRIC pool on a host without an IMEX
    /// channel is explained (R580 makes such a pool and refuses only its export).
    fn refused(a: &args::cuMemPoolExportToShareableHandle, cx: &mut Cx) {
        let pool = a.pool.addr();
        let types = state(cx).with(|p| p.created.get(&pool).map(|c| c.types));
        if types.is_none_or(|t| t & CU_MEM_HANDLE_TYPE_FABRIC == 0) {
            return;
        }
        if let Some(missing) = cx.facts.imex().missing() {
            cx.shown(&cuda::EXPORT_FABRIC_WITHOUT_IMEX, || {
                format!(
                    "pool {} was created with CU_MEM_HANDLE_TYPE_FABRIC and the driver refused \
                     its export (CUDA_ERROR_NOT_PERMITTED): {missing}",
                    hex(pool)
                )
            });
        }
    }

    /// A pool exported: its pointers may be exported from now on. A refused export is kept for
    /// the pointers' messages.
    fn exported(a: &args::cuMemPoolExportToShareableHandle, ret: c_int, cx: &Cx) {
        let pool = a.pool.addr();
        state(cx).with(|p| {
            if let Some(c) = p.created.get_mut(&pool) {
                match ret {
                    0 => c.exported = true,
                    code => c.refused = Some(code),
                }
            }
        });
    }
}

impl Check<args::cuMemPoolImportFromShareableHandle> for Import {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemPoolImportFromShareableHandle, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemPoolImportFromShareableHandle, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(pool) = a.pool_out.written(Outcome::Returned(ret)) {
            // R580 hands the exporter a pool of its own for its own export: a new handle, never
            // one it created.
            state(cx).with(|p| p.imported.insert(pool.addr()));
        }
    }
}

impl Check<args::cuMemPoolExportPointer> for ExportPointer {
    type Plan = ();
    fn before(&self, a: &args::cuMemPoolExportPointer, cx: &mut Cx) {
        let ptr = a.ptr.0;
        let Some((base, (size, origin), created)) = state(cx).with(|p| {
            p.allocations.range(..=ptr).next_back().map(|(b, v)| {
                let created = match v.1 {
                    Origin::Pool { pool, .. } => p.created.get(&pool).copied(),
                    Origin::Default => None,
                };
                (*b, *v, created)
            })
        }) else {
            return;
        };
        if ptr - base >= size {
            return;
        }
        let why = if ptr != base {
            format!(
                "{} is inside the allocation at {} ({size:#x} bytes): only an allocation's \
                 start is exported",
                hex(ptr),
                hex(base)
            )
        } else {
            // The pool as it is now, if the shim saw it created and it lives; else as it was at
            // the allocation.
            let types = |pool_types: Option<u32>| created.map(|c| c.types).or(pool_types);
            match origin {
                Origin::Default => format!(
                    "{} is from a device's default pool (cuMemAllocAsync), which is not shared",
                    hex(ptr)
                ),
                Origin::Pool { pool, types: t } if types(t) == Some(0) => format!(
                    "{} is from pool {}, created with CU_MEM_HANDLE_TYPE_NONE: not shared",
                    hex(ptr),
                    hex(pool)
                ),
                Origin::Pool { pool, .. } if created.is_some_and(|c| !c.exported) => {
                    // Certain: the shim saw the pool made and no export of it succeed. Reported
                    // before the call (`REPORTED_BEFORE_CALL`): after a refused export R580 may
                    // not return from it.
                    let (refused, types) = created.map_or((None, 0), |c| (c.refused, c.types));
                    cx.flag(&cuda::EXPORT_POINTER_NOT_SHARED, || match refused {
                        Some(code) => format!(
                            "{} is from pool {}, whose export the driver refused ({}): it is \
                             not shared ({})",
                            hex(ptr),
                            hex(pool),
                            sharecheck_core::names::cuda_result_name(code)
                                .map_or_else(|| code.to_string(), |n| format!("{n}, {code}")),
                            if types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR != 0 {
                                "R580 answers CUDA_ERROR_UNKNOWN, and dies of SIGSEGV in the \
                                 next cuStreamSynchronize once this memory is freed"
                            } else {
                                "R580 dies of SIGSEGV in this call"
                            }
                        ),
                        None => format!(
                            "{} is from pool {}, which this process never exported \
                             (cuMemPoolExportToShareableHandle): its pointers export once it \
                             is shared",
                            hex(ptr),
                            hex(pool)
                        ),
                    });
                    return;
                }
                Origin::Pool { .. } => return,
            }
        };
        cx.tracked(&cuda::EXPORT_POINTER_NOT_SHARED, || why);
    }
}

impl Check<args::cuMemPoolImportPointer> for ImportPointer {
    type Plan = ();
    fn before(&self, a: &args::cuMemPoolImportPointer, cx: &mut Cx) {
        let pool = a.pool.addr();
        if state(cx).with(|p| p.created.contains_key(&pool)) {
            cx.flag(&cuda::IMPORT_POINTER_POOL_NOT_IMPORTED, || {
                format!(
                    "pool {} was created by this process (cuMemPoolCreate), not imported",
                    hex(pool)
                )
            });
        }
    }
}
