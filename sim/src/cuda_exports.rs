//! The exported CUDA driver API, with the ELF names and prototypes of CUDA 13.5 `cuda.h`.
//!
//! Each function checks its arguments the way the driver does and hands the work to the model
//! (`state::with`). Calls before `cuInit` fail with CUDA_ERROR_NOT_INITIALIZED, except those the
//! real driver also answers early (`cuDriverGetVersion`, `cuGetErrorName`/`String`,
//! `cuGetProcAddress`).

// The exports keep the C parameter names of `cuda.h`. `missing_safety_doc` does not apply: they
// are C entry points whose safety contract is the vendor documentation of each function (every
// pointer argument NULL, or valid for what the documentation says the driver reads or writes).
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::config::{config, Behaviour};
use crate::context::{self, check_initialized};
use crate::device;
use crate::entry::{exports, require};
use crate::errors;
use crate::handles::{self, Kind};
use crate::ipc::{Api, OpenCodes, OpenMode};
use crate::logical_endpoint;
use crate::memory::{MemKind, GRANULARITY};
use crate::multicast;
use crate::state::{self, Owner};
use crate::types::*;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

fn to_handle(p: *mut c_void) -> u64 {
    handles::from_ptr(p)
}

/// Both the sync and async forms of `cuMemcpyPeer`: R580 accepts a NULL context (the copy is
/// decided by the unified addresses); the documentation lists INVALID_CONTEXT. The copy is done at
/// once; a successful async one leaves its stream pending until the program waits for it.
fn memcpy_peer(
    dst: u64,
    dst_ctx: CUcontext,
    src: u64,
    src_ctx: CUcontext,
    n: usize,
    stream: Option<u64>,
) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        for ctx in [dst_ctx, src_ctx] {
            if ctx.is_null() {
                if config().behaviour == Behaviour::Documented {
                    return Err(INVALID_CONTEXT);
                }
            } else {
                d.contexts.get(to_handle(ctx))?;
            }
        }
        if let Some(stream) = stream {
            d.streams.check_stream(stream)?;
        }
        d.memory.copy_device(dst, src, n as u64)?;
        if let Some(stream) = stream {
            d.mark_pending(stream);
        }
        Ok(())
    })
}

/// # Safety
/// `src` is NULL or readable for `n` bytes.
unsafe fn memcpy_htod(dst: u64, src: *const c_void, n: usize) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        d.current_context()?;
        // SAFETY: `src` is NULL or readable for `n` bytes: cuMemcpyHtoD's contract with its
        // caller, passed on by `memcpy_htod`'s own.
        unsafe { d.memory.copy_to_device(dst, src.cast(), n as u64) }
    })
}

/// # Safety
/// `dst` is NULL or writable for `n` bytes.
unsafe fn memcpy_dtoh(dst: *mut c_void, src: u64, n: usize) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        d.current_context()?;
        // SAFETY: `dst` is NULL or writable for `n` bytes: cuMemcpyDtoH's contract with its
        // caller, passed on by `memcpy_dtoh`'s own.
        unsafe { d.memory.copy_from_device(dst.cast(), src, n as u64) }
    })
}

/// An asynchronous copy or memset on `stream` (`cuMemcpy*Async`, `cuMemsetD*Async`, either
/// export): the stream is checked, the work done at once, and the stream left pending until the
/// program waits for it.
fn on_stream(stream: CUstream, work: impl FnOnce(&mut state::Driver) -> Outcome) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        d.current_context()?;
        let stream = to_handle(stream);
        d.streams.check_stream(stream)?;
        work(d)?;
        d.mark_pending(stream);
        Ok(())
    })
}

/// `cuMemcpyDtoD` (synchronous; the simulator's work is done when the call returns).
fn memcpy_dtod(dst: u64, src: u64, n: usize) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        d.current_context()?;
        d.memory.copy_device(dst, src, n as u64)
    })
}

/// `cuMemsetD8` (synchronous).
fn memset_sync(dst: u64, value: u8, n: usize) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        d.current_context()?;
        let bytes = vec![value; n];
        // SAFETY: `bytes` is a live buffer of exactly the bytes copied.
        unsafe { d.memory.copy_to_device(dst, bytes.as_ptr(), n as u64) }
    })
}

/// `cuMemsetD8Async` and `cuMemsetD32Async`: `n` elements of `value`'s `width` bytes.
fn memset_async(dst: u64, value: u32, width: usize, n: usize, stream: CUstream) -> Outcome {
    on_stream(stream, |d| {
        let bytes: Vec<u8> = (0..n)
            .flat_map(|_| value.to_le_bytes().into_iter().take(width))
            .collect();
        // SAFETY: `bytes` is a live buffer of exactly the bytes copied.
        unsafe {
            d.memory
                .copy_to_device(dst, bytes.as_ptr(), bytes.len() as u64)
        }
    })
}

/// `cuStreamAttachMemAsync` (`ptsz`: through the `_ptsz` export, where stream 0 is the
/// calling thread's per-thread stream).
fn attach(stream: CUstream, dptr: u64, length: usize, flags: c_uint, ptsz: bool) -> Outcome {
    check_initialized()?;
    if flags == 0 && crate::config::config().behaviour == crate::config::Behaviour::R580 {
        // Measured: R580 never returns from flags 0; the process dies of SIGSEGV inside the
        // call (LD_PRELOAD.md, "cuStreamAttachMemAsync on R580, measured"). A program that
        // handles the signal and returns gets the documented answer.
        // SAFETY: raising a signal in this thread has no memory-safety precondition.
        unsafe { libc::raise(libc::SIGSEGV) };
        return Err(INVALID_VALUE);
    }
    state::with(|d| d.attach_cuda(to_handle(stream), dptr, length as u64, flags, ptsz))
}

fn stream_synchronize(stream: CUstream) -> Outcome {
    check_initialized()?;
    state::with(|d| d.synchronize_stream(to_handle(stream)))
}

fn stream_query(stream: CUstream) -> Outcome {
    check_initialized()?;
    state::with(|d| d.query_stream(to_handle(stream)))
}

fn event_record(event: CUevent, stream: CUstream) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        let stream = to_handle(stream);
        d.streams.check_stream(stream)?;
        let pending = d.query_stream(stream) == Err(NOT_READY);
        let e = d
            .streams
            .event_mut(to_handle(event))
            .ok_or(INVALID_HANDLE)?;
        e.recorded = true;
        e.after = pending.then_some(stream);
        Ok(())
    })
}

/// `cuStreamCreate` and `cuStreamCreateWithPriority`: the stream belongs to the current context;
/// a priority outside the device's range is clamped into it, as documented.
///
/// # Safety
/// `ph_stream` is NULL or writable.
unsafe fn stream_create(ph_stream: *mut CUstream, flags: c_uint, priority: c_int) -> Outcome {
    check_initialized()?;
    require(ph_stream)?;
    if flags & !STREAM_NON_BLOCKING != 0 {
        return Err(INVALID_VALUE);
    }
    let priority = priority.clamp(CU_STREAM_PRIORITY_GREATEST, CU_STREAM_PRIORITY_LEAST);
    let handle = state::with(|d| {
        let (owner, device) = d.current_owner()?;
        Outcome::Ok(d.streams.create_stream(owner, device, flags, priority))
    })?;
    // SAFETY: `ph_stream` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *ph_stream = handles::to_ptr(handle) };
    Ok(())
}

/// `cuStreamGetCtx[_v2][_ptsz]`: the context that was current when the stream was created; for
/// the special handles (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) the current context, and
/// INVALID_CONTEXT without one. A destroyed or unknown stream, or a HIP stream (it has no CUDA
/// context), is INVALID_HANDLE (the documentation calls it undefined behaviour).
///
/// # Safety
/// `pctx` is NULL or writable.
unsafe fn stream_get_ctx(stream: CUstream, pctx: *mut CUcontext) -> Outcome {
    check_initialized()?;
    require(pctx)?;
    let handle = to_handle(stream);
    let ctx = state::with(|d| {
        if crate::stream_event::is_special(handle) {
            return d.current_context().map(|(ctx, _)| ctx);
        }
        match d.streams.stream(handle).map(|s| s.owner) {
            Some(Owner::Context(id)) => Ok(handles::encode(Kind::Context, id)),
            Some(Owner::HipDevice(_) | Owner::MemPool(_)) | None => Err(INVALID_HANDLE),
        }
    })?;
    // SAFETY: `pctx` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pctx = handles::to_ptr(ctx) };
    Ok(())
}

/// `cuStreamGetCtx_v2[_ptsz]`: green contexts are not simulated, so `*pGreenCtx` is always NULL.
///
/// # Safety
/// `pctx` and `pgreen` are NULL or writable.
unsafe fn stream_get_ctx_v2(
    stream: CUstream,
    pctx: *mut CUcontext,
    pgreen: *mut CUgreenCtx,
) -> Outcome {
    check_initialized()?;
    require(pgreen)?;
    // SAFETY: `pctx` is NULL or writable (this function's contract).
    unsafe { stream_get_ctx(stream, pctx) }?;
    // SAFETY: `pgreen` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pgreen = std::ptr::null_mut() };
    Ok(())
}

/// The three-argument context creators (v1 and v2 share the prototype).
///
/// # Safety
/// `pctx` is NULL or writable.
unsafe fn ctx_create(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) -> Outcome {
    check_initialized()?;
    require(pctx)?;
    if flags & !CTX_FLAGS_MASK != 0 {
        return Err(INVALID_VALUE);
    }
    device::check(dev)?;
    let handle = state::with(|d| d.contexts.create(dev));
    context::push(handle);
    // SAFETY: `pctx` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pctx = handles::to_ptr(handle) };
    Ok(())
}

/// `cuIpcOpenMemHandle` (v1) and `cuIpcOpenMemHandle_v2`.
///
/// # Safety
/// `pdptr` is NULL or writable.
unsafe fn ipc_open(
    pdptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    flags: c_uint,
    mode: OpenMode,
) -> Outcome {
    check_initialized()?;
    require(pdptr)?;
    // R580 (measured): the legacy export refuses a handle of this process (201) before it looks
    // at the flags; `_v2` looks at the flags first (1).
    if mode == OpenMode::Legacy && crate::ipc::exported_here(&handle.reserved) {
        return Err(INVALID_CONTEXT);
    }
    if flags != IPC_MEM_LAZY_ENABLE_PEER_ACCESS {
        return Err(INVALID_VALUE);
    }
    let ptr = state::with(|d| {
        let (owner, device) = d.current_owner()?;
        let codes = OpenCodes {
            stale: INVALID_VALUE,
            exporter_exited: INVALID_HANDLE,
            other_context: INVALID_HANDLE,
            unreachable: MAP_FAILED,
        };
        d.open_memory(&handle.reserved, owner, device, mode, codes)
    })?;
    // SAFETY: `pdptr` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pdptr = ptr };
    Ok(())
}

/// `cuStreamWaitEvent[_ptsz]`: the work is done at once, so there is nothing to wait for; the
/// stream and event must exist and the flags be 0 or CU_EVENT_WAIT_EXTERNAL (1).
fn stream_wait_event(stream: CUstream, event: CUevent, flags: c_uint) -> Outcome {
    check_initialized()?;
    if flags & !1 != 0 {
        return Err(INVALID_VALUE);
    }
    state::with(|d| {
        let stream = to_handle(stream);
        d.streams.check_stream(stream)?;
        let after = d
            .streams
            .event(to_handle(event))
            .ok_or(INVALID_HANDLE)?
            .after;
        // Waiting for an event whose work is still pending: this stream has work pending too
        // (R580: cuStreamQuery 600 until then).
        if after.is_some_and(|first| d.query_stream(first) == Err(NOT_READY)) {
            d.mark_pending(stream);
        }
        Ok(())
    })
}

/// `cuEventElapsedTime[_v2]`: INVALID_HANDLE for an event created with DISABLE_TIMING, which
/// every imported IPC event is (R580: 400, measured), NOT_READY for one never recorded.
///
/// # Safety
/// `ms` is NULL or a writable `f32`.
unsafe fn elapsed_time(ms: *mut f32, start: CUevent, end: CUevent) -> Outcome {
    check_initialized()?;
    require(ms)?;
    state::with(|d| {
        for e in [start, end] {
            let e = d.streams.event(to_handle(e)).ok_or(INVALID_HANDLE)?;
            if e.flags & EVENT_DISABLE_TIMING != 0 {
                return Err(INVALID_HANDLE);
            }
            if !e.recorded {
                return Err(NOT_READY);
            }
        }
        Ok(())
    })?;
    // SAFETY: `ms` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *ms = 0.0 };
    Ok(())
}

/// The logical endpoint functions exist from CUDA 13.3 on.
fn logical_endpoints_available() -> Outcome {
    if !config().has_logical_endpoints() {
        return Err(NOT_SUPPORTED);
    }
    check_initialized()
}

/// Reads and checks `CUmemAllocationProp` for a pinned allocation on a device.
///
/// # Safety
/// `prop` is NULL or points to a readable `CUmemAllocationProp`.
/// Waits (without the state's lock) until the team of `handle` is whole, at most the configured
/// time: `Ok` when whole, INVALID_VALUE for an unknown object, ILLEGAL_STATE after the wait
/// (announced on stderr: the real driver would block on).
fn wait_whole(handle: u64, call: &str) -> Outcome {
    let limit = std::time::Duration::from_millis(crate::config::config().multicast_wait_ms);
    let start = std::time::Instant::now();
    loop {
        match state::with(|d| d.multicast.whole(handle)) {
            None => return Err(INVALID_VALUE),
            Some(true) => return Ok(()),
            Some(false) if start.elapsed() >= limit => {
                let (want, have) = state::with(|d| d.multicast.missing(handle)).unwrap_or((0, 0));
                eprintln!(
                    "sharecheck-sim: {call} waited {} ms for the multicast team ({have} of {want} \
                     devices added) and answers CUDA_ERROR_ILLEGAL_STATE; a driver would block \
                     until every device is added",
                    limit.as_millis()
                );
                return Err(ILLEGAL_STATE);
            }
            Some(false) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

/// A multicast bind of `mem` (`cuMulticastBindMem[_v2]`), once the team is whole.
#[allow(clippy::too_many_arguments)]
fn bind_mem(
    mc: u64,
    dev: Option<c_int>,
    mc_offset: usize,
    mem: u64,
    mem_offset: usize,
    size: usize,
    flags: u64,
    call: &str,
) -> Outcome {
    wait_whole(mc, call)?;
    let request = multicast::BindRequest {
        mc,
        dev,
        mc_offset: mc_offset as u64,
        mem,
        mem_offset: mem_offset as u64,
        size: size as u64,
        flags,
    };
    state::with(|d| d.multicast.bind(&d.memory, &request))
}

/// A multicast bind of the memory mapped at `memptr` (`cuMulticastBindAddr[_v2]`): the mapping's
/// allocation, from the mapped offset. Pool memory (`cudaMallocAsync`) is not modelled.
fn bind_addr(
    mc: u64,
    dev: Option<c_int>,
    mc_offset: usize,
    memptr: u64,
    size: usize,
    flags: u64,
    call: &str,
) -> Outcome {
    wait_whole(mc, call)?;
    state::with(|d| {
        let m = d.memory.virtual_mapping(memptr).ok_or(INVALID_VALUE)?;
        let request = multicast::BindRequest {
            mc,
            dev,
            mc_offset: mc_offset as u64,
            mem: m.handle,
            mem_offset: m.offset + (memptr - m.start),
            size: size as u64,
            flags,
        };
        d.multicast.bind(&d.memory, &request)
    })
}

pub(crate) unsafe fn allocation_prop(
    prop: *const CUmemAllocationProp,
) -> Outcome<CUmemAllocationProp> {
    require(prop)?;
    // SAFETY: `prop` is not NULL (checked above) and, by this function's contract, readable.
    let prop = unsafe { prop.read_unaligned() };
    if prop.type_ != MEM_ALLOCATION_TYPE_PINNED {
        return Err(INVALID_VALUE);
    }
    match prop.location.type_ {
        MEM_LOCATION_TYPE_DEVICE => device::check(prop.location.id)?,
        // Host NUMA memory: any node a simulated device names as its closest
        // (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID), as a machine's nodes are.
        MEM_LOCATION_TYPE_HOST_NUMA if device::is_numa_node(prop.location.id) => {}
        _ => return Err(INVALID_VALUE),
    }
    Ok(prop)
}

/// `cuMemAllocHost_v2` (flags 0) and `cuMemHostAlloc`: page-locked host memory of the current
/// context. Every simulated device has unified addressing, so the device pointer "is always
/// equal to the returned host pointer"; the simulator keeps that for WRITECOMBINED memory too.
///
/// # Safety
/// `pp` is NULL or writable.
unsafe fn host_alloc(pp: *mut *mut c_void, bytesize: usize, flags: c_uint) -> Outcome {
    check_initialized()?;
    require(pp)?;
    let known = MEMHOSTALLOC_PORTABLE | MEMHOSTALLOC_DEVICEMAP | MEMHOSTALLOC_WRITECOMBINED;
    if flags & !known != 0 {
        return Err(INVALID_VALUE);
    }
    let base = state::with(|d| {
        let (owner, device) = d.current_owner()?;
        d.memory
            .allocate(bytesize as u64, device, owner, MemKind::Host { flags })
    })?;
    // SAFETY: `pp` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pp = base as usize as *mut c_void };
    Ok(())
}

/// `cuMemAllocAsync[_ptsz]`: memory from the default pool of the stream's device (the one
/// default stream of the simulator serves both spellings). The allocation is made at once; it
/// belongs to the pool, not to a context, so destroying a context does not free it.
///
/// # Safety
/// `dptr` is NULL or writable.
unsafe fn alloc_async(dptr: *mut CUdeviceptr, bytesize: usize, stream: CUstream) -> Outcome {
    check_initialized()?;
    require(dptr)?;
    let base = state::with(|d| {
        let device = d.stream_device(to_handle(stream))?;
        if !device::flag(device, attribute::MEMORY_POOLS_SUPPORTED) {
            return Err(NOT_SUPPORTED);
        }
        let owner = Owner::MemPool(device);
        d.memory
            .allocate(bytesize as u64, device, owner, MemKind::Pool)
    })?;
    // SAFETY: `dptr` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *dptr = base };
    Ok(())
}

/// `cuMemFreeAsync[_ptsz]`: frees pool memory at once. NULL is nothing to free (as for
/// `cuMemFree`); memory from any other allocator, memory already freed, and unknown addresses are
/// INVALID_VALUE.
fn free_async(dptr: CUdeviceptr, stream: CUstream) -> Outcome {
    check_initialized()?;
    state::with(|d| {
        d.stream_device(to_handle(stream))?;
        if dptr == 0 {
            return Ok(());
        }
        d.free_pool_import(dptr).unwrap_or_else(|| {
            d.retain_pool_export(dptr);
            d.doom_if_poisoned(dptr);
            d.free_memory(dptr, |a| a.kind == MemKind::Pool)
        })
    })
}

/// `cuMemAllocFromPoolAsync[_ptsz]`.
///
/// # Safety
/// `dptr` is NULL or writable.
unsafe fn alloc_from_pool(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> Outcome {
    check_initialized()?;
    require(dptr)?;
    if bytesize == 0 {
        return Err(INVALID_VALUE);
    }
    let base =
        state::with(|d| d.pool_allocate(bytesize as u64, pool as usize as u64, to_handle(stream)))?;
    // SAFETY: `dptr` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *dptr = base };
    Ok(())
}

exports! {
    table CUDA_EXPORTS for "cuda";

    fn cuInit(Flags: c_uint) {
        if Flags != 0 {
            return Err(INVALID_VALUE);
        }
        if device::count() == 0 {
            return Err(NO_DEVICE);
        }
        context::mark_initialized();
        Ok(())
    }

    fn cuDriverGetVersion(driverVersion: *mut c_int) {
        require(driverVersion)?;
        // SAFETY: `driverVersion` is not NULL (checked above); `cuDriverGetVersion` documents it as a writable `int`.
        unsafe { *driverVersion = config().driver_version };
        Ok(())
    }

    fn cuDeviceGetCount(count: *mut c_int) {
        check_initialized()?;
        require(count)?;
        // SAFETY: `count` is not NULL (checked above); `cuDeviceGetCount` documents it as a writable `int`.
        unsafe { *count = device::count() };
        Ok(())
    }

    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) {
        check_initialized()?;
        require(device)?;
        device::check(ordinal)?;
        // SAFETY: `device` is not NULL (checked above); `cuDeviceGet` documents it as a writable `CUdevice`.
        unsafe { *device = ordinal };
        Ok(())
    }

    fn cuDeviceGetAttribute(pi: *mut c_int, attrib: c_int, dev: CUdevice) {
        check_initialized()?;
        require(pi)?;
        let value = device::attribute(dev, attrib)?;
        // SAFETY: `pi` is not NULL (checked above); `cuDeviceGetAttribute` documents it as a
        // writable `int`.
        unsafe { *pi = value };
        Ok(())
    }

    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) {
        check_initialized()?;
        require(name)?;
        if len <= 0 {
            return Err(INVALID_VALUE);
        }
        device::check(dev)?;
        let text = device::name(dev);
        let n = text.len().min(len as usize - 1);
        // SAFETY: `name` is not NULL (checked above) and, as `cuDeviceGetName` documents, holds
        // `len` writable bytes; n + 1 <= len bytes are written, from a string of at least n.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast(), name, n);
            *name.add(n) = 0;
        }
        Ok(())
    }

    fn cuDeviceGetUuid(uuid: *mut [u8; 16], dev: CUdevice) {
        device_uuid(uuid, dev)
    }

    fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], dev: CUdevice) {
        device_uuid(uuid, dev)
    }

    fn cuDeviceCanAccessPeer(canAccessPeer: *mut c_int, dev: CUdevice, peerDev: CUdevice) {
        check_initialized()?;
        require(canAccessPeer)?;
        device::check(dev)?;
        device::check(peerDev)?;
        // SAFETY: `canAccessPeer` is not NULL (checked above); `cuDeviceCanAccessPeer` documents it as a writable `int`.
        unsafe { *canAccessPeer = c_int::from(device::can_access_peer(dev, peerDev)) };
        Ok(())
    }

    fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) {
        check_initialized()?;
        require(pctx)?;
        device::check(dev)?;
        // SAFETY: `pctx` is not NULL (checked above); `cuDevicePrimaryCtxRetain` documents it as a writable `CUcontext`.
        unsafe { *pctx = handles::to_ptr(state::with(|d| d.contexts.retain_primary(dev))) };
        Ok(())
    }

    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) {
        check_initialized()?;
        device::check(dev)?;
        state::with(|d| {
            if let Some(id) = d.contexts.release_primary(dev)? {
                d.release_owner(Owner::Context(id));
            }
            Ok(())
        })
    }

    fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) {
        check_initialized()?;
        device::check(dev)?;
        state::with(|d| {
            if let Some(id) = d.contexts.reset_primary(dev) {
                d.release_owner(Owner::Context(id));
            }
        });
        Ok(())
    }

    fn cuDevicePrimaryCtxGetState(dev: CUdevice, flags: *mut c_uint, active: *mut c_int) {
        check_initialized()?;
        require(flags)?;
        require(active)?;
        device::check(dev)?;
        let (stored, is_active) = state::with(|d| d.contexts.primary_state(dev));
        // SAFETY: `flags` and `active` are not NULL (checked above);
        // `cuDevicePrimaryCtxGetState` documents them as a writable `unsigned int` and `int`.
        unsafe {
            *flags = stored;
            *active = c_int::from(is_active);
        }
        Ok(())
    }

    fn cuCtxCreate(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) {
        // SAFETY: `pctx` is NULL or a writable `CUcontext` (`cuCtxCreate`'s contract).
        unsafe { ctx_create(pctx, flags, dev) }
    }

    fn cuCtxCreate_v2(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) {
        // SAFETY: `pctx` is NULL or a writable `CUcontext` (`cuCtxCreate`'s contract).
        unsafe { ctx_create(pctx, flags, dev) }
    }

    fn cuCtxCreate_v3(pctx: *mut CUcontext, paramsArray: *mut c_void, numParams: c_int, flags: c_uint, dev: CUdevice) {
        check_initialized()?;
        if numParams < 0 || numParams > 0 && paramsArray.is_null() {
            return Err(INVALID_VALUE);
        }
        // Execution affinity needs MPS, which the simulator does not have.
        if numParams > 0 {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: `pctx` is NULL or a writable `CUcontext` (`cuCtxCreate_v3`'s contract).
        unsafe { ctx_create(pctx, flags, dev) }
    }

    fn cuCtxCreate_v4(pctx: *mut CUcontext, ctxCreateParams: *mut CUctxCreateParams, flags: c_uint, dev: CUdevice) {
        check_initialized()?;
        // SAFETY: `ctxCreateParams` is NULL or, as `cuCtxCreate_v4` documents, points to a
        // readable `CUctxCreateParams`.
        if let Some(params) = unsafe { ctxCreateParams.as_ref() } {
            if params.num_exec_affinity_params < 0
                || params.num_exec_affinity_params > 0 && params.exec_affinity_params.is_null()
            {
                return Err(INVALID_VALUE);
            }
            // Execution affinity (MPS) and CIG (graphics interop) are not simulated.
            if params.num_exec_affinity_params > 0 || !params.cig_params.is_null() {
                return Err(NOT_SUPPORTED);
            }
        }
        // SAFETY: `pctx` is NULL or a writable `CUcontext` (`cuCtxCreate_v4`'s contract).
        unsafe { ctx_create(pctx, flags, dev) }
    }

    fn cuCtxDestroy_v2(ctx: CUcontext) {
        check_initialized()?;
        let handle = to_handle(ctx);
        state::with(|d| {
            let id = d.contexts.destroy(handle)?;
            d.release_owner(Owner::Context(id));
            Outcome::Ok(())
        })?;
        context::forget_if_current(handle);
        Ok(())
    }

    fn cuCtxSetCurrent(ctx: CUcontext) {
        check_initialized()?;
        let handle = to_handle(ctx);
        if handle != 0 {
            state::with(|d| d.contexts.get(handle).map(|_| ()))?;
        }
        context::set_current(handle);
        Ok(())
    }

    fn cuCtxGetCurrent(pctx: *mut CUcontext) {
        check_initialized()?;
        require(pctx)?;
        let current = state::with(|d| d.current_context().map(|(h, _)| h).unwrap_or(0));
        // SAFETY: `pctx` is not NULL (checked above); `cuCtxGetCurrent` documents it as a writable `CUcontext`.
        unsafe { *pctx = handles::to_ptr(current) };
        Ok(())
    }

    fn cuCtxPushCurrent_v2(ctx: CUcontext) {
        check_initialized()?;
        let handle = to_handle(ctx);
        state::with(|d| d.contexts.get(handle).map(|_| ()))?;
        context::push(handle);
        Ok(())
    }

    fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) {
        check_initialized()?;
        let handle = context::pop().ok_or(INVALID_CONTEXT)?;
        if !pctx.is_null() {
            // SAFETY: `pctx` is not NULL; `cuCtxPopCurrent` documents it as an optional writable
            // `CUcontext`.
            unsafe { *pctx = handles::to_ptr(handle) };
        }
        Ok(())
    }

    fn cuCtxGetDevice(device: *mut CUdevice) {
        check_initialized()?;
        require(device)?;
        let ordinal = state::with(|d| d.current_context())?.1;
        // SAFETY: `device` is not NULL (checked above); `cuCtxGetDevice` documents it as a
        // writable `CUdevice`.
        unsafe { *device = ordinal };
        Ok(())
    }

    fn cuCtxGetDevice_v2(device: *mut CUdevice, ctx: CUcontext) {
        check_initialized()?;
        require(device)?;
        let ordinal = state::with(|d| match to_handle(ctx) {
            0 => d.current_context().map(|(_, dev)| dev),
            h => d.contexts.get(h).map(|c| c.device),
        })?;
        // SAFETY: `device` is not NULL (checked above); `cuCtxGetDevice_v2` documents it as a
        // writable `CUdevice`.
        unsafe { *device = ordinal };
        Ok(())
    }

    fn cuCtxSynchronize() {
        check_initialized()?;
        state::with(|d| {
            let (owner, _) = d.current_owner()?;
            d.streams.synchronize_owner(owner);
            Ok(())
        })
    }

    fn cuCtxSynchronize_v2(ctx: CUcontext) {
        check_initialized()?;
        state::with(|d| {
            let owner = match to_handle(ctx) {
                0 => d.current_owner()?.0,
                h => Owner::Context(d.contexts.id_of(h)?),
            };
            d.streams.synchronize_owner(owner);
            Ok(())
        })
    }

    fn cuCtxEnablePeerAccess(peerContext: CUcontext, Flags: c_uint) {
        check_initialized()?;
        state::with(|d| d.enable_peer_context(to_handle(peerContext), Flags))
    }

    fn cuCtxDisablePeerAccess(peerContext: CUcontext) {
        check_initialized()?;
        state::with(|d| d.disable_peer_context(to_handle(peerContext)))
    }

    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) {
        check_initialized()?;
        require(dptr)?;
        let base = state::with(|d| {
            let (owner, device) = d.current_owner()?;
            d.memory.allocate(bytesize as u64, device, owner, MemKind::Device)
        })?;
        // SAFETY: `dptr` is not NULL (checked above); `cuMemAlloc` documents it as a writable
        // `CUdeviceptr`.
        unsafe { *dptr = base };
        Ok(())
    }

    fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) {
        check_initialized()?;
        require(dptr)?;
        if flags != MEM_ATTACH_GLOBAL && flags != MEM_ATTACH_HOST {
            return Err(INVALID_VALUE);
        }
        let base = state::with(|d| {
            let (owner, device) = d.current_owner()?;
            if !device::flag(device, attribute::MANAGED_MEMORY) {
                return Err(NOT_SUPPORTED);
            }
            d.memory.allocate(bytesize as u64, device, owner, MemKind::Managed { flags })
        })?;
        // SAFETY: `dptr` is not NULL (checked above); `cuMemAllocManaged` documents it as a
        // writable `CUdeviceptr`.
        unsafe { *dptr = base };
        Ok(())
    }

    fn cuMemAllocPitch_v2(dptr: *mut CUdeviceptr, pPitch: *mut usize, WidthInBytes: usize, Height: usize, ElementSizeBytes: c_uint) {
        check_initialized()?;
        require(dptr)?;
        require(pPitch)?;
        // "ElementSizeBytes may be 4, 8 or 16".
        if !PITCH_ELEMENT_SIZES.contains(&ElementSizeBytes) || WidthInBytes == 0 || Height == 0 {
            return Err(INVALID_VALUE);
        }
        let pitch = (WidthInBytes as u64).checked_next_multiple_of(PITCH_ALIGNMENT).ok_or(OUT_OF_MEMORY)?;
        let size = pitch.checked_mul(Height as u64).ok_or(OUT_OF_MEMORY)?;
        // Plain device memory (freed with cuMemFree, exportable through IPC), `pitch` bytes a row.
        let base = state::with(|d| {
            let (owner, device) = d.current_owner()?;
            d.memory.allocate(size, device, owner, MemKind::Device)
        })?;
        // SAFETY: both are not NULL (checked above); `cuMemAllocPitch` documents them as a
        // writable `CUdeviceptr` and `size_t`.
        unsafe {
            *dptr = base;
            *pPitch = pitch as usize;
        }
        Ok(())
    }

    fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) {
        // SAFETY: `pp` is NULL or a writable `void *` (`cuMemAllocHost`'s contract).
        unsafe { host_alloc(pp, bytesize, 0) }
    }

    fn cuMemHostAlloc(pp: *mut *mut c_void, bytesize: usize, Flags: c_uint) {
        // SAFETY: `pp` is NULL or a writable `void *` (`cuMemHostAlloc`'s contract).
        unsafe { host_alloc(pp, bytesize, Flags) }
    }

    fn cuMemAllocAsync(dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) {
        // SAFETY: `dptr` is NULL or a writable `CUdeviceptr` (`cuMemAllocAsync`'s contract).
        unsafe { alloc_async(dptr, bytesize, hStream) }
    }

    fn cuMemAllocAsync_ptsz(dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) {
        // SAFETY: `dptr` is NULL or a writable `CUdeviceptr` (`cuMemAllocAsync`'s contract).
        unsafe { alloc_async(dptr, bytesize, hStream) }
    }

    fn cuMemAllocFromPoolAsync(dptr: *mut CUdeviceptr, bytesize: usize, pool: CUmemoryPool, hStream: CUstream) {
        // SAFETY: `dptr` is NULL or a writable `CUdeviceptr` (`cuMemAllocFromPoolAsync`'s contract).
        unsafe { alloc_from_pool(dptr, bytesize, pool, hStream) }
    }

    fn cuMemAllocFromPoolAsync_ptsz(dptr: *mut CUdeviceptr, bytesize: usize, pool: CUmemoryPool, hStream: CUstream) {
        // SAFETY: `dptr` is NULL or a writable `CUdeviceptr` (`cuMemAllocFromPoolAsync`'s contract).
        unsafe { alloc_from_pool(dptr, bytesize, pool, hStream) }
    }

    fn cuMemPoolCreate(pool: *mut CUmemoryPool, poolProps: *const CUmemPoolProps) {
        check_initialized()?;
        require(pool)?;
        require(poolProps)?;
        // SAFETY: `poolProps` is not NULL (checked above) and, as `cuMemPoolCreate` documents,
        // a readable `CUmemPoolProps`.
        let props = unsafe { poolProps.read_unaligned() };
        let created = state::with(|d| d.pool_create(&props))?;
        // SAFETY: `pool` is not NULL (checked above); documented as a writable `CUmemoryPool`.
        unsafe { *pool = handles::to_ptr(created) };
        Ok(())
    }

    fn cuMemPoolDestroy(pool: CUmemoryPool) {
        check_initialized()?;
        state::with(|d| d.pool_destroy(pool as usize as u64))
    }

    fn cuMemPoolSetAccess(pool: CUmemoryPool, map: *const CUmemAccessDesc, count: usize) {
        check_initialized()?;
        require(map)?;
        if count == 0 {
            return Err(INVALID_VALUE);
        }
        state::with(|d| d.pool_set_access(pool as usize as u64))
    }

    fn cuMemPoolExportToShareableHandle(handle_out: *mut c_void, pool: CUmemoryPool, handleType: c_uint, flags: c_ulonglong) {
        check_initialized()?;
        require(handle_out)?;
        let fd = state::with(|d| d.pool_export(pool as usize as u64, handleType, flags))?;
        // SAFETY: `handle_out` is not NULL (checked above); for a POSIX fd it is a writable int,
        // as cuMemPoolExportToShareableHandle documents.
        unsafe { *handle_out.cast::<c_int>() = fd };
        Ok(())
    }

    fn cuMemPoolImportFromShareableHandle(pool_out: *mut CUmemoryPool, handle: *mut c_void, handleType: c_uint, flags: c_ulonglong) {
        check_initialized()?;
        require(pool_out)?;
        // For a POSIX fd, handle is the descriptor's number cast to a pointer.
        let imported = state::with(|d| d.pool_import(handle as usize as c_int, handleType, flags))?;
        // SAFETY: `pool_out` is not NULL (checked above); documented as a writable `CUmemoryPool`.
        unsafe { *pool_out = handles::to_ptr(imported) };
        Ok(())
    }

    fn cuMemPoolExportPointer(shareData_out: *mut CUmemPoolPtrExportData, ptr: CUdeviceptr) {
        check_initialized()?;
        require(shareData_out)?;
        let data = state::with(|d| d.pool_export_pointer(ptr))?;
        // SAFETY: `shareData_out` is not NULL (checked above); documented as a writable
        // `CUmemPoolPtrExportData`.
        unsafe { *shareData_out = CUmemPoolPtrExportData { reserved: data } };
        Ok(())
    }

    fn cuMemPoolImportPointer(ptr_out: *mut CUdeviceptr, pool: CUmemoryPool, shareData: *mut CUmemPoolPtrExportData) {
        check_initialized()?;
        require(ptr_out)?;
        require(shareData)?;
        // SAFETY: `shareData` is not NULL (checked above); documented as readable export data.
        let data = unsafe { shareData.read_unaligned() }.reserved;
        let ptr = state::with(|d| d.pool_import_pointer(pool as usize as u64, &data))?;
        // SAFETY: `ptr_out` is not NULL (checked above); documented as a writable `CUdeviceptr`.
        unsafe { *ptr_out = ptr };
        Ok(())
    }

    fn cuMemFree_v2(dptr: CUdeviceptr) {
        check_initialized()?;
        if dptr == 0 {
            return Ok(());
        }
        // "dptr ... must have been returned by ... cuMemAlloc(), cuMemAllocPitch(),
        // cuMemAllocManaged(), cuMemAllocAsync(), cuMemAllocFromPoolAsync()", or imported with
        // cuMemPoolImportPointer ("The pointer may be freed with cuMemFree or cuMemFreeAsync").
        state::with(|d| d.free_pointer(dptr, |a| matches!(a.kind, MemKind::Device | MemKind::Managed { .. } | MemKind::Pool)))
    }

    fn cuMemFreeHost(p: *mut c_void) {
        check_initialized()?;
        if p.is_null() {
            return Ok(());
        }
        // "p ... must have been returned by a previous call to cuMemAllocHost()" (or
        // cuMemHostAlloc: "must be freed with cuMemFreeHost()").
        state::with(|d| d.free_memory(p as u64, |a| matches!(a.kind, MemKind::Host { .. })))
    }

    fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream) {
        free_async(dptr, hStream)
    }

    fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, hStream: CUstream) {
        free_async(dptr, hStream)
    }

    fn cuMemGetAddressRange_v2(pbase: *mut CUdeviceptr, psize: *mut usize, dptr: CUdeviceptr) {
        check_initialized()?;
        // Memory the driver does not know is CUDA_ERROR_NOT_FOUND, as documented.
        let (base, size) = state::with(|d| d.memory.address_range(dptr)).ok_or(NOT_FOUND)?;
        // SAFETY (both): the pointer is not NULL; `cuMemGetAddressRange` documents `pbase` and
        // `psize` as optional writable `CUdeviceptr` and `size_t`.
        if !pbase.is_null() {
            // SAFETY: as above.
            unsafe { *pbase = base };
        }
        if !psize.is_null() {
            // SAFETY: as above.
            unsafe { *psize = size as usize };
        }
        Ok(())
    }

    fn cuMemcpyHtoD_v2(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) {
        // SAFETY: `srcHost` is NULL or readable for `ByteCount` bytes (`cuMemcpyHtoD`'s contract).
        unsafe { memcpy_htod(dstDevice, srcHost, ByteCount) }
    }

    fn cuMemcpyHtoD_v2_ptds(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize) {
        // SAFETY: `srcHost` is NULL or readable for `ByteCount` bytes (`cuMemcpyHtoD`'s contract).
        unsafe { memcpy_htod(dstDevice, srcHost, ByteCount) }
    }

    fn cuMemcpyDtoD_v2(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) {
        memcpy_dtod(dstDevice, srcDevice, ByteCount)
    }

    fn cuMemcpyDtoD_v2_ptds(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize) {
        memcpy_dtod(dstDevice, srcDevice, ByteCount)
    }

    fn cuMemsetD8_v2(dstDevice: CUdeviceptr, uc: u8, N: usize) {
        memset_sync(dstDevice, uc, N)
    }

    fn cuMemsetD8_v2_ptds(dstDevice: CUdeviceptr, uc: u8, N: usize) {
        memset_sync(dstDevice, uc, N)
    }

    fn cuMemcpyDtoH_v2(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize) {
        // SAFETY: `dstHost` is NULL or writable for `ByteCount` bytes (`cuMemcpyDtoH`'s contract).
        unsafe { memcpy_dtoh(dstHost, srcDevice, ByteCount) }
    }

    fn cuMemcpyDtoH_v2_ptds(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize) {
        // SAFETY: `dstHost` is NULL or writable for `ByteCount` bytes (`cuMemcpyDtoH`'s contract).
        unsafe { memcpy_dtoh(dstHost, srcDevice, ByteCount) }
    }

    fn cuMemcpyPeer(dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize) {
        memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, None)
    }

    fn cuMemcpyPeer_ptds(dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize) {
        memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, None)
    }

    fn cuMemcpyPeerAsync(dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize, hStream: CUstream) {
        memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, Some(to_handle(hStream)))
    }

    fn cuMemcpyPeerAsync_ptsz(dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: usize, hStream: CUstream) {
        memcpy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, Some(to_handle(hStream)))
    }

    fn cuPointerGetAttributes(numAttributes: c_uint, attributes: *mut c_int, data: *mut *mut c_void, ptr: CUdeviceptr) {
        check_initialized()?;
        require(attributes)?;
        require(data)?;
        // SAFETY: `attributes` and `data` are not NULL and hold `numAttributes` entries
        // (`cuPointerGetAttributes`' contract); each data slot is checked for NULL before use.
        unsafe { pointer_attributes(numAttributes, attributes, data, ptr) }
    }

    fn cuPointerGetAttribute(data: *mut c_void, attribute: c_int, ptr: CUdeviceptr) {
        check_initialized()?;
        require(data)?;
        // SAFETY: `data` is not NULL (checked above) and, as `cuPointerGetAttribute` documents,
        // points to writable storage of the type that `attribute` names.
        unsafe { pointer_attribute(data, attribute, ptr) }
    }

    fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint) {
        // SAFETY: `phStream` is NULL or a writable `CUstream` (`cuStreamCreate`'s contract).
        unsafe { stream_create(phStream, Flags, 0) }
    }

    fn cuStreamCreateWithPriority(phStream: *mut CUstream, flags: c_uint, priority: c_int) {
        // SAFETY: `phStream` is NULL or a writable `CUstream` (the contract of
        // `cuStreamCreateWithPriority`).
        unsafe { stream_create(phStream, flags, priority) }
    }

    fn cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext) {
        // SAFETY: `pctx` is NULL or a writable `CUcontext` (`cuStreamGetCtx`'s contract).
        unsafe { stream_get_ctx(hStream, pctx) }
    }

    fn cuStreamGetCtx_ptsz(hStream: CUstream, pctx: *mut CUcontext) {
        // SAFETY: `pctx` is NULL or a writable `CUcontext` (`cuStreamGetCtx`'s contract).
        unsafe { stream_get_ctx(hStream, pctx) }
    }

    fn cuStreamGetCtx_v2(hStream: CUstream, pCtx: *mut CUcontext, pGreenCtx: *mut CUgreenCtx) {
        // SAFETY: `pCtx` and `pGreenCtx` are NULL or writable (`cuStreamGetCtx_v2`'s contract).
        unsafe { stream_get_ctx_v2(hStream, pCtx, pGreenCtx) }
    }

    fn cuStreamGetCtx_v2_ptsz(hStream: CUstream, pCtx: *mut CUcontext, pGreenCtx: *mut CUgreenCtx) {
        // SAFETY: `pCtx` and `pGreenCtx` are NULL or writable (`cuStreamGetCtx_v2`'s contract).
        unsafe { stream_get_ctx_v2(hStream, pCtx, pGreenCtx) }
    }

    fn cuStreamDestroy_v2(hStream: CUstream) {
        check_initialized()?;
        crate::state::destroy_stream(to_handle(hStream))
    }

    fn cuStreamSynchronize(hStream: CUstream) {
        stream_synchronize(hStream)
    }

    fn cuStreamSynchronize_ptsz(hStream: CUstream) {
        stream_synchronize(hStream)
    }

    fn cuStreamQuery(hStream: CUstream) {
        stream_query(hStream)
    }

    fn cuStreamQuery_ptsz(hStream: CUstream) {
        stream_query(hStream)
    }

    fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        on_stream(hStream, |d| d.memory.copy_device(dst, src, ByteCount as u64))
    }

    fn cuMemcpyAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        on_stream(hStream, |d| d.memory.copy_device(dst, src, ByteCount as u64))
    }

    fn cuMemcpyDtoDAsync_v2(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        on_stream(hStream, |d| d.memory.copy_device(dstDevice, srcDevice, ByteCount as u64))
    }

    fn cuMemcpyDtoDAsync_v2_ptsz(dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        on_stream(hStream, |d| d.memory.copy_device(dstDevice, srcDevice, ByteCount as u64))
    }

    fn cuMemcpyHtoDAsync_v2(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) {
        // SAFETY: `srcHost` is NULL or readable for `ByteCount` bytes (the call's contract).
        on_stream(hStream, |d| unsafe { d.memory.copy_to_device(dstDevice, srcHost.cast(), ByteCount as u64) })
    }

    fn cuMemcpyHtoDAsync_v2_ptsz(dstDevice: CUdeviceptr, srcHost: *const c_void, ByteCount: usize, hStream: CUstream) {
        // SAFETY: `srcHost` is NULL or readable for `ByteCount` bytes (the call's contract).
        on_stream(hStream, |d| unsafe { d.memory.copy_to_device(dstDevice, srcHost.cast(), ByteCount as u64) })
    }

    fn cuMemcpyDtoHAsync_v2(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        // SAFETY: `dstHost` is NULL or writable for `ByteCount` bytes (the call's contract).
        on_stream(hStream, |d| unsafe { d.memory.copy_from_device(dstHost.cast(), srcDevice, ByteCount as u64) })
    }

    fn cuMemcpyDtoHAsync_v2_ptsz(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize, hStream: CUstream) {
        // SAFETY: `dstHost` is NULL or writable for `ByteCount` bytes (the call's contract).
        on_stream(hStream, |d| unsafe { d.memory.copy_from_device(dstHost.cast(), srcDevice, ByteCount as u64) })
    }

    fn cuMemsetD8Async(dstDevice: CUdeviceptr, uc: u8, N: usize, hStream: CUstream) {
        memset_async(dstDevice, u32::from(uc), 1, N, hStream)
    }

    fn cuMemsetD8Async_ptsz(dstDevice: CUdeviceptr, uc: u8, N: usize, hStream: CUstream) {
        memset_async(dstDevice, u32::from(uc), 1, N, hStream)
    }

    fn cuMemsetD32Async(dstDevice: CUdeviceptr, ui: c_uint, N: usize, hStream: CUstream) {
        memset_async(dstDevice, ui, 4, N, hStream)
    }

    fn cuMemsetD32Async_ptsz(dstDevice: CUdeviceptr, ui: c_uint, N: usize, hStream: CUstream) {
        memset_async(dstDevice, ui, 4, N, hStream)
    }

    fn cuStreamAttachMemAsync(hStream: CUstream, dptr: CUdeviceptr, length: usize, flags: c_uint) {
        attach(hStream, dptr, length, flags, false)
    }

    fn cuStreamAttachMemAsync_ptsz(hStream: CUstream, dptr: CUdeviceptr, length: usize, flags: c_uint) {
        attach(hStream, dptr, length, flags, true)
    }

    fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint) {
        check_initialized()?;
        require(phEvent)?;
        let known = EVENT_BLOCKING_SYNC | EVENT_DISABLE_TIMING | EVENT_INTERPROCESS;
        let interprocess_without_timing_off =
            Flags & EVENT_INTERPROCESS != 0 && Flags & EVENT_DISABLE_TIMING == 0;
        if Flags & !known != 0 || interprocess_without_timing_off {
            return Err(INVALID_VALUE);
        }
        let handle = state::with(|d| {
            let (owner, device) = d.current_owner()?;
            Outcome::Ok(d.streams.create_event(owner, device, Flags))
        })?;
        // SAFETY: `phEvent` is not NULL (checked above); `cuEventCreate` documents it as a writable `CUevent`.
        unsafe { *phEvent = handles::to_ptr(handle) };
        Ok(())
    }

    fn cuEventDestroy_v2(hEvent: CUevent) {
        check_initialized()?;
        let event = state::with(|d| d.streams.remove_event(to_handle(hEvent)))?;
        if let Some(export) = event.export {
            crate::ipc::withdraw_event_export(export);
        }
        Ok(())
    }

    fn cuEventRecord(hEvent: CUevent, hStream: CUstream) {
        event_record(hEvent, hStream)
    }

    fn cuEventRecord_ptsz(hEvent: CUevent, hStream: CUstream) {
        event_record(hEvent, hStream)
    }

    fn cuEventSynchronize(hEvent: CUevent) {
        check_initialized()?;
        state::with(|d| d.streams.event(to_handle(hEvent)).map(|_| ()).ok_or(INVALID_HANDLE))
    }

    fn cuEventQuery(hEvent: CUevent) {
        check_initialized()?;
        state::with(|d| d.streams.event(to_handle(hEvent)).map(|_| ()).ok_or(INVALID_HANDLE))
    }

    fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, Flags: c_uint) {
        stream_wait_event(hStream, hEvent, Flags)
    }

    fn cuStreamWaitEvent_ptsz(hStream: CUstream, hEvent: CUevent, Flags: c_uint) {
        stream_wait_event(hStream, hEvent, Flags)
    }

    fn cuEventElapsedTime(pMilliseconds: *mut f32, hStart: CUevent, hEnd: CUevent) {
        // SAFETY: `pMilliseconds` is NULL or a writable float (`cuEventElapsedTime`'s contract).
        unsafe { elapsed_time(pMilliseconds, hStart, hEnd) }
    }

    fn cuEventElapsedTime_v2(pMilliseconds: *mut f32, hStart: CUevent, hEnd: CUevent) {
        // SAFETY: as `cuEventElapsedTime`.
        unsafe { elapsed_time(pMilliseconds, hStart, hEnd) }
    }

    fn cuMemCreate(handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const CUmemAllocationProp, flags: c_ulonglong) {
        check_initialized()?;
        require(handle)?;
        // SAFETY: `prop` is NULL or a readable `CUmemAllocationProp` (`cuMemCreate`'s contract).
        let prop = unsafe { allocation_prop(prop) }?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        let types = prop.requested_handle_types;
        // Host NUMA memory belongs to no device (-1).
        let (device, numa) = match prop.location.type_ {
            MEM_LOCATION_TYPE_HOST_NUMA => (-1, Some(prop.location.id)),
            _ => (prop.location.id, None),
        };
        if types & (MEM_HANDLE_TYPE_WIN32 | MEM_HANDLE_TYPE_WIN32_KMT) != 0 {
            return Err(NOT_SUPPORTED);
        }
        if types & !(MEM_HANDLE_TYPE_POSIX_FD | MEM_HANDLE_TYPE_FABRIC) != 0 {
            return Err(INVALID_VALUE);
        }
        // R580 without an IMEX channel file for the user.
        if types & MEM_HANDLE_TYPE_FABRIC != 0 && config().no_fabric_channel {
            return Err(NOT_PERMITTED);
        }
        let created = state::with(|d| d.memory.create_physical(size as u64, device, numa, types))?;
        // SAFETY: `handle` is not NULL (checked above); `cuMemCreate` documents it as a writable
        // `CUmemGenericAllocationHandle`.
        unsafe { *handle = created };
        Ok(())
    }

    fn cuMemRelease(handle: CUmemGenericAllocationHandle) {
        check_initialized()?;
        state::with(|d| {
            if d.multicast.is_multicast(handle) {
                d.multicast.release(handle)?;
            }
            d.memory.release_physical(handle)
        })
    }

    fn cuMulticastGetGranularity(granularity: *mut usize, prop: *const CUmulticastObjectProp, option: c_int) {
        check_initialized()?;
        require(granularity)?;
        require(prop)?;
        // SAFETY: `prop` is not NULL (checked above) and, as `cuMulticastGetGranularity`
        // documents, a readable `CUmulticastObjectProp`.
        let prop = unsafe { prop.read_unaligned() };
        let value = multicast::granularity(prop.size as u64, option)?;
        // SAFETY: `granularity` is not NULL (checked above); documented as a writable `size_t`.
        unsafe { *granularity = value as usize };
        Ok(())
    }

    fn cuMulticastCreate(mcHandle: *mut CUmemGenericAllocationHandle, prop: *const CUmulticastObjectProp) {
        check_initialized()?;
        require(mcHandle)?;
        require(prop)?;
        // SAFETY: `prop` is not NULL (checked above) and, as `cuMulticastCreate` documents, a
        // readable `CUmulticastObjectProp`.
        let p = unsafe { prop.read_unaligned() };
        let created = state::with(|d| {
            let handle = d.multicast.create(p.num_devices, p.size as u64, p.handle_types, p.flags)?;
            // The memory a cuMemMap of the object maps.
            if let Err(code) = d.memory.create_for_handle(handle, p.size as u64, p.handle_types as u32) {
                let _ = d.multicast.release(handle);
                return Err(code);
            }
            Ok(handle)
        })?;
        // SAFETY: `mcHandle` is not NULL (checked above); documented as a writable handle.
        unsafe { *mcHandle = created };
        Ok(())
    }

    fn cuMulticastAddDevice(mcHandle: CUmemGenericAllocationHandle, dev: CUdevice) {
        check_initialized()?;
        state::with(|d| d.multicast.add_device(mcHandle, dev))
    }

    fn cuMulticastBindMem(mcHandle: CUmemGenericAllocationHandle, mcOffset: usize, memHandle: CUmemGenericAllocationHandle, memOffset: usize, size: usize, flags: c_ulonglong) {
        check_initialized()?;
        bind_mem(mcHandle, None, mcOffset, memHandle, memOffset, size, flags, "cuMulticastBindMem")
    }

    fn cuMulticastBindMem_v2(mcHandle: CUmemGenericAllocationHandle, dev: CUdevice, mcOffset: usize, memHandle: CUmemGenericAllocationHandle, memOffset: usize, size: usize, flags: c_ulonglong) {
        check_initialized()?;
        bind_mem(mcHandle, Some(dev), mcOffset, memHandle, memOffset, size, flags, "cuMulticastBindMem_v2")
    }

    fn cuMulticastBindAddr(mcHandle: CUmemGenericAllocationHandle, mcOffset: usize, memptr: CUdeviceptr, size: usize, flags: c_ulonglong) {
        check_initialized()?;
        bind_addr(mcHandle, None, mcOffset, memptr, size, flags, "cuMulticastBindAddr")
    }

    fn cuMulticastBindAddr_v2(mcHandle: CUmemGenericAllocationHandle, dev: CUdevice, mcOffset: usize, memptr: CUdeviceptr, size: usize, flags: c_ulonglong) {
        check_initialized()?;
        bind_addr(mcHandle, Some(dev), mcOffset, memptr, size, flags, "cuMulticastBindAddr_v2")
    }

    fn cuMulticastUnbind(mcHandle: CUmemGenericAllocationHandle, dev: CUdevice, mcOffset: usize, size: usize) {
        check_initialized()?;
        state::with(|d| d.multicast.unbind(mcHandle, dev, mcOffset as u64, size as u64))
    }

    fn cuMemGetAllocationGranularity(granularity: *mut usize, prop: *const CUmemAllocationProp, option: c_int) {
        check_initialized()?;
        require(granularity)?;
        // SAFETY: `prop` is NULL or a readable `CUmemAllocationProp` (the contract of
        // `cuMemGetAllocationGranularity`).
        unsafe { allocation_prop(prop) }?;
        // CU_MEM_ALLOC_GRANULARITY_MINIMUM (0) or _RECOMMENDED (1).
        if option != 0 && option != 1 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `granularity` is not NULL (checked above); `cuMemGetAllocationGranularity`
        // documents it as a writable `size_t`.
        unsafe { *granularity = GRANULARITY as usize };
        Ok(())
    }

    fn cuMemAddressReserve(ptr: *mut CUdeviceptr, size: usize, alignment: usize, addr: CUdeviceptr, flags: c_ulonglong) {
        check_initialized()?;
        require(ptr)?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        let value = state::with(|d| d.memory.reserve(size as u64, alignment as u64, addr))?;
        // SAFETY: `ptr` is not NULL (checked above); `cuMemAddressReserve` documents it as a writable `CUdeviceptr`.
        unsafe { *ptr = value };
        Ok(())
    }

    /// A POSIX fd (this process's export or another's, passed over a unix socket) or a FABRIC
    /// handle (another process's of the same IMEX channel, `SHARECHECK_SIM_FABRIC_CHANNEL`): a
    /// new handle to the same memory. Other handle types: NOT_SUPPORTED.
    fn cuMemImportFromShareableHandle(handle: *mut CUmemGenericAllocationHandle, osHandle: *mut c_void, shHandleType: c_uint) {
        check_initialized()?;
        require(handle)?;
        let imported = match shHandleType {
            // For a POSIX fd, osHandle is the descriptor's number cast to a pointer.
            MEM_HANDLE_TYPE_POSIX_FD => {
                let fd = osHandle as usize as c_int;
                state::with(|d| d.memory.import_fd(fd))?
            }
            MEM_HANDLE_TYPE_FABRIC => {
                require(osHandle)?;
                // SAFETY: not NULL (checked above); for a FABRIC handle, osHandle points to the
                // 64 bytes of a `CUmemFabricHandle`, as the document says.
                let bytes = unsafe { osHandle.cast::<[u8; crate::memory::FABRIC_HANDLE_SIZE]>().read_unaligned() };
                state::with(|d| d.memory.import_fabric(&bytes))?
            }
            _ => return Err(NOT_SUPPORTED),
        };
        // SAFETY: `handle` is not NULL (checked above); documented as a writable handle.
        unsafe { *handle = imported };
        Ok(())
    }

    fn cuMemExportToShareableHandle(shareableHandle: *mut c_void, handle: CUmemGenericAllocationHandle, handleType: c_uint, flags: c_ulonglong) {
        check_initialized()?;
        require(shareableHandle)?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        if handleType == MEM_HANDLE_TYPE_FABRIC {
            let bytes = state::with(|d| d.memory.export_fabric(handle))?;
            // SAFETY: `shareableHandle` is not NULL (checked above); for a FABRIC handle it is a
            // writable `CUmemFabricHandle` (64 bytes), as cuMemExportToShareableHandle documents.
            unsafe { shareableHandle.cast::<[u8; crate::memory::FABRIC_HANDLE_SIZE]>().write_unaligned(bytes) };
            return Ok(());
        }
        let fd = state::with(|d| d.memory.export_fd(handle, handleType))?;
        // SAFETY: `shareableHandle` is not NULL (checked above); for a POSIX fd it is a
        // writable int, as cuMemExportToShareableHandle documents.
        unsafe { *shareableHandle.cast::<c_int>() = fd };
        Ok(())
    }

    fn cuMemRetainAllocationHandle(handle: *mut CUmemGenericAllocationHandle, addr: *mut c_void) {
        check_initialized()?;
        require(handle)?;
        let retained = state::with(|d| d.memory.retain_physical(addr as usize as u64))?;
        // SAFETY: `handle` is not NULL (checked above); documented as a writable handle.
        unsafe { *handle = retained };
        Ok(())
    }

    fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) {
        check_initialized()?;
        state::with(|d| d.memory.free_reservation(ptr, size as u64))
    }

    fn cuMemMap(ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemGenericAllocationHandle, flags: c_ulonglong) {
        check_initialized()?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        // "A call to cuMemMap will block until all devices have been added."
        if state::with(|d| d.multicast.whole(handle)) == Some(false) {
            wait_whole(handle, "cuMemMap")?;
        }
        state::with(|d| d.memory.map(ptr, size as u64, offset as u64, handle))
    }

    fn cuMemUnmap(ptr: CUdeviceptr, size: usize) {
        check_initialized()?;
        state::with(|d| d.memory.unmap(ptr, size as u64))
    }

    fn cuMemSetAccess(ptr: CUdeviceptr, size: usize, desc: *const CUmemAccessDesc, count: usize) {
        check_initialized()?;
        require(desc)?;
        if count == 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `desc` is not NULL (checked above) and, as `cuMemSetAccess` documents, points
        // to `count` readable `CUmemAccessDesc`.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) };
        let mut grants = Vec::with_capacity(count);
        for d in descs {
            let valid_flags = [MEM_ACCESS_FLAGS_PROT_NONE, MEM_ACCESS_FLAGS_PROT_READ, MEM_ACCESS_FLAGS_PROT_READWRITE];
            if d.location.type_ != MEM_LOCATION_TYPE_DEVICE || !device::is_valid(d.location.id) || !valid_flags.contains(&d.flags) {
                return Err(INVALID_VALUE);
            }
            grants.push((d.location.id, d.flags != MEM_ACCESS_FLAGS_PROT_NONE));
        }
        state::with(|d| d.memory.set_access(ptr, size as u64, &grants))
    }

    fn cuIpcGetMemHandle(pHandle: *mut CUipcMemHandle, dptr: CUdeviceptr) {
        check_initialized()?;
        require(pHandle)?;
        let bytes = state::with(|d| d.export_memory(dptr, Api::Cuda))?;
        // SAFETY: `pHandle` is not NULL (checked above); `cuIpcGetMemHandle` documents it as a writable `CUipcMemHandle`.
        unsafe { *pHandle = CUipcMemHandle { reserved: bytes } };
        Ok(())
    }

    fn cuIpcOpenMemHandle(pdptr: *mut CUdeviceptr, handle: CUipcMemHandle, Flags: c_uint) {
        // SAFETY: `pdptr` is NULL or a writable `CUdeviceptr` (`cuIpcOpenMemHandle`'s contract).
        unsafe { ipc_open(pdptr, handle, Flags, OpenMode::Legacy) }
    }

    fn cuIpcOpenMemHandle_v2(pdptr: *mut CUdeviceptr, handle: CUipcMemHandle, Flags: c_uint) {
        // SAFETY: `pdptr` is NULL or a writable `CUdeviceptr` (`cuIpcOpenMemHandle`'s contract).
        unsafe { ipc_open(pdptr, handle, Flags, OpenMode::Refcounted) }
    }

    fn cuIpcCloseMemHandle(dptr: CUdeviceptr) {
        check_initialized()?;
        state::with(|d| d.close_memory(dptr))
    }

    fn cuIpcGetEventHandle(pHandle: *mut CUipcEventHandle, event: CUevent) {
        check_initialized()?;
        require(pHandle)?;
        let bytes = state::with(|d| d.export_event(to_handle(event), INVALID_HANDLE, INVALID_HANDLE))?;
        // SAFETY: `pHandle` is not NULL (checked above); `cuIpcGetEventHandle` documents it as a writable `CUipcEventHandle`.
        unsafe { *pHandle = CUipcEventHandle { reserved: bytes } };
        Ok(())
    }

    fn cuIpcOpenEventHandle(phEvent: *mut CUevent, handle: CUipcEventHandle) {
        check_initialized()?;
        require(phEvent)?;
        let event = state::with(|d| {
            let (owner, device) = d.current_owner()?;
            d.open_event(&handle.reserved, owner, device, INVALID_HANDLE)
        })?;
        // SAFETY: `phEvent` is not NULL (checked above); `cuIpcOpenEventHandle` documents it as a writable `CUevent`.
        unsafe { *phEvent = handles::to_ptr(event) };
        Ok(())
    }

    fn cuLogicalEndpointIdReserve(baseLeId: *mut CUlogicalEndpointId, count: u32) {
        logical_endpoints_available()?;
        require(baseLeId)?;
        let value = state::with(|d| d.endpoints.reserve(count))?;
        // SAFETY: `baseLeId` is not NULL (checked above); `cuLogicalEndpointIdReserve` documents it as a writable `CUlogicalEndpointId`.
        unsafe { *baseLeId = value };
        Ok(())
    }

    fn cuLogicalEndpointIdRelease(baseLeId: CUlogicalEndpointId, count: u32) {
        logical_endpoints_available()?;
        state::with(|d| d.endpoints.release(baseLeId, count))
    }

    fn cuLogicalEndpointCreate(leId: CUlogicalEndpointId, prop: *const CUlogicalEndpointProp) {
        logical_endpoints_available()?;
        require(prop)?;
        // SAFETY: `prop` is not NULL (checked above); `cuLogicalEndpointCreate` documents it as a
        // readable `CUlogicalEndpointProp`.
        let prop = unsafe { prop.read_unaligned() };
        state::with(|d| d.endpoints.create(leId, &prop))
    }

    fn cuLogicalEndpointAddDevice(leId: CUlogicalEndpointId, dev: CUdevice) {
        logical_endpoints_available()?;
        state::with(|d| d.endpoints.add_device(leId, dev))
    }

    fn cuLogicalEndpointDestroy(leId: CUlogicalEndpointId) {
        logical_endpoints_available()?;
        state::with(|d| d.endpoints.destroy(leId))
    }

    fn cuLogicalEndpointBindAddr(leId: CUlogicalEndpointId, dev: CUdevice, offset: u64, ptr: *mut c_void, size: u64, flags: c_ulonglong) {
        logical_endpoints_available()?;
        state::with(|d| d.bind_address(leId, dev, offset, ptr as u64, size, flags))
    }

    fn cuLogicalEndpointBindMem(leId: CUlogicalEndpointId, dev: CUdevice, offset: u64, memHandle: CUmemGenericAllocationHandle, memOffset: u64, size: u64, flags: c_ulonglong) {
        logical_endpoints_available()?;
        state::with(|d| d.bind_memory(leId, dev, offset, memHandle, memOffset, size, flags))
    }

    fn cuLogicalEndpointUnbind(leId: CUlogicalEndpointId, dev: CUdevice, offset: u64, size: u64) {
        logical_endpoints_available()?;
        state::with(|d| d.endpoints.unbind(leId, dev, offset, size))
    }

    fn cuLogicalEndpointExport(handle: *mut c_void, leId: CUlogicalEndpointId, handleType: c_uint) {
        logical_endpoints_available()?;
        require(handle)?;
        let bytes = state::with(|d| d.endpoints.export(leId, handleType))?;
        // SAFETY: `handle` is not NULL (checked above) and, as `cuLogicalEndpointExport`
        // documents, points to a writable handle of `handleType` (a 64-byte fabric handle: the
        // export succeeded only for that type).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), handle.cast::<u8>(), bytes.len()) };
        Ok(())
    }

    fn cuLogicalEndpointImport(leId: CUlogicalEndpointId, handle: *const c_void, handleType: c_uint) {
        logical_endpoints_available()?;
        require(handle)?;
        // Only the fabric handle type exists; its handle is 64 bytes.
        if handleType != crate::types::logical_endpoint::IPC_HANDLE_TYPE_FABRIC {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `handle` is not NULL (checked above) and, as `cuLogicalEndpointImport`
        // documents, points to a readable handle of `handleType`: a fabric handle, 64 bytes.
        let bytes = unsafe { handle.cast::<[u8; crate::types::logical_endpoint::FABRIC_HANDLE_SIZE]>().read_unaligned() };
        state::with(|d| d.endpoints.import(leId, &bytes, handleType))
    }

    fn cuLogicalEndpointQuery(leId: CUlogicalEndpointId, count: u32, queryStatus: *mut c_int) {
        logical_endpoints_available()?;
        require(queryStatus)?;
        let status = state::with(|d| d.endpoints.query(leId, count))?;
        // SAFETY: `queryStatus` is not NULL (checked above); `cuLogicalEndpointQuery` documents
        // it as a writable `int`.
        unsafe { *queryStatus = status };
        Ok(())
    }

    fn cuLogicalEndpointGetLimits(bindAlignment: *mut u64, maxSize: *mut u64, prop: *const CUlogicalEndpointProp) {
        logical_endpoints_available()?;
        require(bindAlignment)?;
        require(maxSize)?;
        require(prop)?;
        // SAFETY: `prop` is not NULL (checked above); `cuLogicalEndpointGetLimits` documents it
        // as a readable `CUlogicalEndpointProp`.
        let prop = unsafe { prop.read_unaligned() };
        let (alignment, max) = logical_endpoint::limits(&prop)?;
        // SAFETY: both are not NULL (checked above); `cuLogicalEndpointGetLimits` documents them
        // as writable `cuuint64_t`.
        unsafe {
            *bindAlignment = alignment;
            *maxSize = max;
        }
        Ok(())
    }

    fn cuGetErrorName(error: CUresult, pStr: *mut *const c_char) {
        require(pStr)?;
        let name = errors::cuda_name(error);
        // SAFETY: `pStr` is not NULL (checked above); `cuGetErrorName` documents it as a writable
        // `const char *`.
        unsafe { *pStr = name.unwrap_or(std::ptr::null()) };
        name.map(|_| ()).ok_or(INVALID_VALUE)
    }

    fn cuGetErrorString(error: CUresult, pStr: *mut *const c_char) {
        require(pStr)?;
        let text = errors::cuda_string(error);
        // SAFETY: `pStr` is not NULL (checked above); `cuGetErrorString` documents it as a
        // writable `const char *`.
        unsafe { *pStr = text.unwrap_or(std::ptr::null()) };
        text.map(|_| ()).ok_or(INVALID_VALUE)
    }
}

/// What the simulator knows of the allocation or mapping a pointer is in.
struct PointerInfo {
    context: u64,
    device: i32,
    base: u64,
    size: u64,
    buffer_id: u64,
    kind: Option<MemKind>,
}

fn pointer_info(ptr: u64) -> Option<PointerInfo> {
    state::with(|d| {
        if let Some(a) = d.memory.find(ptr) {
            let context = match a.owner {
                Owner::Context(id) => handles::encode(Kind::Context, id),
                // Pool memory is "not associated with any CUDA context"; HIP memory has none.
                Owner::HipDevice(_) | Owner::MemPool(_) => 0,
            };
            return Some(PointerInfo {
                context,
                device: a.device,
                base: a.base,
                size: a.size,
                buffer_id: a.buffer_id,
                kind: Some(a.kind),
            });
        }
        d.memory.virtual_mapping(ptr).map(|m| PointerInfo {
            context: 0,
            device: m.physical.device,
            base: m.start,
            size: m.size,
            buffer_id: m.handle,
            kind: None,
        })
    })
}

/// `cuPointerGetAttribute` for the attributes the simulator knows. Boolean attributes are written
/// as one byte (C `bool`), which also reads right through a zero-initialized `int`.
///
/// # Safety
/// `data` is not NULL and points to writable storage of the type that `attr` names in `cuda.h`.
unsafe fn pointer_attribute(data: *mut c_void, attr: c_int, ptr: u64) -> Outcome {
    let info = pointer_info(ptr).ok_or(INVALID_VALUE)?;
    // SAFETY: this function's contract.
    unsafe { write_pointer_attribute(data, attr, &info, ptr) }
}

/// `cuPointerGetAttributes`: one lookup for several attributes. "Unlike cuPointerGetAttribute,
/// this function will not return an error when the ptr encountered is not a valid CUDA pointer.
/// Instead, the attributes are assigned default NULL values and CUDA_SUCCESS is returned."
///
/// # Safety
/// `attributes` holds `count` attributes and `data` `count` pointers, each NULL-checked here and
/// otherwise writable storage of the type its attribute names.
unsafe fn pointer_attributes(
    count: c_uint,
    attributes: *const c_int,
    data: *const *mut c_void,
    ptr: u64,
) -> Outcome {
    let info = pointer_info(ptr).unwrap_or(PointerInfo {
        context: 0,
        device: 0,
        base: 0,
        size: 0,
        buffer_id: 0,
        kind: None,
    });
    let known = info.size != 0;
    for i in 0..count as usize {
        // SAFETY: `attributes` and `data` hold `count` entries (this function's contract).
        let (attr, slot) = unsafe { (*attributes.add(i), *data.add(i)) };
        require(slot)?;
        if known {
            // SAFETY: `slot` is not NULL and has the type `attr` names (the contract).
            unsafe { write_pointer_attribute(slot, attr, &info, ptr) }?;
        } else {
            // SAFETY: as above; the default value of every attribute is its zero.
            unsafe { write_pointer_attribute(slot, attr, &info, 0) }?;
        }
    }
    Ok(())
}

/// Writes one attribute of `info`.
///
/// # Safety
/// `data` is not NULL and points to writable storage of the type that `attr` names in `cuda.h`.
unsafe fn write_pointer_attribute(
    data: *mut c_void,
    attr: c_int,
    info: &PointerInfo,
    ptr: u64,
) -> Outcome {
    use crate::types::pointer_attribute as pa;
    if info.size == 0 {
        // Not a CUDA pointer (cuPointerGetAttributes only): every attribute is zero.
        let zero = match attr {
            pa::CONTEXT | pa::HOST_POINTER | pa::MEMPOOL_HANDLE => size_of::<*mut c_void>(),
            pa::MEMORY_TYPE => size_of::<c_uint>(),
            pa::DEVICE_ORDINAL => size_of::<c_int>(),
            pa::DEVICE_POINTER | pa::RANGE_START_ADDR | pa::BUFFER_ID => size_of::<u64>(),
            pa::RANGE_SIZE => size_of::<usize>(),
            pa::IS_MANAGED | pa::IS_LEGACY_CUDA_IPC_CAPABLE | pa::MAPPED => 1,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: `data` has the type `attr` names, of `zero` bytes (the contract).
        unsafe { std::ptr::write_bytes(data.cast::<u8>(), 0, zero) };
        return Ok(());
    }
    let managed = matches!(info.kind, Some(MemKind::Managed { .. }));
    let host = matches!(info.kind, Some(MemKind::Host { .. }));
    /// What is written, in the C type of the attribute.
    enum Value {
        Pointer(u64),
        Uint(c_uint),
        Int(c_int),
        U64(u64),
        Size(usize),
        Bool(bool),
    }
    let value = match attr {
        pa::CONTEXT => Value::Pointer(info.context),
        pa::MEMORY_TYPE if host => Value::Uint(CU_MEMORYTYPE_HOST),
        pa::MEMORY_TYPE => Value::Uint(CU_MEMORYTYPE_DEVICE),
        pa::DEVICE_POINTER => Value::U64(ptr),
        // With unified addressing, managed and pinned host memory have one address for both.
        pa::HOST_POINTER if managed || host => Value::Pointer(ptr),
        pa::BUFFER_ID => Value::U64(info.buffer_id),
        pa::IS_MANAGED => Value::Bool(managed),
        pa::DEVICE_ORDINAL => Value::Int(info.device),
        pa::IS_LEGACY_CUDA_IPC_CAPABLE => Value::Bool(info.kind == Some(MemKind::Device)),
        pa::RANGE_START_ADDR => Value::U64(info.base),
        pa::RANGE_SIZE => Value::Size(info.size as usize),
        pa::MAPPED => Value::Bool(true),
        // The device's default pool for stream-ordered memory; NULL for any other memory.
        pa::MEMPOOL_HANDLE if info.kind == Some(MemKind::Pool) => {
            Value::Pointer(handles::encode(Kind::MemPool, info.device as u64 + 1))
        }
        pa::MEMPOOL_HANDLE => Value::Pointer(0),
        _ => return Err(INVALID_VALUE),
    };
    // SAFETY: `data` is not NULL and has the type `attr` names (this function's contract); each
    // arm writes exactly that type: CONTEXT a `CUcontext`, HOST_POINTER a `void *`,
    // MEMPOOL_HANDLE a `CUmemoryPool`, MEMORY_TYPE a `CUmemorytype`, DEVICE_ORDINAL an `int`,
    // DEVICE_POINTER/RANGE_START_ADDR a `CUdeviceptr`, BUFFER_ID an `unsigned long long`,
    // RANGE_SIZE a `size_t`, the booleans a `bool`.
    unsafe {
        match value {
            Value::Pointer(p) => *data.cast::<*mut c_void>() = handles::to_ptr(p),
            Value::Uint(v) => *data.cast::<c_uint>() = v,
            Value::Int(v) => *data.cast::<c_int>() = v,
            Value::U64(v) => *data.cast::<u64>() = v,
            Value::Size(v) => *data.cast::<usize>() = v,
            Value::Bool(v) => *data.cast::<u8>() = u8::from(v),
        }
    }
    Ok(())
}

/// `cuDeviceGetUuid[_v2]` ([`device::uuid`]).
fn device_uuid(uuid: *mut [u8; 16], dev: CUdevice) -> Outcome {
    check_initialized()?;
    require(uuid)?;
    device::check(dev)?;
    // SAFETY: `uuid` is not NULL (checked above); `cuDeviceGetUuid` documents it as a writable
    // `CUuuid` (16 bytes).
    unsafe { *uuid = device::uuid(dev) };
    Ok(())
}
