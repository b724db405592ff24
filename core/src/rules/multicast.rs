//! The multicast family (CUDA Driver API, "Multicast Object Management"): multicast objects
//! (`cuMulticastCreate`), their teams (`cuMulticastAddDevice`) and the memory bound to them
//! (`cuMulticastBindMem`, `cuMulticastBindAddr`, their 13.1 `_v2` forms, `cuMulticastUnbind`).
//! Contract: the doc comment of each function in CUDA 13.5's `cuda.h`. No multicast object is
//! ever created on the project's GPU machines: the rules are proven on the simulated driver, which
//! models the documentation (LD_PRELOAD.md, "Multicast objects").
//!
//! Granularity rules are decided from the arguments and the driver's own
//! `cuMulticastGetGranularity` answer for the object's properties (certain). Rules on a team rest
//! on the objects this process created and the devices it added: a team whose every device was
//! added here is known whole; devices other processes add to an exported object are not seen,
//! so nothing is decided about the members of a team this process did not fill.

use super::{cuda, CheckInfo, Family, Kind, Rule, Severity, Source};

const SECTION: &str = "Multicast Object Management";

const fn source(function: &'static str) -> Source {
    cuda(SECTION, function)
}

const MEMORY_ON_TEAM: &str = "The memory allocation must have beeen created on one of the \
    devices that was added to the multicast team via ::cuMulticastAddDevice.";

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    pub static CREATE_SIZE_NOT_GRANULAR: Rule = Rule {
        id: "cuMulticastCreate.size-not-granular",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "CUmulticastObjectProp::size is a multiple of the minimum granularity the \
            driver gives for the object's properties (cuMulticastGetGranularity, \
            CU_MULTICAST_GRANULARITY_MINIMUM: 2 MiB on R580).",
        source: source("cuMulticastCreate"),
        quote: "This size must be a multiple of the value returned by \
            ::cuMulticastGetGranularity with the flag ::CU_MULTICAST_GRANULARITY_MINIMUM.",
        documented_code: None,
        fix: "round CUmulticastObjectProp::size up to a multiple of the granularity \
            cuMulticastGetGranularity gives (CU_MULTICAST_GRANULARITY_RECOMMENDED for best \
            performance)",
    };

    pub static CREATE_FLAGS: Rule = Rule {
        id: "cuMulticastCreate.flags-not-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "CUmulticastObjectProp::flags is 0.",
        source: source("cuMulticastCreate"),
        quote: "Flags for future use, must be zero now",
        documented_code: None,
        fix: "zero the properties (memset) before setting numDevices, size and handleTypes",
    };

    pub static ADD_TEAM_FULL: Rule = Rule {
        id: "cuMulticastAddDevice.team-full",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A multicast team holds the CUmulticastObjectProp::numDevices devices its \
            create named, each once: a device added to a team whose every device this process \
            already added, or added twice, is not part of it. Decided for objects this process \
            created.",
        source: source("cuMulticastAddDevice"),
        quote: "The added device will be a part of the multicast team of size specified by \
            CUmulticastObjectProp::numDevices during ::cuMulticastCreate.",
        documented_code: None,
        fix: "create the object with numDevices equal to the devices that will bind memory to \
            it, and add each of them once",
    };

    pub static BIND_MEM_NOT_GRANULAR: Rule = Rule {
        id: "cuMulticastBindMem.not-granular",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size, mcOffset and memOffset are multiples of the object's minimum \
            granularity (cuMulticastGetGranularity, CU_MULTICAST_GRANULARITY_MINIMUM). Decided \
            for objects this process created.",
        source: source("cuMulticastBindMem"),
        quote: "The intended \\p size of the bind, the offset in the multicast range \\p \
            mcOffset as well as the offset in the memory \\p memOffset must be a multiple of \
            the value returned by ::cuMulticastGetGranularity with the flag \
            ::CU_MULTICAST_GRANULARITY_MINIMUM.",
        documented_code: None,
        fix: "bind whole granules: round size, mcOffset and memOffset to the granularity \
            cuMulticastGetGranularity gives",
    };

    pub static BIND_ADDR_NOT_GRANULAR: Rule = Rule {
        id: "cuMulticastBindAddr.not-granular",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size, mcOffset and memptr are multiples of the object's minimum \
            granularity (cuMulticastGetGranularity, CU_MULTICAST_GRANULARITY_MINIMUM). Decided \
            for objects this process created.",
        source: source("cuMulticastBindAddr"),
        quote: "The intended \\p size of the bind, the offset in the multicast range \\p \
            mcOffset and \\p memptr must be a multiple of the value returned by \
            ::cuMulticastGetGranularity with the flag ::CU_MULTICAST_GRANULARITY_MINIMUM.",
        documented_code: None,
        fix: "bind whole granules: map the memory at a granular address and round size and \
            mcOffset to the granularity cuMulticastGetGranularity gives",
    };

    pub static BIND_PAST_MEMORY: Rule = Rule {
        id: "cuMulticastBindMem.past-memory",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "memOffset + size lies within the allocation memHandle names. Decided for \
            allocations this process created (cuMemCreate).",
        source: source("cuMulticastBindMem"),
        quote: "The \\p size + \\p memOffset cannot be larger than the size of the allocated \
            memory.",
        documented_code: None,
        fix: "bind at most the allocation's size less memOffset",
    };

    pub static BIND_MEM_PAST_OBJECT: Rule = Rule {
        id: "cuMulticastBindMem.past-object",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "mcOffset + size lies within the multicast object (its \
            CUmulticastObjectProp::size). Decided for objects this process created.",
        source: source("cuMulticastBindMem"),
        quote: "Similarly the \\p size + \\p mcOffset cannot be larger than the size of the \
            multicast object.",
        documented_code: None,
        fix: "bind at most the object's size less mcOffset, or create a larger object",
    };

    pub static BIND_ADDR_PAST_OBJECT: Rule = Rule {
        id: "cuMulticastBindAddr.past-object",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "mcOffset + size lies within the multicast object (its \
            CUmulticastObjectProp::size). Decided for objects this process created.",
        source: source("cuMulticastBindAddr"),
        quote: "Similarly the \\p size + \\p mcOffset cannot be larger than the total size of \
            the multicast object.",
        documented_code: None,
        fix: "bind at most the object's size less mcOffset, or create a larger object",
    };

    pub static BIND_MEMORY_NOT_ON_TEAM: Rule = Rule {
        id: "multicast.bind-memory-not-on-team",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The bound memory was created on a device of the team. Decided where this \
            process added every device of the team (it is known whole) and created the memory \
            (cuMemCreate, its location).",
        source: source("cuMulticastBindMem"),
        quote: MEMORY_ON_TEAM,
        documented_code: None,
        fix: "bind memory created on a device added to the team (cuMulticastAddDevice), one \
            bind per device",
    };

    pub static BIND_BLOCKED: Rule = Rule {
        id: "multicast.bind-blocked",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Every device of the team is added before memory is bound: the driver \
            blocks a bind until then, and a team that is never filled (a device this process or \
            another was to add, never added) blocks it forever. Reported while the bind is still \
            blocked after blocked_bind_ms (SHARECHECK_OPTIONS, 5 s), with the devices this \
            process added; the bind's own record follows if it returns.",
        source: source("cuMulticastAddDevice"),
        quote: "All devices must be added to the multicast team before any memory can be bound \
            to any device in the team. Any calls to ::cuMulticastBindMem, \
            ::cuMulticastBindMem_v2, ::cuMulticastBindAddr, or ::cuMulticastBindAddr_v2 will \
            block until all devices have been added.",
        documented_code: None,
        fix: "add every device of the team (cuMulticastAddDevice, numDevices of them, in this \
            process or the processes the object is exported to) before any bind, or bind from \
            one thread per device so that the adds are not behind the binds",
    };

    pub static BIND_MEMORY_NOT_ON_DEV: Rule = Rule {
        id: "multicast.bind-memory-not-on-dev",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A _v2 bind of device memory binds memory created on the device it names \
            (dev). Decided for allocations this process created (cuMemCreate, their location).",
        source: source("cuMulticastBindMem_v2"),
        quote: "For device memory, i.e., type ::CU_MEM_LOCATION_TYPE_DEVICE, the memory \
            allocation must have been created on the device specified by \\p dev.",
        documented_code: None,
        fix: "name the device the memory was created on, or bind that device's own memory",
    };

    pub static BIND_DEV_NOT_IN_TEAM: Rule = Rule {
        id: "multicast.bind-dev-not-in-team",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The device a _v2 bind names was added to the team (cuMulticastAddDevice). \
            Decided where this process added every device of the team.",
        source: source("cuMulticastBindMem_v2"),
        quote: "In both cases, the device named by \\p dev must have been added to the \
            multicast team via ::cuMulticastAddDevice.",
        documented_code: None,
        fix: "add the device to the team before binding for it, or name a device of the team",
    };

    pub static BIND_MEMORY_NOT_SHAREABLE: Rule = Rule {
        id: "multicast.bind-memory-not-shareable",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "An object created with handle types (externally shareable) is bound only \
            to memory created with handle types too. Decided for objects and allocations this \
            process created.",
        source: source("cuMulticastBindMem"),
        quote: "Externally shareable as well as imported multicast objects can be bound only \
            to externally shareable memory.",
        documented_code: None,
        fix: "create the memory with the handle types the object was created with \
            (CUmemAllocationProp::requestedHandleTypes)",
    };

    pub static UNBIND_NOT_GRANULAR: Rule = Rule {
        id: "cuMulticastUnbind.not-granular",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size and mcOffset are multiples of the object's minimum granularity \
            (cuMulticastGetGranularity, CU_MULTICAST_GRANULARITY_MINIMUM). Decided for objects \
            this process created.",
        source: source("cuMulticastUnbind"),
        quote: "The intended \\p size of the unbind and the offset in the multicast range ( \\p \
            mcOffset ) must be a multiple of the value returned by ::cuMulticastGetGranularity \
            flag ::CU_MULTICAST_GRANULARITY_MINIMUM.",
        documented_code: None,
        fix: "unbind with the mcOffset and size of the bind",
    };

    pub static UNBIND_PAST_OBJECT: Rule = Rule {
        id: "cuMulticastUnbind.past-object",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "mcOffset + size lies within the multicast object (its \
            CUmulticastObjectProp::size). Decided for objects this process created.",
        source: source("cuMulticastUnbind"),
        quote: "The \\p size + \\p mcOffset cannot be larger than the total size of the \
            multicast object.",
        documented_code: None,
        fix: "unbind with the mcOffset and size of the bind",
    };

    pub static UNBIND_NOT_A_BIND: Rule = Rule {
        id: "cuMulticastUnbind.not-a-bind",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "mcOffset and size are those of a bind of dev's memory (cuMulticastBindMem, \
            cuMulticastBindAddr): other values are undefined behaviour. Decided for teams this \
            process filled, whose every bind it made and saw the device of.",
        source: source("cuMulticastUnbind"),
        quote: "The \\p mcOffset and the \\p size must match the corresponding values \
            specified during the bind call. Any other values may result in undefined behavior.",
        documented_code: None,
        fix: "unbind each bind whole, with the device, mcOffset and size it was made with",
    };

    pub static MAP_BLOCKED: Rule = Rule {
        id: "multicast.map-blocked",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Every device of the team is added before the object is mapped \
            (cuMemMap of its handle): the driver blocks the map until then, forever if a device \
            is never added. Reported while the map is still blocked after blocked_bind_ms \
            (SHARECHECK_OPTIONS, 5 s), for objects this process created and has not filled.",
        source: source("cuMulticastAddDevice"),
        quote: "Similarly all devices must be added to the multicast team before a virtual \
            address range can be mapped to the multicast object. A call to ::cuMemMap will \
            block until all devices have been added.",
        documented_code: None,
        fix: "add every device of the team (cuMulticastAddDevice) before mapping the object",
    };

    pub static BIND_FLAGS: Rule = Rule {
        id: "multicast.bind-flags-not-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The flags of cuMulticastBindMem and cuMulticastBindAddr (and their _v2 \
            forms) are 0.",
        source: source("cuMulticastBindMem"),
        quote: "\\param[in]  flags        Flags for future use, must be zero for now.",
        documented_code: None,
        fix: "pass 0",
    };
}

/// The family's checks, by the names the check table uses.
pub mod checks {
    use super::*;

    /// `cuMulticastCreate`: the granularity and flags; the object's team is kept.
    pub static CREATE: CheckInfo = CheckInfo {
        name: "multicast.create",
        rules: &[&cuda::CREATE_SIZE_NOT_GRANULAR, &cuda::CREATE_FLAGS],
    };
    pub static ADD_DEVICE: CheckInfo = CheckInfo {
        name: "multicast.add-device",
        rules: &[&cuda::ADD_TEAM_FULL],
    };
    pub static BIND_MEM: CheckInfo = CheckInfo {
        name: "multicast.bind-mem",
        rules: &[
            &cuda::BIND_MEM_NOT_GRANULAR,
            &cuda::BIND_PAST_MEMORY,
            &cuda::BIND_MEM_PAST_OBJECT,
            &cuda::BIND_MEMORY_NOT_ON_TEAM,
            &cuda::BIND_MEMORY_NOT_ON_DEV,
            &cuda::BIND_DEV_NOT_IN_TEAM,
            &cuda::BIND_MEMORY_NOT_SHAREABLE,
            &cuda::BIND_FLAGS,
            &cuda::BIND_BLOCKED,
        ],
    };
    pub static BIND_ADDR: CheckInfo = CheckInfo {
        name: "multicast.bind-addr",
        rules: &[
            &cuda::BIND_ADDR_NOT_GRANULAR,
            &cuda::BIND_ADDR_PAST_OBJECT,
            &cuda::BIND_MEMORY_NOT_ON_TEAM,
            &cuda::BIND_MEMORY_NOT_ON_DEV,
            &cuda::BIND_DEV_NOT_IN_TEAM,
            &cuda::BIND_MEMORY_NOT_SHAREABLE,
            &cuda::BIND_FLAGS,
            &cuda::BIND_BLOCKED,
        ],
    };
    /// `cuMulticastUnbind`: the granularity, the extent and the bind it undoes.
    pub static UNBIND: CheckInfo = CheckInfo {
        name: "multicast.unbind",
        rules: &[
            &cuda::UNBIND_NOT_GRANULAR,
            &cuda::UNBIND_PAST_OBJECT,
            &cuda::UNBIND_NOT_A_BIND,
        ],
    };
    /// `cuMemMap` of a multicast object this process created: watched while it blocks.
    pub static MAPPED: CheckInfo = CheckInfo {
        name: "multicast.mapped",
        rules: &[&cuda::MAP_BLOCKED],
    };
    /// `cuMemRelease` of a multicast object: its team is forgotten (no rule of its own).
    pub static RELEASED: CheckInfo = CheckInfo {
        name: "multicast.released",
        rules: &[],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "multicast",
    title: "Multicast objects: their teams and the memory bound to them",
    checks: &[
        &checks::CREATE,
        &checks::ADD_DEVICE,
        &checks::BIND_MEM,
        &checks::BIND_ADDR,
        &checks::UNBIND,
        &checks::MAPPED,
        &checks::RELEASED,
    ],
    reported: &[],
    engine: &[],
    divergences: &[],
};
