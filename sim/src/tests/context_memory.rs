use super::*;
use crate::memory::GRANULARITY;
use std::ffi::CStr;

#[test]
fn context_stack() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let a = context(0);
        let b = context(1);
        let mut current = null_mut();
        assert_eq!(cuCtxGetCurrent(&mut current), SUCCESS);
        assert_eq!(current, b);
        let mut dev = -1;
        assert_eq!(cuCtxGetDevice(&mut dev), SUCCESS);
        assert_eq!(dev, 1);
        assert_eq!(cuCtxGetDevice_v2(&mut dev, a), SUCCESS);
        assert_eq!(dev, 0);
        // SetCurrent replaces the top; Pop then reveals what was below.
        assert_eq!(cuCtxSetCurrent(a), SUCCESS);
        let mut popped = null_mut();
        assert_eq!(cuCtxPopCurrent_v2(&mut popped), SUCCESS);
        assert_eq!(popped, a);
        assert_eq!(cuCtxGetCurrent(&mut current), SUCCESS);
        assert_eq!(current, a, "a was pushed by its creation");
        assert_eq!(cuCtxPushCurrent_v2(b), SUCCESS);
        assert_eq!(cuCtxPushCurrent_v2(0x77 as CUcontext), INVALID_CONTEXT);
        assert_eq!(cuCtxSetCurrent(0x77 as CUcontext), INVALID_CONTEXT);
        assert_eq!(cuCtxDestroy_v2(b), SUCCESS);
        assert_eq!(cuCtxGetCurrent(&mut current), SUCCESS);
        assert_eq!(current, a, "destroying the current context pops it");
        assert_eq!(cuCtxDestroy_v2(b), INVALID_CONTEXT);
        assert_eq!(cuCtxSetCurrent(null_mut()), SUCCESS);
        assert_eq!(
            cuCtxSetCurrent(null_mut()),
            SUCCESS,
            "no-op on an empty stack"
        );
        assert_eq!(cuCtxGetCurrent(&mut current), SUCCESS);
        assert!(current.is_null());
        assert_eq!(cuCtxPopCurrent_v2(&mut popped), INVALID_CONTEXT);
        assert_eq!(cuCtxSynchronize(), INVALID_CONTEXT);
        assert_eq!(
            cuCtxCreate_v4(&mut current, null_mut(), 0x100, 0),
            INVALID_VALUE
        );
        assert_eq!(
            cuCtxCreate_v4(&mut current, null_mut(), 0, 5),
            INVALID_DEVICE
        );
        assert_eq!(cuCtxCreate(&mut current, 0, 1), SUCCESS, "v1, 3 arguments");
        assert_eq!(cuCtxDestroy_v2(current), SUCCESS);
    }
}

#[test]
fn primary_context_refcount_and_reset() {
    // SAFETY: out-pointers are live locals; `ordinal_ptr` points to the live `int` that
    // DEVICE_ORDINAL writes.
    unsafe {
        let mut config = r580();
        config.devices = 4;
        setup(config);
        let mut p = null_mut();
        let mut q = null_mut();
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 3), SUCCESS);
        assert_eq!(cuDevicePrimaryCtxRetain(&mut q, 3), SUCCESS);
        assert_eq!(p, q, "one primary context per device");
        assert_eq!(cuCtxSetCurrent(p), SUCCESS);
        let mem = alloc(4096);
        assert_eq!(cuDevicePrimaryCtxReset_v2(3), SUCCESS);
        // The address may already serve another test thread, but not device 3 (only this test's).
        let mut ordinal = -1;
        let ordinal_ptr = (&mut ordinal as *mut i32).cast();
        let rc = cuPointerGetAttribute(ordinal_ptr, pointer_attribute::DEVICE_ORDINAL, mem);
        assert!(rc == INVALID_VALUE || ordinal != 3, "reset frees memory");
        assert_eq!(
            cuCtxSynchronize(),
            INVALID_CONTEXT,
            "a reset deactivates the primary context"
        );
        // "Resetting the primary context does not release it": the two retains are still counted,
        // and their releases succeed.
        assert_eq!(cuDevicePrimaryCtxRelease_v2(3), SUCCESS);
        assert_eq!(cuDevicePrimaryCtxRelease_v2(3), SUCCESS);
        assert_eq!(cuDevicePrimaryCtxRelease_v2(3), INVALID_CONTEXT);
        assert_eq!(cuCtxDestroy_v2(p), INVALID_CONTEXT);
        assert_eq!(cuDevicePrimaryCtxRetain(&mut q, 3), SUCCESS);
        assert_eq!(p, q, "the handle survives deactivation");
        assert_eq!(cuCtxSynchronize(), SUCCESS, "active again");
        assert_eq!(cuDevicePrimaryCtxRelease_v2(3), SUCCESS);
    }
}

/// `(rc, flags, active)` of `cuDevicePrimaryCtxGetState`; -1 means "left untouched".
fn primary_state(dev: CUdevice) -> (Code, i64, i32) {
    let (mut flags, mut active) = (u32::MAX, -1);
    // SAFETY: `flags` and `active` are live locals of the types written.
    let rc = unsafe { cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active) };
    let flags = if flags == u32::MAX {
        -1
    } else {
        i64::from(flags)
    };
    (rc, flags, active)
}

#[test]
fn primary_context_state_follows_retain_release_and_reset() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let mut config = r580();
        config.devices = 6;
        setup(config);
        // Device 5 is this test's only: no other test retains its primary context.
        assert_eq!(primary_state(5), (SUCCESS, 0, 0), "never retained");
        let mut p = null_mut();
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 1), "retained once");
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 5), SUCCESS);
        assert_eq!(cuDevicePrimaryCtxRelease_v2(5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 1), "still retained once");
        assert_eq!(cuDevicePrimaryCtxRelease_v2(5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 0), "after the last release");
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 1), "retained again");
        assert_eq!(cuDevicePrimaryCtxReset_v2(5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 0), "after a reset");
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 5), SUCCESS);
        assert_eq!(
            primary_state(5),
            (SUCCESS, 0, 1),
            "retained after the reset"
        );
        // Two retains are counted (one from before the reset).
        assert_eq!(cuDevicePrimaryCtxRelease_v2(5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 1));
        assert_eq!(cuDevicePrimaryCtxRelease_v2(5), SUCCESS);
        assert_eq!(primary_state(5), (SUCCESS, 0, 0));
        // Other devices' primary contexts are not affected.
        assert_eq!(primary_state(4), (SUCCESS, 0, 0));
        // An invalid device, and NULL out-parameters (left untouched on error).
        assert_eq!(primary_state(6), (INVALID_DEVICE, -1, -1));
        assert_eq!(primary_state(-1), (INVALID_DEVICE, -1, -1));
        let (mut flags, mut active) = (0u32, 0);
        assert_eq!(
            cuDevicePrimaryCtxGetState(5, null_mut(), &mut active),
            INVALID_VALUE
        );
        assert_eq!(
            cuDevicePrimaryCtxGetState(5, &mut flags, null_mut()),
            INVALID_VALUE
        );
    }
}

#[test]
fn memory_and_pointer_attributes() {
    // SAFETY: out-pointers are live locals or NULL where checked; each `cuPointerGetAttribute`
    // gets a live local of the attribute's type (u32 for the one-byte IS_MANAGED); the host
    // source of `cuMemcpyHtoD` is a live literal of the length passed.
    unsafe {
        setup(r580());
        let ctx = context(1);
        let p = alloc(10_000);
        upload(p + 100, b"hello");
        assert_eq!(download(p + 100, 5), b"hello");
        let (mut base, mut size) = (0, 0);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut size, p + 5000),
            SUCCESS
        );
        assert_eq!((base, size), (p, 10_000));
        let mut ordinal = -1;
        let attr = |data: *mut c_void, a| cuPointerGetAttribute(data, a, p + 8);
        assert_eq!(
            attr(
                (&mut ordinal as *mut i32).cast(),
                pointer_attribute::DEVICE_ORDINAL
            ),
            SUCCESS
        );
        assert_eq!(ordinal, 1);
        let mut owner = null_mut();
        assert_eq!(
            attr(
                (&mut owner as *mut CUcontext).cast(),
                pointer_attribute::CONTEXT
            ),
            SUCCESS
        );
        assert_eq!(owner, ctx);
        let mut managed = 7u32;
        assert_eq!(
            attr(
                (&mut managed as *mut u32).cast(),
                pointer_attribute::IS_MANAGED
            ),
            SUCCESS
        );
        assert_eq!(managed & 0xFF, 0);
        let mut start = 0u64;
        assert_eq!(
            attr(
                (&mut start as *mut u64).cast(),
                pointer_attribute::RANGE_START_ADDR
            ),
            SUCCESS
        );
        assert_eq!(start, p);
        assert_eq!(
            cuPointerGetAttribute((&mut start as *mut u64).cast(), 2, 0x10),
            INVALID_VALUE
        );
        // Errors.
        assert_eq!(cuMemAlloc_v2(&mut base, 0), INVALID_VALUE);
        assert_eq!(cuMemAlloc_v2(null_mut(), 16), INVALID_VALUE);
        assert_eq!(
            cuMemcpyHtoD_v2(p + 9_999, b"ab".as_ptr().cast(), 2),
            INVALID_VALUE
        );
        assert_eq!(cuMemFree_v2(p + 8), INVALID_VALUE, "not a base");
        assert_eq!(cuMemFree_v2(p), SUCCESS);
        // (Freeing p again is not checked: other test threads may own that address by now.)
        assert_eq!(cuMemAllocManaged(&mut base, 64, 4), INVALID_VALUE);
    }
}

#[test]
fn virtual_memory_management() {
    // SAFETY: `prop`, `handle`, `va`, `granularity`, `base`, `size` and `access` (one
    // descriptor, count 1) are live locals; each host source is a live literal of the length
    // passed.
    unsafe {
        setup(r580());
        let _c = context(0);
        let prop = CUmemAllocationProp {
            type_: MEM_ALLOCATION_TYPE_PINNED,
            requested_handle_types: 0,
            location: CUmemLocation {
                type_: MEM_LOCATION_TYPE_DEVICE,
                id: 0,
            },
            win32_handle_meta_data: null_mut(),
            compression_type: 0,
            gpu_direct_rdma_capable: 0,
            usage: 0,
            reserved: [0; 4],
        };
        let mut granularity = 0;
        assert_eq!(
            cuMemGetAllocationGranularity(&mut granularity, &prop, 0),
            SUCCESS
        );
        assert_eq!(granularity as u64, GRANULARITY);
        let g = granularity;
        let mut handle = 0;
        assert_eq!(cuMemCreate(&mut handle, g + 1, &prop, 0), INVALID_VALUE);
        assert_eq!(cuMemCreate(&mut handle, 2 * g, &prop, 0), SUCCESS);
        let mut va = 0;
        assert_eq!(cuMemAddressReserve(&mut va, 4 * g, 0, 0, 0), SUCCESS);
        assert_eq!(va % g as u64, 0);
        assert_eq!(cuMemMap(va, 2 * g, 0, handle, 0), SUCCESS);
        // R580: INVALID_VALUE over a mapping.
        assert_eq!(cuMemMap(va, g, 0, handle, 0), INVALID_VALUE);
        // Mapped but not yet accessible: copies fail.
        assert_eq!(cuMemcpyHtoD_v2(va, b"x".as_ptr().cast(), 1), INVALID_VALUE);
        let access = CUmemAccessDesc {
            location: CUmemLocation {
                type_: MEM_LOCATION_TYPE_DEVICE,
                id: 0,
            },
            flags: MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        assert_eq!(cuMemSetAccess(va, 2 * g, &access, 1), SUCCESS);
        assert_eq!(
            cuMemSetAccess(va, 4 * g, &access, 1),
            INVALID_VALUE,
            "not all mapped"
        );
        upload(va + g as u64 - 2, b"span");
        assert_eq!(download(va + g as u64 - 2, 4), b"span");
        // R580: a nonzero offset is NOT_SUPPORTED ("currently must be zero").
        assert_eq!(cuMemMap(va + 2 * g as u64, g, g, handle, 0), NOT_SUPPORTED);
        // R580: part of an allocation is NOT_SUPPORTED (it maps one whole or not at all).
        assert_eq!(cuMemMap(va + 2 * g as u64, g, 0, handle, 0), NOT_SUPPORTED);
        // A second mapping of the same handle sees the same bytes.
        assert_eq!(cuMemMap(va + 2 * g as u64, 2 * g, 0, handle, 0), SUCCESS);
        assert_eq!(
            cuMemSetAccess(va + 2 * g as u64, 2 * g, &access, 1),
            SUCCESS
        );
        assert_eq!(download(va + 3 * g as u64 - 2, 4), b"span");
        let (mut base, mut size) = (0, 0);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut size, va + 5),
            SUCCESS
        );
        assert_eq!((base, size), (va, 2 * g));
        assert_eq!(cuMemRelease(handle), SUCCESS, "mappings keep it alive");
        assert_eq!(cuMemRelease(handle), INVALID_VALUE);
        assert_eq!(download(va, 1).len(), 1);
        assert_eq!(cuMemAddressFree(va, 4 * g), INVALID_VALUE, "still mapped");
        assert_eq!(cuMemUnmap(va + 1, g), INVALID_VALUE);
        assert_eq!(cuMemUnmap(va, 4 * g), SUCCESS);
        assert_eq!(cuMemcpyHtoD_v2(va, b"x".as_ptr().cast(), 1), INVALID_VALUE);
        assert_eq!(cuMemAddressFree(va, 4 * g), SUCCESS);
    }
}

#[test]
fn devices_attributes_and_names() {
    // SAFETY: out-pointers are live locals; `name` holds the 64 bytes passed, and the driver
    // NUL-terminates it; the error strings it returns are static C strings.
    unsafe {
        let mut config = r580();
        config
            .attributes
            .insert((1, attribute::COMPUTE_CAPABILITY_MAJOR), 8);
        setup(config);
        let mut v = 0;
        assert_eq!(cuDeviceGetCount(&mut v), SUCCESS);
        assert_eq!(v, 2);
        assert_eq!(
            cuDeviceGetAttribute(&mut v, attribute::COMPUTE_CAPABILITY_MAJOR, 0),
            SUCCESS
        );
        assert_eq!(v, 9);
        assert_eq!(
            cuDeviceGetAttribute(&mut v, attribute::COMPUTE_CAPABILITY_MAJOR, 1),
            SUCCESS
        );
        assert_eq!(v, 8);
        assert_eq!(
            cuDeviceGetAttribute(&mut v, attribute::LOGICAL_ENDPOINT_UNICAST_SUPPORTED, 0),
            SUCCESS
        );
        assert_eq!(v, 1);
        assert_eq!(cuDeviceGetAttribute(&mut v, 157, 0), INVALID_VALUE);
        assert_eq!(cuDeviceGetAttribute(&mut v, 41, 2), INVALID_DEVICE);
        let mut d = 0;
        assert_eq!(cuDeviceGet(&mut d, 2), INVALID_DEVICE);
        let mut name = [0 as std::ffi::c_char; 64];
        assert_eq!(cuDeviceGetName(name.as_mut_ptr(), 64, 1), SUCCESS);
        let text = CStr::from_ptr(name.as_ptr()).to_str().unwrap();
        assert!(text.ends_with('1'), "{text}");
        let mut s = std::ptr::null();
        assert_eq!(cuGetErrorName(217, &mut s), SUCCESS);
        assert_eq!(
            CStr::from_ptr(s).to_str(),
            Ok("CUDA_ERROR_PEER_ACCESS_UNSUPPORTED")
        );
        assert_eq!(cuGetErrorString(1, &mut s), SUCCESS);
        assert_eq!(CStr::from_ptr(s).to_str(), Ok("invalid argument"));
        assert_eq!(cuGetErrorName(12345, &mut s), INVALID_VALUE);
        assert!(s.is_null());
        assert_eq!(cuInit(1), INVALID_VALUE);
    }
}

#[test]
fn concurrent_threads_keep_their_own_contexts() {
    // SAFETY: each thread passes only its own live locals and its own allocations.
    unsafe {
        setup(r580());
        let workers: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    setup(r580());
                    let ctx = context(i % 2);
                    for round in 0..50u8 {
                        let p = alloc(4096);
                        let bytes = [round ^ i as u8; 64];
                        upload(p + 64, &bytes);
                        assert_eq!(download(p + 64, 64), bytes);
                        assert_eq!(cuMemFree_v2(p), SUCCESS);
                    }
                    let mut current = null_mut();
                    assert_eq!(cuCtxGetCurrent(&mut current), SUCCESS);
                    assert_eq!(current, ctx);
                    assert_eq!(cuCtxDestroy_v2(ctx), SUCCESS);
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker");
        }
    }
}

#[test]
fn ctx_get_device_v2_of_null_destroyed_and_unknown_contexts() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let a = context(0);
        let b = context(1); // current
        let device = |ctx: CUcontext| {
            let mut dev = -1;
            let rc = cuCtxGetDevice_v2(&mut dev, ctx);
            (rc, dev)
        };
        assert_eq!(
            device(null_mut()),
            (SUCCESS, 1),
            "NULL: the current context"
        );
        assert_eq!(device(a), (SUCCESS, 0));
        assert_eq!(device(b), (SUCCESS, 1));
        assert_eq!(cuCtxDestroy_v2(a), SUCCESS);
        assert_eq!(device(a), (INVALID_CONTEXT, -1), "destroyed");
        assert_eq!(
            device(0x1234 as CUcontext),
            (INVALID_CONTEXT, -1),
            "unknown"
        );
        let mut s = null_mut();
        assert_eq!(cuStreamCreate(&mut s, 0), SUCCESS);
        assert_eq!(device(s), (INVALID_CONTEXT, -1), "a stream is no context");
        assert_eq!(cuCtxGetDevice_v2(null_mut(), b), INVALID_VALUE);
        // Destroying the current context pops it: NULL now means no context at all.
        assert_eq!(cuCtxDestroy_v2(b), SUCCESS);
        assert_eq!(device(null_mut()), (INVALID_CONTEXT, -1));
        assert_eq!(device(b), (INVALID_CONTEXT, -1));
    }
}

#[test]
fn pointer_device_ordinal_and_context_are_the_allocations() {
    // SAFETY: each `cuPointerGetAttribute` gets a live local of the attribute's type
    // (`int`, `CUcontext`); the other out-pointers are live locals or NULL where optional.
    // `unknown` is only an address to look up.
    unsafe {
        setup(r580());
        let c1 = context(1);
        let on1 = alloc(4096);
        let c0 = context(0);
        let mut managed = 0;
        assert_eq!(
            cuMemAllocManaged(&mut managed, 8192, MEM_ATTACH_GLOBAL),
            SUCCESS
        );
        let query = |ptr: CUdeviceptr| {
            let mut ordinal: i32 = -1;
            let mut owner = 0x1 as CUcontext;
            let rc_ordinal = cuPointerGetAttribute(
                (&mut ordinal as *mut i32).cast(),
                pointer_attribute::DEVICE_ORDINAL,
                ptr,
            );
            let rc_context = cuPointerGetAttribute(
                (&mut owner as *mut CUcontext).cast(),
                pointer_attribute::CONTEXT,
                ptr,
            );
            (rc_ordinal, ordinal, rc_context, owner)
        };
        // The allocation's device and context, not the current ones (c0 on device 0 is current).
        assert_eq!(query(on1 + 100), (SUCCESS, 1, SUCCESS, c1));
        assert_eq!(query(managed + 8191), (SUCCESS, 0, SUCCESS, c0));
        assert_eq!(cuCtxSetCurrent(c1), SUCCESS);
        assert_eq!(query(managed), (SUCCESS, 0, SUCCESS, c0));
        // Memory the driver does not know: INVALID_VALUE, nothing written.
        let host = [0u8; 16];
        let unknown = host.as_ptr() as u64;
        assert_eq!(
            query(unknown),
            (INVALID_VALUE, -1, INVALID_VALUE, 0x1 as CUcontext)
        );
        // cuMemGetAddressRange of the same pointers; both outputs are optional.
        let (mut base, mut size) = (7, 7);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut size, managed + 4000),
            SUCCESS
        );
        assert_eq!((base, size), (managed, 8192));
        assert_eq!(
            cuMemGetAddressRange_v2(null_mut(), &mut size, on1 + 1),
            SUCCESS
        );
        assert_eq!(size, 4096);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, null_mut(), on1 + 4095),
            SUCCESS
        );
        assert_eq!(base, on1);
        assert_eq!(
            cuMemGetAddressRange_v2(null_mut(), null_mut(), on1),
            SUCCESS
        );
        let (mut base, mut size) = (7, 7);
        assert_eq!(
            cuMemGetAddressRange_v2(&mut base, &mut size, unknown),
            NOT_FOUND
        );
        assert_eq!((base, size), (7, 7), "untouched on error");
        assert_eq!(cuMemGetAddressRange_v2(&mut base, &mut size, 0), NOT_FOUND);
    }
}

#[test]
fn pointer_attributes_answer_several_at_once_and_zero_for_unknown_pointers() {
    // SAFETY: `attributes` and `data` hold three entries each, and every data slot points to a
    // live local of the type its attribute names (CUmemorytype, bool read as int, int).
    unsafe {
        setup(r580());
        let _ = context(1);
        let mem = alloc(4096);
        let mut attributes = [
            pointer_attribute::MEMORY_TYPE,
            pointer_attribute::IS_MANAGED,
            pointer_attribute::DEVICE_ORDINAL,
        ];
        let (mut memory_type, mut managed, mut ordinal) = (0u32, 7i32, -1i32);
        let mut data: [*mut c_void; 3] = [
            (&mut memory_type as *mut u32).cast(),
            (&mut managed as *mut i32).cast(),
            (&mut ordinal as *mut i32).cast(),
        ];
        let rc = cuPointerGetAttributes(3, attributes.as_mut_ptr(), data.as_mut_ptr(), mem + 8);
        assert_eq!(rc, SUCCESS);
        assert_eq!((memory_type, managed & 0xff, ordinal), (2, 0, 1));
        // Not a CUDA pointer: success, and every attribute is its NULL value.
        let rc = cuPointerGetAttributes(3, attributes.as_mut_ptr(), data.as_mut_ptr(), 0x10);
        assert_eq!(rc, SUCCESS);
        assert_eq!((memory_type, managed & 0xff, ordinal), (0, 0, 0));
        // A NULL data slot or array is refused.
        data[1] = null_mut();
        let rc = cuPointerGetAttributes(3, attributes.as_mut_ptr(), data.as_mut_ptr(), mem);
        assert_eq!(rc, INVALID_VALUE);
        let rc = cuPointerGetAttributes(3, attributes.as_mut_ptr(), null_mut(), mem);
        assert_eq!(rc, INVALID_VALUE);
    }
}
