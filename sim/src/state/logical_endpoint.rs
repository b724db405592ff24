//! The driver-wide operations of the `logical_endpoint` area (on [`Driver`], which holds every area).

#![allow(unused_imports)]

use super::{Driver, Owner};
use crate::device;
use crate::logical_endpoint::*;
use crate::memory::{Export, MemKind, GRANULARITY};
use crate::state_dir;
use crate::types::{
    attribute, logical_endpoint as le, CUlogicalEndpointProp, Outcome, INVALID_VALUE,
    MEM_HANDLE_TYPE_FABRIC, NOT_PERMITTED, NOT_SUPPORTED, OUT_OF_MEMORY,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

impl Driver {
    /// `cuLogicalEndpointBindAddr`: `ptr` must lie in a VMM mapping of a `cuMemCreate`
    /// allocation, or in memory of a pool (`cuMemAllocAsync`), of `dev` (or its NUMA node).
    pub fn bind_address(
        &mut self,
        id: u32,
        dev: i32,
        offset: u64,
        ptr: u64,
        size: u64,
        flags: u64,
    ) -> Outcome {
        let shareable_only = self.endpoints.check_bind(id, dev, offset, size, flags)?;
        if !aligned(&[ptr]) {
            return Err(INVALID_VALUE);
        }
        let (room, device, numa, shareable) = match self.memory.virtual_mapping(ptr) {
            Some(m) => (
                m.size - (ptr - m.start),
                m.physical.device,
                m.physical.numa,
                m.physical.handle_types & MEM_HANDLE_TYPE_FABRIC != 0,
            ),
            None => match self.memory.find(ptr) {
                Some(a) if a.kind == MemKind::Pool => {
                    (a.base + a.size - ptr, a.device, None, false)
                }
                _ => return Err(INVALID_VALUE),
            },
        };
        if size > room {
            return Err(INVALID_VALUE);
        }
        check_location(dev, device, numa)?;
        if shareable_only && !shareable {
            return Err(INVALID_VALUE);
        }
        self.endpoints.record_bind(id, dev, offset, size);
        Ok(())
    }

    /// `cuLogicalEndpointBindMem`.
    #[allow(clippy::too_many_arguments)] // the C prototype's
    pub fn bind_memory(
        &mut self,
        id: u32,
        dev: i32,
        offset: u64,
        handle: u64,
        mem_offset: u64,
        size: u64,
        flags: u64,
    ) -> Outcome {
        let shareable_only = self.endpoints.check_bind(id, dev, offset, size, flags)?;
        if !aligned(&[mem_offset]) {
            return Err(INVALID_VALUE);
        }
        let physical = self.memory.physical(handle).ok_or(INVALID_VALUE)?;
        let fits = mem_offset
            .checked_add(size)
            .is_some_and(|end| end <= physical.size);
        if !fits {
            return Err(INVALID_VALUE);
        }
        check_location(dev, physical.device, physical.numa)?;
        if shareable_only && physical.handle_types & MEM_HANDLE_TYPE_FABRIC == 0 {
            return Err(INVALID_VALUE);
        }
        self.endpoints.record_bind(id, dev, offset, size);
        Ok(())
    }
}
