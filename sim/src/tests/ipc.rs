use super::*;

fn mem_handle(ptr: CUdeviceptr) -> (Code, CUipcMemHandle) {
    let mut h = CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: `h` is a live local `CUipcMemHandle`.
    let rc = unsafe { cuIpcGetMemHandle(&mut h, ptr) };
    (rc, h)
}

#[test]
fn export_rules_r580() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let _c = context(0);
        let p = alloc(1 << 16);
        let (rc, base) = mem_handle(p);
        assert_eq!(rc, SUCCESS);
        // Interior pointer: accepted, and the very same handle as the base (R580).
        let (rc, interior) = mem_handle(p + 256);
        assert_eq!(rc, SUCCESS);
        assert_eq!(base.reserved, interior.reserved);
        // Repeated exports are the same handle.
        assert_eq!(mem_handle(p).1.reserved, base.reserved);
        assert_eq!(cuIpcGetMemHandle(null_mut(), p), INVALID_VALUE);
        assert_eq!(mem_handle(0x1000).0, INVALID_VALUE);
        // Managed memory cannot be exported.
        let mut managed = 0;
        assert_eq!(
            cuMemAllocManaged(&mut managed, 4096, MEM_ATTACH_GLOBAL),
            SUCCESS
        );
        assert_eq!(mem_handle(managed).0, INVALID_VALUE);
        // Freed and allocated again at the same address: R580 hands out the very same handle
        // (measured; the documentation promises "a unique handle for the new memory").
        // (Whether the address comes back is the allocator's business, and other tests
        // allocate in parallel: the handle follows the address either way. The IPC probe's test
        // in sim/tests/cross_process.rs sees the address come back in a process of its own.)
        assert_eq!(cuMemFree_v2(p), SUCCESS);
        let q = alloc(1 << 16);
        let (rc, again) = mem_handle(q);
        assert_eq!(rc, SUCCESS);
        assert_eq!(
            again.reserved == base.reserved,
            q == p,
            "{q:#x} after {p:#x}"
        );
        // Another live allocation, another handle (it may sit at `p` if `q` does not).
        let other = alloc(1 << 16);
        assert_ne!(other, q);
        let (_, theirs) = mem_handle(other);
        assert_ne!(theirs.reserved, again.reserved);
        assert_eq!(
            theirs.reserved == base.reserved,
            other == p,
            "{other:#x} after {p:#x}"
        );
    }
}

#[test]
fn reallocated_memory_gets_a_new_handle_when_documented() {
    // SAFETY: the out-pointers are live locals; device addresses are plain values.
    unsafe {
        setup(documented());
        let _c = context(0);
        let p = alloc(1 << 16);
        let (_, base) = mem_handle(p);
        assert_eq!(cuMemFree_v2(p), SUCCESS);
        let q = alloc(1 << 16);
        let (rc, again) = mem_handle(q);
        assert_eq!(rc, SUCCESS);
        assert_ne!(
            again.reserved, base.reserved,
            "a new handle, at {q:#x} after {p:#x}"
        );
    }
}

#[test]
fn interior_pointer_rejected_when_documented() {
    setup(documented());
    let _c = context(0);
    let p = alloc(4096);
    assert_eq!(mem_handle(p).0, SUCCESS);
    assert_eq!(mem_handle(p + 256).0, INVALID_VALUE);
}

#[test]
fn open_and_close_errors_in_one_process() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let _c = context(0);
        let p = alloc(4096);
        let (_, h) = mem_handle(p);
        let mut out = 0;
        let lazy = IPC_MEM_LAZY_ENABLE_PEER_ACCESS;
        assert_eq!(
            cuIpcOpenMemHandle_v2(&mut out, h, lazy),
            INVALID_CONTEXT,
            "same process"
        );
        assert_eq!(
            cuIpcOpenMemHandle(&mut out, h, lazy),
            INVALID_CONTEXT,
            "same process, v1"
        );
        assert_eq!(
            cuIpcOpenMemHandle_v2(&mut out, h, 0),
            INVALID_VALUE,
            "flags 0"
        );
        assert_eq!(cuIpcOpenMemHandle_v2(null_mut(), h, lazy), INVALID_VALUE);
        let garbage = CUipcMemHandle {
            reserved: [0xAB; 64],
        };
        assert_eq!(
            cuIpcOpenMemHandle_v2(&mut out, garbage, lazy),
            INVALID_VALUE
        );
        assert_eq!(cuIpcCloseMemHandle(p), INVALID_VALUE, "not an IPC mapping");
        assert_eq!(cuIpcCloseMemHandle(0), INVALID_VALUE);
    }
}

#[test]
fn event_handles() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let _c = context(0);
        let mut plain = null_mut();
        assert_eq!(cuEventCreate(&mut plain, 0), SUCCESS);
        let mut h = CUipcEventHandle { reserved: [0; 64] };
        assert_eq!(cuIpcGetEventHandle(&mut h, plain), INVALID_HANDLE);
        let mut ipc_event = null_mut();
        assert_eq!(
            cuEventCreate(&mut ipc_event, EVENT_INTERPROCESS),
            INVALID_VALUE
        );
        let flags = EVENT_INTERPROCESS | EVENT_DISABLE_TIMING;
        assert_eq!(cuEventCreate(&mut ipc_event, flags), SUCCESS);
        assert_eq!(cuIpcGetEventHandle(&mut h, ipc_event), SUCCESS);
        assert_eq!(cuIpcGetEventHandle(null_mut(), ipc_event), INVALID_VALUE);
        let mut opened = null_mut();
        assert_eq!(
            cuIpcOpenEventHandle(&mut opened, h),
            INVALID_CONTEXT,
            "same process"
        );
        assert_eq!(cuEventDestroy_v2(ipc_event), SUCCESS);
        assert_eq!(cuEventDestroy_v2(ipc_event), INVALID_HANDLE);
        assert_eq!(cuIpcGetEventHandle(&mut h, ipc_event), INVALID_HANDLE);
    }
}

#[test]
fn export_refused_for_pool_host_managed_and_vmm_memory() {
    // SAFETY: out-pointers are live locals; `prop` and `access` (one descriptor, count 1) are live
    // locals; streams and device addresses are plain values.
    unsafe {
        setup(r580());
        let _c = context(0);
        let refused = |ptr: CUdeviceptr, what: &str| {
            assert_eq!(mem_handle(ptr).0, INVALID_VALUE, "{what}");
        };
        // The control: cuMemAlloc memory exports.
        let device = alloc(4096);
        assert_eq!(mem_handle(device).0, SUCCESS);
        // R580 (api-facts.md §5.1): pool, managed and cuMemHostAlloc memory are INVALID_VALUE.
        let mut pool = 0;
        assert_eq!(cuMemAllocAsync(&mut pool, 4096, null_mut()), SUCCESS);
        refused(pool, "cuMemAllocAsync");
        refused(pool + 64, "cuMemAllocAsync, interior");
        let mut managed = 0;
        let rc = cuMemAllocManaged(&mut managed, 4096, MEM_ATTACH_GLOBAL);
        assert_eq!(rc, SUCCESS);
        refused(managed, "cuMemAllocManaged");
        let (mut pinned, mut host_alloc) = (null_mut(), null_mut());
        assert_eq!(cuMemAllocHost_v2(&mut pinned, 4096), SUCCESS);
        refused(pinned as CUdeviceptr, "cuMemAllocHost");
        let rc = cuMemHostAlloc(&mut host_alloc, 4096, MEMHOSTALLOC_PORTABLE);
        assert_eq!(rc, SUCCESS);
        refused(host_alloc as CUdeviceptr, "cuMemHostAlloc");
        // cuMemCreate memory, mapped and accessible: shared through shareable handles instead.
        let prop = CUmemAllocationProp {
            type_: MEM_ALLOCATION_TYPE_PINNED,
            requested_handle_types: MEM_HANDLE_TYPE_POSIX_FD,
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
        let g = crate::memory::GRANULARITY as usize;
        let (mut handle, mut va) = (0, 0);
        assert_eq!(cuMemCreate(&mut handle, g, &prop, 0), SUCCESS);
        assert_eq!(cuMemAddressReserve(&mut va, g, 0, 0, 0), SUCCESS);
        assert_eq!(cuMemMap(va, g, 0, handle, 0), SUCCESS);
        let access = CUmemAccessDesc {
            location: prop.location,
            flags: MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        assert_eq!(cuMemSetAccess(va, g, &access, 1), SUCCESS);
        upload(va, b"vmm");
        refused(va, "cuMemCreate + cuMemMap");
        // The documented behaviour refuses them just the same.
        setup(documented());
        refused(pool, "cuMemAllocAsync, documented");
        refused(pinned as CUdeviceptr, "cuMemAllocHost, documented");
        refused(va, "cuMemCreate, documented");

        assert_eq!(cuMemUnmap(va, g), SUCCESS);
        assert_eq!(cuMemAddressFree(va, g), SUCCESS);
        assert_eq!(cuMemRelease(handle), SUCCESS);
        assert_eq!(cuMemFreeHost(pinned), SUCCESS);
        assert_eq!(cuMemFreeHost(host_alloc), SUCCESS);
        assert_eq!(cuMemFree_v2(managed), SUCCESS);
        assert_eq!(cuMemFreeAsync(pool, null_mut()), SUCCESS);
        assert_eq!(cuMemFree_v2(device), SUCCESS);
    }
}
