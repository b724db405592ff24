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
use std::sync::atomic::{fence, AtomicU64, Ordering::*};

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
    pub const FREED_CUDA: cuda::Freed = cuda::Freed;
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
    /// Memory this process freed. Read only when a copy names memory the driver does not know.
    freed: Freed,
}

/// How many frees [`PeerState::freed`] remembers.
const FREED_KEPT: usize = 1024;

/// The last [`FREED_KEPT`] frees, `(base, size where a cache knew it)`, in a ring without a
/// lock: every free writes one (issue 24: a lock's round trip on each `cuMemFree`), and a copy
/// that names unknown memory reads them. Each slot is a sequence lock: its stamp (the free's
/// number + 1) is cleared while the slot is written, and a reader keeps a slot only when it read
/// the same stamp before and after its values.
struct Freed {
    next: AtomicU64,
    slots: Box<[FreedSlot]>,
}

#[derive(Default)]
struct FreedSlot {
    stamp: AtomicU64,
    base: AtomicU64,
    /// The size + 1; 0: not known.
    size: AtomicU64,
}

impl Default for Freed {
    fn default() -> Self {
        Freed {
            next: AtomicU64::new(0),
            slots: (0..FREED_KEPT).map(|_| FreedSlot::default()).collect(),
        }
    }
}

impl Freed {
    fn push(&self, base: u64, size: Option<u64>) {
        let n = self.next.fetch_add(1, Relaxed);
        let slot = &self.slots[(n % FREED_KEPT as u64) as usize];
        slot.stamp.store(0, Relaxed);
        fence(Release);
        slot.base.store(base, Relaxed);
        slot.size
            .store(size.map_or(0, |s| s.saturating_add(1)), Relaxed);
        slot.stamp.store(n + 1, Release);
    }

    /// The frees still kept, most recent first.
    fn recent(&self) -> impl Iterator<Item = (u64, Option<u64>)> + '_ {
        let next = self.next.load(Acquire);
        (next.saturating_sub(FREED_KEPT as u64)..next)
            .rev()
            .filter_map(|n| {
                let slot = &self.slots[(n % FREED_KEPT as u64) as usize];
                let stamp = slot.stamp.load(Acquire);
                let (base, size) = (slot.base.load(Relaxed), slot.size.load(Relaxed));
                fence(Acquire);
                (stamp == n + 1 && slot.stamp.load(Relaxed) == stamp)
                    .then(|| (base, size.checked_sub(1)))
            })
    }
}

#[derive(Default)]
#[repr(align(128))]
struct Shard(RwLock<Grants>);

impl PeerState {
    /// Remembers a free.
    pub fn freed(&self, base: u64, size: Option<u64>) {
        self.freed.push(base, size);
    }

    /// The last free that covered `ptr` (its base, or inside its known size).
    pub fn freed_at(&self, ptr: u64) -> Option<(u64, Option<u64>)> {
        self.freed
            .recent()
            .find(|&(base, size)| ptr == base || size.is_some_and(|s| ptr > base && ptr - base < s))
    }

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
