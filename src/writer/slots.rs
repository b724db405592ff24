//! Threads' chunks of the ring and record numbers: each thread claims a slot (its chunk, its block
//! of numbers, its calls in flight).

use super::*;

/// A thread's chunk, on its own cache line: its lane, its start in the lane's trace and the bytes
/// used (`lane << LANE_SHIFT | start | used`, `used < CHUNK`), [`NO_CHUNK`], or that with
/// [`BUSY`] while the owner copies.
#[repr(align(64))]
pub(super) struct Slot {
    pub(super) word: AtomicU64,
    pub(super) taken: AtomicBool,
    /// The slot's block of record numbers: the next one and the end (written by the owner only,
    /// read by the exit record's count; a block outlives its thread and serves the slot's next).
    pub(super) next_number: AtomicU64,
    pub(super) end_number: AtomicU64,
    /// Call records numbered and not yet written (or given up): raised when a number is handed
    /// out, lowered when its [`Number`] is dropped. Written by the owner thread (and signal
    /// handlers on it, which lower it again before the interrupted code resumes); the shared
    /// slot's by many threads, atomically. An exiting process waits for it ([`close_numbers`]).
    pub(super) in_flight: AtomicU32,
}

pub(super) const NO_CHUNK: u64 = u64::MAX;
pub(super) const BUSY: u64 = 1 << 63;
/// A chunk's lane is in the word's bits 59 to 62, its offset in the bits below.
pub(super) const LANE_SHIFT: u32 = 59;
pub(super) const OFFSET_MASK: u64 = (1 << LANE_SHIFT) - 1;
const _: () = assert!(MAX_LANES <= 1 << (63 - LANE_SHIFT));
/// Slots: threads with a chunk of their own at once, plus one that more threads share.
pub(super) const SLOTS: usize = 4096;
pub(super) const SHARED: usize = SLOTS - 1;

pub(super) static SLOT_TABLE: [Slot; SLOTS] = [const {
    Slot {
        word: AtomicU64::new(NO_CHUNK),
        taken: AtomicBool::new(false),
        next_number: AtomicU64::new(0),
        end_number: AtomicU64::new(0),
        in_flight: AtomicU32::new(0),
    }
}; SLOTS];
/// Slots ever handed out (how far closers look).
pub(super) static SLOTS_SEEN: AtomicUsize = AtomicUsize::new(0);
// This module's flags that every traced call reads are on the hot block's second line
// (`crate::hot::HOT.trace`: `epoch`, `closing`, `asymmetric`).

/// A thread's claim on a slot, kept by the thread (`guard`): `epoch << 32 | (lane + 1) << 24 |
/// (index + 1)`, the lane 0 until known, and 0 for "not asked yet".
pub type ThreadSlot = crate::guard::WriterSlot;

/// This thread's slot (claimed on its first record; the shared one when every other is taken).
pub(super) fn own_slot(cell: &ThreadSlot) -> usize {
    let epoch = u64::from(HOT.trace.epoch.load(Relaxed));
    let cached = cell.get();
    if cached >> 32 == epoch && cached as u32 & 0xff_ffff != 0 {
        return (cached as u32 & 0xff_ffff) as usize - 1;
    }
    let claimed = (0..SHARED).find(|&i| {
        !SLOT_TABLE[i].taken.load(Relaxed)
            && SLOT_TABLE[i]
                .taken
                .compare_exchange(false, true, AcqRel, Relaxed)
                .is_ok()
    });
    let index = claimed.unwrap_or(SHARED);
    SLOTS_SEEN.fetch_max(index + 1, AcqRel);
    cell.set(epoch << 32 | (index as u64 + 1));
    index
}

/// Record numbers a slot takes at once.
pub(super) const NUMBER_BLOCK: u64 = 64;
/// Record numbers handed out (in blocks and one by one). A record's number is unique in its
/// process and increases along each thread's records; records of different threads are ordered
/// by their time. One shared counter per record bounded 16 cores to about 12 million records a
/// second (its cache line moving between them at every record); one per 64 records does not.
pub(super) static NUMBERS: Line<AtomicU64> = Line(AtomicU64::new(0));

/// A call's record number, taken once the driver returned and held until its record is written
/// or given up (dropped): an exiting process waits for the numbers in flight ([`close_numbers`]). `seq` 0: no number (the process
/// is exiting; the call is not recorded).
#[must_use]
pub struct Number {
    pub seq: u64,
    pub(super) slot: u32,
}

impl Drop for Number {
    #[inline]
    fn drop(&mut self) {
        if self.seq != 0 {
            landed(
                &SLOT_TABLE[self.slot as usize],
                self.slot as usize == SHARED,
            );
        }
    }
}

/// One more call of slot `slot` in flight, ordered before this thread reads `CLOSING` (the other
/// half of [`close_numbers`]'s Dekker handshake: either this thread sees `CLOSING`, or the
/// exiting thread sees this count). On the owner's own slot, once the process is registered for
/// expedited membarriers ([`asymmetric_fence`]), a plain store: the exiting thread's
/// `membarrier` puts a full barrier on every running thread, so the fence is paid once at exit
/// instead of a locked add on every traced call (issue 24: about 8 ns of a traced call on R580's
/// hosts). Otherwise, and on the shared slot, a locked add.
#[inline]
pub(super) fn lift(slot: &Slot, shared: bool) {
    // Acquire: a thread that sees the registration reads `CLOSING` after it ([`asymmetric_fence`]).
    if !shared && HOT.trace.asymmetric.load(Acquire) {
        slot.in_flight
            .store(slot.in_flight.load(Relaxed).wrapping_add(1), Relaxed);
        // The store stays before the load of `CLOSING` in program order; the other side's
        // `membarrier` orders it for the other threads.
        std::sync::atomic::compiler_fence(SeqCst);
    } else {
        slot.in_flight.fetch_add(1, SeqCst);
    }
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// Registers the process for expedited membarriers, so that [`lift`] needs no locked add (Linux
/// 4.14 and later; where the kernel or a seccomp filter refuses, the locked add stays). Called by
/// the writer thread, never on the program's path: in a process with more than one thread the
/// kernel waits for a grace period before it answers (22 ms measured on the 2x H200 host, R580's
/// CUDA processes having a dozen threads by their first call; on the program's path that was most
/// of a traced short process's cost, issue 25). Until it answers, [`lift`] takes the locked add.
///
/// Switching while calls run is safe: the flag is set (sequentially consistent) once the kernel
/// answered, and an exit that read it unset ([`asymmetric_fence`]) stored `CLOSING` before that
/// read; a thread that read it set (acquire) reads `CLOSING` after, so it sees `CLOSING` and
/// takes no number: the only calls counted without a locked add are those an exit that fences
/// sees.
pub(super) fn register_asymmetric_fence() {
    if HOT.trace.asymmetric.load(Relaxed) {
        return;
    }
    // SAFETY: membarrier takes two integers and a CPU id; registration has no other effect.
    let ok = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
            0,
        )
    } == 0;
    HOT.trace.asymmetric.store(ok, SeqCst);
}

/// The exiting side of [`lift`]'s handshake, after `CLOSING` is stored: a full barrier on every
/// thread of the process that runs now (the others passed one when they were switched out).
pub(super) fn asymmetric_fence() {
    if !HOT.trace.asymmetric.load(SeqCst) {
        return;
    }
    // SAFETY: as in `register_asymmetric_fence`.
    let ok =
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) } == 0;
    if !ok {
        // Cannot happen once registered; if it does, a store buffer drains in well under this.
        let until = monotonic_ns() + 50_000;
        while monotonic_ns() < until {
            std::hint::spin_loop();
        }
    }
}

/// In a forked child: the registration was the parent's address space's.
pub(super) fn forget_asymmetric_fence() {
    HOT.trace.asymmetric.store(false, Release);
}

/// One call of slot `slot` in flight less.
#[inline]
pub(super) fn landed(slot: &Slot, shared: bool) {
    if shared {
        slot.in_flight.fetch_sub(1, Release);
    } else {
        slot.in_flight
            .store(slot.in_flight.load(Relaxed).wrapping_sub(1), Release);
    }
}

/// The next record number of the calling thread, from its slot's block, in flight until the
/// returned [`Number`] is dropped. Only on a thread inside the shim's guard, between calls of
/// its own; `nested` (a signal handler's call, whose number is held past the handler's return
/// and may have interrupted the slot's update): from the shared slot, counted atomically.
#[inline]
pub fn next_number(cell: &ThreadSlot, nested: bool) -> Number {
    let index = if nested { SHARED } else { own_slot(cell) };
    let slot = &SLOT_TABLE[index];
    let shared = index == SHARED;
    // In flight first (fenced), then the look at CLOSING; `close_numbers` sets CLOSING, then
    // reads the counts.
    lift(slot, shared);
    if HOT.trace.closing.load(SeqCst) {
        landed(slot, shared);
        return Number {
            seq: 0,
            slot: index as u32,
        };
    }
    let seq = if shared {
        next_number_shared()
    } else {
        let next = slot.next_number.load(Relaxed);
        if next != 0 && next < slot.end_number.load(Relaxed) {
            slot.next_number.store(next + 1, Relaxed);
            next
        } else {
            let first = NUMBERS.fetch_add(NUMBER_BLOCK, Relaxed) + 1;
            slot.end_number.store(first + NUMBER_BLOCK, Relaxed);
            slot.next_number.store(first + 1, Relaxed);
            first
        }
    };
    Number {
        seq,
        slot: index as u32,
    }
}

/// A record number from the process's counter: for records made outside the guard (events) and
/// for threads sharing a slot.
pub fn next_number_shared() -> u64 {
    NUMBERS.fetch_add(1, Relaxed) + 1
}

/// Record numbers handed out and used: those handed out, less those still unused in slots'
/// blocks (read while other threads may still take some: a snapshot).
pub fn numbers_used() -> u64 {
    let seen = SLOTS_SEEN.load(Acquire).min(SLOTS);
    let unused: u64 = SLOT_TABLE[..seen]
        .iter()
        .map(|slot| {
            let next = slot.next_number.load(Relaxed);
            slot.end_number.load(Relaxed).saturating_sub(next)
        })
        .sum();
    NUMBERS.load(Relaxed).saturating_sub(unused)
}

/// At thread exit: the thread's chunk is closed and its slot given back.
pub fn thread_exit(cell: &ThreadSlot) {
    let cached = cell.get();
    cell.set(0);
    if cached >> 32 != u64::from(HOT.trace.epoch.load(Relaxed)) || cached as u32 & 0xff_ffff == 0 {
        return;
    }
    let index = (cached as u32 & 0xff_ffff) as usize - 1;
    if index >= SHARED {
        return;
    }
    let slot = &SLOT_TABLE[index];
    let word = slot.word.load(Acquire);
    if word & BUSY == 0 && word != NO_CHUNK {
        close_chunk(slot, word);
    }
    slot.taken.store(false, Release);
}

/// Closes the chunk `word` names, unless its owner is copying or it changed since (then someone
/// else did): the unused rest becomes padding, and its bytes count as done.
pub(super) fn close_chunk(slot: &Slot, word: u64) -> bool {
    if slot
        .word
        .compare_exchange(word, NO_CHUNK, AcqRel, Acquire)
        .is_err()
    {
        return false;
    }
    let (lane, start, _) = chunk_of(word);
    // The rest of the chunk stays zero: readers go on at the next chunk.
    commit(&LANES[lane], start, CHUNK);
    true
}

/// A slot word's chunk: its lane, its start in that lane's trace and the bytes used.
pub(super) fn chunk_of(word: u64) -> (usize, u64, u64) {
    let offset = word & OFFSET_MASK;
    let used = offset % CHUNK;
    (((word & !BUSY) >> LANE_SHIFT) as usize, offset - used, used)
}

/// Closes every open chunk that starts before `limit` (their owners are idle, or will take a new
/// chunk on their next record).
pub(super) fn close_open_chunks_before(w: &Lane, limit: u64) {
    let lane = lane_number(w);
    let seen = SLOTS_SEEN.load(Acquire).min(SLOTS);
    for slot in &SLOT_TABLE[..seen] {
        let word = slot.word.load(Acquire);
        if word != NO_CHUNK && word & BUSY == 0 {
            let (in_lane, start, _) = chunk_of(word);
            if in_lane == lane && start < limit {
                close_chunk(slot, word);
            }
        }
    }
}
