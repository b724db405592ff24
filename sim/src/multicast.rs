//! Multicast objects (`cuMulticast*`), modelled on the CUDA 13.5 documentation: no multicast
//! object is ever created on the project's GPU machines, so only `cuMulticastGetGranularity` and
//! the device attribute are R580's measured answers
//! (`scripts/gpu/results/2026-11-27-2xH200-R580-multicast-probe.txt`).
//!
//! - A team of `numDevices` devices, added one at a time; a bind blocks until the team is whole
//!   ("Any calls to cuMulticastBindMem ... will block until all devices have been added"). The
//!   simulator waits at most `SHARECHECK_SIM_MULTICAST_WAIT_MS` (10 s) and then answers
//!   CUDA_ERROR_ILLEGAL_STATE with one line on stderr, so that no test can hang.
//! - Teams live in one process: exporting a multicast object to another process, and mapping one
//!   with `cuMemMap`, are not modelled (INVALID_VALUE, as for any unknown allocation handle).
//! - Offsets and sizes are checked against the minimum granularity (2 MiB on R580).

use crate::handles::{self, Kind};
use crate::memory::Memory;
use crate::types::{
    Outcome, INVALID_DEVICE, INVALID_VALUE, MEM_HANDLE_TYPE_FABRIC, MEM_HANDLE_TYPE_POSIX_FD,
    NOT_PERMITTED,
};
use std::collections::{BTreeMap, HashMap};

/// `CU_MULTICAST_GRANULARITY_MINIMUM` on R580 (2x H200), whatever the properties.
pub const MINIMUM: u64 = 2 << 20;
/// The largest `CU_MULTICAST_GRANULARITY_RECOMMENDED` R580 answered (a 1 GiB team).
const RECOMMENDED_MAX: u64 = 512 << 20;

/// `cuMulticastGetGranularity`: the minimum, or the recommended one, which R580 gave as 2 MiB for
/// a 2 MiB object and 512 MiB for a 1 GiB one (modelled as the object's size rounded down to a
/// power of two, from 2 MiB to 512 MiB). The properties are not validated (R580 answered every
/// one it was given, zero devices and size 0 included). `option`: 0 or 1, else INVALID_VALUE.
pub fn granularity(size: u64, option: i32) -> Outcome<u64> {
    match option {
        0 => Ok(MINIMUM),
        1 => {
            let pow2 = if size == 0 {
                0
            } else {
                1u64 << (63 - size.leading_zeros())
            };
            Ok(pow2.clamp(MINIMUM, RECOMMENDED_MAX))
        }
        _ => Err(INVALID_VALUE),
    }
}

/// One memory range bound for one device.
#[derive(Clone, Copy, Debug)]
struct Bind {
    size: u64,
}

struct Team {
    num_devices: u32,
    size: u64,
    handle_types: u64,
    devices: Vec<i32>,
    /// `(device, mcOffset)` -> bind.
    binds: BTreeMap<(i32, u64), Bind>,
}

/// Every multicast object of the process.
#[derive(Default)]
pub struct Teams {
    teams: HashMap<u64, Team>,
    next_id: u64,
}

/// What a bind binds: the memory's handle (for its device, size and handle types) and where.
pub struct BindRequest {
    pub mc: u64,
    /// The device named by a `_v2` bind.
    pub dev: Option<i32>,
    pub mc_offset: u64,
    pub mem: u64,
    pub mem_offset: u64,
    pub size: u64,
    pub flags: u64,
}

impl Teams {
    /// `cuMulticastCreate`.
    pub fn create(
        &mut self,
        num_devices: u32,
        size: u64,
        handle_types: u64,
        flags: u64,
    ) -> Outcome<u64> {
        let devices = crate::device::count() as u32;
        if num_devices == 0 || num_devices > devices || flags != 0 {
            return Err(INVALID_VALUE);
        }
        if size == 0 || size % MINIMUM != 0 {
            return Err(INVALID_VALUE);
        }
        let known = u64::from(MEM_HANDLE_TYPE_POSIX_FD | MEM_HANDLE_TYPE_FABRIC);
        if handle_types & !known != 0 {
            return Err(INVALID_VALUE);
        }
        if handle_types & u64::from(MEM_HANDLE_TYPE_FABRIC) != 0
            && crate::config::config().no_fabric_channel
        {
            return Err(NOT_PERMITTED);
        }
        self.next_id += 1;
        let handle = handles::encode(Kind::Multicast, self.next_id);
        self.teams.insert(
            handle,
            Team {
                num_devices,
                size,
                handle_types,
                devices: Vec::new(),
                binds: BTreeMap::new(),
            },
        );
        Ok(handle)
    }

    /// Whether `handle` is a multicast object of this process.
    pub fn is_multicast(&self, handle: u64) -> bool {
        self.teams.contains_key(&handle)
    }

    /// `cuMemRelease` of a multicast object.
    pub fn release(&mut self, handle: u64) -> Outcome {
        self.teams.remove(&handle).map(|_| ()).ok_or(INVALID_VALUE)
    }

    /// `cuMulticastAddDevice`: INVALID_VALUE for an unknown object, a device already added or a
    /// whole team; INVALID_DEVICE for a device that does not exist.
    pub fn add_device(&mut self, handle: u64, dev: i32) -> Outcome {
        let team = self.teams.get_mut(&handle).ok_or(INVALID_VALUE)?;
        crate::device::check(dev).map_err(|_| INVALID_DEVICE)?;
        if team.devices.contains(&dev) || team.devices.len() as u32 >= team.num_devices {
            return Err(INVALID_VALUE);
        }
        team.devices.push(dev);
        Ok(())
    }

    /// Whether the team of `handle` is whole (`None`: no such object).
    pub fn whole(&self, handle: u64) -> Option<bool> {
        self.teams
            .get(&handle)
            .map(|t| t.devices.len() as u32 == t.num_devices)
    }

    /// The devices the team still lacks, for the simulator's own message.
    pub fn missing(&self, handle: u64) -> Option<(u32, usize)> {
        self.teams
            .get(&handle)
            .map(|t| (t.num_devices, t.devices.len()))
    }

    /// A bind once the team is whole (`cuMulticastBindMem[_v2]`, and `cuMulticastBindAddr[_v2]`
    /// resolved to the memory's handle and offset).
    pub fn bind(&mut self, memory: &Memory, r: &BindRequest) -> Outcome {
        let team = self.teams.get_mut(&r.mc).ok_or(INVALID_VALUE)?;
        if r.flags != 0 || r.size == 0 {
            return Err(INVALID_VALUE);
        }
        if [r.mc_offset, r.mem_offset, r.size]
            .iter()
            .any(|v| v % MINIMUM != 0)
        {
            return Err(INVALID_VALUE);
        }
        let physical = memory.physical(r.mem).ok_or(INVALID_VALUE)?;
        if !matches!(r.mem_offset.checked_add(r.size), Some(e) if e <= physical.size)
            || !matches!(r.mc_offset.checked_add(r.size), Some(e) if e <= team.size)
        {
            return Err(INVALID_VALUE);
        }
        // "Externally shareable as well as imported multicast objects can be bound only to
        // externally shareable memory."
        if team.handle_types != 0 && physical.handle_types == 0 {
            return Err(INVALID_VALUE);
        }
        let dev = r.dev.unwrap_or(physical.device);
        // The memory was created on a device of the team (and, for `_v2`, on `dev`).
        if !team.devices.contains(&dev) || physical.device != dev {
            return Err(INVALID_DEVICE);
        }
        let end = r.mc_offset + r.size;
        let overlaps = team
            .binds
            .range((dev, 0)..(dev, end))
            .next_back()
            .is_some_and(|(&(_, start), b)| start + b.size > r.mc_offset);
        if overlaps {
            return Err(INVALID_VALUE);
        }
        team.binds.insert((dev, r.mc_offset), Bind { size: r.size });
        Ok(())
    }

    /// `cuMulticastUnbind`: the bind at `mc_offset` for `dev`, exactly `size` bytes.
    pub fn unbind(&mut self, handle: u64, dev: i32, mc_offset: u64, size: u64) -> Outcome {
        let team = self.teams.get_mut(&handle).ok_or(INVALID_VALUE)?;
        if !team.devices.contains(&dev) {
            return Err(INVALID_DEVICE);
        }
        match team.binds.get(&(dev, mc_offset)) {
            Some(b) if b.size == size => {
                team.binds.remove(&(dev, mc_offset));
                Ok(())
            }
            _ => Err(INVALID_VALUE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granularity_as_r580_answered() {
        assert_eq!(granularity(2 << 20, 0), Ok(2 << 20));
        assert_eq!(granularity(2 << 20, 1), Ok(2 << 20));
        assert_eq!(granularity(1 << 30, 1), Ok(512 << 20));
        assert_eq!(granularity(4096, 0), Ok(2 << 20));
        assert_eq!(granularity(0, 1), Ok(2 << 20));
        assert_eq!(granularity(2 << 20, 2), Err(INVALID_VALUE));
    }
}
