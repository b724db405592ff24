//! The thread-local re-entrancy guard.
//!
//! A call that arrives while this thread is already inside the shim (the shim's own lookups, a
//! driver calling back into a wrapped symbol, a hook run by the loader) is forwarded untouched.

use std::cell::Cell;

/// What the shim keeps per thread: one thread-local, reached once per call.
pub struct ThreadState {
    inside: Cell<bool>,
    /// Covered calls this thread made (numbers findings when no trace is written).
    calls: Cell<u64>,
    /// This thread's shard of state that many threads read (0 until first asked).
    shard: Cell<u8>,
}

/// Shards of read-mostly state: threads spread over them so that readers do not share a lock
/// word.
pub const SHARDS: usize = 8;

thread_local! {
    // `const` initialisation of a type without a destructor: no lazy TLS init and no destructor
    // registration, so it works during thread teardown and costs one TLS lookup.
    static THREAD: ThreadState = const {
        ThreadState {
            inside: Cell::new(false),
            calls: Cell::new(0),
            shard: Cell::new(0),
        }
    };
}

/// Held while this thread runs shim code; dropping it leaves the shim.
pub struct Guard(*const ThreadState);

impl Guard {
    /// Enters the shim, or returns `None` when this thread is already inside it.
    #[inline]
    pub fn enter() -> Option<Guard> {
        let state = THREAD.with(|t| t as *const ThreadState);
        // SAFETY: the thread-local lives as long as this thread, and the guard never leaves it
        // (it is neither Send nor Sync: it holds a raw pointer).
        let t = unsafe { &*state };
        if t.inside.get() {
            None
        } else {
            t.inside.set(true);
            Some(Guard(state))
        }
    }

    pub fn is_inside() -> bool {
        THREAD.with(|t| t.inside.get())
    }

    /// Counts a covered call of this thread; returns its number.
    #[inline]
    pub fn count_call(&self) -> u64 {
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        let n = t.calls.get() + 1;
        t.calls.set(n);
        n
    }
}

impl Guard {
    /// This thread's shard (`0..SHARDS`), given out round-robin on first use.
    #[inline]
    pub fn shard(&self) -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        match t.shard.get() {
            0 => {
                let shard = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
                t.shard.set(shard as u8 + 1);
                shard
            }
            s => usize::from(s) - 1,
        }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: see `enter`.
        unsafe { &*self.0 }.inside.set(false);
    }
}

/// Runs shim-internal work that must not unwind into the program: a panic gives `fallback`
/// (the caller then behaves as pure forwarding) and one log line. This needs `panic = "unwind"`
/// (the release profile in Cargo.toml): with "abort" the panic would kill the program.
#[inline(always)]
pub fn shielded<T>(fallback: T, work: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(value) => value,
        Err(_) => {
            internal_error();
            fallback
        }
    }
}

#[cold]
#[inline(never)]
fn internal_error() {
    crate::log::warn_once(
        "panic",
        format_args!(
            "internal error; the call was forwarded unchanged (further internal errors are not \
             reported)"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shielded_work_that_panics_gives_the_fallback() {
        assert_eq!(shielded(7, || 1), 1);
        assert_eq!(shielded(7, || -> i32 { panic!("internal") }), 7);
    }

    #[test]
    fn the_guard_refuses_reentry_until_dropped() {
        let outer = Guard::enter().expect("first entry");
        assert!(Guard::is_inside());
        assert!(Guard::enter().is_none());
        drop(outer);
        assert!(!Guard::is_inside());
        assert!(Guard::enter().is_some());
    }
}
