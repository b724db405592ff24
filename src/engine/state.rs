//! Tracked state, owned by the families, behind one interface.
//!
//! Each family keeps what the driver cannot tell (peer grants, ...) in its own state, which
//! implements [`FamilyState`]: what it forgets when a context, stream or device ends
//! ([`Lifetime`], from the engine's lifecycle observers) and how it starts in a forked child.
//! [`States`] holds every family's state plus the engine's own reporting state; checks reach it
//! through [`super::Cx`], never through globals, so unit tests give each test a fresh one.

use crate::families;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicPtr, Ordering};

/// Something ended that tracked state may refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// `cuCtxDestroy`: the context handle.
    ContextDestroyed(u64),
    /// A device's primary context ended (released for the last time, or reset).
    PrimaryContextEnded(i32),
    /// `cuStreamDestroy`: the stream handle.
    StreamDestroyed(u64),
    /// `hipDeviceReset` of this device (`None`: the runtime could not say which).
    HipDeviceReset(Option<i32>),
    /// Memory was freed, released or unmapped (which, the shim does not need to know).
    MemoryFreed,
}

/// What every family's state provides.
pub trait FamilyState: Send + Sync {
    /// Forget what belonged to something that ended. Forgetting must always be safe: a check
    /// never reports on tracked state alone without the driver's answer confirming it.
    fn forget(&self, gone: Lifetime);
}

/// The engine's own state: what was reported, for the duplicate limit and once-per-process
/// findings. Touched only when a call has findings.
#[derive(Default)]
pub struct Reporting {
    /// Reports per rule.
    pub reported: HashMap<&'static str, u32>,
    /// Keys of findings reported once per process (divergences).
    pub once: HashSet<String>,
}

/// All tracked state of one process.
#[derive(Default)]
pub struct States {
    pub peer: families::peer::PeerState,
    pub ipc: families::ipc::IpcState,
    pub attach: families::attach::AttachState,
    pub endpoint: families::endpoint::EndpointState,
    pub reporting: Mutex<Reporting>,
}

impl States {
    /// Every family's state, for the engine's lifecycle observers.
    pub fn families(&self) -> [&dyn FamilyState; 4] {
        [&self.peer, &self.ipc, &self.attach, &self.endpoint]
    }

    #[inline]
    pub fn forget(&self, gone: Lifetime) {
        for family in self.families() {
            family.forget(gone);
        }
    }
}

static CURRENT: AtomicPtr<States> = AtomicPtr::new(std::ptr::null_mut());

/// The process's tracked state (made on first use).
#[inline]
pub fn states() -> &'static States {
    let current = CURRENT.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: a non-null pointer in CURRENT came from Box::into_raw and is never freed.
        return unsafe { &*current };
    }
    first_states()
}

#[cold]
fn first_states() -> &'static States {
    let fresh = Box::into_raw(Box::default());
    match CURRENT.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just made from a Box, never freed.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // SAFETY: `fresh` lost the race and was never shared.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as for `current` above.
            unsafe { &*winner }
        }
    }
}

/// In a forked child: every family starts empty (the child's contexts are not the parent's: CUDA
/// and HIP state does not survive fork). The parent's state is left behind, not freed: a thread
/// of the parent may have held one of its locks at fork, and only the forking thread lives on.
pub fn restart_after_fork_in_child() {
    CURRENT.store(Box::into_raw(Box::default()), Ordering::Release);
}
