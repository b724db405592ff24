//! Initialization, contexts (primary and created) and each thread's current-context stack.

use crate::handles::{self, Kind};
use crate::types::{Code, Outcome, INVALID_CONTEXT, NOT_INITIALIZED};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

static INITIALIZED: AtomicBool = AtomicBool::new(false);

pub fn mark_initialized() {
    INITIALIZED.store(true, Ordering::SeqCst);
}

/// CUDA calls before `cuInit` fail with CUDA_ERROR_NOT_INITIALIZED.
pub fn check_initialized() -> Outcome {
    if INITIALIZED.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(NOT_INITIALIZED)
    }
}

pub struct Context {
    pub device: i32,
    pub primary: bool,
    /// A primary context is inactive while nobody retains it; its handle stays the same.
    pub active: bool,
}

struct Primary {
    id: u64,
    retained: u32,
}

#[derive(Default)]
pub struct Contexts {
    table: HashMap<u64, Context>,
    primaries: HashMap<i32, Primary>,
    next_id: u64,
}

impl Contexts {
    fn insert(&mut self, context: Context) -> u64 {
        self.next_id += 1;
        self.table.insert(self.next_id, context);
        self.next_id
    }

    /// A created context on `device`; returns its handle.
    pub fn create(&mut self, device: i32) -> u64 {
        let id = self.insert(Context {
            device,
            primary: false,
            active: true,
        });
        handles::encode(Kind::Context, id)
    }

    /// The id of an active context handle.
    pub fn id_of(&self, handle: u64) -> Outcome<u64> {
        handles::decode(Kind::Context, handle)
            .filter(|id| self.table.get(id).is_some_and(|c| c.active))
            .ok_or(INVALID_CONTEXT)
    }

    pub fn get(&self, handle: u64) -> Outcome<&Context> {
        let id = self.id_of(handle)?;
        Ok(&self.table[&id])
    }

    /// Destroys a created context (not a primary one).
    pub fn destroy(&mut self, handle: u64) -> Outcome<u64> {
        let id = self.id_of(handle)?;
        if self.table[&id].primary {
            return Err(INVALID_CONTEXT);
        }
        self.table.remove(&id);
        Ok(id)
    }

    /// The primary context of `device`, activated and retained once more.
    pub fn retain_primary(&mut self, device: i32) -> u64 {
        let id = match self.primaries.get(&device) {
            Some(p) => p.id,
            None => {
                let id = self.insert(Context {
                    device,
                    primary: true,
                    active: false,
                });
                self.primaries.insert(device, Primary { id, retained: 0 });
                id
            }
        };
        let primary = self.primaries.get_mut(&device).expect("inserted above");
        primary.retained += 1;
        self.table
            .get_mut(&id)
            .expect("primary contexts are never removed")
            .active = true;
        handles::encode(Kind::Context, id)
    }

    /// Drops one retain; returns the context id when it became inactive.
    pub fn release_primary(&mut self, device: i32) -> Outcome<Option<u64>> {
        let primary = self.primaries.get_mut(&device).filter(|p| p.retained > 0);
        let primary = primary.ok_or(INVALID_CONTEXT)?;
        primary.retained -= 1;
        if primary.retained > 0 {
            return Ok(None);
        }
        let id = primary.id;
        self.table
            .get_mut(&id)
            .expect("primary contexts are never removed")
            .active = false;
        Ok(Some(id))
    }

    /// The id of `device`'s primary context, if one was ever retained.
    pub fn primary_id(&self, device: i32) -> Option<u64> {
        self.primaries.get(&device).map(|p| p.id)
    }

    /// `cuDevicePrimaryCtxReset`: the primary context becomes inactive until it is retained
    /// again; the retains stay counted ("resetting the primary context does not release it"),
    /// so the releases that match them still succeed. Returns its id, if one was ever retained.
    pub fn reset_primary(&mut self, device: i32) -> Option<u64> {
        let id = self.primary_id(device)?;
        self.table
            .get_mut(&id)
            .expect("primary contexts are never removed")
            .active = false;
        Some(id)
    }

    /// `cuDevicePrimaryCtxGetState`: `(flags, active)`. No `cuDevicePrimaryCtxSetFlags` is
    /// simulated, so the stored flags are always 0 (CU_CTX_SCHED_AUTO).
    pub fn primary_state(&self, device: i32) -> (u32, bool) {
        let active = self
            .primary_id(device)
            .is_some_and(|id| self.table.get(&id).is_some_and(|c| c.active));
        (0, active)
    }
}

thread_local! {
    /// The calling thread's context stack (handles); the top is the current context.
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The handle on top of this thread's stack (it may since have been destroyed).
pub fn current_handle() -> Option<u64> {
    STACK.with(|s| s.borrow().last().copied())
}

pub fn push(handle: u64) {
    STACK.with(|s| s.borrow_mut().push(handle));
}

pub fn pop() -> Option<u64> {
    STACK.with(|s| s.borrow_mut().pop())
}

/// `cuCtxSetCurrent`: replaces the top of the stack; NULL pops it (a no-op on an empty stack).
pub fn set_current(handle: u64) {
    STACK.with(|s| {
        let mut stack = s.borrow_mut();
        match (handle, stack.last_mut()) {
            (0, _) => {
                stack.pop();
            }
            (h, Some(top)) => *top = h,
            (h, None) => stack.push(h),
        }
    });
}

/// Removes `handle` from the top of this thread's stack if it is there (`cuCtxDestroy`).
pub fn forget_if_current(handle: u64) {
    STACK.with(|s| {
        let mut stack = s.borrow_mut();
        if stack.last() == Some(&handle) {
            stack.pop();
        }
    });
}

/// A context handle given by the application: NULL and unknown handles are INVALID_CONTEXT.
pub fn required(handle: u64) -> Result<u64, Code> {
    if handle == 0 {
        Err(INVALID_CONTEXT)
    } else {
        Ok(handle)
    }
}
