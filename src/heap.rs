//! The shim's own heap: lock-free, so that its work is as async-signal-safe as the program's
//! handler needs it to be (issue 28).
//!
//! A covered call made in a signal handler that interrupted the program outside the shim takes
//! the whole path: checks, and for a misuse a finding, whose message is formatted. Formatting
//! allocates. Through `malloc`, that deadlocks when the handler interrupted the program (or a
//! driver call it made) inside `malloc`, which holds its arena's lock: measured on R580 (3 of 8
//! runs of a handler storm) and on the simulator (every run of `writer_life malloc-storm`). The
//! shim cannot tell that it runs in a handler, so its allocations never take a lock:
//!
//! - blocks of up to [`MAX_SMALL`] bytes come in power-of-two classes from 16 bytes; each class
//!   has a free list, a lock-free stack whose head carries a 16-bit tag against ABA (a pop that a
//!   handler interrupts and overtakes retries). An empty list takes a slab from `mmap` and cuts
//!   it into blocks. Blocks go back to their list, never to the system: the shim's own memory
//!   is small and reused, and a block read by a pop that lost its race is always mapped;
//! - larger blocks (and alignments above a page) are their own `mmap`, grown with `mremap` and
//!   given back with `munmap`.
//!
//! `mmap`, `mremap` and `munmap` are system calls, async-signal-safe; nothing here takes a lock
//! or calls into libc's allocator. Memory the shim allocates never goes to C code to be freed,
//! nor does the shim free C's. (What libc functions the shim calls allocate for themselves, with
//! `malloc`, and are kept off the paths a handler's call takes: LD_PRELOAD.md says which.)

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{
    AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed},
};

/// The smallest block: a free block holds the next one's address.
const MIN_SMALL: usize = 16;
/// The largest block of a class; above it, a mapping of its own.
const MAX_SMALL: usize = 32 * 1024;
/// Classes 16, 32, ..., `MAX_SMALL`.
const CLASSES: usize = (MAX_SMALL.trailing_zeros() - MIN_SMALL.trailing_zeros() + 1) as usize;
/// A slab: at least this, and at least 8 blocks.
const SLAB: usize = 64 * 1024;
const PAGE: usize = 4096;
/// User-space addresses fit in 48 bits on x86-64 and aarch64 (4-level tables; the kernel does not
/// give out addresses above them unless asked with a hint).
const ADDRESS: u64 = (1 << 48) - 1;

/// The heads of the free lists: the tag in the top 16 bits, the first block's address below.
static FREE: [AtomicU64; CLASSES] = [const { AtomicU64::new(0) }; CLASSES];

/// The shim's allocator (`#[global_allocator]` in `lib.rs`).
pub struct ShimHeap;

/// The class of a layout, or `None`: a mapping of its own.
fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(MIN_SMALL);
    if size > MAX_SMALL || layout.align() > PAGE {
        return None;
    }
    let block = size.next_power_of_two();
    Some((block.trailing_zeros() - MIN_SMALL.trailing_zeros()) as usize)
}

fn block_size(class: usize) -> usize {
    MIN_SMALL << class
}

fn pages(size: usize) -> usize {
    size.div_ceil(PAGE) * PAGE
}

/// A fresh anonymous mapping of `len` bytes (page-aligned), or null.
fn map(len: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address the kernel picks: no memory of anyone's
    // is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Pushes `block` (of class `class`, this heap's, unused) onto its free list.
fn push(class: usize, block: *mut u8) {
    let head = &FREE[class];
    let mut old = head.load(Relaxed);
    loop {
        // The block's first word: the next block. Atomic, as a racing pop may read it.
        // SAFETY: `block` is a block of this class (at least 16 bytes, 8-aligned) nobody uses.
        unsafe { (*block.cast::<AtomicU64>()).store(old & ADDRESS, Relaxed) };
        let new = (old & !ADDRESS).wrapping_add(1 << 48) | block as u64;
        match head.compare_exchange_weak(old, new, AcqRel, Relaxed) {
            Ok(_) => return,
            Err(now) => old = now,
        }
    }
}

/// Pops a block of class `class`, or null when its list is empty.
fn pop(class: usize) -> *mut u8 {
    let head = &FREE[class];
    let mut old = head.load(Acquire);
    loop {
        let block = (old & ADDRESS) as *mut u8;
        if block.is_null() {
            return block;
        }
        // SAFETY: every address a list ever held is a block of a slab, which stays mapped; when
        // another thread (or a handler on this one) took it meanwhile, the word read may be
        // anything, and the tag makes the exchange below fail.
        let next = unsafe { (*block.cast::<AtomicU64>()).load(Relaxed) };
        let new = (old & !ADDRESS).wrapping_add(1 << 48) | (next & ADDRESS);
        match head.compare_exchange_weak(old, new, AcqRel, Acquire) {
            Ok(_) => return block,
            Err(now) => old = now,
        }
    }
}

/// A block of class `class`: from its list, or from a new slab (whose other blocks go to the
/// list).
fn small(class: usize) -> *mut u8 {
    let block = pop(class);
    if !block.is_null() {
        return block;
    }
    let size = block_size(class);
    let len = SLAB.max(size * 8);
    let slab = map(len);
    if slab.is_null() {
        return slab;
    }
    for i in 1..len / size {
        // SAFETY: inside the slab just mapped; blocks of `size` bytes at multiples of `size`.
        push(class, unsafe { slab.add(i * size) });
    }
    slab
}

/// A mapping of its own for `layout` (page-aligned; over-mapped and trimmed for a larger
/// alignment).
fn large(layout: Layout) -> *mut u8 {
    let len = pages(layout.size());
    if layout.align() <= PAGE {
        return map(len);
    }
    let align = layout.align();
    let raw = map(len + align);
    if raw.is_null() {
        return raw;
    }
    let start = (raw as usize).next_multiple_of(align);
    let (head, tail) = (
        start - raw as usize,
        raw as usize + len + align - (start + len),
    );
    // SAFETY: the parts of the mapping just made before `start` and after `start + len`, both
    // page-aligned (`align` is a power of two above a page).
    unsafe {
        if head > 0 {
            libc::munmap(raw.cast(), head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
    }
    start as *mut u8
}

// SAFETY: blocks are handed out once until given back (a lock-free list per class; a mapping
// per large block), each at least `layout.size()` bytes and aligned to `layout.align()` (a class's
// blocks lie at multiples of their power-of-two size in page-aligned slabs; large blocks are
// page-aligned, or trimmed to their alignment); `dealloc` finds the class, or the mapping's
// length, from the layout it is given, which is the one the block was allocated with.
unsafe impl GlobalAlloc for ShimHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => small(class),
            None => large(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => push(class, ptr),
            None => {
                // SAFETY: a mapping `large` made for this layout: `pages(size)` bytes at `ptr`.
                unsafe { libc::munmap(ptr.cast(), pages(layout.size())) };
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `GlobalAlloc::realloc`'s contract: `new_size` with `layout.align()` is a
        // valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new)) {
            (Some(a), Some(b)) if a == b => return ptr,
            (None, None) if layout.align() <= PAGE => {
                // SAFETY: a mapping `large` made for `layout`, moved or grown in place by the
                // kernel (its contents kept).
                let moved = unsafe {
                    libc::mremap(
                        ptr.cast(),
                        pages(layout.size()),
                        pages(new_size),
                        libc::MREMAP_MAYMOVE,
                    )
                };
                return if moved == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    moved.cast()
                };
            }
            _ => {}
        }
        // SAFETY: as `alloc`, with a valid layout.
        let fresh = unsafe { self.alloc(new) };
        if !fresh.is_null() {
            // SAFETY: both blocks are at least the smaller size, and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every class and the large path give blocks of the size and alignment asked for, which
    /// keep what is written in them, come back after a free, and survive a realloc across
    /// classes and mappings with their contents.
    #[test]
    fn blocks_are_sized_aligned_reused_and_kept_across_realloc() {
        let heap = ShimHeap;
        for (size, align) in [
            (1, 1),
            (16, 8),
            (17, 16),
            (100, 64),
            (4096, 4096),
            (MAX_SMALL, 8),
            (MAX_SMALL + 1, 8),
            (1 << 20, 8),
            (10_000, 1 << 16),
        ] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a valid, non-zero layout; the block is written within its size and freed
            // with the same layout.
            unsafe {
                let p = heap.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "{size} {align}");
                std::ptr::write_bytes(p, 0xab, size);
                assert_eq!(*p.add(size - 1), 0xab);
                heap.dealloc(p, layout);
            }
        }
        let layout = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: as above; each realloc's result is used with its new size.
        unsafe {
            let mut p = heap.alloc(layout);
            let mut size = 24;
            for (i, byte) in (0..24u8).enumerate() {
                *p.add(i) = byte;
            }
            for new_size in [40, 3000, MAX_SMALL * 4, 1 << 22, 100, 24] {
                p = heap.realloc(p, Layout::from_size_align(size, 8).unwrap(), new_size);
                assert!(!p.is_null());
                for i in 0..24.min(new_size) {
                    assert_eq!(*p.add(i), i as u8, "after realloc to {new_size}");
                }
                size = new_size;
            }
            heap.dealloc(p, Layout::from_size_align(size, 8).unwrap());
        }
    }

    /// Threads allocating and freeing at once never get one block twice: each writes its own
    /// mark into its blocks and finds it there before freeing.
    #[test]
    fn threads_never_share_a_block() {
        let threads: Vec<_> = (0..8u8)
            .map(|t| {
                std::thread::spawn(move || {
                    let heap = ShimHeap;
                    let layout = Layout::from_size_align(48, 8).unwrap();
                    let mut held = Vec::with_capacity(64);
                    for round in 0..2000 {
                        // SAFETY: 48-byte blocks written within their size, freed with their
                        // layout.
                        unsafe {
                            let p = heap.alloc(layout);
                            std::ptr::write_bytes(p, t, 48);
                            held.push(p);
                            if round % 3 == 0 || held.len() == 64 {
                                for p in held.drain(..) {
                                    assert!((0..48).all(|i| *p.add(i) == t));
                                    heap.dealloc(p, layout);
                                }
                            }
                        }
                    }
                    for p in held {
                        // SAFETY: as above.
                        unsafe { heap.dealloc(p, layout) };
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
