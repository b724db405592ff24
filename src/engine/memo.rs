//! Clean verdicts remembered per thread (issue 24): the checks' generation, and one thread's last
//! clean call of a kind.
//!
//! On R580 a check's cache lines cost more than its instructions: the driver's call evicts them.
//! A program's loop repeats the same call, so a check remembers, per thread, the last call it
//! found clean, the generation then and what it learned, and skips its work for the same call
//! while the generation stays. A stale verdict could only hide a finding, as a cached fact could.

use crate::tls::{Key, Local};
use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

/// The checks' generation: it moves whenever what a clean verdict rests on may have changed
/// (anything ended, a family's shared state was written, a fork, memory freed). Two counters on
/// one cache line (every remembered verdict reads both): the moves, and the process's frees,
/// which are also the driver facts' pointer epoch, so that a free moves both with one locked add.
#[repr(align(64))]
struct Generation {
    moves: AtomicU64,
    frees: AtomicU64,
    /// The latest pointer epoch the process's pointer cache learnt a fact in (0: none yet): a
    /// free, which writes this line anyway, skips the cache when it is not the current one.
    cached: AtomicU64,
}

static GENERATION: Generation = Generation {
    moves: AtomicU64::new(1),
    frees: AtomicU64::new(1),
    cached: AtomicU64::new(0),
};

/// The current generation: both counters, which only grow, so their sum moves whenever either
/// does. Read it before the facts a verdict rests on.
#[inline]
pub fn generation() -> u64 {
    GENERATION
        .moves
        .load(Ordering::Acquire)
        .wrapping_add(GENERATION.frees.load(Ordering::Acquire))
}

/// The process's frees: the pointer epoch of the process's driver facts.
pub(crate) fn process_frees() -> &'static AtomicU64 {
    &GENERATION.frees
}

/// The latest pointer epoch the process's pointer cache learnt a fact in.
pub(crate) fn process_cached() -> &'static AtomicU64 {
    &GENERATION.cached
}

/// Moves the generation on (after the change it announces); returns the move's number (unique).
#[inline]
pub fn moved_on() -> u64 {
    let n = GENERATION.moves.fetch_add(1, Ordering::AcqRel);
    #[cfg(test)]
    OWN_MOVES.with(|n| n.set(n.get() + 1));
    n
}

#[cfg(test)]
thread_local! {
    /// How often this thread moved the generation (tests run in parallel: `fake::Harness`
    /// tells its own moves from other tests').
    pub static OWN_MOVES: Cell<u64> = const { Cell::new(0) };
}

/// One thread's last clean call of one kind: its key (the arguments and facts its verdict rests
/// on), the [`generation`] it was found clean in, and what the checks learned then (`V`, `()`
/// when nothing). Declared with `crate::fast_thread_local!` as `LastClean::new()` and used
/// through [`Remember`].
pub struct LastClean<K: Copy + PartialEq, V: Copy = ()> {
    last: Cell<Option<(K, u64, V)>>,
    /// This thread is reading or writing `last`: a signal handler that interrupts it finds the
    /// memo busy and neither trusts nor changes it (a Cell's copy is several stores).
    busy: Cell<bool>,
}

impl<K: Copy + PartialEq, V: Copy> LastClean<K, V> {
    pub const fn new() -> Self {
        LastClean {
            last: Cell::new(None),
            busy: Cell::new(false),
        }
    }

    /// Runs `f` on the memo unless this thread is already inside it (a signal handler
    /// interrupted it): then `None`.
    #[inline]
    fn exclusive<T>(&self, f: impl FnOnce(&Cell<Option<(K, u64, V)>>) -> Option<T>) -> Option<T> {
        if self.busy.replace(true) {
            return None;
        }
        compiler_fence(Ordering::SeqCst);
        let out = f(&self.last);
        compiler_fence(Ordering::SeqCst);
        self.busy.set(false);
        out
    }
}

/// [`LastClean`]'s use, on its thread-local key.
pub trait Remember<K, V> {
    /// What was learned of `key` when it was found clean, if it is this thread's last clean
    /// call of the kind and `generation` (read before the facts) has not moved since.
    fn recall(&'static self, key: K, generation: u64) -> Option<V>;
    /// Remembers `key` clean in `generation`, with what was learned.
    fn keep(&'static self, key: K, generation: u64, learned: V);
}

impl<K, V, Q> Remember<K, V> for Local<Q>
where
    K: Copy + PartialEq + 'static,
    V: Copy + 'static,
    Q: Key<Value = LastClean<K, V>>,
{
    #[inline]
    fn recall(&'static self, key: K, generation: u64) -> Option<V> {
        self.with(|memo| {
            memo.exclusive(|last| match last.get() {
                Some((k, g, learned)) if k == key && g == generation => Some(learned),
                _ => None,
            })
        })
    }
    #[inline]
    fn keep(&'static self, key: K, generation: u64, learned: V) {
        self.with(|memo| {
            memo.exclusive(|last| {
                last.set(Some((key, generation, learned)));
                Some(())
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::fast_thread_local! {
        static LAST: LastClean<u64, u32> = LastClean::new(); "sharecheck_tls_memo_test"
    }

    #[test]
    fn a_call_is_recalled_only_under_its_key_and_generation() {
        assert_eq!(LAST.recall(7, 3), None, "nothing kept yet");
        LAST.keep(7, 3, 42);
        assert_eq!(LAST.recall(7, 3), Some(42));
        assert_eq!(LAST.recall(8, 3), None, "another key");
        assert_eq!(LAST.recall(7, 4), None, "the generation moved");
        LAST.keep(8, 4, 1);
        assert_eq!(LAST.recall(7, 3), None, "only the last call is remembered");
        assert_eq!(LAST.recall(8, 4), Some(1));
    }

    #[test]
    fn a_memo_in_use_is_neither_trusted_nor_changed() {
        LAST.keep(5, 9, 50);
        // As a signal handler finds it when it interrupts this thread inside the memo.
        LAST.with(|m| m.busy.set(true));
        assert_eq!(LAST.recall(5, 9), None, "not trusted while busy");
        LAST.keep(6, 9, 60);
        LAST.with(|m| m.busy.set(false));
        assert_eq!(LAST.recall(5, 9), Some(50), "not changed while busy");
    }

    #[test]
    fn moving_on_changes_the_generation() {
        let before = generation();
        moved_on();
        assert!(generation() > before);
    }
}
