//! What the peer family tracks because the driver cannot tell it: peer grants, per direction.
//!
//! Forgetting is always safe (a stale "not enabled" is corrected by the driver's own answer, see
//! `Basis::Tracked`), so anything that may end a grant (context destroyed, primary context reset
//! or released, device reset) forgets it.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// One direction of CUDA peer access: `from` may access `to`'s memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContextPair {
    pub from: u64,
    pub to: u64,
}

impl ContextPair {
    /// The other direction.
    pub fn reverse(self) -> ContextPair {
        ContextPair {
            from: self.to,
            to: self.from,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Grant {
    pub from_device: i32,
    pub to_device: i32,
    /// Streams (handles; 0 for the legacy stream) of `from` on which asynchronous peer copies
    /// between the two contexts were issued while access was granted.
    pub copy_streams: HashSet<u64>,
}

#[derive(Default)]
pub struct Grants {
    cuda: HashMap<ContextPair, Grant>,
    /// `(device, peer)` of HIP: `device` may access `peer`'s memory.
    hip: HashSet<(i32, i32)>,
}

impl Grants {
    pub fn cuda(&self, pair: ContextPair) -> Option<&Grant> {
        self.cuda.get(&pair)
    }

    pub fn cuda_mut(&mut self, pair: ContextPair) -> Option<&mut Grant> {
        self.cuda.get_mut(&pair)
    }

    pub fn grant_cuda(&mut self, pair: ContextPair, from_device: i32, to_device: i32) {
        self.cuda.entry(pair).or_insert(Grant {
            from_device,
            to_device,
            copy_streams: HashSet::default(),
        });
    }

    /// How many contexts `ctx` has been granted access to.
    pub fn cuda_peers_of(&self, ctx: u64) -> usize {
        self.cuda.keys().filter(|pair| pair.from == ctx).count()
    }

    pub fn revoke_cuda(&mut self, pair: ContextPair) -> Option<Grant> {
        self.cuda.remove(&pair)
    }

    /// A stream was destroyed: it can no longer be asked about, and its work completes anyway.
    pub fn forget_stream(&mut self, stream: u64) {
        for grant in self.cuda.values_mut() {
            grant.copy_streams.remove(&stream);
        }
    }

    /// A context was destroyed: access from it and to it ended.
    pub fn forget_context(&mut self, ctx: u64) {
        self.cuda
            .retain(|pair, _| pair.from != ctx && pair.to != ctx);
    }

    /// A device's primary context ended: forget every grant that involves a context on it.
    pub fn forget_cuda_device(&mut self, device: i32) {
        self.cuda
            .retain(|_, g| g.from_device != device && g.to_device != device);
    }

    pub fn hip(&self, device: i32, peer: i32) -> bool {
        self.hip.contains(&(device, peer))
    }

    pub fn grant_hip(&mut self, device: i32, peer: i32) {
        self.hip.insert((device, peer));
    }

    pub fn revoke_hip(&mut self, device: i32, peer: i32) -> bool {
        self.hip.remove(&(device, peer))
    }

    pub fn forget_hip_device(&mut self, device: i32) {
        self.hip.retain(|&(a, b)| a != device && b != device);
    }

    pub fn forget_hip(&mut self) {
        self.hip.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(from: u64, to: u64) -> ContextPair {
        ContextPair { from, to }
    }

    #[test]
    fn ending_a_context_or_device_forgets_every_grant_that_involves_it() {
        let mut g = Grants::default();
        g.grant_cuda(pair(1, 2), 0, 1);
        g.grant_cuda(pair(2, 1), 1, 0);
        g.grant_cuda(pair(1, 3), 0, 2);
        g.forget_context(2);
        assert!(g.cuda(pair(1, 2)).is_none() && g.cuda(pair(2, 1)).is_none());
        assert!(g.cuda(pair(1, 3)).is_some(), "other pairs stay");
        g.forget_cuda_device(2);
        assert!(g.cuda(pair(1, 3)).is_none());

        g.grant_hip(0, 1);
        g.grant_hip(1, 2);
        g.forget_hip_device(0);
        assert!(!g.hip(0, 1) && g.hip(1, 2));
    }

    #[test]
    fn a_destroyed_stream_leaves_every_grant() {
        let mut g = Grants::default();
        g.grant_cuda(pair(1, 2), 0, 1);
        g.cuda_mut(pair(1, 2)).unwrap().copy_streams.extend([0, 77]);
        g.forget_stream(77);
        assert_eq!(
            g.cuda(pair(1, 2)).unwrap().copy_streams,
            HashSet::from_iter([0])
        );
        assert_eq!(g.cuda_peers_of(1), 1);
    }
}
