//! The one declaration list of interposed functions.
//!
//! Each line of [`interposed_functions!`] declares one exported symbol: its API, the exact ELF
//! symbol, the base name `cuGetProcAddress` is asked for, the CUDA version that introduced this
//! ABI (the `PFN_<base>_v<version>[_ptds|_ptsz]` typedef of `cudaTypedefs.h`), and its arguments.
//! From that line come the shim's export, its `dlsym` and get-proc-address lookups, its trace
//! record, the argument struct rules are written against, and the ABI check against the headers.
//! Adding a function is adding a line.

use crate::ffi::{ArgValue, Outcome};
use crate::json::{Fingerprinter, JsonOut};

/// Calls `$callback!` with the full declaration list.
///
/// Line syntax: `api symbol [base version variant] (name: Type, ...);` where `variant` is
/// `legacy`, `ptds` or `ptsz`. Types are those of [`crate::ffi`]; the callback's module must have
/// them in scope.
#[macro_export]
macro_rules! interposed_functions {
    ($callback:ident) => {
        $callback! {
            // Peer access (CUDA Driver API 3.21 "Peer Context Memory Access").
            cuda cuDeviceCanAccessPeer [cuDeviceCanAccessPeer 4000 legacy] (canAccessPeer: Out<Int>, dev: CUdevice, peerDev: CUdevice);
            cuda cuCtxEnablePeerAccess [cuCtxEnablePeerAccess 4000 legacy] (peerContext: CUcontext, Flags: ReservedFlags);
            cuda cuCtxDisablePeerAccess [cuCtxDisablePeerAccess 4000 legacy] (peerContext: CUcontext);
            cuda cuMemcpyPeer [cuMemcpyPeer 4000 legacy] (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: Size);
            cuda cuMemcpyPeer_ptds [cuMemcpyPeer 7000 ptds] (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: Size);
            cuda cuMemcpyPeerAsync [cuMemcpyPeerAsync 4000 legacy] (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyPeerAsync_ptsz [cuMemcpyPeerAsync 7000 ptsz] (dstDevice: CUdeviceptr, dstContext: CUcontext, srcDevice: CUdeviceptr, srcContext: CUcontext, ByteCount: Size, hStream: CUstream);
            // Stream attach.
            cuda cuStreamAttachMemAsync [cuStreamAttachMemAsync 6000 legacy] (hStream: CUstream, dptr: CUdeviceptr, length: Size, flags: AttachFlags);
            cuda cuStreamAttachMemAsync_ptsz [cuStreamAttachMemAsync 7000 ptsz] (hStream: CUstream, dptr: CUdeviceptr, length: Size, flags: AttachFlags);
            // IPC.
            cuda cuIpcGetMemHandle [cuIpcGetMemHandle 4010 legacy] (pHandle: Out<CUipcMemHandle>, dptr: CUdeviceptr);
            cuda cuIpcOpenMemHandle [cuIpcOpenMemHandle 4010 legacy] (pdptr: Out<CUdeviceptr>, handle: CUipcMemHandle, Flags: IpcMemFlags);
            cuda cuIpcOpenMemHandle_v2 [cuIpcOpenMemHandle 11000 legacy] (pdptr: Out<CUdeviceptr>, handle: CUipcMemHandle, Flags: IpcMemFlags);
            cuda cuIpcCloseMemHandle [cuIpcCloseMemHandle 4010 legacy] (dptr: CUdeviceptr);
            cuda cuIpcGetEventHandle [cuIpcGetEventHandle 4010 legacy] (pHandle: Out<CUipcEventHandle>, event: CUevent);
            cuda cuIpcOpenEventHandle [cuIpcOpenEventHandle 4010 legacy] (phEvent: Out<CUevent>, handle: CUipcEventHandle);
            // Logical endpoints (CUDA 13.3).
            cuda cuLogicalEndpointIdReserve [cuLogicalEndpointIdReserve 13030 legacy] (baseLeId: Out<CUlogicalEndpointId>, count: Count32);
            cuda cuLogicalEndpointIdRelease [cuLogicalEndpointIdRelease 13030 legacy] (baseLeId: CUlogicalEndpointId, count: Count32);
            cuda cuLogicalEndpointCreate [cuLogicalEndpointCreate 13030 legacy] (leId: CUlogicalEndpointId, prop: LogicalEndpointPropPtr);
            cuda cuLogicalEndpointAddDevice [cuLogicalEndpointAddDevice 13030 legacy] (leId: CUlogicalEndpointId, dev: CUdevice);
            cuda cuLogicalEndpointDestroy [cuLogicalEndpointDestroy 13030 legacy] (leId: CUlogicalEndpointId);
            cuda cuLogicalEndpointBindAddr [cuLogicalEndpointBindAddr 13030 legacy] (leId: CUlogicalEndpointId, dev: CUdevice, offset: U64, ptr: VoidPtr, size: U64, flags: ReservedFlags64);
            cuda cuLogicalEndpointBindMem [cuLogicalEndpointBindMem 13030 legacy] (leId: CUlogicalEndpointId, dev: CUdevice, offset: U64, memHandle: CUmemGenericAllocationHandle, memOffset: U64, size: U64, flags: ReservedFlags64);
            cuda cuLogicalEndpointUnbind [cuLogicalEndpointUnbind 13030 legacy] (leId: CUlogicalEndpointId, dev: CUdevice, offset: U64, size: U64);
            cuda cuLogicalEndpointExport [cuLogicalEndpointExport 13030 legacy] (handle: LogicalEndpointHandlePtr, leId: CUlogicalEndpointId, handleType: CUlogicalEndpointIpcHandleType);
            cuda cuLogicalEndpointImport [cuLogicalEndpointImport 13030 legacy] (leId: CUlogicalEndpointId, handle: LogicalEndpointHandleConstPtr, handleType: CUlogicalEndpointIpcHandleType);
            cuda cuLogicalEndpointQuery [cuLogicalEndpointQuery 13030 legacy] (leId: CUlogicalEndpointId, count: Count32, queryStatus: Out<Int>);
            cuda cuLogicalEndpointGetLimits [cuLogicalEndpointGetLimits 13030 legacy] (bindAlignment: Out<U64>, maxSize: Out<U64>, prop: LogicalEndpointPropPtr);
            // Lifecycle, observed so the rules' tracked state ends with what it belongs to.
            cuda cuCtxDestroy_v2 [cuCtxDestroy 4000 legacy] (ctx: CUcontext);
            cuda cuDevicePrimaryCtxRelease_v2 [cuDevicePrimaryCtxRelease 11000 legacy] (dev: CUdevice);
            cuda cuDevicePrimaryCtxReset_v2 [cuDevicePrimaryCtxReset 11000 legacy] (dev: CUdevice);
            cuda cuStreamDestroy_v2 [cuStreamDestroy 4000 legacy] (hStream: CUstream);
            // HIP peer access, IPC and attach (version node hip_4.2).
            hip hipDeviceCanAccessPeer [hipDeviceCanAccessPeer 0 legacy] (canAccessPeer: Out<Int>, deviceId: HipDevice, peerDeviceId: HipDevice);
            hip hipDeviceEnablePeerAccess [hipDeviceEnablePeerAccess 0 legacy] (peerDeviceId: HipDevice, flags: ReservedFlags);
            hip hipDeviceDisablePeerAccess [hipDeviceDisablePeerAccess 0 legacy] (peerDeviceId: HipDevice);
            hip hipMemcpyPeer [hipMemcpyPeer 0 legacy] (dst: VoidPtr, dstDeviceId: HipDevice, src: ConstVoidPtr, srcDeviceId: HipDevice, sizeBytes: Size);
            hip hipMemcpyPeerAsync [hipMemcpyPeerAsync 0 legacy] (dst: VoidPtr, dstDeviceId: HipDevice, src: ConstVoidPtr, srcDevice: HipDevice, sizeBytes: Size, stream: hipStream_t);
            hip hipIpcGetMemHandle [hipIpcGetMemHandle 0 legacy] (handle: Out<hipIpcMemHandle_t>, devPtr: VoidPtr);
            hip hipIpcOpenMemHandle [hipIpcOpenMemHandle 0 legacy] (devPtr: Out<VoidPtrOut>, handle: hipIpcMemHandle_t, flags: HipIpcMemFlags);
            hip hipIpcCloseMemHandle [hipIpcCloseMemHandle 0 legacy] (devPtr: VoidPtr);
            hip hipIpcGetEventHandle [hipIpcGetEventHandle 0 legacy] (handle: Out<hipIpcEventHandle_t>, event: hipEvent_t);
            hip hipIpcOpenEventHandle [hipIpcOpenEventHandle 0 legacy] (event: Out<hipEvent_t>, handle: hipIpcEventHandle_t);
            hip hipStreamAttachMemAsync [hipStreamAttachMemAsync 0 legacy] (stream: hipStream_t, dev_ptr: VoidPtr, length: Size, flags: HipAttachFlags);
            // HIP lifecycle.
            hip hipDeviceReset [hipDeviceReset 0 legacy] ();
            // Virtual memory management (HIP 5.2: "beta").
            hip hipMemCreate [hipMemCreate 0 legacy observed] (handle: Out<hipMemGenericAllocationHandle_t>, size: Size, prop: HipMemAllocationPropPtr, flags: ReservedFlags64);
            hip hipMemRelease [hipMemRelease 0 legacy observed] (handle: hipMemGenericAllocationHandle_t);
            hip hipMemRetainAllocationHandle [hipMemRetainAllocationHandle 0 legacy observed] (handle: Out<hipMemGenericAllocationHandle_t>, addr: VoidPtr);
            hip hipMemExportToShareableHandle [hipMemExportToShareableHandle 0 legacy observed] (shareableHandle: ShareableHandleOut, handle: hipMemGenericAllocationHandle_t, handleType: HipMemHandleTypes, flags: ReservedFlags64);
            hip hipMemImportFromShareableHandle [hipMemImportFromShareableHandle 0 legacy observed] (handle: Out<hipMemGenericAllocationHandle_t>, osHandle: ShareableHandleIn, shHandleType: HipMemHandleTypes);
            hip hipMemAddressReserve [hipMemAddressReserve 0 legacy observed] (ptr: Out<VoidPtrOut>, size: Size, alignment: Size, addr: VoidPtr, flags: ReservedFlags64);
            hip hipMemAddressFree [hipMemAddressFree 0 legacy observed] (devPtr: VoidPtr, size: Size);
            hip hipMemMap [hipMemMap 0 legacy observed] (ptr: VoidPtr, size: Size, offset: Size, handle: hipMemGenericAllocationHandle_t, flags: ReservedFlags64);
            hip hipMemUnmap [hipMemUnmap 0 legacy observed] (ptr: VoidPtr, size: Size);
            hip hipMemSetAccess [hipMemSetAccess 0 legacy observed] (ptr: VoidPtr, size: Size, desc: HipMemAccessDescPtr, count: Size);
            // Stream-ordered pools, shared between processes (HIP 5.2: "beta").
            hip hipMemPoolCreate [hipMemPoolCreate 0 legacy observed] (mem_pool: Out<hipMemPool_t>, pool_props: HipMemPoolPropsPtr);
            hip hipMemPoolDestroy [hipMemPoolDestroy 0 legacy observed] (mem_pool: hipMemPool_t);
            hip hipMallocFromPoolAsync [hipMallocFromPoolAsync 0 legacy observed] (dev_ptr: Out<VoidPtrOut>, size: Size, mem_pool: hipMemPool_t, stream: hipStream_t);
            hip hipMemPoolExportToShareableHandle [hipMemPoolExportToShareableHandle 0 legacy observed] (shared_handle: ShareableHandleOut, mem_pool: hipMemPool_t, handle_type: HipMemHandleTypes, flags: ReservedFlags);
            hip hipMemPoolImportFromShareableHandle [hipMemPoolImportFromShareableHandle 0 legacy observed] (mem_pool: Out<hipMemPool_t>, shared_handle: ShareableHandleIn, handle_type: HipMemHandleTypes, flags: ReservedFlags);
            hip hipMemPoolExportPointer [hipMemPoolExportPointer 0 legacy observed] (export_data: HipPoolExportDataPtr, dev_ptr: VoidPtr);
            hip hipMemPoolImportPointer [hipMemPoolImportPointer 0 legacy observed] (dev_ptr: Out<VoidPtrOut>, mem_pool: hipMemPool_t, export_data: HipPoolExportDataPtr);
            // Observed: interposed only while a check in the table runs on them; otherwise every
            // lookup hands out the driver's own function.
            // Memory: what frees or unmaps memory ends what the shim knows of it.
            // Observed asynchronous copies and memsets: a stream's use of managed memory.
            cuda cuMemcpyAsync [cuMemcpyAsync 4000 legacy observed] (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyAsync_ptsz [cuMemcpyAsync 7000 ptsz observed] (dst: CUdeviceptr, src: CUdeviceptr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyDtoDAsync_v2 [cuMemcpyDtoDAsync 3020 legacy observed] (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyDtoDAsync_v2_ptsz [cuMemcpyDtoDAsync 7000 ptsz observed] (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyHtoDAsync_v2 [cuMemcpyHtoDAsync 3020 legacy observed] (dstDevice: CUdeviceptr, srcHost: ConstVoidPtr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyHtoDAsync_v2_ptsz [cuMemcpyHtoDAsync 7000 ptsz observed] (dstDevice: CUdeviceptr, srcHost: ConstVoidPtr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyDtoHAsync_v2 [cuMemcpyDtoHAsync 3020 legacy observed] (dstHost: VoidPtr, srcDevice: CUdeviceptr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyDtoHAsync_v2_ptsz [cuMemcpyDtoHAsync 7000 ptsz observed] (dstHost: VoidPtr, srcDevice: CUdeviceptr, ByteCount: Size, hStream: CUstream);
            cuda cuMemcpyHtoD_v2 [cuMemcpyHtoD 3020 legacy observed] (dstDevice: CUdeviceptr, srcHost: ConstVoidPtr, ByteCount: Size);
            cuda cuMemcpyHtoD_v2_ptds [cuMemcpyHtoD 7000 ptds observed] (dstDevice: CUdeviceptr, srcHost: ConstVoidPtr, ByteCount: Size);
            cuda cuMemcpyDtoH_v2 [cuMemcpyDtoH 3020 legacy observed] (dstHost: VoidPtr, srcDevice: CUdeviceptr, ByteCount: Size);
            cuda cuMemcpyDtoH_v2_ptds [cuMemcpyDtoH 7000 ptds observed] (dstHost: VoidPtr, srcDevice: CUdeviceptr, ByteCount: Size);
            cuda cuMemcpyDtoD_v2 [cuMemcpyDtoD 3020 legacy observed] (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: Size);
            cuda cuMemcpyDtoD_v2_ptds [cuMemcpyDtoD 7000 ptds observed] (dstDevice: CUdeviceptr, srcDevice: CUdeviceptr, ByteCount: Size);
            cuda cuMemsetD8_v2 [cuMemsetD8 3020 legacy observed] (dstDevice: CUdeviceptr, uc: UChar, N: Size);
            cuda cuMemsetD8_v2_ptds [cuMemsetD8 7000 ptds observed] (dstDevice: CUdeviceptr, uc: UChar, N: Size);
            cuda cuMemsetD8Async [cuMemsetD8Async 3020 legacy observed] (dstDevice: CUdeviceptr, uc: UChar, N: Size, hStream: CUstream);
            cuda cuMemsetD8Async_ptsz [cuMemsetD8Async 7000 ptsz observed] (dstDevice: CUdeviceptr, uc: UChar, N: Size, hStream: CUstream);
            cuda cuMemsetD32Async [cuMemsetD32Async 3020 legacy observed] (dstDevice: CUdeviceptr, ui: Uint, N: Size, hStream: CUstream);
            cuda cuMemsetD32Async_ptsz [cuMemsetD32Async 7000 ptsz observed] (dstDevice: CUdeviceptr, ui: Uint, N: Size, hStream: CUstream);
            cuda cuMemAlloc_v2 [cuMemAlloc 3020 legacy observed] (dptr: Out<CUdeviceptr>, bytesize: Size);
            cuda cuMemAllocManaged [cuMemAllocManaged 6000 legacy observed] (dptr: Out<CUdeviceptr>, bytesize: Size, flags: AttachFlags);
            cuda cuMemFree_v2 [cuMemFree 3020 legacy observed] (dptr: CUdeviceptr);
            cuda cuMemFreeHost [cuMemFreeHost 2000 legacy observed] (p: VoidPtr);
            cuda cuMemFreeAsync [cuMemFreeAsync 11020 legacy observed] (dptr: CUdeviceptr, hStream: CUstream);
            cuda cuMemFreeAsync_ptsz [cuMemFreeAsync 11020 ptsz observed] (dptr: CUdeviceptr, hStream: CUstream);
            // Virtual memory management (CUDA Driver API "Virtual Memory Management").
            cuda cuMemCreate [cuMemCreate 10020 legacy observed] (handle: Out<CUmemGenericAllocationHandle>, size: Size, prop: MemAllocationPropPtr, flags: ReservedFlags64);
            cuda cuMemRelease [cuMemRelease 10020 legacy observed] (handle: CUmemGenericAllocationHandle);
            cuda cuMemRetainAllocationHandle [cuMemRetainAllocationHandle 11000 legacy observed] (handle: Out<CUmemGenericAllocationHandle>, addr: VoidPtr);
            cuda cuMemExportToShareableHandle [cuMemExportToShareableHandle 10020 legacy observed] (shareableHandle: ShareableHandleOut, handle: CUmemGenericAllocationHandle, handleType: MemHandleTypes, flags: ReservedFlags64);
            cuda cuMemImportFromShareableHandle [cuMemImportFromShareableHandle 10020 legacy observed] (handle: Out<CUmemGenericAllocationHandle>, osHandle: ShareableHandleIn, shHandleType: MemHandleTypes);
            cuda cuMemAddressReserve [cuMemAddressReserve 10020 legacy observed] (ptr: Out<CUdeviceptr>, size: Size, alignment: Size, addr: CUdeviceptr, flags: ReservedFlags64);
            cuda cuMemAddressFree [cuMemAddressFree 10020 legacy observed] (ptr: CUdeviceptr, size: Size);
            cuda cuMemMap [cuMemMap 10020 legacy observed] (ptr: CUdeviceptr, size: Size, offset: Size, handle: CUmemGenericAllocationHandle, flags: ReservedFlags64);
            cuda cuMemUnmap [cuMemUnmap 10020 legacy observed] (ptr: CUdeviceptr, size: Size);
            cuda cuMemSetAccess [cuMemSetAccess 10020 legacy observed] (ptr: CUdeviceptr, size: Size, desc: MemAccessDescPtr, count: Size);
            cuda cuMemGetAllocationGranularity [cuMemGetAllocationGranularity 10020 legacy observed] (granularity: Out<Size>, prop: MemAllocationPropPtr, option: GranularityFlags);
            // Multicast objects (CUDA Driver API "Multicast Object Management"). Never called on
            // the project's GPU machines: proven on the simulator only.
            cuda cuMulticastCreate [cuMulticastCreate 12010 legacy] (mcHandle: Out<CUmemGenericAllocationHandle>, prop: MulticastObjectPropPtr);
            cuda cuMulticastAddDevice [cuMulticastAddDevice 12010 legacy] (mcHandle: CUmemGenericAllocationHandle, dev: CUdevice);
            cuda cuMulticastBindMem [cuMulticastBindMem 12010 legacy] (mcHandle: CUmemGenericAllocationHandle, mcOffset: Size, memHandle: CUmemGenericAllocationHandle, memOffset: Size, size: Size, flags: ReservedFlags64);
            cuda cuMulticastBindMem_v2 [cuMulticastBindMem 13010 legacy] (mcHandle: CUmemGenericAllocationHandle, dev: CUdevice, mcOffset: Size, memHandle: CUmemGenericAllocationHandle, memOffset: Size, size: Size, flags: ReservedFlags64);
            cuda cuMulticastBindAddr [cuMulticastBindAddr 12010 legacy] (mcHandle: CUmemGenericAllocationHandle, mcOffset: Size, memptr: CUdeviceptr, size: Size, flags: ReservedFlags64);
            cuda cuMulticastBindAddr_v2 [cuMulticastBindAddr 13010 legacy] (mcHandle: CUmemGenericAllocationHandle, dev: CUdevice, mcOffset: Size, memptr: CUdeviceptr, size: Size, flags: ReservedFlags64);
            cuda cuMulticastUnbind [cuMulticastUnbind 12010 legacy] (mcHandle: CUmemGenericAllocationHandle, dev: CUdevice, mcOffset: Size, size: Size);
            cuda cuMulticastGetGranularity [cuMulticastGetGranularity 12010 legacy] (granularity: Out<Size>, prop: MulticastObjectPropPtr, option: MulticastGranularityFlags);
            // Stream-ordered memory pools (CUDA Driver API "Stream Ordered Memory Allocator").
            cuda cuMemPoolCreate [cuMemPoolCreate 11020 legacy observed] (pool: Out<CUmemoryPool>, poolProps: MemPoolPropsPtr);
            cuda cuMemPoolDestroy [cuMemPoolDestroy 11020 legacy observed] (pool: CUmemoryPool);
            cuda cuMemAllocAsync [cuMemAllocAsync 11020 legacy observed] (dptr: Out<CUdeviceptr>, bytesize: Size, hStream: CUstream);
            cuda cuMemAllocAsync_ptsz [cuMemAllocAsync 11020 ptsz observed] (dptr: Out<CUdeviceptr>, bytesize: Size, hStream: CUstream);
            cuda cuMemAllocFromPoolAsync [cuMemAllocFromPoolAsync 11020 legacy observed] (dptr: Out<CUdeviceptr>, bytesize: Size, pool: CUmemoryPool, hStream: CUstream);
            cuda cuMemAllocFromPoolAsync_ptsz [cuMemAllocFromPoolAsync 11020 ptsz observed] (dptr: Out<CUdeviceptr>, bytesize: Size, pool: CUmemoryPool, hStream: CUstream);
            cuda cuMemPoolSetAccess [cuMemPoolSetAccess 11020 legacy observed] (pool: CUmemoryPool, map: MemAccessDescPtr, count: Size);
            cuda cuMemPoolExportToShareableHandle [cuMemPoolExportToShareableHandle 11020 legacy observed] (handle_out: ShareableHandleOut, pool: CUmemoryPool, handleType: MemHandleTypes, flags: ReservedFlags64);
            cuda cuMemPoolImportFromShareableHandle [cuMemPoolImportFromShareableHandle 11020 legacy observed] (pool_out: Out<CUmemoryPool>, handle: ShareableHandleIn, handleType: MemHandleTypes, flags: ReservedFlags64);
            cuda cuMemPoolExportPointer [cuMemPoolExportPointer 11020 legacy observed] (shareData_out: PoolExportDataPtr, ptr: CUdeviceptr);
            cuda cuMemPoolImportPointer [cuMemPoolImportPointer 11020 legacy observed] (ptr_out: Out<CUdeviceptr>, pool: CUmemoryPool, shareData: PoolExportDataPtr);
            hip hipMalloc [hipMalloc 0 legacy observed] (ptr: Out<VoidPtrOut>, size: Size);
            hip hipMallocManaged [hipMallocManaged 0 legacy observed] (dev_ptr: Out<VoidPtrOut>, size: Size, flags: HipAttachFlags);
            hip hipFree [hipFree 0 legacy observed] (ptr: VoidPtr);
            // Events and streams.
            cuda cuEventCreate [cuEventCreate 2000 legacy observed] (phEvent: Out<CUevent>, Flags: EventFlags);
            cuda cuEventDestroy_v2 [cuEventDestroy 4000 legacy observed] (hEvent: CUevent);
            cuda cuStreamCreate [cuStreamCreate 2000 legacy observed] (phStream: Out<CUstream>, Flags: StreamFlags);
            cuda cuStreamCreateWithPriority [cuStreamCreateWithPriority 5050 legacy observed] (phStream: Out<CUstream>, flags: StreamFlags, priority: Int);
            hip hipEventCreateWithFlags [hipEventCreateWithFlags 0 legacy observed] (event: Out<hipEvent_t>, flags: HipEventFlags);
            hip hipEventDestroy [hipEventDestroy 0 legacy observed] (event: hipEvent_t);
            hip hipStreamCreate [hipStreamCreate 0 legacy observed] (stream: Out<hipStream_t>);
            hip hipStreamDestroy [hipStreamDestroy 0 legacy observed] (stream: hipStream_t);
        }
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    Cuda,
    Hip,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Cuda => "cuda",
            Api::Hip => "hip",
        }
    }
    /// The documented code for "this function is not available".
    pub fn not_supported(self) -> i32 {
        match self {
            Api::Cuda => crate::ffi::CUDA_ERROR_NOT_SUPPORTED,
            Api::Hip => crate::ffi::HIP_ERROR_NOT_SUPPORTED,
        }
    }
    pub fn result_name(self, code: i32) -> Option<&'static str> {
        match self {
            Api::Cuda => crate::names::cuda_result_name(code),
            Api::Hip => crate::names::hip_result_name(code),
        }
    }

    /// What the API's header says a result code means.
    pub fn result_meaning(self, code: i32) -> Option<&'static str> {
        match self {
            Api::Cuda => crate::meanings::cuda_result_meaning(code),
            Api::Hip => crate::meanings::hip_result_meaning(code),
        }
    }
}

/// Which default-stream semantics an ABI variant has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    Legacy,
    /// Per-thread default stream, synchronous form (`_ptds`).
    Ptds,
    /// Per-thread default stream, stream-ordered form (`_ptsz`).
    Ptsz,
}

impl Variant {
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Legacy => "",
            Variant::Ptds => "_ptds",
            Variant::Ptsz => "_ptsz",
        }
    }
}

/// One parameter: its name in the vendor header and its C type.
#[derive(Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub c_type: fn() -> String,
}

/// Static facts about one interposed symbol.
pub struct FnInfo {
    pub id: FnId,
    pub api: Api,
    /// The exact exported ELF symbol.
    pub symbol: &'static str,
    /// What a call record says after its envelope, up to its arguments:
    /// `,"fn":"SYMBOL","a":{` (see [`crate::json::JsonOut::begin_call_record`]).
    pub record_head: &'static str,
    /// The name `cuGetProcAddress`/`hipGetProcAddress` is asked for.
    pub base: &'static str,
    /// CUDA version that introduced this ABI (0 for HIP).
    pub since: u32,
    pub variant: Variant,
    /// Observed rather than a seed: interposed only while a check in the table runs on it.
    pub observed: bool,
    pub params: &'static [Param],
}

impl FnInfo {
    /// Whether this function's documentation names `code` among what it returns (its header
    /// comment's return list and sentences; see [`crate::meanings`]). `None` for observed
    /// functions, whose documentation sharecheck does not carry.
    pub fn documents_code(&self, code: i32) -> Option<bool> {
        let listed = match self.api {
            Api::Cuda => crate::meanings::cuda_documented_returns(self.base),
            Api::Hip => crate::meanings::hip_documented_returns(self.base),
        }?;
        Some(listed.contains(&code))
    }

    /// The `cudaTypedefs.h` typedef of this exact ABI, e.g. `PFN_cuMemcpyPeer_v7000_ptds`.
    pub fn pfn_typedef(&self) -> Option<String> {
        (self.api == Api::Cuda)
            .then(|| format!("PFN_{}_v{}{}", self.base, self.since, self.variant.suffix()))
    }
}

/// The arguments of one interposed call, as a typed struct (see [`args`]).
pub trait CallArgs: Copy + 'static {
    const ID: FnId;
    /// Writes the members of the record's `"args"` object.
    fn encode(&self, w: &mut JsonOut, outcome: Outcome);
    /// Whether a compact record can hold every argument ([`crate::ffi::ArgValue::COMPACT`]).
    const COMPACT: bool;
    /// Every argument's snapshot, in declaration order, into `words` and `tags` (see
    /// [`crate::ffi::ArgValue::snap`]); only for `COMPACT` functions.
    fn snap(
        &self,
        outcome: Outcome,
        fingerprint: Fingerprinter,
        words: &mut [u64; MAX_ARGS],
        tags: &mut [u8; MAX_ARGS],
    );
    /// Every argument detached ([`crate::ffi::ArgValue::detach`]): what the checks and the
    /// record read through its pointers, copied into `keep`. False when it does not fit.
    fn detach(&mut self, outcome: Outcome, keep: &mut crate::ffi::Keep) -> bool;
}

/// Arguments of an interposed function, at most.
pub const MAX_ARGS: usize = 8;

macro_rules! variant_of {
    (legacy) => {
        Variant::Legacy
    };
    (ptds) => {
        Variant::Ptds
    };
    (ptsz) => {
        Variant::Ptsz
    };
}

macro_rules! observed_of {
    () => {
        false
    };
    (observed) => {
        true
    };
}

macro_rules! api_of {
    (cuda) => {
        Api::Cuda
    };
    (hip) => {
        Api::Hip
    };
}

macro_rules! define_table {
    ($( $api:ident $sym:ident [$base:ident $since:literal $variant:ident $($role:ident)?] ( $( $arg:ident : $ty:ty ),* $(,)? ); )*) => {
        /// Identifies an interposed symbol; the index into [`FUNCTIONS`].
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum FnId { $( $sym, )* }

        /// Every interposed symbol, in declaration order.
        pub static FUNCTIONS: &[FnInfo] = &[
            $( FnInfo {
                id: FnId::$sym,
                api: api_of!($api),
                symbol: stringify!($sym),
                record_head: concat!(",\"fn\":\"", stringify!($sym), "\",\"a\":{"),
                base: stringify!($base),
                since: $since,
                variant: variant_of!($variant),
                observed: observed_of!($($role)?),
                params: &[ $( Param { name: stringify!($arg), c_type: <$ty as ArgValue>::c_type }, )* ],
            }, )*
        ];

        impl FnId {
            /// Declared `observed` (see [`FnInfo::observed`]).
            pub const fn is_observed(self) -> bool {
                match self { $( FnId::$sym => observed_of!($($role)?), )* }
            }

            /// The exact symbol ([`FnInfo::symbol`]), known at compile time where the id is.
            pub const fn symbol(self) -> &'static str {
                match self { $( FnId::$sym => stringify!($sym), )* }
            }

            /// How many parameters it has (`FnInfo::params.len()`), known at compile time where
            /// the id is: a traced call's record needs it without reading the table's row.
            pub const fn param_count(self) -> usize {
                match self { $( FnId::$sym => { let names: &[&str] = &[$( stringify!($arg) ),*]; names.len() } )* }
            }
        }

        /// Looks an exported symbol name up (the `dlsym` path).
        pub fn lookup_symbol(name: &[u8]) -> Option<FnId> {
            match name {
                $( x if x == stringify!($sym).as_bytes() => Some(FnId::$sym), )*
                _ => None,
            }
        }

        /// Typed argument structs, one per symbol, named after it.
        #[allow(non_camel_case_types, non_snake_case)]
        pub mod args {
            use super::{CallArgs, FnId, Fingerprinter, JsonOut, Outcome, MAX_ARGS};
            #[allow(unused_imports)]
            use crate::ffi::*;
            $(
                #[derive(Clone, Copy)]
                pub struct $sym { $( pub $arg: $ty, )* }
                impl CallArgs for $sym {
                    const ID: FnId = FnId::$sym;
                    fn encode(&self, w: &mut JsonOut, outcome: Outcome) {
                        let linked = self.linked();
                        $( self.$arg.encode_linked(w, stringify!($arg), outcome, linked); )*
                        let _ = (w, outcome, linked);
                    }
                    const COMPACT: bool = true $( && <$ty as ArgValue>::COMPACT )*;
                    #[inline(always)]
                    #[allow(unused_assignments, unused_mut, unused_variables)]
                    fn snap(
                        &self,
                        outcome: Outcome,
                        fingerprint: Fingerprinter,
                        words: &mut [u64; MAX_ARGS],
                        tags: &mut [u8; MAX_ARGS],
                    ) {
                        let linked = self.linked();
                        let mut i = 0;
                        $(
                            (words[i], tags[i]) = self.$arg.snap_linked(outcome, fingerprint, linked);
                            i += 1;
                        )*
                    }
                    #[allow(unused_variables)]
                    fn detach(&mut self, outcome: Outcome, keep: &mut Keep) -> bool {
                        let linked = self.linked();
                        true $( && self.$arg.detach_linked(outcome, keep, linked) )*
                    }
                }
                impl $sym {
                    /// The call's shareable handle type, where an argument names one
                    /// ([`ArgValue::handle_type`]).
                    #[inline(always)]
                    fn linked(&self) -> Linked {
                        None $( .or(self.$arg.handle_type()) )*
                    }
                }
            )*
        }

        /// Writes the members of a compact record's `"a"` object from its snapshots (see
        /// [`CallArgs::snap`]), as [`CallArgs::encode`] wrote them; false (nothing written) for
        /// a function that is not compact or snapshots of another count.
        #[allow(unused_assignments, unused_mut, unused_variables)]
        pub fn encode_snapped(id: FnId, words: &[u64], tags: &[u8], w: &mut JsonOut) -> bool {
            match id {
                $( FnId::$sym => {
                    if !<args::$sym as CallArgs>::COMPACT
                        || words.len() != id.info().params.len()
                        || tags.len() != words.len()
                    {
                        return false;
                    }
                    let mut i = 0;
                    $(
                        <$ty as ArgValue>::encode_snap(words[i], tags[i], w, stringify!($arg));
                        i += 1;
                    )*
                    true
                } )*
            }
        }
    };
}

mod table {
    use super::*;
    use crate::ffi::*;
    interposed_functions!(define_table);
}
pub use table::{args, encode_snapped, lookup_symbol, FnId, FUNCTIONS};

impl FnId {
    pub const fn info(self) -> &'static FnInfo {
        &FUNCTIONS[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_indexed_by_id_and_lookups_agree() {
        for (i, f) in FUNCTIONS.iter().enumerate() {
            assert_eq!(f.id as usize, i);
            assert_eq!(lookup_symbol(f.symbol.as_bytes()), Some(f.id));
        }
        assert_eq!(lookup_symbol(b"cuMemcpy2D_v2"), None);
        assert_eq!(lookup_symbol(b""), None);
    }

    #[test]
    fn every_required_symbol_is_declared() {
        let required = [
            "cuDeviceCanAccessPeer",
            "cuCtxEnablePeerAccess",
            "cuCtxDisablePeerAccess",
            "cuMemcpyPeer",
            "cuMemcpyPeer_ptds",
            "cuMemcpyPeerAsync",
            "cuMemcpyPeerAsync_ptsz",
            "cuStreamAttachMemAsync",
            "cuStreamAttachMemAsync_ptsz",
            "cuIpcGetMemHandle",
            "cuIpcOpenMemHandle",
            "cuIpcOpenMemHandle_v2",
            "cuIpcCloseMemHandle",
            "cuIpcGetEventHandle",
            "cuIpcOpenEventHandle",
            "hipDeviceCanAccessPeer",
            "hipDeviceEnablePeerAccess",
            "hipDeviceDisablePeerAccess",
            "hipMemcpyPeer",
            "hipMemcpyPeerAsync",
            "hipIpcGetMemHandle",
            "hipIpcOpenMemHandle",
            "hipIpcCloseMemHandle",
            "hipIpcGetEventHandle",
            "hipIpcOpenEventHandle",
            "hipStreamAttachMemAsync",
        ];
        for name in required {
            assert!(lookup_symbol(name.as_bytes()).is_some(), "{name} missing");
        }
        let endpoints = FUNCTIONS
            .iter()
            .filter(|f| f.base.starts_with("cuLogicalEndpoint"))
            .inspect(|f| assert_eq!(f.since, 13030, "{}", f.symbol))
            .count();
        assert_eq!(endpoints, 12);
    }

    #[test]
    fn pfn_typedef_names_follow_cuda_typedefs() {
        assert_eq!(
            FnId::cuMemcpyPeer_ptds.info().pfn_typedef().as_deref(),
            Some("PFN_cuMemcpyPeer_v7000_ptds")
        );
        assert_eq!(
            FnId::cuIpcOpenMemHandle_v2.info().pfn_typedef().as_deref(),
            Some("PFN_cuIpcOpenMemHandle_v11000")
        );
        assert_eq!(FnId::hipMemcpyPeer.info().pfn_typedef(), None);
    }
}
