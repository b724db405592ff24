//! The peer-access family: checks for `cuDeviceCanAccessPeer`, `cuCtx{Enable,Disable}PeerAccess`,
//! `cuMemcpyPeer(Async)` in every spelling ([`cuda`]) and their HIP counterparts ([`hip`]), and the
//! peer grants they track ([`grants`]). Catalogue: `sharecheck_core::rules::peer`.

mod cuda;
pub mod grants;
mod hip;
#[cfg(test)]
mod tests;

use crate::engine::state::{FamilyState, Lifetime};
use crate::guard::SHARDS;
use grants::Grants;
use parking_lot::RwLock;

/// The message of a copy range that runs past the allocation its pointer is in (both APIs):
/// `tail` is what `engine::facts::uncovered_tail` found.
fn range_past_allocation(
    name: &str,
    ptr: u64,
    size_name: &str,
    bytes: u64,
    (base, end, missing): (u64, u64, u64),
) -> String {
    use crate::engine::hex;
    format!(
        "{name} {} + {size_name} {bytes} leaves its allocation [{}, {}): the last {missing} \
         byte(s) lie past the memory the copy may use",
        hex(ptr),
        hex(base),
        hex(end)
    )
}

/// The family's checks, by the names the table uses.
pub mod checks {
    use super::{cuda, hip};
    pub const CAN_ACCESS_CUDA: cuda::CanAccess = cuda::CanAccess;
    pub const ENABLE_CUDA: cuda::Enable = cuda::Enable;
    pub const DISABLE_CUDA: cuda::Disable = cuda::Disable;
    pub const COPY_CUDA: cuda::Copy = cuda::Copy;
    pub const COPY_STREAM_CUDA: cuda::CopyStream = cuda::CopyStream;
    pub const CAN_ACCESS_HIP: hip::CanAccess = hip::CanAccess;
    pub const ENABLE_HIP: hip::Enable = hip::Enable;
    pub const DISABLE_HIP: hip::Disable = hip::Disable;
    pub const COPY_HIP: hip::Copy = hip::Copy;
    pub const COPY_STREAM_HIP: hip::CopyStream = hip::CopyStream;
}

/// The peer grants of one process. Read on every peer copy, written on enable and disable and the
/// first copy on a stream: one copy per shard, each behind its own read-write lock on its own
/// cache line, so readers on different threads do not contend; a write updates every copy. No
/// lock is held across a driver call.
#[derive(Default)]
pub struct PeerState {
    shards: [Shard; SHARDS],
}

#[derive(Default)]
#[repr(align(128))]
struct Shard(RwLock<Grants>);

impl PeerState {
    /// Reads the calling thread's copy (`cx.shard`).
    pub fn read<T>(&self, shard: usize, f: impl FnOnce(&Grants) -> T) -> T {
        f(&self.shards[shard % SHARDS].0.read())
    }

    /// Applies `f` to every copy, one at a time in shard order; returns what it gave on the
    /// first.
    pub fn write<T>(&self, mut f: impl FnMut(&mut Grants) -> T) -> T {
        let (first, rest) = self.shards.split_first().expect("SHARDS > 0");
        let result = f(&mut first.0.write());
        for shard in rest {
            f(&mut shard.0.write());
        }
        // Copies remembered clean may rest on what changed.
        crate::engine::moved_on();
        result
    }
}

impl FamilyState for PeerState {
    const SLOT: usize = 0;
    /// Grants do not refer to memory.
    const FORGETS_FREED_MEMORY: bool = false;
    #[inline]
    fn forget(&self, gone: Lifetime) {
        if gone == Lifetime::MemoryFreed {
            return;
        }
        self.write(|g| match gone {
            Lifetime::ContextDestroyed(ctx) => g.forget_context(ctx),
            Lifetime::PrimaryContextEnded(dev) => g.forget_cuda_device(dev),
            Lifetime::StreamDestroyed(stream) => g.forget_stream(stream),
            // Without the device, forgetting every HIP grant is the safe side.
            Lifetime::HipDeviceReset(Some(dev)) => g.forget_hip_device(dev),
            Lifetime::HipDeviceReset(None) => g.forget_hip(),
            Lifetime::MemoryFreed => {}
        });
    }
}
