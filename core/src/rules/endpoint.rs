//! The logical endpoint family (CUDA 13.3, "Logical Endpoint"): the twelve `cuLogicalEndpoint*`
//! functions. Contract: `shared/contracts/cuda-logical-endpoint.txt`. No released driver on the
//! project's GPU machine has them yet (R580 answers `cuGetProcAddress` for them with success and a
//! NULL pointer), so the simulated driver is where they are proven.
//!
//! This is the family's first part: the life of ids, which the shim tracks per process (ranges
//! reserved, ids created or imported, destroyed, released).

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

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

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
}

/// The family's checks, by the names the table uses.
pub mod checks {
    use super::*;

    /// A reserve adds its range to what the process holds.
    pub static RESERVE: CheckInfo = CheckInfo {
        name: "endpoint.reserve",
        rules: &[],
    };
    pub static RELEASE: CheckInfo = CheckInfo {
        name: "endpoint.release",
        rules: &[&cuda::RELEASE_NOT_RESERVED, &cuda::RELEASE_NOT_DESTROYED],
    };
    pub static CREATE: CheckInfo = CheckInfo {
        name: "endpoint.create",
        rules: &[&cuda::CREATE_NOT_RESERVED],
    };
    pub static IMPORT: CheckInfo = CheckInfo {
        name: "endpoint.import",
        rules: &[&cuda::IMPORT_NOT_RESERVED],
    };
    /// A destroy frees the id for a release.
    pub static DESTROY: CheckInfo = CheckInfo {
        name: "endpoint.destroy",
        rules: &[],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "endpoint",
    title: "Logical endpoints (CUDA 13.3)",
    rules: &[
        &cuda::RELEASE_NOT_RESERVED,
        &cuda::RELEASE_NOT_DESTROYED,
        &cuda::CREATE_NOT_RESERVED,
        &cuda::IMPORT_NOT_RESERVED,
    ],
};
