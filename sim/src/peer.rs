//! Peer access grants: per (current context -> peer context) for CUDA, per (current device ->
//! peer device) for HIP.

use crate::types::Owner;
use std::collections::HashSet;

#[derive(Default)]
pub struct Peers {
    /// `(context id, peer context id)`.
    pub(crate) contexts: HashSet<(u64, u64)>,
    /// `(device, peer device)`.
    pub(crate) devices: HashSet<(i32, i32)>,
}

impl Peers {
    pub fn forget(&mut self, owner: Owner) {
        match owner {
            Owner::Context(id) => self.contexts.retain(|&(a, b)| a != id && b != id),
            Owner::HipDevice(d) => self.devices.retain(|&(a, _)| a != d),
            // A memory pool holds no peer grants.
            Owner::MemPool(_) => {}
        }
    }

    pub fn context_grant(&self, context: u64, peer: u64) -> bool {
        self.contexts.contains(&(context, peer))
    }

    /// How many peers `context` has enabled access to.
    pub fn context_grant_count(&self, context: u64) -> usize {
        self.contexts.iter().filter(|&&(c, _)| c == context).count()
    }

    pub fn device_grant(&self, device: i32, peer: i32) -> bool {
        self.devices.contains(&(device, peer))
    }
}
