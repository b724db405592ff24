//! The one lock-protected state of the simulated driver, and what ties its areas together.

mod ipc;
mod logical_endpoint;
mod peer;
mod pool;
mod stream_event;

pub use stream_event::destroy_stream;

use crate::context::{self, Contexts};
use crate::ipc::Ipc;
use crate::logical_endpoint::Endpoints;
use crate::memory::{Allocation, Memory};
use crate::peer::Peers;
use crate::pool::Pools;
use crate::stream_event::Streams;
pub use crate::types::Owner;
use crate::types::{Outcome, INVALID_CONTEXT};
use parking_lot::Mutex;
use std::sync::LazyLock;

#[derive(Default)]
pub struct Driver {
    pub contexts: Contexts,
    pub memory: Memory,
    pub streams: Streams,
    pub peers: Peers,
    pub ipc: Ipc,
    pub endpoints: Endpoints,
    pub pools: Pools,
    pub multicast: crate::multicast::Teams,
}

static DRIVER: LazyLock<Mutex<Driver>> = LazyLock::new(Default::default);

/// Runs `f` with the state locked. `f` must not call back into exported functions; nothing in
/// the model does (it only calls libc), so the lock is never taken twice by one thread.
pub fn with<R>(f: impl FnOnce(&mut Driver) -> R) -> R {
    f(&mut DRIVER.lock())
}

impl Driver {
    /// The calling thread's current context: `(handle, device)`.
    pub fn current_context(&self) -> Outcome<(u64, i32)> {
        let handle = context::current_handle().ok_or(INVALID_CONTEXT)?;
        let device = self.contexts.get(handle)?.device;
        Ok((handle, device))
    }

    /// The owner of what the current context allocates.
    pub fn current_owner(&self) -> Outcome<(Owner, i32)> {
        let (handle, device) = self.current_context()?;
        Ok((Owner::Context(self.contexts.id_of(handle)?), device))
    }

    /// Frees the allocation that starts at `base` if `accept` takes it (a free function accepts
    /// only what its allocator made); INVALID_VALUE for anything else, a double free included.
    /// An IPC export of the memory is withdrawn with it.
    pub fn free_memory(&mut self, base: u64, accept: impl Fn(&Allocation) -> bool) -> Outcome {
        let freed = self.memory.remove_if(base, accept)?;
        if let Some(export) = freed.export {
            crate::ipc::withdraw_memory_export(export);
        }
        Ok(())
    }

    /// Frees everything `owner` holds: memory (and IPC imports), streams, events, peer grants.
    pub fn release_owner(&mut self, owner: Owner) {
        for allocation in self.memory.remove_owned(owner) {
            if let Some(export) = allocation.export {
                crate::ipc::withdraw_memory_export(export);
            }
            self.ipc.forget_import(allocation.base);
        }
        for stream in self.streams.remove_owned(owner) {
            self.detach_stream(stream);
        }
        self.peers.forget(owner);
    }
}
