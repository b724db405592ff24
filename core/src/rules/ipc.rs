//! The IPC family: `cuIpc*` and `hipIpc*`, memory and event handles shared between processes.
//! Contracts: CUDA Driver API "Memory Management" (the `cuIpc*` functions) and HIP "Device
//! Management" (`shared/contracts/hip-ipc-memory.txt`); what R580 does where they are silent is
//! in LD_PRELOAD.md, "CUDA IPC on R580, measured".
//!
//! This is the family's first part: the rules one call decides by itself, the open of a handle
//! the same process exported, and the close of memory no open returned (or closed more often
//! than opened). Events, contexts and the rules across processes are still to come.

use super::{CheckInfo, Family, Kind, Rule, Severity, Source};
use crate::codes::*;

pub(crate) const CUDA_MEMORY: &str = super::peer::CUDA_MEMORY;
const HIP_DEVICE: &str = "Device Management";

const fn cuda(function: &'static str) -> Source {
    super::cuda(CUDA_MEMORY, function)
}

const fn hip(function: &'static str) -> Source {
    Source {
        document: "HIP Runtime API",
        section: HIP_DEVICE,
        function,
    }
}

const SAME_PROCESS: &str = "A handle is opened in another process than the one that exported it.";
const SAME_PROCESS_FIX: &str = "use the allocation's own pointer in the process that made it; \
    open handles only in the processes it was sent to";

pub(crate) const CUDA_GET_BASE: &str = "Takes a pointer to the base of an existing device memory \
    allocation created with ::cuMemAlloc and exports it for use in another process.";

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    pub static GET_NOT_ALLOCATION_BASE: Rule = Rule {
        id: "cuIpcGetMemHandle.not-allocation-base",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dptr must be the base of its allocation: a handle covers the whole \
            allocation, and the importer maps it from its start.",
        source: cuda("cuIpcGetMemHandle"),
        quote: CUDA_GET_BASE,
        documented_code: Some(INVALID_VALUE),
        fix: "export the allocation's base (cuMemGetAddressRange gives it) and send the offset \
            to the importer beside the handle; the importer adds it to the pointer it opens",
    };

    pub static OPEN_FLAGS: Rule = Rule {
        id: "cuIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Flags must be CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Flags - Flags for this operation. Must be specified as \
            ::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS",
        documented_code: Some(INVALID_VALUE),
        fix: "pass CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS (cudaIpcMemLazyEnablePeerAccess in the \
            runtime) as Flags",
    };

    pub static CLOSE_NOT_OPENED: Rule = Rule {
        id: "cuIpcCloseMemHandle.not-opened",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dptr must be memory cuIpcOpenMemHandle returned and that is still open: \
            each open is closed once.",
        source: cuda("cuIpcCloseMemHandle"),
        quote: "Decrements the reference count of the memory returned by ::cuIpcOpenMemHandle \
            by 1. When the reference count reaches 0, this API unmaps the memory.",
        documented_code: Some(INVALID_VALUE),
        fix: "close exactly the pointer cuIpcOpenMemHandle returned, once per successful open",
    };

    pub static OPEN_SAME_PROCESS: Rule = Rule {
        id: "cuIpcOpenMemHandle.same-process",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: SAME_PROCESS,
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Maps memory exported from another process with ::cuIpcGetMemHandle into the \
            current device address space.",
        documented_code: Some(INVALID_CONTEXT),
        fix: SAME_PROCESS_FIX,
    };
}

/// Rules of the HIP runtime API.
pub mod hip {
    use super::*;

    pub static GET_NOT_ALLOCATION_BASE: Rule = Rule {
        id: "hipIpcGetMemHandle.not-allocation-base",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "devPtr must be the base of an allocation made with hipMalloc.",
        source: hip("hipIpcGetMemHandle"),
        quote: "Takes a pointer to the base of an existing device memory allocation created \
            with hipMalloc and exports it for use in another process. devPtr - Base pointer to \
            previously allocated device memory",
        documented_code: None,
        fix: "export the allocation's base (hipMemGetAddressRange gives it) and send the offset \
            to the importer beside the handle",
    };

    pub static CLOSE_NOT_OPENED: Rule = Rule {
        id: "hipIpcCloseMemHandle.not-opened",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "devPtr must be memory hipIpcOpenMemHandle returned and that is still \
            open: each open is closed once.",
        source: hip("hipIpcCloseMemHandle"),
        quote: "Unmaps memory returnd by hipIpcOpenMemHandle. devPtr - Device pointer returned \
            by hipIpcOpenMemHandle",
        documented_code: None,
        fix: "close exactly the pointer hipIpcOpenMemHandle returned, once per successful open",
    };

    pub static OPEN_SAME_PROCESS: Rule = Rule {
        id: "hipIpcOpenMemHandle.same-process",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: SAME_PROCESS,
        source: hip("hipIpcOpenMemHandle"),
        quote: "Opens an interprocess memory handle exported from another process and returns a \
            device pointer usable in the local process.",
        documented_code: Some(INVALID_CONTEXT),
        fix: SAME_PROCESS_FIX,
    };
}

/// The family's checks, by the names the table uses.
pub mod checks {
    use super::*;

    pub static GET_CUDA: CheckInfo = CheckInfo {
        name: "ipc.get.cuda",
        rules: &[&cuda::GET_NOT_ALLOCATION_BASE],
    };
    pub static OPEN_CUDA: CheckInfo = CheckInfo {
        name: "ipc.open.cuda",
        rules: &[&cuda::OPEN_FLAGS, &cuda::OPEN_SAME_PROCESS],
    };
    pub static GET_HIP: CheckInfo = CheckInfo {
        name: "ipc.get.hip",
        rules: &[&hip::GET_NOT_ALLOCATION_BASE],
    };
    pub static OPEN_HIP: CheckInfo = CheckInfo {
        name: "ipc.open.hip",
        rules: &[&hip::OPEN_SAME_PROCESS],
    };
    pub static CLOSE_CUDA: CheckInfo = CheckInfo {
        name: "ipc.close.cuda",
        rules: &[&cuda::CLOSE_NOT_OPENED],
    };
    pub static CLOSE_HIP: CheckInfo = CheckInfo {
        name: "ipc.close.hip",
        rules: &[&hip::CLOSE_NOT_OPENED],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "ipc",
    title: "IPC memory and event handles",
    rules: &[
        &cuda::GET_NOT_ALLOCATION_BASE,
        &cuda::OPEN_FLAGS,
        &cuda::OPEN_SAME_PROCESS,
        &cuda::CLOSE_NOT_OPENED,
        &hip::GET_NOT_ALLOCATION_BASE,
        &hip::OPEN_SAME_PROCESS,
        &hip::CLOSE_NOT_OPENED,
    ],
};
