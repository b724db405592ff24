use super::*;
use crate::procaddress::lookups::*;
use crate::procaddress::{Api, TABLE};
use std::ffi::{c_int, CString};

/// `(rc, status, pointer)` of `cuGetProcAddress_v2`; status -1 means "left untouched".
fn lookup(symbol: &str, version: i32, flags: u64) -> (Code, c_int, *mut c_void) {
    let name = CString::new(symbol).unwrap();
    let mut pfn = 0x1 as *mut c_void;
    let mut status: c_int = -1;
    // SAFETY: `name` is a live C string; `pfn` and `status` are live locals of the types written.
    let rc = unsafe { cuGetProcAddress_v2(name.as_ptr(), &mut pfn, version, flags, &mut status) };
    (rc, status, pfn)
}

fn found(f: *mut c_void) -> (Code, c_int, *mut c_void) {
    (SUCCESS, PROC_ADDRESS_SUCCESS, f)
}

const NULL: *mut c_void = std::ptr::null_mut();

#[test]
fn r580_table_of_api_facts() {
    // SAFETY: the symbol is a C string literal and `pfn` a live local; the function pointers are
    // only compared, never called.
    unsafe {
        setup(r580());
        let peer = cuMemcpyPeer as *mut c_void;
        let peer_ptds = cuMemcpyPeer_ptds as *mut c_void;
        let not_sufficient = (SUCCESS, PROC_ADDRESS_VERSION_NOT_SUFFICIENT, NULL);
        for flags in [0, 1, 2] {
            assert_eq!(lookup("cuMemcpyPeer", 3000, flags), not_sufficient);
        }
        assert_eq!(lookup("cuMemcpyPeer", 4000, 0), found(peer));
        assert_eq!(lookup("cuMemcpyPeer", 4000, 1), found(peer));
        assert_eq!(
            lookup("cuMemcpyPeer", 4000, 2),
            not_sufficient,
            "PTDS below 7000"
        );
        for version in [7000, 13000] {
            assert_eq!(lookup("cuMemcpyPeer", version, 0), found(peer));
            assert_eq!(lookup("cuMemcpyPeer", version, 1), found(peer));
            assert_eq!(lookup("cuMemcpyPeer", version, 2), found(peer_ptds));
        }
        assert_eq!(
            lookup("cuMemcpyPeer", 7000, 3),
            found(peer_ptds),
            "3 behaves like PTDS"
        );
        assert_eq!(lookup("cuMemcpyPeer", 7000, 4).0, INVALID_VALUE);

        let async_legacy = cuMemcpyPeerAsync as *mut c_void;
        assert_eq!(lookup("cuMemcpyPeerAsync", 4000, 0), found(async_legacy));
        assert_eq!(lookup("cuMemcpyPeerAsync", 7000, 0), found(async_legacy));
        assert_eq!(lookup("cuMemcpyPeerAsync", 4000, 2), not_sufficient);
        assert_eq!(
            lookup("cuMemcpyPeerAsync", 7000, 2),
            found(cuMemcpyPeerAsync_ptsz as *mut c_void)
        );

        let attach = cuStreamAttachMemAsync as *mut c_void;
        let attach_ptsz = cuStreamAttachMemAsync_ptsz as *mut c_void;
        for version in [6000, 7000, 12000] {
            assert_eq!(lookup("cuStreamAttachMemAsync", version, 0), found(attach));
        }
        assert_eq!(lookup("cuStreamAttachMemAsync", 6000, 2), not_sufficient);
        assert_eq!(
            lookup("cuStreamAttachMemAsync", 7000, 2),
            found(attach_ptsz)
        );
        assert_eq!(
            lookup("cuStreamAttachMemAsync", 12000, 2),
            found(attach_ptsz)
        );

        let v1 = cuIpcOpenMemHandle as *mut c_void;
        let v2 = cuIpcOpenMemHandle_v2 as *mut c_void;
        for flags in [0, 1, 2] {
            assert_eq!(lookup("cuIpcOpenMemHandle", 4010, flags), found(v1));
            assert_eq!(lookup("cuIpcOpenMemHandle", 11000, flags), found(v2));
        }
        assert_eq!(
            lookup("cuIpcGetMemHandle", 4010, 2),
            found(cuIpcGetMemHandle as *mut c_void)
        );
        assert_eq!(
            lookup("cuCtxEnablePeerAccess", 4000, 0),
            found(cuCtxEnablePeerAccess as *mut c_void)
        );

        assert_eq!(
            lookup("cuGetProcAddress", 11030, 0),
            found(cuGetProcAddress as *mut c_void)
        );
        assert_eq!(
            lookup("cuGetProcAddress", 12000, 0),
            found(cuGetProcAddress_v2 as *mut c_void)
        );
        assert_eq!(
            lookup("cuMemAlloc", 3020, 0),
            found(cuMemAlloc_v2 as *mut c_void)
        );
        assert_eq!(lookup("cuMemAlloc", 2000, 0), not_sufficient);
        assert_eq!(lookup("cuInit", 2000, 0), found(cuInit as *mut c_void));
        assert_eq!(
            lookup("cuCtxCreate", 12050, 0),
            found(cuCtxCreate_v4 as *mut c_void)
        );
        assert_eq!(
            lookup("cuCtxCreate", 12000, 0),
            found(cuCtxCreate_v3 as *mut c_void)
        );

        // Unknown symbol and the cudart probe.
        assert_eq!(
            lookup("cuNoSuchFunction", 12000, 0),
            (SUCCESS, PROC_ADDRESS_SYMBOL_NOT_FOUND, NULL)
        );
        let mut pfn = 0x1 as *mut c_void;
        assert_eq!(
            cuGetProcAddress_v2(c"".as_ptr(), &mut pfn, 0, 0, null_mut()),
            SUCCESS
        );
        assert!(pfn.is_null());

        // Logical endpoints: introduced at 13030.
        let create = cuLogicalEndpointCreate as *mut c_void;
        assert_eq!(lookup("cuLogicalEndpointCreate", 13030, 0), found(create));
        assert_eq!(lookup("cuLogicalEndpointCreate", 13000, 0), not_sufficient);

        // Above the driver version: INVALID_VALUE, status untouched.
        assert_eq!(
            lookup("cuMemcpyPeer", 13040, 0),
            (INVALID_VALUE, -1, 0x1 as *mut c_void)
        );
        assert_eq!(lookup("cuMemcpyPeer", 99990, 0).1, -1);
    }
}

#[test]
fn stream_query_functions_resolve_by_version() {
    setup(r580());
    let not_sufficient = (SUCCESS, PROC_ADDRESS_VERSION_NOT_SUFFICIENT, NULL);
    let v1 = cuStreamGetCtx as *mut c_void;
    let v1_ptsz = cuStreamGetCtx_ptsz as *mut c_void;
    let v2 = cuStreamGetCtx_v2 as *mut c_void;
    let v2_ptsz = cuStreamGetCtx_v2_ptsz as *mut c_void;
    assert_eq!(lookup("cuStreamGetCtx", 9010, 0), not_sufficient);
    assert_eq!(lookup("cuStreamGetCtx", 9020, 0), found(v1));
    assert_eq!(lookup("cuStreamGetCtx", 9020, 2), found(v1_ptsz));
    assert_eq!(lookup("cuStreamGetCtx", 12040, 1), found(v1));
    // From 12050 on the name means the three-argument ABI (PFN_cuStreamGetCtx_v12050).
    assert_eq!(lookup("cuStreamGetCtx", 12050, 0), found(v2));
    assert_eq!(lookup("cuStreamGetCtx", 13000, 2), found(v2_ptsz));
    let query = cuStreamQuery as *mut c_void;
    let query_ptsz = cuStreamQuery_ptsz as *mut c_void;
    assert_eq!(lookup("cuStreamQuery", 2000, 0), found(query));
    assert_eq!(lookup("cuStreamQuery", 13000, 1), found(query));
    assert_eq!(
        lookup("cuStreamQuery", 6050, 2),
        not_sufficient,
        "PTDS below 7000"
    );
    assert_eq!(lookup("cuStreamQuery", 7000, 2), found(query_ptsz));
    assert_eq!(lookup("cuStreamQuery", 13000, 2), found(query_ptsz));
    let state = cuDevicePrimaryCtxGetState as *mut c_void;
    assert_eq!(
        lookup("cuDevicePrimaryCtxGetState", 6050, 0),
        not_sufficient
    );
    assert_eq!(lookup("cuDevicePrimaryCtxGetState", 7000, 0), found(state));
    assert_eq!(lookup("cuDevicePrimaryCtxGetState", 13000, 2), found(state));
    let priority = cuStreamCreateWithPriority as *mut c_void;
    assert_eq!(
        lookup("cuStreamCreateWithPriority", 5000, 0),
        not_sufficient
    );
    assert_eq!(
        lookup("cuStreamCreateWithPriority", 5050, 0),
        found(priority)
    );
    assert_eq!(
        lookup("cuStreamCreateWithPriority", 13000, 2),
        found(priority)
    );
}

#[test]
fn null_arguments() {
    // SAFETY: the symbol is a C string literal or NULL, `pfn` a live local or NULL, which the
    // export checks for.
    unsafe {
        setup(r580());
        let mut pfn = null_mut();
        let rc = cuGetProcAddress_v2(c"cuInit".as_ptr(), null_mut(), 2000, 0, null_mut());
        assert_eq!(rc, INVALID_VALUE);
        let rc = cuGetProcAddress_v2(std::ptr::null(), &mut pfn, 2000, 0, null_mut());
        assert_eq!(rc, INVALID_VALUE);
    }
}

#[test]
fn version_1_entry_point_resolves_the_same() {
    // SAFETY: the symbols are C string literals and `pfn` a live local; the pointers are only
    // compared.
    unsafe {
        setup(r580());
        let mut pfn = null_mut();
        let rc = cuGetProcAddress(c"cuGetProcAddress".as_ptr(), &mut pfn, 12000, 0);
        assert_eq!((rc, pfn), (SUCCESS, cuGetProcAddress_v2 as *mut c_void));
        let rc = cuGetProcAddress(c"cuMemcpyPeer".as_ptr(), &mut pfn, 7000, 2);
        assert_eq!((rc, pfn), (SUCCESS, cuMemcpyPeer_ptds as *mut c_void));
        let rc = cuGetProcAddress(c"cuMemcpyPeer".as_ptr(), &mut pfn, 4000, 2);
        assert_eq!((rc, pfn), (SUCCESS, null_mut()));
    }
}

#[test]
fn documented_falls_back_to_legacy_for_ptds() {
    setup(documented());
    assert_eq!(
        lookup("cuMemcpyPeer", 4000, 2),
        found(cuMemcpyPeer as *mut c_void)
    );
    assert_eq!(
        lookup("cuStreamAttachMemAsync", 6000, 2),
        found(cuStreamAttachMemAsync as *mut c_void)
    );
    assert_eq!(
        lookup("cuMemcpyPeer", 7000, 2),
        found(cuMemcpyPeer_ptds as *mut c_void)
    );
}

#[test]
fn driver_13000_has_no_logical_endpoints() {
    // SAFETY: `v` is a live local `int`; the rest takes no pointer.
    unsafe {
        let mut config = r580();
        config.driver_version = 13000;
        setup(config);
        assert_eq!(
            lookup("cuLogicalEndpointCreate", 13000, 0),
            (SUCCESS, PROC_ADDRESS_SYMBOL_NOT_FOUND, NULL)
        );
        assert_eq!(
            lookup("cuLogicalEndpointCreate", 13030, 0),
            (INVALID_VALUE, -1, 0x1 as *mut c_void)
        );
        assert_eq!(cuLogicalEndpointDestroy(1), NOT_SUPPORTED);
        let mut v = 0;
        assert_eq!(cuDeviceGetAttribute(&mut v, 149, 0), SUCCESS);
        assert_eq!(cuDeviceGetAttribute(&mut v, 150, 0), INVALID_VALUE);
        assert_eq!(cuDeviceGetAttribute(&mut v, 153, 0), INVALID_VALUE);
        assert_eq!(cuDriverGetVersion(&mut v), SUCCESS);
        assert_eq!(v, 13000);
    }
}

#[test]
fn table_covers_every_interposed_function() {
    for f in sharecheck_core::FUNCTIONS {
        let api = match f.api {
            sharecheck_core::Api::Cuda => Api::Cuda,
            sharecheck_core::Api::Hip => Api::Hip,
        };
        let row = TABLE.iter().find(|e| e.symbol == f.symbol);
        let row = row.unwrap_or_else(|| panic!("{} is not in the table", f.symbol));
        assert_eq!(row.api, api, "{}", f.symbol);
        assert_eq!(row.base, f.base, "{}", f.symbol);
        if api == Api::Cuda {
            assert_eq!(row.since, f.since as i32, "{}", f.symbol);
            assert_eq!(
                row.per_thread,
                f.variant != sharecheck_core::functions::Variant::Legacy
            );
        }
    }
}

#[test]
fn hip_get_proc_address() {
    // SAFETY: the symbols are C string literals, `pfn` and `status` live locals or NULL where
    // checked; the pointers are only compared, never called.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        let mut pfn = null_mut();
        let mut status = -1;
        let rc = crate::procaddress::lookups::hipGetProcAddress(
            c"hipMemcpyPeer".as_ptr(),
            &mut pfn,
            602,
            0,
            &mut status,
        );
        assert_eq!(
            (rc, status, pfn),
            (SUCCESS, 0, crate::hip_exports::hipMemcpyPeer as *mut c_void)
        );
        let rc = crate::procaddress::lookups::hipGetProcAddress(
            c"hipNoSuch".as_ptr(),
            &mut pfn,
            602,
            0,
            &mut status,
        );
        assert_eq!(
            (rc, status, pfn),
            (INVALID_VALUE, PROC_ADDRESS_SYMBOL_NOT_FOUND, null_mut())
        );
        let rc = crate::procaddress::lookups::hipGetProcAddress(
            c"".as_ptr(),
            &mut pfn,
            602,
            0,
            &mut status,
        );
        assert_eq!(rc, INVALID_VALUE);
        let rc = crate::procaddress::lookups::hipGetProcAddress(
            c"hipInit".as_ptr(),
            null_mut(),
            602,
            0,
            &mut status,
        );
        assert_eq!(rc, INVALID_VALUE);
        use crate::hip_exports as hip;
        for (name, f) in [
            (c"hipGetLastError", hip::hipGetLastError as *mut c_void),
            (
                c"hipPeekAtLastError",
                hip::hipPeekAtLastError as *mut c_void,
            ),
            (
                c"hipMemGetAddressRange",
                hip::hipMemGetAddressRange as *mut c_void,
            ),
            (
                c"hipStreamCreateWithFlags",
                hip::hipStreamCreateWithFlags as *mut c_void,
            ),
            (
                c"hipStreamCreateWithPriority",
                hip::hipStreamCreateWithPriority as *mut c_void,
            ),
        ] {
            let rc = crate::procaddress::lookups::hipGetProcAddress(
                name.as_ptr(),
                &mut pfn,
                602,
                0,
                &mut status,
            );
            assert_eq!((rc, status, pfn), (SUCCESS, 0, f), "{name:?}");
        }
        // CUDA names are not HIP symbols.
        let rc = crate::procaddress::lookups::hipGetProcAddress(
            c"cuInit".as_ptr(),
            &mut pfn,
            602,
            0,
            &mut status,
        );
        assert_eq!(rc, INVALID_VALUE);
    }
}

#[test]
fn allocation_functions_resolve_by_version() {
    setup(r580());
    let not_sufficient = (SUCCESS, PROC_ADDRESS_VERSION_NOT_SUFFICIENT, NULL);
    // The `_v2` ABIs of CUDA 3.2 (`PFN_cuMemAllocHost_v3020`, `PFN_cuMemAllocPitch_v3020`); the
    // simulator has no 2.0 ABI of either.
    let alloc_host = cuMemAllocHost_v2 as *mut c_void;
    assert_eq!(lookup("cuMemAllocHost", 3020, 0), found(alloc_host));
    assert_eq!(lookup("cuMemAllocHost", 13000, 2), found(alloc_host));
    assert_eq!(lookup("cuMemAllocHost", 2000, 0), not_sufficient);
    let pitch = cuMemAllocPitch_v2 as *mut c_void;
    assert_eq!(lookup("cuMemAllocPitch", 3020, 0), found(pitch));
    assert_eq!(lookup("cuMemAllocPitch", 2000, 0), not_sufficient);
    // PFN_cuMemHostAlloc_v2020, PFN_cuMemFreeHost_v2000.
    let host_alloc = cuMemHostAlloc as *mut c_void;
    assert_eq!(lookup("cuMemHostAlloc", 2020, 0), found(host_alloc));
    assert_eq!(lookup("cuMemHostAlloc", 2000, 0), not_sufficient);
    let free_host = cuMemFreeHost as *mut c_void;
    assert_eq!(lookup("cuMemFreeHost", 2000, 0), found(free_host));
    assert_eq!(lookup("cuMemFreeHost", 12000, 2), found(free_host));
    // PFN_cuMemAllocAsync_v11020[_ptsz], PFN_cuMemFreeAsync_v11020[_ptsz]: cudart 13.0 asks for
    // (cuMemAllocAsync, 11020, 2) and gets the `_ptsz` export (api-facts.md §2.2).
    for (name, legacy, per_thread) in [
        (
            "cuMemAllocAsync",
            cuMemAllocAsync as *mut c_void,
            cuMemAllocAsync_ptsz as *mut c_void,
        ),
        (
            "cuMemFreeAsync",
            cuMemFreeAsync as *mut c_void,
            cuMemFreeAsync_ptsz as *mut c_void,
        ),
    ] {
        assert_eq!(lookup(name, 11020, 0), found(legacy), "{name}");
        assert_eq!(lookup(name, 11020, 1), found(legacy), "{name}");
        assert_eq!(lookup(name, 11020, 2), found(per_thread), "{name}");
        assert_eq!(lookup(name, 13000, 2), found(per_thread), "{name}");
        assert_eq!(lookup(name, 11010, 0), not_sufficient, "{name}");
        assert_eq!(lookup(name, 11010, 2), not_sufficient, "{name}");
    }
    // Already there: cuMemAlloc, cuMemFree, cuMemAllocManaged and the stream/event lifecycle.
    let existing = [
        ("cuMemFree", 3020, cuMemFree_v2 as *mut c_void),
        ("cuMemAllocManaged", 6000, cuMemAllocManaged as *mut c_void),
        ("cuStreamCreate", 2000, cuStreamCreate as *mut c_void),
        ("cuStreamDestroy", 4000, cuStreamDestroy_v2 as *mut c_void),
        ("cuEventCreate", 2000, cuEventCreate as *mut c_void),
        ("cuEventDestroy", 4000, cuEventDestroy_v2 as *mut c_void),
    ];
    for (name, version, f) in existing {
        assert_eq!(lookup(name, version, 0), found(f), "{name}");
    }
}

#[test]
fn hip_allocation_functions_are_found() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    use crate::hip_exports as hip;
    for (name, f) in [
        (c"hipEventCreate", hip::hipEventCreate as *mut c_void),
        (c"hipHostMalloc", hip::hipHostMalloc as *mut c_void),
        (c"hipHostFree", hip::hipHostFree as *mut c_void),
        (c"hipMallocAsync", hip::hipMallocAsync as *mut c_void),
        (c"hipFreeAsync", hip::hipFreeAsync as *mut c_void),
    ] {
        let (mut pfn, mut status) = (null_mut(), -1);
        // SAFETY: the symbol is a C string literal; `pfn` and `status` are live locals.
        let rc = unsafe {
            crate::procaddress::lookups::hipGetProcAddress(
                name.as_ptr(),
                &mut pfn,
                602,
                0,
                &mut status,
            )
        };
        assert_eq!((rc, status, pfn), (SUCCESS, 0, f), "{name:?}");
    }
}
