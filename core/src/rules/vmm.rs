//! The virtual memory management family (CUDA Driver API, "Virtual Memory Management"): physical
//! allocations (`cuMemCreate`, `cuMemRelease`, `cuMemRetainAllocationHandle`, imports), address
//! reservations (`cuMemAddressReserve`, `cuMemAddressFree`), mappings (`cuMemMap`, `cuMemUnmap`)
//! and access (`cuMemSetAccess`). Contract: the doc comment of each function in CUDA 13.5's
//! `cuda.h`. What R580 answers to each misuse: `scripts/gpu/results/*-vmm-probe.txt`.
//!
//! Granularity rules are decided from the arguments and the driver's own
//! `cuMemGetAllocationGranularity` answer for the allocation's properties (certain). Rules on
//! handles, reservations and mappings rest on what the shim saw this process do since it was
//! loaded: inside a reservation the shim saw made, it knows every mapping (certain); elsewhere a
//! finding is withdrawn when the driver accepts the call (the memory may predate the shim).

use super::{cuda, CheckInfo, Family, Kind, Rule, Severity, Source};

const SECTION: &str = "Virtual Memory Management";

const fn source(function: &'static str) -> Source {
    cuda(SECTION, function)
}

const MAP_RESERVED: &str = "This range must be an address reservation previously reserved with \
    ::cuMemAddressReserve, and offset + size must be less than the size of the memory \
    allocation.";

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    pub static CREATE_SIZE_NOT_GRANULAR: Rule = Rule {
        id: "cuMemCreate.size-not-granular",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size is a multiple of the minimum granularity the driver gives for the \
            allocation's properties (cuMemGetAllocationGranularity, \
            CU_MEM_ALLOC_GRANULARITY_MINIMUM). R580 answers CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemCreate"),
        quote: "The size of this allocation must be a multiple of the the value given via \
            ::cuMemGetAllocationGranularity with the ::CU_MEM_ALLOC_GRANULARITY_MINIMUM flag.",
        documented_code: None,
        fix: "round size up to a multiple of the granularity cuMemGetAllocationGranularity gives \
            for the same properties",
    };

    pub static FABRIC_WITHOUT_IMEX: Rule = Rule {
        id: "cuMemCreate.fabric-without-imex-channel",
        // Info: the driver's refusal explained. No call tells a program beforehand whether an
        // IMEX channel is there, so trying FABRIC and falling back is correct use (PyTorch 2.11's
        // expandable segments do it in every process, measured on R580).
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Memory created with the FABRIC handle type needs the driver's \
            nvidia-caps-imex-channels device (listed in /proc/devices) and an IMEX channel file \
            (/dev/nvidia-caps-imex-channels/channel*) the user can open. Decided when the driver \
            answers CUDA_ERROR_NOT_PERMITTED, as R580 does without a channel file, from what the \
            host has.",
        source: source("cuMemCreate"),
        quote: "Applications that intend to use ::CU_MEM_HANDLE_TYPE_FABRIC based memory sharing \
            must ensure: (1) `nvidia-caps-imex-channels` character device is created by the \
            driver and is listed under /proc/devices (2) have at least one IMEX channel file \
            accessible by the user launching the application.",
        documented_code: None,
        fix: "create an IMEX channel for the user (mknod \
            /dev/nvidia-caps-imex-channels/channel0 c <major of nvidia-caps-imex-channels> 0, \
            as the document shows), or request a handle type other than FABRIC",
    };

    pub static MAP_NOT_GRANULAR: Rule = Rule {
        id: "cuMemMap.not-granular",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "ptr, size and offset are multiples of the minimum granularity of the \
            allocation's properties (cuMemGetAllocationGranularity, \
            CU_MEM_ALLOC_GRANULARITY_MINIMUM). Decided for allocations this process created. \
            R580 answers CUDA_ERROR_NOT_SUPPORTED.",
        source: source("cuMemMap"),
        quote: "Both ptr, size, and offset must be a multiple of the value given via \
            ::cuMemGetAllocationGranularity with the ::CU_MEM_ALLOC_GRANULARITY_MINIMUM flag.",
        documented_code: None,
        fix: "align ptr, size and offset to the allocation granularity",
    };

    pub static MAP_PAST_ALLOCATION: Rule = Rule {
        id: "cuMemMap.past-allocation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "offset + size stays within the allocation (\"less than\" its size is read \
            as \"at most\", as every driver accepts a mapping of the whole allocation). Decided \
            for allocations this process created. R580 answers CUDA_ERROR_NOT_SUPPORTED.",
        source: source("cuMemMap"),
        quote: MAP_RESERVED,
        documented_code: None,
        fix: "map at most the allocation's size from offset",
    };

    pub static MAP_NOT_RESERVED: Rule = Rule {
        id: "cuMemMap.not-in-reservation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "[ptr, ptr + size) lies inside one address range this process reserved \
            with cuMemAddressReserve and has not freed. Rests on the reservations the shim saw: \
            withdrawn when the driver accepts. R580 answers CUDA_ERROR_NOT_SUPPORTED for a range \
            outside every reservation.",
        source: source("cuMemMap"),
        quote: MAP_RESERVED,
        documented_code: None,
        fix: "reserve the range first (cuMemAddressReserve) and map inside it",
    };

    pub static MAP_ALREADY_MAPPED: Rule = Rule {
        id: "cuMemMap.already-mapped",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Nothing is mapped in [ptr, ptr + size) yet. R580 answers \
            CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemMap"),
        quote: "::cuMemMap can only create mappings on VA range reservations that are not \
            currently mapped.",
        documented_code: None,
        fix: "unmap the range first (cuMemUnmap), or map into a part of the reservation that is \
            not mapped",
    };

    pub static UNMAP_NOT_WHOLE: Rule = Rule {
        id: "cuMemUnmap.not-whole-mapping",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "[ptr, ptr + size) is exactly one or more whole mappings made with cuMemMap, \
            with no unmapped gap. R580 answers CUDA_ERROR_INVALID_VALUE to a sub-range of a \
            mapping, and accepts (doing nothing there) a range or part of a range where nothing \
            is mapped: reported in both cases, inside a reservation the shim saw made.",
        source: source("cuMemUnmap"),
        quote: "The range must be the entire contiguous address range that was mapped to. In \
            other words, ::cuMemUnmap cannot unmap a sub-range of an address range mapped by \
            ::cuMemCreate / ::cuMemMap.",
        documented_code: None,
        fix: "unmap exactly the ranges cuMemMap mapped, each once",
    };

    pub static SET_ACCESS_NOT_MAPPED: Rule = Rule {
        id: "cuMemSetAccess.range-not-mapped",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "[ptr, ptr + size) is fully mapped and made of whole mappings (R580 refuses \
            a range that starts inside a mapping, with CUDA_ERROR_INVALID_VALUE, as it refuses \
            one that runs into unmapped space).",
        source: source("cuMemSetAccess"),
        quote: "The range must be a fully mapped address range containing all allocations \
            created by ::cuMemMap / ::cuMemCreate.",
        documented_code: None,
        fix: "set access on the whole ranges cuMemMap mapped",
    };

    pub static ADDRESS_FREE_NOT_RESERVATION: Rule = Rule {
        id: "cuMemAddressFree.not-reservation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "ptr and size are exactly a reservation cuMemAddressReserve returned and \
            not freed since. Rests on the reservations the shim saw: withdrawn when the driver \
            accepts. R580 answers CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemAddressFree"),
        quote: "The size must match what was given to memAddressReserve and the ptr given must \
            match what was returned from memAddressReserve.",
        documented_code: None,
        fix: "free each reservation once, with the pointer and size of its cuMemAddressReserve",
    };

    pub static EXPORT_TYPE_NOT_REQUESTED: Rule = Rule {
        id: "cuMemExportToShareableHandle.type-not-requested",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "handleType is one of the handle types the allocation's create requested \
            (CUmemAllocationProp::requestedHandleTypes): a type it did not request allows no \
            export of that kind. Decided for allocations this process created. R580 answers \
            CUDA_ERROR_INVALID_VALUE.",
        source: source("cuMemExportToShareableHandle"),
        quote: "CU_MEM_HANDLE_TYPE_NONE: Does not allow any export mechanism. \
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: Allows a file descriptor to be used for \
            exporting. CU_MEM_HANDLE_TYPE_FABRIC: Allows a fabric handle to be used for \
            exporting.",
        documented_code: None,
        fix: "request the handle type when creating the memory (requestedHandleTypes of \
            cuMemCreate), or export as a type it requested",
    };

    pub static USED_BEFORE_ACCESS: Rule = Rule {
        id: "vmm.used-before-access",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A copy or memset names VMM memory only after cuMemSetAccess gave its \
            mapping access. Checked on the copies and memsets the shim observes, for mappings \
            this process made and gave no device access to. R580 answers \
            CUDA_ERROR_INVALID_VALUE, to the synchronous and the asynchronous calls alike, \
            without a fault. Rests on what the shim saw: withdrawn when the driver accepts.",
        source: source("cuMemMap"),
        quote: "Please note calling ::cuMemMap does not make the address accessible, the caller \
            needs to update accessibility of a contiguous mapped VA range by calling \
            ::cuMemSetAccess.",
        documented_code: None,
        fix: "give the mapping access (cuMemSetAccess, for the devices that use it) before any \
            copy, memset or kernel touches it",
    };

    pub static RELEASE_NOT_LIVE: Rule = Rule {
        id: "cuMemRelease.handle-not-live",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "handle is a handle this process holds a reference to: created \
            (cuMemCreate), imported (cuMemImportFromShareableHandle) or retained \
            (cuMemRetainAllocationHandle), and released fewer times than that. Undefined \
            behaviour by the document; R580 answers CUDA_ERROR_INVALID_VALUE. Rests on what the \
            shim saw: withdrawn when the driver accepts.",
        source: source("cuMemRelease"),
        quote: "If handle is not a valid handle the behavior is undefined.",
        documented_code: None,
        fix: "release each handle once per create, import or retain",
    };
}

/// Rules of the HIP runtime API: the doc comments of HIP 5.2's `hip_runtime_api.h` ("Virtual Memory
/// Management", marked beta). What the runtime does with each misuse is read in the ROCm 6.2
/// CLR (`hipamd/src/hip_vm.cpp`); no AMD GPU measured it.
pub mod hip {
    use super::*;
    use crate::codes::INVALID_VALUE;

    const fn source(function: &'static str) -> Source {
        super::super::hip_in(SECTION, function)
    }

    super::super::hip_flags_not_zero! {
        SECTION, "flags - currently unused, must be zero.";
        CREATE_FLAGS_NOT_ZERO = "hipMemCreate";
        RESERVE_FLAGS_NOT_ZERO = "hipMemAddressReserve";
        EXPORT_FLAGS_NOT_ZERO = "hipMemExportToShareableHandle";
        MAP_FLAGS_NOT_ZERO = "hipMemMap";
    }

    pub static MAP_OFFSET_NOT_ZERO: Rule = Rule {
        id: "hipMemMap.offset-not-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "offset is 0: HIP maps an allocation from its start. The ROCm 6.2 runtime \
            answers hipErrorInvalidValue.",
        source: source("hipMemMap"),
        quote: "offset - offset into the memory, currently must be zero.",
        documented_code: Some(INVALID_VALUE),
        fix: "map from offset 0, and create one allocation per piece that needs its own mapping",
    };

    pub static RELEASE_NOT_HELD: Rule = Rule {
        id: "hipMemRelease.not-held",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "handle is one hipMemCreate (or an import or retain) gave this process and \
            not released as often since. The ROCm 6.2 runtime does not look: it drops a \
            reference of whatever handle points to and answers hipSuccess, so a second release \
            frees the allocation's bookkeeping under the runtime (a use after free). Certain \
            for a handle the shim saw released as often as it was taken, and then reported \
            before the call; for a handle the shim never saw, withdrawn when the runtime \
            accepts.",
        source: source("hipMemRelease"),
        quote: "Release a memory handle representing a memory allocation which was previously \
            allocated through hipMemCreate.",
        documented_code: None,
        fix: "release each handle once per create, import or retain, and never use it after",
    };

    pub static ADDRESS_FREE_NOT_RESERVATION: Rule = Rule {
        id: "hipMemAddressFree.not-reservation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "devPtr and size are a reservation hipMemAddressReserve returned and not \
            freed since. The ROCm 6.2 runtime logs \"Cannot find the Virtual MemObj entry\" and \
            then dereferences the missing entry (rocclr's Device::virtualFree); the current CLR \
            answers hipErrorInvalidValue instead. Certain for an address inside a reservation \
            the shim saw made, or the start of one it saw freed, and then reported before the \
            call; for an address the shim never saw reserved, withdrawn when the runtime \
            accepts.",
        source: source("hipMemAddressFree"),
        quote: "Frees an address range reservation made via hipMemAddressReserve",
        documented_code: None,
        fix: "free each reservation once, with the pointer and size hipMemAddressReserve gave",
    };
}

/// Rules decided by `sharecheck report` from a process's trace: what it left at its exit
/// (`crate::crossproc::vmm`). Info: the driver frees what a process holds when it ends, so
/// holding memory until then is harmless (PyTorch's caching allocator keeps its expandable
/// segments mapped to the end, measured on R580); the finding says where a process took memory
/// it never gave back, which in a long-running one is memory held for nothing.
pub mod report {
    use super::*;

    pub static NEVER_RELEASED_RULE: Rule = Rule {
        id: "cuMemCreate.never-released",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every reference a process takes to an allocation handle (cuMemCreate, \
            cuMemImportFromShareableHandle, cuMemRetainAllocationHandle, and cuMulticastCreate \
            of a multicast object, which cuMemRelease releases too) is released with \
            cuMemRelease before the process ends: until then the memory stays allocated. \
            Decided from the trace of a process that ended through exit; each reference left \
            is reported on the call that took it.",
        source: source("cuMemRelease"),
        quote: "The memory allocation will be freed when all outstanding mappings to the memory \
            are unmapped and when all outstanding references to the handle (including it's \
            shareable counterparts) are also released. ... Each time a recipient process \
            imports a shareable handle, it needs to pair it with ::cuMemRelease for the handle \
            to be freed.",
        documented_code: None,
        fix: "release each handle once per create, import or retain (cuMemRelease) when the \
            process is done with it",
    };

    pub static NEVER_UNMAPPED_RULE: Rule = Rule {
        id: "cuMemMap.never-unmapped",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every mapping a process makes (cuMemMap) is unmapped (cuMemUnmap) before \
            the process ends: a mapping keeps its memory allocated after its handle is \
            released. Decided from the trace of a process that ended through exit.",
        source: source("cuMemUnmap"),
        quote: "Any backing memory allocations will be freed if there are no existing mappings \
            and there are no unreleased memory handles.",
        documented_code: None,
        fix: "unmap each mapping (cuMemUnmap) when the process is done with the memory",
    };

    pub static NEVER_FREED_RULE: Rule = Rule {
        id: "cuMemAddressReserve.never-freed",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every address range a process reserves (cuMemAddressReserve) is freed \
            (cuMemAddressFree) before the process ends. Decided from the trace of a process \
            that ended through exit.",
        source: source("cuMemAddressFree"),
        quote: "Frees a virtual address range reserved by cuMemAddressReserve.",
        documented_code: None,
        fix: "free each reservation (cuMemAddressFree) once its mappings are unmapped",
    };

    pub static FD_NEVER_CLOSED_RULE: Rule = Rule {
        id: "cuMemExportToShareableHandle.fd-never-closed",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every POSIX file descriptor a process exports (cuMemExportToShareableHandle \
            with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) is closed once it has been passed on: \
            while any process holds it open, the allocation stays allocated, after every \
            release and unmap. Decided at the exit of the exporting process, by the \
            descriptor's number: still open, and a file of the kind the process's first export \
            gave (on R580 every export is /dev/nvidiactl, and the driver's own later \
            descriptors are other devices and eventfds). A number the program closed and reused \
            for a descriptor of that same kind (a peer's export received over a socket) reads \
            as still open; an export the shim did not see is not judged.",
        source: source("cuMemExportToShareableHandle"),
        quote: "Once all shareable handles are closed and the allocation is released, the \
            allocated memory referenced will be released back to the OS and uses of the CUDA \
            handle afterward will lead to undefined behavior.",
        documented_code: None,
        fix: "close the exported descriptor (close) once it has been sent to the other process \
            (the receiver holds its own copy), and have the receiver close its copy once it \
            imported it",
    };

    const fn hip_source(function: &'static str) -> Source {
        super::super::hip_in(SECTION, function)
    }

    pub static HIP_NEVER_RELEASED_RULE: Rule = Rule {
        id: "hipMemCreate.never-released",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every reference a HIP process takes to an allocation handle (hipMemCreate, \
            hipMemImportFromShareableHandle, hipMemRetainAllocationHandle) is released with \
            hipMemRelease before the process ends: until then the ROCm runtime keeps the \
            allocation. Decided from the trace of a process that ended through exit, or live at \
            the exit of a process that writes none; each reference left is reported on the call \
            that took it.",
        source: hip_source("hipMemRelease"),
        quote: "Release a memory handle representing a memory allocation which was previously \
            allocated through hipMemCreate.",
        documented_code: None,
        fix: "release each handle once per create, import or retain (hipMemRelease) when the \
            process is done with it",
    };

    pub static HIP_NEVER_UNMAPPED_RULE: Rule = Rule {
        id: "hipMemMap.never-unmapped",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every mapping a HIP process makes (hipMemMap) is unmapped (hipMemUnmap) \
            before the process ends. Decided from the trace of a process that ended through \
            exit, or live at the exit of a process that writes none.",
        source: hip_source("hipMemUnmap"),
        quote: "Unmap memory allocation of a given address range.",
        documented_code: None,
        fix: "unmap each mapping (hipMemUnmap) when the process is done with the memory",
    };

    pub static HIP_NEVER_FREED_RULE: Rule = Rule {
        id: "hipMemAddressReserve.never-freed",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Every address range a HIP process reserves (hipMemAddressReserve) is \
            freed (hipMemAddressFree) before the process ends. Decided from the trace of a \
            process that ended through exit, or live at the exit of a process that writes \
            none.",
        source: hip_source("hipMemAddressFree"),
        quote: "Frees an address range reservation made via hipMemAddressReserve",
        documented_code: None,
        fix: "free each reservation (hipMemAddressFree) once its mappings are unmapped",
    };

    /// What a FABRIC import across IMEX domains is, for the VMM import and the pool import.
    pub const FABRIC_OTHER_DOMAIN_REQUIREMENT: &str = "A FABRIC handle is imported only by a \
        process granted access to the same IMEX channel as the exporter process, and an IMEX \
        channel reaches only the nodes of one IMEX domain (the nodes whose IMEX services know \
        each other: the node list of /etc/nvidia-imex/nodes_config.cfg). Decided from the traces \
        of both processes, on another node or the same one: a failed import is matched to its \
        export by the handle's keyed fingerprint, and the two process records name different \
        IMEX domains (from each node's IMEX configuration, or SHARECHECK_IMEX_DOMAIN where the \
        configuration is not visible, as in a container). Where either domain is not known, \
        nothing is said.";
    pub const FABRIC_OTHER_DOMAIN_FIX: &str = "import a FABRIC handle only in a process on a node \
        of the exporter's IMEX domain (both nodes in the same IMEX node list, their IMEX services \
        running); between IMEX domains, move the data another way (NCCL over the network, or a \
        copy through host memory)";

    pub static FABRIC_OTHER_DOMAIN_RULE: Rule = Rule {
        id: "cuMemImportFromShareableHandle.fabric-other-imex-domain",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: FABRIC_OTHER_DOMAIN_REQUIREMENT,
        source: source("cuMemImportFromShareableHandle"),
        quote:
            "If \\p shHandleType is ::CU_MEM_HANDLE_TYPE_FABRIC and the importer process has not \
            been granted access to the same IMEX channel as the exporter process, this API will \
            error as ::CUDA_ERROR_NOT_PERMITTED.",
        documented_code: None,
        fix: FABRIC_OTHER_DOMAIN_FIX,
    };

    /// The report-phase rules and the exact symbols whose calls their findings are attached to.
    pub static REPORTED_ON: &[(&Rule, &[&str])] = &[
        (
            &FABRIC_OTHER_DOMAIN_RULE,
            &["cuMemImportFromShareableHandle"],
        ),
        (
            &NEVER_RELEASED_RULE,
            &[
                "cuMemCreate",
                "cuMemImportFromShareableHandle",
                "cuMemRetainAllocationHandle",
                "cuMulticastCreate",
            ],
        ),
        (&NEVER_UNMAPPED_RULE, &["cuMemMap"]),
        (&NEVER_FREED_RULE, &["cuMemAddressReserve"]),
        (&FD_NEVER_CLOSED_RULE, &["cuMemExportToShareableHandle"]),
        (
            &HIP_NEVER_RELEASED_RULE,
            &[
                "hipMemCreate",
                "hipMemImportFromShareableHandle",
                "hipMemRetainAllocationHandle",
            ],
        ),
        (&HIP_NEVER_UNMAPPED_RULE, &["hipMemMap"]),
        (&HIP_NEVER_FREED_RULE, &["hipMemAddressReserve"]),
    ];
}

pub mod checks {
    use super::*;

    pub static CREATE: CheckInfo = CheckInfo {
        name: "vmm.create",
        rules: &[&cuda::CREATE_SIZE_NOT_GRANULAR, &cuda::FABRIC_WITHOUT_IMEX],
    };
    pub static RELEASE: CheckInfo = CheckInfo {
        name: "vmm.release",
        rules: &[&cuda::RELEASE_NOT_LIVE],
    };
    /// Imports and retains: a reference to a handle.
    pub static REFERENCED: CheckInfo = CheckInfo {
        name: "vmm.referenced",
        rules: &[],
    };
    /// An export to a shareable handle (its record: the handle and the type; never the
    /// shareable handle's bytes, a capability).
    pub static EXPORT: CheckInfo = CheckInfo {
        name: "vmm.export",
        rules: &[&cuda::EXPORT_TYPE_NOT_REQUESTED],
    };
    pub static RESERVE: CheckInfo = CheckInfo {
        name: "vmm.reserve",
        rules: &[],
    };
    pub static ADDRESS_FREE: CheckInfo = CheckInfo {
        name: "vmm.address-free",
        rules: &[&cuda::ADDRESS_FREE_NOT_RESERVATION],
    };
    pub static MAP: CheckInfo = CheckInfo {
        name: "vmm.map",
        rules: &[
            &cuda::MAP_NOT_GRANULAR,
            &cuda::MAP_PAST_ALLOCATION,
            &cuda::MAP_NOT_RESERVED,
            &cuda::MAP_ALREADY_MAPPED,
        ],
    };
    pub static UNMAP: CheckInfo = CheckInfo {
        name: "vmm.unmap",
        rules: &[&cuda::UNMAP_NOT_WHOLE],
    };
    pub static SET_ACCESS: CheckInfo = CheckInfo {
        name: "vmm.set-access",
        rules: &[&cuda::SET_ACCESS_NOT_MAPPED],
    };
    /// Copies and memsets: memory they name that was mapped and never given access.
    pub static USE: CheckInfo = CheckInfo {
        name: "vmm.use",
        rules: &[&cuda::USED_BEFORE_ACCESS],
    };
    pub static CREATE_HIP: CheckInfo = CheckInfo {
        name: "vmm.create.hip",
        rules: &[&hip::CREATE_FLAGS_NOT_ZERO],
    };
    pub static RELEASE_HIP: CheckInfo = CheckInfo {
        name: "vmm.release.hip",
        rules: &[&hip::RELEASE_NOT_HELD],
    };
    pub static REFERENCED_HIP: CheckInfo = CheckInfo {
        name: "vmm.referenced.hip",
        rules: &[],
    };
    pub static EXPORT_HIP: CheckInfo = CheckInfo {
        name: "vmm.export.hip",
        rules: &[&hip::EXPORT_FLAGS_NOT_ZERO],
    };
    pub static RESERVE_HIP: CheckInfo = CheckInfo {
        name: "vmm.reserve.hip",
        rules: &[&hip::RESERVE_FLAGS_NOT_ZERO],
    };
    pub static ADDRESS_FREE_HIP: CheckInfo = CheckInfo {
        name: "vmm.address-free.hip",
        rules: &[&hip::ADDRESS_FREE_NOT_RESERVATION],
    };
    pub static MAP_HIP: CheckInfo = CheckInfo {
        name: "vmm.map.hip",
        rules: &[&hip::MAP_FLAGS_NOT_ZERO, &hip::MAP_OFFSET_NOT_ZERO],
    };
    pub static UNMAP_HIP: CheckInfo = CheckInfo {
        name: "vmm.unmap.hip",
        rules: &[],
    };
    pub static SET_ACCESS_HIP: CheckInfo = CheckInfo {
        name: "vmm.set-access.hip",
        rules: &[],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "vmm",
    title: "Virtual memory management: allocations, reservations, mappings, access",
    checks: &[
        &checks::CREATE,
        &checks::RELEASE,
        &checks::REFERENCED,
        &checks::EXPORT,
        &checks::RESERVE,
        &checks::ADDRESS_FREE,
        &checks::MAP,
        &checks::UNMAP,
        &checks::SET_ACCESS,
        &checks::USE,
        &checks::CREATE_HIP,
        &checks::RELEASE_HIP,
        &checks::REFERENCED_HIP,
        &checks::EXPORT_HIP,
        &checks::RESERVE_HIP,
        &checks::ADDRESS_FREE_HIP,
        &checks::MAP_HIP,
        &checks::UNMAP_HIP,
        &checks::SET_ACCESS_HIP,
    ],
    reported: report::REPORTED_ON,
    engine: &[],
    divergences: &[],
};
