use super::*;
use crate::hip_exports::*;
use std::ffi::CStr;

#[test]
fn peer_access_per_device() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    let mut can = -1;
    assert_eq!(unsafe { hipDeviceCanAccessPeer(&mut can, 0, 1) }, SUCCESS);
    assert_eq!(can, 1);
    assert_eq!(unsafe { hipDeviceCanAccessPeer(&mut can, 1, 1) }, SUCCESS);
    assert_eq!(can, 0);
    assert_eq!(
        unsafe { hipDeviceCanAccessPeer(&mut can, 0, 7) },
        INVALID_DEVICE
    );
    assert_eq!(
        unsafe { hipDeviceCanAccessPeer(null_mut(), 0, 1) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { hipSetDevice(0) }, SUCCESS);
    assert_eq!(unsafe { hipDeviceEnablePeerAccess(1, 1) }, INVALID_VALUE);
    assert_eq!(
        unsafe { hipDeviceEnablePeerAccess(0, 0) },
        INVALID_DEVICE,
        "self, as the CLR"
    );
    assert_eq!(unsafe { hipDeviceEnablePeerAccess(5, 0) }, INVALID_DEVICE);
    assert_eq!(unsafe { hipDeviceEnablePeerAccess(1, 0) }, SUCCESS);
    assert_eq!(
        unsafe { hipDeviceEnablePeerAccess(1, 0) },
        PEER_ACCESS_ALREADY_ENABLED
    );
    assert_eq!(unsafe { hipDeviceDisablePeerAccess(1) }, SUCCESS);
    assert_eq!(
        unsafe { hipDeviceDisablePeerAccess(1) },
        PEER_ACCESS_NOT_ENABLED
    );
    // hipDeviceReset ends the grants of the current device.
    assert_eq!(unsafe { hipDeviceEnablePeerAccess(1, 0) }, SUCCESS);
    assert_eq!(unsafe { hipDeviceReset() }, SUCCESS);
    assert_eq!(
        unsafe { hipDeviceDisablePeerAccess(1) },
        PEER_ACCESS_NOT_ENABLED
    );
}

#[test]
fn memory_copies_and_pointer_attributes() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    assert_eq!(unsafe { hipSetDevice(1) }, SUCCESS);
    let mut a = null_mut();
    assert_eq!(unsafe { hipMalloc(&mut a, 4096) }, SUCCESS);
    assert_eq!(unsafe { hipSetDevice(0) }, SUCCESS);
    let mut b = null_mut();
    assert_eq!(unsafe { hipMalloc(&mut b, 4096) }, SUCCESS);
    let data = [42u8; 128];
    assert_eq!(
        unsafe { hipMemcpy(b, data.as_ptr().cast(), 128, 1) },
        SUCCESS
    );
    assert_eq!(unsafe { hipMemcpyPeer(a, 1, b, 0, 128) }, SUCCESS);
    let mut back = [0u8; 128];
    assert_eq!(
        unsafe { hipMemcpy(back.as_mut_ptr().cast(), a, 128, 4) },
        SUCCESS,
        "default kind"
    );
    assert_eq!(back, data);
    assert_eq!(unsafe { hipMemcpyPeer(a, 2, b, 0, 128) }, INVALID_DEVICE);
    assert_eq!(unsafe { hipMemcpyPeer(a, 1, b, 0, 8192) }, INVALID_VALUE);
    assert_eq!(
        unsafe { hipMemcpyPeerAsync(a, 1, b, 0, 16, 0x57_0000_5555 as hipStream_t) },
        CONTEXT_IS_DESTROYED
    );
    assert_eq!(
        unsafe { hipMemcpyPeerAsync(a, 1, b, 0, 16, null_mut()) },
        SUCCESS
    );
    assert_eq!(
        unsafe { hipMemcpy(a, b, 16, 9) },
        21,
        "hipErrorInvalidMemcpyDirection"
    );
    let mut attrs = std::mem::MaybeUninit::<hipPointerAttribute_t>::zeroed();
    assert_eq!(
        unsafe { hipPointerGetAttributes(attrs.as_mut_ptr(), a) },
        SUCCESS
    );
    let attrs = unsafe { attrs.assume_init() };
    assert_eq!(
        (attrs.type_, attrs.device, attrs.is_managed),
        (hip_memory_type::DEVICE, 1, 0)
    );
    assert_eq!(attrs.device_pointer, a);
    let mut other = std::mem::MaybeUninit::<hipPointerAttribute_t>::zeroed();
    assert_eq!(
        unsafe { hipPointerGetAttributes(other.as_mut_ptr(), data.as_ptr().cast()) },
        INVALID_VALUE
    );
    assert_eq!(std::mem::size_of::<hipPointerAttribute_t>(), 32);
    assert_eq!(unsafe { hipFree(a) }, SUCCESS);
    assert_eq!(unsafe { hipFree(b) }, SUCCESS);
}

#[test]
fn ipc_errors_in_one_process() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    assert_eq!(unsafe { hipSetDevice(0) }, SUCCESS);
    let mut p = null_mut();
    assert_eq!(unsafe { hipMalloc(&mut p, 8192) }, SUCCESS);
    let mut h = hipIpcMemHandle_t { reserved: [0; 64] };
    assert_eq!(unsafe { hipIpcGetMemHandle(&mut h, p) }, SUCCESS);
    let mut interior = hipIpcMemHandle_t { reserved: [0; 64] };
    let inner = unsafe { p.cast::<u8>().add(4096) }.cast::<c_void>();
    assert_eq!(unsafe { hipIpcGetMemHandle(&mut interior, inner) }, SUCCESS);
    assert_ne!(h.reserved, interior.reserved, "HIP records the offset");
    assert_eq!(unsafe { hipIpcGetMemHandle(null_mut(), p) }, INVALID_VALUE);
    let mut out = null_mut();
    assert_eq!(
        unsafe { hipIpcOpenMemHandle(&mut out, h, 1) },
        INVALID_CONTEXT,
        "own process"
    );
    assert_eq!(
        unsafe { hipIpcOpenMemHandle(&mut out, h, 0) },
        INVALID_VALUE
    );
    assert_eq!(
        unsafe { hipIpcOpenMemHandle(null_mut(), h, 1) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { hipIpcCloseMemHandle(p) }, INVALID_VALUE);
    let mut e = null_mut();
    assert_eq!(unsafe { hipEventCreateWithFlags(&mut e, 0) }, SUCCESS);
    let mut eh = hipIpcEventHandle_t { reserved: [0; 64] };
    assert_eq!(
        unsafe { hipIpcGetEventHandle(&mut eh, e) },
        HIP_ERROR_INVALID_CONFIGURATION
    );
    assert_eq!(unsafe { hipEventDestroy(e) }, SUCCESS);
    assert_eq!(unsafe { hipEventDestroy(e) }, INVALID_HANDLE);
    assert_eq!(unsafe { hipFree(p) }, SUCCESS);
}

#[test]
fn devices_streams_and_names() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    let mut n = 0;
    assert_eq!(unsafe { hipGetDeviceCount(&mut n) }, SUCCESS);
    assert_eq!(n, 2);
    assert_eq!(unsafe { hipSetDevice(2) }, INVALID_DEVICE);
    let mut s = null_mut();
    assert_eq!(unsafe { hipStreamCreate(&mut s) }, SUCCESS);
    assert_eq!(unsafe { hipStreamSynchronize(s) }, SUCCESS);
    assert_eq!(unsafe { hipStreamDestroy(s) }, SUCCESS);
    assert_eq!(unsafe { hipStreamDestroy(s) }, INVALID_HANDLE);
    assert_eq!(unsafe { hipStreamSynchronize(s) }, INVALID_HANDLE);
    let name = unsafe { CStr::from_ptr(hipGetErrorName(704)) };
    assert_eq!(name.to_str(), Ok("hipErrorPeerAccessAlreadyEnabled"));
    let unknown = unsafe { CStr::from_ptr(hipGetErrorName(123_456)) };
    assert_eq!(unknown.to_str(), Ok("hipErrorUnknown"));
    assert!(!hipGetErrorString(1).is_null());
    let mut v = 0;
    assert_eq!(unsafe { hipRuntimeGetVersion(&mut v) }, SUCCESS);
    assert!(v >= 60_200_000);
}

#[test]
fn no_devices() {
    let _hip = HIP_LOCK.lock();
    set_config_without_devices();
    let mut n = -1;
    assert_eq!(unsafe { hipGetDeviceCount(&mut n) }, NO_DEVICE);
    assert_eq!(n, 0);
    let mut p = null_mut();
    assert_eq!(unsafe { hipMalloc(&mut p, 16) }, NO_DEVICE);
    assert_eq!(unsafe { cuInit(0) }, NO_DEVICE);
}

fn set_config_without_devices() {
    let mut config = r580();
    config.devices = 0;
    crate::config::set_test_config(config);
}

fn last_errors() -> (Code, Code) {
    let peek = unsafe { hipPeekAtLastError() };
    (peek, unsafe { hipGetLastError() })
}

#[test]
fn last_error_survives_success_until_get() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    // Start clean whatever ran on this thread before.
    unsafe { hipGetLastError() };
    assert_eq!(last_errors(), (SUCCESS, SUCCESS));
    assert_eq!(unsafe { hipSetDevice(7) }, INVALID_DEVICE);
    assert_eq!(unsafe { hipPeekAtLastError() }, INVALID_DEVICE);
    assert_eq!(
        unsafe { hipPeekAtLastError() },
        INVALID_DEVICE,
        "peek leaves it"
    );
    // Success does not reset it.
    let mut device = -1;
    assert_eq!(unsafe { hipGetDevice(&mut device) }, SUCCESS);
    assert_eq!(unsafe { hipSetDevice(0) }, SUCCESS);
    assert_eq!(unsafe { hipPeekAtLastError() }, INVALID_DEVICE);
    // A later error replaces it.
    let mut s = null_mut();
    assert_eq!(
        unsafe { hipStreamCreateWithFlags(&mut s, 4) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { hipPeekAtLastError() }, INVALID_VALUE);
    // Get returns it and resets it; it does not record what it returned.
    assert_eq!(unsafe { hipGetLastError() }, INVALID_VALUE);
    assert_eq!(unsafe { hipGetLastError() }, SUCCESS);
    assert_eq!(unsafe { hipPeekAtLastError() }, SUCCESS);
    // CUDA calls have no part in it.
    assert_eq!(
        unsafe { cuCtxEnablePeerAccess(null_mut(), 0) },
        INVALID_CONTEXT
    );
    assert_eq!(unsafe { hipPeekAtLastError() }, SUCCESS);
    // Errors of every kind of export count: one found through hipGetProcAddress too.
    let mut pfn = null_mut();
    let rc = unsafe { hipGetProcAddress(c"hipNoSuch".as_ptr(), &mut pfn, 602, 0, null_mut()) };
    assert_eq!(rc, INVALID_VALUE);
    assert_eq!(last_errors(), (INVALID_VALUE, INVALID_VALUE));
    // hipErrorNotReady is left out, as the CLR's HIP_RETURN does.
    assert_eq!(
        crate::hip_exports::record_last_error(HIP_ERROR_NOT_READY),
        HIP_ERROR_NOT_READY
    );
    assert_eq!(unsafe { hipPeekAtLastError() }, SUCCESS);
}

#[test]
fn last_error_is_per_thread() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    assert_eq!(unsafe { hipDeviceEnablePeerAccess(0, 0) }, INVALID_DEVICE);
    let other = std::thread::spawn(|| {
        setup(r580());
        let before = unsafe { hipPeekAtLastError() };
        let mut base = null_mut();
        let mut size = 0;
        let probe = 0x10 as *mut c_void;
        let rc = unsafe { hipMemGetAddressRange(&mut base, &mut size, probe) };
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

#[test]
fn stream_create_with_flags_and_priority() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    let recorded = |s: hipStream_t| {
        crate::state::with(|d| {
            let s = d.streams.stream(s as usize as u64).expect("a live stream");
            (s.device, s.flags, s.priority)
        })
    };
    assert_eq!(unsafe { hipSetDevice(1) }, SUCCESS);
    let mut s = null_mut();
    assert_eq!(unsafe { hipStreamCreateWithFlags(&mut s, 0) }, SUCCESS);
    assert_eq!(recorded(s), (1, 0, 0), "on the current device");
    let mut nb = null_mut();
    assert_eq!(
        unsafe { hipStreamCreateWithFlags(&mut nb, STREAM_NON_BLOCKING) },
        SUCCESS
    );
    assert_eq!(recorded(nb), (1, STREAM_NON_BLOCKING, 0));
    let mut bad = 0x1 as hipStream_t;
    assert_eq!(
        unsafe { hipStreamCreateWithFlags(&mut bad, 2) },
        INVALID_VALUE
    );
    assert_eq!(bad, 0x1 as hipStream_t, "untouched on error");
    assert_eq!(
        unsafe { hipStreamCreateWithFlags(null_mut(), 0) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { hipSetDevice(0) }, SUCCESS);
    // The CLR's three levels: High (-1) at or below -1, Low (1) at or above 1, else Normal.
    for (asked, level) in [(-7, -1), (-1, -1), (0, 0), (1, 1), (9, 1)] {
        let mut p = null_mut();
        assert_eq!(
            unsafe { hipStreamCreateWithPriority(&mut p, STREAM_NON_BLOCKING, asked) },
            SUCCESS
        );
        assert_eq!(
            recorded(p),
            (0, STREAM_NON_BLOCKING, level),
            "priority {asked}"
        );
        assert_eq!(unsafe { hipStreamDestroy(p) }, SUCCESS);
    }
    assert_eq!(
        unsafe { hipStreamCreateWithPriority(&mut bad, 3, 0) },
        INVALID_VALUE
    );
    assert_eq!(
        unsafe { hipStreamCreateWithPriority(null_mut(), 0, 0) },
        INVALID_VALUE
    );
    // Usable and destroyable like any stream; a HIP stream has no CUDA context.
    assert_eq!(unsafe { hipStreamSynchronize(nb) }, SUCCESS);
    let mut ctx = null_mut();
    assert_eq!(unsafe { cuStreamGetCtx(nb, &mut ctx) }, INVALID_HANDLE);
    assert_eq!(unsafe { hipStreamDestroy(s) }, SUCCESS);
    assert_eq!(unsafe { hipStreamDestroy(nb) }, SUCCESS);
    assert_eq!(unsafe { hipStreamSynchronize(nb) }, INVALID_HANDLE);
}

#[test]
fn mem_get_address_range() {
    let _hip = HIP_LOCK.lock();
    setup(r580());
    assert_eq!(unsafe { hipSetDevice(1) }, SUCCESS);
    let mut p = null_mut();
    assert_eq!(unsafe { hipMalloc(&mut p, 10_000) }, SUCCESS);
    let at = |offset: usize| {
        let mut base = 0x1 as *mut c_void;
        let mut size = 7usize;
        let ptr = unsafe { p.cast::<u8>().add(offset) }.cast::<c_void>();
        let rc = unsafe { hipMemGetAddressRange(&mut base, &mut size, ptr) };
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
        unsafe { hipMemGetAddressRange(&mut base, &mut size, host.as_ptr() as *mut c_void) },
        NOT_FOUND
    );
    assert_eq!(
        unsafe { hipMemGetAddressRange(&mut base, &mut size, null_mut()) },
        NOT_FOUND
    );
    assert_eq!(
        unsafe { hipMemGetAddressRange(null_mut(), &mut size, p) },
        INVALID_VALUE
    );
    assert_eq!(
        unsafe { hipMemGetAddressRange(&mut base, null_mut(), p) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { hipGetLastError() }, INVALID_VALUE);
    assert_eq!(unsafe { hipFree(p) }, SUCCESS);
    assert_eq!(unsafe { hipSetDevice(0) }, SUCCESS);
}
