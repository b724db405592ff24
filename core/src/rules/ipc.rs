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
    #[cfg(feature = "report")]
    pub use check::*;

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

    #[cfg(feature = "report")]
    mod check {
        use super::*;
        use crate::crossproc::{Call, ReportCheck, ReportFinding, Timeline};
        use serde_json::Value;

        /// What the checks read besides the calls that carry a fingerprint.
        const READS: &[&str] = &[
            "cuMemFree",
            "cuIpcCloseMemHandle",
            "cuCtxDestroy",
            "hipFree",
            "hipIpcCloseMemHandle",
        ];

        /// How one API spells the calls of an exchange, and their pointer arguments.
        struct Spelling {
            export: &'static str,
            export_ptr: &'static str,
            /// A prefix (`cuMemFree_v2`, `hipFree`).
            free: &'static str,
            free_ptr: &'static str,
            /// A prefix (both exports of `cuIpcOpenMemHandle`).
            open: &'static str,
            open_out: &'static str,
            close: &'static str,
            close_ptr: &'static str,
        }

        const CUDA: Spelling = Spelling {
            export: "cuIpcGetMemHandle",
            export_ptr: "dptr",
            free: "cuMemFree",
            free_ptr: "dptr",
            open: "cuIpcOpenMemHandle",
            open_out: "pdptr",
            close: "cuIpcCloseMemHandle",
            close_ptr: "dptr",
        };

        const HIP: Spelling = Spelling {
            export: "hipIpcGetMemHandle",
            export_ptr: "devPtr",
            free: "hipFree",
            free_ptr: "ptr",
            open: "hipIpcOpenMemHandle",
            open_out: "devPtr",
            close: "hipIpcCloseMemHandle",
            close_ptr: "devPtr",
        };

        /// A report check of one rule and one API's spelling, which decides over the calls of
        /// each handle (those sharing one fingerprint) with `$decide`, reading the calls of
        /// `$reads` besides (`READS` when not named).
        macro_rules! report_check {
            ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $decide:ident) => {
                report_check!($(#[$doc])* $name, $instance, $rule, $spelling, $decide, READS);
            };
            ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $decide:ident, $reads:ident) => {
                $(#[$doc])*
                pub struct $name;
                pub static $instance: $name = $name;

                impl ReportCheck for $name {
                    fn rules(&self) -> &'static [&'static Rule] {
                        static RULES: &[&Rule] = &[&$rule];
                        RULES
                    }
                    fn functions(&self) -> &'static [&'static str] {
                        $reads
                    }
                    fn decide(&self, t: &Timeline) -> Vec<ReportFinding> {
                        let mut found = Vec::new();
                        for fp in t.fingerprints() {
                            let calls: Vec<&Call> = t.sharing(fp).collect();
                            $decide(t, &calls, &$spelling, &$rule, &mut found);
                        }
                        found
                    }
                }
            };
        }

        fn is_open(s: &Spelling, c: &Call) -> bool {
            c.func.starts_with(s.open) && c.succeeded()
        }

        /// A pointer argument as the trace writes it (`"0x..."`), for messages.
        fn shown(v: &Value) -> String {
            v.as_str().map_or_else(|| v.to_string(), str::to_string)
        }

        /// An export of the handle `calls` share, and the exporter's first later successful free
        /// of the exported pointer (`None`: never freed in its trace).
        fn exports<'t>(
            t: &'t Timeline,
            s: &Spelling,
            calls: &[&'t Call],
        ) -> Vec<(&'t Call, Option<&'t Call>)> {
            calls
                .iter()
                .filter(|c| c.func == s.export && c.succeeded())
                .map(|export| {
                    let freed = export.arg(s.export_ptr).and_then(|exported| {
                        t.later_in_process(export).find(|c| {
                            c.func.starts_with(s.free)
                                && c.succeeded()
                                && c.arg(s.free_ptr) == Some(exported)
                        })
                    });
                    (*export, freed)
                })
                .collect()
        }

        /// How often the mapping `open` returned is still open at `until` (in ns of the wall
        /// clock): the successful opens of its process and context (the record's `"ctx"`) that
        /// returned the same pointer, less the successful closes of it, up to `until` (v2 counts
        /// opens of the same handle); none once that context was destroyed.
        fn still_open(
            t: &Timeline,
            s: &Spelling,
            opens: &[&Call],
            open: &Call,
            until: u64,
        ) -> usize {
            let mapped = open.out(s.open_out);
            let same: Vec<&&Call> = opens
                .iter()
                .filter(|o| {
                    o.pid == open.pid
                        && o.out(s.open_out) == mapped
                        && o.ctx == open.ctx
                        && o.ts_ns <= until
                })
                .collect();
            let Some(first) = same.first() else {
                return 0;
            };
            // The context the mapping was opened in, destroyed since: the mapping went with it.
            let context_gone = open.ctx.as_ref().is_some_and(|ctx| {
                t.later_in_process(first).any(|c| {
                    c.func.starts_with("cuCtxDestroy")
                        && c.succeeded()
                        && c.arg("ctx") == Some(ctx)
                        && c.ts_ns <= until
                })
            });
            if context_gone {
                return 0;
            }
            let closed = t
                .later_in_process(first)
                .filter(|c| {
                    c.func == s.close
                        && c.succeeded()
                        && c.arg(s.close_ptr) == mapped
                        && c.ts_ns <= until
                })
                .count();
            same.len().saturating_sub(closed)
        }

        /// The processes other than the exporter's that have what `export` exported open at
        /// `at` (ns of the wall clock), each named once: opened before, not closed since, its
        /// context not destroyed, and the process not exited (an exit unmaps what it had open;
        /// leaving it open is that process's own finding).
        fn open_elsewhere(
            t: &Timeline,
            s: &Spelling,
            calls: &[&Call],
            export: &Call,
            at: u64,
        ) -> Vec<String> {
            let opens: Vec<&Call> = calls
                .iter()
                .copied()
                .filter(|c| c.pid != export.pid && is_open(s, c) && c.ts_ns < at)
                .collect();
            let mut pids: Vec<i64> = opens
                .iter()
                .filter(|open| {
                    still_open(t, s, &opens, open, at) > 0
                        && t.exited(open.pid).is_none_or(|gone| gone > at)
                })
                .map(|open| open.pid)
                .collect();
            pids.sort_unstable();
            pids.dedup();
            pids.iter().map(i64::to_string).collect()
        }

        report_check!(
            /// The exporter's free of memory an importer still had open: exports and opens
            /// are matched by the handle's fingerprint, the free by the exported pointer, the
            /// close by the pointer the open returned; time is each record's wall clock
            /// (`ts_ns`), one clock for every process of a host. An importer that never closed
            /// counts as open until its trace ends.
            FreedWhileOpen,
            FREED_WHILE_OPEN,
            FREED_WHILE_OPEN_RULE,
            CUDA,
            freed_while_open
        );
        report_check!(
            /// [`FreedWhileOpen`] in HIP.
            HipFreedWhileOpen,
            HIP_FREED_WHILE_OPEN,
            HIP_FREED_WHILE_OPEN_RULE,
            HIP,
            freed_while_open
        );

        fn freed_while_open(
            t: &Timeline,
            calls: &[&Call],
            s: &Spelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            for (export, free) in exports(t, s, calls) {
                let Some(free) = free else { continue };
                let pids = open_elsewhere(t, s, calls, export, free.ts_ns);
                if pids.is_empty() {
                    continue;
                }
                let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
                found.push(ReportFinding::at(
                    rule,
                    free,
                    format!(
                        "{} {exported} was exported ({}) and is still open in process {} ({}, \
                         not yet closed)",
                        free.func,
                        s.export,
                        pids.join(", "),
                        s.open
                    ),
                ));
            }
        }

        report_check!(
            /// An importer's open of a handle whose allocation the exporter had freed by then
            /// (and exported no more since: R580 hands the same handle out for new memory at the
            /// same address, and an open after such a new export is the new memory's).
            OpenedAfterFree,
            OPENED_AFTER_FREE,
            OPENED_AFTER_FREE_RULE,
            CUDA,
            opened_after_free
        );
        report_check!(
            /// [`OpenedAfterFree`] in HIP.
            HipOpenedAfterFree,
            HIP_OPENED_AFTER_FREE,
            HIP_OPENED_AFTER_FREE_RULE,
            HIP,
            opened_after_free
        );

        fn opened_after_free(
            t: &Timeline,
            calls: &[&Call],
            s: &Spelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            let exports = exports(t, s, calls);
            for open in calls.iter().filter(|c| c.func.starts_with(s.open)) {
                // The last export of this handle before the open, by another process.
                let Some((export, Some(free))) = exports
                    .iter()
                    .rev()
                    .find(|(e, _)| e.pid != open.pid && e.ts_ns < open.ts_ns)
                else {
                    continue;
                };
                if free.ts_ns >= open.ts_ns {
                    continue;
                }
                let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
                let answer = match open.ret {
                    Some(0) => "the driver opened it anyway: the memory mapped is not \
                            the memory exported"
                        .to_string(),
                    Some(code) => format!("the driver answered {code}"),
                    None => "the driver's answer is not recorded".to_string(),
                };
                found.push(ReportFinding::at(
                    rule,
                    open,
                    format!(
                        "process {} exported {exported} ({}) and freed it ({}) before this open; \
                         {answer}",
                        export.pid, s.export, free.func
                    ),
                ));
            }
        }

        report_check!(
            /// The exporter's exit (its `exit` record) while an importer still had what it
            /// exported open, and had not freed it before: reported on the export.
            ExporterExited,
            EXPORTER_EXITED,
            EXPORTER_EXITED_RULE,
            CUDA,
            exporter_exited
        );
        report_check!(
            /// [`ExporterExited`] in HIP.
            HipExporterExited,
            HIP_EXPORTER_EXITED,
            HIP_EXPORTER_EXITED_RULE,
            HIP,
            exporter_exited
        );

        report_check!(
            /// The exporter's destroy of the context its exported memory was allocated in (the
            /// export's record names it) while an importer still had the memory open, and had
            /// not freed it before.
            ContextDestroyedWhileOpen,
            CONTEXT_DESTROYED_WHILE_OPEN,
            CONTEXT_DESTROYED_WHILE_OPEN_RULE,
            CUDA,
            context_destroyed_while_open
        );

        fn context_destroyed_while_open(
            t: &Timeline,
            calls: &[&Call],
            s: &Spelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            for (export, free) in exports(t, s, calls) {
                let Some(ctx) = export.ctx.as_ref() else {
                    continue;
                };
                let Some(destroy) = t.later_in_process(export).find(|c| {
                    c.func.starts_with("cuCtxDestroy") && c.succeeded() && c.arg("ctx") == Some(ctx)
                }) else {
                    continue;
                };
                // A free before the destroy is the free's finding.
                if free.is_some_and(|f| f.ts_ns < destroy.ts_ns) {
                    continue;
                }
                let pids = open_elsewhere(t, s, calls, export, destroy.ts_ns);
                if pids.is_empty() {
                    continue;
                }
                let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
                found.push(ReportFinding::at(
                    rule,
                    destroy,
                    format!(
                        "this context held {exported}, exported ({}) and still open in process \
                         {} ({}, not yet closed): the destroy freed it",
                        s.export,
                        pids.join(", "),
                        s.open
                    ),
                ));
            }
        }

        /// An open in a context of a device while another context of that device of the same
        /// process has a handle of the same exporter (another allocation's) open: the opens'
        /// records name their context and device, the exporter is the process whose export
        /// shares the handle's fingerprint.
        pub struct SecondContext;
        pub static SECOND_CONTEXT: SecondContext = SecondContext;

        impl ReportCheck for SecondContext {
            fn rules(&self) -> &'static [&'static Rule] {
                static RULES: &[&Rule] = &[&SECOND_CONTEXT_RULE];
                RULES
            }
            fn functions(&self) -> &'static [&'static str] {
                READS
            }
            fn decide(&self, t: &Timeline) -> Vec<ReportFinding> {
                let s = &CUDA;
                let exporter = |open: &Call| -> Option<i64> {
                    let fps = open.fingerprints();
                    let fp = fps.first()?;
                    t.sharing(fp)
                        .find(|c| {
                            c.func == s.export
                                && c.succeeded()
                                && c.pid != open.pid
                                && c.ts_ns < open.ts_ns
                        })
                        .map(|c| c.pid)
                };
                let opens: Vec<&Call> = t
                    .calls()
                    .iter()
                    .filter(|c| c.func.starts_with(s.open) && c.ctx.is_some() && c.dev.is_some())
                    .collect();
                let held: Vec<&Call> = opens.iter().copied().filter(|c| c.succeeded()).collect();
                let mut found = Vec::new();
                for open in &opens {
                    let Some(from) = exporter(open) else {
                        continue;
                    };
                    let first = held.iter().find(|h| {
                        h.pid == open.pid
                            && h.ts_ns < open.ts_ns
                            && h.dev == open.dev
                            && h.ctx != open.ctx
                            && h.fingerprints() != open.fingerprints()
                            && exporter(h) == Some(from)
                            && still_open(t, s, &held, h, open.ts_ns) > 0
                    });
                    let Some(first) = first else {
                        continue;
                    };
                    let ctx = |c: &Call| c.ctx.as_ref().map(shown).unwrap_or_default();
                    let answer = match open.ret {
                        Some(0) => "the driver opened it anyway".to_string(),
                        Some(code) => format!("the driver answered {code}"),
                        None => "the driver's answer is not recorded".to_string(),
                    };
                    found.push(ReportFinding::at(
                        &SECOND_CONTEXT_RULE,
                        open,
                        format!(
                            "context {} of device {} has a handle of process {from} open \
                             (another allocation's, opened at {}); this open is in context {} \
                             of the same device: {answer}",
                            ctx(first),
                            open.dev.unwrap_or(-1),
                            first.out(s.open_out).map(shown).unwrap_or_default(),
                            ctx(open)
                        ),
                    ));
                }
                found
            }
        }

        report_check!(
            /// An open in a device that cannot access the exported memory's device: the export's
            /// record names the memory's device by UUID, the open's the UUIDs its device cannot
            /// access.
            Unreachable,
            UNREACHABLE,
            UNREACHABLE_RULE,
            CUDA,
            unreachable
        );

        report_check!(
            /// [`Unreachable`] in HIP.
            HipUnreachable,
            HIP_UNREACHABLE,
            HIP_UNREACHABLE_RULE,
            HIP,
            unreachable
        );

        fn unreachable(
            t: &Timeline,
            calls: &[&Call],
            s: &Spelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            for (export, _) in exports(t, s, calls) {
                let Some(there) = export.uuid.as_ref() else {
                    continue;
                };
                for open in calls.iter().filter(|c| {
                    c.pid != export.pid
                        && c.func.starts_with(s.open)
                        && c.ts_ns > export.ts_ns
                        && c.uuid.as_ref() != Some(there)
                        && c.unreachable.contains(there)
                }) {
                    let answer = match open.ret {
                        Some(0) => "the driver opened it anyway".to_string(),
                        Some(code) => format!("the driver answered {code}"),
                        None => "the driver's answer is not recorded".to_string(),
                    };
                    found.push(ReportFinding::at(
                        rule,
                        open,
                        format!(
                            "device {} ({}) of this process cannot access device {there}, where \
                             process {} exported the memory (the peer query says 0): {answer}",
                            open.dev.unwrap_or(-1),
                            open.uuid.as_deref().unwrap_or("?"),
                            export.pid
                        ),
                    ));
                }
            }
        }

        fn exporter_exited(
            t: &Timeline,
            calls: &[&Call],
            s: &Spelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            for (export, free) in exports(t, s, calls) {
                // A free before the exit is the free's finding ([`freed_while_open`]).
                let (None, Some(exit)) = (free, t.exited(export.pid)) else {
                    continue;
                };
                // So is a destroy of the memory's context ([`context_destroyed_while_open`]).
                let destroyed = export.ctx.as_ref().is_some_and(|ctx| {
                    t.later_in_process(export).any(|c| {
                        c.func.starts_with("cuCtxDestroy")
                            && c.succeeded()
                            && c.arg("ctx") == Some(ctx)
                    })
                });
                if destroyed {
                    continue;
                }
                let pids = open_elsewhere(t, s, calls, export, exit);
                if pids.is_empty() {
                    continue;
                }
                let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
                found.push(ReportFinding::at(
                    rule,
                    export,
                    format!(
                        "process {} exited (its memory freed with it) while {exported}, \
                         exported here, was still open in process {} ({}, not yet closed)",
                        export.pid,
                        pids.join(", "),
                        s.open
                    ),
                ));
            }
        }

        /// How one API spells the calls of an event handle's exchange.
        struct EventSpelling {
            export: &'static str,
            export_event: &'static str,
            open: &'static str,
            open_out: &'static str,
            /// A prefix (`cuEventDestroy_v2`, `hipEventDestroy`).
            destroy: &'static str,
            destroy_event: &'static str,
        }

        const CUDA_EVENT: EventSpelling = EventSpelling {
            export: "cuIpcGetEventHandle",
            export_event: "event",
            open: "cuIpcOpenEventHandle",
            open_out: "phEvent",
            destroy: "cuEventDestroy",
            destroy_event: "hEvent",
        };

        const HIP_EVENT: EventSpelling = EventSpelling {
            export: "hipIpcGetEventHandle",
            export_event: "event",
            open: "hipIpcOpenEventHandle",
            open_out: "event",
            destroy: "hipEventDestroy",
            destroy_event: "event",
        };

        /// What the event checks read besides the calls that carry a fingerprint.
        const EVENT_READS: &[&str] = &["cuEventDestroy", "hipEventDestroy"];

        /// The first successful destroy of `event` in the process of `after`, after it.
        fn destroyed<'t>(
            t: &'t Timeline,
            s: &EventSpelling,
            after: &'t Call,
            event: Option<&Value>,
        ) -> Option<&'t Call> {
            let event = event?;
            t.later_in_process(after).find(|c| {
                c.func.starts_with(s.destroy)
                    && c.succeeded()
                    && c.arg(s.destroy_event) == Some(event)
            })
        }

        report_check!(
            /// An importer that ended through `exit` holding an event it opened and never
            /// destroyed.
            EventNeverDestroyed,
            EVENT_NEVER_DESTROYED,
            EVENT_NEVER_DESTROYED_RULE,
            CUDA_EVENT,
            event_never_destroyed,
            EVENT_READS
        );
        report_check!(
            /// [`EventNeverDestroyed`] in HIP.
            HipEventNeverDestroyed,
            HIP_EVENT_NEVER_DESTROYED,
            HIP_EVENT_NEVER_DESTROYED_RULE,
            HIP_EVENT,
            event_never_destroyed,
            EVENT_READS
        );

        fn event_never_destroyed(
            t: &Timeline,
            calls: &[&Call],
            s: &EventSpelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            for open in calls.iter().filter(|c| c.func == s.open && c.succeeded()) {
                let Some(exit) = t.exited(open.pid) else {
                    continue;
                };
                let event = open.out(s.open_out);
                if destroyed(t, s, open, event).is_some_and(|d| d.ts_ns <= exit) {
                    continue;
                }
                let event = event.map(shown).unwrap_or_default();
                found.push(ReportFinding::at(
                    rule,
                    open,
                    format!(
                        "event {event}, opened here, was never destroyed before process {} \
                         exited",
                        open.pid
                    ),
                ));
            }
        }

        report_check!(
            /// The exporter's destroy of an event another process still held its copy of.
            EventDestroyedWhileOpen,
            EVENT_DESTROYED_WHILE_OPEN,
            EVENT_DESTROYED_WHILE_OPEN_RULE,
            CUDA_EVENT,
            event_destroyed_while_open,
            EVENT_READS
        );
        report_check!(
            /// [`EventDestroyedWhileOpen`] in HIP.
            HipEventDestroyedWhileOpen,
            HIP_EVENT_DESTROYED_WHILE_OPEN,
            HIP_EVENT_DESTROYED_WHILE_OPEN_RULE,
            HIP_EVENT,
            event_destroyed_while_open,
            EVENT_READS
        );

        fn event_destroyed_while_open(
            t: &Timeline,
            calls: &[&Call],
            s: &EventSpelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            for export in calls.iter().filter(|c| c.func == s.export && c.succeeded()) {
                let Some(gone) = destroyed(t, s, export, export.arg(s.export_event)) else {
                    continue;
                };
                let mut pids: Vec<i64> = calls
                    .iter()
                    .filter(|open| {
                        open.pid != export.pid
                            && open.func == s.open
                            && open.succeeded()
                            && open.ts_ns < gone.ts_ns
                            && destroyed(t, s, open, open.out(s.open_out))
                                .is_none_or(|d| d.ts_ns > gone.ts_ns)
                            && t.exited(open.pid).is_none_or(|e| e > gone.ts_ns)
                    })
                    .map(|open| open.pid)
                    .collect();
                pids.sort_unstable();
                pids.dedup();
                if pids.is_empty() {
                    continue;
                }
                let pids: Vec<String> = pids.iter().map(i64::to_string).collect();
                found.push(ReportFinding::at(
                    rule,
                    gone,
                    format!(
                        "the event was exported ({}) and process {} still holds its copy ({}, \
                         not yet destroyed): any operation on that copy from now on is undefined",
                        s.export,
                        pids.join(", "),
                        s.open
                    ),
                ));
            }
        }

        report_check!(
            /// An importer that ended through `exit` with an opened mapping it never closed.
            NeverClosed,
            NEVER_CLOSED,
            NEVER_CLOSED_RULE,
            CUDA,
            never_closed
        );
        report_check!(
            /// [`NeverClosed`] in HIP.
            HipNeverClosed,
            HIP_NEVER_CLOSED,
            HIP_NEVER_CLOSED_RULE,
            HIP,
            never_closed
        );

        fn never_closed(
            t: &Timeline,
            calls: &[&Call],
            s: &Spelling,
            rule: &'static Rule,
            found: &mut Vec<ReportFinding>,
        ) {
            let opens: Vec<&Call> = calls.iter().copied().filter(|c| is_open(s, c)).collect();
            let mut reported: Vec<(i64, Option<&Value>)> = Vec::new();
            for open in &opens {
                let Some(exit) = t.exited(open.pid) else {
                    continue;
                };
                let key = (open.pid, open.out(s.open_out));
                if reported.contains(&key) {
                    continue;
                }
                let left = still_open(t, s, &opens, open, exit);
                if left == 0 {
                    continue;
                }
                reported.push(key);
                let mapped = open.out(s.open_out).map(shown).unwrap_or_default();
                found.push(ReportFinding::at(
                    rule,
                    open,
                    format!(
                        "{mapped} was still open ({left} open(s) without a close) when \
                             process {} exited",
                        open.pid
                    ),
                ));
            }
        }
    }
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
        requirement: "flags must be hipIpcMemLazyEnablePeerAccess. Its value is 0 in the HIP \
            headers before ROCm 6 and 0x1 from ROCm 6 (the runtime compares flags with its own \
            header's value), so only a value that is neither is certain misuse.",
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
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "ipc",
    title: "IPC memory and event handles",
    rules: &[
        &cuda::GET_NOT_ALLOCATION_BASE,
        &cuda::GET_NOT_EXPORTABLE,
        &cuda::GET_EVENT_NOT_INTERPROCESS,
        &cuda::OPEN_FLAGS,
        &cuda::OPEN_SAME_PROCESS,
        &cuda::OPEN_SECOND_CONTEXT,
        &cuda::CLOSE_NOT_OPENED,
        &cuda::CONTEXT_DESTROYED_WHILE_OPEN,
        &cuda::OPENED_AGAIN,
        &cuda::OPEN_EVENT_SAME_PROCESS,
        &report::FREED_WHILE_OPEN_RULE,
        &report::OPENED_AFTER_FREE_RULE,
        &report::NEVER_CLOSED_RULE,
        &report::HIP_FREED_WHILE_OPEN_RULE,
        &report::HIP_OPENED_AFTER_FREE_RULE,
        &report::HIP_NEVER_CLOSED_RULE,
        &report::EXPORTER_EXITED_RULE,
        &report::HIP_EXPORTER_EXITED_RULE,
        &report::CONTEXT_DESTROYED_WHILE_OPEN_RULE,
        &report::SECOND_CONTEXT_RULE,
        &report::UNREACHABLE_RULE,
        &report::HIP_UNREACHABLE_RULE,
        &report::EVENT_NEVER_DESTROYED_RULE,
        &report::HIP_EVENT_NEVER_DESTROYED_RULE,
        &report::EVENT_DESTROYED_WHILE_OPEN_RULE,
        &report::HIP_EVENT_DESTROYED_WHILE_OPEN_RULE,
        &hip::GET_NOT_ALLOCATION_BASE,
        &hip::GET_NOT_EXPORTABLE,
        &hip::GET_EVENT_NOT_INTERPROCESS,
        &hip::OPEN_FLAGS,
        &hip::OPEN_SAME_PROCESS,
        &hip::CLOSE_NOT_OPENED,
        &hip::OPEN_EVENT_SAME_PROCESS,
    ],
};
