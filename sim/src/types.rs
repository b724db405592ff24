//! C ABI types and numeric constants of the simulated CUDA driver and HIP runtime.
//!
//! Values are those of CUDA 13.5 `cuda.h` and HIP `hip_runtime_api.h`. Most `CUresult` and
//! `hipError_t` values coincide, so the shared model returns one `Code` that both APIs can pass
//! on; the few HIP-only codes are named `HIP_*`.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_uint, c_void};

pub use sharecheck_core::ffi::{
    hipError_t, hipIpcEventHandle_t, hipIpcMemHandle_t, CUipcEventHandle, CUipcMemHandle,
    CUlogicalEndpointProp, CUmulticastObjectProp, CUresult,
};

/// A result code of the model: a `CUresult`, and the `hipError_t` of the same number.
pub type Code = c_int;
/// What a model operation returns.
pub type Outcome<T = ()> = Result<T, Code>;

pub type CUdevice = c_int;
pub type CUdeviceptr = u64;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
/// Green contexts are not simulated: `cuStreamGetCtx_v2` always returns NULL for one.
pub type CUgreenCtx = *mut c_void;
pub type CUmemGenericAllocationHandle = u64;
pub type CUmemoryPool = *mut c_void;
pub type CUlogicalEndpointId = u32;
pub type hipStream_t = *mut c_void;
pub type hipEvent_t = *mut c_void;
pub type hipDeviceptr_t = *mut c_void;

// Result codes. Those sharecheck's shim also names come from `sharecheck_core::codes`, the one
// list shared by the crates; the ones below only the simulator returns.
pub use sharecheck_core::codes::*;

// CUresult values not in `sharecheck_core::codes` (hipError_t has the same numbers).
pub const OUT_OF_MEMORY: Code = 2;
pub const NOT_INITIALIZED: Code = 3;
pub const NO_DEVICE: Code = 100;
pub const MAP_FAILED: Code = 205;
pub const NOT_FOUND: Code = 500;
pub const NOT_PERMITTED: Code = 800;
pub const ILLEGAL_STATE: Code = 401;
pub const UNKNOWN: Code = 999;

// hipError_t values without a CUresult twin.
pub const HIP_ERROR_INVALID_CONFIGURATION: Code = 9;
pub const HIP_ERROR_INVALID_DEVICE_POINTER: Code = 17;

/// `CUdriverProcAddressQueryResult` / `hipDriverProcAddressQueryResult`.
pub const PROC_ADDRESS_SUCCESS: c_int = 0;
pub const PROC_ADDRESS_SYMBOL_NOT_FOUND: c_int = 1;
pub const PROC_ADDRESS_VERSION_NOT_SUFFICIENT: c_int = 2;

/// `CUdriverProcAddress_flags`.
pub const GET_PROC_ADDRESS_LEGACY_STREAM: u64 = 1;
pub const GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 2;

/// Special stream handles (`CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`; HIP has the same values).
pub const STREAM_LEGACY: u64 = 1;
pub const STREAM_PER_THREAD: u64 = 2;

/// `CUmemAttach_flags` / `hipMemAttach*`.
pub const MEM_ATTACH_GLOBAL: c_uint = 1;
pub const MEM_ATTACH_HOST: c_uint = 2;
pub const MEM_ATTACH_SINGLE: c_uint = 4;

/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`; ROCm 6 gives `hipIpcMemLazyEnablePeerAccess` the same value.
pub const IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 1;

/// `CUevent_flags` / `hipEvent*` flags.
pub const EVENT_BLOCKING_SYNC: c_uint = 1;
pub const EVENT_DISABLE_TIMING: c_uint = 2;
pub const EVENT_INTERPROCESS: c_uint = 4;
/// HIP-only event flags (`hipEventReleaseToDevice`, `hipEventReleaseToSystem`).
pub const HIP_EVENT_RELEASE_FLAGS: c_uint = 0x4000_0000 | 0x8000_0000;

/// `CU_STREAM_NON_BLOCKING` / `hipStreamNonBlocking`.
pub const STREAM_NON_BLOCKING: c_uint = 1;

/// `cuCtxGetStreamPriorityRange` of the H100/H200 the simulator models: greatest (-5) to least
/// (0); `cuStreamCreateWithPriority` clamps into it.
pub const CU_STREAM_PRIORITY_GREATEST: c_int = -5;
pub const CU_STREAM_PRIORITY_LEAST: c_int = 0;
/// `hip::Stream::Priority` of the CLR: High -1, Normal 0, Low 1; `hipStreamCreateWithPriority`
/// maps anything at or below High to High, at or above Low to Low, the rest to Normal.
pub const HIP_STREAM_PRIORITY_HIGH: c_int = -1;
pub const HIP_STREAM_PRIORITY_LOW: c_int = 1;

/// Every `CUctx_flags` bit (scheduling, MAP_HOST, LMEM_RESIZE_TO_MAX, COREDUMP, USER_COREDUMP,
/// SYNC_MEMOPS).
pub const CTX_FLAGS_MASK: c_uint = 0xFF;

/// `CUpointer_attribute` values the simulator answers.
pub mod pointer_attribute {
    pub const CONTEXT: i32 = 1;
    pub const MEMORY_TYPE: i32 = 2;
    pub const DEVICE_POINTER: i32 = 3;
    pub const HOST_POINTER: i32 = 4;
    pub const BUFFER_ID: i32 = 7;
    pub const IS_MANAGED: i32 = 8;
    pub const DEVICE_ORDINAL: i32 = 9;
    pub const IS_LEGACY_CUDA_IPC_CAPABLE: i32 = 10;
    pub const RANGE_START_ADDR: i32 = 11;
    pub const RANGE_SIZE: i32 = 12;
    pub const MAPPED: i32 = 13;
    pub const MEMPOOL_HANDLE: i32 = 17;
}

/// `CUmemorytype`: `CU_MEMORYTYPE_HOST`, `CU_MEMORYTYPE_DEVICE`.
pub const CU_MEMORYTYPE_HOST: c_uint = 1;
pub const CU_MEMORYTYPE_DEVICE: c_uint = 2;

/// `cuMemHostAlloc` flags: `CU_MEMHOSTALLOC_PORTABLE`, `_DEVICEMAP`, `_WRITECOMBINED`.
pub const MEMHOSTALLOC_PORTABLE: c_uint = 0x1;
pub const MEMHOSTALLOC_DEVICEMAP: c_uint = 0x2;
pub const MEMHOSTALLOC_WRITECOMBINED: c_uint = 0x4;

/// `hipHostMalloc` flags that the runtime checks (HIP 5.2 `hip_runtime_api.h`): asking for both
/// coherent and non-coherent memory is hipErrorInvalidValue.
pub const HIP_HOST_MALLOC_COHERENT: c_uint = 0x4000_0000;
pub const HIP_HOST_MALLOC_NON_COHERENT: c_uint = 0x8000_0000;

/// `cuMemAllocPitch`: the pitch is the row width rounded up to this (what current NVIDIA GPUs
/// return), and `ElementSizeBytes` must be one of these.
pub const PITCH_ALIGNMENT: u64 = 512;
pub const PITCH_ELEMENT_SIZES: [c_uint; 3] = [4, 8, 16];

/// `CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED`.
pub const MEM_ALLOCATION_TYPE_PINNED: c_uint = 1;
/// `CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE`.
pub const MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
/// `CU_MEM_LOCATION_TYPE_HOST_NUMA`: `id` is a host NUMA node.
pub const MEM_LOCATION_TYPE_HOST_NUMA: c_uint = 3;
/// `CUmemAllocationHandleType` bits.
pub const MEM_HANDLE_TYPE_POSIX_FD: c_uint = 1;
pub const MEM_HANDLE_TYPE_WIN32: c_uint = 2;
pub const MEM_HANDLE_TYPE_WIN32_KMT: c_uint = 4;
pub const MEM_HANDLE_TYPE_FABRIC: c_uint = 8;
/// `CUmemAccess_flags`.
pub const MEM_ACCESS_FLAGS_PROT_NONE: c_uint = 0;
pub const MEM_ACCESS_FLAGS_PROT_READ: c_uint = 1;
pub const MEM_ACCESS_FLAGS_PROT_READWRITE: c_uint = 3;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemLocation {
    pub type_: c_uint,
    pub id: c_int,
}

/// `CUmemAllocationProp` (32 bytes on LP64).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemAllocationProp {
    pub type_: c_uint,
    pub requested_handle_types: c_uint,
    pub location: CUmemLocation,
    pub win32_handle_meta_data: *mut c_void,
    pub compression_type: u8,
    pub gpu_direct_rdma_capable: u8,
    pub usage: u16,
    pub reserved: [u8; 4],
}

/// `CUmemPoolProps` (88 bytes on LP64).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemPoolProps {
    pub alloc_type: c_uint,
    pub handle_types: c_uint,
    pub location: CUmemLocation,
    pub win32_security_attributes: *mut c_void,
    pub max_size: usize,
    pub usage: u16,
    pub reserved: [u8; 54],
}

/// `CUmemPoolPtrExportData`: 64 opaque bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemPoolPtrExportData {
    pub reserved: [u8; 64],
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUmemAccessDesc {
    pub location: CUmemLocation,
    pub flags: c_uint,
}

/// `CUctxCreateParams` (CUDA 12.5+).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CUctxCreateParams {
    pub exec_affinity_params: *mut c_void,
    pub num_exec_affinity_params: c_int,
    pub cig_params: *mut c_void,
}

/// `hipMemcpyKind`.
pub mod memcpy_kind {
    pub const HOST_TO_HOST: i32 = 0;
    pub const HOST_TO_DEVICE: i32 = 1;
    pub const DEVICE_TO_HOST: i32 = 2;
    pub const DEVICE_TO_DEVICE: i32 = 3;
    pub const DEFAULT: i32 = 4;
}

/// ROCm 6.x `hipMemoryType` values (ROCm 5 numbered them differently).
pub mod hip_memory_type {
    pub const HOST: u32 = 1;
    pub const DEVICE: u32 = 2;
    pub const MANAGED: u32 = 3;
}

/// `hipPointerAttribute_t` in the ROCm 6.x layout: `type` first (ROCm 5 called it `memoryType`
/// and numbered the enum differently). Source: ROCm HIP `include/hip/hip_runtime_api.h` of the
/// 6.x releases, as rendered at rocm.docs.amd.com/projects/HIP/en/docs-6.1.5/doxygen/html/
/// structhip_pointer_attribute__t.html, and the ROCm 6 `hipMemoryType` enum
/// (Unregistered 0, Host 1, Device 2, Managed 3, Array 10, Unified 11).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hipPointerAttribute_t {
    pub type_: c_uint,
    pub device: c_int,
    pub device_pointer: *mut c_void,
    pub host_pointer: *mut c_void,
    pub is_managed: c_int,
    pub allocation_flags: c_uint,
}

/// `CUlogicalEndpointType`, `CUlogicalEndpointIpcHandleType`, `CUlogicalEndpointFlag`.
pub mod logical_endpoint {
    pub use sharecheck_core::ffi::{
        CU_LOGICAL_ENDPOINT_TYPE_MULTICAST as TYPE_MULTICAST,
        CU_LOGICAL_ENDPOINT_TYPE_UNICAST as TYPE_UNICAST,
    };
    pub const IPC_HANDLE_TYPE_NONE: u32 = 0;
    pub const IPC_HANDLE_TYPE_FABRIC: u32 = 1;
    pub const FLAG_COUNTED_OPS: u32 = 1;
    /// Size of `CUlogicalEndpointFabricHandle`.
    pub const FABRIC_HANDLE_SIZE: usize = 64;
}

/// Device attributes the model itself consults (`CUdevice_attribute`).
pub mod attribute {
    pub const UNIFIED_ADDRESSING: i32 = 41;
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const MANAGED_MEMORY: i32 = 83;
    pub const PAGEABLE_MEMORY_ACCESS: i32 = 88;
    pub const MEMORY_POOLS_SUPPORTED: i32 = 115;
    pub const IPC_EVENT_SUPPORTED: i32 = 125;
    pub const LOGICAL_ENDPOINT_UNICAST_SUPPORTED: i32 = 153;
    pub const LOGICAL_ENDPOINT_MULTICAST_SUPPORTED: i32 = 154;
    pub const LOGICAL_ENDPOINT_COUNTED_OPS_SUPPORTED: i32 = 155;
}

/// The first CUDA version with logical endpoints (13.3).
pub const LOGICAL_ENDPOINT_VERSION: i32 = 13030;

/// Who owns an allocation, stream or event: a CUDA context (by id), a HIP device, or (for
/// `cuMemAllocAsync` memory) a device's default memory pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    Context(u64),
    HipDevice(i32),
    /// "These memory allocations are not associated with any CUDA context" (`cuCtxDestroy`):
    /// they outlive every context and go only when freed.
    MemPool(i32),
}

/// HIP's names of the VMM and pool types the simulated runtime shares with CUDA's layouts (ROCm
/// 6: `hipMemAllocationProp` in CUDA's field order; HIP 5.2's header orders the same 32 bytes
/// otherwise).
pub type hipMemGenericAllocationHandle_t = *mut c_void;
pub type hipMemAllocationProp = CUmemAllocationProp;
pub type hipMemAccessDesc = CUmemAccessDesc;
pub type hipMemPoolProps = CUmemPoolProps;
pub type hipMemPoolPtrExportData = CUmemPoolPtrExportData;
pub type hipMemPool_t = *mut c_void;
