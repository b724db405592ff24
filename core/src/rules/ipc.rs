//! The IPC family: `cuIpc*` and `hipIpc*`, memory and event handles shared between processes.
//! Contracts: CUDA Driver API "Memory Management" (the `cuIpc*` functions) and HIP "Device
//! Management" (`shared/contracts/hip-ipc-memory.txt`); what R580 does where they are silent is
//! in LD_PRELOAD.md, "CUDA IPC on R580, measured".
//!
//! This is the family's first part: the rules one call decides by itself, the open of a handle
//! the same process exported, and the close of memory no open returned (or closed more often
//! than opened), decided as the calls are made; and the first rule across processes, decided by
//! `sharecheck report` over every process's trace ([`report`]). Events, contexts and the other
//! lifetimes across processes are still to come.

use super::{CheckInfo, Family, Kind, Rule, Severity, Source};
use crate::codes::*;

pub(crate) const CUDA_MEMORY: &str = super::peer::CUDA_MEMORY;
const HIP_DEVICE: &str = "Device Management";

const fn cuda(function: &'static str) -> Source {
    super::cuda(CUDA_MEMORY, function)
}

/// The CUDA driver API's section of the event IPC functions.
const fn cuda_event(function: &'static str) -> Source {
    super::cuda("Event Management", function)
}

const fn hip(function: &'static str) -> Source {
    Source {
        document: "HIP Runtime API",
        section: HIP_DEVICE,
        function,
    }
}

const SAME_PROCESS: &str = "A handle is opened in another process than the one that exported it.";
const EVENT_SAME_PROCESS: &str =
    "An event handle is opened in another process than the one that exported it.";
const EVENT_SAME_PROCESS_FIX: &str = "use the event itself in the process that created it; open \
    its handle only in the processes it was sent to";
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

    pub static GET_NOT_EXPORTABLE: Rule = Rule {
        id: "cuIpcGetMemHandle.memory-not-exportable",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dptr must be device memory allocated with cuMemAlloc (or \
            cuMemAllocPitch): managed, stream-ordered pool, page-locked host and cuMemCreate \
            memory cannot be exported with cuIpcGetMemHandle. Decided from the allocation (the \
            driver's pointer attributes), not from the answer.",
        source: cuda("cuIpcGetMemHandle"),
        quote: CUDA_GET_BASE,
        documented_code: Some(INVALID_VALUE),
        fix: "allocate memory meant for cuIpcGetMemHandle with cuMemAlloc; share pool memory \
            with cuMemPoolExportToShareableHandle and cuMemPoolExportPointer, cuMemCreate memory \
            with cuMemExportToShareableHandle, host memory through shared host memory (shm) \
            registered with cuMemHostRegister in each process",
    };

    pub static GET_EVENT_NOT_INTERPROCESS: Rule = Rule {
        id: "cuIpcGetEventHandle.event-not-interprocess",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The event must have been created with CU_EVENT_INTERPROCESS and \
            CU_EVENT_DISABLE_TIMING (decided from the flags cuEventCreate was given; R580 \
            answers CUDA_ERROR_INVALID_HANDLE, 400).",
        source: cuda_event("cuIpcGetEventHandle"),
        quote: "The event must have been created with the ::CU_EVENT_INTERPROCESS and \
            ::CU_EVENT_DISABLE_TIMING flags set.",
        documented_code: Some(INVALID_HANDLE),
        fix: "create the event with CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING \
            (cudaEventInterprocess | cudaEventDisableTiming in the runtime)",
    };

    pub static OPEN_SECOND_CONTEXT: Rule = Rule {
        id: "cuIpcOpenMemHandle.second-context-same-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The handles of one exporting process are opened in one context per device: \
            another context of the same device cannot open them (R580 answers \
            CUDA_ERROR_INVALID_HANDLE, 400, for that handle and for the exporter's others). \
            Decided where this process has the same handle open in another context of the \
            device.",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "::CUipcMemHandles from each ::CUdevice in a given process may only be opened by \
            one ::CUcontext per ::CUdevice per other process.",
        documented_code: Some(INVALID_HANDLE),
        fix: "open the exporter's handles in one context per device (the device's primary \
            context, as the runtime does) and share the pointer it returns",
    };

    pub static CONTEXT_DESTROYED_WHILE_OPEN: Rule = Rule {
        id: "cuCtxDestroy.ipc-memory-still-open",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Memory a context opened with cuIpcOpenMemHandle is closed before the \
            context is destroyed: destroying it unmaps the memory without the close the \
            documentation requires (the exporter cannot tell).",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Memory returned from ::cuIpcOpenMemHandle must be freed with \
            ::cuIpcCloseMemHandle.",
        documented_code: None,
        fix: "close each pointer cuIpcOpenMemHandle returned in a context (once per open) \
            before destroying the context",
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

    pub static OPENED_AGAIN: Rule = Rule {
        id: "cuIpcOpenMemHandle.already-open-legacy",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "A handle opened again in the same context is counted, and needs as many \
            closes as opens; but the legacy cuIpcOpenMemHandle does not count: on a handle \
            already open, R580 answers it CUDA_ERROR_ALREADY_MAPPED (208). Reported when that \
            is why the call failed (the count of cuIpcOpenMemHandle_v2 is kept silently and \
            named when closes do not match).",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "If the memory handle has already been opened by the current context, the \
            reference count on the handle is incremented by 1 and the existing device pointer \
            is returned.",
        documented_code: None,
        fix: "close the pointer once per successful open; with the legacy export, reuse the \
            pointer the first open returned",
    };

    pub static OPEN_EVENT_SAME_PROCESS: Rule = Rule {
        id: "cuIpcOpenEventHandle.same-process",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: EVENT_SAME_PROCESS,
        source: cuda_event("cuIpcOpenEventHandle"),
        quote: "Opens an interprocess event handle exported from another process with \
            ::cuIpcGetEventHandle.",
        documented_code: Some(INVALID_CONTEXT),
        fix: EVENT_SAME_PROCESS_FIX,
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

/// Rules decided in the report phase, over the traces of every process of a job (their checks
/// are built with the `report` feature, which the CLI and the tests use).
pub mod report {
    use super::*;

    pub static FREED_WHILE_OPEN_RULE: Rule = Rule {
        id: "cuMemFree.ipc-memory-open-elsewhere",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "The exporter frees memory it exported only after every importer closed \
            it: what an importer reads or writes after the free is undefined.",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Calling ::cuMemFree on an exported memory region before calling \
            ::cuIpcCloseMemHandle in the importing context will result in undefined behavior.",
        documented_code: None,
        fix: "have every importer close its mapping (cuIpcCloseMemHandle) and tell the exporter \
            before it frees (PyTorch keeps a reference count across processes for this)",
    };

    pub static EXPORTER_EXITED_RULE: Rule = Rule {
        id: "cuIpcGetMemHandle.exporter-exited-while-open",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "The exporter stays alive until every importer closed what it exported: \
            its exit frees the memory as cuMemFree would, and what an importer reads or writes \
            after it is undefined.",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Calling ::cuMemFree on an exported memory region before calling \
            ::cuIpcCloseMemHandle in the importing context will result in undefined behavior.",
        documented_code: None,
        fix: "have every importer close its mapping and tell the exporter before the exporter \
            exits (or frees)",
    };

    pub static HIP_EXPORTER_EXITED_RULE: Rule = Rule {
        id: "hipIpcGetMemHandle.exporter-exited-while-open",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: EXPORTER_EXITED_RULE.requirement,
        source: hip("hipIpcOpenMemHandle"),
        quote: "Calling hipFree on an exported memory region before calling \
            hipIpcCloseMemHandle in the importing context will result in undefined behavior.",
        documented_code: None,
        fix: EXPORTER_EXITED_RULE.fix,
    };

    pub static CONTEXT_DESTROYED_WHILE_OPEN_RULE: Rule = Rule {
        id: "cuCtxDestroy.ipc-memory-open-elsewhere",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "The exporter destroys the context of memory it exported only after every \
            importer closed it: the destroy frees the memory as cuMemFree would, and what an \
            importer reads or writes after it is undefined.",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Calling ::cuMemFree on an exported memory region before calling \
            ::cuIpcCloseMemHandle in the importing context will result in undefined behavior.",
        documented_code: None,
        fix: "have every importer close its mapping and tell the exporter before the exporter \
            destroys the context the memory was allocated in",
    };

    pub static SECOND_CONTEXT_RULE: Rule = Rule {
        id: "cuIpcOpenMemHandle.second-context-same-exporter",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The handles of one exporting process are opened in one context per device: \
            another context of the same device cannot open any of them while the first has one \
            open (R580 answers CUDA_ERROR_INVALID_HANDLE, 400). Decided over both processes' \
            traces, for handles of different allocations of one exporter (the same handle is \
            found as it is opened: cuIpcOpenMemHandle.second-context-same-device).",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "::CUipcMemHandles from each ::CUdevice in a given process may only be opened by \
            one ::CUcontext per ::CUdevice per other process.",
        documented_code: None,
        fix: "open every handle of that exporter in one context per device (the device's \
            primary context, as the runtime does) and share the pointers it returns",
    };

    pub static UNREACHABLE_RULE: Rule = Rule {
        id: "cuIpcOpenMemHandle.device-cannot-access-exporter",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The importing context's device can access the device of the exported \
            memory (cuDeviceCanAccessPeer says 1), or is that device. Decided over both \
            processes' traces, by device UUID (ordinals differ between processes).",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "::cuDeviceCanAccessPeer can determine if a mapping is possible.",
        documented_code: None,
        fix: "open the handle in a context of a device that can access the exporter's (or of \
            that device), or stage the data through memory both can reach",
    };

    pub static HIP_UNREACHABLE_RULE: Rule = Rule {
        id: "hipIpcOpenMemHandle.device-cannot-access-exporter",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The importing device can access the device of the exported memory \
            (hipDeviceCanAccessPeer says 1), or is that device. Decided over both processes' \
            traces, by device UUID.",
        source: hip("hipIpcOpenMemHandle"),
        quote: "hipDeviceCanAccessPeer can determine if a mapping is possible.",
        documented_code: None,
        fix: UNREACHABLE_RULE.fix,
    };

    pub static EVENT_NEVER_DESTROYED_RULE: Rule = Rule {
        id: "cuIpcOpenEventHandle.never-destroyed",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "An event opened from another process's handle is destroyed with \
            cuEventDestroy before the importing process ends.",
        source: cuda_event("cuIpcOpenEventHandle"),
        quote: "This event must be freed with ::cuEventDestroy.",
        documented_code: None,
        fix: "destroy the imported event (cuEventDestroy, cudaEventDestroy) when the process is \
            done with it",
    };

    pub static HIP_EVENT_NEVER_DESTROYED_RULE: Rule = Rule {
        id: "hipIpcOpenEventHandle.never-destroyed",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "An event opened from another process's handle is destroyed with \
            hipEventDestroy before the importing process ends.",
        source: hip("hipIpcOpenEventHandle"),
        quote: "This event need be freed with hipEventDestroy.",
        documented_code: None,
        fix: "destroy the imported event (hipEventDestroy) when the process is done with it",
    };

    pub static EVENT_DESTROYED_WHILE_OPEN_RULE: Rule = Rule {
        id: "cuEventDestroy.ipc-event-open-elsewhere",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "An importer does not use its copy of an event after the exporter \
            destroyed the event. Said where the exporter destroys an event another process \
            still holds (the shim does not see the copy's uses, so this explains rather than \
            accuses).",
        source: cuda_event("cuIpcOpenEventHandle"),
        quote: "Performing operations on the imported event after the exported event has been \
            freed with ::cuEventDestroy will result in undefined behavior.",
        documented_code: None,
        fix: "have importers destroy their copies (or stop using them) before the exporter \
            destroys the event",
    };

    pub static HIP_EVENT_DESTROYED_WHILE_OPEN_RULE: Rule = Rule {
        id: "hipEventDestroy.ipc-event-open-elsewhere",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: EVENT_DESTROYED_WHILE_OPEN_RULE.requirement,
        source: hip("hipIpcOpenEventHandle"),
        quote: "Operations on the imported event after the exported event has been freed with \
            hipEventDestroy will result in undefined behavior.",
        documented_code: None,
        fix: EVENT_DESTROYED_WHILE_OPEN_RULE.fix,
    };

    pub static OPENED_AFTER_FREE_RULE: Rule = Rule {
        id: "cuIpcOpenMemHandle.handle-of-freed-memory",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "A handle is opened only while the allocation it was made for is alive: \
            once the exporter freed it, the handle names no memory, or (R580 hands out the same \
            handle for memory allocated again at the same address) other memory.",
        source: cuda("cuIpcGetMemHandle"),
        quote: "If a region of memory is freed with ::cuMemFree and a subsequent call to \
            ::cuMemAlloc returns memory with the same device address, ::cuIpcGetMemHandle will \
            return a unique handle for the new memory.",
        documented_code: None,
        fix: "keep the exported memory alive until every importer has opened and closed it, and \
            send a new handle for new memory",
    };

    pub static NEVER_CLOSED_RULE: Rule = Rule {
        id: "cuIpcOpenMemHandle.never-closed",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Every successful open is closed before the importing process ends.",
        source: cuda("cuIpcOpenMemHandle"),
        quote: "Memory returned from ::cuIpcOpenMemHandle must be freed with \
            ::cuIpcCloseMemHandle.",
        documented_code: None,
        fix: "close each opened pointer with cuIpcCloseMemHandle (once per open) when the \
            process is done with it",
    };

    pub static HIP_FREED_WHILE_OPEN_RULE: Rule = Rule {
        id: "hipFree.ipc-memory-open-elsewhere",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: FREED_WHILE_OPEN_RULE.requirement,
        source: hip("hipIpcOpenMemHandle"),
        quote: "Calling hipFree on an exported memory region before calling \
            hipIpcCloseMemHandle in the importing context will result in undefined behavior.",
        documented_code: None,
        fix: "have every importer close its mapping (hipIpcCloseMemHandle) and tell the \
            exporter before it frees",
    };

    pub static HIP_OPENED_AFTER_FREE_RULE: Rule = Rule {
        id: "hipIpcOpenMemHandle.handle-of-freed-memory",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "A handle is opened only while the allocation it was made for is alive.",
        source: hip("hipIpcGetMemHandle"),
        quote: "If a region of memory is freed with hipFree and a subsequent call to hipMalloc \
            returns memory with the same device address, hipIpcGetMemHandle will return a \
            unique handle for the new memory.",
        documented_code: None,
        fix: OPENED_AFTER_FREE_RULE.fix,
    };

    pub static HIP_NEVER_CLOSED_RULE: Rule = Rule {
        id: "hipIpcOpenMemHandle.never-closed",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: NEVER_CLOSED_RULE.requirement,
        source: hip("hipIpcOpenMemHandle"),
        quote: "Memory returned from hipIpcOpenMemHandle must be freed with \
            hipIpcCloseMemHandle.",
        documented_code: None,
        fix: "close each opened pointer with hipIpcCloseMemHandle when the process is done \
            with it",
    };

    /// The report-phase rules and the exact symbols whose calls their findings are attached to
    /// (the catalogue's functions).
    pub static REPORTED_ON: &[(&Rule, &[&str])] = &[
        (&FREED_WHILE_OPEN_RULE, &["cuMemFree_v2"]),
        (&EXPORTER_EXITED_RULE, &["cuIpcGetMemHandle"]),
        (&CONTEXT_DESTROYED_WHILE_OPEN_RULE, &["cuCtxDestroy_v2"]),
        (
            &SECOND_CONTEXT_RULE,
            &["cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"],
        ),
        (
            &UNREACHABLE_RULE,
            &["cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"],
        ),
        (&HIP_UNREACHABLE_RULE, &["hipIpcOpenMemHandle"]),
        (&EVENT_NEVER_DESTROYED_RULE, &["cuIpcOpenEventHandle"]),
        (&HIP_EVENT_NEVER_DESTROYED_RULE, &["hipIpcOpenEventHandle"]),
        (&EVENT_DESTROYED_WHILE_OPEN_RULE, &["cuEventDestroy_v2"]),
        (&HIP_EVENT_DESTROYED_WHILE_OPEN_RULE, &["hipEventDestroy"]),
        (&HIP_EXPORTER_EXITED_RULE, &["hipIpcGetMemHandle"]),
        (
            &OPENED_AFTER_FREE_RULE,
            &["cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"],
        ),
        (
            &NEVER_CLOSED_RULE,
            &["cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"],
        ),
        (&HIP_FREED_WHILE_OPEN_RULE, &["hipFree"]),
        (&HIP_OPENED_AFTER_FREE_RULE, &["hipIpcOpenMemHandle"]),
        (&HIP_NEVER_CLOSED_RULE, &["hipIpcOpenMemHandle"]),
    ];
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

    pub static GET_NOT_EXPORTABLE: Rule = Rule {
        id: "hipIpcGetMemHandle.memory-not-exportable",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "devPtr must be device memory allocated with hipMalloc: managed and host \
            memory cannot be exported. Decided from the allocation (hipPointerGetAttributes), \
            not from the answer: some HIP versions hand out a handle that no importer can use.",
        source: hip("hipIpcGetMemHandle"),
        quote: "Takes a pointer to the base of an existing device memory allocation created \
            with hipMalloc and exports it for use in another process.",
        documented_code: None,
        fix: "allocate memory meant for hipIpcGetMemHandle with hipMalloc",
    };

    pub static GET_EVENT_NOT_INTERPROCESS: Rule = Rule {
        id: "hipIpcGetEventHandle.event-not-interprocess",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The event must have been created with hipEventInterprocess and \
            hipEventDisableTiming (decided from the flags hipEventCreateWithFlags was given).",
        source: hip("hipIpcGetEventHandle"),
        quote: "event - Event allocated with cudaEventInterprocess and \
            cudaEventDisableTiming flags",
        documented_code: None,
        fix: "create the event with hipEventCreateWithFlags(&e, hipEventInterprocess | \
            hipEventDisableTiming)",
    };

    pub static OPEN_FLAGS: Rule = Rule {
        id: "hipIpcOpenMemHandle.flags-not-lazy-enable-peer-access",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "flags must be hipIpcMemLazyEnablePeerAccess of the running runtime: 0 \
            before ROCm 6 and 0x1 from ROCm 6 (the runtime compares flags with its own header's \
            value), judged against hipRuntimeGetVersion. A program built with the other \
            headers misuses this runtime. Where the runtime cannot say its version, only a \
            value that is neither is reported.",
        source: hip("hipIpcOpenMemHandle"),
        quote: "flags - Flags for this operation. Must be specified as \
            hipIpcMemLazyEnablePeerAccess",
        documented_code: Some(INVALID_VALUE),
        fix: "pass hipIpcMemLazyEnablePeerAccess from the headers of the HIP version the \
            program runs with",
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

    pub static OPEN_EVENT_SAME_PROCESS: Rule = Rule {
        id: "hipIpcOpenEventHandle.same-process",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: EVENT_SAME_PROCESS,
        source: hip("hipIpcOpenEventHandle"),
        quote: "Opens an interprocess event handle exported from another process with \
            cudaIpcGetEventHandle. If the function is called within the same process where \
            handle is returned by hipIpcGetEventHandle, it will return hipErrorInvalidContext.",
        documented_code: Some(INVALID_CONTEXT),
        fix: EVENT_SAME_PROCESS_FIX,
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
        rules: &[&cuda::GET_NOT_ALLOCATION_BASE, &cuda::GET_NOT_EXPORTABLE],
    };
    pub static OPEN_CUDA: CheckInfo = CheckInfo {
        name: "ipc.open.cuda",
        rules: &[
            &cuda::OPEN_FLAGS,
            &cuda::OPEN_SAME_PROCESS,
            &cuda::OPEN_SECOND_CONTEXT,
            &cuda::OPENED_AGAIN,
        ],
    };
    pub static GET_HIP: CheckInfo = CheckInfo {
        name: "ipc.get.hip",
        rules: &[&hip::GET_NOT_ALLOCATION_BASE, &hip::GET_NOT_EXPORTABLE],
    };
    pub static OPEN_HIP: CheckInfo = CheckInfo {
        name: "ipc.open.hip",
        rules: &[&hip::OPEN_FLAGS, &hip::OPEN_SAME_PROCESS],
    };
    pub static GET_EVENT_CUDA: CheckInfo = CheckInfo {
        name: "ipc.get-event.cuda",
        rules: &[&cuda::GET_EVENT_NOT_INTERPROCESS],
    };
    pub static GET_EVENT_HIP: CheckInfo = CheckInfo {
        name: "ipc.get-event.hip",
        rules: &[&hip::GET_EVENT_NOT_INTERPROCESS],
    };
    /// Event creation: the flags each event was made with (for the event rules).
    pub static EVENT_CREATED: CheckInfo = CheckInfo {
        name: "ipc.event-created",
        rules: &[],
    };
    pub static OPEN_EVENT_CUDA: CheckInfo = CheckInfo {
        name: "ipc.open-event.cuda",
        rules: &[&cuda::OPEN_EVENT_SAME_PROCESS],
    };
    pub static OPEN_EVENT_HIP: CheckInfo = CheckInfo {
        name: "ipc.open-event.hip",
        rules: &[&hip::OPEN_EVENT_SAME_PROCESS],
    };
    pub static CONTEXT_DESTROYED: CheckInfo = CheckInfo {
        name: "ipc.context-destroyed",
        rules: &[&cuda::CONTEXT_DESTROYED_WHILE_OPEN],
    };
    pub static CLOSE_CUDA: CheckInfo = CheckInfo {
        name: "ipc.close.cuda",
        rules: &[&cuda::CLOSE_NOT_OPENED],
    };
    pub static CLOSE_HIP: CheckInfo = CheckInfo {
        name: "ipc.close.hip",
        rules: &[&hip::CLOSE_NOT_OPENED],
    };
    /// A free of memory this process exported: its stack is kept for the report (no rule of
    /// its own).
    pub static EXPORTED_FREED: CheckInfo = CheckInfo {
        name: "ipc.exported-freed",
        rules: &[],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "ipc",
    title: "IPC memory and event handles",
    checks: &[
        &checks::GET_CUDA,
        &checks::OPEN_CUDA,
        &checks::GET_HIP,
        &checks::OPEN_HIP,
        &checks::GET_EVENT_CUDA,
        &checks::GET_EVENT_HIP,
        &checks::EVENT_CREATED,
        &checks::OPEN_EVENT_CUDA,
        &checks::OPEN_EVENT_HIP,
        &checks::CONTEXT_DESTROYED,
        &checks::CLOSE_CUDA,
        &checks::CLOSE_HIP,
        &checks::EXPORTED_FREED,
    ],
    reported: report::REPORTED_ON,
    engine: &[],
    divergences: &[],
};
