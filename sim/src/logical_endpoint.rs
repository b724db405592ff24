//! CUDA 13.3 logical endpoints: id ranges, creation, readiness, binds and FABRIC export/import,
//! with the contract of the 13.3/13.4 documentation (api-facts.md §1.2).
//!
//! Multicast endpoints are accepted only where a device reports attribute 154, which is off
//! unless `SHARECHECK_SIM_ATTRS` turns it on; the simulator models membership and nothing more.
//!
//! Where the document is silent the simulator chooses, and says so here:
//! - A FABRIC handle type on a unicast endpoint whose owner reports
//!   `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED` = 0 is NOT_SUPPORTED (13.4's
//!   `LOGICAL_ENDPOINT_SUPPORTED_HANDLE_TYPES` attribute has no published number yet).
//! - Every other refusal is INVALID_VALUE, including a bind of an imported unicast endpoint (the
//!   document says it cannot be bound, not with which code), a bind that overlaps a binding on
//!   the same device (the document does not say what an overlap does), and an add after a bind.
//! - "Externally shareable memory" is memory created with `CU_MEM_HANDLE_TYPE_FABRIC`; memory of
//!   a pool (`cuMemAllocAsync`) is not externally shareable.
//! - A size of 0 (create, bind, unbind) is INVALID_VALUE.
//! - A multicast team is one team across processes: once an endpoint is exported, the devices
//!   added by the exporter and by every importer are kept in a file beside the export
//!   (`le-PID-ID.team`), so an importer's add completes the exporter's team. Adds of different
//!   processes are not serialized (the last writer wins a race), which the tests never race.

use crate::device;
use crate::memory::{Export, GRANULARITY};
use crate::state_dir;
use crate::types::{
    attribute, logical_endpoint as le, CUlogicalEndpointProp, Outcome, INVALID_VALUE,
    NOT_PERMITTED, NOT_SUPPORTED, OUT_OF_MEMORY,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED`.
const FABRIC_SUPPORTED: i32 = 128;

/// `bindAlignment` of `cuLogicalEndpointGetLimits`.
pub const BIND_ALIGNMENT: u64 = GRANULARITY;
/// `maxSize` of `cuLogicalEndpointGetLimits` (64 GiB).
pub const MAX_SIZE: u64 = 1 << 36;
/// The most ids one `cuLogicalEndpointIdReserve` hands out.
const MAX_RESERVE: u32 = 1 << 20;

const MAGIC: &[u8; 8] = b"SCSIMLE\0";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Unicast { owner: i32 },
    Multicast { team: u32 },
}

struct Endpoint {
    shape: Shape,
    size: u64,
    ipc_handle_types: u32,
    flags: u32,
    members: Vec<i32>,
    /// Once exported or imported: the state file that holds the team of every process.
    team_file: Option<String>,
    /// `cuLogicalEndpointQuery` saw it ready: binds are allowed from then on.
    queried: bool,
    /// Memory was bound to it (devices can no longer be added).
    bound_ever: bool,
    imported: bool,
    /// Per device: bind offset -> size.
    bindings: HashMap<i32, BTreeMap<u64, u64>>,
    export: Option<Export>,
}

impl Endpoint {
    /// A freshly created (or imported) endpoint: no members, binds or export yet.
    fn new(shape: Shape, prop: &CUlogicalEndpointProp, imported: bool) -> Endpoint {
        Endpoint {
            shape,
            size: prop.size,
            ipc_handle_types: prop.ipc_handle_types,
            flags: prop.flags,
            members: Vec::new(),
            team_file: None,
            queried: false,
            bound_ever: false,
            imported,
            bindings: HashMap::new(),
            export: None,
        }
    }

    /// The devices added, by this process and (once shared) by every other.
    fn team(&self) -> Vec<i32> {
        let mut team = self.members.clone();
        if let Some(shared) = self.team_file.as_deref().and_then(state_dir::read) {
            for dev in shared.split_whitespace().filter_map(|d| d.parse().ok()) {
                if !team.contains(&dev) {
                    team.push(dev);
                }
            }
        }
        team
    }

    fn add_member(&mut self, dev: i32) {
        self.members.push(dev);
        self.publish_team();
    }

    fn publish_team(&self) {
        if let Some(file) = &self.team_file {
            let list: Vec<String> = self.team().iter().map(i32::to_string).collect();
            state_dir::write(file, &format!("{}\n", list.join(" ")));
        }
    }

    fn ready(&self) -> bool {
        match self.shape {
            Shape::Unicast { .. } => true,
            Shape::Multicast { team } => self.team().len() as u32 == team,
        }
    }
}

#[derive(Default)]
pub struct Endpoints {
    reserved: BTreeSet<u32>,
    endpoints: HashMap<u32, Endpoint>,
    next_id: u32,
    next_export: u64,
}

/// Checks a property structure; returns the endpoint shape.
fn validate(prop: &CUlogicalEndpointProp) -> Outcome<Shape> {
    if prop.ipc_handle_types & !le::IPC_HANDLE_TYPE_FABRIC != 0
        || prop.flags & !le::FLAG_COUNTED_OPS != 0
    {
        return Err(INVALID_VALUE);
    }
    let counted = prop.flags & le::FLAG_COUNTED_OPS != 0;
    match prop.type_ {
        le::TYPE_UNICAST => {
            let owner = prop.device_or_num_devices;
            if !device::is_valid(owner) {
                return Err(INVALID_VALUE);
            }
            let fabric = prop.ipc_handle_types & le::IPC_HANDLE_TYPE_FABRIC != 0;
            if !device::flag(owner, attribute::LOGICAL_ENDPOINT_UNICAST_SUPPORTED)
                || counted
                    && !device::flag(owner, attribute::LOGICAL_ENDPOINT_COUNTED_OPS_SUPPORTED)
                || fabric && !device::flag(owner, FABRIC_SUPPORTED)
            {
                return Err(NOT_SUPPORTED);
            }
            Ok(Shape::Unicast { owner })
        }
        le::TYPE_MULTICAST => {
            let team = prop.device_or_num_devices;
            if team < 1 || team > device::count() {
                return Err(INVALID_VALUE);
            }
            let capable = (0..device::count())
                .filter(|d| device::flag(*d, attribute::LOGICAL_ENDPOINT_MULTICAST_SUPPORTED))
                .count();
            if capable < team as usize {
                return Err(NOT_SUPPORTED);
            }
            Ok(Shape::Multicast { team: team as u32 })
        }
        _ => Err(INVALID_VALUE),
    }
}

/// `cuLogicalEndpointGetLimits`: `(bindAlignment, maxSize)`.
pub fn limits(prop: &CUlogicalEndpointProp) -> Outcome<(u64, u64)> {
    validate(prop)?;
    Ok((BIND_ALIGNMENT, MAX_SIZE))
}

pub(crate) fn aligned(values: &[u64]) -> bool {
    values.iter().all(|v| v % BIND_ALIGNMENT == 0)
}

/// The ids `[base, base + count)`, or INVALID_VALUE for an empty or overflowing range.
fn id_range(base: u32, count: u32) -> Outcome<std::ops::Range<u32>> {
    let end = base
        .checked_add(count)
        .filter(|_| count > 0)
        .ok_or(INVALID_VALUE)?;
    Ok(base..end)
}

fn export_file(pid: u32, id: u64) -> String {
    format!("le-{pid}-{id}")
}

fn team_file(export: &str) -> String {
    format!("{export}.team")
}

impl Endpoints {
    fn endpoint(&self, id: u32) -> Outcome<&Endpoint> {
        self.endpoints.get(&id).ok_or(INVALID_VALUE)
    }

    fn endpoint_mut(&mut self, id: u32) -> Outcome<&mut Endpoint> {
        self.endpoints.get_mut(&id).ok_or(INVALID_VALUE)
    }

    /// A reserved id not yet associated with an endpoint.
    fn check_free_id(&self, id: u32) -> Outcome {
        if self.reserved.contains(&id) && !self.endpoints.contains_key(&id) {
            Ok(())
        } else {
            Err(INVALID_VALUE)
        }
    }

    pub fn reserve(&mut self, count: u32) -> Outcome<u32> {
        if count == 0 {
            return Err(INVALID_VALUE);
        }
        if count > MAX_RESERVE {
            return Err(OUT_OF_MEMORY);
        }
        let base = self.next_id.checked_add(1).ok_or(OUT_OF_MEMORY)?;
        let end = base.checked_add(count).ok_or(OUT_OF_MEMORY)?;
        self.next_id = end - 1;
        self.reserved.extend(base..end);
        Ok(base)
    }

    /// Every id must be reserved, and its endpoint destroyed.
    pub fn release(&mut self, base: u32, count: u32) -> Outcome {
        let range = id_range(base, count)?;
        if range
            .clone()
            .any(|id| !self.reserved.contains(&id) || self.endpoints.contains_key(&id))
        {
            return Err(INVALID_VALUE);
        }
        for id in range {
            self.reserved.remove(&id);
        }
        Ok(())
    }

    pub fn create(&mut self, id: u32, prop: &CUlogicalEndpointProp) -> Outcome {
        self.check_free_id(id)?;
        let shape = validate(prop)?;
        if prop.size == 0 || prop.size % BIND_ALIGNMENT != 0 || prop.size > MAX_SIZE {
            return Err(INVALID_VALUE);
        }
        self.endpoints.insert(id, Endpoint::new(shape, prop, false));
        Ok(())
    }

    /// Multicast only; each device once, up to the team size.
    pub fn add_device(&mut self, id: u32, dev: i32) -> Outcome {
        let endpoint = self.endpoint_mut(id)?;
        let Shape::Multicast { team } = endpoint.shape else {
            return Err(INVALID_VALUE);
        };
        if !device::is_valid(dev)
            || endpoint.team().contains(&dev)
            || endpoint.team().len() as u32 >= team
            || endpoint.bound_ever
        {
            return Err(INVALID_VALUE);
        }
        if !device::flag(dev, attribute::LOGICAL_ENDPOINT_MULTICAST_SUPPORTED) {
            return Err(NOT_SUPPORTED);
        }
        endpoint.add_member(dev);
        Ok(())
    }

    /// Returns 1 when every endpoint of the range is ready; ready endpoints may be bound from now on.
    pub fn query(&mut self, base: u32, count: u32) -> Outcome<i32> {
        let range = id_range(base, count)?;
        if range.clone().any(|id| !self.endpoints.contains_key(&id)) {
            return Err(INVALID_VALUE);
        }
        let mut all_ready = true;
        for id in range {
            let endpoint = self.endpoints.get_mut(&id).expect("checked above");
            if endpoint.ready() {
                endpoint.queried = true;
            } else {
                all_ready = false;
            }
        }
        Ok(i32::from(all_ready))
    }

    pub fn destroy(&mut self, id: u32) -> Outcome {
        let endpoint = self.endpoints.remove(&id).ok_or(INVALID_VALUE)?;
        if let Some(export) = endpoint.export {
            let file = export_file(std::process::id(), export.id);
            state_dir::remove(&file);
            state_dir::remove(&team_file(&file));
        }
        Ok(())
    }

    /// The checks every bind shares; returns whether the memory must be externally shareable.
    pub(crate) fn check_bind(
        &self,
        id: u32,
        dev: i32,
        offset: u64,
        size: u64,
        flags: u64,
    ) -> Outcome<bool> {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        let endpoint = self.endpoint(id)?;
        if !endpoint.queried || !device::is_valid(dev) {
            return Err(INVALID_VALUE);
        }
        match endpoint.shape {
            Shape::Unicast { .. } if endpoint.imported => return Err(INVALID_VALUE),
            Shape::Unicast { owner } if owner != dev => return Err(INVALID_VALUE),
            Shape::Multicast { .. } if !endpoint.team().contains(&dev) => {
                return Err(INVALID_VALUE)
            }
            _ => {}
        }
        if size == 0 || !aligned(&[offset, size]) {
            return Err(INVALID_VALUE);
        }
        if offset.checked_add(size).is_none() || offset + size > endpoint.size {
            return Err(INVALID_VALUE);
        }
        let overlaps = endpoint
            .bindings
            .get(&dev)
            .and_then(|b| b.range(..offset + size).next_back())
            .is_some_and(|(start, len)| start + len > offset);
        if overlaps {
            return Err(INVALID_VALUE);
        }
        let shareable_only = matches!(endpoint.shape, Shape::Multicast { .. })
            && (endpoint.imported || endpoint.ipc_handle_types & le::IPC_HANDLE_TYPE_FABRIC != 0);
        Ok(shareable_only)
    }

    pub(crate) fn record_bind(&mut self, id: u32, dev: i32, offset: u64, size: u64) {
        let endpoint = self.endpoints.get_mut(&id).expect("checked by check_bind");
        endpoint.bound_ever = true;
        endpoint
            .bindings
            .entry(dev)
            .or_default()
            .insert(offset, size);
    }

    /// The offset must start a bind; the size must cover exactly one or more adjacent binds.
    pub fn unbind(&mut self, id: u32, dev: i32, offset: u64, size: u64) -> Outcome {
        let endpoint = self.endpoint_mut(id)?;
        if !device::is_valid(dev) || size == 0 || !aligned(&[offset, size]) {
            return Err(INVALID_VALUE);
        }
        let end = offset.checked_add(size).ok_or(INVALID_VALUE)?;
        let bindings = endpoint.bindings.get_mut(&dev).ok_or(INVALID_VALUE)?;
        if !bindings.contains_key(&offset) {
            return Err(INVALID_VALUE);
        }
        let mut covered = offset;
        let starts: Vec<u64> = bindings.range(offset..end).map(|(s, _)| *s).collect();
        for start in &starts {
            if *start != covered {
                return Err(INVALID_VALUE);
            }
            covered += bindings[start];
        }
        if covered != end {
            return Err(INVALID_VALUE);
        }
        for start in starts {
            bindings.remove(&start);
        }
        Ok(())
    }

    /// `cuLogicalEndpointExport` with the FABRIC handle type.
    pub fn export(&mut self, id: u32, handle_type: u32) -> Outcome<[u8; le::FABRIC_HANDLE_SIZE]> {
        if handle_type != le::IPC_HANDLE_TYPE_FABRIC {
            return Err(INVALID_VALUE);
        }
        let next_export = self.next_export + 1;
        let endpoint = self.endpoints.get_mut(&id).ok_or(INVALID_VALUE)?;
        if endpoint.ipc_handle_types & le::IPC_HANDLE_TYPE_FABRIC == 0 {
            return Err(INVALID_VALUE);
        }
        let export = match endpoint.export {
            Some(e) => e,
            None => {
                let e = Export {
                    id: next_export,
                    nonce: state_dir::nonce(next_export),
                };
                let channel = crate::config::config().fabric_channel;
                if !state_dir::write(
                    &export_file(std::process::id(), e.id),
                    &format!("{} {channel}\n", e.nonce),
                ) {
                    return Err(OUT_OF_MEMORY);
                }
                self.next_export = next_export;
                endpoint.export = Some(e);
                endpoint.team_file = Some(team_file(&export_file(std::process::id(), e.id)));
                endpoint.publish_team();
                e
            }
        };
        let (kind, device_or_team) = match endpoint.shape {
            Shape::Unicast { owner } => (le::TYPE_UNICAST, owner),
            Shape::Multicast { team } => (le::TYPE_MULTICAST, team as i32),
        };
        let mut b = [0u8; le::FABRIC_HANDLE_SIZE];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        b[16..24].copy_from_slice(&export.id.to_le_bytes());
        b[24..32].copy_from_slice(&export.nonce.to_le_bytes());
        b[32..36].copy_from_slice(&kind.to_le_bytes());
        b[36..40].copy_from_slice(&device_or_team.to_le_bytes());
        b[40..48].copy_from_slice(&endpoint.size.to_le_bytes());
        b[48..52].copy_from_slice(&endpoint.ipc_handle_types.to_le_bytes());
        b[52..56].copy_from_slice(&endpoint.flags.to_le_bytes());
        Ok(b)
    }

    /// `cuLogicalEndpointImport` of a FABRIC handle into the free reserved id `id`.
    pub fn import(
        &mut self,
        id: u32,
        b: &[u8; le::FABRIC_HANDLE_SIZE],
        handle_type: u32,
    ) -> Outcome {
        if handle_type != le::IPC_HANDLE_TYPE_FABRIC {
            return Err(INVALID_VALUE);
        }
        self.check_free_id(id)?;
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if &b[0..8] != MAGIC {
            return Err(INVALID_VALUE);
        }
        let (pid, export_id, nonce) = (u32_at(8), u64_at(16), u64_at(24));
        // The export file: "nonce channel".
        let published = state_dir::read(&export_file(pid, export_id)).and_then(|s| {
            let mut words = s.split_whitespace();
            let matches = words.next() == Some(nonce.to_string().as_str());
            let channel = words.next().and_then(|c| c.parse::<u32>().ok());
            matches.then_some(channel).flatten()
        });
        match published {
            None => return Err(INVALID_VALUE),
            Some(channel) if channel != crate::config::config().fabric_channel => {
                return Err(NOT_PERMITTED)
            }
            Some(_) => {}
        }
        let prop = CUlogicalEndpointProp {
            type_: u32_at(32),
            device_or_num_devices: u32_at(36) as i32,
            size: u64_at(40),
            ipc_handle_types: u32_at(48),
            flags: u32_at(52),
        };
        // "If the current process cannot support the logical endpoint ... CUDA_ERROR_NOT_SUPPORTED"
        let shape = validate(&prop).map_err(|_| NOT_SUPPORTED)?;
        let mut endpoint = Endpoint::new(shape, &prop, true);
        endpoint.team_file = Some(team_file(&export_file(pid, export_id)));
        self.endpoints.insert(id, endpoint);
        Ok(())
    }
}

/// Memory bound on `dev` must be `dev`'s own, or host memory of `dev`'s closest NUMA node.
pub(crate) fn check_location(dev: i32, device: i32, numa: Option<i32>) -> Outcome {
    let fits = match numa {
        Some(node) => device::attribute(dev, device::HOST_NUMA_ID) == Ok(node),
        None => device == dev,
    };
    if fits {
        Ok(())
    } else {
        Err(INVALID_VALUE)
    }
}
