//! [`Facts`] answered by the real driver.
//!
//! The queries call the driver's own exports (never the shim's wrappers), so they are not recorded
//! as the program's calls. What cannot change while a process runs (device count, device
//! attributes, which devices can peer) is cached once the driver answered. What can change is
//! cached only where a stale answer can at worst hide a finding, never invent one: the device of a
//! context, the context of a stream, and the allocation range and owning device of a pointer are
//! cached (and forgotten when the shim sees the context, stream or memory end: any observed free
//! forgets every pointer), and checks ask again, uncached, before a finding rests on them.

use super::facts::{
    Facts, GranularityOf, MemoryKind, ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
    ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
    ATTRIBUTE_UNIFIED_ADDRESSING,
};
use super::state::Lifetime;
use crate::loader::{self, NamedSlot};
use sharecheck_core::codes::{NOT_READY, SUCCESS};
use sharecheck_core::ffi::{CUcontext, CUlogicalEndpointProp, CUstream};
use sharecheck_core::functions::{Api, FnId};
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, AtomicU8, Ordering::*};

const POINTER_ATTRIBUTE_CONTEXT: c_int = 1;
const POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
const POINTER_ATTRIBUTE_IS_MANAGED: c_int = 8;
const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
const MEMORYTYPE_DEVICE: c_int = 2;
const MEMORYTYPE_HOST: c_int = 1;
const POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: c_int = 10;
const POINTER_ATTRIBUTE_MEMPOOL_HANDLE: c_int = 17;

static CU_CTX_GET_CURRENT: NamedSlot = NamedSlot::new(Api::Cuda, c"cuCtxGetCurrent");
static CU_CTX_GET_DEVICE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuCtxGetDevice");
static CU_CTX_GET_DEVICE_V2: NamedSlot = NamedSlot::new(Api::Cuda, c"cuCtxGetDevice_v2");
static CU_DEVICE_GET_COUNT: NamedSlot = NamedSlot::new(Api::Cuda, c"cuDeviceGetCount");
static CU_DEVICE_GET_ATTRIBUTE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuDeviceGetAttribute");
static CU_DEVICE_GET_UUID_V2: NamedSlot = NamedSlot::new(Api::Cuda, c"cuDeviceGetUuid_v2");
static CU_DEVICE_GET_UUID: NamedSlot = NamedSlot::new(Api::Cuda, c"cuDeviceGetUuid");
static CU_MEM_GET_ADDRESS_RANGE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuMemGetAddressRange_v2");
static CU_POINTER_GET_ATTRIBUTE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuPointerGetAttribute");
static CU_POINTER_GET_ATTRIBUTES: NamedSlot = NamedSlot::new(Api::Cuda, c"cuPointerGetAttributes");
static CU_STREAM_GET_CTX: NamedSlot = NamedSlot::new(Api::Cuda, c"cuStreamGetCtx");
static CU_STREAM_QUERY: NamedSlot = NamedSlot::new(Api::Cuda, c"cuStreamQuery");
static CU_PRIMARY_CTX_GET_STATE: NamedSlot =
    NamedSlot::new(Api::Cuda, c"cuDevicePrimaryCtxGetState");

static HIP_GET_DEVICE: NamedSlot = NamedSlot::new(Api::Hip, c"hipGetDevice");
static HIP_GET_DEVICE_COUNT: NamedSlot = NamedSlot::new(Api::Hip, c"hipGetDeviceCount");
static HIP_RUNTIME_GET_VERSION: NamedSlot = NamedSlot::new(Api::Hip, c"hipRuntimeGetVersion");
static HIP_DEVICE_GET_UUID: NamedSlot = NamedSlot::new(Api::Hip, c"hipDeviceGetUuid");
static HIP_MEM_GET_ADDRESS_RANGE: NamedSlot = NamedSlot::new(Api::Hip, c"hipMemGetAddressRange");
static HIP_POINTER_GET_ATTRIBUTES: NamedSlot = NamedSlot::new(Api::Hip, c"hipPointerGetAttributes");
static HIP_STREAM_GET_DEVICE: NamedSlot = NamedSlot::new(Api::Hip, c"hipStreamGetDevice");
static HIP_PEEK_AT_LAST_ERROR: NamedSlot = NamedSlot::new(Api::Hip, c"hipPeekAtLastError");
static HIP_GET_LAST_ERROR: NamedSlot = NamedSlot::new(Api::Hip, c"hipGetLastError");

/// Calls `slot` as `unsafe extern "C" fn(Args) -> c_int`; `None` when the driver lacks it.
macro_rules! query {
    ($slot:expr, fn($($ty:ty),*) $(, $arg:expr)* $(,)?) => {{
        match $slot.get() {
            None => None,
            Some(address) => {
                // SAFETY: `address` is the driver's export of this name, whose C prototype
                // (cuda.h / hip_runtime_api.h) is the one spelled here; every pointer the driver
                // writes through points to a live local of the shim of the type the prototype
                // names; other pointer-typed arguments (the program's device addresses and
                // stream handles) are values the driver looks up, which the shim never reads
                // through.
                let f: unsafe extern "C" fn($($ty),*) -> c_int = unsafe { std::mem::transmute(address) };
                // SAFETY: as above.
                Some(crate::guard::asking(|| unsafe { f($($arg),*) }))
            }
        }
    }};
}

/// Devices whose static facts are cached (more are asked every time).
const CACHED_DEVICES: usize = 64;
/// Entries of the context and stream caches (direct-mapped by handle).
const CACHE_SLOTS: usize = 256;
/// Entries of the pointer cache: room for the buffers of many threads' copies.
const POINTER_SLOTS: usize = 512;

/// Fibonacci hashing onto `slots` (a power of two): keys that differ only in low bits spread.
fn slot_of(key: u64, slots: usize) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - slots.trailing_zeros())) as usize
}
const UNKNOWN_I64: i64 = i64::MIN;
/// Cached attributes, by index into this list.
const CACHED_ATTRIBUTES: [c_int; 4] = [
    ATTRIBUTE_UNIFIED_ADDRESSING,
    ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
    ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
    ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
];

/// A handle-keyed cache that tolerates races: a torn or stale entry can only give an answer that
/// checks confirm (uncached) before they report, or that hides a finding.
struct HandleCache {
    keys: [AtomicU64; CACHE_SLOTS],
    values: [AtomicU64; CACHE_SLOTS],
}

impl HandleCache {
    const fn new() -> Self {
        HandleCache {
            keys: [const { AtomicU64::new(0) }; CACHE_SLOTS],
            values: [const { AtomicU64::new(0) }; CACHE_SLOTS],
        }
    }

    fn slot(key: u64) -> usize {
        slot_of(key, CACHE_SLOTS)
    }

    fn get(&self, key: u64) -> Option<u64> {
        let i = Self::slot(key);
        if key == 0 || self.keys[i].load(Acquire) != key {
            return None;
        }
        let value = self.values[i].load(Acquire);
        (self.keys[i].load(Acquire) == key).then_some(value)
    }

    fn put(&self, key: u64, value: u64) {
        if key == 0 {
            return;
        }
        let i = Self::slot(key);
        self.keys[i].store(0, Release);
        self.values[i].store(value, Release);
        self.keys[i].store(key, Release);
    }

    fn forget(&self, key: u64) {
        let i = Self::slot(key);
        let _ = self.keys[i].compare_exchange(key, 0, AcqRel, Acquire);
    }

    fn forget_if(&self, mut stale: impl FnMut(u64) -> bool) {
        for i in 0..CACHE_SLOTS {
            let key = self.keys[i].load(Acquire);
            if key != 0 && stale(self.values[i].load(Acquire)) {
                let _ = self.keys[i].compare_exchange(key, 0, AcqRel, Acquire);
            }
        }
    }

    fn clear(&self) {
        for key in &self.keys {
            key.store(0, Release);
        }
    }
}

/// What the driver said of one pointer: its allocation's range and its owning device.
#[derive(Clone, Copy, PartialEq, Eq)]
struct PointerFacts {
    /// `(base, size)`; size 0: not asked yet.
    range: (u64, u64),
    /// `OWNER_UNKNOWN`: not asked yet; `OWNER_NONE`: not plain device memory.
    owner: i64,
    /// [`kind_code`] of the memory's kind; `KIND_UNKNOWN`: not asked yet (or the driver did not
    /// know the pointer, which is never cached).
    kind: u64,
    /// The context the memory was allocated in; 0: not asked yet (or none).
    context: u64,
}

const KIND_UNKNOWN: u64 = 0;
const KINDS: [MemoryKind; 5] = [
    MemoryKind::Device,
    MemoryKind::Managed,
    MemoryKind::Pool,
    MemoryKind::Host,
    MemoryKind::Other,
];

/// A memory kind as the pointer cache keeps it (never `KIND_UNKNOWN`).
fn kind_code(kind: MemoryKind) -> u64 {
    KINDS
        .iter()
        .position(|&k| k == kind)
        .map_or(KIND_UNKNOWN, |i| i as u64 + 1)
}

fn kind_of(code: u64) -> Option<MemoryKind> {
    KINDS
        .get(usize::try_from(code).ok()?.checked_sub(1)?)
        .copied()
}

impl PointerFacts {
    /// Nothing known yet.
    const NOTHING: PointerFacts = PointerFacts {
        range: (0, 0),
        owner: OWNER_UNKNOWN,
        kind: KIND_UNKNOWN,
        context: 0,
    };
}

const OWNER_UNKNOWN: i64 = i64::MIN;
const OWNER_NONE: i64 = -1;

/// One slot of the pointer cache: a sequence lock (odd while written) over the entry's words, on
/// one cache line of its own (issue 24).
#[repr(C, align(64))]
struct PointerSlot {
    seq: AtomicU64,
    ptr: AtomicU64,
    epoch: AtomicU64,
    base: AtomicU64,
    size: AtomicU64,
    owner: AtomicI64,
    kind: AtomicU64,
    context: AtomicU64,
}

/// Pointer facts, valid until memory is freed anywhere: the epoch moves on every observed free,
/// unmap, release, context destruction and primary-context end. Lock-free: a slot being written
/// is simply a miss.
struct PointerCache {
    /// The epoch of a cache of its own (tests); the process's facts use the process's frees
    /// ([`super::memo::process_frees`]), part of the checks' generation.
    own_epoch: AtomicU64,
    slots: [PointerSlot; POINTER_SLOTS],
}

impl PointerCache {
    const fn new() -> Self {
        PointerCache {
            own_epoch: AtomicU64::new(1),
            slots: [const {
                PointerSlot {
                    seq: AtomicU64::new(0),
                    ptr: AtomicU64::new(0),
                    epoch: AtomicU64::new(0),
                    base: AtomicU64::new(0),
                    size: AtomicU64::new(0),
                    owner: AtomicI64::new(OWNER_UNKNOWN),
                    kind: AtomicU64::new(KIND_UNKNOWN),
                    context: AtomicU64::new(0),
                }
            }; POINTER_SLOTS],
        }
    }

    #[link_section = ".text.hot.sharecheck"]
    fn get(&self, ptr: u64) -> Option<PointerFacts> {
        let slot = &self.slots[slot_of(ptr, POINTER_SLOTS)];
        let before = slot.seq.load(Acquire);
        if before & 1 == 1 {
            return None;
        }
        let (key, epoch) = (slot.ptr.load(Relaxed), slot.epoch.load(Relaxed));
        let facts = PointerFacts {
            range: (slot.base.load(Relaxed), slot.size.load(Relaxed)),
            owner: slot.owner.load(Relaxed),
            kind: slot.kind.load(Relaxed),
            context: slot.context.load(Relaxed),
        };
        std::sync::atomic::fence(Acquire);
        let valid =
            slot.seq.load(Relaxed) == before && key == ptr && epoch == self.epoch().load(Acquire);
        valid.then_some(facts)
    }

    /// Merges what was learnt into the slot (skipped when another thread is writing it). `epoch`
    /// is the one read before the driver was asked, so an answer older than a free is never
    /// stored as current.
    fn put(&self, ptr: u64, epoch: u64, learnt: PointerFacts) {
        let slot = &self.slots[slot_of(ptr, POINTER_SLOTS)];
        let before = slot.seq.load(Relaxed);
        if before & 1 == 1
            || slot
                .seq
                .compare_exchange(before, before + 1, Acquire, Relaxed)
                .is_err()
        {
            return;
        }
        std::sync::atomic::fence(Release);
        let same = slot.ptr.load(Relaxed) == ptr && slot.epoch.load(Relaxed) == epoch;
        let mut merged = learnt;
        if same {
            if merged.range.1 == 0 {
                merged.range = (slot.base.load(Relaxed), slot.size.load(Relaxed));
            }
            if merged.owner == OWNER_UNKNOWN {
                merged.owner = slot.owner.load(Relaxed);
            }
            if merged.kind == KIND_UNKNOWN {
                merged.kind = slot.kind.load(Relaxed);
            }
            if merged.context == 0 {
                merged.context = slot.context.load(Relaxed);
            }
        }
        slot.ptr.store(ptr, Relaxed);
        slot.epoch.store(epoch, Relaxed);
        slot.base.store(merged.range.0, Relaxed);
        slot.size.store(merged.range.1, Relaxed);
        slot.owner.store(merged.owner, Relaxed);
        slot.kind.store(merged.kind, Relaxed);
        slot.context.store(merged.context, Relaxed);
        slot.seq.store(before + 2, Release);
        if self.is_process() {
            // After the slot: a free that reads an older epoch here skips the lookup and keeps
            // its free without a size, which only makes its explanation less precise.
            super::memo::process_cached().fetch_max(epoch, Release);
        }
    }

    /// Whether a slot may hold facts of the current epoch: on the process's cache, whether one
    /// was written in this epoch (every free moves it, so after a free nothing is current until
    /// a fact is learnt again); a cache of its own (tests) always may.
    #[inline(always)]
    fn may_hold_current(&self) -> bool {
        !self.is_process()
            || super::memo::process_cached().load(Acquire) == self.epoch().load(Acquire)
    }

    /// Whether this is the process's cache (`super::DRIVER`'s): told by its address, which
    /// reads no line (issue 24).
    #[inline(always)]
    fn is_process(&self) -> bool {
        std::ptr::eq(self, &super::DRIVER.pointers)
    }

    #[inline(always)]
    fn epoch(&self) -> &AtomicU64 {
        if self.is_process() {
            super::memo::process_frees()
        } else {
            &self.own_epoch
        }
    }

    /// Moves the epoch on; returns the add's number.
    fn invalidate(&self) -> u64 {
        self.epoch().fetch_add(1, AcqRel)
    }
}

/// The driver, asked directly, with the caches described in the module documentation.
pub struct DriverFacts {
    device_count: AtomicI32,
    attributes: [[AtomicI64; CACHED_DEVICES]; CACHED_ATTRIBUTES.len()],
    /// 0 unknown, 1 cannot, 2 can; `[dev * CACHED_DEVICES + peer]`.
    peers: [AtomicU8; CACHED_DEVICES * CACHED_DEVICES],
    /// Each device's UUID (it never changes): its two halves, then `uuid_known` set.
    uuids: [[AtomicU64; 2]; CACHED_DEVICES],
    uuid_known: [AtomicU8; CACHED_DEVICES],
    /// The same for HIP's devices, and HIP's device count (-1: not asked yet).
    hip_uuids: [[AtomicU64; 2]; CACHED_DEVICES],
    hip_uuid_known: [AtomicU8; CACHED_DEVICES],
    hip_device_count: AtomicI32,
    /// HIP's runtime version (-1: not asked yet; it never changes).
    hip_runtime_version: AtomicI32,
    /// Context handle -> its device.
    context_devices: HandleCache,
    /// Stream handle -> its context.
    stream_contexts: HandleCache,
    /// Contexts the program destroyed (value 1), never asked about (`Facts::context_destroyed`).
    destroyed_contexts: HandleCache,
    /// Pointer -> its allocation's range and owning device.
    pointers: PointerCache,
    /// The last properties (their 32 bytes) whose minimum granularity was asked, of which kind,
    /// and the answer (a device's granularity never changes).
    granularity: parking_lot::Mutex<Option<(GranularityOf, [u64; 4], u64)>>,
}

impl DriverFacts {
    /// Facts with nothing cached. The process's (`super::DRIVER`) take their pointer epoch from
    /// the process's frees; any others (tests) keep one of their own.
    pub const fn new() -> Self {
        DriverFacts {
            device_count: AtomicI32::new(-1),
            attributes: [const { [const { AtomicI64::new(UNKNOWN_I64) }; CACHED_DEVICES] };
                CACHED_ATTRIBUTES.len()],
            peers: [const { AtomicU8::new(0) }; CACHED_DEVICES * CACHED_DEVICES],
            uuids: [const { [const { AtomicU64::new(0) }; 2] }; CACHED_DEVICES],
            uuid_known: [const { AtomicU8::new(0) }; CACHED_DEVICES],
            hip_uuids: [const { [const { AtomicU64::new(0) }; 2] }; CACHED_DEVICES],
            hip_uuid_known: [const { AtomicU8::new(0) }; CACHED_DEVICES],
            hip_device_count: AtomicI32::new(-1),
            hip_runtime_version: AtomicI32::new(-1),
            context_devices: HandleCache::new(),
            stream_contexts: HandleCache::new(),
            destroyed_contexts: HandleCache::new(),
            pointers: PointerCache::new(),
            granularity: parking_lot::const_mutex(None),
        }
    }

    /// Something the caches may hold has ended.
    #[inline]
    fn forget_cached(&self, gone: Lifetime) {
        match gone {
            Lifetime::ContextDestroyed(ctx) => {
                self.destroyed_contexts.put(ctx, 1);
                self.context_devices.forget(ctx);
                self.stream_contexts.forget_if(|c| c == ctx);
                let _ = self.pointers.invalidate(); // its memory is freed with it
            }
            Lifetime::StreamDestroyed(stream) => self.stream_contexts.forget(stream),
            Lifetime::PrimaryContextEnded(_) => {
                // The primary context's handle may come back for a new context: forget all.
                self.context_devices.clear();
                self.stream_contexts.clear();
                let _ = self.pointers.invalidate();
            }
            Lifetime::HipDeviceReset(_) => {}
            Lifetime::MemoryFreed => {
                let _ = self.pointers.invalidate();
            }
        }
    }

    /// In a forked child: the parent's driver state is not the child's.
    pub fn reset(&self) {
        self.device_count.store(-1, Relaxed);
        for row in &self.attributes {
            for a in row {
                a.store(UNKNOWN_I64, Relaxed);
            }
        }
        for p in &self.peers {
            p.store(0, Relaxed);
        }
        self.context_devices.clear();
        self.stream_contexts.clear();
        let _ = self.pointers.invalidate();
    }

    fn query_range(&self, ptr: u64) -> Option<(u64, u64)> {
        let (mut base, mut size) = (0u64, 0usize);
        let code = query!(
            CU_MEM_GET_ADDRESS_RANGE,
            fn(*mut u64, *mut usize, u64),
            &mut base,
            &mut size,
            ptr
        )?;
        (code == SUCCESS).then_some((base, size as u64))
    }

    /// `Some(None)`: not plain device memory.
    fn query_owner(&self, ptr: u64) -> Option<Option<i32>> {
        // One call for the three attributes where the driver has cuPointerGetAttributes.
        let mut attributes = [
            POINTER_ATTRIBUTE_MEMORY_TYPE,
            POINTER_ATTRIBUTE_IS_MANAGED,
            POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        ];
        // Zeroed: IS_MANAGED may be written as a single byte.
        let (mut memory_type, mut managed, mut ordinal): (c_uint, c_int, c_int) = (0, 0, -1);
        let mut data: [*mut c_void; 3] = [
            (&mut memory_type as *mut c_uint).cast(),
            (&mut managed as *mut c_int).cast(),
            (&mut ordinal as *mut c_int).cast(),
        ];
        let code = query!(
            CU_POINTER_GET_ATTRIBUTES,
            fn(c_uint, *mut c_int, *mut *mut c_void, u64),
            3,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr
        );
        let (memory_type, managed, ordinal) = match code {
            Some(SUCCESS) => (memory_type as c_int, managed, ordinal),
            Some(_) => return None,
            None => (
                self.pointer_attribute(ptr, POINTER_ATTRIBUTE_MEMORY_TYPE)?,
                self.pointer_attribute(ptr, POINTER_ATTRIBUTE_IS_MANAGED)?,
                self.pointer_attribute(ptr, POINTER_ATTRIBUTE_DEVICE_ORDINAL)?,
            ),
        };
        Some((memory_type == MEMORYTYPE_DEVICE && managed == 0 && ordinal >= 0).then_some(ordinal))
    }

    /// `CU_POINTER_ATTRIBUTE_CONTEXT` of `ptr`, asked.
    fn query_allocation_context(&self, ptr: u64) -> Option<u64> {
        let mut ctx: *mut c_void = std::ptr::null_mut();
        let code = query!(
            CU_POINTER_GET_ATTRIBUTE,
            fn(*mut c_void, c_int, u64),
            (&mut ctx as *mut *mut c_void).cast(),
            POINTER_ATTRIBUTE_CONTEXT,
            ptr
        )?;
        (code == SUCCESS && !ctx.is_null()).then_some(ctx as usize as u64)
    }

    /// The four attributes that say what kind of memory `ptr` is to legacy IPC, in one call
    /// where the driver has `cuPointerGetAttributes` (which answers zeros for a pointer it does
    /// not know: memory type 0, so `None`).
    fn query_memory_kind(&self, ptr: u64) -> Option<MemoryKind> {
        let mut attributes = [
            POINTER_ATTRIBUTE_MEMORY_TYPE,
            POINTER_ATTRIBUTE_IS_MANAGED,
            POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
            POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
        ];
        // Zeroed: the booleans may be written as a single byte.
        let (mut memory_type, mut managed, mut capable): (c_uint, c_int, c_int) = (0, 0, 0);
        let mut pool: *mut c_void = std::ptr::null_mut();
        let mut data: [*mut c_void; 4] = [
            (&mut memory_type as *mut c_uint).cast(),
            (&mut managed as *mut c_int).cast(),
            (&mut capable as *mut c_int).cast(),
            (&mut pool as *mut *mut c_void).cast(),
        ];
        let code = query!(
            CU_POINTER_GET_ATTRIBUTES,
            fn(c_uint, *mut c_int, *mut *mut c_void, u64),
            4,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr
        )?;
        if code != SUCCESS {
            return None;
        }
        Some(match memory_type as c_int {
            0 => return None,
            _ if managed != 0 => MemoryKind::Managed,
            _ if !pool.is_null() => MemoryKind::Pool,
            MEMORYTYPE_HOST => MemoryKind::Host,
            _ if capable != 0 => MemoryKind::Device,
            _ => MemoryKind::Other,
        })
    }

    fn pointer_attribute(&self, ptr: u64, attribute: c_int) -> Option<c_int> {
        // Zeroed: boolean attributes may be written as a single byte.
        let mut value: c_int = 0;
        let code = query!(
            CU_POINTER_GET_ATTRIBUTE,
            fn(*mut c_void, c_int, u64),
            (&mut value as *mut c_int).cast(),
            attribute,
            ptr
        )?;
        (code == SUCCESS).then_some(value)
    }
}

fn device_index(dev: i32) -> Option<usize> {
    usize::try_from(dev).ok().filter(|&d| d < CACHED_DEVICES)
}

impl DriverFacts {
    /// [`Facts::cached_range`] without the trait object ([`super::cached_range`] calls it so),
    /// and, on the process's cache, without reaching the cache's slot when nothing was cached
    /// since the last free (a word on the line the free's locked add writes anyway): a loop of
    /// allocations and frees reads one line fewer per free.
    #[inline(always)]
    pub(super) fn cached_range_now(&self, ptr: u64) -> Option<(u64, u64)> {
        if !self.pointers.may_hold_current() {
            return None;
        }
        Facts::cached_range(self, ptr)
    }

    /// [`Facts::memory_freed`], inline: on the process's driver (a static) it folds to one
    /// locked add ([`super::Cx::memory_freed`] calls it so).
    #[inline(always)]
    pub(super) fn freed(&self) -> u64 {
        let n = self.pointers.invalidate();
        if !self.pointers.is_process() {
            super::moved_on();
        }
        n
    }
}

impl Facts for DriverFacts {
    #[inline]
    fn forget(&self, gone: Lifetime) {
        self.forget_cached(gone);
    }

    /// The process's facts' pointer epoch is part of the checks' generation
    /// ([`super::generation`]): moving it moves both, with one locked add.
    #[link_section = ".text.hot.sharecheck"]
    fn memory_freed(&self) -> u64 {
        self.freed()
    }

    fn memory_kind(&self, ptr: u64, fresh: bool) -> Option<MemoryKind> {
        let epoch = self.pointers.epoch().load(Acquire);
        if !fresh {
            if let Some(kind) = self.pointers.get(ptr).and_then(|f| kind_of(f.kind)) {
                return Some(kind);
            }
        }
        let kind = self.query_memory_kind(ptr)?;
        let learnt = PointerFacts {
            kind: kind_code(kind),
            ..PointerFacts::NOTHING
        };
        self.pointers.put(ptr, epoch, learnt);
        Some(kind)
    }

    fn device_uuid(&self, dev: i32) -> Option<[u8; 16]> {
        let cached = device_index(dev);
        if let Some(d) = cached.filter(|&d| self.uuid_known[d].load(Acquire) == 1) {
            let halves = [
                self.uuids[d][0].load(Relaxed),
                self.uuids[d][1].load(Relaxed),
            ];
            let mut uuid = [0u8; 16];
            uuid[..8].copy_from_slice(&halves[0].to_le_bytes());
            uuid[8..].copy_from_slice(&halves[1].to_le_bytes());
            return Some(uuid);
        }
        let uuid = query_device_uuid(dev)?;
        if let Some(d) = cached {
            let half = |i: usize| u64::from_le_bytes(uuid[i * 8..i * 8 + 8].try_into().unwrap());
            self.uuids[d][0].store(half(0), Relaxed);
            self.uuids[d][1].store(half(1), Relaxed);
            self.uuid_known[d].store(1, Release);
        }
        Some(uuid)
    }

    fn allocation_context(&self, ptr: u64) -> Option<u64> {
        let epoch = self.pointers.epoch().load(Acquire);
        if let Some(known) = self.pointers.get(ptr).filter(|f| f.context != 0) {
            return Some(known.context);
        }
        let ctx = self.query_allocation_context(ptr)?;
        let learnt = PointerFacts {
            context: ctx,
            ..PointerFacts::NOTHING
        };
        self.pointers.put(ptr, epoch, learnt);
        Some(ctx)
    }

    fn current_context(&self) -> Option<Option<CUcontext>> {
        let mut ctx = CUcontext::NULL;
        let code = query!(CU_CTX_GET_CURRENT, fn(*mut CUcontext), &mut ctx)?;
        (code == SUCCESS).then_some((ctx != CUcontext::NULL).then_some(ctx))
    }

    fn current_device(&self) -> Option<i32> {
        let mut dev: c_int = -1;
        let code = query!(CU_CTX_GET_DEVICE, fn(*mut c_int), &mut dev)?;
        (code == SUCCESS).then_some(dev)
    }

    fn context_destroyed(&self, ctx: CUcontext) -> bool {
        self.destroyed_contexts.get(ctx.addr()).is_some()
    }

    fn context_alive(&self, ctx: CUcontext) {
        self.destroyed_contexts.forget(ctx.addr());
    }

    fn context_device(&self, ctx: CUcontext, fresh: bool) -> Option<Result<i32, c_int>> {
        if ctx == CUcontext::NULL {
            return None; // NULL means "the current context" to cuCtxGetDevice_v2.
        }
        if self.context_destroyed(ctx) {
            // Never asked: see `Facts::context_destroyed`.
            return Some(Err(sharecheck_core::codes::CONTEXT_IS_DESTROYED));
        }
        if !fresh {
            if let Some(dev) = self.context_devices.get(ctx.addr()) {
                return Some(Ok(dev as i32));
            }
        }
        let mut dev: c_int = -1;
        let code = query!(
            CU_CTX_GET_DEVICE_V2,
            fn(*mut c_int, CUcontext),
            &mut dev,
            ctx
        )?;
        if code == SUCCESS {
            self.context_devices.put(ctx.addr(), u64::from(dev as u32));
            Some(Ok(dev))
        } else {
            self.context_devices.forget(ctx.addr());
            Some(Err(code))
        }
    }

    fn device_count(&self) -> Option<i32> {
        let cached = self.device_count.load(Relaxed);
        if cached >= 0 {
            return Some(cached);
        }
        let mut count: c_int = 0;
        let code = query!(CU_DEVICE_GET_COUNT, fn(*mut c_int), &mut count)?;
        (code == SUCCESS).then(|| {
            self.device_count.store(count, Relaxed);
            count
        })
    }

    fn attribute(&self, dev: i32, attribute: c_int) -> Option<i32> {
        let slot = CACHED_ATTRIBUTES
            .iter()
            .position(|&a| a == attribute)
            .zip(device_index(dev))
            .map(|(a, d)| &self.attributes[a][d]);
        if let Some(v) = slot.map(|s| s.load(Relaxed)).filter(|&v| v != UNKNOWN_I64) {
            return Some(v as i32);
        }
        let mut value: c_int = 0;
        let code = query!(
            CU_DEVICE_GET_ATTRIBUTE,
            fn(*mut c_int, c_int, c_int),
            &mut value,
            attribute,
            dev
        )?;
        (code == SUCCESS).then(|| {
            if let Some(s) = slot {
                s.store(value.into(), Relaxed);
            }
            value
        })
    }

    fn can_access_peer(&self, dev: i32, peer: i32) -> Option<bool> {
        let slot = device_index(dev)
            .zip(device_index(peer))
            .map(|(d, p)| &self.peers[d * CACHED_DEVICES + p]);
        match slot.map(|s| s.load(Relaxed)) {
            Some(1) => return Some(false),
            Some(2) => return Some(true),
            _ => {}
        }
        let address = loader::real_function(FnId::cuDeviceCanAccessPeer)?;
        let mut can: c_int = 0;
        // SAFETY: the driver's cuDeviceCanAccessPeer(int *, CUdevice, CUdevice).
        let f: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int =
            unsafe { std::mem::transmute(address) };
        // SAFETY: `can` is a live local int.
        let code = crate::guard::asking(|| unsafe { f(&mut can, dev, peer) });
        (code == SUCCESS).then(|| {
            if let Some(s) = slot {
                s.store(if can != 0 { 2 } else { 1 }, Relaxed);
            }
            can != 0
        })
    }

    fn endpoint_limits(&self, prop: &CUlogicalEndpointProp) -> Option<(u64, u64)> {
        let address = loader::real_function(FnId::cuLogicalEndpointGetLimits)?;
        // SAFETY: the driver's cuLogicalEndpointGetLimits(cuuint64_t *, cuuint64_t *,
        // const CUlogicalEndpointProp *).
        let f: unsafe extern "C" fn(*mut u64, *mut u64, *const CUlogicalEndpointProp) -> c_int =
            unsafe { std::mem::transmute(address) };
        let (mut alignment, mut max) = (0u64, 0u64);
        // SAFETY: two live local words, and a copy of the properties the shim holds.
        let code = crate::guard::asking(|| unsafe { f(&mut alignment, &mut max, prop) });
        (code == SUCCESS && alignment > 0).then_some((alignment, max))
    }

    fn granularity(&self, of: GranularityOf, prop: &[u64; 4]) -> Option<u64> {
        // CU_MEM_ALLOC_GRANULARITY_MINIMUM and CU_MULTICAST_GRANULARITY_MINIMUM.
        const MINIMUM: c_int = 0;
        // The last properties asked about: a program creates its chunks alike.
        let last = *self.granularity.lock();
        if let Some((_, _, g)) = last.filter(|(kind, known, _)| *kind == of && known == prop) {
            return Some(g);
        }
        let function = match of {
            GranularityOf::Allocation => FnId::cuMemGetAllocationGranularity,
            GranularityOf::Multicast => FnId::cuMulticastGetGranularity,
        };
        let address = loader::real_function(function)?;
        // SAFETY: the driver's cuMemGetAllocationGranularity(size_t *, const CUmemAllocationProp
        // *, CUmemAllocationGranularity_flags) or cuMulticastGetGranularity(size_t *, const
        // CUmulticastObjectProp *, CUmulticastGranularity_flags): the same shape.
        let f: unsafe extern "C" fn(*mut usize, *const [u64; 4], c_int) -> c_int =
            unsafe { std::mem::transmute(address) };
        let mut granularity = 0usize;
        // SAFETY: a live local size_t, and the shim's own copy of the properties.
        let code = crate::guard::asking(|| unsafe { f(&mut granularity, prop, MINIMUM) });
        let granularity = (code == SUCCESS && granularity > 0).then_some(granularity as u64)?;
        *self.granularity.lock() = Some((of, *prop, granularity));
        Some(granularity)
    }

    fn imex(&self) -> super::facts::Imex {
        super::facts::host_imex()
    }

    #[link_section = ".text.hot.sharecheck"]
    fn cached_range(&self, ptr: u64) -> Option<(u64, u64)> {
        self.pointers
            .get(ptr)
            .filter(|f| f.range.1 != 0)
            .map(|f| f.range)
    }

    fn allocation_range(&self, ptr: u64, fresh: bool) -> Option<(u64, u64)> {
        let epoch = self.pointers.epoch().load(Acquire);
        if !fresh {
            if let Some(known) = self.pointers.get(ptr).filter(|f| f.range.1 != 0) {
                return Some(known.range);
            }
        }
        let range = self.query_range(ptr)?;
        let learnt = PointerFacts {
            range,
            ..PointerFacts::NOTHING
        };
        self.pointers.put(ptr, epoch, learnt);
        Some(range)
    }

    fn device_memory_owner(&self, ptr: u64, fresh: bool) -> Option<i32> {
        let epoch = self.pointers.epoch().load(Acquire);
        if !fresh {
            if let Some(known) = self.pointers.get(ptr).filter(|f| f.owner != OWNER_UNKNOWN) {
                return (known.owner >= 0).then_some(known.owner as i32);
            }
        }
        let owner = self.query_owner(ptr)?;
        let learnt = PointerFacts {
            owner: owner.map_or(OWNER_NONE, i64::from),
            ..PointerFacts::NOTHING
        };
        self.pointers.put(ptr, epoch, learnt);
        owner
    }

    fn stream_context(&self, stream: CUstream, fresh: bool) -> Option<Result<CUcontext, c_int>> {
        if !fresh {
            if let Some(ctx) = self.stream_contexts.get(stream.addr()) {
                return Some(Ok(CUcontext(ctx as usize as *mut c_void)));
            }
        }
        let mut ctx = CUcontext::NULL;
        let code = query!(
            CU_STREAM_GET_CTX,
            fn(CUstream, *mut CUcontext),
            stream,
            &mut ctx
        )?;
        if code == SUCCESS {
            self.stream_contexts.put(stream.addr(), ctx.addr());
            Some(Ok(ctx))
        } else {
            self.stream_contexts.forget(stream.addr());
            Some(Err(code))
        }
    }

    fn stream_busy(&self, stream: u64) -> Option<bool> {
        let handle = CUstream(stream as usize as *mut c_void);
        match query!(CU_STREAM_QUERY, fn(CUstream), handle)? {
            SUCCESS => Some(false),
            NOT_READY => Some(true),
            _ => None,
        }
    }

    fn primary_context_active(&self, dev: i32) -> Option<bool> {
        let (mut flags, mut active): (c_uint, c_int) = (0, 0);
        let code = query!(
            CU_PRIMARY_CTX_GET_STATE,
            fn(c_int, *mut c_uint, *mut c_int),
            dev,
            &mut flags,
            &mut active
        )?;
        (code == SUCCESS).then_some(active != 0)
    }

    fn hip_last_error_clear(&self) -> bool {
        query!(HIP_PEEK_AT_LAST_ERROR, fn()) == Some(SUCCESS) && HIP_GET_LAST_ERROR.get().is_some()
    }

    fn hip_clear_last_error(&self) {
        let _ = query!(HIP_GET_LAST_ERROR, fn());
    }

    fn hip_current_device(&self) -> Option<(c_int, i32)> {
        let mut dev: c_int = -1;
        query!(HIP_GET_DEVICE, fn(*mut c_int), &mut dev).map(|code| (code, dev))
    }

    fn hip_device_count(&self) -> Option<(c_int, i32)> {
        // The count never changes: asked once (HIP_VISIBLE_DEVICES is read at the runtime's start).
        let cached = self.hip_device_count.load(Relaxed);
        if cached >= 0 {
            return Some((SUCCESS, cached));
        }
        let mut count: c_int = 0;
        let code = query!(HIP_GET_DEVICE_COUNT, fn(*mut c_int), &mut count)?;
        if code == SUCCESS {
            self.hip_device_count.store(count, Relaxed);
        }
        Some((code, count))
    }

    fn hip_runtime_version(&self) -> Option<(c_int, i32)> {
        let cached = self.hip_runtime_version.load(Relaxed);
        if cached >= 0 {
            return Some((SUCCESS, cached));
        }
        let mut version: c_int = 0;
        let code = query!(HIP_RUNTIME_GET_VERSION, fn(*mut c_int), &mut version)?;
        if code == SUCCESS && version >= 0 {
            self.hip_runtime_version.store(version, Relaxed);
        }
        Some((code, version))
    }

    fn hip_device_uuid(&self, dev: i32) -> Option<(c_int, [u8; 16])> {
        // A device's UUID never changes: asked once per device.
        let cached = device_index(dev);
        if let Some(d) = cached.filter(|&d| self.hip_uuid_known[d].load(Acquire) == 1) {
            let mut uuid = [0u8; 16];
            uuid[..8].copy_from_slice(&self.hip_uuids[d][0].load(Relaxed).to_le_bytes());
            uuid[8..].copy_from_slice(&self.hip_uuids[d][1].load(Relaxed).to_le_bytes());
            return Some((SUCCESS, uuid));
        }
        let mut uuid = [0u8; 16];
        let code = query!(
            HIP_DEVICE_GET_UUID,
            fn(*mut [u8; 16], c_int),
            &mut uuid,
            dev
        )?;
        if let Some(d) = cached.filter(|_| code == SUCCESS) {
            let half = |i: usize| u64::from_le_bytes(uuid[i * 8..i * 8 + 8].try_into().unwrap());
            self.hip_uuids[d][0].store(half(0), Relaxed);
            self.hip_uuids[d][1].store(half(1), Relaxed);
            self.hip_uuid_known[d].store(1, Release);
        }
        Some((code, uuid))
    }

    fn hip_can_access_peer(&self, dev: i32, peer: i32) -> Option<(c_int, bool)> {
        let address = loader::real_function(FnId::hipDeviceCanAccessPeer)?;
        let mut can: c_int = 0;
        // SAFETY: the runtime's hipDeviceCanAccessPeer(int *, int, int).
        let f: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int =
            unsafe { std::mem::transmute(address) };
        // SAFETY: `can` is a live local int.
        let code = crate::guard::asking(|| unsafe { f(&mut can, dev, peer) });
        Some((code, can != 0))
    }

    fn hip_allocation_range(&self, ptr: u64) -> Option<(c_int, (u64, u64))> {
        let (mut base, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        let code = query!(
            HIP_MEM_GET_ADDRESS_RANGE,
            fn(*mut *mut c_void, *mut usize, *mut c_void),
            &mut base,
            &mut size,
            ptr as usize as *mut c_void
        )?;
        Some((code, (base as usize as u64, size as u64)))
    }

    /// Read from `hipPointerAttribute_t`, whose layout every HIP version shares where it matters
    /// here: `int device` at byte 4, `void *hostPointer` at 16, `int isManaged` at 24 (the memory
    /// type enum at 0 changed its values in ROCm 6, so it is not used). The buffer is larger than
    /// any version's struct and starts zeroed.
    fn hip_device_memory_owner(&self, ptr: u64) -> Option<(c_int, Option<i32>)> {
        let mut attributes = [0u64; 16];
        let code = query!(
            HIP_POINTER_GET_ATTRIBUTES,
            fn(*mut c_void, *const c_void),
            attributes.as_mut_ptr().cast(),
            ptr as usize as *const c_void
        )?;
        let device = (attributes[0] >> 32) as u32 as i32;
        let host_pointer = attributes[2];
        let is_managed = attributes[3] as u32;
        Some((
            code,
            (host_pointer == 0 && is_managed == 0).then_some(device),
        ))
    }

    fn hip_stream_device(&self, stream: *mut c_void) -> Option<(c_int, i32)> {
        let mut dev: c_int = -1;
        query!(
            HIP_STREAM_GET_DEVICE,
            fn(*mut c_void, *mut c_int),
            stream,
            &mut dev
        )
        .map(|code| (code, dev))
    }
}

/// A device's UUID, asked of the driver (`cuDeviceGetUuid_v2`, else `cuDeviceGetUuid`).
fn query_device_uuid(dev: i32) -> Option<[u8; 16]> {
    let mut uuid = [0u8; 16];
    let code = query!(
        CU_DEVICE_GET_UUID_V2,
        fn(*mut [u8; 16], c_int),
        &mut uuid,
        dev
    )
    .or_else(|| query!(CU_DEVICE_GET_UUID, fn(*mut [u8; 16], c_int), &mut uuid, dev))?;
    (code == SUCCESS).then_some(uuid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(range: (u64, u64), owner: i64) -> PointerFacts {
        PointerFacts {
            range,
            owner,
            ..PointerFacts::NOTHING
        }
    }

    /// A free moves the checks' generation with the one locked add that drops the pointer
    /// facts (the process's facts: their epoch is part of the generation), and through any
    /// other instance too; only a move of either part moves it.
    #[test]
    fn a_free_moves_the_generation_through_the_pointer_epoch() {
        let frees = || crate::engine::memo::process_frees().load(Acquire);
        let before = (crate::engine::generation(), frees());
        super::super::driver().memory_freed();
        let after = (crate::engine::generation(), frees());
        assert!(after.1 > before.1, "the epoch moved");
        assert!(after.0 > before.0, "the generation moved with it");
        let other = DriverFacts::new();
        let before = crate::engine::generation();
        other.memory_freed();
        assert!(crate::engine::generation() > before);
    }

    /// A free through a call's context on the process's driver (its step taken inline, not
    /// through the trait object) does what the driver's own step does: the pointer epoch and
    /// the generation move, and it answers the free's own number.
    #[test]
    fn a_free_through_a_calls_context_is_the_drivers_own_step() {
        let engine = super::super::states();
        let mut cx =
            super::super::Cx::new(super::super::driver(), engine, super::super::options(), 0);
        let frees = || crate::engine::memo::process_frees().load(Acquire);
        let (generation, epoch) = (crate::engine::generation(), frees());
        let n = cx.memory_freed();
        assert!(n >= epoch, "the number is the epoch's before the add");
        assert!(frees() > n, "the epoch moved past it");
        assert!(
            crate::engine::generation() > generation,
            "the generation moved"
        );
        let m = cx.memory_freed();
        assert!(m > n, "every free has its own number");
        cx.dispose();
    }

    #[test]
    fn a_cached_pointer_is_forgotten_when_memory_is_freed() {
        let cache = PointerCache::new();
        let epoch = cache.epoch().load(Acquire);
        cache.put(0x1000, epoch, facts((0x1000, 64), OWNER_UNKNOWN));
        cache.put(0x1000, epoch, facts((0, 0), 1));
        let known = cache.get(0x1000).expect("cached");
        assert_eq!(
            (known.range, known.owner),
            ((0x1000, 64), 1),
            "range and owner merge"
        );
        assert!(cache.get(0x2000).is_none());
        let _ = cache.invalidate();
        assert!(
            cache.get(0x1000).is_none(),
            "a free anywhere forgets every pointer"
        );
        // An answer the driver gave before that free is not stored as current.
        cache.put(0x1000, epoch, facts((0x1000, 64), 0));
        assert!(cache.get(0x1000).is_none());
    }

    #[test]
    fn handles_that_differ_in_low_bits_get_their_own_slots() {
        let cache = HandleCache::new();
        cache.put(0xc700_0000_0001, 0);
        cache.put(0xc700_0000_0002, 1);
        assert_eq!(cache.get(0xc700_0000_0001), Some(0));
        assert_eq!(cache.get(0xc700_0000_0002), Some(1));
        cache.forget(0xc700_0000_0001);
        assert_eq!(cache.get(0xc700_0000_0001), None);
        cache.forget_if(|v| v == 1);
        assert_eq!(cache.get(0xc700_0000_0002), None);
    }

    #[test]
    fn an_ended_context_or_stream_leaves_the_caches() {
        let f = DriverFacts::new();
        f.context_devices.put(0xa0, 3);
        f.stream_contexts.put(0x50, 0xa0);
        f.stream_contexts.put(0x60, 0xb0);
        let epoch = f.pointers.epoch().load(Acquire);
        f.pointers.put(0x1000, epoch, facts((0x1000, 64), 3));
        f.forget_cached(Lifetime::ContextDestroyed(0xa0));
        assert_eq!(f.context_devices.get(0xa0), None);
        assert_eq!(
            f.stream_contexts.get(0x50),
            None,
            "its streams went with it"
        );
        assert_eq!(f.stream_contexts.get(0x60), Some(0xb0));
        assert!(f.pointers.get(0x1000).is_none(), "its memory went with it");
        f.forget_cached(Lifetime::StreamDestroyed(0x60));
        assert_eq!(f.stream_contexts.get(0x60), None);
    }

    #[test]
    fn a_destroyed_context_is_never_asked_about_until_seen_alive() {
        let f = DriverFacts::new();
        let gone = CUcontext(0xa0 as *mut _);
        assert!(!f.context_destroyed(gone));
        f.forget_cached(Lifetime::ContextDestroyed(0xa0));
        assert!(f.context_destroyed(gone));
        // Answered without the driver (none is loaded here: a query would give None).
        assert_eq!(
            f.context_device(gone, true),
            Some(Err(sharecheck_core::codes::CONTEXT_IS_DESTROYED))
        );
        f.context_alive(gone);
        assert!(!f.context_destroyed(gone));
    }
}
