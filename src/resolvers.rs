//! `cuGetProcAddress` (v1 and v2) and `hipGetProcAddress`.
//!
//! Resolve first, then substitute: the real resolver is called with exactly the caller's
//! arguments, its result code and status are returned unchanged, and only a non-NULL pointer is
//! replaced, by the wrapper of the symbol the driver actually returned (legacy vs `_ptds`/`_ptsz`,
//! v1 vs `_v2` IPC open), never by the name that was asked for. This is the path the CUDA runtime
//! takes to every driver function.

#![allow(non_snake_case)]

use crate::exports::wrapper_address;
use crate::guard::Guard;
use crate::loader::{self, NamedSlot};
use libc::{c_char, c_int, c_void};
use sharecheck_core::codes::NOT_SUPPORTED;
use sharecheck_core::ffi::CUresult;
use sharecheck_core::functions::{Api, FUNCTIONS};

type CuGetProcAddressV1 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
type CuGetProcAddressV2 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;
type HipGetProcAddress =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_int;

/// The real resolvers, in one place: the `dlsym` override and substitution both use this table.
static RESOLVERS: [NamedSlot; 3] = [
    NamedSlot::new(Api::Cuda, c"cuGetProcAddress"),
    NamedSlot::new(Api::Cuda, c"cuGetProcAddress_v2"),
    NamedSlot::new(Api::Hip, c"hipGetProcAddress"),
];
const CU_V1: usize = 0;
const CU_V2: usize = 1;
const HIP: usize = 2;

/// The shim's own resolver standing in for `RESOLVERS[index]`.
fn wrapper_of(index: usize) -> usize {
    match index {
        CU_V1 => cuGetProcAddress as *const () as usize,
        CU_V2 => cuGetProcAddress_v2 as *const () as usize,
        _ => hipGetProcAddress as *const () as usize,
    }
}

/// The API of a resolver the shim wraps, by exported name.
pub fn resolver_api(name: &[u8]) -> Option<Api> {
    RESOLVERS
        .iter()
        .find(|r| r.symbol().to_bytes() == name)
        .map(NamedSlot::api)
}

/// The shim's replacement for a real driver function pointer, if it wraps that function.
pub fn substitute(api: Api, real: usize) -> Option<usize> {
    if let Some(index) = RESOLVERS
        .iter()
        .position(|r| r.api() == api && r.get() == Some(real))
    {
        return Some(wrapper_of(index));
    }
    FUNCTIONS
        .iter()
        .filter(|f| f.api == api && sharecheck_core::table::is_wrapped(f.id))
        .find(|f| loader::real_function(f.id) == Some(real))
        .map(|f| wrapper_address(f.id))
}

/// The real resolver at `index`, or `None` (missing, or the lookup itself failed).
fn real_resolver(index: usize) -> Option<usize> {
    crate::guard::shielded(None, || RESOLVERS[index].get())
}

/// Replaces `*pfn` after a successful resolution, when it is a function the shim wraps.
///
/// # Safety
/// `pfn` is NULL or was just written by the real resolver, which returned success: it points to a
/// writable `void *` holding the driver's answer. (This is the only place the shim reads or
/// writes it; on failure the driver may not have written it, and it is left alone.)
unsafe fn substitute_result(api: Api, pfn: *mut *mut c_void) {
    if pfn.is_null() {
        return;
    }
    // SAFETY: non-NULL, and the resolver wrote a function pointer there (this function's contract).
    let real = unsafe { *pfn } as usize;
    if real == 0 {
        return;
    }
    // A panic here must not cross the C ABI: the caller then keeps the driver's own pointer.
    if let Some(wrapper) = crate::guard::shielded(None, || substitute(api, real)) {
        // SAFETY: the same `void *` the resolver just wrote (this function's contract); the
        // wrapper has the prototype of the function the driver returned there.
        unsafe { *pfn = wrapper as *mut c_void };
    }
}

/// The 4-argument resolver of CUDA 11.3 (`PFN_cuGetProcAddress_v11030`).
///
/// # Safety
/// The driver's documented contract for `cuGetProcAddress`.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cudaVersion: c_int,
    flags: u64,
) -> CUresult {
    let Some(real) = real_resolver(CU_V1) else {
        return NOT_SUPPORTED;
    };
    // SAFETY: `real` is the driver's export named `cuGetProcAddress`, whose prototype is
    // `PFN_cuGetProcAddress_v11030` of cuda.h, spelled by `CuGetProcAddressV1`.
    let real: CuGetProcAddressV1 = unsafe { std::mem::transmute(real) };
    let _guard = Guard::enter_outside();
    // SAFETY: the caller's own arguments, unchanged: its obligations are the driver's documented
    // contract for this call.
    let rc = unsafe { real(symbol, pfn, cudaVersion, flags) };
    if rc == 0 && _guard.is_some() {
        // SAFETY: the driver returned CUDA_SUCCESS, so it wrote the function pointer to `*pfn`.
        unsafe { substitute_result(Api::Cuda, pfn) };
    }
    rc
}

/// The 5-argument resolver of CUDA 12 and later (`PFN_cuGetProcAddress_v12000`).
///
/// # Safety
/// The driver's documented contract for `cuGetProcAddress_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cudaVersion: c_int,
    flags: u64,
    symbolStatus: *mut c_int,
) -> CUresult {
    let Some(real) = real_resolver(CU_V2) else {
        return NOT_SUPPORTED;
    };
    // SAFETY: `real` is the driver's export named `cuGetProcAddress_v2`, whose prototype is
    // `PFN_cuGetProcAddress_v12000` of cuda.h, spelled by `CuGetProcAddressV2`.
    let real: CuGetProcAddressV2 = unsafe { std::mem::transmute(real) };
    let _guard = Guard::enter_outside();
    // SAFETY: the caller's own arguments, unchanged: its obligations are the driver's documented
    // contract for this call.
    let rc = unsafe { real(symbol, pfn, cudaVersion, flags, symbolStatus) };
    if rc == 0 && _guard.is_some() {
        // SAFETY: the driver returned CUDA_SUCCESS, so it wrote the function pointer to `*pfn`.
        unsafe { substitute_result(Api::Cuda, pfn) };
    }
    rc
}

/// HIP's resolver (ROCm 6.2 and later).
///
/// # Safety
/// The runtime's documented contract for `hipGetProcAddress`.
#[no_mangle]
pub unsafe extern "C" fn hipGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hipVersion: c_int,
    flags: u64,
    symbolStatus: *mut c_int,
) -> c_int {
    let Some(real) = real_resolver(HIP) else {
        return NOT_SUPPORTED;
    };
    // SAFETY: `real` is the runtime's export named `hipGetProcAddress`, whose prototype in
    // hip_runtime_api.h (`const char *, void **, int, uint64_t,
    // hipDriverProcAddressQueryResult *` -> `hipError_t`) is spelled by `HipGetProcAddress`.
    let real: HipGetProcAddress = unsafe { std::mem::transmute(real) };
    let _guard = Guard::enter_outside();
    // SAFETY: the caller's own arguments, unchanged: its obligations are the runtime's documented
    // contract for this call.
    let rc = unsafe { real(symbol, pfn, hipVersion, flags, symbolStatus) };
    if rc == 0 && _guard.is_some() {
        // SAFETY: the runtime returned hipSuccess, so it wrote the function pointer to `*pfn`.
        unsafe { substitute_result(Api::Hip, pfn) };
    }
    rc
}
