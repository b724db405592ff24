use super::*;
use crate::hip_exports::*;
use crate::procaddress::lookups::*;
use std::ffi::CStr;

#[test]
fn peer_access_per_device() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        let mut can = -1;
        assert_eq!(hipDeviceCanAccessPeer(&mut can, 0, 1), SUCCESS);
        assert_eq!(can, 1);
        assert_eq!(hipDeviceCanAccessPeer(&mut can, 1, 1), SUCCESS);
        assert_eq!(can, 0);
        assert_eq!(hipDeviceCanAccessPeer(&mut can, 0, 7), INVALID_DEVICE);
        assert_eq!(hipDeviceCanAccessPeer(null_mut(), 0, 1), INVALID_VALUE);
        assert_eq!(hipSetDevice(0), SUCCESS);
        assert_eq!(hipDeviceEnablePeerAccess(1, 1), INVALID_VALUE);
        assert_eq!(
            hipDeviceEnablePeerAccess(0, 0),
            INVALID_DEVICE,
            "self, as the CLR"
        );
        assert_eq!(hipDeviceEnablePeerAccess(5, 0), INVALID_DEVICE);
        assert_eq!(hipDeviceEnablePeerAccess(1, 0), SUCCESS);
        assert_eq!(hipDeviceEnablePeerAccess(1, 0), PEER_ACCESS_ALREADY_ENABLED);
        assert_eq!(hipDeviceDisablePeerAccess(1), SUCCESS);
        assert_eq!(hipDeviceDisablePeerAccess(1), PEER_ACCESS_NOT_ENABLED);
        // hipDeviceReset ends the grants of the current device.
        assert_eq!(hipDeviceEnablePeerAccess(1, 0), SUCCESS);
        assert_eq!(hipDeviceReset(), SUCCESS);
        assert_eq!(hipDeviceDisablePeerAccess(1), PEER_ACCESS_NOT_ENABLED);
    }
}

#[test]
fn memory_copies_and_pointer_attributes() {
    // SAFETY: `data` and `back` are live 128-byte buffers for the 128-byte host copies; `attrs`
    // and `other` are live `hipPointerAttribute_t`s (zeroed, so `assume_init` is sound); the other
    // pointers are device addresses or plain stream values.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        assert_eq!(hipSetDevice(1), SUCCESS);
        let mut a = null_mut();
        assert_eq!(hipMalloc(&mut a, 4096), SUCCESS);
        assert_eq!(hipSetDevice(0), SUCCESS);
        let mut b = null_mut();
        assert_eq!(hipMalloc(&mut b, 4096), SUCCESS);
        let data = [42u8; 128];
        assert_eq!(hipMemcpy(b, data.as_ptr().cast(), 128, 1), SUCCESS);
        assert_eq!(hipMemcpyPeer(a, 1, b, 0, 128), SUCCESS);
        let mut back = [0u8; 128];
        assert_eq!(
            hipMemcpy(back.as_mut_ptr().cast(), a, 128, 4),
            SUCCESS,
            "default kind"
        );
        assert_eq!(back, data);
        assert_eq!(hipMemcpyPeer(a, 2, b, 0, 128), INVALID_DEVICE);
        assert_eq!(hipMemcpyPeer(a, 1, b, 0, 8192), INVALID_VALUE);
        assert_eq!(
            hipMemcpyPeerAsync(a, 1, b, 0, 16, 0x57_0000_5555 as hipStream_t),
            CONTEXT_IS_DESTROYED
        );
        assert_eq!(hipMemcpyPeerAsync(a, 1, b, 0, 16, null_mut()), SUCCESS);
        assert_eq!(hipMemcpy(a, b, 16, 9), 21, "hipErrorInvalidMemcpyDirection");
        let mut attrs = std::mem::MaybeUninit::<hipPointerAttribute_t>::zeroed();
        assert_eq!(hipPointerGetAttributes(attrs.as_mut_ptr(), a), SUCCESS);
        let attrs = attrs.assume_init();
        assert_eq!(
            (attrs.type_, attrs.device, attrs.is_managed),
            (hip_memory_type::DEVICE, 1, 0)
        );
        assert_eq!(attrs.device_pointer, a);
        let mut other = std::mem::MaybeUninit::<hipPointerAttribute_t>::zeroed();
        assert_eq!(
            hipPointerGetAttributes(other.as_mut_ptr(), data.as_ptr().cast()),
            INVALID_VALUE
        );
        assert_eq!(std::mem::size_of::<hipPointerAttribute_t>(), 32);
        assert_eq!(hipFree(a), SUCCESS);
        assert_eq!(hipFree(b), SUCCESS);
    }
}

#[test]
fn ipc_errors_in_one_process() {
    // SAFETY: out-pointers are live locals or NULL where checked; `inner` is only an address to
    // export.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        assert_eq!(hipSetDevice(0), SUCCESS);
        let mut p = null_mut();
        assert_eq!(hipMalloc(&mut p, 8192), SUCCESS);
        let mut h = hipIpcMemHandle_t { reserved: [0; 64] };
        assert_eq!(hipIpcGetMemHandle(&mut h, p), SUCCESS);
        let mut interior = hipIpcMemHandle_t { reserved: [0; 64] };
        let inner = p.cast::<u8>().wrapping_add(4096).cast::<c_void>();
        assert_eq!(hipIpcGetMemHandle(&mut interior, inner), SUCCESS);
        assert_ne!(h.reserved, interior.reserved, "HIP records the offset");
        assert_eq!(hipIpcGetMemHandle(null_mut(), p), INVALID_VALUE);
        let mut out = null_mut();
        assert_eq!(
            hipIpcOpenMemHandle(&mut out, h, 1),
            INVALID_CONTEXT,
            "own process"
        );
        assert_eq!(hipIpcOpenMemHandle(&mut out, h, 0), INVALID_VALUE);
        assert_eq!(hipIpcOpenMemHandle(null_mut(), h, 1), INVALID_VALUE);
        assert_eq!(hipIpcCloseMemHandle(p), INVALID_VALUE);
        let mut e = null_mut();
        assert_eq!(hipEventCreateWithFlags(&mut e, 0), SUCCESS);
        let mut eh = hipIpcEventHandle_t { reserved: [0; 64] };
        assert_eq!(
            hipIpcGetEventHandle(&mut eh, e),
            HIP_ERROR_INVALID_CONFIGURATION
        );
        assert_eq!(hipEventDestroy(e), SUCCESS);
        assert_eq!(hipEventDestroy(e), INVALID_HANDLE);
        assert_eq!(hipFree(p), SUCCESS);
    }
}

#[test]
fn devices_streams_and_names() {
    // SAFETY: out-pointers are live locals; `hipGetErrorName` returns static C strings.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        let mut n = 0;
        assert_eq!(hipGetDeviceCount(&mut n), SUCCESS);
        assert_eq!(n, 2);
        assert_eq!(hipSetDevice(2), INVALID_DEVICE);
        let mut s = null_mut();
        assert_eq!(hipStreamCreate(&mut s), SUCCESS);
        assert_eq!(hipStreamSynchronize(s), SUCCESS);
        assert_eq!(hipStreamDestroy(s), SUCCESS);
        assert_eq!(hipStreamDestroy(s), INVALID_HANDLE);
        assert_eq!(hipStreamSynchronize(s), INVALID_HANDLE);
        let name = CStr::from_ptr(hipGetErrorName(704));
        assert_eq!(name.to_str(), Ok("hipErrorPeerAccessAlreadyEnabled"));
        let unknown = CStr::from_ptr(hipGetErrorName(123_456));
        assert_eq!(unknown.to_str(), Ok("hipErrorUnknown"));
        assert!(!hipGetErrorString(1).is_null());
        let mut v = 0;
        assert_eq!(hipRuntimeGetVersion(&mut v), SUCCESS);
        assert!(v >= 60_200_000);
    }
}

#[test]
fn no_devices() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let _hip = HIP_LOCK.lock();
        set_config_without_devices();
        let mut n = -1;
        assert_eq!(hipGetDeviceCount(&mut n), NO_DEVICE);
        assert_eq!(n, 0);
        let mut p = null_mut();
        assert_eq!(hipMalloc(&mut p, 16), NO_DEVICE);
        assert_eq!(cuInit(0), NO_DEVICE);
    }
}

fn set_config_without_devices() {
    let mut config = r580();
    config.devices = 0;
    crate::config::set_test_config(config);
}

fn last_errors() -> (Code, Code) {
    // SAFETY: neither takes an argument.
    let peek = unsafe { hipPeekAtLastError() };
    // SAFETY: as above.
    (peek, unsafe { hipGetLastError() })
}

#[test]
fn last_error_survives_success_until_get() {
    // SAFETY: out-pointers are live locals or NULL where optional; the symbol is a C string
    // literal.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        // Start clean whatever ran on this thread before.
        hipGetLastError();
        assert_eq!(last_errors(), (SUCCESS, SUCCESS));
        assert_eq!(hipSetDevice(7), INVALID_DEVICE);
        assert_eq!(hipPeekAtLastError(), INVALID_DEVICE);
        assert_eq!(hipPeekAtLastError(), INVALID_DEVICE, "peek leaves it");
        // Success does not reset it.
        let mut device = -1;
        assert_eq!(hipGetDevice(&mut device), SUCCESS);
        assert_eq!(hipSetDevice(0), SUCCESS);
        assert_eq!(hipPeekAtLastError(), INVALID_DEVICE);
        // A later error replaces it.
        let mut s = null_mut();
        assert_eq!(hipStreamCreateWithFlags(&mut s, 4), INVALID_VALUE);
        assert_eq!(hipPeekAtLastError(), INVALID_VALUE);
        // Get returns it and resets it; it does not record what it returned.
        assert_eq!(hipGetLastError(), INVALID_VALUE);
        assert_eq!(hipGetLastError(), SUCCESS);
        assert_eq!(hipPeekAtLastError(), SUCCESS);
        // CUDA calls have no part in it.
        assert_eq!(cuCtxEnablePeerAccess(null_mut(), 0), INVALID_CONTEXT);
        assert_eq!(hipPeekAtLastError(), SUCCESS);
        // Errors of every kind of export count: one found through hipGetProcAddress too.
        let mut pfn = null_mut();
        let rc = hipGetProcAddress(c"hipNoSuch".as_ptr(), &mut pfn, 602, 0, null_mut());
        assert_eq!(rc, INVALID_VALUE);
        assert_eq!(last_errors(), (INVALID_VALUE, INVALID_VALUE));
        // hipErrorNotReady is left out, as the CLR's HIP_RETURN does.
        assert_eq!(crate::hip_exports::record_last_error(NOT_READY), NOT_READY);
        assert_eq!(hipPeekAtLastError(), SUCCESS);
    }
}

#[test]
fn last_error_is_per_thread() {
    // SAFETY: the other thread passes live locals; `probe` is only an address to look up.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        assert_eq!(hipDeviceEnablePeerAccess(0, 0), INVALID_DEVICE);
        let other = std::thread::spawn(|| {
            setup(r580());
            let before = hipPeekAtLastError();
            let mut base = null_mut();
            let mut size = 0;
            let probe = 0x10 as *mut c_void;
            let rc = hipMemGetAddressRange(&mut base, &mut size, probe);
            (before, rc, last_errors())
        })
        .join()
        .expect("thread");
        assert_eq!(other, (SUCCESS, NOT_FOUND, (NOT_FOUND, NOT_FOUND)));
        assert_eq!(
            last_errors(),
            (INVALID_DEVICE, INVALID_DEVICE),
            "untouched by the other thread"
        );
    }
}

#[test]
fn stream_create_with_flags_and_priority() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        let recorded = |s: hipStream_t| {
            crate::state::with(|d| {
                let s = d.streams.stream(s as usize as u64).expect("a live stream");
                (s.device, s.flags, s.priority)
            })
        };
        assert_eq!(hipSetDevice(1), SUCCESS);
        let mut s = null_mut();
        assert_eq!(hipStreamCreateWithFlags(&mut s, 0), SUCCESS);
        assert_eq!(recorded(s), (1, 0, 0), "on the current device");
        let mut nb = null_mut();
        assert_eq!(
            hipStreamCreateWithFlags(&mut nb, STREAM_NON_BLOCKING),
            SUCCESS
        );
        assert_eq!(recorded(nb), (1, STREAM_NON_BLOCKING, 0));
        let mut bad = 0x1 as hipStream_t;
        assert_eq!(hipStreamCreateWithFlags(&mut bad, 2), INVALID_VALUE);
        assert_eq!(bad, 0x1 as hipStream_t, "untouched on error");
        assert_eq!(hipStreamCreateWithFlags(null_mut(), 0), INVALID_VALUE);
        assert_eq!(hipSetDevice(0), SUCCESS);
        // The CLR's three levels: High (-1) at or below -1, Low (1) at or above 1, else Normal.
        for (asked, level) in [(-7, -1), (-1, -1), (0, 0), (1, 1), (9, 1)] {
            let mut p = null_mut();
            assert_eq!(
                hipStreamCreateWithPriority(&mut p, STREAM_NON_BLOCKING, asked),
                SUCCESS
            );
            assert_eq!(
                recorded(p),
                (0, STREAM_NON_BLOCKING, level),
                "priority {asked}"
            );
            assert_eq!(hipStreamDestroy(p), SUCCESS);
        }
        assert_eq!(hipStreamCreateWithPriority(&mut bad, 3, 0), INVALID_VALUE);
        assert_eq!(hipStreamCreateWithPriority(null_mut(), 0, 0), INVALID_VALUE);
        // Usable and destroyable like any stream; a HIP stream has no CUDA context.
        assert_eq!(hipStreamSynchronize(nb), SUCCESS);
        let mut ctx = null_mut();
        assert_eq!(cuStreamGetCtx(nb, &mut ctx), INVALID_HANDLE);
        assert_eq!(hipStreamDestroy(s), SUCCESS);
        assert_eq!(hipStreamDestroy(nb), SUCCESS);
        assert_eq!(hipStreamSynchronize(nb), INVALID_HANDLE);
    }
}

#[test]
fn mem_get_address_range() {
    // SAFETY: out-pointers are live locals or NULL where checked; `host`, NULL and the offsets
    // into `p` are only addresses to look up.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        assert_eq!(hipSetDevice(1), SUCCESS);
        let mut p = null_mut();
        assert_eq!(hipMalloc(&mut p, 10_000), SUCCESS);
        let at = |offset: usize| {
            let mut base = 0x1 as *mut c_void;
            let mut size = 7usize;
            let ptr = p.cast::<u8>().wrapping_add(offset).cast::<c_void>();
            let rc = hipMemGetAddressRange(&mut base, &mut size, ptr);
            (rc, base, size)
        };
        assert_eq!(at(0), (SUCCESS, p, 10_000));
        assert_eq!(at(5_000), (SUCCESS, p, 10_000));
        assert_eq!(at(9_999), (SUCCESS, p, 10_000));
        // One past the end lies in the same pages, but not in the allocation.
        assert_eq!(at(10_000), (NOT_FOUND, 0x1 as *mut c_void, 7));
        let host = [0u8; 8];
        let mut base = null_mut();
        let mut size = 0;
        assert_eq!(
            hipMemGetAddressRange(&mut base, &mut size, host.as_ptr() as *mut c_void),
            NOT_FOUND
        );
        assert_eq!(
            hipMemGetAddressRange(&mut base, &mut size, null_mut()),
            NOT_FOUND
        );
        assert_eq!(
            hipMemGetAddressRange(null_mut(), &mut size, p),
            INVALID_VALUE
        );
        assert_eq!(
            hipMemGetAddressRange(&mut base, null_mut(), p),
            INVALID_VALUE
        );
        assert_eq!(hipGetLastError(), INVALID_VALUE);
        assert_eq!(hipFree(p), SUCCESS);
        assert_eq!(hipSetDevice(0), SUCCESS);
    }
}
