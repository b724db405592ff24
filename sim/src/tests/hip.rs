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
