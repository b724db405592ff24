//! The allocation calls the shim observes: pinned host memory, pitched memory, stream-ordered
//! (pool) memory, and their HIP counterparts.
//!
//! Double frees are checked on allocations of a page count no other test uses: the kernel places
//! mappings top-down, so the hole a free leaves is reused at its start only by a mapping of the
//! same length, and no other test thread can take the address between the two frees.

use super::*;
use crate::handles::{self, Kind};
use crate::hip_exports::*;

const PAGE: usize = 4096;

/// `cuPointerGetAttribute` of `attribute` at `ptr`, read as a `T` that starts as `init`.
///
/// # Safety
/// `T` is the C type that `attribute` writes (`u8` for the boolean ones).
unsafe fn attr<T>(attribute: i32, ptr: CUdeviceptr, init: T) -> (Code, T) {
    let mut value = init;
    // SAFETY: `value` is a live local of the type the attribute writes (this function's contract).
    let rc = unsafe { cuPointerGetAttribute((&mut value as *mut T).cast(), attribute, ptr) };
    (rc, value)
}

fn mem_handle(ptr: CUdeviceptr) -> Code {
    let mut h = CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: `h` is a live local `CUipcMemHandle`.
    unsafe { cuIpcGetMemHandle(&mut h, ptr) }
}

fn new_stream() -> CUstream {
    let mut s = null_mut();
    // SAFETY: `s` is a live local `CUstream`.
    assert_eq!(unsafe { cuStreamCreate(&mut s, 0) }, SUCCESS);
    s
}

#[test]
fn mem_alloc_host_is_pinned_host_memory_of_the_context() {
    // SAFETY: out-pointers are live locals or NULL where checked; `attr` gets the C type of each
    // attribute; `p` is read and written only inside the `5 * PAGE + 1` bytes it was given.
    unsafe {
        setup(r580());
        let ctx = context(1);
        let size = 5 * PAGE + 1;
        let mut p = null_mut();
        assert_eq!(cuMemAllocHost_v2(&mut p, size), SUCCESS);
        assert!(!p.is_null());
        // Host memory: the program reaches it through the pointer itself, and with unified
        // addressing the same address is its device pointer.
        std::ptr::write_bytes(p.cast::<u8>(), 0xAB, size);
        let d = p as CUdeviceptr;
        assert_eq!(download(d + size as u64 - 4, 4), [0xAB; 4]);
        upload(d, b"pinned");
        assert_eq!(std::slice::from_raw_parts(p.cast::<u8>(), 6), b"pinned");
        assert_eq!(
            attr(pointer_attribute::MEMORY_TYPE, d + 9, 0u32),
            (SUCCESS, CU_MEMORYTYPE_HOST)
        );
        assert_eq!(
            attr(pointer_attribute::HOST_POINTER, d + 9, null_mut::<c_void>()),
            (SUCCESS, p.cast::<u8>().wrapping_add(9).cast())
        );
        assert_eq!(
            attr(pointer_attribute::DEVICE_POINTER, d, 0u64),
            (SUCCESS, d)
        );
        assert_eq!(
            attr(pointer_attribute::CONTEXT, d, null_mut::<c_void>()),
            (SUCCESS, ctx)
        );
        assert_eq!(attr(pointer_attribute::DEVICE_ORDINAL, d, -1), (SUCCESS, 1));
        assert_eq!(attr(pointer_attribute::IS_MANAGED, d, 7u8), (SUCCESS, 0));
        let ipc_capable = attr(pointer_attribute::IS_LEGACY_CUDA_IPC_CAPABLE, d, 7u8);
        assert_eq!(ipc_capable, (SUCCESS, 0));
        let pool = attr(pointer_attribute::MEMPOOL_HANDLE, d, 0x1 as *mut c_void);
        assert_eq!(pool, (SUCCESS, null_mut()), "not from a pool");
        let (mut base, mut len) = (0, 0);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut len, d + 100),
            SUCCESS
        );
        assert_eq!((base, len), (d, size));

        // Documented errors.
        let mut q = 0x1 as *mut c_void;
        assert_eq!(cuMemAllocHost_v2(null_mut(), 64), INVALID_VALUE);
        assert_eq!(cuMemAllocHost_v2(&mut q, 0), INVALID_VALUE);
        assert_eq!(
            cuMemFree_v2(d),
            INVALID_VALUE,
            "host memory is not cuMemFree's"
        );
        assert_eq!(download(d, 6), b"pinned", "and is still there");
        assert_eq!(cuMemFreeHost(p), SUCCESS);
        assert_eq!(cuMemFreeHost(p), INVALID_VALUE, "double free");
        assert_eq!(cuMemFreeHost(null_mut()), SUCCESS);
        assert_eq!(cuCtxSetCurrent(null_mut()), SUCCESS);
        assert_eq!(cuMemAllocHost_v2(&mut q, 64), INVALID_CONTEXT);
        assert_eq!(q, 0x1 as *mut c_void, "untouched on error");
    }
}

#[test]
fn mem_host_alloc_takes_the_documented_flags() {
    // SAFETY: out-pointers are live locals or NULL where checked; `attr` gets the C type of each
    // attribute.
    unsafe {
        setup(r580());
        let _c = context(0);
        let mut p = null_mut();
        let all = MEMHOSTALLOC_PORTABLE | MEMHOSTALLOC_DEVICEMAP | MEMHOSTALLOC_WRITECOMBINED;
        assert_eq!(cuMemHostAlloc(&mut p, 7 * PAGE, all), SUCCESS);
        let d = p as CUdeviceptr;
        assert_eq!(
            attr(pointer_attribute::MEMORY_TYPE, d, 0u32),
            (SUCCESS, CU_MEMORYTYPE_HOST)
        );
        let mut q = null_mut();
        assert_eq!(
            cuMemHostAlloc(&mut q, PAGE, 0x8),
            INVALID_VALUE,
            "unknown flag"
        );
        assert_eq!(cuMemHostAlloc(null_mut(), PAGE, 0), INVALID_VALUE);
        // Each free function frees only what its allocators made.
        let device = alloc(PAGE);
        assert_eq!(cuMemFreeHost(device as *mut c_void), INVALID_VALUE);
        assert_eq!(cuMemFree_v2(device), SUCCESS);
        assert_eq!(cuMemFreeHost(p), SUCCESS);
        assert_eq!(cuMemFreeHost(p), INVALID_VALUE, "double free");
    }
}

#[test]
fn mem_alloc_pitch_rounds_rows_and_is_device_memory() {
    // SAFETY: out-pointers are live locals or NULL where checked; `attr` gets the C type of each
    // attribute.
    unsafe {
        setup(r580());
        let _c = context(0);
        let (mut p, mut pitch) = (0, 0);
        assert_eq!(cuMemAllocPitch_v2(&mut p, &mut pitch, 1000, 3, 4), SUCCESS);
        assert_eq!(pitch, 1024, "rows rounded up to {PITCH_ALIGNMENT} bytes");
        let (mut base, mut len) = (0, 0);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut len, p + 2000),
            SUCCESS
        );
        assert_eq!((base, len), (p, 3 * 1024));
        upload(p + 2 * pitch as u64, b"row 2");
        assert_eq!(download(p + 2 * pitch as u64, 5), b"row 2");
        assert_eq!(
            attr(pointer_attribute::MEMORY_TYPE, p, 0u32),
            (SUCCESS, CU_MEMORYTYPE_DEVICE)
        );
        assert_eq!(
            mem_handle(p),
            SUCCESS,
            "pitched memory is cuMemAlloc memory"
        );

        let (mut q, mut qpitch) = (7, 7);
        for element_size in [0, 1, 2, 3, 32] {
            assert_eq!(
                cuMemAllocPitch_v2(&mut q, &mut qpitch, 64, 2, element_size),
                INVALID_VALUE,
                "ElementSizeBytes {element_size}"
            );
        }
        assert_eq!(
            cuMemAllocPitch_v2(&mut q, &mut qpitch, 0, 2, 4),
            INVALID_VALUE
        );
        assert_eq!(
            cuMemAllocPitch_v2(&mut q, &mut qpitch, 64, 0, 4),
            INVALID_VALUE
        );
        assert_eq!(
            cuMemAllocPitch_v2(null_mut(), &mut qpitch, 64, 2, 8),
            INVALID_VALUE
        );
        assert_eq!(
            cuMemAllocPitch_v2(&mut q, null_mut(), 64, 2, 16),
            INVALID_VALUE
        );
        assert_eq!((q, qpitch), (7, 7), "untouched on error");
        assert_eq!(
            cuMemFreeHost(p as *mut c_void),
            INVALID_VALUE,
            "not host memory"
        );
        assert_eq!(cuMemFree_v2(p), SUCCESS);
    }
}

#[test]
fn mem_alloc_async_is_pool_memory_of_the_streams_device() {
    // SAFETY: out-pointers are live locals or NULL where checked; `attr` gets the C type of each
    // attribute; streams are plain handles.
    unsafe {
        setup(r580());
        let c0 = context(0);
        let c1 = context(1);
        let s1 = new_stream();
        assert_eq!(cuCtxSetCurrent(c0), SUCCESS);
        let size = 9 * PAGE + 5;
        let mut p = 0;
        assert_eq!(cuMemAllocAsync(&mut p, size, s1), SUCCESS);
        assert_eq!(
            attr(pointer_attribute::DEVICE_ORDINAL, p, -1),
            (SUCCESS, 1),
            "the stream's device, not the current context's"
        );
        assert_eq!(
            attr(pointer_attribute::MEMORY_TYPE, p, 0u32),
            (SUCCESS, CU_MEMORYTYPE_DEVICE)
        );
        let pool_of_1 = handles::to_ptr(handles::encode(Kind::MemPool, 2));
        assert_eq!(
            attr(pointer_attribute::MEMPOOL_HANDLE, p, null_mut::<c_void>()),
            (SUCCESS, pool_of_1)
        );
        assert_eq!(
            attr(pointer_attribute::CONTEXT, p, 0x1 as *mut c_void),
            (SUCCESS, null_mut()),
            "pool memory belongs to no context"
        );
        let ipc_capable = attr(pointer_attribute::IS_LEGACY_CUDA_IPC_CAPABLE, p, 7u8);
        assert_eq!(ipc_capable, (SUCCESS, 0));
        upload(p + 100, b"pool");
        assert_eq!(download(p + 100, 4), b"pool");

        // The NULL stream and the per-thread spelling: the current context's device.
        let mut q = 0;
        assert_eq!(cuMemAllocAsync_ptsz(&mut q, PAGE, null_mut()), SUCCESS);
        assert_eq!(attr(pointer_attribute::DEVICE_ORDINAL, q, -1), (SUCCESS, 0));
        let legacy = STREAM_LEGACY as usize as CUstream;
        let mut r = 0;
        assert_eq!(cuMemAllocAsync(&mut r, PAGE, legacy), SUCCESS);

        // Documented errors, and the free functions.
        let mut out = 7;
        assert_eq!(cuMemAllocAsync(null_mut(), PAGE, s1), INVALID_VALUE);
        assert_eq!(cuMemAllocAsync(&mut out, 0, s1), INVALID_VALUE);
        let device = alloc(PAGE);
        assert_eq!(
            cuMemFreeAsync(device, s1),
            INVALID_VALUE,
            "not stream-ordered memory"
        );
        assert_eq!(cuMemFree_v2(device), SUCCESS);
        assert_eq!(cuMemFreeAsync(p, s1), SUCCESS);
        assert_eq!(cuMemFreeAsync(p, s1), INVALID_VALUE, "double free");
        assert_eq!(cuMemFreeAsync_ptsz(q, null_mut()), SUCCESS);
        assert_eq!(cuMemFreeAsync(0, s1), SUCCESS, "NULL: nothing to free");
        assert_eq!(
            cuMemFree_v2(r),
            SUCCESS,
            "cuMemFree takes cuMemAllocAsync memory"
        );

        // A destroyed stream is INVALID_HANDLE; the NULL stream without a context INVALID_CONTEXT.
        assert_eq!(cuCtxSetCurrent(c1), SUCCESS);
        let gone = new_stream();
        assert_eq!(cuStreamDestroy_v2(gone), SUCCESS);
        assert_eq!(cuMemAllocAsync(&mut out, PAGE, gone), INVALID_HANDLE);
        assert_eq!(cuMemFreeAsync(p, gone), INVALID_HANDLE);
        let mut popped = null_mut();
        while cuCtxPopCurrent_v2(&mut popped) == SUCCESS {}
        assert_eq!(cuMemAllocAsync(&mut out, PAGE, null_mut()), INVALID_CONTEXT);
        assert_eq!(cuMemFreeAsync(p, null_mut()), INVALID_CONTEXT);
        assert_eq!(out, 7, "untouched on error");
    }
}

#[test]
fn pool_memory_outlives_its_context_and_needs_pool_support() {
    // SAFETY: out-pointers are live locals; `attr` gets the C type of each attribute.
    unsafe {
        let mut config = r580();
        config
            .attributes
            .insert((1, attribute::MEMORY_POOLS_SUPPORTED), 0);
        setup(config);
        let c0 = context(0);
        let mut p = 0;
        assert_eq!(cuMemAllocAsync(&mut p, 11 * PAGE, null_mut()), SUCCESS);
        upload(p, b"kept");
        // "cuCtxDestroy() will not destroy memory allocations by ... cuMemAllocAsync()".
        assert_eq!(cuCtxDestroy_v2(c0), SUCCESS);
        let _c1 = context(1);
        assert_eq!(attr(pointer_attribute::DEVICE_ORDINAL, p, -1), (SUCCESS, 0));
        assert_eq!(download(p, 4), b"kept");
        // Device 1 reports no memory pools here.
        let mut q = 7;
        assert_eq!(cuMemAllocAsync(&mut q, PAGE, null_mut()), NOT_SUPPORTED);
        assert_eq!(q, 7);
        assert_eq!(cuMemFreeAsync(p, null_mut()), SUCCESS);
    }
}

#[test]
fn hip_event_create_is_flags_zero() {
    // SAFETY: out-pointers are live locals or NULL where checked.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        let mut e = null_mut();
        assert_eq!(hipEventCreate(&mut e), SUCCESS);
        assert!(!e.is_null());
        let mut h = hipIpcEventHandle_t { reserved: [0; 64] };
        assert_eq!(
            hipIpcGetEventHandle(&mut h, e),
            HIP_ERROR_INVALID_CONFIGURATION,
            "not an interprocess event"
        );
        assert_eq!(hipEventDestroy(e), SUCCESS);
        assert_eq!(hipEventDestroy(e), INVALID_HANDLE);
        hipGetLastError();
        assert_eq!(hipEventCreate(null_mut()), INVALID_VALUE);
        assert_eq!(
            hipGetLastError(),
            INVALID_VALUE,
            "recorded as the last error"
        );
    }
}

#[test]
fn hip_host_malloc_and_host_free() {
    // SAFETY: out-pointers are live locals or NULL where checked; `attrs` is a live, zeroed
    // `hipPointerAttribute_t`; `p` is written and read only inside its `13 * PAGE` bytes.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        assert_eq!(hipSetDevice(1), SUCCESS);
        let size = 13 * PAGE;
        let mut p = null_mut();
        let mapped = 0x2;
        assert_eq!(hipHostMalloc(&mut p, size, mapped), SUCCESS);
        assert!(!p.is_null());
        std::ptr::write_bytes(p.cast::<u8>(), 0x5A, size);
        let mut back = [0u8; 8];
        let default_kind = 4;
        assert_eq!(
            hipMemcpy(back.as_mut_ptr().cast(), p, 8, default_kind),
            SUCCESS
        );
        assert_eq!(back, [0x5A; 8]);
        let mut attrs = std::mem::MaybeUninit::<hipPointerAttribute_t>::zeroed();
        assert_eq!(hipPointerGetAttributes(attrs.as_mut_ptr(), p), SUCCESS);
        let attrs = attrs.assume_init();
        assert_eq!(
            (
                attrs.type_,
                attrs.device,
                attrs.is_managed,
                attrs.allocation_flags
            ),
            (hip_memory_type::HOST, 1, 0, mapped)
        );
        assert_eq!((attrs.host_pointer, attrs.device_pointer), (p, p));
        let mut h = hipIpcMemHandle_t { reserved: [0; 64] };
        assert_eq!(
            hipIpcGetMemHandle(&mut h, p),
            INVALID_VALUE,
            "not hipMalloc memory"
        );

        // Errors and the CLR's special cases.
        assert_eq!(hipHostMalloc(null_mut(), 64, 0), INVALID_VALUE);
        let mut q = 0x1 as *mut c_void;
        assert_eq!(hipHostMalloc(&mut q, 0, 0), SUCCESS);
        assert!(q.is_null(), "size 0 is a NULL pointer");
        q = 0x1 as *mut c_void;
        let both = HIP_HOST_MALLOC_COHERENT | HIP_HOST_MALLOC_NON_COHERENT;
        assert_eq!(hipHostMalloc(&mut q, 64, both), INVALID_VALUE);
        assert!(q.is_null(), "the CLR clears *ptr before checking the flags");
        assert_eq!(hipHostFree(p), SUCCESS);
        assert_eq!(hipHostFree(p), INVALID_VALUE, "double free");
        assert_eq!(hipHostFree(null_mut()), SUCCESS);
        // The CLR's ihipFree frees either kind through either function.
        let mut r = null_mut();
        assert_eq!(hipHostMalloc(&mut r, PAGE, 0), SUCCESS);
        assert_eq!(hipFree(r), SUCCESS);
        let mut m = null_mut();
        assert_eq!(hipMalloc(&mut m, PAGE), SUCCESS);
        assert_eq!(hipHostFree(m), SUCCESS);
        assert_eq!(hipSetDevice(0), SUCCESS);
    }
}

#[test]
fn hip_malloc_async_and_free_async() {
    // SAFETY: out-pointers are live locals or NULL where checked; `attrs` is a live, zeroed
    // `hipPointerAttribute_t`; streams are plain handles.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        assert_eq!(hipSetDevice(1), SUCCESS);
        let mut s = null_mut();
        assert_eq!(hipStreamCreate(&mut s), SUCCESS);
        assert_eq!(hipSetDevice(0), SUCCESS);
        let mut p = null_mut();
        assert_eq!(hipMallocAsync(&mut p, 17 * PAGE, s), SUCCESS);
        let mut attrs = std::mem::MaybeUninit::<hipPointerAttribute_t>::zeroed();
        assert_eq!(hipPointerGetAttributes(attrs.as_mut_ptr(), p), SUCCESS);
        let attrs = attrs.assume_init();
        assert_eq!(
            (attrs.type_, attrs.device),
            (hip_memory_type::DEVICE, 1),
            "from the pool of the stream's device"
        );
        let mut h = hipIpcMemHandle_t { reserved: [0; 64] };
        assert_eq!(hipIpcGetMemHandle(&mut h, p), INVALID_VALUE, "pool memory");
        let mut on_null = null_mut();
        assert_eq!(hipMallocAsync(&mut on_null, PAGE, null_mut()), SUCCESS);
        let (mut base, mut len) = (null_mut(), 0);
        assert_eq!(hipMemGetAddressRange(&mut base, &mut len, on_null), SUCCESS);
        assert_eq!((base, len), (on_null, PAGE));

        let mut q = 0x1 as *mut c_void;
        assert_eq!(hipMallocAsync(&mut q, 0, s), SUCCESS);
        assert!(q.is_null(), "size 0 is a NULL pointer");
        assert_eq!(hipMallocAsync(null_mut(), PAGE, s), INVALID_VALUE);
        let gone = 0x57_0000_6666 as hipStream_t;
        assert_eq!(hipMallocAsync(&mut q, PAGE, gone), INVALID_VALUE);
        assert_eq!(hipFreeAsync(p, gone), INVALID_VALUE);
        assert_eq!(hipFreeAsync(null_mut(), s), INVALID_VALUE);
        assert_eq!(hipFreeAsync(p, s), SUCCESS);
        assert_eq!(
            hipMemGetAddressRange(&mut base, &mut len, p),
            NOT_FOUND,
            "freed at once"
        );
        // The CLR queues the free and reports nothing for an address it does not know.
        assert_eq!(hipFreeAsync(p, s), SUCCESS, "second free");
        assert_eq!(hipFree(on_null), SUCCESS, "hipFree takes pool memory");
        assert_eq!(hipStreamDestroy(s), SUCCESS);
    }
}
