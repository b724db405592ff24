//! The exported HIP runtime API (`hipError_t` is an `int`), with ROCm 6.x semantics where HIP
//! changed (`hipPointerAttribute_t`, `hipGetProcAddress`, `hipIpcMemLazyEnablePeerAccess` = 1).
//!
//! HIP initializes implicitly and has a per-thread current device (0 until `hipSetDevice`); what
//! a HIP call allocates belongs to that device. Error choices follow the CLR code as summarized in
//! api-facts.md §5.2.
//!
//! Each thread also has a last error, as in the ROCm 6 CLR (`hip::tls.last_error_`, set by
//! `HIP_RETURN`): every export defined through [`hip_exports!`] that returns an error other than
//! hipErrorNotReady records it, and a success leaves it alone; `hipGetLastError` returns it and
//! resets it to hipSuccess, `hipPeekAtLastError` returns it unchanged.

// The exports keep the C parameter names of `hip_runtime_api.h`. `missing_safety_doc` does not
// apply: they are C entry points whose safety contract is the HIP documentation of each function
// (every pointer argument NULL, or valid for what the runtime reads or writes through it).
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::device;
use crate::entry::{exports, guarded, require};
use crate::errors;
use crate::ipc::{Api, OpenCodes, OpenMode};
use crate::memory::{Allocation, MemKind, RegionKind};
use crate::state::{self, Owner};
use crate::types::*;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

/// HIP_VERSION of ROCm 6.2 (major * 10^7 + minor * 10^5 + patch).
const HIP_VERSION: c_int = 60_241_134;
/// `hipErrorInvalidMemcpyDirection`.
const INVALID_MEMCPY_DIRECTION: Code = 21;

/// [`exports!`] for the HIP runtime: every error an export returns also becomes the calling
/// thread's last error (`hipGetLastError`), as the CLR's `HIP_RETURN` does.
macro_rules! hip_exports {
    ($($items:tt)*) => {
        $crate::entry::exports! { @returning $crate::hip_exports::record_last_error; $($items)* }
    };
}
pub(crate) use hip_exports;

thread_local! {
    static CURRENT_DEVICE: Cell<i32> = const { Cell::new(0) };
    static LAST_ERROR: Cell<Code> = const { Cell::new(SUCCESS) };
}

/// The return path of every [`hip_exports!`] function: an error (but not hipErrorNotReady, which
/// the CLR's `HIP_RETURN` leaves out) becomes the calling thread's last error.
pub fn record_last_error(code: Code) -> Code {
    if code != SUCCESS && code != NOT_READY {
        LAST_ERROR.with(|e| e.set(code));
    }
    code
}

/// `hipStreamCreate`, `hipStreamCreateWithFlags`, `hipStreamCreateWithPriority`, in the order of
/// the CLR's checks: NULL, then flags other than hipStreamDefault/hipStreamNonBlocking, are
/// hipErrorInvalidValue. `priority` is already mapped to the CLR's three levels.
///
/// # Safety
/// `stream` is NULL or writable.
unsafe fn stream_create(stream: *mut hipStream_t, flags: c_uint, priority: c_int) -> Outcome {
    require(stream)?;
    if flags != 0 && flags != STREAM_NON_BLOCKING {
        return Err(INVALID_VALUE);
    }
    let device = current_device()?;
    let owner = Owner::HipDevice(device);
    let handle = state::with(|d| d.streams.create_stream(owner, device, flags, priority));
    // SAFETY: `stream` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *stream = crate::handles::to_ptr(handle) };
    Ok(())
}

/// `hipEventCreate` (flags 0) and `hipEventCreateWithFlags`.
///
/// # Safety
/// `event` is NULL or writable.
unsafe fn event_create(event: *mut hipEvent_t, flags: c_uint) -> Outcome {
    require(event)?;
    let known =
        EVENT_BLOCKING_SYNC | EVENT_DISABLE_TIMING | EVENT_INTERPROCESS | HIP_EVENT_RELEASE_FLAGS;
    if flags & !known != 0 || flags & EVENT_INTERPROCESS != 0 && flags & EVENT_DISABLE_TIMING == 0 {
        return Err(INVALID_VALUE);
    }
    let device = current_device()?;
    let handle = state::with(|d| {
        d.streams
            .create_event(Owner::HipDevice(device), device, flags)
    });
    // SAFETY: `event` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *event = crate::handles::to_ptr(handle) };
    Ok(())
}

/// What the CLR's `ihipFree` (behind `hipFree`, `hipHostFree` and the queued `hipFreeAsync`)
/// releases: any allocation of the runtime, device, managed, pinned host or pool memory alike
/// (the HIP 5.2 header says hipFree of `hipHostMalloc` memory and hipHostFree of `hipMalloc`
/// memory are errors; the CLR code frees both). Imported IPC memory is closed with
/// `hipIpcCloseMemHandle` instead.
fn hip_freeable(a: &Allocation) -> bool {
    matches!(
        a.kind,
        MemKind::Device | MemKind::Managed { .. } | MemKind::Host { .. } | MemKind::Pool
    )
}

/// The CLR's `hip::Stream::Priority` for a requested priority: High at or below -1, Low at or
/// above 1, Normal otherwise.
fn hip_priority(priority: c_int) -> c_int {
    priority.clamp(HIP_STREAM_PRIORITY_HIGH, HIP_STREAM_PRIORITY_LOW)
}

/// The calling thread's device; hipErrorNoDevice when there is none at all.
fn current_device() -> Outcome<i32> {
    if device::count() == 0 {
        return Err(NO_DEVICE);
    }
    Ok(CURRENT_DEVICE.with(Cell::get))
}

fn stream_handle(stream: hipStream_t) -> u64 {
    stream as usize as u64
}

fn memcpy_peer(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    n: usize,
    stream: Option<hipStream_t>,
) -> Outcome {
    if !device::is_valid(dst_device) || !device::is_valid(src_device) {
        return Err(INVALID_DEVICE);
    }
    state::with(|d| {
        if let Some(stream) = stream {
            // The 2024 CLR answers hipErrorContextIsDestroyed for an invalid stream here.
            if !d.streams.is_valid_stream(stream_handle(stream)) {
                return Err(CONTEXT_IS_DESTROYED);
            }
        }
        if n == 0 {
            return Ok(());
        }
        if dst.is_null() || src.is_null() {
            return Err(INVALID_VALUE);
        }
        d.memory.copy_device(dst as u64, src as u64, n as u64)
    })
}

hip_exports! {
    table HIP_EXPORTS for "hip";

    fn hipInit(flags: c_uint) {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        current_device().map(|_| ())
    }

    fn hipDriverGetVersion(driverVersion: *mut c_int) {
        require(driverVersion)?;
        // SAFETY: `driverVersion` is not NULL (checked above); `hipDriverGetVersion` documents it as a writable `int`.
        unsafe { *driverVersion = HIP_VERSION };
        Ok(())
    }

    fn hipRuntimeGetVersion(runtimeVersion: *mut c_int) {
        require(runtimeVersion)?;
        // SAFETY: `runtimeVersion` is not NULL (checked above); `hipRuntimeGetVersion` documents it as a writable `int`.
        unsafe { *runtimeVersion = HIP_VERSION };
        Ok(())
    }

    fn hipGetDeviceCount(count: *mut c_int) {
        require(count)?;
        // SAFETY: `count` is not NULL (checked above); `hipGetDeviceCount` documents it as a writable `int`.
        unsafe { *count = device::count() };
        current_device().map(|_| ())
    }

    fn hipSetDevice(deviceId: c_int) {
        current_device()?;
        device::check(deviceId)?;
        CURRENT_DEVICE.with(|c| c.set(deviceId));
        Ok(())
    }

    fn hipGetDevice(deviceId: *mut c_int) {
        require(deviceId)?;
        let device = current_device()?;
        // SAFETY: `deviceId` is not NULL (checked above); `hipGetDevice` documents it as a writable `int`.
        unsafe { *deviceId = device };
        Ok(())
    }

    fn hipDeviceReset() {
        let device = current_device()?;
        state::with(|d| d.release_owner(Owner::HipDevice(device)));
        Ok(())
    }

    fn hipDeviceSynchronize() {
        current_device().map(|_| ())
    }

    fn hipMalloc(ptr: *mut *mut c_void, size: usize) {
        require(ptr)?;
        let device = current_device()?;
        if size == 0 {
            // SAFETY: `ptr` is not NULL (checked above); `hipMalloc` documents it as a writable
            // `void *`.
            unsafe { *ptr = std::ptr::null_mut() };
            return Ok(());
        }
        let base = state::with(|d| d.memory.allocate(size as u64, device, Owner::HipDevice(device), MemKind::Device))?;
        // SAFETY: as above.
        unsafe { *ptr = base as usize as *mut c_void };
        Ok(())
    }

    fn hipMallocManaged(dev_ptr: *mut *mut c_void, size: usize, flags: c_uint) {
        require(dev_ptr)?;
        if flags != MEM_ATTACH_GLOBAL && flags != MEM_ATTACH_HOST {
            return Err(INVALID_VALUE);
        }
        let device = current_device()?;
        if size == 0 {
            // SAFETY: `dev_ptr` is not NULL (checked above); `hipMallocManaged` documents it as a
            // writable `void *`.
            unsafe { *dev_ptr = std::ptr::null_mut() };
            return Ok(());
        }
        let kind = MemKind::Managed { flags };
        let base = state::with(|d| d.memory.allocate(size as u64, device, Owner::HipDevice(device), kind))?;
        // SAFETY: as above.
        unsafe { *dev_ptr = base as usize as *mut c_void };
        Ok(())
    }

    /// ROCm CLR order: NULL is hipErrorInvalidValue, size 0 is a NULL pointer and success, then
    /// `*ptr` is NULL until the flags pass (coherent and non-coherent together are invalid).
    fn hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) {
        require(ptr)?;
        let device = current_device()?;
        // SAFETY: `ptr` is not NULL (checked above); `hipHostMalloc` documents it as a writable
        // `void *`.
        unsafe { *ptr = std::ptr::null_mut() };
        if size == 0 {
            return Ok(());
        }
        let coherence = HIP_HOST_MALLOC_COHERENT | HIP_HOST_MALLOC_NON_COHERENT;
        if flags & coherence == coherence {
            return Err(INVALID_VALUE);
        }
        let kind = MemKind::Host { flags };
        let base = state::with(|d| d.memory.allocate(size as u64, device, Owner::HipDevice(device), kind))?;
        // SAFETY: as above.
        unsafe { *ptr = base as usize as *mut c_void };
        Ok(())
    }

    /// The ROCm CLR: NULL output or an invalid stream is hipErrorInvalidValue; size 0 is a NULL
    /// pointer and success. The memory comes from the pool of the stream's device (the current
    /// device's for the NULL and special streams) and is allocated at once.
    fn hipMallocAsync(dev_ptr: *mut *mut c_void, size: usize, stream: hipStream_t) {
        let current = current_device()?;
        let stream = stream_handle(stream);
        if dev_ptr.is_null() || !state::with(|d| d.streams.is_valid_stream(stream)) {
            return Err(INVALID_VALUE);
        }
        let base = if size == 0 {
            0
        } else {
            state::with(|d| {
                let device = d.streams.stream(stream).map_or(current, |s| s.device);
                d.memory.allocate(size as u64, device, Owner::HipDevice(device), MemKind::Pool)
            })?
        };
        // SAFETY: `dev_ptr` is not NULL (checked above); `hipMallocAsync` documents it as a
        // writable `void *`.
        unsafe { *dev_ptr = base as usize as *mut c_void };
        Ok(())
    }

    /// A pointer imported with hipMemPoolImportPointer too ("The pointer may be freed with
    /// hipFree or hipFreeAsync"), as cuMemFree_v2 takes it.
    fn hipFree(ptr: *mut c_void) {
        if ptr.is_null() {
            return Ok(());
        }
        state::with(|d| d.free_pointer(ptr as u64, hip_freeable))
    }

    /// As the CLR: NULL is success; anything `hipFree` takes, this takes (see [`hip_freeable`]).
    fn hipHostFree(ptr: *mut c_void) {
        if ptr.is_null() {
            return Ok(());
        }
        state::with(|d| d.free_memory(ptr as u64, hip_freeable))
    }

    /// The ROCm CLR checks only for a NULL pointer and an invalid stream (hipErrorInvalidValue)
    /// and queues the free: an address it does not know (a second free included) fails in the
    /// queue, unseen, and the call returns hipSuccess. The simulator frees at once.
    fn hipFreeAsync(dev_ptr: *mut c_void, stream: hipStream_t) {
        current_device()?;
        if dev_ptr.is_null() || !state::with(|d| d.streams.is_valid_stream(stream_handle(stream))) {
            return Err(INVALID_VALUE);
        }
        // Deliberately ignored: see above.
        let _ = state::with(|d| d.free_memory(dev_ptr as u64, hip_freeable));
        Ok(())
    }

    fn hipMemcpy(dst: *mut c_void, src: *const c_void, sizeBytes: usize, kind: c_int) {
        use crate::types::memcpy_kind as k;
        if !(k::HOST_TO_HOST..=k::DEFAULT).contains(&kind) {
            return Err(INVALID_MEMCPY_DIRECTION);
        }
        if sizeBytes == 0 {
            return Ok(());
        }
        if dst.is_null() || src.is_null() {
            return Err(INVALID_VALUE);
        }
        let n = sizeBytes as u64;
        state::with(|d| {
            let on_device = |p: u64| d.memory.region(p, n).is_some();
            let kind = if kind == k::DEFAULT {
                match (on_device(src as u64), on_device(dst as u64)) {
                    (false, false) => k::HOST_TO_HOST,
                    (false, true) => k::HOST_TO_DEVICE,
                    (true, false) => k::DEVICE_TO_HOST,
                    (true, true) => k::DEVICE_TO_DEVICE,
                }
            } else {
                kind
            };
            match kind {
                // SAFETY: `src` is not NULL and, as `hipMemcpy` documents, readable for
                // `sizeBytes` bytes.
                k::HOST_TO_DEVICE => unsafe { d.memory.copy_to_device(dst as u64, src.cast(), n) },
                // SAFETY: `dst` is not NULL and, as `hipMemcpy` documents, writable for
                // `sizeBytes` bytes.
                k::DEVICE_TO_HOST => unsafe { d.memory.copy_from_device(dst.cast(), src as u64, n) },
                k::DEVICE_TO_DEVICE => d.memory.copy_device(dst as u64, src as u64, n),
                _ => {
                    // SAFETY: both are host buffers of at least `sizeBytes` bytes: the caller's
                    // contract with `hipMemcpy` (they may overlap; `copy` allows it).
                    unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), sizeBytes) };
                    Ok(())
                }
            }
        })
    }

    fn hipStreamCreate(stream: *mut hipStream_t) {
        // SAFETY: `stream` is NULL or a writable `hipStream_t` (`hipStreamCreate`'s contract).
        unsafe { stream_create(stream, 0, 0) }
    }

    fn hipStreamCreateWithFlags(stream: *mut hipStream_t, flags: c_uint) {
        // SAFETY: `stream` is NULL or a writable `hipStream_t` (`hipStreamCreate`'s contract).
        unsafe { stream_create(stream, flags, 0) }
    }

    fn hipStreamCreateWithPriority(stream: *mut hipStream_t, flags: c_uint, priority: c_int) {
        // SAFETY: `stream` is NULL or a writable `hipStream_t` (`hipStreamCreate`'s contract).
        unsafe { stream_create(stream, flags, hip_priority(priority)) }
    }

    fn hipStreamDestroy(stream: hipStream_t) {
        crate::state::destroy_stream(stream_handle(stream))
    }

    fn hipStreamSynchronize(stream: hipStream_t) {
        state::with(|d| d.streams.check_stream(stream_handle(stream)))
    }

    fn hipEventCreate(event: *mut hipEvent_t) {
        // SAFETY: `event` is NULL or a writable `hipEvent_t` (`hipEventCreate`'s contract).
        unsafe { event_create(event, 0) }
    }

    fn hipEventCreateWithFlags(event: *mut hipEvent_t, flags: c_uint) {
        // SAFETY: `event` is NULL or a writable `hipEvent_t` (`hipEventCreateWithFlags`'s
        // contract).
        unsafe { event_create(event, flags) }
    }

    fn hipEventDestroy(event: hipEvent_t) {
        let removed = state::with(|d| d.streams.remove_event(event as usize as u64))?;
        if let Some(export) = removed.export {
            crate::ipc::withdraw_event_export(export);
        }
        Ok(())
    }

    fn hipMemGetAddressRange(pbase: *mut hipDeviceptr_t, psize: *mut usize, dptr: hipDeviceptr_t) {
        // ROCm 6 CLR (hipamd/src/hip_memory.cpp): both outputs are required, and memory it does
        // not know is hipErrorNotFound (older releases answered hipErrorInvalidDevicePointer).
        require(pbase)?;
        require(psize)?;
        let (base, size) = state::with(|d| d.memory.address_range(dptr as u64)).ok_or(NOT_FOUND)?;
        // SAFETY: both are not NULL (checked above); `hipMemGetAddressRange` documents them as a
        // writable `hipDeviceptr_t` and `size_t`.
        unsafe {
            *pbase = base as usize as *mut c_void;
            *psize = size as usize;
        }
        Ok(())
    }

    fn hipPointerGetAttributes(attributes: *mut hipPointerAttribute_t, ptr: *const c_void) {
        require(attributes)?;
        require(ptr)?;
        let address = ptr as u64;
        let found = state::with(|d| {
            if let Some(a) = d.memory.find(address) {
                return Some((a.kind, a.device));
            }
            d.memory.region(address, 1).filter(|r| r.kind == RegionKind::Virtual).map(|r| (MemKind::Device, r.device))
        });
        // As ROCm 6 documents: memory it does not know is hipErrorInvalidValue.
        let (kind, device) = found.ok_or(INVALID_VALUE)?;
        // Managed and pinned host memory have one address for host and device; the allocation
        // flags are those it was allocated with.
        let (type_, host_flags) = match kind {
            MemKind::Managed { flags } => (hip_memory_type::MANAGED, Some(flags)),
            MemKind::Host { flags } => (hip_memory_type::HOST, Some(flags)),
            MemKind::Device | MemKind::Pool | MemKind::IpcImport => (hip_memory_type::DEVICE, None),
        };
        let value = hipPointerAttribute_t {
            type_,
            device,
            device_pointer: ptr as *mut c_void,
            host_pointer: if host_flags.is_some() { ptr as *mut c_void } else { std::ptr::null_mut() },
            is_managed: c_int::from(matches!(kind, MemKind::Managed { .. })),
            allocation_flags: host_flags.unwrap_or(0),
        };
        // SAFETY: `attributes` is not NULL (checked above); `hipPointerGetAttributes` documents it
        // as a writable `hipPointerAttribute_t`.
        unsafe { *attributes = value };
        Ok(())
    }

    fn hipDeviceGetUuid(uuid: *mut [u8; 16], device: c_int) {
        require(uuid)?;
        device::check(device)?;
        // SAFETY: `uuid` is not NULL (checked above); `hipDeviceGetUuid` documents it as a
        // writable `hipUUID` (16 bytes).
        unsafe { *uuid = crate::device::uuid(device) };
        Ok(())
    }

    fn hipDeviceCanAccessPeer(canAccessPeer: *mut c_int, deviceId: c_int, peerDeviceId: c_int) {
        require(canAccessPeer)?;
        device::check(deviceId)?;
        device::check(peerDeviceId)?;
        // SAFETY: `canAccessPeer` is not NULL (checked above); `hipDeviceCanAccessPeer` documents it as a writable `int`.
        unsafe { *canAccessPeer = c_int::from(device::can_access_peer(deviceId, peerDeviceId)) };
        Ok(())
    }

    fn hipDeviceEnablePeerAccess(peerDeviceId: c_int, flags: c_uint) {
        let device = current_device()?;
        state::with(|d| d.enable_peer_device(device, peerDeviceId, flags))
    }

    fn hipDeviceDisablePeerAccess(peerDeviceId: c_int) {
        let device = current_device()?;
        state::with(|d| d.disable_peer_device(device, peerDeviceId))
    }

    fn hipMemcpyPeer(dst: *mut c_void, dstDeviceId: c_int, src: *const c_void, srcDeviceId: c_int, sizeBytes: usize) {
        memcpy_peer(dst, dstDeviceId, src, srcDeviceId, sizeBytes, None)
    }

    fn hipMemcpyPeerAsync(dst: *mut c_void, dstDeviceId: c_int, src: *const c_void, srcDevice: c_int, sizeBytes: usize, stream: hipStream_t) {
        memcpy_peer(dst, dstDeviceId, src, srcDevice, sizeBytes, Some(stream))
    }

    // Virtual memory management, as the ROCm 6.2 CLR answers (`hipamd/src/hip_vm.cpp`; not
    // measured on AMD hardware). Where the CLR dereferences what it did not find (an address
    // free or unmap of an address it does not know), the simulator answers hipErrorInvalidValue
    // instead of crashing; where it does not look (a release), it accepts, as the CLR does.

    fn hipMemCreate(handle: *mut hipMemGenericAllocationHandle_t, size: usize, prop: *const hipMemAllocationProp, flags: c_ulonglong) {
        require(handle)?;
        if size == 0 || flags != 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `prop` is NULL or a readable `hipMemAllocationProp` (32 bytes, laid out as
        // `CUmemAllocationProp`), as `hipMemCreate` documents.
        let prop = unsafe { crate::cuda_exports::allocation_prop(prop) }?;
        if prop.location.type_ != MEM_LOCATION_TYPE_DEVICE {
            return Err(INVALID_VALUE);
        }
        let types = prop.requested_handle_types;
        if types != 0 && types != MEM_HANDLE_TYPE_POSIX_FD {
            return Err(NOT_SUPPORTED);
        }
        let created = state::with(|d| d.memory.create_physical(size as u64, prop.location.id, None, types))?;
        // SAFETY: `handle` is not NULL (checked above); documented as a writable handle.
        unsafe { *handle = created as usize as hipMemGenericAllocationHandle_t };
        Ok(())
    }

    /// The CLR drops a reference of whatever the handle points to, without looking.
    fn hipMemRelease(handle: hipMemGenericAllocationHandle_t) {
        if handle.is_null() {
            return Err(INVALID_VALUE);
        }
        let _ = state::with(|d| d.memory.release_physical(handle as usize as u64));
        Ok(())
    }

    fn hipMemRetainAllocationHandle(handle: *mut hipMemGenericAllocationHandle_t, addr: *mut c_void) {
        require(handle)?;
        require(addr)?;
        let retained = state::with(|d| d.memory.retain_physical(addr as usize as u64))?;
        // SAFETY: `handle` is not NULL (checked above); documented as a writable handle.
        unsafe { *handle = retained as usize as hipMemGenericAllocationHandle_t };
        Ok(())
    }

    fn hipMemExportToShareableHandle(shareableHandle: *mut c_void, handle: hipMemGenericAllocationHandle_t, handleType: c_uint, flags: c_ulonglong) {
        if flags != 0 || handle.is_null() {
            return Err(INVALID_VALUE);
        }
        let handle = handle as usize as u64;
        require(shareableHandle)?;
        // The CLR exports only the type the create requested.
        let requested = state::with(|d| d.memory.physical(handle).map(|p| p.handle_types));
        if requested != Some(handleType) {
            return Err(INVALID_VALUE);
        }
        let fd = state::with(|d| d.memory.export_fd(handle, handleType))?;
        // SAFETY: `shareableHandle` is not NULL (checked above); for a POSIX fd it is a
        // writable int.
        unsafe { *shareableHandle.cast::<c_int>() = fd };
        Ok(())
    }

    /// `osHandle`: the descriptor's number cast to a pointer.
    fn hipMemImportFromShareableHandle(handle: *mut hipMemGenericAllocationHandle_t, osHandle: *mut c_void, shHandleType: c_uint) {
        require(handle)?;
        require(osHandle)?;
        if shHandleType != MEM_HANDLE_TYPE_POSIX_FD {
            return Err(INVALID_VALUE);
        }
        let imported = state::with(|d| d.memory.import_fd(osHandle as usize as c_int))?;
        // SAFETY: `handle` is not NULL (checked above); documented as a writable handle.
        unsafe { *handle = imported as usize as hipMemGenericAllocationHandle_t };
        Ok(())
    }

    fn hipMemGetAllocationGranularity(granularity: *mut usize, prop: *const hipMemAllocationProp, option: c_uint) {
        require(granularity)?;
        // SAFETY: `prop` is NULL or a readable `hipMemAllocationProp`, as documented.
        let prop = unsafe { crate::cuda_exports::allocation_prop(prop) }?;
        // hipMemAllocationGranularityMinimum (0) or _Recommended (1), for device memory.
        if prop.location.type_ != MEM_LOCATION_TYPE_DEVICE || option > 1 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `granularity` is not NULL (checked above); documented as a writable `size_t`.
        unsafe { *granularity = crate::memory::GRANULARITY as usize };
        Ok(())
    }

    fn hipMemAddressReserve(ptr: *mut *mut c_void, size: usize, alignment: usize, addr: *mut c_void, flags: c_ulonglong) {
        require(ptr)?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        // hipErrorMemoryAllocation (2) for a size off the granularity or an alignment that is
        // not a power of two.
        if size == 0 || size as u64 % crate::memory::GRANULARITY != 0 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(OUT_OF_MEMORY);
        }
        let base = state::with(|d| d.memory.reserve(size as u64, alignment as u64, addr as usize as u64))?;
        // SAFETY: `ptr` is not NULL (checked above); documented as a writable `void *`.
        unsafe { *ptr = base as usize as *mut c_void };
        Ok(())
    }

    /// The CLR frees the whole reservation at `devPtr`, whatever `size` says.
    fn hipMemAddressFree(devPtr: *mut c_void, size: usize) {
        if devPtr.is_null() || size == 0 {
            return Err(INVALID_VALUE);
        }
        let ptr = devPtr as usize as u64;
        state::with(|d| {
            let whole = d.memory.reservation_size(ptr).ok_or(INVALID_VALUE)?;
            d.memory.free_reservation(ptr, whole)
        })
    }

    fn hipMemMap(ptr: *mut c_void, size: usize, offset: usize, handle: hipMemGenericAllocationHandle_t, flags: c_ulonglong) {
        if ptr.is_null() || handle.is_null() || size == 0 || offset != 0 || flags != 0 {
            return Err(INVALID_VALUE);
        }
        state::with(|d| d.memory.map(ptr as usize as u64, size as u64, 0, handle as usize as u64)).map_err(|_| INVALID_VALUE)
    }

    fn hipMemUnmap(ptr: *mut c_void, size: usize) {
        if ptr.is_null() || size == 0 {
            return Err(INVALID_VALUE);
        }
        state::with(|d| d.memory.unmap(ptr as usize as u64, size as u64))
    }

    fn hipMemSetAccess(ptr: *mut c_void, size: usize, desc: *const hipMemAccessDesc, count: usize) {
        if ptr.is_null() || size == 0 || desc.is_null() || count == 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `desc` is not NULL (checked above) and points to `count` readable
        // `hipMemAccessDesc` (laid out as `CUmemAccessDesc`), as `hipMemSetAccess` documents.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) };
        let mut grants = Vec::with_capacity(count);
        for d in descs {
            if !device::is_valid(d.location.id) {
                return Err(INVALID_VALUE);
            }
            grants.push((d.location.id, d.flags != MEM_ACCESS_FLAGS_PROT_NONE));
        }
        state::with(|d| d.memory.set_access(ptr as usize as u64, size as u64, &grants))
    }

    // Stream-ordered pools shared between processes, as the ROCm 6.2 CLR answers
    // (`hipamd/src/hip_mempool.cpp`; not measured on AMD hardware). `hipMemPoolProps` is 88
    // bytes, laid out as `CUmemPoolProps`.

    fn hipMemPoolCreate(mem_pool: *mut hipMemPool_t, pool_props: *const hipMemPoolProps) {
        require(mem_pool)?;
        require(pool_props)?;
        // SAFETY: not NULL (checked above); `hipMemPoolCreate` documents a readable
        // `hipMemPoolProps`.
        let props = unsafe { pool_props.read_unaligned() };
        let created = state::with(|d| d.pool_create(&props))?;
        // SAFETY: `mem_pool` is not NULL (checked above); documented as writable.
        unsafe { *mem_pool = crate::handles::to_ptr(created) };
        Ok(())
    }

    fn hipMemPoolDestroy(mem_pool: hipMemPool_t) {
        require(mem_pool)?;
        state::with(|d| d.pool_destroy(mem_pool as usize as u64))
    }

    fn hipMallocFromPoolAsync(dev_ptr: *mut *mut c_void, size: usize, mem_pool: hipMemPool_t, stream: hipStream_t) {
        require(dev_ptr)?;
        require(mem_pool)?;
        let base = if size == 0 {
            0
        } else {
            state::with(|d| d.pool_allocate_hip(size as u64, mem_pool as usize as u64, stream_handle(stream)))?
        };
        // SAFETY: `dev_ptr` is not NULL (checked above); documented as a writable `void *`.
        unsafe { *dev_ptr = base as usize as *mut c_void };
        Ok(())
    }

    fn hipMemPoolExportToShareableHandle(shared_handle: *mut c_void, mem_pool: hipMemPool_t, handle_type: c_uint, flags: c_uint) {
        require(mem_pool)?;
        require(shared_handle)?;
        let fd = state::with(|d| d.pool_export(mem_pool as usize as u64, handle_type, u64::from(flags)))?;
        // SAFETY: `shared_handle` is not NULL (checked above); the CLR writes a file descriptor.
        unsafe { *shared_handle.cast::<c_int>() = fd };
        Ok(())
    }

    /// `shared_handle`: the descriptor's number cast to a pointer (the CLR's union).
    fn hipMemPoolImportFromShareableHandle(mem_pool: *mut hipMemPool_t, shared_handle: *mut c_void, handle_type: c_uint, flags: c_uint) {
        require(mem_pool)?;
        require(shared_handle)?;
        if flags != 0 || handle_type == 0 {
            return Err(INVALID_VALUE);
        }
        let imported = state::with(|d| d.pool_import(shared_handle as usize as c_int, handle_type, 0))?;
        // SAFETY: `mem_pool` is not NULL (checked above); documented as writable.
        unsafe { *mem_pool = crate::handles::to_ptr(imported) };
        Ok(())
    }

    fn hipMemPoolExportPointer(export_data: *mut hipMemPoolPtrExportData, dev_ptr: *mut c_void) {
        require(export_data)?;
        require(dev_ptr)?;
        let data = state::with(|d| d.pool_export_pointer(dev_ptr as usize as u64))?;
        // SAFETY: `export_data` is not NULL (checked above); documented as writable 64 bytes.
        unsafe { *export_data = hipMemPoolPtrExportData { reserved: data } };
        Ok(())
    }

    fn hipMemPoolImportPointer(dev_ptr: *mut *mut c_void, mem_pool: hipMemPool_t, export_data: *mut hipMemPoolPtrExportData) {
        require(dev_ptr)?;
        require(mem_pool)?;
        require(export_data)?;
        // SAFETY: not NULL (checked above); documented as readable export data.
        let data = unsafe { export_data.read_unaligned() }.reserved;
        let ptr = state::with(|d| d.pool_import_pointer(mem_pool as usize as u64, &data))?;
        // SAFETY: `dev_ptr` is not NULL (checked above); documented as a writable `void *`.
        unsafe { *dev_ptr = ptr as usize as *mut c_void };
        Ok(())
    }

    fn hipIpcGetMemHandle(handle: *mut hipIpcMemHandle_t, devPtr: *mut c_void) {
        require(handle)?;
        require(devPtr)?;
        let bytes = state::with(|d| d.export_memory(devPtr as u64, Api::Hip))?;
        // SAFETY: `handle` is not NULL (checked above); `hipIpcGetMemHandle` documents it as a writable `hipIpcMemHandle_t`.
        unsafe { *handle = hipIpcMemHandle_t { reserved: bytes } };
        Ok(())
    }

    fn hipIpcOpenMemHandle(devPtr: *mut *mut c_void, handle: hipIpcMemHandle_t, flags: c_uint) {
        if flags != IPC_MEM_LAZY_ENABLE_PEER_ACCESS {
            return Err(INVALID_VALUE);
        }
        require(devPtr)?;
        let device = current_device()?;
        let ptr = state::with(|d| {
            // The CLR's answers (not measured on AMD hardware): a handle that cannot be mapped is
            // an invalid device pointer whatever the reason; a second context is refused as in
            // CUDA's contract, with the context error.
            let codes = OpenCodes {
                stale: HIP_ERROR_INVALID_DEVICE_POINTER,
                exporter_exited: HIP_ERROR_INVALID_DEVICE_POINTER,
                other_context: INVALID_CONTEXT,
                unreachable: HIP_ERROR_INVALID_DEVICE_POINTER,
            };
            d.open_memory(&handle.reserved, Owner::HipDevice(device), device, OpenMode::Refcounted, codes)
        })?;
        // SAFETY: `devPtr` is not NULL (checked above); `hipIpcOpenMemHandle` documents it as a writable `void *`.
        unsafe { *devPtr = ptr as usize as *mut c_void };
        Ok(())
    }

    fn hipIpcCloseMemHandle(devPtr: *mut c_void) {
        require(devPtr)?;
        state::with(|d| d.close_memory(devPtr as u64))
    }

    fn hipIpcGetEventHandle(handle: *mut hipIpcEventHandle_t, event: hipEvent_t) {
        require(handle)?;
        let bytes = state::with(|d| d.export_event(event as usize as u64, INVALID_VALUE, HIP_ERROR_INVALID_CONFIGURATION))?;
        // SAFETY: `handle` is not NULL (checked above); `hipIpcGetEventHandle` documents it as a writable `hipIpcEventHandle_t`.
        unsafe { *handle = hipIpcEventHandle_t { reserved: bytes } };
        Ok(())
    }

    fn hipIpcOpenEventHandle(event: *mut hipEvent_t, handle: hipIpcEventHandle_t) {
        require(event)?;
        let device = current_device()?;
        let opened = state::with(|d| d.open_event(&handle.reserved, Owner::HipDevice(device), device, INVALID_VALUE))?;
        // SAFETY: `event` is not NULL (checked above); `hipIpcOpenEventHandle` documents it as a writable `hipEvent_t`.
        unsafe { *event = crate::handles::to_ptr(opened) };
        Ok(())
    }

    fn hipStreamAttachMemAsync(stream: hipStream_t, dev_ptr: *mut c_void, length: usize, flags: c_uint) {
        let device = current_device()?;
        state::with(|d| d.attach_hip(stream_handle(stream), dev_ptr as u64, length as u64, flags, device))
    }
}

// Through the plain `exports!`: reading the last error must not record it again (a
// `hipGetLastError` that returned an error would otherwise set it right back).
exports! {
    table HIP_LAST_ERROR for "hip";

    fn hipGetLastError() {
        match LAST_ERROR.with(|e| e.replace(SUCCESS)) {
            SUCCESS => Ok(()),
            code => Err(code),
        }
    }

    fn hipPeekAtLastError() {
        match LAST_ERROR.with(Cell::get) {
            SUCCESS => Ok(()),
            code => Err(code),
        }
    }
}

#[cfg_attr(not(sim_hides = "hip"), no_mangle)]
pub extern "C" fn hipGetErrorName(hip_error: hipError_t) -> *const c_char {
    guarded("hipGetErrorName", c"hipErrorUnknown".as_ptr(), || {
        errors::hip_name(hip_error)
    })
}

#[cfg_attr(not(sim_hides = "hip"), no_mangle)]
pub extern "C" fn hipGetErrorString(hip_error: hipError_t) -> *const c_char {
    guarded("hipGetErrorString", c"unknown error".as_ptr(), || {
        errors::hip_string(hip_error)
    })
}
