//! The one check table: every declared function and the checks that run on it, in order.
//!
//! Each row names a declared function (a line of [`crate::interposed_functions!`]) and its checks
//! as `family::CHECK`. The same macro is read twice: here, where each check resolves to its
//! [`CheckInfo`] (`crate::rules::<family>::checks::<CHECK>`: which rules it reports, so the
//! catalogue knows which functions a rule is checked on), and in the shim, where it resolves to the
//! implementation (`families::<family>::checks::<CHECK>`) and composes the checks of a row: every
//! check runs before the call, and every after-call step runs after it; none replaces another.
//! Every declared function has a row (the shim does not compile otherwise); an observed function
//! whose row is empty is observed by nobody, and lookups hand out the driver's own pointer for it.

use crate::functions::FnId;
use crate::rules::CheckInfo;

/// Calls `$callback!` with the table. Row syntax: `symbol => family::CHECK, ...;`.
#[macro_export]
macro_rules! check_table {
    ($callback:ident) => {
        $callback! {
            // Peer access.
            cuDeviceCanAccessPeer => peer::CAN_ACCESS_CUDA;
            cuCtxEnablePeerAccess => peer::ENABLE_CUDA;
            cuCtxDisablePeerAccess => peer::DISABLE_CUDA;
            cuMemcpyPeer => peer::COPY_CUDA;
            cuMemcpyPeer_ptds => peer::COPY_CUDA;
            cuMemcpyPeerAsync => peer::COPY_CUDA, peer::COPY_STREAM_CUDA;
            cuMemcpyPeerAsync_ptsz => peer::COPY_CUDA, peer::COPY_STREAM_CUDA;
            hipDeviceCanAccessPeer => peer::CAN_ACCESS_HIP;
            hipDeviceEnablePeerAccess => peer::ENABLE_HIP;
            hipDeviceDisablePeerAccess => peer::DISABLE_HIP;
            hipMemcpyPeer => peer::COPY_HIP;
            hipMemcpyPeerAsync => peer::COPY_HIP, peer::COPY_STREAM_HIP;
            // Stream attach (rules to come).
            cuStreamAttachMemAsync => attach::ATTACH_CUDA;
            cuStreamAttachMemAsync_ptsz => attach::ATTACH_CUDA;
            hipStreamAttachMemAsync => attach::ATTACH_HIP;
            // IPC.
            cuIpcGetMemHandle => ipc::GET_CUDA;
            cuIpcOpenMemHandle => ipc::OPEN_CUDA;
            cuIpcOpenMemHandle_v2 => ipc::OPEN_CUDA;
            cuIpcCloseMemHandle => ipc::CLOSE_CUDA, lifecycle::MEMORY_FREED;
            cuIpcGetEventHandle => ipc::GET_EVENT_CUDA;
            cuIpcOpenEventHandle => ipc::OPEN_EVENT_CUDA;
            hipIpcGetMemHandle => ipc::GET_HIP;
            hipIpcOpenMemHandle => ipc::OPEN_HIP;
            hipIpcCloseMemHandle => ipc::CLOSE_HIP, lifecycle::MEMORY_FREED;
            hipIpcGetEventHandle => ipc::GET_EVENT_HIP;
            hipIpcOpenEventHandle => ipc::OPEN_EVENT_HIP;
            // Logical endpoints.
            cuLogicalEndpointIdReserve => endpoint::RESERVE;
            cuLogicalEndpointIdRelease => endpoint::RELEASE;
            cuLogicalEndpointCreate => endpoint::CREATE;
            cuLogicalEndpointAddDevice => endpoint::ADD_DEVICE;
            cuLogicalEndpointDestroy => endpoint::DESTROY;
            cuLogicalEndpointBindAddr => endpoint::BIND_ADDR;
            cuLogicalEndpointBindMem => endpoint::BIND_MEM;
            cuLogicalEndpointUnbind => endpoint::UNBIND;
            cuLogicalEndpointExport => endpoint::EXPORT;
            cuLogicalEndpointImport => endpoint::IMPORT;
            cuLogicalEndpointQuery => endpoint::QUERY;
            cuLogicalEndpointGetLimits => ;
            // Lifecycle: what ends tracked state.
            cuCtxDestroy_v2 => ipc::CONTEXT_DESTROYED, lifecycle::CONTEXT_DESTROYED;
            cuDevicePrimaryCtxRelease_v2 => lifecycle::PRIMARY_RELEASED;
            cuDevicePrimaryCtxReset_v2 => lifecycle::PRIMARY_RESET;
            cuStreamDestroy_v2 => attach::STREAM_DESTROYED, lifecycle::STREAM_DESTROYED;
            hipDeviceReset => lifecycle::HIP_DEVICE_RESET;
            // Observed stream work on memory: what an attach promised about other streams, and
            // VMM memory used before access.
            cuMemcpyAsync => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyAsync_ptsz => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyDtoDAsync_v2 => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyDtoDAsync_v2_ptsz => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyHtoDAsync_v2 => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyHtoDAsync_v2_ptsz => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyDtoHAsync_v2 => attach::ACCESS_CUDA, vmm::USE;
            cuMemcpyDtoHAsync_v2_ptsz => attach::ACCESS_CUDA, vmm::USE;
            cuMemsetD8Async => attach::ACCESS_CUDA, vmm::USE;
            cuMemsetD8Async_ptsz => attach::ACCESS_CUDA, vmm::USE;
            cuMemsetD32Async => attach::ACCESS_CUDA, vmm::USE;
            cuMemsetD32Async_ptsz => attach::ACCESS_CUDA, vmm::USE;
            // Observed synchronous copies and memsets: VMM memory used before access.
            cuMemcpyHtoD_v2 => vmm::USE;
            cuMemcpyHtoD_v2_ptds => vmm::USE;
            cuMemcpyDtoH_v2 => vmm::USE;
            cuMemcpyDtoH_v2_ptds => vmm::USE;
            cuMemcpyDtoD_v2 => vmm::USE;
            cuMemcpyDtoD_v2_ptds => vmm::USE;
            cuMemsetD8_v2 => vmm::USE;
            cuMemsetD8_v2_ptds => vmm::USE;
            // Observed memory: frees end what the driver-fact caches hold.
            cuMemAlloc_v2 => ;
            cuMemAllocManaged => ;
            // A free is kept among the recent frees that a peer copy's explanation reads.
            cuMemFree_v2 => attach::MEMORY_FREED, lifecycle::POINTER_FREED, pool::FREED, ipc::EXPORTED_FREED;
            cuMemFreeHost => lifecycle::MEMORY_FREED;
            cuMemFreeAsync => lifecycle::MEMORY_FREED, pool::FREED;
            cuMemFreeAsync_ptsz => lifecycle::MEMORY_FREED, pool::FREED;
            // Virtual memory management; the endpoint binds read what it tracks.
            cuMemCreate => vmm::CREATE;
            cuMemRelease => vmm::RELEASE, multicast::RELEASED, lifecycle::MEMORY_FREED;
            cuMemRetainAllocationHandle => vmm::REFERENCED;
            cuMemExportToShareableHandle => vmm::EXPORT;
            cuMemImportFromShareableHandle => vmm::REFERENCED;
            cuMemAddressReserve => vmm::RESERVE;
            cuMemAddressFree => vmm::ADDRESS_FREE;
            cuMemMap => vmm::MAP, multicast::MAPPED;
            cuMemUnmap => vmm::UNMAP, lifecycle::MEMORY_FREED;
            cuMemSetAccess => vmm::SET_ACCESS;
            cuMemGetAllocationGranularity => ;
            hipMemCreate => vmm::CREATE_HIP;
            hipMemRelease => vmm::RELEASE_HIP, lifecycle::MEMORY_FREED;
            hipMemRetainAllocationHandle => vmm::REFERENCED_HIP;
            hipMemExportToShareableHandle => vmm::EXPORT_HIP;
            hipMemImportFromShareableHandle => vmm::REFERENCED_HIP;
            hipMemAddressReserve => vmm::RESERVE_HIP;
            hipMemAddressFree => vmm::ADDRESS_FREE_HIP;
            hipMemMap => vmm::MAP_HIP;
            hipMemUnmap => vmm::UNMAP_HIP, lifecycle::MEMORY_FREED;
            hipMemSetAccess => vmm::SET_ACCESS_HIP;
            hipMemPoolCreate => pool::CREATE_HIP;
            hipMemPoolDestroy => pool::DESTROY_HIP;
            hipMallocFromPoolAsync => pool::ALLOC_HIP;
            hipMemPoolExportToShareableHandle => pool::EXPORT_HIP;
            hipMemPoolImportFromShareableHandle => pool::IMPORT_HIP;
            hipMemPoolExportPointer => pool::POINTER_HIP;
            hipMemPoolImportPointer => pool::POINTER_HIP;
            // Multicast.
            cuMulticastCreate => multicast::CREATE;
            cuMulticastAddDevice => multicast::ADD_DEVICE;
            cuMulticastBindMem => multicast::BIND_MEM;
            cuMulticastBindMem_v2 => multicast::BIND_MEM;
            cuMulticastBindAddr => multicast::BIND_ADDR;
            cuMulticastBindAddr_v2 => multicast::BIND_ADDR;
            cuMulticastUnbind => multicast::UNBIND;
            cuMulticastGetGranularity => ;
            // Stream-ordered memory pools.
            cuMemPoolCreate => pool::CREATE;
            cuMemPoolDestroy => pool::DESTROY;
            cuMemAllocAsync => pool::ALLOC_DEFAULT;
            cuMemAllocAsync_ptsz => pool::ALLOC_DEFAULT;
            cuMemAllocFromPoolAsync => pool::ALLOC;
            cuMemAllocFromPoolAsync_ptsz => pool::ALLOC;
            cuMemPoolSetAccess => ;
            cuMemPoolExportToShareableHandle => pool::EXPORT;
            cuMemPoolImportFromShareableHandle => pool::IMPORT;
            cuMemPoolExportPointer => pool::EXPORT_POINTER;
            cuMemPoolImportPointer => pool::IMPORT_POINTER;
            hipMalloc => ;
            hipMallocManaged => ;
            hipFree => lifecycle::MEMORY_FREED, ipc::EXPORTED_FREED, pool::FREED_HIP;
            // Observed events (the flags IPC exports need) and streams (the attach family's ordering).
            cuEventCreate => ipc::EVENT_CREATED;
            cuEventDestroy_v2 => ipc::EVENT_CREATED;
            cuStreamCreate => attach::STREAM_CREATED;
            cuStreamCreateWithPriority => attach::STREAM_CREATED;
            hipEventCreateWithFlags => ipc::EVENT_CREATED;
            hipEventDestroy => ipc::EVENT_CREATED;
            hipStreamCreate => ;
            hipStreamDestroy => ;
        }
    };
}

macro_rules! define_checks_of {
    ($( $sym:ident => $( $family:ident :: $check:ident ),* ; )*) => {
        /// The checks that run on a function, in table order.
        pub fn checks_of(id: FnId) -> &'static [&'static CheckInfo] {
            match id {
                $( FnId::$sym => {
                    static CHECKS: &[&CheckInfo] = &[ $( &crate::rules::$family::checks::$check ),* ];
                    CHECKS
                } )*
            }
        }

        /// Whether any check runs on a function (`const`, so the shim's wrappers of functions that
        /// nobody observes compile down to a plain forward).
        pub const fn is_checked(id: FnId) -> bool {
            match id {
                $( FnId::$sym => { let checks: &[&str] = &[ $( stringify!($check) ),* ]; !checks.is_empty() } )*
            }
        }
    };
}

check_table!(define_checks_of);

/// Whether the shim stands in for a function: every seed, and an observed function only while
/// some check runs on it. Lookups of the others hand out the driver's own function, and a
/// program linked to the shim's export of one is forwarded untouched (not traced).
pub const fn is_wrapped(id: FnId) -> bool {
    !id.is_observed() || is_checked(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::FUNCTIONS;

    #[test]
    fn every_peer_function_has_its_check_and_lifecycle_rows_report_nothing() {
        for f in FUNCTIONS {
            let checks = checks_of(f.id);
            assert_eq!(is_checked(f.id), !checks.is_empty(), "{}", f.symbol);
            if f.base.contains("Peer") {
                assert!(
                    checks.iter().all(|c| c.name.starts_with("peer.")),
                    "{}",
                    f.symbol
                );
                assert!(!checks.is_empty(), "{}", f.symbol);
            }
            for c in checks.iter().filter(|c| c.name.starts_with("lifecycle.")) {
                assert!(c.rules.is_empty(), "{}", c.name);
            }
        }
        let names: Vec<&str> = checks_of(FnId::cuMemcpyPeerAsync_ptsz)
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["peer.copy.cuda", "peer.copy-stream.cuda"]);
    }
}
