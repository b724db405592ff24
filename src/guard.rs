//! The thread-local re-entrancy guard.
//!
//! A call that arrives while this thread is already inside the shim (the shim's own lookups, a
//! driver calling back into a wrapped symbol, a hook run by the loader) is forwarded untouched.

use std::cell::Cell;

thread_local! {
    // `const` initialisation: no lazy TLS init or destructor, so it works during thread teardown.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Held while this thread runs shim code; dropping it leaves the shim.
pub struct Guard(());

impl Guard {
    /// Enters the shim, or returns `None` when this thread is already inside it.
    pub fn enter() -> Option<Guard> {
        INSIDE.with(|inside| {
            if inside.get() {
                None
            } else {
                inside.set(true);
                Some(Guard(()))
            }
        })
    }

    pub fn is_inside() -> bool {
        INSIDE.with(|inside| inside.get())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        INSIDE.with(|inside| inside.set(false));
    }
}
