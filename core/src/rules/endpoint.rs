//! The logical endpoint family (CUDA 13.3, "Logical Endpoint"): the twelve `cuLogicalEndpoint*`
//! functions. Contract: `shared/contracts/cuda-logical-endpoint.txt`. No released driver on the
//! project's GPU machine has them yet (R580 answers `cuGetProcAddress` for them with success and a
//! NULL pointer), so the simulated driver is where they are proven.
//!
//! What the shim tracks per process, per id: reserved ranges; the endpoint an id holds (created
//! here, with its properties and the bind alignment and maximum size the driver's
//! `cuLogicalEndpointGetLimits` gives for them, or imported, whose properties the handle does not
//! tell); the devices added to a multicast team; whether a query reported it ready; and the
//! bindings per device. Rules on the properties a create passes are decided from the arguments
//! and the driver's own limits (certain); rules on ids, teams and bindings from that state
//! (withdrawn when the driver accepts the call anyway: the shim may not have seen everything, e.g.
//! calls of another process on a shared endpoint). Rules checked on both binds are `endpoint.*`.

use super::{cuda, CheckInfo, Family, Kind, Rule, Severity, Source};
use crate::codes::*;

const SECTION: &str = "Logical Endpoint";

const fn source(function: &'static str) -> Source {
    cuda(SECTION, function)
}

const RELEASE_RESERVED: &str = "The range of ids represented by [baseLeId, baseLeId + count) \
    must all be previously reserved.";
const RELEASE_DESTROYED: &str = "All logical endpoints in the range must be destroyed before they \
    can be released.";
const RESERVED_IDS_USE: &str = "The reserved ids can be used to create or import logical \
    endpoints via cuLogicalEndpointCreate or cuLogicalEndpointImport respectively.";
const ASSOCIATES: &str = "Creates a logical endpoint with the requested properties and \
    associates it with the logical endpoint id.";
const IMPORT_ASSOCIATES: &str = "Imports a logical endpoint from the given IPC handle and \
    associates it with the logical endpoint id specified by leId.";
const QUERY_FIRST: &str = "This call will return CUDA_ERROR_INVALID_VALUE if \
    cuLogicalEndpointQuery has not been called for the logical endpoint to ensure that the \
    endpoint is ready for memory binding.";
const BEFORE_READY: &str = "Provides a mechanism to ensure that it is safe to begin using a \
    logical endpoint ID. Using a logical endpoint ID before verifying that it is fully \
    constructed can result in undefined behavior.";

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    // ---- ids ---------------------------------------------------------------------------------

    pub static RELEASE_NOT_RESERVED: Rule = Rule {
        id: "cuLogicalEndpointIdRelease.not-reserved",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Every id of [baseLeId, baseLeId + count) was reserved by this process \
            (cuLogicalEndpointIdReserve) and not released since.",
        source: source("cuLogicalEndpointIdRelease"),
        quote: RELEASE_RESERVED,
        documented_code: Some(INVALID_VALUE),
        fix: "release exactly the ranges cuLogicalEndpointIdReserve returned, once each",
    };

    pub static RELEASE_NOT_DESTROYED: Rule = Rule {
        id: "cuLogicalEndpointIdRelease.endpoints-not-destroyed",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "No id of the range released holds a logical endpoint: every one created or \
            imported was destroyed (cuLogicalEndpointDestroy) first.",
        source: source("cuLogicalEndpointIdRelease"),
        quote: RELEASE_DESTROYED,
        documented_code: Some(INVALID_VALUE),
        fix: "destroy the range's logical endpoints before releasing its ids",
    };

    pub static CREATE_NOT_RESERVED: Rule = Rule {
        id: "cuLogicalEndpointCreate.id-not-reserved",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "leId is an id this process reserved (cuLogicalEndpointIdReserve) and has \
            not released.",
        source: source("cuLogicalEndpointCreate"),
        quote: RESERVED_IDS_USE,
        documented_code: Some(INVALID_VALUE),
        fix: "create the endpoint on an id from a range cuLogicalEndpointIdReserve returned",
    };

    pub static CREATE_ID_IN_USE: Rule = Rule {
        id: "cuLogicalEndpointCreate.id-in-use",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "leId holds no logical endpoint yet: an id is associated with one endpoint \
            at a time, so the one created or imported on it is destroyed first.",
        source: source("cuLogicalEndpointCreate"),
        quote: ASSOCIATES,
        documented_code: Some(INVALID_VALUE),
        fix: "create the endpoint on a reserved id that holds none (or destroy the old one first)",
    };

    pub static IMPORT_NOT_RESERVED: Rule = Rule {
        id: "cuLogicalEndpointImport.id-not-reserved",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "leId is an id this process reserved (cuLogicalEndpointIdReserve) and has \
            not released: ids are the importer's own, not the exporter's.",
        source: source("cuLogicalEndpointImport"),
        quote: RESERVED_IDS_USE,
        documented_code: Some(INVALID_VALUE),
        fix: "reserve ids in the importing process and import into one of them",
    };

    pub static IMPORT_ID_IN_USE: Rule = Rule {
        id: "cuLogicalEndpointImport.id-in-use",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "leId holds no logical endpoint yet (none created or imported on it and not \
            destroyed).",
        source: source("cuLogicalEndpointImport"),
        quote: IMPORT_ASSOCIATES,
        documented_code: Some(INVALID_VALUE),
        fix: "import into a reserved id that holds no endpoint",
    };

    pub static NO_ENDPOINT: Rule = Rule {
        id: "endpoint.no-endpoint-on-id",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "leId holds a logical endpoint (created or imported in this process, not \
            destroyed) when it is added to, bound, unbound or exported.",
        source: source("cuLogicalEndpointUnbind"),
        quote: "leId - Logical endpoint id representing a logical endpoint.",
        documented_code: Some(INVALID_VALUE),
        fix: "create (or import) the endpoint on the id first, and stop using the id once it is \
            destroyed",
    };

    // ---- create ------------------------------------------------------------------------------

    pub static CREATE_TYPE_INVALID: Rule = Rule {
        id: "cuLogicalEndpointCreate.type-invalid",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "prop->type is CU_LOGICAL_ENDPOINT_TYPE_UNICAST or \
            CU_LOGICAL_ENDPOINT_TYPE_MULTICAST (not INVALID, not an unknown value).",
        source: source("cuLogicalEndpointCreate"),
        quote: "The number of participating devices is determined by the \
            CUlogicalEndpointProp::type.",
        documented_code: Some(INVALID_VALUE),
        fix: "set prop.type to CU_LOGICAL_ENDPOINT_TYPE_UNICAST (with unicast.device) or \
            CU_LOGICAL_ENDPOINT_TYPE_MULTICAST (with multicast.numDevices)",
    };

    pub static CREATE_TEAM_EMPTY: Rule = Rule {
        id: "cuLogicalEndpointCreate.team-empty",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A multicast endpoint's team has at least one device \
            (prop->multicast.numDevices > 0).",
        source: source("cuLogicalEndpointCreate"),
        quote: "If the type is CU_LOGICAL_ENDPOINT_TYPE_MULTICAST then \
            CUlogicalEndpointProp::multicast::numDevices specifies the number of devices in the \
            multicast logical endpoint team.",
        documented_code: Some(INVALID_VALUE),
        fix: "set multicast.numDevices to the number of devices that will be added",
    };

    pub static CREATE_SIZE_NOT_ALIGNED: Rule = Rule {
        id: "cuLogicalEndpointCreate.size-not-aligned",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "prop->size is a multiple of the bindAlignment the driver's \
            cuLogicalEndpointGetLimits gives for the same properties.",
        source: source("cuLogicalEndpointCreate"),
        quote: "The total amount of memory that can be bound per device is specified by \
            CUlogicalEndpointProp::size. This size must be a multiple of the value for \
            bindAlignment as returned by cuLogicalEndpointGetLimits.",
        documented_code: Some(INVALID_VALUE),
        fix: "round prop.size up to a multiple of bindAlignment (cuLogicalEndpointGetLimits)",
    };

    pub static CREATE_SIZE_ABOVE_MAX: Rule = Rule {
        id: "cuLogicalEndpointCreate.size-above-max",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "prop->size is at most the maxSize the driver's cuLogicalEndpointGetLimits \
            gives for the same properties (the user must adjust the request).",
        source: source("cuLogicalEndpointCreate"),
        quote: "The maximum size for the logical endpoint cannot exceed the value for maxSize as \
            returned by cuLogicalEndpointGetLimits.",
        documented_code: Some(INVALID_VALUE),
        fix: "ask cuLogicalEndpointGetLimits first and create at most maxSize bytes",
    };

    pub static CREATE_FLAGS_UNKNOWN: Rule = Rule {
        id: "cuLogicalEndpointCreate.flags-unknown",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "prop->flags holds only CUlogicalEndpointFlag values \
            (CU_LOGICAL_ENDPOINT_FLAG_NONE, CU_LOGICAL_ENDPOINT_FLAG_COUNTED_OPS).",
        source: source("cuLogicalEndpointCreate"),
        quote: "enum CUlogicalEndpointFlag - Flags for CUlogicalEndpointProp",
        documented_code: Some(INVALID_VALUE),
        fix: "set prop.flags to 0 or CU_LOGICAL_ENDPOINT_FLAG_COUNTED_OPS",
    };

    pub static CREATE_HANDLE_TYPE_UNKNOWN: Rule = Rule {
        id: "cuLogicalEndpointCreate.handle-type-unknown",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "prop->ipcHandleTypes holds only CUlogicalEndpointIpcHandleType bits \
            (CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC, or none).",
        source: source("cuLogicalEndpointCreate"),
        quote: "enum CUlogicalEndpointIpcHandleType - IPC handle types that can be \
            requested/queried for a given logical endpoint",
        documented_code: Some(INVALID_VALUE),
        fix: "set prop.ipcHandleTypes to 0 or CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC",
    };

    pub static CREATE_HANDLE_TYPE_NOT_SUPPORTED: Rule = Rule {
        id: "cuLogicalEndpointCreate.handle-type-not-supported",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A FABRIC handle type is requested only for a device that supports fabric \
            handles (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, which the shim reads until \
            13.4's LOGICAL_ENDPOINT_SUPPORTED_HANDLE_TYPES has a published number; a finding is \
            withdrawn when the driver accepts).",
        source: source("cuLogicalEndpointCreate"),
        quote: "enum CUlogicalEndpointIpcHandleType - IPC handle types that can be \
            requested/queried for a given logical endpoint",
        documented_code: Some(NOT_SUPPORTED),
        fix: "request CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC only on devices and systems \
            with fabric support (IMEX); leave ipcHandleTypes 0 for an endpoint used in one \
            process",
    };

    // ---- multicast teams ---------------------------------------------------------------------

    pub static ADD_NOT_MULTICAST: Rule = Rule {
        id: "cuLogicalEndpointAddDevice.not-multicast",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Devices are added to multicast endpoints only: a unicast endpoint has its \
            owner device and no team.",
        source: source("cuLogicalEndpointAddDevice"),
        quote: "The type of the logical endpoint must be CU_LOGICAL_ENDPOINT_TYPE_MULTICAST.",
        documented_code: Some(INVALID_VALUE),
        fix: "do not add devices to a unicast endpoint: bind on its owner device after the query",
    };

    pub static ADD_TEAM_FULL: Rule = Rule {
        id: "cuLogicalEndpointAddDevice.team-full",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "At most multicast.numDevices devices are added to a multicast endpoint \
            (counted here from the adds this process made).",
        source: source("cuLogicalEndpointAddDevice"),
        quote: "The added device will be a part of the multicast team of size specified by \
            CUlogicalEndpointProp::multicast::numDevices during cuLogicalEndpointCreate.",
        documented_code: Some(INVALID_VALUE),
        fix: "create the endpoint with numDevices equal to the team you add",
    };

    pub static ADD_TWICE: Rule = Rule {
        id: "cuLogicalEndpointAddDevice.device-already-added",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Each device is added to a multicast endpoint once: its association lasts \
            as long as the endpoint.",
        source: source("cuLogicalEndpointAddDevice"),
        quote: "The association of the device to the multicast logical endpoint is permanent \
            during the life time of the multicast logical endpoint.",
        documented_code: Some(INVALID_VALUE),
        fix: "add every device of the team exactly once",
    };

    pub static ADD_AFTER_BIND: Rule = Rule {
        id: "cuLogicalEndpointAddDevice.after-bind",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Every device is added before any memory is bound to the endpoint on any \
            device of the team.",
        source: source("cuLogicalEndpointAddDevice"),
        quote: "All devices must be added to the multicast logical endpoint before any memory \
            can be bound to any device in the team.",
        documented_code: Some(INVALID_VALUE),
        fix: "add the whole team, query until ready, then bind",
    };

    // ---- readiness ---------------------------------------------------------------------------

    pub static QUERY_NOT_ENDPOINT: Rule = Rule {
        id: "cuLogicalEndpointQuery.id-not-endpoint",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Every id of [leId, leId + count) holds a logical endpoint (created or \
            imported, not destroyed).",
        source: source("cuLogicalEndpointQuery"),
        quote: "Queries the driver to determine if all logical endpoints in the given range \
            starting at leId and extending for count have been successfully constructed.",
        documented_code: Some(INVALID_VALUE),
        fix: "query only ids that hold an endpoint",
    };

    pub static BIND_WITHOUT_QUERY: Rule = Rule {
        id: "endpoint.bind-without-query",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "cuLogicalEndpointQuery was called on the endpoint before it is bound \
            (cuLogicalEndpointBindAddr, cuLogicalEndpointBindMem).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: QUERY_FIRST,
        documented_code: Some(INVALID_VALUE),
        fix: "call cuLogicalEndpointQuery on the endpoint (after every device is added) until \
            it reports ready, then bind",
    };

    pub static BIND_BEFORE_READY: Rule = Rule {
        id: "endpoint.bind-before-ready",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "An endpoint is bound only after a query reported it ready (queryStatus \
            non-zero): the queries made so far all answered 0, not yet constructed.",
        source: source("cuLogicalEndpointQuery"),
        quote: BEFORE_READY,
        documented_code: None,
        fix: "poll cuLogicalEndpointQuery until queryStatus is non-zero before binding",
    };

    // ---- binds -------------------------------------------------------------------------------

    pub static BIND_FLAGS: Rule = Rule {
        id: "endpoint.bind-flags-not-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The flags of cuLogicalEndpointBindAddr and cuLogicalEndpointBindMem are 0.",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "flags - Flags for future use, must be zero for now.",
        documented_code: Some(INVALID_VALUE),
        fix: "pass 0 as flags",
    };

    pub static BIND_ADDR_NOT_ALIGNED: Rule = Rule {
        id: "cuLogicalEndpointBindAddr.not-aligned",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size, offset and ptr are multiples of the endpoint's bindAlignment (what \
            cuLogicalEndpointGetLimits gives for the properties it was created with).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "The intended size of the bind, the offset in the logical endpoint range and ptr \
            must be multiples of the value for bindAlignment as returned by \
            cuLogicalEndpointGetLimits.",
        documented_code: Some(INVALID_VALUE),
        fix: "align the allocation, the offset and the size to bindAlignment",
    };

    pub static BIND_MEM_NOT_ALIGNED: Rule = Rule {
        id: "cuLogicalEndpointBindMem.not-aligned",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size, offset and memOffset are multiples of the endpoint's bindAlignment \
            (what cuLogicalEndpointGetLimits gives for the properties it was created with).",
        source: source("cuLogicalEndpointBindMem"),
        quote: "The intended size of the bind, the offset in the logical endpoint range offset \
            and the offset in the memory handle memOffset must be multiples of the value for \
            bindAlignment as returned by cuLogicalEndpointGetLimits.",
        documented_code: Some(INVALID_VALUE),
        fix: "align memOffset, the offset and the size to bindAlignment",
    };

    pub static BIND_ADDR_BEYOND_ALLOCATION: Rule = Rule {
        id: "cuLogicalEndpointBindAddr.size-beyond-allocation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "[ptr, ptr + size) lies inside the allocation (or VMM mapping) that holds \
            ptr.",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "The size cannot be larger than the size of the allocated memory.",
        documented_code: Some(INVALID_VALUE),
        fix: "bind at most the bytes from ptr to the end of its allocation",
    };

    pub static BIND_MEM_BEYOND_ALLOCATION: Rule = Rule {
        id: "cuLogicalEndpointBindMem.size-beyond-allocation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "memOffset + size is at most the size memHandle was created with \
            (cuMemCreate).",
        source: source("cuLogicalEndpointBindMem"),
        quote: "The size + memOffset cannot be larger than the size of the allocated memory.",
        documented_code: Some(INVALID_VALUE),
        fix: "bind at most the bytes from memOffset to the end of the allocation",
    };

    pub static BIND_BEYOND_ENDPOINT: Rule = Rule {
        id: "endpoint.bind-beyond-endpoint",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "offset + size is at most the endpoint's size (CUlogicalEndpointProp::size).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "Similarly the size + offset cannot be larger than the total size of the logical \
            endpoint.",
        documented_code: Some(INVALID_VALUE),
        fix: "keep every bind inside [0, prop.size) of the endpoint",
    };

    pub static BIND_ADDR_MEMORY_KIND: Rule = Rule {
        id: "cuLogicalEndpointBindAddr.memory-not-vmm-or-pool",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "ptr is memory from cuMemCreate (mapped with cuMemMap) or from a memory \
            pool (cudaMallocAsync, cuMemAllocAsync): not cuMemAlloc, managed or page-locked host \
            memory.",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "The memory must have been allocated via cuMemCreate or cudaMallocAsync.",
        documented_code: Some(INVALID_VALUE),
        fix: "allocate the memory with cuMemCreate + cuMemMap (or cudaMallocAsync)",
    };

    pub static BIND_MEM_NOT_CREATED: Rule = Rule {
        id: "cuLogicalEndpointBindMem.memory-not-created",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "memHandle is a live allocation handle from cuMemCreate (or imported with \
            cuMemImportFromShareableHandle), not released.",
        source: source("cuLogicalEndpointBindMem"),
        quote: "The memory must have been allocated via cuMemCreate.",
        documented_code: Some(INVALID_VALUE),
        fix: "pass the handle cuMemCreate returned, before cuMemRelease",
    };

    pub static BIND_OTHER_DEVICE: Rule = Rule {
        id: "endpoint.bind-memory-of-other-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Device memory bound on dev was created on dev.",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "For device memory, i.e., type CU_MEM_LOCATION_TYPE_DEVICE, the memory \
            allocation must have been created on the device specified by dev.",
        documented_code: Some(INVALID_VALUE),
        fix: "bind each device's own memory on that device (allocate with location.id = dev)",
    };

    pub static BIND_NUMA: Rule = Rule {
        id: "endpoint.bind-host-memory-not-closest-numa",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Host NUMA memory bound on dev was created on dev's closest NUMA node \
            (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID of dev).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "For host NUMA memory, i.e., type CU_MEM_LOCATION_TYPE_HOST_NUMA, the memory \
            allocation must have been created on the CPU NUMA node closest to dev. That is, the \
            value returned when querying CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID for dev, must be the \
            CPU NUMA node where the memory was allocated.",
        documented_code: Some(INVALID_VALUE),
        fix: "allocate host memory with location.id = the HOST_NUMA_ID attribute of dev",
    };

    pub static BIND_NOT_IN_TEAM: Rule = Rule {
        id: "endpoint.bind-device-not-in-team",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "On a multicast endpoint created in this process, dev was added to the team \
            (cuLogicalEndpointAddDevice).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "For multicast endpoints, the device named by dev must have been added to the \
            multicast team via cuLogicalEndpointAddDevice.",
        documented_code: Some(INVALID_VALUE),
        fix: "bind only on devices added to the team",
    };

    pub static BIND_NOT_OWNER: Rule = Rule {
        id: "endpoint.bind-device-not-owner",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "On a unicast endpoint, dev is the owner device (prop.unicast.device).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "For unicast endpoints the device named by dev must be the owner device specified \
            during cuLogicalEndpointCreate via CUlogicalEndpointProp::unicast::device.",
        documented_code: Some(INVALID_VALUE),
        fix: "bind a unicast endpoint on its owner device only",
    };

    pub static BIND_NOT_SHAREABLE: Rule = Rule {
        id: "endpoint.bind-memory-not-shareable",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "An externally shareable multicast endpoint (created with a FABRIC handle \
            type), or an imported endpoint, is bound only to memory created with the FABRIC \
            handle type (requestedHandleTypes of cuMemCreate). The sentence is read as \
            \"externally shareable or imported, multicast\" endpoints, as the simulated driver \
            does; an imported unicast endpoint cannot be bound at all. A finding is withdrawn \
            when the driver accepts.",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "Externally shareable as well as imported multicast endpoints can be bound only \
            to externally shareable memory. Imported unicast endpoints cannot be bound to any \
            memory.",
        documented_code: Some(INVALID_VALUE),
        fix: "create the memory with requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC",
    };

    pub static BIND_OVERLAP: Rule = Rule {
        id: "endpoint.bind-overlaps-binding",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Binds on one device cover disjoint ranges of the endpoint. The document \
            does not say what a bind over a bound range does (replace, fail or alias); Unbind's \
            rules treat binds as disjoint pieces, and the simulated driver refuses an overlap.",
        source: source("cuLogicalEndpointCreate"),
        quote: "The total amount of memory that can be bound per device is specified by \
            CUlogicalEndpointProp::size.",
        documented_code: None,
        fix: "unbind the range first, or bind at an offset no bind on that device covers",
    };

    // ---- unbind ------------------------------------------------------------------------------

    pub static UNBIND_NOT_ALIGNED: Rule = Rule {
        id: "cuLogicalEndpointUnbind.not-aligned",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "offset and size are multiples of the endpoint's bindAlignment.",
        source: source("cuLogicalEndpointUnbind"),
        quote: "The intended size of the unbind and the offset in the logical endpoint range \
            offset must be multiples of the value for bindAlignment as returned by \
            cuLogicalEndpointGetLimits.",
        documented_code: Some(INVALID_VALUE),
        fix: "unbind with the offset and size of the binds",
    };

    pub static UNBIND_OFFSET: Rule = Rule {
        id: "cuLogicalEndpointUnbind.offset-not-bound",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "offset is where a bind on dev (not unbound since) started.",
        source: source("cuLogicalEndpointUnbind"),
        quote: "The offset must correspond to a value specified during a bind call.",
        documented_code: Some(INVALID_VALUE),
        fix: "unbind at the offset a bind was given",
    };

    pub static UNBIND_SIZE: Rule = Rule {
        id: "cuLogicalEndpointUnbind.size-not-binds",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "size is the size of the bind at offset, or the sum of that bind and the \
            binds that follow it without a gap.",
        source: source("cuLogicalEndpointUnbind"),
        quote: "The size must either match the bind call of the offset or be the combined size \
            of multiple bind calls.",
        documented_code: Some(INVALID_VALUE),
        fix: "unbind the size of one bind, or of consecutive binds",
    };

    pub static UNBIND_CUTS: Rule = Rule {
        id: "cuLogicalEndpointUnbind.cuts-binding",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "offset + size ends where a binding ends: no binding is cut in two.",
        source: source("cuLogicalEndpointUnbind"),
        quote: "The size + offset must fully enclose all bindings that are covered.",
        documented_code: Some(INVALID_VALUE),
        fix: "extend the unbind to the end of the last binding it reaches",
    };

    // ---- destroy, export, import -------------------------------------------------------------

    pub static DESTROY_NOT_CREATED: Rule = Rule {
        id: "cuLogicalEndpointDestroy.not-created",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "leId holds a logical endpoint (created or imported, not destroyed since).",
        source: source("cuLogicalEndpointDestroy"),
        quote: "Removes the association between the logical endpoint id and the logical \
            endpoint resources.",
        documented_code: Some(INVALID_VALUE),
        fix: "destroy each endpoint once, on the id it was created or imported on",
    };

    pub static DESTROY_UNBINDS: Rule = Rule {
        id: "cuLogicalEndpointDestroy.unbinds-memory",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Destroying an endpoint unbinds the memory this process bound to it: a note \
            of which bindings ended here.",
        source: source("cuLogicalEndpointDestroy"),
        quote: "Any memory bound by this process to any device associated with the logical \
            endpoint will be unbound.",
        documented_code: None,
        fix: "nothing to fix; unbind first where other processes must see the memory leave \
            before the endpoint goes",
    };

    pub static EXPORT_HANDLE_TYPE: Rule = Rule {
        id: "cuLogicalEndpointExport.handle-type-not-requested",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "handleType is one of the ipcHandleTypes the endpoint was created with.",
        source: source("cuLogicalEndpointExport"),
        quote: "handleType - Type of shareable handle requested. Defines type and size of the \
            handle output parameter.",
        documented_code: Some(INVALID_VALUE),
        fix: "create the endpoint with prop.ipcHandleTypes = CU_LOGICAL_ENDPOINT_IPC_HANDLE_\
            TYPE_FABRIC to export it",
    };

    pub static IMPORT_NOT_PERMITTED: Rule = Rule {
        id: "cuLogicalEndpointImport.not-permitted",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Explains CUDA_ERROR_NOT_PERMITTED from an import of a FABRIC handle: this \
            process lacks access permission to the exporter's endpoint.",
        source: source("cuLogicalEndpointImport"),
        quote: "If handle is of type CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC and the importer \
            process does not have access permissions, then CUDA_ERROR_NOT_PERMITTED will be \
            returned",
        documented_code: Some(NOT_PERMITTED),
        fix: "run the importer where the fabric (IMEX) channel grants it access to the \
            exporter's memory",
    };

    pub static IMPORT_NOT_SUPPORTED: Rule = Rule {
        id: "cuLogicalEndpointImport.not-supported",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Explains CUDA_ERROR_NOT_SUPPORTED from an import: this process cannot \
            support the endpoint the handle describes (its type, owner device or flags).",
        source: source("cuLogicalEndpointImport"),
        quote: "If the current process cannot support the logical endpoint described by the \
            shareable handle, this API will error as CUDA_ERROR_NOT_SUPPORTED.",
        documented_code: Some(NOT_SUPPORTED),
        fix: "import where the devices support the endpoint's type and flags (device attributes \
            LOGICAL_ENDPOINT_*_SUPPORTED)",
    };
}

/// Rules decided in the report phase, from the traces of every process (`crate::crossproc`):
/// what a process left at its exit, and what an importer did with an endpoint whose type only the
/// exporter's trace tells.
pub mod report {
    use super::*;

    pub static NEVER_DESTROYED_RULE: Rule = Rule {
        id: "cuLogicalEndpointCreate.never-destroyed",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Every logical endpoint a process created or imported is destroyed before \
            the process ends (decided from the trace of a process that ended through exit).",
        source: source("cuLogicalEndpointDestroy"),
        quote: "Removes the association between the logical endpoint id and the logical \
            endpoint resources. Any memory bound by this process to any device associated with \
            the logical endpoint will be unbound. If this was the last reference to the logical \
            endpoint, all associated resources will be destroyed.",
        documented_code: None,
        fix: "destroy each endpoint (cuLogicalEndpointDestroy) when the process is done with it",
    };

    pub static NEVER_RELEASED_RULE: Rule = Rule {
        id: "cuLogicalEndpointIdReserve.never-released",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Every id a process reserved is released (cuLogicalEndpointIdRelease) \
            before the process ends (decided from the trace of a process that ended through \
            exit).",
        source: source("cuLogicalEndpointIdRelease"),
        quote: "Releases up to count logical endpoint ids starting at baseLeId.",
        documented_code: None,
        fix: "release every reserved range once its endpoints are destroyed",
    };

    pub static BIND_IMPORTED_UNICAST_RULE: Rule = Rule {
        id: "endpoint.bind-imported-unicast",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "An endpoint imported from a unicast endpoint is never bound (the exporter's \
            create, found through the handle's fingerprint, says it was unicast).",
        source: source("cuLogicalEndpointBindAddr"),
        quote: "Imported unicast endpoints cannot be bound to any memory.",
        documented_code: None,
        fix: "bind a unicast endpoint in its owner's process only; share memory across \
            processes through a multicast endpoint",
    };

    /// The report-phase rules and the exact symbols whose calls their findings are attached to.
    pub static REPORTED_ON: &[(&Rule, &[&str])] = &[
        (
            &NEVER_DESTROYED_RULE,
            &["cuLogicalEndpointCreate", "cuLogicalEndpointImport"],
        ),
        (&NEVER_RELEASED_RULE, &["cuLogicalEndpointIdReserve"]),
        (
            &BIND_IMPORTED_UNICAST_RULE,
            &["cuLogicalEndpointBindAddr", "cuLogicalEndpointBindMem"],
        ),
    ];
}

/// The family's checks, by the names the table uses.
pub mod checks {
    use super::cuda::*;
    use super::*;

    /// A reserve adds its range to what the process holds.
    pub static RESERVE: CheckInfo = CheckInfo {
        name: "endpoint.reserve",
        rules: &[],
    };
    pub static RELEASE: CheckInfo = CheckInfo {
        name: "endpoint.release",
        rules: &[&RELEASE_NOT_RESERVED, &RELEASE_NOT_DESTROYED],
    };
    pub static CREATE: CheckInfo = CheckInfo {
        name: "endpoint.create",
        rules: &[
            &CREATE_NOT_RESERVED,
            &CREATE_ID_IN_USE,
            &CREATE_TYPE_INVALID,
            &CREATE_TEAM_EMPTY,
            &CREATE_SIZE_NOT_ALIGNED,
            &CREATE_SIZE_ABOVE_MAX,
            &CREATE_FLAGS_UNKNOWN,
            &CREATE_HANDLE_TYPE_UNKNOWN,
            &CREATE_HANDLE_TYPE_NOT_SUPPORTED,
        ],
    };
    pub static ADD_DEVICE: CheckInfo = CheckInfo {
        name: "endpoint.add-device",
        rules: &[
            &NO_ENDPOINT,
            &ADD_NOT_MULTICAST,
            &ADD_TEAM_FULL,
            &ADD_TWICE,
            &ADD_AFTER_BIND,
        ],
    };
    pub static QUERY: CheckInfo = CheckInfo {
        name: "endpoint.query",
        rules: &[&QUERY_NOT_ENDPOINT],
    };
    pub static BIND_ADDR: CheckInfo = CheckInfo {
        name: "endpoint.bind-addr",
        rules: &[
            &NO_ENDPOINT,
            &BIND_FLAGS,
            &BIND_WITHOUT_QUERY,
            &BIND_BEFORE_READY,
            &BIND_NOT_OWNER,
            &BIND_NOT_IN_TEAM,
            &BIND_ADDR_NOT_ALIGNED,
            &BIND_BEYOND_ENDPOINT,
            &BIND_OVERLAP,
            &BIND_ADDR_MEMORY_KIND,
            &BIND_ADDR_BEYOND_ALLOCATION,
            &BIND_OTHER_DEVICE,
            &BIND_NUMA,
            &BIND_NOT_SHAREABLE,
        ],
    };
    pub static BIND_MEM: CheckInfo = CheckInfo {
        name: "endpoint.bind-mem",
        rules: &[
            &NO_ENDPOINT,
            &BIND_FLAGS,
            &BIND_WITHOUT_QUERY,
            &BIND_BEFORE_READY,
            &BIND_NOT_OWNER,
            &BIND_NOT_IN_TEAM,
            &BIND_MEM_NOT_ALIGNED,
            &BIND_BEYOND_ENDPOINT,
            &BIND_OVERLAP,
            &BIND_MEM_NOT_CREATED,
            &BIND_MEM_BEYOND_ALLOCATION,
            &BIND_OTHER_DEVICE,
            &BIND_NUMA,
            &BIND_NOT_SHAREABLE,
        ],
    };
    pub static UNBIND: CheckInfo = CheckInfo {
        name: "endpoint.unbind",
        rules: &[
            &NO_ENDPOINT,
            &UNBIND_NOT_ALIGNED,
            &UNBIND_OFFSET,
            &UNBIND_SIZE,
            &UNBIND_CUTS,
        ],
    };
    pub static EXPORT: CheckInfo = CheckInfo {
        name: "endpoint.export",
        rules: &[&NO_ENDPOINT, &EXPORT_HANDLE_TYPE],
    };
    pub static IMPORT: CheckInfo = CheckInfo {
        name: "endpoint.import",
        rules: &[
            &IMPORT_NOT_RESERVED,
            &IMPORT_ID_IN_USE,
            &IMPORT_NOT_PERMITTED,
            &IMPORT_NOT_SUPPORTED,
        ],
    };
    pub static DESTROY: CheckInfo = CheckInfo {
        name: "endpoint.destroy",
        rules: &[&DESTROY_NOT_CREATED, &DESTROY_UNBINDS],
    };
    // (`cuLogicalEndpointGetLimits` has no check: the shim asks the driver itself for a
    // create's limits. What a bind's memory is, the VMM family tracks.)
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "endpoint",
    title: "Logical endpoints (CUDA 13.3)",
    checks: &[
        &checks::RESERVE,
        &checks::RELEASE,
        &checks::CREATE,
        &checks::ADD_DEVICE,
        &checks::QUERY,
        &checks::BIND_ADDR,
        &checks::BIND_MEM,
        &checks::UNBIND,
        &checks::EXPORT,
        &checks::IMPORT,
        &checks::DESTROY,
    ],
    reported: report::REPORTED_ON,
    engine: &[],
    divergences: &[],
};
