//! The stream-ordered memory pool family (CUDA Driver API, "Stream Ordered Memory Allocator"):
//! pools (`cuMemPoolCreate`, `cuMemPoolDestroy`), their allocations (`cuMemAllocFromPoolAsync`,
//! `cuMemAllocAsync` from a device's default pool) and their sharing with other processes
//! (`cuMemPoolExportToShareableHandle` / `cuMemPoolImportFromShareableHandle` for the pool,
//! `cuMemPoolExportPointer` / `cuMemPoolImportPointer` for one allocation). Contract: the doc
//! comment of each function in CUDA 13.5's `cuda.h`. What R580 answers to each misuse:
//! `scripts/gpu/results/*-pool-probe.txt`.
//!
//! Rules rest on what the shim saw this process do since it was loaded: a pool it saw created
//! (its handle types) or imported, an allocation it saw made from a pool. A finding about a pool
//! or pointer the shim saw made is certain; one that rests on an allocation's origin is withdrawn
//! when the driver accepts the call.

use super::{cuda, CheckInfo, Family, Kind, Rule, Severity, Source};

const SECTION: &str = "Stream Ordered Memory Allocator";

const fn source(function: &'static str) -> Source {
    cuda(SECTION, function)
}

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    pub static EXPORT_TYPE_NOT_REQUESTED: Rule = Rule {
        id: "cuMemPoolExportToShareableHandle.type-not-requested",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The pool is IPC capable for handleType: its cuMemPoolCreate asked for that \
            handle type (CUmemPoolProps::handleTypes). A pool created with \
            CU_MEM_HANDLE_TYPE_NONE exports no handle at all. Decided for pools this process \
            created. R580 answers CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemPoolExportToShareableHandle"),
        quote: "To create an IPC capable mempool, create a mempool with a \
            CUmemAllocationHandleType other than CU_MEM_HANDLE_TYPE_NONE.",
        documented_code: None,
        fix: "create the pool with the handle type it is to be exported as \
            (CUmemPoolProps::handleTypes, for example CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)",
    };

    pub static ALLOC_FROM_IMPORTED: Rule = Rule {
        id: "cuMemAllocFromPoolAsync.imported-pool",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "pool is not a pool this process imported \
            (cuMemPoolImportFromShareableHandle): an imported pool makes no new allocations; \
            its memory is reached only through the exporter's pointers \
            (cuMemPoolImportPointer). R580 answers CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemPoolImportFromShareableHandle"),
        quote: "Imported memory pools do not support creating new allocations. As such \
            imported memory pools may not be used in cuDeviceSetMemPool or \
            ::cuMemAllocFromPoolAsync calls.",
        documented_code: None,
        fix: "allocate in the exporting process and share each allocation with \
            cuMemPoolExportPointer / cuMemPoolImportPointer, or create a pool of this process's \
            own",
    };

    pub static EXPORT_FABRIC_WITHOUT_IMEX: Rule = Rule {
        id: "cuMemPoolExportToShareableHandle.fabric-without-imex-channel",
        // Info, as cuMemCreate's: the driver's refusal explained. R580 makes a FABRIC pool without
        // a channel and refuses only its export (measured, pool_probe fabric).
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "A pool created with the FABRIC handle type is shared only where the \
            driver's nvidia-caps-imex-channels device is listed in /proc/devices and an IMEX \
            channel file (/dev/nvidia-caps-imex-channels/channel*) can be opened by the user. \
            Decided when the pool's export answers CUDA_ERROR_NOT_PERMITTED, as R580 does \
            without a channel file (for an export as FABRIC and, of a FABRIC and POSIX fd pool, \
            as POSIX fd too), from what the host has.",
        source: source("cuMemPoolCreate"),
        quote: "Applications that intend to use ::CU_MEM_HANDLE_TYPE_FABRIC based memory sharing \
            must ensure: (1) `nvidia-caps-imex-channels` character device is created by the \
            driver and is listed under /proc/devices (2) have at least one IMEX channel file \
            accessible by the user launching the application.",
        documented_code: None,
        fix: "create an IMEX channel for the user (mknod \
            /dev/nvidia-caps-imex-channels/channel0 c <major of nvidia-caps-imex-channels> 0, \
            as the document shows), or create the pool without CU_MEM_HANDLE_TYPE_FABRIC; do \
            not export its pointers: after the refusal R580 dies in cuMemPoolExportPointer",
    };

    pub static EXPORT_POINTER_NOT_SHARED: Rule = Rule {
        id: "cuMemPoolExportPointer.pool-not-shared",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "ptr is the start of an allocation made from a pool created with a handle \
            type and already shared: exported with cuMemPoolExportToShareableHandle. Memory from \
            a pool created with CU_MEM_HANDLE_TYPE_NONE, from a pool not exported yet or from a \
            device's default pool (cuMemAllocAsync), and a pointer inside an allocation, cannot \
            be exported: R580 answers CUDA_ERROR_INVALID_VALUE to each (and exports the pointer \
            once its pool is exported). Decided from the pools and allocations the shim saw \
            made; withdrawn when the driver accepts, except for a pool the shim saw made and \
            never exported, which is reported before the call: after refusing a FABRIC pool's \
            export (no IMEX channel), R580 dies of SIGSEGV exporting one of its pointers.",
        source: source("cuMemPoolExportPointer"),
        quote: "Constructs \\p shareData_out for sharing a specific allocation from an already \
            shared memory pool.",
        documented_code: None,
        fix: "allocate the memory to share from a pool created with a handle type \
            (cuMemPoolCreate, CUmemPoolProps::handleTypes), export the pool \
            (cuMemPoolExportToShareableHandle), then export the pointer cuMemAllocFromPoolAsync \
            returned",
    };

    pub static IMPORT_POINTER_POOL_NOT_IMPORTED: Rule = Rule {
        id: "cuMemPoolImportPointer.pool-not-imported",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "pool is a pool this process imported (cuMemPoolImportFromShareableHandle), \
            not one it created: a process does not import its own pool's pointers. Decided for \
            pools this process created. R580 answers CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemPoolImportFromShareableHandle"),
        quote: "Specific allocations can be imported from the imported pool with \
            cuMemPoolImportPointer.",
        documented_code: None,
        fix: "in the exporting process use the pointer itself; in another process, import the \
            pool first (cuMemPoolImportFromShareableHandle) and import the pointer into that pool",
    };
}

/// Rules decided by `sharecheck report` over the traces of every process of a job.
pub mod report {
    use super::*;

    pub static FREED_WHILE_IMPORTED_RULE: Rule = Rule {
        id: "cuMemFree.pool-pointer-imported-elsewhere",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The exporter of a pool allocation (cuMemPoolExportPointer) frees it only \
            after every process that imported it (cuMemPoolImportPointer) freed its import. \
            Decided from the traces of both processes, matched by the export data's keyed \
            fingerprint: an import made before the exporter's free and freed after it (or never, \
            in a process that exited after the free) is still held. R580 says nothing: the \
            exporter's free is 0, and the importer's later writes and free are 0 too.",
        source: source("cuMemPoolImportPointer"),
        quote: "The imported memory must be freed from all importing processes before being \
            freed in the exporting process.",
        documented_code: None,
        fix: "have each importer free its import (cuMemFree or cuMemFreeAsync, completed) and \
            tell the exporter (an interprocess event or a message) before the exporter frees \
            the allocation",
    };

    pub static HIP_FREED_WHILE_IMPORTED_RULE: Rule = Rule {
        id: "hipFree.pool-pointer-imported-elsewhere",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The exporter of a pool allocation (hipMemPoolExportPointer) frees it only \
            after every process that imported it (hipMemPoolImportPointer) freed its import. \
            Decided from the traces of both processes, matched by the export data's keyed \
            fingerprint, as for CUDA; the frees read are hipFree's (the shim does not interpose \
            hipFreeAsync). Not measured on AMD hardware.",
        source: crate::rules::hip_in(SECTION, "hipMemPoolImportPointer"),
        quote: "The imported memory must be freed from all importing processes before being \
            freed in the exporting process.",
        documented_code: None,
        fix: "have each importer free its import (hipFree) and tell the exporter (an \
            interprocess event or a message) before the exporter frees the allocation",
    };

    pub static FABRIC_OTHER_DOMAIN_RULE: Rule = Rule {
        id: "cuMemPoolImportFromShareableHandle.fabric-other-imex-domain",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: crate::rules::vmm::report::FABRIC_OTHER_DOMAIN_REQUIREMENT,
        source: source("cuMemPoolImportFromShareableHandle"),
        quote: "If \\p handleType is ::CU_MEM_HANDLE_TYPE_FABRIC and the importer process has \
            not been granted access to the same IMEX channel as the exporter process, this API \
            will error as ::CUDA_ERROR_NOT_PERMITTED.",
        documented_code: None,
        fix: crate::rules::vmm::report::FABRIC_OTHER_DOMAIN_FIX,
    };

    /// Each report-phase rule with the functions whose calls its findings attach to.
    pub static REPORTED_ON: &[(&Rule, &[&str])] = &[
        (
            &FREED_WHILE_IMPORTED_RULE,
            &["cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz"],
        ),
        (&HIP_FREED_WHILE_IMPORTED_RULE, &["hipFree"]),
        (
            &FABRIC_OTHER_DOMAIN_RULE,
            &["cuMemPoolImportFromShareableHandle"],
        ),
    ];
}

/// Rules of the HIP runtime API: the doc comments of HIP 5.2's `hip_runtime_api.h` ("Stream
/// Ordered Memory Allocator", marked beta). What the runtime does with each misuse is read in the
/// ROCm 6.2 CLR (`hipamd/src/hip_mempool.cpp`); no AMD GPU measured it.
pub mod hip {
    use super::*;
    use crate::codes::INVALID_VALUE;

    const fn source(function: &'static str) -> Source {
        super::super::hip_in(SECTION, function)
    }

    super::super::hip_flags_not_zero! {
        SECTION, "flags Must be 0";
        EXPORT_FLAGS_NOT_ZERO = "hipMemPoolExportToShareableHandle";
        IMPORT_FLAGS_NOT_ZERO = "hipMemPoolImportFromShareableHandle";
    }

    pub static EXPORT_NOT_IPC_CAPABLE: Rule = Rule {
        id: "hipMemPoolExportToShareableHandle.pool-not-ipc-capable",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "mem_pool was created (hipMemPoolCreate) with handleTypes other than \
            hipMemHandleTypeNone: only such a pool is IPC capable. The ROCm 6.2 runtime answers \
            hipErrorInvalidValue (it also refuses a handle_type other than the pool's).",
        source: source("hipMemPoolExportToShareableHandle"),
        quote: "To create an IPC capable mempool, create a mempool with a \
            hipMemAllocationHandleType other than hipMemHandleTypeNone.",
        documented_code: Some(INVALID_VALUE),
        fix: "create the pool with handleTypes = hipMemHandleTypePosixFileDescriptor",
    };

    pub static ALLOC_FROM_IMPORTED: Rule = Rule {
        id: "hipMallocFromPoolAsync.imported-pool",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "mem_pool is not a pool this process imported \
            (hipMemPoolImportFromShareableHandle): an imported pool makes no new allocations; \
            its memory is reached only through the exporter's pointers \
            (hipMemPoolImportPointer). The ROCm 6.2 runtime does not look: it allocates from \
            the imported pool's own bookkeeping.",
        source: source("hipMemPoolImportFromShareableHandle"),
        quote: "Imported memory pools do not support creating new allocations. As such imported \
            memory pools may not be used in hipDeviceSetMemPool or hipMallocFromPoolAsync calls.",
        documented_code: None,
        fix: "allocate in the exporting process and share each allocation with \
            hipMemPoolExportPointer / hipMemPoolImportPointer, or create a pool of this \
            process's own",
    };
}

/// The family's checks, by the names the check table uses.
pub mod checks {
    use super::*;

    /// `cuMemPoolCreate`: the pool's handle types (no rule of its own).
    pub static CREATE: CheckInfo = CheckInfo {
        name: "pool.create",
        rules: &[],
    };
    /// `cuMemPoolDestroy`: the pool is forgotten; its allocations live on (R580 frees them later
    /// without complaint).
    pub static DESTROY: CheckInfo = CheckInfo {
        name: "pool.destroy",
        rules: &[],
    };
    /// `cuMemAllocFromPoolAsync`: the pool is not an imported one; the allocation's pool is kept.
    pub static ALLOC: CheckInfo = CheckInfo {
        name: "pool.alloc",
        rules: &[&cuda::ALLOC_FROM_IMPORTED],
    };
    /// `cuMemAllocAsync`: an allocation of a device's default pool (no rule of its own).
    pub static ALLOC_DEFAULT: CheckInfo = CheckInfo {
        name: "pool.alloc-default",
        rules: &[],
    };
    /// Frees: the allocation is forgotten (no rule of its own).
    pub static FREED: CheckInfo = CheckInfo {
        name: "pool.freed",
        rules: &[],
    };
    pub static EXPORT: CheckInfo = CheckInfo {
        name: "pool.export",
        rules: &[
            &cuda::EXPORT_TYPE_NOT_REQUESTED,
            &cuda::EXPORT_FABRIC_WITHOUT_IMEX,
        ],
    };
    /// `cuMemPoolImportFromShareableHandle`: the pool is an imported one (no rule of its own).
    pub static IMPORT: CheckInfo = CheckInfo {
        name: "pool.import",
        rules: &[],
    };
    pub static EXPORT_POINTER: CheckInfo = CheckInfo {
        name: "pool.export-pointer",
        rules: &[&cuda::EXPORT_POINTER_NOT_SHARED],
    };
    pub static IMPORT_POINTER: CheckInfo = CheckInfo {
        name: "pool.import-pointer",
        rules: &[&cuda::IMPORT_POINTER_POOL_NOT_IMPORTED],
    };
    /// HIP's pool calls: a create's handle types, a destroy, an allocation, the pool's export
    /// and import, and a pointer's export and import (traced).
    pub static CREATE_HIP: CheckInfo = CheckInfo {
        name: "pool.create.hip",
        rules: &[],
    };
    pub static DESTROY_HIP: CheckInfo = CheckInfo {
        name: "pool.destroy.hip",
        rules: &[],
    };
    pub static ALLOC_HIP: CheckInfo = CheckInfo {
        name: "pool.alloc.hip",
        rules: &[&hip::ALLOC_FROM_IMPORTED],
    };
    pub static EXPORT_HIP: CheckInfo = CheckInfo {
        name: "pool.export.hip",
        rules: &[&hip::EXPORT_FLAGS_NOT_ZERO, &hip::EXPORT_NOT_IPC_CAPABLE],
    };
    pub static IMPORT_HIP: CheckInfo = CheckInfo {
        name: "pool.import.hip",
        rules: &[&hip::IMPORT_FLAGS_NOT_ZERO],
    };
    pub static POINTER_HIP: CheckInfo = CheckInfo {
        name: "pool.pointer.hip",
        rules: &[],
    };
    /// `hipFree`: a pointer this process exported, its stack kept for the report.
    pub static FREED_HIP: CheckInfo = CheckInfo {
        name: "pool.freed.hip",
        rules: &[],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "pool",
    title: "Stream-ordered memory pools: allocations, and their export and import across \
        processes",
    checks: &[
        &checks::CREATE,
        &checks::DESTROY,
        &checks::ALLOC,
        &checks::ALLOC_DEFAULT,
        &checks::FREED,
        &checks::EXPORT,
        &checks::IMPORT,
        &checks::EXPORT_POINTER,
        &checks::IMPORT_POINTER,
        &checks::CREATE_HIP,
        &checks::DESTROY_HIP,
        &checks::ALLOC_HIP,
        &checks::EXPORT_HIP,
        &checks::IMPORT_HIP,
        &checks::POINTER_HIP,
        &checks::FREED_HIP,
    ],
    reported: report::REPORTED_ON,
    engine: &[],
    divergences: &[],
};
