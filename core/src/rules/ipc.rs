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
        /// each handle (those sharing one fingerprint) with `$decide`.
        macro_rules! report_check {
            ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $decide:ident) => {
                $(#[$doc])*
                pub struct $name;
                pub static $instance: $name = $name;

                impl ReportCheck for $name {
                    fn rules(&self) -> &'static [&'static Rule] {
                        static RULES: &[&Rule] = &[&$rule];
                        RULES
                    }
                    fn functions(&self) -> &'static [&'static str] {
                        READS
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
        /// clock): the successful opens of its process that returned the same pointer, less the
        /// successful closes of it, up to `until` (v2 counts opens of the same handle).
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
                .filter(|o| o.pid == open.pid && o.out(s.open_out) == mapped && o.ts_ns <= until)
                .collect();
            let Some(first) = same.first() else {
                return 0;
            };
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
                let opens: Vec<&Call> = calls
                    .iter()
                    .copied()
                    .filter(|c| c.pid != export.pid && is_open(s, c) && c.ts_ns < free.ts_ns)
                    .collect();
                let mut pids: Vec<i64> = opens
                    .iter()
                    .filter(|open| still_open(t, s, &opens, open, free.ts_ns) > 0)
                    .map(|open| open.pid)
                    .collect();
                // A process that opened the handle more than once is named once.
                pids.sort_unstable();
                pids.dedup();
                if pids.is_empty() {
                    continue;
                }
                let pids: Vec<String> = pids.iter().map(i64::to_string).collect();
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
        rules: &[&cuda::GET_NOT_ALLOCATION_BASE],
    };
    pub static OPEN_CUDA: CheckInfo = CheckInfo {
        name: "ipc.open.cuda",
        rules: &[
            &cuda::OPEN_FLAGS,
            &cuda::OPEN_SAME_PROCESS,
            &cuda::OPENED_AGAIN,
        ],
    };
    pub static GET_HIP: CheckInfo = CheckInfo {
        name: "ipc.get.hip",
        rules: &[&hip::GET_NOT_ALLOCATION_BASE],
    };
    pub static OPEN_HIP: CheckInfo = CheckInfo {
        name: "ipc.open.hip",
        rules: &[&hip::OPEN_SAME_PROCESS],
    };
    pub static GET_EVENT: CheckInfo = CheckInfo {
        name: "ipc.get-event",
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
        &cuda::OPENED_AGAIN,
        &cuda::OPEN_EVENT_SAME_PROCESS,
        &report::FREED_WHILE_OPEN_RULE,
        &report::OPENED_AFTER_FREE_RULE,
        &report::NEVER_CLOSED_RULE,
        &report::HIP_FREED_WHILE_OPEN_RULE,
        &report::HIP_OPENED_AFTER_FREE_RULE,
        &report::HIP_NEVER_CLOSED_RULE,
        &hip::GET_NOT_ALLOCATION_BASE,
        &hip::OPEN_SAME_PROCESS,
        &hip::CLOSE_NOT_OPENED,
        &hip::OPEN_EVENT_SAME_PROCESS,
    ],
};
