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

/// Runs shim-internal work that must not unwind into the program: a panic gives `fallback`
/// (the caller then behaves as pure forwarding) and one log line. This needs `panic = "unwind"`
/// (the release profile in Cargo.toml): with "abort" the panic would kill the program.
pub fn shielded<T>(fallback: T, work: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(value) => value,
        Err(_) => {
            crate::log::warn_once(
                "panic",
                format_args!("internal error; the call was forwarded unchanged (further internal errors are not reported)"),
            );
            fallback
        }
    }
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
