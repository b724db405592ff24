//! Facts the rules ask the driver for, instead of shadowing every call.
//!
//! Each query is cheap and has no side effect the program could observe: no context is made
//! current, nothing is allocated, and (HIP) the thread's last error is left as it was. The queries
//! call the driver's own exports (never the shim's wrappers), so they are not recorded as the
//! program's calls. Every function answers `None` when it cannot tell (driver not initialised,
//! symbol missing in this driver version, ...): the rules then say nothing.

use crate::loader::{self, NamedSlot};
use sharecheck_core::ffi::{CUcontext, CUstream};
use sharecheck_core::functions::{Api, FnId};
use std::ffi::{c_int, c_uint, c_void};

// CUDA driver: result codes and attribute numbers (cuda.h).
use sharecheck_core::rules::codes::{
    CONTEXT_IS_DESTROYED, INVALID_CONTEXT, INVALID_HANDLE, NOT_READY,
};
const CUDA_SUCCESS: c_int = 0;
pub const ATTRIBUTE_UNIFIED_ADDRESSING: c_int = 41;
pub const ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
const POINTER_ATTRIBUTE_IS_MANAGED: c_int = 8;
const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
const MEMORYTYPE_DEVICE: c_int = 2;

static CU_CTX_GET_CURRENT: NamedSlot = NamedSlot::new(Api::Cuda, c"cuCtxGetCurrent");
static CU_CTX_GET_DEVICE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuCtxGetDevice");
static CU_CTX_GET_DEVICE_V2: NamedSlot = NamedSlot::new(Api::Cuda, c"cuCtxGetDevice_v2");
static CU_DEVICE_GET_COUNT: NamedSlot = NamedSlot::new(Api::Cuda, c"cuDeviceGetCount");
static CU_DEVICE_GET_ATTRIBUTE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuDeviceGetAttribute");
static CU_MEM_GET_ADDRESS_RANGE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuMemGetAddressRange_v2");
static CU_POINTER_GET_ATTRIBUTE: NamedSlot = NamedSlot::new(Api::Cuda, c"cuPointerGetAttribute");
static CU_STREAM_GET_CTX: NamedSlot = NamedSlot::new(Api::Cuda, c"cuStreamGetCtx");
static CU_STREAM_QUERY: NamedSlot = NamedSlot::new(Api::Cuda, c"cuStreamQuery");
static CU_PRIMARY_CTX_GET_STATE: NamedSlot =
    NamedSlot::new(Api::Cuda, c"cuDevicePrimaryCtxGetState");

/// Calls `slot` as `unsafe extern "C" fn(Args) -> c_int`.
macro_rules! query {
    ($slot:expr, fn($($ty:ty),*) $(, $arg:expr)* $(,)?) => {{
        match $slot.get() {
            None => None,
            Some(address) => {
                // SAFETY: `address` is the driver's export of this name, whose C prototype
                // (cuda.h / hip_runtime_api.h) is the one spelled here.
                let f: unsafe extern "C" fn($($ty),*) -> c_int = unsafe { std::mem::transmute(address) };
                Some(unsafe { f($($arg),*) })
            }
        }
    }};
}

/// The current context of this thread: `Some(None)` when none is current.
pub fn current_context() -> Option<Option<CUcontext>> {
    let mut ctx = CUcontext::NULL;
    let code = query!(CU_CTX_GET_CURRENT, fn(*mut CUcontext), &mut ctx)?;
    (code == CUDA_SUCCESS).then_some((ctx != CUcontext::NULL).then_some(ctx))
}

/// The device of the current context.
pub fn current_device() -> Option<i32> {
    let mut dev: c_int = -1;
    let code = query!(CU_CTX_GET_DEVICE, fn(*mut c_int), &mut dev)?;
    (code == CUDA_SUCCESS).then_some(dev)
}

/// The device of a (non-NULL) context, or the driver's error code for it: `Err` with
/// CUDA_ERROR_INVALID_CONTEXT means the driver does not know the context.
pub fn context_device(ctx: CUcontext) -> Option<Result<i32, c_int>> {
    if ctx == CUcontext::NULL {
        return None; // NULL means "the current context" to cuCtxGetDevice_v2.
    }
    let mut dev: c_int = -1;
    let code = query!(
        CU_CTX_GET_DEVICE_V2,
        fn(*mut c_int, CUcontext),
        &mut dev,
        ctx
    )?;
    Some(if code == CUDA_SUCCESS {
        Ok(dev)
    } else {
        Err(code)
    })
}

/// Whether a context-query error says the context is not a live context.
pub fn is_unknown_context(code: c_int) -> bool {
    matches!(
        code,
        INVALID_CONTEXT | INVALID_HANDLE | CONTEXT_IS_DESTROYED
    )
}

pub fn device_count() -> Option<i32> {
    let mut count: c_int = 0;
    let code = query!(CU_DEVICE_GET_COUNT, fn(*mut c_int), &mut count)?;
    (code == CUDA_SUCCESS).then_some(count)
}

pub fn attribute(dev: i32, attribute: c_int) -> Option<i32> {
    let mut value: c_int = 0;
    let code = query!(
        CU_DEVICE_GET_ATTRIBUTE,
        fn(*mut c_int, c_int, c_int),
        &mut value,
        attribute,
        dev
    )?;
    (code == CUDA_SUCCESS).then_some(value)
}

/// `cuDeviceCanAccessPeer`, called on the driver directly (not recorded).
pub fn can_access_peer(dev: i32, peer: i32) -> Option<bool> {
    let address = loader::real_function(FnId::cuDeviceCanAccessPeer)?;
    let mut can: c_int = 0;
    // SAFETY: the driver's cuDeviceCanAccessPeer(int *, CUdevice, CUdevice).
    let f: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int =
        unsafe { std::mem::transmute(address) };
    (unsafe { f(&mut can, dev, peer) } == CUDA_SUCCESS).then_some(can != 0)
}

/// `[base, base + size)` of the allocation (or mapping) containing `ptr`.
pub fn allocation_range(ptr: u64) -> Option<(u64, u64)> {
    let (mut base, mut size) = (0u64, 0usize);
    let code = query!(
        CU_MEM_GET_ADDRESS_RANGE,
        fn(*mut u64, *mut usize, u64),
        &mut base,
        &mut size,
        ptr
    )?;
    (code == CUDA_SUCCESS).then_some((base, size as u64))
}

fn pointer_attribute(ptr: u64, attribute: c_int) -> Option<c_int> {
    // Zeroed: boolean attributes may be written as a single byte.
    let mut value: c_int = 0;
    let code = query!(
        CU_POINTER_GET_ATTRIBUTE,
        fn(*mut c_void, c_int, u64),
        (&mut value as *mut c_int).cast(),
        attribute,
        ptr
    )?;
    (code == CUDA_SUCCESS).then_some(value)
}

/// The device whose memory `ptr` points into, for plain device memory only (managed and host
/// memory legitimately move or are reachable from every device).
pub fn device_memory_owner(ptr: u64) -> Option<i32> {
    if pointer_attribute(ptr, POINTER_ATTRIBUTE_MEMORY_TYPE)? != MEMORYTYPE_DEVICE
        || pointer_attribute(ptr, POINTER_ATTRIBUTE_IS_MANAGED)? != 0
    {
        return None;
    }
    pointer_attribute(ptr, POINTER_ATTRIBUTE_DEVICE_ORDINAL)
}

/// The context of a stream that is not one of the special handles, or the driver's error code.
pub fn stream_context(stream: CUstream) -> Option<Result<CUcontext, c_int>> {
    let mut ctx = CUcontext::NULL;
    let code = query!(
        CU_STREAM_GET_CTX,
        fn(CUstream, *mut CUcontext),
        stream,
        &mut ctx
    )?;
    Some(if code == CUDA_SUCCESS {
        Ok(ctx)
    } else {
        Err(code)
    })
}

/// Whether work issued to `stream` (a live stream, or 0 for the current context's legacy
/// stream) is still in flight: cuStreamQuery answers CUDA_ERROR_NOT_READY.
pub fn stream_busy(stream: u64) -> Option<bool> {
    let handle = CUstream(stream as usize as *mut c_void);
    match query!(CU_STREAM_QUERY, fn(CUstream), handle)? {
        CUDA_SUCCESS => Some(false),
        NOT_READY => Some(true),
        _ => None,
    }
}

/// Whether the primary context of `dev` is active (alive).
pub fn primary_context_active(dev: i32) -> Option<bool> {
    let (mut flags, mut active): (c_uint, c_int) = (0, 0);
    let code = query!(
        CU_PRIMARY_CTX_GET_STATE,
        fn(c_int, *mut c_uint, *mut c_int),
        dev,
        &mut flags,
        &mut active
    )?;
    (code == CUDA_SUCCESS).then_some(active != 0)
}

/// Half-open byte ranges of `[ptr, ptr + len)` that no allocation covers, found with `range_of`
/// (the driver's address-range query). `None` when `ptr` itself is not in device memory known to
/// the driver (nothing to decide) or the walk is too long to be cheap. Adjacent allocations (VMM
/// mappings side by side) count as covered.
pub fn uncovered_tail(
    ptr: u64,
    len: u64,
    mut range_of: impl FnMut(u64) -> Option<(u64, u64)>,
) -> Option<(u64, u64, u64)> {
    const MAX_STEPS: usize = 64;
    let end = ptr.checked_add(len)?;
    let (base, size) = range_of(ptr)?;
    let mut covered = base.checked_add(size)?;
    let first_end = covered;
    for _ in 0..MAX_STEPS {
        if covered >= end {
            return None;
        }
        match range_of(covered) {
            Some((next_base, next_size)) if next_base == covered && next_size > 0 => {
                covered = next_base + next_size;
            }
            _ => return Some((base, first_end, end - covered)),
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// HIP runtime.

const HIP_SUCCESS: c_int = 0;

static HIP_GET_DEVICE: NamedSlot = NamedSlot::new(Api::Hip, c"hipGetDevice");
static HIP_GET_DEVICE_COUNT: NamedSlot = NamedSlot::new(Api::Hip, c"hipGetDeviceCount");
static HIP_MEM_GET_ADDRESS_RANGE: NamedSlot = NamedSlot::new(Api::Hip, c"hipMemGetAddressRange");
static HIP_POINTER_GET_ATTRIBUTES: NamedSlot = NamedSlot::new(Api::Hip, c"hipPointerGetAttributes");
static HIP_STREAM_GET_DEVICE: NamedSlot = NamedSlot::new(Api::Hip, c"hipStreamGetDevice");
static HIP_PEEK_AT_LAST_ERROR: NamedSlot = NamedSlot::new(Api::Hip, c"hipPeekAtLastError");
static HIP_GET_LAST_ERROR: NamedSlot = NamedSlot::new(Api::Hip, c"hipGetLastError");

/// HIP queries for one call. HIP keeps a per-thread "last error" that failing calls set and
/// `hipGetLastError` returns; the shim must not change it. So queries run only while it is
/// hipSuccess (checked with `hipPeekAtLastError`, which changes nothing), and if one of them
/// failed, `hipGetLastError` puts it back to hipSuccess when the session ends. Runtimes where
/// every call sets it (ROCm 5) are covered too: the queries run before the program's own call,
/// which sets it again.
pub struct HipQueries {
    usable: bool,
    failed: bool,
}

impl HipQueries {
    pub fn begin() -> HipQueries {
        let usable = query!(HIP_PEEK_AT_LAST_ERROR, fn()) == Some(HIP_SUCCESS)
            && HIP_GET_LAST_ERROR.get().is_some();
        HipQueries {
            usable,
            failed: false,
        }
    }

    fn run(&mut self, call: impl FnOnce() -> Option<c_int>) -> Option<()> {
        if !self.usable {
            return None;
        }
        let code = call()?;
        if code != HIP_SUCCESS {
            self.failed = true;
            return None;
        }
        Some(())
    }

    pub fn current_device(&mut self) -> Option<i32> {
        let mut dev: c_int = -1;
        self.run(|| query!(HIP_GET_DEVICE, fn(*mut c_int), &mut dev))?;
        Some(dev)
    }

    pub fn device_count(&mut self) -> Option<i32> {
        let mut count: c_int = 0;
        self.run(|| query!(HIP_GET_DEVICE_COUNT, fn(*mut c_int), &mut count))?;
        Some(count)
    }

    /// `hipDeviceCanAccessPeer`, called on the runtime directly (not recorded).
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Option<bool> {
        let address = loader::real_function(FnId::hipDeviceCanAccessPeer)?;
        let mut can: c_int = 0;
        self.run(|| {
            // SAFETY: the runtime's hipDeviceCanAccessPeer(int *, int, int).
            let f: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int =
                unsafe { std::mem::transmute(address) };
            Some(unsafe { f(&mut can, dev, peer) })
        })?;
        Some(can != 0)
    }

    pub fn allocation_range(&mut self, ptr: u64) -> Option<(u64, u64)> {
        let (mut base, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
        self.run(|| {
            query!(
                HIP_MEM_GET_ADDRESS_RANGE,
                fn(*mut *mut c_void, *mut usize, *mut c_void),
                &mut base,
                &mut size,
                ptr as usize as *mut c_void
            )
        })?;
        Some((base as usize as u64, size as u64))
    }

    /// The device whose memory `ptr` points into, for plain device memory only. Read from
    /// `hipPointerAttribute_t`, whose layout every HIP version shares where it matters here:
    /// `int device` at byte 4, `void *hostPointer` at 16, `int isManaged` at 24 (the memory type
    /// enum at 0 changed its values in ROCm 6, so it is not used). The buffer is larger than any
    /// version's struct and starts zeroed.
    pub fn device_memory_owner(&mut self, ptr: u64) -> Option<i32> {
        let mut attributes = [0u64; 16];
        self.run(|| {
            query!(
                HIP_POINTER_GET_ATTRIBUTES,
                fn(*mut c_void, *const c_void),
                attributes.as_mut_ptr().cast(),
                ptr as usize as *const c_void
            )
        })?;
        let device = (attributes[0] >> 32) as u32 as i32;
        let host_pointer = attributes[2];
        let is_managed = attributes[3] as u32;
        (host_pointer == 0 && is_managed == 0).then_some(device)
    }

    /// The device of a stream (ROCm 6 and later have `hipStreamGetDevice`).
    pub fn stream_device(&mut self, stream: *mut c_void) -> Option<i32> {
        let mut dev: c_int = -1;
        self.run(|| {
            query!(
                HIP_STREAM_GET_DEVICE,
                fn(*mut c_void, *mut c_int),
                stream,
                &mut dev
            )
        })?;
        Some(dev)
    }
}

impl Drop for HipQueries {
    fn drop(&mut self) {
        if self.failed {
            let _ = query!(HIP_GET_LAST_ERROR, fn());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::uncovered_tail;

    /// Two adjacent allocations [0x1000, 0x2000) and [0x2000, 0x3000), then a gap.
    fn ranges(ptr: u64) -> Option<(u64, u64)> {
        match ptr {
            0x1000..=0x1fff => Some((0x1000, 0x1000)),
            0x2000..=0x2fff => Some((0x2000, 0x1000)),
            _ => None,
        }
    }

    #[test]
    fn inside_one_or_adjacent_allocations_is_covered() {
        assert_eq!(uncovered_tail(0x1000, 0x1000, ranges), None);
        assert_eq!(uncovered_tail(0x1800, 0x1000, ranges), None);
        assert_eq!(uncovered_tail(0x1000, 0x2000, ranges), None);
    }

    #[test]
    fn a_tail_past_the_last_allocation_is_reported_with_its_length() {
        assert_eq!(
            uncovered_tail(0x1800, 0x800 + 0x1000 + 0x10, ranges),
            Some((0x1000, 0x2000, 0x10))
        );
        assert_eq!(
            uncovered_tail(0x2f00, 0x200, ranges),
            Some((0x2000, 0x3000, 0x100))
        );
    }

    #[test]
    fn unknown_start_or_overflow_decides_nothing() {
        assert_eq!(uncovered_tail(0x5000, 0x10, ranges), None);
        assert_eq!(uncovered_tail(0x1000, u64::MAX, ranges), None);
    }
}
