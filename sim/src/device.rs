//! Simulated devices: ordinals, names, attributes and the peer capability matrix.

use crate::config::config;
use crate::types::{attribute, Code, Outcome, INVALID_DEVICE, INVALID_VALUE};

/// Attribute values of every simulated device, modelled on the H200 pair of the probes
/// (api-facts.md §4.4); anything not listed reads as 0. `SHARECHECK_SIM_ATTRS` overrides them.
const DEFAULT_ATTRIBUTES: &[(i32, i32)] = &[
    (1, 1024),       // MAX_THREADS_PER_BLOCK
    (2, 1024),       // MAX_BLOCK_DIM_X
    (3, 1024),       // MAX_BLOCK_DIM_Y
    (4, 64),         // MAX_BLOCK_DIM_Z
    (5, 2147483647), // MAX_GRID_DIM_X
    (6, 65535),      // MAX_GRID_DIM_Y
    (7, 65535),      // MAX_GRID_DIM_Z
    (8, 49152),      // MAX_SHARED_MEMORY_PER_BLOCK
    (10, 32),        // WARP_SIZE
    (16, 132),       // MULTIPROCESSOR_COUNT
    (attribute::UNIFIED_ADDRESSING, 1),
    (attribute::COMPUTE_CAPABILITY_MAJOR, 9),
    (76, 0), // COMPUTE_CAPABILITY_MINOR
    (attribute::MANAGED_MEMORY, 1),
    (attribute::PAGEABLE_MEMORY_ACCESS, 0),
    (89, 1),  // CONCURRENT_MANAGED_ACCESS
    (102, 1), // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    (attribute::MEMORY_POOLS_SUPPORTED, 1),
    (attribute::IPC_EVENT_SUPPORTED, 1),
    (128, 1), // HANDLE_TYPE_FABRIC_SUPPORTED
    (132, 1), // MULTICAST_SUPPORTED, as R580 answers on 2x H200 (multicast-probe)
    (HOST_NUMA_ID, 0),
    (attribute::LOGICAL_ENDPOINT_UNICAST_SUPPORTED, 1),
    // LOGICAL_ENDPOINT_MULTICAST_SUPPORTED (154) stays 0 unless overridden (`d:154=1`).
    (attribute::LOGICAL_ENDPOINT_COUNTED_OPS_SUPPORTED, 1),
    (156, 1), // LOGICAL_ENDPOINT_UNICAST_ACCESS_ON_OWNER_DEVICE_SUPPORTED
];

/// One past the last attribute a driver of this version knows: R580 (13.0) answers
/// INVALID_VALUE from 150 on; the 13.3 enum ends at 156 (`CU_DEVICE_ATTRIBUTE_MAX` = 157).
fn attribute_limit() -> i32 {
    if config().has_logical_endpoints() {
        157
    } else {
        150
    }
}

pub fn count() -> i32 {
    config().devices
}

pub fn is_valid(device: i32) -> bool {
    (0..count()).contains(&device)
}

pub fn check(device: i32) -> Outcome {
    if is_valid(device) {
        Ok(())
    } else {
        Err(INVALID_DEVICE)
    }
}

pub fn name(device: i32) -> String {
    format!("sharecheck simulated GPU {device}")
}

/// `cuDeviceGetAttribute`.
pub fn attribute(device: i32, attr: i32) -> Result<i32, Code> {
    check(device)?;
    if attr <= 0 || attr >= attribute_limit() {
        return Err(INVALID_VALUE);
    }
    if let Some(v) = config().attributes.get(&(device, attr)) {
        return Ok(*v);
    }
    Ok(DEFAULT_ATTRIBUTES
        .iter()
        .find(|(a, _)| *a == attr)
        .map_or(0, |(_, v)| *v))
}

/// An attribute that the model consults; an attribute the version does not know reads as 0.
pub fn flag(device: i32, attr: i32) -> bool {
    attribute(device, attr).is_ok_and(|v| v != 0)
}

/// `CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID` of a device (-1: no NUMA).
pub const HOST_NUMA_ID: i32 = 134;

/// Whether `node` is a host NUMA node: one a device names as its closest.
pub fn is_numa_node(node: i32) -> bool {
    node >= 0 && (0..count()).any(|d| attribute(d, HOST_NUMA_ID) == Ok(node))
}

/// `cuDeviceCanAccessPeer` for two valid ordinals: the configured matrix; a device is never its
/// own peer. Unified addressing and major compute capability do not enter: the documents make
/// them conditions for allocations becoming accessible *immediately* after a successful
/// `cuCtxEnablePeerAccess`, not for its success, so they can be set apart from the matrix (as
/// the rule tests do with `SHARECHECK_SIM_ATTRS`).
pub fn can_access_peer(device: i32, peer: i32) -> bool {
    device != peer && config().peers.allows(device, peer)
}

/// A simulated device's UUID, the same in every process as a real device's is: `SIM`, the
/// ordinal, then zeros (`cuDeviceGetUuid`, `hipDeviceGetUuid`).
pub fn uuid(dev: i32) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..3].copy_from_slice(b"SIM");
    bytes[3] = dev as u8;
    bytes
}
