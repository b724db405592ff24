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

    /// The report-phase rules and the exact symbols whose calls their findings are attached to
    /// (the catalogue's functions).
    pub static REPORTED_ON: &[(&Rule, &[&str])] = &[(&FREED_WHILE_OPEN_RULE, &["cuMemFree_v2"])];

    #[cfg(feature = "report")]
    mod check {
        use super::*;
        use crate::crossproc::{Call, ReportCheck, ReportFinding, Timeline};

        /// The exporter's free of memory an importer still had open: exports and opens are matched
        /// by the handle's fingerprint, the free by the exported pointer, the close by the pointer
        /// the open returned; time is each record's wall clock (`ts_ns`), one clock for every
        /// process of a host. An importer that never closed counts as open until its trace ends.
        pub struct FreedWhileOpen;

        pub static FREED_WHILE_OPEN: FreedWhileOpen = FreedWhileOpen;

        impl ReportCheck for FreedWhileOpen {
            fn rules(&self) -> &'static [&'static Rule] {
                static RULES: &[&Rule] = &[&FREED_WHILE_OPEN_RULE];
                RULES
            }
            fn functions(&self) -> &'static [&'static str] {
                &["cuMemFree", "cuIpcCloseMemHandle"]
            }
            fn decide(&self, t: &Timeline) -> Vec<ReportFinding> {
                let mut found = Vec::new();
                for fp in t.fingerprints() {
                    let calls: Vec<&Call> = t.sharing(fp).collect();
                    let Some(export) = calls
                        .iter()
                        .find(|c| c.func == "cuIpcGetMemHandle" && c.succeeded())
                    else {
                        continue;
                    };
                    let Some(exported) = export.arg("dptr") else {
                        continue;
                    };
                    let Some(free) = t.later_in_process(export).find(|c| {
                        c.func.starts_with("cuMemFree")
                            && c.succeeded()
                            && c.arg("dptr") == Some(exported)
                    }) else {
                        continue;
                    };
                    // Opens of other processes before the free, by process and mapping; each
                    // is open until as many successful closes of its pointer (v2 counts opens of
                    // the same handle) came no later than the free.
                    let opens: Vec<&&Call> = calls
                        .iter()
                        .filter(|c| {
                            c.pid != export.pid
                                && c.func.starts_with("cuIpcOpenMemHandle")
                                && c.succeeded()
                                && c.ts_ns < free.ts_ns
                        })
                        .collect();
                    let mut still_open: Vec<i64> = opens
                        .iter()
                        .filter(|open| {
                            let mapped = open.out("pdptr");
                            let opened = opens
                                .iter()
                                .filter(|o| o.pid == open.pid && o.out("pdptr") == mapped)
                                .count();
                            let first = opens
                                .iter()
                                .find(|o| o.pid == open.pid && o.out("pdptr") == mapped)
                                .expect("`open` itself");
                            let closed = t
                                .later_in_process(first)
                                .filter(|c| {
                                    c.func == "cuIpcCloseMemHandle"
                                        && c.succeeded()
                                        && c.arg("dptr") == mapped
                                        && c.ts_ns <= free.ts_ns
                                })
                                .count();
                            closed < opened
                        })
                        .map(|open| open.pid)
                        .collect();
                    // A process that opened the handle more than once is named once.
                    still_open.sort_unstable();
                    still_open.dedup();
                    if !still_open.is_empty() {
                        let pids: Vec<String> = still_open.iter().map(i64::to_string).collect();
                        let exported = exported
                            .as_str()
                            .map_or_else(|| exported.to_string(), str::to_string);
                        found.push(ReportFinding::at(
                            &FREED_WHILE_OPEN_RULE,
                            free,
                            format!(
                            "{} {exported} was exported (cuIpcGetMemHandle) and is still open in \
                             process {} (cuIpcOpenMemHandle, not yet closed)",
                            free.func,
                            pids.join(", ")
                        ),
                        ));
                    }
                }
                found
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
        &report::FREED_WHILE_OPEN_RULE,
        &hip::GET_NOT_ALLOCATION_BASE,
        &hip::OPEN_SAME_PROCESS,
        &hip::CLOSE_NOT_OPENED,
    ],
};
