//! The one symbol table behind `cuGetProcAddress`, `cuGetProcAddress_v2` and `hipGetProcAddress`.
//!
//! Each row: the base name an application asks for, the CUDA version that introduced the ABI
//! (the `PFN_<base>_v<version>` typedefs of `cudaTypedefs.h`), whether it is the per-thread
//! default stream variant, and the export that implements it. Resolution follows what R580 did
//! in the probes of api-facts.md §2.1.

use crate::config::{config, Behaviour};
use crate::cuda_exports::*;
use crate::entry::exports;
use crate::hip_exports::{hip_exports, *};
use crate::types::{
    Code, Outcome, GET_PROC_ADDRESS_LEGACY_STREAM, GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
    INVALID_VALUE, PROC_ADDRESS_SUCCESS, PROC_ADDRESS_SYMBOL_NOT_FOUND,
    PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
};
use lookups::*;
use std::ffi::{c_char, c_int, c_void, CStr};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Cuda,
    Hip,
}

pub struct ProcEntry {
    pub api: Api,
    /// The name given to get-proc-address.
    pub base: &'static str,
    /// The CUDA version that introduced this ABI (0 for HIP).
    pub since: i32,
    /// The `_ptds` / `_ptsz` variant, chosen by the PER_THREAD_DEFAULT_STREAM flag.
    pub per_thread: bool,
    /// The exported ELF symbol.
    pub symbol: &'static str,
    address: fn() -> *mut c_void,
}

impl ProcEntry {
    /// The address of the simulator's own definition (linked -Bsymbolic: never a preloaded one).
    pub fn address(&self) -> *mut c_void {
        (self.address)()
    }
}

macro_rules! table {
    ($($api:ident $base:ident $since:literal $variant:ident => $symbol:ident;)*) => {
        pub static TABLE: &[ProcEntry] = &[$(
            ProcEntry {
                api: Api::$api,
                base: stringify!($base),
                since: $since,
                per_thread: table!(@per_thread $variant),
                symbol: stringify!($symbol),
                address: || $symbol as *mut c_void,
            },
        )*];
    };
    (@per_thread legacy) => { false };
    (@per_thread ptds) => { true };
    (@per_thread ptsz) => { true };
}

table! {
    Cuda cuInit 2000 legacy => cuInit;
    Cuda cuDriverGetVersion 2020 legacy => cuDriverGetVersion;
    Cuda cuDeviceGetCount 2000 legacy => cuDeviceGetCount;
    Cuda cuDeviceGet 2000 legacy => cuDeviceGet;
    Cuda cuDeviceGetAttribute 2000 legacy => cuDeviceGetAttribute;
    Cuda cuDeviceGetName 2000 legacy => cuDeviceGetName;
    Cuda cuDeviceGetUuid 9020 legacy => cuDeviceGetUuid;
    Cuda cuDeviceGetUuid 11040 legacy => cuDeviceGetUuid_v2;
    Cuda cuDevicePrimaryCtxRetain 7000 legacy => cuDevicePrimaryCtxRetain;
    Cuda cuDevicePrimaryCtxRelease 11000 legacy => cuDevicePrimaryCtxRelease_v2;
    Cuda cuDevicePrimaryCtxReset 11000 legacy => cuDevicePrimaryCtxReset_v2;
    Cuda cuDevicePrimaryCtxGetState 7000 legacy => cuDevicePrimaryCtxGetState;
    Cuda cuCtxCreate 2000 legacy => cuCtxCreate;
    Cuda cuCtxCreate 3020 legacy => cuCtxCreate_v2;
    Cuda cuCtxCreate 11040 legacy => cuCtxCreate_v3;
    Cuda cuCtxCreate 12050 legacy => cuCtxCreate_v4;
    Cuda cuCtxDestroy 4000 legacy => cuCtxDestroy_v2;
    Cuda cuCtxSetCurrent 4000 legacy => cuCtxSetCurrent;
    Cuda cuCtxGetCurrent 4000 legacy => cuCtxGetCurrent;
    Cuda cuCtxPushCurrent 4000 legacy => cuCtxPushCurrent_v2;
    Cuda cuCtxPopCurrent 4000 legacy => cuCtxPopCurrent_v2;
    Cuda cuCtxGetDevice 2000 legacy => cuCtxGetDevice;
    Cuda cuCtxGetDevice 13000 legacy => cuCtxGetDevice_v2;
    Cuda cuCtxSynchronize 2000 legacy => cuCtxSynchronize;
    Cuda cuCtxSynchronize 13000 legacy => cuCtxSynchronize_v2;
    Cuda cuMemAlloc 3020 legacy => cuMemAlloc_v2;
    Cuda cuMemAllocPitch 3020 legacy => cuMemAllocPitch_v2;
    Cuda cuMemFree 3020 legacy => cuMemFree_v2;
    Cuda cuMemAllocManaged 6000 legacy => cuMemAllocManaged;
    Cuda cuMemAllocHost 3020 legacy => cuMemAllocHost_v2;
    Cuda cuMemHostAlloc 2020 legacy => cuMemHostAlloc;
    Cuda cuMemFreeHost 2000 legacy => cuMemFreeHost;
    Cuda cuMemAllocAsync 11020 legacy => cuMemAllocAsync;
    Cuda cuMemAllocAsync 11020 ptsz => cuMemAllocAsync_ptsz;
    Cuda cuMemAllocFromPoolAsync 11020 legacy => cuMemAllocFromPoolAsync;
    Cuda cuMemAllocFromPoolAsync 11020 ptsz => cuMemAllocFromPoolAsync_ptsz;
    Cuda cuMemPoolCreate 11020 legacy => cuMemPoolCreate;
    Cuda cuMemPoolDestroy 11020 legacy => cuMemPoolDestroy;
    Cuda cuMemPoolSetAccess 11020 legacy => cuMemPoolSetAccess;
    Cuda cuMemPoolExportToShareableHandle 11020 legacy => cuMemPoolExportToShareableHandle;
    Cuda cuMemPoolImportFromShareableHandle 11020 legacy => cuMemPoolImportFromShareableHandle;
    Cuda cuMemPoolExportPointer 11020 legacy => cuMemPoolExportPointer;
    Cuda cuMemPoolImportPointer 11020 legacy => cuMemPoolImportPointer;
    Cuda cuMemFreeAsync 11020 legacy => cuMemFreeAsync;
    Cuda cuMemFreeAsync 11020 ptsz => cuMemFreeAsync_ptsz;
    Cuda cuMemGetAddressRange 3020 legacy => cuMemGetAddressRange_v2;
    Cuda cuMemcpyHtoD 3020 legacy => cuMemcpyHtoD_v2;
    Cuda cuMemcpyHtoD 7000 ptds => cuMemcpyHtoD_v2_ptds;
    Cuda cuMemcpyDtoD 3020 legacy => cuMemcpyDtoD_v2;
    Cuda cuMemcpyDtoD 7000 ptds => cuMemcpyDtoD_v2_ptds;
    Cuda cuMemsetD8 3020 legacy => cuMemsetD8_v2;
    Cuda cuMemsetD8 7000 ptds => cuMemsetD8_v2_ptds;
    Cuda cuMemcpyDtoH 3020 legacy => cuMemcpyDtoH_v2;
    Cuda cuMemcpyDtoH 7000 ptds => cuMemcpyDtoH_v2_ptds;
    Cuda cuPointerGetAttribute 4000 legacy => cuPointerGetAttribute;
    Cuda cuPointerGetAttributes 7000 legacy => cuPointerGetAttributes;
    Cuda cuStreamCreate 2000 legacy => cuStreamCreate;
    Cuda cuStreamCreateWithPriority 5050 legacy => cuStreamCreateWithPriority;
    Cuda cuStreamGetCtx 9020 legacy => cuStreamGetCtx;
    Cuda cuStreamGetCtx 9020 ptsz => cuStreamGetCtx_ptsz;
    Cuda cuStreamGetCtx 12050 legacy => cuStreamGetCtx_v2;
    Cuda cuStreamGetCtx 12050 ptsz => cuStreamGetCtx_v2_ptsz;
    Cuda cuStreamDestroy 4000 legacy => cuStreamDestroy_v2;
    Cuda cuStreamSynchronize 2000 legacy => cuStreamSynchronize;
    Cuda cuStreamSynchronize 7000 ptsz => cuStreamSynchronize_ptsz;
    Cuda cuStreamQuery 2000 legacy => cuStreamQuery;
    Cuda cuStreamQuery 7000 ptsz => cuStreamQuery_ptsz;
    Cuda cuEventCreate 2000 legacy => cuEventCreate;
    Cuda cuEventDestroy 4000 legacy => cuEventDestroy_v2;
    Cuda cuEventRecord 2000 legacy => cuEventRecord;
    Cuda cuEventRecord 7000 ptsz => cuEventRecord_ptsz;
    Cuda cuEventSynchronize 2000 legacy => cuEventSynchronize;
    Cuda cuEventQuery 2000 legacy => cuEventQuery;
    Cuda cuEventElapsedTime 2000 legacy => cuEventElapsedTime;
    Cuda cuEventElapsedTime 12080 legacy => cuEventElapsedTime_v2;
    Cuda cuStreamWaitEvent 3020 legacy => cuStreamWaitEvent;
    Cuda cuStreamWaitEvent 7000 ptsz => cuStreamWaitEvent_ptsz;
    Cuda cuMemCreate 10020 legacy => cuMemCreate;
    Cuda cuMemRelease 10020 legacy => cuMemRelease;
    Cuda cuMemGetAllocationGranularity 10020 legacy => cuMemGetAllocationGranularity;
    Cuda cuMemAddressReserve 10020 legacy => cuMemAddressReserve;
    Cuda cuMemAddressFree 10020 legacy => cuMemAddressFree;
    Cuda cuMemMap 10020 legacy => cuMemMap;
    Cuda cuMemUnmap 10020 legacy => cuMemUnmap;
    Cuda cuMemImportFromShareableHandle 10020 legacy => cuMemImportFromShareableHandle;
    Cuda cuMemExportToShareableHandle 10020 legacy => cuMemExportToShareableHandle;
    Cuda cuMulticastCreate 12010 legacy => cuMulticastCreate;
    Cuda cuMulticastAddDevice 12010 legacy => cuMulticastAddDevice;
    Cuda cuMulticastBindMem 12010 legacy => cuMulticastBindMem;
    Cuda cuMulticastBindMem 13010 legacy => cuMulticastBindMem_v2;
    Cuda cuMulticastBindAddr 12010 legacy => cuMulticastBindAddr;
    Cuda cuMulticastBindAddr 13010 legacy => cuMulticastBindAddr_v2;
    Cuda cuMulticastUnbind 12010 legacy => cuMulticastUnbind;
    Cuda cuMulticastGetGranularity 12010 legacy => cuMulticastGetGranularity;
    Cuda cuMemRetainAllocationHandle 11000 legacy => cuMemRetainAllocationHandle;
    Cuda cuMemSetAccess 10020 legacy => cuMemSetAccess;
    Cuda cuGetErrorName 6000 legacy => cuGetErrorName;
    Cuda cuGetErrorString 6000 legacy => cuGetErrorString;
    Cuda cuGetProcAddress 11030 legacy => cuGetProcAddress;
    Cuda cuGetProcAddress 12000 legacy => cuGetProcAddress_v2;
    // The interposed functions (sharecheck_core::functions); a test checks they agree.
    Cuda cuDeviceCanAccessPeer 4000 legacy => cuDeviceCanAccessPeer;
    Cuda cuCtxEnablePeerAccess 4000 legacy => cuCtxEnablePeerAccess;
    Cuda cuCtxDisablePeerAccess 4000 legacy => cuCtxDisablePeerAccess;
    Cuda cuMemcpyPeer 4000 legacy => cuMemcpyPeer;
    Cuda cuMemcpyPeer 7000 ptds => cuMemcpyPeer_ptds;
    Cuda cuMemcpyPeerAsync 4000 legacy => cuMemcpyPeerAsync;
    Cuda cuMemcpyPeerAsync 7000 ptsz => cuMemcpyPeerAsync_ptsz;
    Cuda cuMemcpyAsync 4000 legacy => cuMemcpyAsync;
    Cuda cuMemcpyAsync 7000 ptsz => cuMemcpyAsync_ptsz;
    Cuda cuMemcpyDtoDAsync 3020 legacy => cuMemcpyDtoDAsync_v2;
    Cuda cuMemcpyDtoDAsync 7000 ptsz => cuMemcpyDtoDAsync_v2_ptsz;
    Cuda cuMemcpyHtoDAsync 3020 legacy => cuMemcpyHtoDAsync_v2;
    Cuda cuMemcpyHtoDAsync 7000 ptsz => cuMemcpyHtoDAsync_v2_ptsz;
    Cuda cuMemcpyDtoHAsync 3020 legacy => cuMemcpyDtoHAsync_v2;
    Cuda cuMemcpyDtoHAsync 7000 ptsz => cuMemcpyDtoHAsync_v2_ptsz;
    Cuda cuMemsetD8Async 3020 legacy => cuMemsetD8Async;
    Cuda cuMemsetD8Async 7000 ptsz => cuMemsetD8Async_ptsz;
    Cuda cuMemsetD32Async 3020 legacy => cuMemsetD32Async;
    Cuda cuMemsetD32Async 7000 ptsz => cuMemsetD32Async_ptsz;
    Cuda cuStreamAttachMemAsync 6000 legacy => cuStreamAttachMemAsync;
    Cuda cuStreamAttachMemAsync 7000 ptsz => cuStreamAttachMemAsync_ptsz;
    Cuda cuIpcGetMemHandle 4010 legacy => cuIpcGetMemHandle;
    Cuda cuIpcOpenMemHandle 4010 legacy => cuIpcOpenMemHandle;
    Cuda cuIpcOpenMemHandle 11000 legacy => cuIpcOpenMemHandle_v2;
    Cuda cuIpcCloseMemHandle 4010 legacy => cuIpcCloseMemHandle;
    Cuda cuIpcGetEventHandle 4010 legacy => cuIpcGetEventHandle;
    Cuda cuIpcOpenEventHandle 4010 legacy => cuIpcOpenEventHandle;
    Cuda cuLogicalEndpointIdReserve 13030 legacy => cuLogicalEndpointIdReserve;
    Cuda cuLogicalEndpointIdRelease 13030 legacy => cuLogicalEndpointIdRelease;
    Cuda cuLogicalEndpointCreate 13030 legacy => cuLogicalEndpointCreate;
    Cuda cuLogicalEndpointAddDevice 13030 legacy => cuLogicalEndpointAddDevice;
    Cuda cuLogicalEndpointDestroy 13030 legacy => cuLogicalEndpointDestroy;
    Cuda cuLogicalEndpointBindAddr 13030 legacy => cuLogicalEndpointBindAddr;
    Cuda cuLogicalEndpointBindMem 13030 legacy => cuLogicalEndpointBindMem;
    Cuda cuLogicalEndpointUnbind 13030 legacy => cuLogicalEndpointUnbind;
    Cuda cuLogicalEndpointExport 13030 legacy => cuLogicalEndpointExport;
    Cuda cuLogicalEndpointImport 13030 legacy => cuLogicalEndpointImport;
    Cuda cuLogicalEndpointQuery 13030 legacy => cuLogicalEndpointQuery;
    Cuda cuLogicalEndpointGetLimits 13030 legacy => cuLogicalEndpointGetLimits;
    Hip hipInit 0 legacy => hipInit;
    Hip hipDriverGetVersion 0 legacy => hipDriverGetVersion;
    Hip hipRuntimeGetVersion 0 legacy => hipRuntimeGetVersion;
    Hip hipGetDeviceCount 0 legacy => hipGetDeviceCount;
    Hip hipSetDevice 0 legacy => hipSetDevice;
    Hip hipGetDevice 0 legacy => hipGetDevice;
    Hip hipDeviceReset 0 legacy => hipDeviceReset;
    Hip hipDeviceSynchronize 0 legacy => hipDeviceSynchronize;
    Hip hipMalloc 0 legacy => hipMalloc;
    Hip hipFree 0 legacy => hipFree;
    Hip hipMallocManaged 0 legacy => hipMallocManaged;
    Hip hipHostMalloc 0 legacy => hipHostMalloc;
    Hip hipHostFree 0 legacy => hipHostFree;
    Hip hipMallocAsync 0 legacy => hipMallocAsync;
    Hip hipFreeAsync 0 legacy => hipFreeAsync;
    Hip hipMemcpy 0 legacy => hipMemcpy;
    Hip hipStreamCreate 0 legacy => hipStreamCreate;
    Hip hipStreamCreateWithFlags 0 legacy => hipStreamCreateWithFlags;
    Hip hipStreamCreateWithPriority 0 legacy => hipStreamCreateWithPriority;
    Hip hipStreamDestroy 0 legacy => hipStreamDestroy;
    Hip hipStreamSynchronize 0 legacy => hipStreamSynchronize;
    Hip hipEventCreate 0 legacy => hipEventCreate;
    Hip hipEventCreateWithFlags 0 legacy => hipEventCreateWithFlags;
    Hip hipEventDestroy 0 legacy => hipEventDestroy;
    Hip hipPointerGetAttributes 0 legacy => hipPointerGetAttributes;
    Hip hipMemGetAddressRange 0 legacy => hipMemGetAddressRange;
    Hip hipGetLastError 0 legacy => hipGetLastError;
    Hip hipPeekAtLastError 0 legacy => hipPeekAtLastError;
    Hip hipGetErrorName 0 legacy => hipGetErrorName;
    Hip hipGetErrorString 0 legacy => hipGetErrorString;
    Hip hipGetProcAddress 0 legacy => hipGetProcAddress;
    Hip hipDeviceCanAccessPeer 0 legacy => hipDeviceCanAccessPeer;
    Hip hipDeviceGetUuid 0 legacy => hipDeviceGetUuid;
    Hip hipDeviceEnablePeerAccess 0 legacy => hipDeviceEnablePeerAccess;
    Hip hipDeviceDisablePeerAccess 0 legacy => hipDeviceDisablePeerAccess;
    Hip hipMemcpyPeer 0 legacy => hipMemcpyPeer;
    Hip hipMemcpyPeerAsync 0 legacy => hipMemcpyPeerAsync;
    Hip hipIpcGetMemHandle 0 legacy => hipIpcGetMemHandle;
    Hip hipIpcOpenMemHandle 0 legacy => hipIpcOpenMemHandle;
    Hip hipIpcCloseMemHandle 0 legacy => hipIpcCloseMemHandle;
    Hip hipMemCreate 0 legacy => hipMemCreate;
    Hip hipMemRelease 0 legacy => hipMemRelease;
    Hip hipMemRetainAllocationHandle 0 legacy => hipMemRetainAllocationHandle;
    Hip hipMemExportToShareableHandle 0 legacy => hipMemExportToShareableHandle;
    Hip hipMemImportFromShareableHandle 0 legacy => hipMemImportFromShareableHandle;
    Hip hipMemGetAllocationGranularity 0 legacy => hipMemGetAllocationGranularity;
    Hip hipMemAddressReserve 0 legacy => hipMemAddressReserve;
    Hip hipMemAddressFree 0 legacy => hipMemAddressFree;
    Hip hipMemMap 0 legacy => hipMemMap;
    Hip hipMemUnmap 0 legacy => hipMemUnmap;
    Hip hipMemSetAccess 0 legacy => hipMemSetAccess;
    Hip hipMemPoolCreate 0 legacy => hipMemPoolCreate;
    Hip hipMemPoolDestroy 0 legacy => hipMemPoolDestroy;
    Hip hipMallocFromPoolAsync 0 legacy => hipMallocFromPoolAsync;
    Hip hipMemPoolExportToShareableHandle 0 legacy => hipMemPoolExportToShareableHandle;
    Hip hipMemPoolImportFromShareableHandle 0 legacy => hipMemPoolImportFromShareableHandle;
    Hip hipMemPoolExportPointer 0 legacy => hipMemPoolExportPointer;
    Hip hipMemPoolImportPointer 0 legacy => hipMemPoolImportPointer;
    Hip hipIpcGetEventHandle 0 legacy => hipIpcGetEventHandle;
    Hip hipIpcOpenEventHandle 0 legacy => hipIpcOpenEventHandle;
    Hip hipStreamAttachMemAsync 0 legacy => hipStreamAttachMemAsync;
}

/// What a CUDA lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    Found(&'static ProcEntry),
    /// No such symbol in this driver (status 1).
    NotFound,
    /// The symbol exists, but not for this version and flags (status 2).
    VersionNotSufficient,
}

impl PartialEq for ProcEntry {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}
impl Eq for ProcEntry {}
impl std::fmt::Debug for ProcEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.symbol)
    }
}

/// Resolves a CUDA base name for `version` and `flags` (flags already validated).
pub fn resolve_cuda(symbol: &[u8], version: i32, flags: u64) -> Resolution {
    let driver_version = config().driver_version;
    // A symbol newer than the simulated driver does not exist in it.
    let rows: Vec<&'static ProcEntry> = TABLE
        .iter()
        .filter(|e| e.api == Api::Cuda && e.base.as_bytes() == symbol && e.since <= driver_version)
        .collect();
    if rows.is_empty() {
        return Resolution::NotFound;
    }
    let newest = |per_thread: bool| {
        rows.iter()
            .copied()
            .filter(|e| e.per_thread == per_thread && e.since <= version)
            .max_by_key(|e| e.since)
    };
    let wants_per_thread = flags & GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0;
    let has_per_thread = rows.iter().any(|e| e.per_thread);
    let pick = if wants_per_thread && has_per_thread {
        // R580: asking with the PTDS flag below the per-thread variant's version (7000) gives
        // NULL/VERSION_NOT_SUFFICIENT. The documentation: "If a per-thread version is not found,
        // the API will return the legacy version".
        newest(true).or_else(|| match config().behaviour {
            Behaviour::R580 => None,
            Behaviour::Documented => newest(false),
        })
    } else {
        newest(false)
    };
    pick.map_or(Resolution::VersionNotSufficient, Resolution::Found)
}

/// `cuGetProcAddress` / `cuGetProcAddress_v2`; `status` may be NULL.
///
/// # Safety
/// `symbol` is NULL or a C string; `pfn` and `status` are NULL or writable.
pub unsafe fn cuda_get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> Outcome {
    if pfn.is_null() || symbol.is_null() {
        return Err(INVALID_VALUE);
    }
    if flags > (GET_PROC_ADDRESS_LEGACY_STREAM | GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
        return Err(INVALID_VALUE);
    }
    // Observed on R580 (and in the newer documentation): a version above the driver's is
    // INVALID_VALUE, and the status is left as it was.
    if version > config().driver_version {
        return Err(INVALID_VALUE);
    }
    // SAFETY: `symbol` is not NULL (checked above) and, by this function's contract, a C string.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let (address, state) = match resolve_cuda(name, version, flags) {
        Resolution::Found(e) => (e.address(), PROC_ADDRESS_SUCCESS),
        Resolution::NotFound => (std::ptr::null_mut(), PROC_ADDRESS_SYMBOL_NOT_FOUND),
        Resolution::VersionNotSufficient => {
            (std::ptr::null_mut(), PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
        }
    };
    // SAFETY: `pfn` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pfn = address };
    if !status.is_null() {
        // SAFETY: `status` is not NULL and, by this function's contract, writable.
        unsafe { *status = state };
    }
    Ok(())
}

/// `hipGetProcAddress` (ROCm 6.2+): unlike CUDA, a missing symbol is an error.
///
/// # Safety
/// As [`cuda_get_proc_address`].
pub unsafe fn hip_get_proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    flags: u64,
    status: *mut c_int,
) -> Result<(), Code> {
    // SAFETY: `symbol` is not NULL (checked first) and, by this function's contract, a C string,
    // so its first byte is readable.
    if symbol.is_null() || pfn.is_null() || unsafe { *symbol } == 0 {
        return Err(INVALID_VALUE);
    }
    if flags > GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM {
        return Err(INVALID_VALUE);
    }
    // SAFETY: `symbol` is not NULL (checked above) and, by this function's contract, a C string.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let found = TABLE
        .iter()
        .find(|e| e.api == Api::Hip && e.base.as_bytes() == name);
    let (address, state) = match found {
        Some(e) => (e.address(), PROC_ADDRESS_SUCCESS),
        None => (std::ptr::null_mut(), PROC_ADDRESS_SYMBOL_NOT_FOUND),
    };
    // SAFETY: `pfn` is not NULL (checked above) and, by this function's contract, writable.
    unsafe { *pfn = address };
    if !status.is_null() {
        // SAFETY: `status` is not NULL and, by this function's contract, writable.
        unsafe { *status = state };
    }
    if found.is_none() {
        return Err(INVALID_VALUE);
    }
    Ok(())
}

// The lookups themselves are exports, served from the table above (the C parameter names).
// The C parameter names; the safety contract of each is the vendor's documentation of it.
#[allow(non_snake_case, clippy::missing_safety_doc)]
pub mod lookups {
    use super::*;
    exports! {
        table CUDA_LOOKUPS for "cuda";

        fn cuGetProcAddress(symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64) {
            // SAFETY: `symbol` is NULL or a C string and `pfn` NULL or writable (the contract of
            // `cuGetProcAddress`); v1 has no status to write.
            unsafe { cuda_get_proc_address(symbol, pfn, cudaVersion, flags, std::ptr::null_mut()) }
        }

        fn cuGetProcAddress_v2(symbol: *const c_char, pfn: *mut *mut c_void, cudaVersion: c_int, flags: u64, symbolStatus: *mut c_int) {
            // SAFETY: `symbol` is NULL or a C string, `pfn` and `symbolStatus` NULL or writable (the
            // contract of `cuGetProcAddress_v2`).
            unsafe { cuda_get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus) }
        }
    }

    hip_exports! {
        table HIP_LOOKUPS for "hip";

        fn hipGetProcAddress(symbol: *const c_char, pfn: *mut *mut c_void, hipVersion: c_int, flags: u64, symbolStatus: *mut c_int) {
            // Every simulated HIP function exists in all versions the table serves.
            let _ = hipVersion;
            // SAFETY: `symbol` is NULL or a C string, `pfn` and `symbolStatus` NULL or writable (the
            // contract of `hipGetProcAddress`).
            unsafe { hip_get_proc_address(symbol, pfn, flags, symbolStatus) }
        }
    }
}
