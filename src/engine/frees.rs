//! The process's recent frees: what a later call may still name after the driver forgot it
//! (a peer copy of memory this process freed is explained as such).
//!
//! A free is frequent and on the program's path, so recording one costs no locked operation of
//! its own (issue 24): it takes the number of the free's move of the pointer epoch
//! ([`super::Cx::memory_freed`], the one locked add every free makes anyway) and writes the slot
//! that number names. Each slot is a sequence lock: its stamp (the number + 1) is cleared while
//! the slot is written, and a reader keeps a slot only when it read the same stamp before and
//! after its values. Other ends of memory (an unmap, a release) move the epoch too and write no
//! slot, so a slot may keep an older free until a later number lands on it: every free kept is
//! one this process made, which is all a reader asks.

use std::sync::atomic::{fence, AtomicU64, Ordering::*};

/// How many slots the ring has.
pub const KEPT: usize = 1024;

#[derive(Default)]
struct Slot {
    stamp: AtomicU64,
    base: AtomicU64,
    /// The size + 1; 0: not known.
    size: AtomicU64,
}

/// The ring of recent frees, `(base, size where a cache knew it)`.
pub struct RecentFrees {
    slots: Box<[Slot]>,
}

impl Default for RecentFrees {
    fn default() -> Self {
        RecentFrees {
            slots: (0..KEPT).map(|_| Slot::default()).collect(),
        }
    }
}

impl RecentFrees {
    /// Keeps free number `n` (unique: the value a locked add returned).
    #[inline]
    pub fn put(&self, n: u64, base: u64, size: Option<u64>) {
        let slot = &self.slots[(n % KEPT as u64) as usize];
        slot.stamp.store(0, Relaxed);
        fence(Release);
        slot.base.store(base, Relaxed);
        slot.size
            .store(size.map_or(0, |s| s.saturating_add(1)), Relaxed);
        slot.stamp.store(n.wrapping_add(1), Release);
    }

    /// The frees kept, most recent first. Read only where a call names memory the driver does
    /// not know (a failure's explanation), so it may sort.
    pub fn recent(&self) -> Vec<(u64, Option<u64>)> {
        let mut kept: Vec<(u64, u64, Option<u64>)> = self
            .slots
            .iter()
            .filter_map(|slot| {
                let stamp = slot.stamp.load(Acquire);
                let (base, size) = (slot.base.load(Relaxed), slot.size.load(Relaxed));
                fence(Acquire);
                (stamp != 0 && slot.stamp.load(Relaxed) == stamp)
                    .then(|| (stamp, base, size.checked_sub(1)))
            })
            .collect();
        kept.sort_unstable_by_key(|k| std::cmp::Reverse(k.0));
        kept.into_iter()
            .map(|(_, base, size)| (base, size))
            .collect()
    }

    /// The last free that covered `ptr` (its base, or inside its known size).
    pub fn freed_at(&self, ptr: u64) -> Option<(u64, Option<u64>)> {
        self.recent()
            .into_iter()
            .find(|&(base, size)| ptr == base || size.is_some_and(|s| ptr > base && ptr - base < s))
    }
}

#[cfg(test)]
mod tests {
    use super::{RecentFrees, KEPT};

    #[test]
    fn the_ring_keeps_the_last_frees_most_recent_first() {
        let frees = RecentFrees::default();
        assert!(frees.recent().is_empty());
        frees.put(1, 0x10, None);
        frees.put(2, 0x20, Some(0));
        assert_eq!(
            frees.recent(),
            [(0x20, Some(0)), (0x10, None)],
            "sizes kept as known, zero included"
        );
        for n in 0..KEPT as u64 + 5 {
            frees.put(3 + n, 0x1000 + n, Some(n));
        }
        let kept = frees.recent();
        assert_eq!(kept.len(), KEPT);
        let last = KEPT as u64 + 4;
        assert_eq!(kept[0], (0x1000 + last, Some(last)));
        assert_eq!(kept[KEPT - 1], (0x1000 + 5, Some(5)));
    }

    #[test]
    fn numbers_another_end_of_memory_took_leave_older_frees_kept() {
        let frees = RecentFrees::default();
        frees.put(10, 0x10, Some(0x8));
        // Numbers 11..=KEPT+10 went to unmaps: free KEPT + 11 lands on slot 11, not on 10's.
        frees.put(KEPT as u64 + 11, 0x20, None);
        assert_eq!(frees.recent(), [(0x20, None), (0x10, Some(0x8))]);
        assert_eq!(frees.freed_at(0x14), Some((0x10, Some(0x8))));
        assert_eq!(frees.freed_at(0x18), None, "past its size");
        assert_eq!(frees.freed_at(0x20), Some((0x20, None)));
        assert_eq!(
            frees.freed_at(0x21),
            None,
            "a free of unknown size covers its base only"
        );
    }

    #[test]
    fn a_free_read_while_frees_are_written_is_never_torn() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
        let frees = std::sync::Arc::new(RecentFrees::default());
        let done = std::sync::Arc::new(AtomicBool::new(false));
        // Readers that have read a free: the writer goes on until every one has, however late
        // the scheduler starts them.
        let reading = std::sync::Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (frees, done, reading) = (frees.clone(), done.clone(), reading.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !done.load(Relaxed) {
                        for (base, size) in frees.recent().into_iter().take(64) {
                            assert_eq!(size, Some(base * 3), "a torn slot: {base:#x}");
                            if seen == 0 {
                                reading.fetch_add(1, Relaxed);
                            }
                            seen += 1;
                        }
                    }
                    seen
                })
            })
            .collect();
        let mut base = 1u64;
        while base < 20_000 || reading.load(Relaxed) < 3 {
            frees.put(base, base, Some(base * 3));
            base += 1;
        }
        done.store(true, Relaxed);
        for r in readers {
            assert!(r.join().expect("a reader panicked") > 0);
        }
    }
}
