//! Where trace records go: a ring mapped from a file, which threads copy whole records into
//! without a lock, converted to JSON Lines and appended to the trace file one segment at a time
//! (layout, record format and recovery: [`sharecheck_core::ring`]).
//!
//! - **Lossless.** The ring's pages belong to the kernel's page cache as soon as a record is
//!   copied in, so every completed record survives the process however it ends: at `exit` the rest
//!   of the ring is appended and the ring file removed; after `_exit`, `exec`, `abort`, SIGSEGV or
//!   `kill -9` a reader recovers the ring's tail. Nothing is buffered in process memory.
//! - **Lanes.** A process's threads are spread over up to 8 lanes (as many as the CPUs it may run
//!   on), each a trace file with its own ring (`PID.jsonl`, `PID.laneK.jsonl`): the kernel appends
//!   to one file at a time. A thread's lane is its slot's number modulo the lane count; a chunk
//!   carries its lane in its slot word, so it is always closed and counted in its own lane.
//! - **Per-thread chunks.** A thread reserves [`CHUNK`] bytes of its lane at once (one atomic add
//!   per chunk, not per record) and copies its records into them. Its chunk is its own: no other
//!   thread writes the cache lines, so threads on many cores do not slow each other down. A record
//!   that does not fit closes the chunk: the rest stays zero (readers go on at the next chunk).
//!   A record's kind byte is written after the rest of it. A chunk left open by an idle thread is
//!   closed the same way by whoever needs its segment (the appender after 10 ms, or a thread
//!   waiting for ring space), under a compare-and-swap that the owner's copy also takes, and at
//!   thread exit and process exit.
//! - **Off the caller's path.** Full 64 KiB segments are converted to JSON Lines (a plain call is
//!   recorded compact, [`sharecheck_core::ring::CALL`]: its line is formatted here) and appended to
//!   the trace with `pwrite`, in order, by a writer thread the shim starts when it opens the trace
//!   (all signals blocked; it never takes the loader lock). The thread that fills a segment only
//!   wakes it (a futex). Without
//!   that thread (it could not be started), the thread that fills a segment appends it. A thread
//!   whose chunk falls in a segment the previous lap still holds helps append, and waits at most
//!   two seconds (then tracing stops with a warning).
//! - **Harmless.** The ring file is reserved whole with `posix_fallocate` before it is mapped (a
//!   full disk is an error at open, never a SIGBUS). The trace never grows past `RLIMIT_FSIZE`, so
//!   the host never gets SIGXFSZ; `ENOSPC` and `EFBIG` stop tracing with one warning. Descriptors
//!   are `O_CLOEXEC`, and the trace's is checked (device and inode) before each append: a program
//!   that closed it and reused the number is never written into. The shim is linked
//!   `-z nodelete`, so the writer thread's code is never unmapped under it.
//! - **Fork.** The child drops the parent's mapping, descriptors and chunks without taking any
//!   lock, and opens its own files (and starts its own writer thread) on its first record.

use sharecheck_core::ring::{self, CHUNK, HEADER, RING, SEGMENT, SEGMENTS};
use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};

const CLOSED: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
const STOPPED: u8 = 3;

/// How long a record waits for its segment to be free before tracing stops.
const WAIT_NS: u64 = 2_000_000_000;
/// How long the oldest segment may wait for chunks left open before they are closed.
const IDLE_CHUNK_NS: u64 = 10_000_000;

/// Full segments that wake the writer thread.
const WAKE_BATCH: u64 = 4;

/// The JSON Lines a segment converts to are written out from a buffer of this many bytes.
const OUT_BUFFER: usize = 2 * SEGMENT as usize;

/// One lane of the trace: a file of its own (the process's trace for lane 0, `NAME.laneK.jsonl`
/// for lane K) with its ring. Threads are spread over the lanes, so that threads on many cores
/// do not all wait on one file's appends (the kernel appends to one file at a time).
struct Lane {
    state: AtomicU8,
    /// The thread opening the lane (its kernel id), while `OPENING`: a signal handler on it that
    /// makes a record must not wait for itself.
    opener: AtomicI32,
    /// The trace file, its identity (device, inode) and path (a leaked `CString`).
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
    path: AtomicPtr<std::ffi::c_char>,
    /// The ring file's path (leaked), removed at exit.
    ring_path: AtomicPtr<std::ffi::c_char>,
    /// The ring file's descriptor, kept open (and share-locked) while the process lives, and
    /// the file's identity (device, inode).
    ring_fd: AtomicI32,
    ring_id: (AtomicU64, AtomicU64),
    /// The ring file's mapping: `HEADER` bytes of header, then the ring.
    map: AtomicPtr<u8>,
    /// Reservation cursor: the next record's offset in the trace.
    next: Line<AtomicU64>,
    /// Bytes of the trace appended (whole segments, in order); the ring's segments before it are
    /// free. Read by every record, written once a segment.
    appended: Line<AtomicU64>,
    /// Bytes copied in, per ring segment, over every lap: segment `g` (counted from the trace's
    /// start) is full when `done[g % SEGMENTS] == (g / SEGMENTS + 1) * SEGMENT`.
    done: [Line<AtomicU64>; SEGMENTS as usize],
    /// Held by the thread appending segments, which alone uses the fields below.
    appending: AtomicBool,
    /// The kernel id of the thread holding `appending` (0: the exiting thread, or none), so that
    /// an exit from a signal handler that interrupted its thread's append does not wait for it.
    append_holder: AtomicI32,
    /// The trace file's length: JSON Lines written.
    file_len: AtomicU64,
    /// The trace's disk space reserved ahead, up to this offset ([`reserve`]).
    reserved: AtomicU64,
    /// The converter's state between segments ([`ring::Converter`]).
    carry: AtomicU64,
    /// The file reached `trace_limit`: its last line says so, and the records converted after it
    /// are dropped ([`write_out`]).
    capped: AtomicBool,
    /// The buffer JSON Lines are converted into (a leaked `Vec` of `OUT_BUFFER` bytes, made when
    /// the first lane opens; kept by a forked child).
    out: AtomicPtr<Vec<u8>>,
}

/// Bumped when a segment fills: the writer thread sleeps on it (a futex word).
static WAKE: Line<AtomicU32> = Line(AtomicU32::new(0));
/// Whether the writer thread runs (`NO_THREAD`, `RUNNING`, `FAILED`).
static APPENDER: AtomicU8 = AtomicU8::new(NO_THREAD);
/// Whether the writer thread sleeps (only then does a filled segment wake it).
static SLEEPING: AtomicBool = AtomicBool::new(false);
/// Set while the appender falls behind: more than half a lane's ring waits to be appended (or a
/// record waited for space), until less than a quarter does. Threads then format their records
/// themselves rather than leave it to the appender ([`behind`]).
static BEHIND: Line<AtomicBool> = Line(AtomicBool::new(false));

/// Whether the appender falls behind: a record is then better formatted by its own thread (the
/// appender only copies it), so that a thread making calls as fast as it can is not held up by
/// the formatting of its own records on one other CPU.
#[inline]
pub fn behind() -> bool {
    BEHIND.load(Relaxed)
}

/// Set when tracing stopped (a full disk, the size limit, a stuck append): no lane opens or
/// writes any more.
static STOPPED_ALL: AtomicBool = AtomicBool::new(false);

/// Lanes at most, and in use (decided when the first lane opens: the CPUs this process may run
/// on, at most `MAX_LANES`; 0 until then).
const MAX_LANES: usize = 8;
static LANE_COUNT: AtomicUsize = AtomicUsize::new(0);

const NO_THREAD: u8 = 0;
const RUNNING: u8 = 1;
const FAILED: u8 = 2;

/// A value alone on its cache line: the counters every record touches do not share one (threads
/// on other cores would otherwise invalidate each other's copy at every record).
#[repr(align(64))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const CLOSED_LANE: Lane = Lane {
    state: AtomicU8::new(CLOSED),
    opener: AtomicI32::new(0),
    fd: AtomicI32::new(-1),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    path: AtomicPtr::new(std::ptr::null_mut()),
    ring_path: AtomicPtr::new(std::ptr::null_mut()),
    ring_fd: AtomicI32::new(-1),
    ring_id: (AtomicU64::new(0), AtomicU64::new(0)),
    map: AtomicPtr::new(std::ptr::null_mut()),
    next: Line(AtomicU64::new(0)),
    appended: Line(AtomicU64::new(0)),
    done: [const { Line(AtomicU64::new(0)) }; SEGMENTS as usize],
    appending: AtomicBool::new(false),
    append_holder: AtomicI32::new(0),
    file_len: AtomicU64::new(0),
    reserved: AtomicU64::new(0),
    carry: AtomicU64::new(0),
    capped: AtomicBool::new(false),
    out: AtomicPtr::new(std::ptr::null_mut()),
};
static LANES: [Lane; MAX_LANES] = [CLOSED_LANE; MAX_LANES];

/// What opening the file needs from the trace module: the trace file (created exclusively) and
/// its path.
pub struct Opened {
    pub fd: libc::c_int,
    pub path: String,
}

// ---------------------------------------------------------------------------------------------
// Threads' chunks.

/// A thread's chunk, on its own cache line: its lane, its start in the lane's trace and the bytes
/// used (`lane << LANE_SHIFT | start | used`, `used < CHUNK`), [`NO_CHUNK`], or that with
/// [`BUSY`] while the owner copies.
#[repr(align(64))]
struct Slot {
    word: AtomicU64,
    taken: AtomicBool,
    /// The slot's block of record numbers: the next one and the end (written by the owner only,
    /// read by the exit record's count; a block outlives its thread and serves the slot's next).
    next_number: AtomicU64,
    end_number: AtomicU64,
    /// Call records numbered and not yet written (or given up): raised when a number is handed
    /// out, lowered when its [`Number`] is dropped. Written by the owner thread (and signal
    /// handlers on it, which lower it again before the interrupted code resumes); the shared
    /// slot's by many threads, atomically. An exiting process waits for it ([`close_numbers`]).
    in_flight: AtomicU32,
}

const NO_CHUNK: u64 = u64::MAX;
const BUSY: u64 = 1 << 63;
/// A chunk's lane is in the word's bits 59 to 62, its offset in the bits below.
const LANE_SHIFT: u32 = 59;
const OFFSET_MASK: u64 = (1 << LANE_SHIFT) - 1;
const _: () = assert!(MAX_LANES <= 1 << (63 - LANE_SHIFT));
/// Slots: threads with a chunk of their own at once, plus one that more threads share.
const SLOTS: usize = 4096;
const SHARED: usize = SLOTS - 1;

static SLOT_TABLE: [Slot; SLOTS] = [const {
    Slot {
        word: AtomicU64::new(NO_CHUNK),
        taken: AtomicBool::new(false),
        next_number: AtomicU64::new(0),
        end_number: AtomicU64::new(0),
        in_flight: AtomicU32::new(0),
    }
}; SLOTS];
/// Slots ever handed out (how far closers look).
static SLOTS_SEEN: AtomicUsize = AtomicUsize::new(0);
/// Bumped in a forked child: a thread's cached slot of another epoch is not its own.
static EPOCH: AtomicU32 = AtomicU32::new(0);

/// A thread's claim on a slot, kept by the thread (`guard`): `epoch << 32 | (lane + 1) << 24 |
/// (index + 1)`, the lane 0 until known, and 0 for "not asked yet".
pub type ThreadSlot = crate::guard::WriterSlot;

/// This thread's slot (claimed on its first record; the shared one when every other is taken).
fn own_slot(cell: &ThreadSlot) -> usize {
    let epoch = u64::from(EPOCH.load(Relaxed));
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

// ---------------------------------------------------------------------------------------------
// Record numbers.

/// Record numbers a slot takes at once.
const NUMBER_BLOCK: u64 = 64;
/// Record numbers handed out (in blocks and one by one). A record's number is unique in its
/// process and increases along each thread's records; records of different threads are ordered
/// by their time. One shared counter per record bounded 16 cores to about 12 million records a
/// second (its cache line moving between them at every record); one per 64 records does not.
static NUMBERS: Line<AtomicU64> = Line(AtomicU64::new(0));

/// Set when the process starts to exit ([`close_numbers`]): calls get no record number from
/// then on (they are forwarded and checked, not recorded), so that the exit record counts
/// exactly the calls recorded before it.
static CLOSING: AtomicBool = AtomicBool::new(false);

/// A call's record number, taken once the driver returned and held until its record is written
/// or given up (dropped): an exiting process waits for the numbers in flight ([`close_numbers`]). `seq` 0: no number (the process
/// is exiting; the call is not recorded).
#[must_use]
pub struct Number {
    pub seq: u64,
    slot: u32,
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

/// One more call of slot `slot` in flight, then a full fence: the store is visible before this
/// thread reads `CLOSING` (the other half of [`close_numbers`]'s Dekker handshake: either this
/// thread sees `CLOSING`, or the exiting thread sees this count).
#[inline]
fn lift(slot: &Slot, shared: bool) {
    if shared {
        slot.in_flight.fetch_add(1, SeqCst);
    } else {
        // The owner alone (a signal handler on it restores the count before it returns).
        slot.in_flight
            .store(slot.in_flight.load(Relaxed).wrapping_add(1), Relaxed);
        std::sync::atomic::fence(SeqCst);
    }
}

/// One call of slot `slot` in flight less.
#[inline]
fn landed(slot: &Slot, shared: bool) {
    if shared {
        slot.in_flight.fetch_sub(1, Release);
    } else {
        slot.in_flight
            .store(slot.in_flight.load(Relaxed).wrapping_sub(1), Release);
    }
}

/// The next record number of the calling thread, from its slot's block, in flight until the
/// returned [`Number`] is dropped. Only on a thread inside the shim's guard, between calls of
/// its own (a signal handler's call nested in this thread's is numbered from the shared counter:
/// it may have interrupted the slot's update).
#[inline]
pub fn next_number(cell: &ThreadSlot, nested: bool) -> Number {
    let index = if nested { SHARED } else { own_slot(cell) };
    let slot = &SLOT_TABLE[index];
    let shared = index == SHARED;
    // In flight first (fenced), then the look at CLOSING; `close_numbers` sets CLOSING, then
    // reads the counts.
    lift(slot, shared);
    if CLOSING.load(SeqCst) {
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

/// How long an exiting process waits for other threads: for the calls being recorded (numbered
/// once the driver returned, so never one blocked in the driver: each only needs a CPU, or the
/// writer thread's appends when the ring is full) while they or the appends make progress, half
/// of [`EXIT_HARD_NS`] without any at most, [`EXIT_HARD_NS`] in all (a thread that waits 1 s for a
/// CPU was seen with 200 busy threads on 2 CPUs); then
/// for records being copied and the writer thread's append, as long as they make progress,
/// [`EXIT_IDLE_NS`] without any at most, and [`EXIT_WAIT_NS`] in all. With many more busy threads
/// than CPUs a thread may wait a second for a CPU (measured with 64 threads on 2 CPUs); a thread
/// stopped (in a debugger, say) while it records is not waited for longer, and its record, if it
/// comes, is not counted.
const EXIT_IDLE_NS: u64 = 1_000_000_000;
const EXIT_WAIT_NS: u64 = 3_000_000_000;
/// The most an exit waits for the calls being recorded, while they or the appends move.
const EXIT_HARD_NS: u64 = 10_000_000_000;

/// Waits (yielding) until `check` says done, as long as what it measures moves: at most `idle`
/// without a change, and until the monotonic clock passes `deadline`. Whether it is done.
fn wait_while_moving(deadline: u64, idle: u64, mut check: impl FnMut() -> (bool, u64)) -> bool {
    let (mut last, mut since) = (None, monotonic_ns());
    loop {
        let (done, mark) = check();
        if done {
            return true;
        }
        let now = monotonic_ns();
        if last != Some(mark) {
            (last, since) = (Some(mark), now);
        }
        if now >= since + idle || now >= deadline {
            return false;
        }
        std::thread::yield_now();
    }
}

/// The slot of a thread whose own record work is frozen: the exiting thread, when `exit` was
/// called by a signal handler that interrupted the shim's work on it. What that slot holds (a
/// number in flight, a chunk being copied) cannot move while the exit waits, so it waits for
/// the others only.
#[derive(Clone, Copy)]
pub struct Frozen(Option<usize>);

impl Frozen {
    /// `cell`'s slot, when `interrupted` (this thread's shim work was interrupted).
    pub fn of(cell: &ThreadSlot, interrupted: bool) -> Frozen {
        let cached = cell.get();
        let index = cached as u32 & 0xff_ffff;
        let ours = cached >> 32 == u64::from(EPOCH.load(Relaxed)) && index != 0;
        Frozen((interrupted && ours).then(|| index as usize - 1))
    }

    fn is(self, index: usize) -> bool {
        self.0 == Some(index)
    }

    /// The calls this slot holds in flight.
    fn in_flight(self) -> u64 {
        self.0
            .map_or(0, |i| u64::from(SLOT_TABLE[i].in_flight.load(Relaxed)))
    }
}

/// At exit, before the exit record: no call is numbered any more, and the calls numbered
/// already get a bounded time to write their records: not those of a `frozen` slot, nor the
/// `parked` ones (numbered calls kept until their thread next leaves the shim, which may be
/// never: signal handlers' calls, `deferred`). Returns how many are still in flight after it
/// (their records may follow, or not come).
pub fn close_numbers(frozen: Frozen, parked: impl Fn() -> u64) -> u64 {
    // A sequentially consistent store, then loads: with the fence after each thread's raised
    // count ([`lift`]), a thread that read CLOSING unset is seen in flight here.
    CLOSING.store(true, SeqCst);
    let in_flight = || -> u64 {
        let seen = SLOTS_SEEN.load(SeqCst).min(SLOTS);
        let own: u64 = SLOT_TABLE[..seen]
            .iter()
            .map(|slot| u64::from(slot.in_flight.load(SeqCst)))
            .sum();
        let shared = if seen > SHARED {
            0
        } else {
            u64::from(SLOT_TABLE[SHARED].in_flight.load(SeqCst))
        };
        own + shared
    };
    // A thread holding a number is in the shim's own work: it needs a CPU, and (when the ring
    // is full) the writer thread's appends. Waited for while either moves.
    let stuck = frozen.in_flight();
    wait_while_moving(monotonic_ns() + EXIT_HARD_NS, EXIT_HARD_NS / 2, || {
        let left = in_flight();
        let appended: u64 = LANES.iter().map(|w| w.appended.load(Relaxed)).sum();
        (
            left <= stuck + parked(),
            left.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ appended,
        )
    });
    in_flight()
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

/// The lanes in use: decided once (per process) from the CPUs this process may run on.
fn lane_count() -> usize {
    match LANE_COUNT.load(Acquire) {
        0 => {
            // SAFETY: a zeroed cpu_set_t is a valid, empty set for sched_getaffinity to fill.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: fills `set`, a live local of the size given.
            let got = unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
            } == 0;
            let cpus = if got {
                // SAFETY: counts the bits of the set sched_getaffinity filled.
                unsafe { libc::CPU_COUNT(&set) }
            } else {
                1
            };
            let count = (cpus.max(1) as usize).min(MAX_LANES);
            match LANE_COUNT.compare_exchange(0, count, AcqRel, Acquire) {
                Ok(_) => count,
                Err(decided) => decided,
            }
        }
        count => count,
    }
}

/// The lane of slot `index`, and its number.
fn lane_of(index: usize) -> (usize, &'static Lane) {
    let k = index % lane_count();
    (k, &LANES[k])
}

/// The number of lane `w`.
fn lane_number(w: &Lane) -> usize {
    (w as *const Lane as usize - LANES.as_ptr() as usize) / std::mem::size_of::<Lane>()
}

/// At thread exit: the thread's chunk is closed and its slot given back.
pub fn thread_exit(cell: &ThreadSlot) {
    let cached = cell.get();
    cell.set(0);
    if cached >> 32 != u64::from(EPOCH.load(Relaxed)) || cached as u32 & 0xff_ffff == 0 {
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
fn close_chunk(slot: &Slot, word: u64) -> bool {
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
fn chunk_of(word: u64) -> (usize, u64, u64) {
    let offset = word & OFFSET_MASK;
    let used = offset % CHUNK;
    (((word & !BUSY) >> LANE_SHIFT) as usize, offset - used, used)
}

/// Closes every open chunk that starts before `limit` (their owners are idle, or will take a new
/// chunk on their next record).
fn close_open_chunks_before(w: &Lane, limit: u64) {
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

/// Appends one whole framed record (`sharecheck_core::ring`: its kind byte first) to the lane of
/// the calling thread. The process's
/// first record opens lane 0 with `open`, which creates the trace file and gives the first record
/// (who wrote the file); the names of the other lanes' files are made then too, so that a
/// thread's first record in another lane only creates files (no allocation). `slot` is the
/// calling thread's claim on a chunk. Returns whether the record is in.
pub fn append<R: Record + ?Sized>(
    record: &R,
    slot: &ThreadSlot,
    open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>,
) -> bool {
    if STOPPED_ALL.load(Relaxed) {
        return false;
    }
    let index = own_slot(slot);
    let interrupting = crate::guard::is_interrupting();
    if interrupting && opening_here(&LANES[0]) {
        return with_bytes(record, |bytes| keep_early(0, bytes));
    }
    if !ensure_open(&LANES[0], index, open) {
        return false;
    }
    let k = thread_lane(slot, index);
    let w = &LANES[k];
    if interrupting && ((k != 0 && opening_here(w)) || !room_without_waiting(w)) {
        return with_bytes(record, |bytes| keep_early(k, bytes));
    }
    if !interrupting && HELD.load(Relaxed) != 0 {
        append_held();
    }
    (k == 0 || ensure_lane_open(w, k, index)) && append_record(w, index, record)
}

/// Whether this thread is opening lane `w`: a record made now is a signal handler's, which
/// interrupted the opening.
fn opening_here(w: &Lane) -> bool {
    // SAFETY: gettid has no preconditions and cannot fail.
    w.state.load(Acquire) == OPENING && w.opener.load(Acquire) == unsafe { libc::gettid() }
}

/// Ring space a signal handler's record wants free beyond its own (other threads may reserve
/// chunks between the look and its reservation): 128 chunks.
const HANDLER_SLACK: u64 = 8 * SEGMENT;

/// Whether a signal handler's record fits in lane `w` with room to spare: the work it
/// interrupted may be what frees ring space (an append in progress, a chunk being copied), so it
/// never waits for any.
fn room_without_waiting(w: &Lane) -> bool {
    w.state.load(Acquire) == OPEN
        && w.next.load(Acquire) + HANDLER_SLACK <= w.appended.load(Acquire) + RING - SEGMENT
}

/// Records a signal handler made while its thread was opening their lane, or when the lane's
/// ring had no room to spare, kept until the lane is open or the next record of a thread not in
/// a handler ([`append_early`], [`append_held`]): `EARLY_RECORDS` of at most `EARLY_BYTES` bytes
/// (a handler's call record is one; beyond them a record is not written).
const EARLY_RECORDS: usize = 256;
const EARLY_BYTES: usize = 512;
const FREE: u8 = 0;
const FILLING: u8 = 1;
const READY: u8 = 2;

struct Early {
    state: AtomicU8,
    lane: AtomicU8,
    len: AtomicUsize,
    bytes: std::cell::UnsafeCell<[u8; EARLY_BYTES]>,
}

// SAFETY: `bytes` is written only by the thread that moved `state` from FREE to FILLING, and
// read only by the one that moved it from READY to FILLING.
unsafe impl Sync for Early {}

static EARLY: [Early; EARLY_RECORDS] = [const {
    Early {
        state: AtomicU8::new(FREE),
        lane: AtomicU8::new(0),
        len: AtomicUsize::new(0),
        bytes: std::cell::UnsafeCell::new([0; EARLY_BYTES]),
    }
}; EARLY_RECORDS];

fn keep_early(lane: usize, bytes: &[u8]) -> bool {
    if bytes.len() > EARLY_BYTES {
        return false;
    }
    for e in &EARLY {
        if e.state
            .compare_exchange(FREE, FILLING, AcqRel, Acquire)
            .is_ok()
        {
            // SAFETY: FILLING is this thread's, see `Early`.
            unsafe { (&mut *e.bytes.get())[..bytes.len()].copy_from_slice(bytes) };
            e.len.store(bytes.len(), Relaxed);
            e.lane.store(lane as u8, Relaxed);
            e.state.store(READY, Release);
            HELD.fetch_add(1, Release);
            return true;
        }
    }
    false
}

/// Appends the records kept for lane `w` (its opener, once it is open; a thread not in a
/// handler, before its own record).
fn append_early(w: &Lane) {
    let lane = lane_number(w) as u8;
    for e in &EARLY {
        if e.state.load(Acquire) == READY
            && e.lane.load(Relaxed) == lane
            && e.state
                .compare_exchange(READY, FILLING, AcqRel, Acquire)
                .is_ok()
        {
            // SAFETY: READY -> FILLING makes the bytes this thread's, see `Early`.
            let bytes = unsafe { &(&*e.bytes.get())[..e.len.load(Relaxed)] };
            // A reservation of its own: no chunk is left open in a slot of another thread's.
            reserve_and_copy(w, bytes);
            e.state.store(FREE, Release);
            HELD.fetch_sub(1, Release);
        }
    }
}

/// Records kept ([`keep_early`]) and not appended yet.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Appends every record kept for a lane that is open (by a thread not in a signal handler's
/// record, before its own record; and at exit).
fn append_held() {
    for w in &LANES {
        if w.state.load(Acquire) == OPEN {
            append_early(w);
        }
    }
}

/// The lane of the thread whose slot is `index`, kept in its claim (bits 24 to 31, 0 until
/// known) once the lane count is decided, so that a record does not divide.
fn thread_lane(cell: &ThreadSlot, index: usize) -> usize {
    let cached = cell.get();
    match (cached >> 24) as u8 {
        0 => {
            let (k, _) = lane_of(index);
            cell.set(cached | ((k as u64 + 1) << 24));
            k
        }
        lane => usize::from(lane) - 1,
    }
}

/// A framed record ([`sharecheck_core::ring`]) to copy into the ring: whole bytes, or made in
/// place (a compact call record, written straight into its chunk).
pub trait Record {
    /// Its length, frame included.
    fn len(&self) -> usize;
    /// Its kind (the frame's first byte).
    fn kind(&self) -> u8;
    /// Writes it into `out` (exactly `len` bytes), its first byte 0: the kind byte is written
    /// last, by the writer.
    fn write_to(&self, out: &mut [u8]);
}

impl Record for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn kind(&self) -> u8 {
        self.first().copied().unwrap_or(0)
    }
    fn write_to(&self, out: &mut [u8]) {
        out[0] = 0;
        out[1..].copy_from_slice(&self[1..]);
    }
}

fn append_record<R: Record + ?Sized>(w: &Lane, index: usize, record: &R) -> bool {
    let len = record.len() as u64;
    if len > 0 && len < CHUNK {
        append_in_chunk(w, &SLOT_TABLE[index], record)
    } else {
        // A record too long for a chunk: its own reservation.
        with_bytes(record, |bytes| reserve_and_copy(w, bytes))
    }
}

/// A record's bytes: itself, or made on the stack (records made in place are short).
fn with_bytes<R: Record + ?Sized>(record: &R, f: impl FnOnce(&[u8]) -> bool) -> bool {
    let mut made = [0u8; 512];
    match made.get_mut(..record.len()) {
        Some(out) => {
            record.write_to(out);
            out[0] = record.kind();
            f(out)
        }
        // Longer than any record made in place: only whole bytes are.
        None => false,
    }
}

fn append_in_chunk<R: Record + ?Sized>(w: &Lane, slot: &Slot, record: &R) -> bool {
    let len = record.len() as u64;
    let shared = std::ptr::eq(slot, &SLOT_TABLE[SHARED]);
    let mut busy_seen = 0u32;
    loop {
        let word = slot.word.load(Acquire);
        if word & BUSY != 0 && word != NO_CHUNK {
            // Another thread copying into the shared slot: its copy takes nanoseconds. Or a
            // signal handler on this thread, interrupting its copy (or that of the thread it
            // shares the slot with): a reservation of its own.
            busy_seen += 1;
            if shared && busy_seen < 1000 {
                std::hint::spin_loop();
                continue;
            }
            return with_bytes(record, |bytes| reserve_and_copy(w, bytes));
        }
        if word == NO_CHUNK {
            let start = w.next.fetch_add(CHUNK, AcqRel);
            if !free_for(w, start / SEGMENT) {
                return false;
            }
            zero_chunks(w, start, CHUNK);
            let chunk = (lane_number(w) as u64) << LANE_SHIFT | start;
            if slot
                .word
                .compare_exchange(NO_CHUNK, chunk, AcqRel, Acquire)
                .is_err()
            {
                // Another chunk came first (a signal handler on this thread, or a thread sharing
                // the slot): this one stays empty.
                commit(w, start, CHUNK);
            }
            continue;
        }
        let (lane, start, used) = chunk_of(word);
        if used + len > CHUNK || lane != lane_number(w) {
            // Full, or in another lane (a thread that opened a lane other than its own writes
            // that lane's first record): closed, and a new chunk taken in this lane.
            close_chunk(slot, word);
            continue;
        }
        if slot
            .word
            .compare_exchange(word, word | BUSY, Acquire, Relaxed)
            .is_err()
        {
            continue; // closed by another thread meanwhile
        }
        write_record(w, start + used, record);
        if used + len == CHUNK {
            slot.word.store(NO_CHUNK, Release);
            commit(w, start, CHUNK);
        } else {
            slot.word.store(word + len, Release);
        }
        return true;
    }
}

/// The ring's byte for trace offset `at`, which must be reserved by the caller and free.
fn ring_at(w: &Lane, at: u64) -> *mut u8 {
    // SAFETY: the mapping holds HEADER + RING bytes while the writer is open, and
    // `at % RING < RING`.
    unsafe { w.map.load(Acquire).add((HEADER + at % RING) as usize) }
}

/// Zeroes `len` bytes of the ring from trace offset `at` (whole chunks in one segment, just
/// reserved and free) when they hold a previous lap's records: space a chunk's records do not
/// fill must read as zero, to the appender and to a reader after a crash. The taker does it, so
/// the chunk's cache lines are its own when its records are copied in (zeroed by the appender
/// on another CPU, each line moved between the CPUs at every record). Chunks not taken yet hold
/// the previous lap's records, which the trace already has: a reader of the ring after a crash
/// drops them by `seq` ([`sharecheck_core::ring`]).
fn zero_chunks(w: &Lane, at: u64, len: u64) {
    if at >= RING {
        // SAFETY: the caller's reservation, within one segment (contiguous in the ring).
        unsafe { std::ptr::write_bytes(ring_at(w, at), 0, len as usize) };
    }
}

/// Copies `bytes` to the ring at trace offset `at` (within one segment).
fn write_ring(w: &Lane, at: u64, bytes: &[u8]) {
    // SAFETY: the caller reserved `bytes.len()` bytes at `at`, within one segment (so contiguous
    // in the ring), whose slot the previous lap appended: no other thread writes them.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ring_at(w, at), bytes.len()) };
}

/// Writes a record (within one segment) to the ring at trace offset `at`: the kind byte last, so
/// that a reader after a crash finds kind 0 (nothing) where a copy was cut short.
fn write_record<R: Record + ?Sized>(w: &Lane, at: u64, record: &R) {
    // SAFETY: the caller reserved `record.len()` bytes at `at`, within one segment (so contiguous
    // in the ring), whose slot the previous lap appended: no other thread writes them.
    let out = unsafe { std::slice::from_raw_parts_mut(ring_at(w, at), record.len()) };
    record.write_to(out);
    std::sync::atomic::compiler_fence(Release);
    // SAFETY: as above: the byte at `at` is the caller's.
    unsafe { ring_at(w, at).write_volatile(record.kind()) };
}

/// Counts `len` bytes from `start` (in one segment) as done; the thread that completes a segment
/// has it appended.
fn commit(w: &Lane, start: u64, len: u64) {
    let segment = start / SEGMENT;
    let done = w.done[(segment % SEGMENTS) as usize].fetch_add(len, AcqRel) + len;
    if done == (segment / SEGMENTS + 1) * SEGMENT {
        segment_filled(w, segment);
    }
}

fn segment_filled(w: &Lane, segment: u64) {
    let pending = (segment + 1).saturating_sub(w.appended.load(Acquire) / SEGMENT);
    if APPENDER.load(Acquire) != RUNNING || pending >= 2 * WAKE_BATCH {
        // No writer thread, or it does not keep up (all CPUs are busy): the thread that fills
        // a segment appends, as a record's cost, before the ring runs full.
        append_full_segments(w);
    } else if pending >= WAKE_BATCH {
        // The writer thread is woken for a batch of segments: fewer wake-ups.
        wake_appender();
    }
}

/// Wakes the writer thread if it sleeps (a system call only then).
fn wake_appender() {
    WAKE.fetch_add(1, SeqCst);
    if SLEEPING.load(SeqCst) {
        futex_wake(&WAKE, 1);
    }
}

/// A record of its own reservation (a whole number of chunks, padded), for records longer than
/// a chunk, threads without a slot and signal handlers interrupting their thread's copy.
fn reserve_and_copy(w: &Lane, record: &[u8]) -> bool {
    let len = record.len() as u64;
    if len == 0 || len > RING - SEGMENT {
        if len > 0 {
            crate::log::warn_once(
                "trace-record-too-long",
                format_args!(
                    "a trace record of {len} bytes is longer than the trace's ring can hold \
                     ({} bytes); it is not written",
                    RING - SEGMENT
                ),
            );
        }
        return len == 0;
    }
    let total = len.div_ceil(CHUNK) * CHUNK;
    let start = w.next.fetch_add(total, AcqRel);
    let mut whole = true;
    let mut at = start;
    while at < start + total {
        let segment = at / SEGMENT;
        let end = ((segment + 1) * SEGMENT).min(start + total);
        // Still committed when the copy is skipped, so that the segment fills and is appended
        // (a reader ends the record's line where its bytes stop).
        if whole && free_for(w, segment) {
            zero_chunks(w, at, end - at);
            let (from, to) = (at - start, end - start);
            let piece = &record[from.min(len) as usize..to.min(len) as usize];
            match from {
                0 => write_record(w, at, piece),
                _ if !piece.is_empty() => write_ring(w, at, piece),
                _ => {}
            }
        } else {
            whole = false;
        }
        commit(w, at, end - at);
        at = end;
    }
    whole
}

/// Whether segment `segment`'s slot is free (the previous lap appended), helping to append while
/// it is not; false once tracing stopped or after waiting too long.
fn free_for(w: &Lane, segment: u64) -> bool {
    let needed = (segment + 1).saturating_sub(SEGMENTS) * SEGMENT;
    if w.appended.load(Acquire) >= needed {
        return true;
    }
    BEHIND.store(true, Relaxed);
    // The wait is bounded while nothing moves: two seconds without a segment appended.
    let mut since = (monotonic_ns(), w.appended.load(Acquire));
    let mut spins = 0u32;
    loop {
        if w.state.load(Acquire) == STOPPED || w.map.load(Acquire).is_null() {
            return false;
        }
        // The segment in the way may wait on chunks of threads that are idle or not running;
        // then help append (unless another thread is appending).
        close_open_chunks_before(w, (w.appended.load(Acquire) / SEGMENT + 1) * SEGMENT);
        append_full_segments(w);
        if w.appended.load(Acquire) >= needed {
            return true;
        }
        spins += 1;
        if spins.is_multiple_of(64) {
            let (now, appended) = (monotonic_ns(), w.appended.load(Acquire));
            if appended != since.1 {
                since = (now, appended); // slow, not stuck
            } else if now.saturating_sub(since.0) > WAIT_NS {
                let oldest = appended / SEGMENT;
                let done = w.done[(oldest % SEGMENTS) as usize].load(Acquire);
                stop(&format!(
                    "a trace record waited 2 s for other threads to finish writing theirs \
                     (lane {}: {} bytes appended, {} reserved, {} of the oldest segment's {} \
                     bytes written); no more records are written",
                    lane_number(w),
                    appended,
                    w.next.load(Acquire),
                    done - (oldest / SEGMENTS) * SEGMENT,
                    SEGMENT
                ));
                return false;
            }
        }
        // Yield, not sleep: measured with 16 threads on 2 CPUs, a thread that stays runnable
        // lets the appending thread and the owners of open chunks run sooner (half the cost per
        // record of sleeping on a futex until a segment is appended).
        std::thread::yield_now();
    }
}

/// Appends every full segment after `appended`, in order, unless another thread is doing so.
fn append_full_segments(w: &Lane) {
    loop {
        if w.appending
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            return;
        }
        // SAFETY: gettid has no preconditions and cannot fail.
        w.append_holder.store(unsafe { libc::gettid() }, Relaxed);
        while segment_is_full(w, w.appended.load(Acquire)) {
            if !append_segment(w) {
                break;
            }
            let backlog = w
                .next
                .load(Relaxed)
                .saturating_sub(w.appended.load(Relaxed));
            if backlog > RING / 2 {
                BEHIND.store(true, Relaxed);
            } else if backlog < RING / 4 && BEHIND.load(Relaxed) {
                BEHIND.store(false, Relaxed);
            }
        }
        w.append_holder.store(0, Relaxed);
        w.appending.store(false, Release);
        // A segment that filled after the last look, while the flag was still held, is this
        // thread's to append (its filler found the flag taken).
        if !segment_is_full(w, w.appended.load(Acquire)) || w.state.load(Acquire) == STOPPED {
            return;
        }
    }
}

fn segment_is_full(w: &Lane, appended: u64) -> bool {
    let segment = appended / SEGMENT;
    w.done[(segment % SEGMENTS) as usize].load(Acquire) >= (segment / SEGMENTS + 1) * SEGMENT
}

/// Appends the full segment at `appended` to the trace, then frees its slot. Called only by the
/// holder of `appending`. False (and tracing stopped) on failure.
fn append_segment(w: &Lane) -> bool {
    if w.state.load(Acquire) == STOPPED {
        return false;
    }
    match append_bytes(w, SEGMENT) {
        Ok(()) => true,
        Err(why) => {
            stop(&why);
            false
        }
    }
}

/// Converts `len` bytes of the ring from `appended` on to JSON Lines and appends them to the
/// trace, and records that in the ring's header. The bytes stay: the thread that takes a chunk
/// of the next lap zeroes it ([`zero_chunks`]), in its own cache. On failure the trace keeps only whole segments' lines (it is cut back), and the ring
/// still holds the segment for a reader to recover.
fn append_bytes(w: &Lane, len: u64) -> Result<(), String> {
    let at = w.appended.load(Acquire);
    let map = w.map.load(Acquire);
    let out = w.out.load(Acquire);
    if map.is_null() || out.is_null() {
        return Err("the trace's ring is gone".into());
    }
    let slot = ((at / SEGMENT) % SEGMENTS) * SEGMENT;
    // SAFETY: the ring slot is mapped (`slot + len <= RING`), and its records are complete (the
    // segment is full, or every chunk is closed at exit); `out` is the lane's buffer, used only
    // by the holder of `appending`, as this caller is.
    let (bytes, out) = unsafe {
        (
            std::slice::from_raw_parts(map.add((HEADER + slot) as usize), len as usize),
            &mut *out,
        )
    };
    let start_len = w.file_len.load(Acquire);
    let mut converter = ring::Converter {
        carry: w.carry.load(Acquire),
    };
    out.clear();
    let mut sink = FileSink { w, out };
    let converted = converter
        .convert(bytes, &mut sink)
        .and_then(|()| sink.flush());
    if let Err(why) = converted {
        cut_back(w, start_len);
        return Err(why);
    }
    w.carry.store(converter.carry, Release);
    // SAFETY: the header's first page is mapped; the fields are 8-aligned offsets in it. Only
    // the appender writes them; readers read them only after the process ended.
    unsafe {
        let field = |at: usize| map.add(at).cast::<u64>();
        field(ring::FILE_AT).write_volatile(w.file_len.load(Acquire).to_le());
        field(ring::CARRY_AT).write_volatile(converter.carry.to_le());
        field(ring::APPENDED_AT).write_volatile((at + len).to_le());
    }
    w.appended.store(at + len, Release);
    Ok(())
}

/// Where a segment's JSON Lines go: the lane's buffer, written to the trace when it runs short
/// of room.
struct FileSink<'a> {
    w: &'a Lane,
    out: &'a mut Vec<u8>,
}

impl ring::Sink for FileSink<'_> {
    fn room(&mut self, n: usize) -> Result<&mut Vec<u8>, String> {
        if self.out.len() + n > self.out.capacity() {
            self.flush()?;
        }
        Ok(self.out)
    }
}

impl FileSink<'_> {
    fn flush(&mut self) -> Result<(), String> {
        if !self.out.is_empty() {
            write_out(self.w, self.out)?;
            self.out.clear();
        }
        Ok(())
    }
}

/// Cuts the trace back to `len` bytes after a failed append (shrinking never raises SIGXFSZ),
/// so that it ends with whole lines.
fn cut_back(w: &Lane, len: u64) {
    if w.file_len.load(Acquire) == len {
        return;
    }
    if let Some(fd) = checked_fd(w) {
        // SAFETY: plain system call on our own descriptor.
        unsafe { libc::ftruncate(fd, len as libc::off_t) };
    }
    w.file_len.store(len, Release);
}

/// `pwrite`s `bytes` at the trace's end.
fn write_out(w: &Lane, bytes: &[u8]) -> Result<(), String> {
    let fd = checked_fd(w).ok_or(
        "the trace file was closed by the program and cannot be reopened as the same file; \
         no more records are written",
    )?;
    let at = w.file_len.load(Acquire);
    let len = bytes.len() as u64;
    if w.capped.load(Acquire) {
        return write_exit_lines(w, fd, at, bytes);
    }
    if let Some(cap) = trace_cap() {
        if at + len > cap - LIMIT_LINE_ROOM {
            return write_capped(w, fd, at, bytes, cap);
        }
    }
    if let Some(limit) = file_size_limit() {
        if at + len > limit {
            return Err(format!(
                "the trace would grow past the file size limit (RLIMIT_FSIZE, {limit} bytes); \
                 no more records are written"
            ));
        }
    }
    if at + len > w.reserved.load(Relaxed) {
        let limit = match (file_size_limit(), trace_cap()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        reserve(w, fd, at + len, limit);
    }
    // pwrite is a cancellation point: a host thread cancelled here would unwind out of the shim.
    let mut cancel_state = 0;
    // SAFETY: sets this thread's cancel state; the old one is restored below.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut cancel_state) };
    let result = pwrite_all(fd, at, bytes);
    // SAFETY: restores the state saved above.
    unsafe { pthread_setcancelstate(cancel_state, std::ptr::null_mut()) };
    if let Ok(written) = &result {
        w.file_len.store(at + written, Release);
    }
    result.map(|_| ())
}

/// Room kept below `trace_limit` for the line that says the file reached it and the process's
/// `exit` line.
const LIMIT_LINE_ROOM: u64 = 512;
/// `trace_limit` (bytes a trace file may hold; the options raise it to the least a file keeps,
/// saying so); `None` without one.
fn trace_cap() -> Option<u64> {
    match crate::config::options().trace_limit {
        0 => None,
        cap => Some(cap),
    }
}

/// The file reached `trace_limit`: writes the whole lines of `bytes` that fit, then one event
/// line that says so (`{"seq":N,"t":T,"tid":T,"event":"trace-limit","limit":CAP}`), and marks the
/// lane capped: the records converted after it are dropped, as if written, so that the ring is
/// not left for a reader to recover past the limit.
#[cold]
fn write_capped(w: &Lane, fd: libc::c_int, at: u64, bytes: &[u8], cap: u64) -> Result<(), String> {
    let room = (cap - LIMIT_LINE_ROOM).saturating_sub(at) as usize;
    let fits = bytes[..room.min(bytes.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let mut line = Vec::with_capacity(LIMIT_LINE_ROOM as usize);
    line.extend_from_slice(&bytes[..fits]);
    let mut json = sharecheck_core::json::JsonOut::new(&mut line);
    json.begin_record(
        next_number_shared(),
        crate::clock::since_base(crate::clock::monotonic_ns()),
        // SAFETY: gettid has no preconditions and cannot fail.
        i64::from(unsafe { libc::gettid() }),
    );
    json.kv_str("event", "trace-limit");
    json.kv_u64("limit", cap);
    json.end_object();
    line.push(b'\n');
    w.capped.store(true, Release);
    let written = pwrite_all(fd, at, &line)?;
    w.file_len.store(at + written, Release);
    let path = w.path.load(Acquire);
    let name = if path.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated path this module leaked; never freed.
        unsafe { CStr::from_ptr(path) }
            .to_string_lossy()
            .into_owned()
    };
    crate::log::warn_once(
        "trace-limit",
        format_args!(
            "the trace file {name} reached trace_limit ({cap} bytes); its later records are \
             dropped (its last line says so)"
        ),
    );
    Ok(())
}

/// In a file past `trace_limit`, only the process's `exit` line is still written (it fits in
/// the room kept for it): the report then knows the process ended and what it reported.
fn write_exit_lines(w: &Lane, fd: libc::c_int, mut at: u64, bytes: &[u8]) -> Result<(), String> {
    const EXIT: &[u8] = b"\"event\":\"exit\"";
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if line.len() < LIMIT_LINE_ROOM as usize / 2 && line.windows(EXIT.len()).any(|x| x == EXIT)
        {
            at += pwrite_all(fd, at, line)?;
            w.file_len.store(at, Release);
        }
    }
    Ok(())
}

/// Reserves the trace's disk space ahead of its end (`fallocate`, `FALLOC_FL_KEEP_SIZE`: the
/// file's size stays that of its records) in steps of `RESERVE_STEP`, never past `limit`
/// (`RLIMIT_FSIZE`). Writing into reserved space costs the kernel less than growing the file
/// page by page: measured on this project's VM (ext4), 0.21 ns a byte against 0.35, about 15 ns a
/// record. A file system without `fallocate` (or a full disk) just does without it. The space
/// past the records is given back at exit ([`give_back_reserve`]); after a crash at most
/// `RESERVE_STEP` bytes stay allocated past the file's end until it is deleted.
fn reserve(w: &Lane, fd: libc::c_int, end: u64, limit: Option<u64>) {
    let from = w.reserved.load(Relaxed).max(w.file_len.load(Relaxed));
    let to = (end + RESERVE_STEP).next_multiple_of(RESERVE_STEP);
    let to = limit.map_or(to, |limit| to.min(limit));
    if to > from {
        // SAFETY: plain system call on our own descriptor; a failure only means no reservation.
        unsafe {
            libc::fallocate(
                fd,
                libc::FALLOC_FL_KEEP_SIZE,
                from as libc::off_t,
                (to - from) as libc::off_t,
            )
        };
    }
    w.reserved.store(to.max(end), Relaxed);
}

/// Gives back the space [`reserve`] took past the trace's records (a truncation to the file's
/// own size drops the blocks past its end; never a growth, so never SIGXFSZ).
fn give_back_reserve(w: &Lane) {
    if w.reserved.swap(0, Relaxed) > w.file_len.load(Relaxed) {
        if let Some(fd) = checked_fd(w) {
            // SAFETY: plain system call on our own descriptor, to the file's own length.
            unsafe { libc::ftruncate(fd, w.file_len.load(Relaxed) as libc::off_t) };
        }
    }
}

const RESERVE_STEP: u64 = 4 << 20;

/// glibc's `PTHREAD_CANCEL_DISABLE` (`<pthread.h>`; the libc crate does not declare it).
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

fn pwrite_all(fd: libc::c_int, at: u64, bytes: &[u8]) -> Result<u64, String> {
    let mut written = 0usize;
    while written < bytes.len() {
        let rest = &bytes[written..];
        // SAFETY: reads `rest`, a live slice, and writes it to our own descriptor.
        let n = unsafe {
            libc::pwrite(
                fd,
                rest.as_ptr().cast(),
                rest.len(),
                (at + written as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!(
                "cannot write the trace file: {e}; no more records are written"
            ));
        }
        if n == 0 {
            return Err("cannot write the trace file; no more records are written".into());
        }
        written += n as usize;
    }
    Ok(written as u64)
}

fn ensure_open(
    w: &Lane,
    index: usize,
    open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>,
) -> bool {
    if let Err(open_already) = claim_opening(w) {
        return open_already;
    }
    let opened = open().and_then(|(opened, header)| {
        // A ring file of that name already (stale, or planted) with no trace beside it: both
        // files go to `NAME.PID`, as a clash on the trace file's name does.
        let ring_name = CString::new(format!("{}{}", opened.path, ring::SUFFIX));
        let opened = match ring_name.is_ok_and(|name| taken(&name)) {
            false => opened,
            true => beside(opened)?,
        };
        let ring_path = format!("{}{}", opened.path, ring::SUFFIX);
        prepare_lanes(&opened.path, &header);
        let leak = |p: String| -> Result<&'static CStr, String> {
            let c = CString::new(p).map_err(|_| "a NUL in the trace's name".to_string())?;
            // SAFETY: leaked here, never freed: the lane keeps the names for good.
            Ok(unsafe { CStr::from_ptr(c.into_raw()) })
        };
        adopt(w, opened.fd, leak(opened.path)?, leak(ring_path)?)?;
        Ok(header)
    });
    match opened {
        Ok(header) => finish_opening(w, index, &header),
        Err(message) => {
            w.state.store(STOPPED, Release);
            STOPPED_ALL.store(true, Release);
            crate::log::error(format_args!("{message}; no trace is written"));
            false
        }
    }
}

/// Whether a file (or anything else) has the name `path` (a system call only).
fn taken(path: &CStr) -> bool {
    // SAFETY: a zeroed `stat` is a valid buffer for lstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated; lstat writes only `st`, a live local.
    unsafe { libc::lstat(path.as_ptr(), &mut st) == 0 }
}

/// The trace file `opened` (just created, empty) given up for `NAME.PID`, created the same way.
fn beside(opened: Opened) -> Result<Opened, String> {
    // SAFETY: getpid has no preconditions and cannot fail.
    let fallback = format!("{}.{}", opened.path, unsafe { libc::getpid() });
    let c = CString::new(fallback.clone()).map_err(|_| "a NUL in the trace's name".to_string())?;
    let made = create_exclusive(&c);
    if let Ok(c_path) = CString::new(opened.path.clone()) {
        // SAFETY: the descriptor and the empty file this process just created.
        unsafe {
            libc::close(opened.fd);
            libc::unlink(c_path.as_ptr());
        }
    }
    match made {
        Ok(fd) => Ok(Opened { fd, path: fallback }),
        Err(e) => Err(format!(
            "cannot create trace file {fallback}: {}",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// Whether this thread is to open lane `w` (`Ok`), or else whether the lane is open (`Err`):
/// already, or once the thread opening it is done. The opener claims the lane with its kernel
/// id, so that a signal handler interrupting it (on the same thread) does not wait for itself:
/// its record is not written.
fn claim_opening(w: &Lane) -> Result<(), bool> {
    match w.state.load(Acquire) {
        OPEN => return Err(true),
        STOPPED => return Err(false),
        _ => {}
    }
    // SAFETY: gettid has no preconditions and cannot fail.
    let me = unsafe { libc::gettid() };
    match w.opener.compare_exchange(0, me, AcqRel, Acquire) {
        Ok(_) => {
            w.state.store(OPENING, Release);
            Ok(())
        }
        Err(opener) if opener == me => Err(false),
        Err(_) => Err(wait_while_opening(w)),
    }
}

/// The header goes first, before any other thread may append; then the lane is open.
fn finish_opening(w: &Lane, index: usize, header: &[u8]) -> bool {
    let ok = append_record(w, index, header)
        && w.state
            .compare_exchange(OPENING, OPEN, AcqRel, Acquire)
            .is_ok();
    if !ok {
        w.state.store(STOPPED, Release);
    } else {
        append_early(w);
        if !STOPPED_ALL.load(Acquire) {
            start_appender();
        }
    }
    ok
}

/// Another thread is opening the lane: waits for it (opening is a few system calls).
fn wait_while_opening(w: &Lane) -> bool {
    loop {
        match w.state.load(Acquire) {
            OPEN => return true,
            STOPPED => return false,
            _ => std::thread::yield_now(),
        }
    }
}

/// What lane `k > 0` needs to open without allocating, made when lane 0 opens: its file's name,
/// the name to use if that exists (`NAME.PID`, as for lane 0), their rings' names, and the header.
struct LaneFiles {
    path: CString,
    fallback: CString,
    ring: CString,
    ring_fallback: CString,
    header: Vec<u8>,
}

static LANE_FILES: [AtomicPtr<LaneFiles>; MAX_LANES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_LANES];

/// The file name of writer lane `lane` of the trace `path`: `.laneK` before its `.jsonl` (or at
/// its end), so that readers of `*.jsonl` find every lane.
pub fn lane_path(path: &str, lane: usize) -> String {
    const JSONL: &str = ".jsonl";
    match lane {
        0 => path.to_string(),
        k => match path.strip_suffix(JSONL) {
            Some(stem) if !stem.is_empty() && !stem.ends_with('/') => {
                format!("{stem}.lane{k}{JSONL}")
            }
            _ => format!("{path}.lane{k}"),
        },
    }
}

fn prepare_lanes(path: &str, header: &[u8]) {
    // Every lane's conversion buffer, once per process tree (a forked child keeps its copy).
    for w in LANES.iter().take(lane_count()) {
        if w.out.load(Acquire).is_null() {
            let out = Box::into_raw(Box::new(Vec::with_capacity(OUT_BUFFER)));
            if w.out
                .compare_exchange(std::ptr::null_mut(), out, AcqRel, Acquire)
                .is_err()
            {
                // SAFETY: made just above and published nowhere.
                drop(unsafe { Box::from_raw(out) });
            }
        }
    }
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() };
    for (k, files) in LANE_FILES.iter().enumerate().take(lane_count()).skip(1) {
        let lane = lane_path(path, k);
        let fallback = format!("{lane}.{pid}");
        let made = (|| {
            Some(LaneFiles {
                path: CString::new(lane.clone()).ok()?,
                ring: CString::new(format!("{lane}{}", ring::SUFFIX)).ok()?,
                ring_fallback: CString::new(format!("{fallback}{}", ring::SUFFIX)).ok()?,
                fallback: CString::new(fallback).ok()?,
                header: header.to_vec(),
            })
        })();
        if let Some(made) = made {
            let old = files.swap(Box::into_raw(Box::new(made)), AcqRel);
            if !old.is_null() {
                // SAFETY: a `LaneFiles` leaked here before and taken by no lane.
                drop(unsafe { Box::from_raw(old) });
            }
        }
    }
}

/// Opens lane `k > 0` for the thread of slot `index` (its first record there): creates the files
/// named when lane 0 opened, then writes the header. System calls only, unless it fails.
fn ensure_lane_open(w: &Lane, k: usize, index: usize) -> bool {
    if let Err(open_already) = claim_opening(w) {
        return open_already;
    }
    let files = LANE_FILES[k].load(Acquire);
    if files.is_null() {
        w.state.store(STOPPED, Release);
        return false;
    }
    // SAFETY: leaked by `prepare_lanes` and never freed while this process's lanes may use it
    // (only a forked child, whose lanes start closed, replaces it).
    let files: &'static LaneFiles = unsafe { &*files };
    let ring_taken = taken(&files.ring);
    let opened = match create_exclusive(&files.path) {
        Ok(fd) if !ring_taken => Ok((fd, &files.path, &files.ring)),
        Ok(fd) => {
            // A ring of that name already: both files go to `NAME.PID`.
            // SAFETY: the descriptor and the empty file just created.
            unsafe {
                libc::close(fd);
                libc::unlink(files.path.as_ptr());
            }
            create_exclusive(&files.fallback)
                .map(|fd| (fd, &files.fallback, &files.ring_fallback))
                .map_err(|e| (e, &files.fallback))
        }
        Err(e) if e == libc::EEXIST => create_exclusive(&files.fallback)
            .map(|fd| (fd, &files.fallback, &files.ring_fallback))
            .map_err(|e| (e, &files.path)),
        Err(e) => Err((e, &files.path)),
    }
    .map_err(|(e, path)| {
        format!(
            "cannot create trace file {}: {}",
            path.to_string_lossy(),
            std::io::Error::from_raw_os_error(e)
        )
    })
    .and_then(|(fd, path, ring)| adopt(w, fd, path, ring));
    match opened {
        Ok(()) => finish_opening(w, index, &files.header),
        Err(why) => {
            w.state.store(STOPPED, Release);
            stop(&format!("{why}; no more records are written"));
            false
        }
    }
}

/// `open(path, O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600)`: the descriptor, or errno. An
/// existing file is never opened, and a symlink never followed.
pub fn create_exclusive(path: &CStr) -> Result<libc::c_int, i32> {
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `path` is NUL-terminated and outlives the call; with O_CREAT the variadic mode
    // argument is given, as the promoted `mode_t` (an unsigned int).
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(fd)
    }
}

/// Takes a new trace file in (its descriptor and name) and creates its ring (`ring_path`) next
/// to it. Allocates nothing unless it fails.
fn adopt(
    w: &Lane,
    fd: libc::c_int,
    path: &'static CStr,
    ring_path: &'static CStr,
) -> Result<(), String> {
    let Some((dev, ino)) = identity(fd) else {
        // SAFETY: closing the descriptor this module just received.
        unsafe { libc::close(fd) };
        return Err(format!(
            "cannot stat the trace file {}",
            path.to_string_lossy()
        ));
    };
    w.dev.store(dev, Relaxed);
    w.ino.store(ino, Relaxed);
    w.fd.store(fd, Release);
    w.path.store(path.as_ptr().cast_mut(), Release);
    match create_ring(w, ring_path) {
        Ok(map) => {
            w.map.store(map, Release);
            Ok(())
        }
        Err(why) => {
            // Nothing was written: the empty trace file goes too.
            let path = w.path.swap(std::ptr::null_mut(), AcqRel);
            // SAFETY: our own descriptor, and the path of the file this process just created.
            unsafe {
                libc::close(w.fd.swap(-1, AcqRel));
                if !path.is_null() {
                    libc::unlink(path);
                }
            }
            Err(why)
        }
    }
}

fn create_ring(w: &Lane, c_path: &'static CStr) -> Result<*mut u8, String> {
    let size = HEADER + RING;
    let path = c_path.to_string_lossy();
    if file_size_limit().is_some_and(|limit| limit < size) {
        return Err(format!(
            "the file size limit (RLIMIT_FSIZE) is below the trace's ring of {size} bytes"
        ));
    }
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c_path` is NUL-terminated and outlives the call; with O_CREAT the variadic mode
    // argument is given, as the promoted `mode_t` (an unsigned int).
    let fd = unsafe { libc::open(c_path.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        return Err(format!(
            "cannot create the trace's ring file {path}: {}",
            std::io::Error::last_os_error()
        ));
    }
    let fail = |what: String| {
        // SAFETY: the descriptor and the file this function just created.
        unsafe {
            libc::close(fd);
            libc::unlink(c_path.as_ptr());
        }
        Err(what)
    };
    // SAFETY: plain system call on our own descriptor.
    let rc = unsafe { libc::posix_fallocate(fd, 0, size as libc::off_t) };
    if rc != 0 {
        return fail(format!(
            "cannot reserve the trace's ring file {path}: {}",
            std::io::Error::from_raw_os_error(rc)
        ));
    }
    // SAFETY: maps `size` bytes of our own file, which posix_fallocate just made that long.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return fail(format!(
            "cannot map the trace's ring file {path}: {}",
            std::io::Error::last_os_error()
        ));
    }
    // The descriptor stays open with a shared lock for the process's life: a reader that would
    // fold the ring into the trace (`sharecheck run`, after `_exit`) takes it exclusively first,
    // so it never touches a live process's ring. The kernel drops the lock when the process
    // ends however it ends (or execs: the descriptor is close-on-exec).
    // SAFETY: plain system call on our own descriptor.
    unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) };
    if let Some((dev, ino)) = identity(fd) {
        w.ring_id.0.store(dev, Relaxed);
        w.ring_id.1.store(ino, Relaxed);
    }
    w.ring_fd.store(fd, Release);
    // Provided writable now, in one system call, rather than one write fault per page later
    // (Linux 5.14+; older kernels say EINVAL and the pages fault in once, as they are reused).
    // SAFETY: advice on the mapping just created; it reads and writes no memory of ours.
    unsafe { libc::madvise(base, size as usize, libc::MADV_POPULATE_WRITE) };
    let map = base.cast::<u8>();
    // SAFETY: the header page is mapped and ours; the fields are 8-aligned offsets in it.
    unsafe {
        std::ptr::copy_nonoverlapping(ring::MAGIC.as_ptr(), map, 8);
        map.add(ring::RING_SIZE_AT)
            .cast::<u64>()
            .write_volatile(RING.to_le());
        map.add(ring::TABLE_AT)
            .cast::<u64>()
            .write_volatile(ring::table_id().to_le());
    }
    w.ring_path.store(c_path.as_ptr().cast_mut(), Release);
    Ok(map)
}

// ---------------------------------------------------------------------------------------------
// The writer thread.

/// Starts the thread that appends full segments, with every signal blocked (the program's
/// handlers never run on it) and a small stack; detached. Without it the thread that fills a
/// segment appends it.
fn start_appender() {
    if APPENDER
        .compare_exchange(NO_THREAD, RUNNING, AcqRel, Acquire)
        .is_err()
    {
        return; // running already (or could not be started)
    }
    // SAFETY: plain pthread calls on live locals; the attribute object is destroyed after use,
    // and this thread's signal mask is restored right after the thread is made (which inherits
    // the full mask).
    let made = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, 256 << 10);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = 0;
        let rc = libc::pthread_create(&mut thread, &attr, appender_main, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        rc == 0
    };
    if !made {
        APPENDER.store(FAILED, Release);
        // Segments filled meanwhile found the thread running: append them here.
        LANES.iter().for_each(append_full_segments);
    }
}

/// What runs at exit, registered with `atexit` by the writer thread when it starts
/// ([`at_exit`]); 0: nothing.
static AT_EXIT: AtomicUsize = AtomicUsize::new(0);

/// Sets the function the writer thread registers with `atexit` when it starts: by then the
/// program has initialised its driver, which registered its own teardown, so this runs first
/// (handlers run in reverse order), while the driver still answers the program's other threads.
/// The shim's ELF destructor would run only after the driver's teardown: the exit would then wait
/// with the driver gone, and the program's threads (and signal handlers) would get its errors
/// meanwhile (measured on R580: a 64-thread storm whose exit waited 1 ms there failed 10 of 15
/// times, plain never). Registered from the writer thread, never from a call (which may be a
/// signal handler's: `atexit` allocates).
pub fn at_exit(hook: extern "C" fn()) {
    AT_EXIT.store(hook as usize, Release);
}

extern "C" fn appender_main(_: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: names this thread (a 16-byte-bounded, NUL-terminated name).
    unsafe { libc::prctl(libc::PR_SET_NAME, c"sharecheck-wr".as_ptr()) };
    let hook = AT_EXIT.load(Acquire);
    if hook != 0 {
        // SAFETY: only `at_exit` stores here, and it stores an `extern "C" fn()`, which lives as
        // long as the process (the shim is never unmapped: `-z nodelete`).
        let hook: extern "C" fn() = unsafe { std::mem::transmute(hook) };
        // SAFETY: registers a plain `extern "C" fn()` handler.
        unsafe { libc::atexit(hook) };
    }
    crate::guard::shielded((), appender_loop);
    // Ended (tracing stopped, or a panic): any thread that fills a segment appends it.
    APPENDER.store(FAILED, Release);
    crate::guard::shielded((), || LANES.iter().for_each(append_full_segments));
    std::ptr::null_mut()
}

/// Appends full segments as they fill; closes the chunks that keep the oldest segment from
/// filling once it has waited `IDLE_CHUNK_NS` while later chunks were handed out.
fn appender_loop() {
    let mut stalled = [None; MAX_LANES];
    loop {
        let seen = WAKE.load(SeqCst);
        if STOPPED_ALL.load(Acquire) {
            return;
        }
        let mut timeout: Option<u64> = None;
        let mut work = false;
        for (w, stalled) in LANES.iter().zip(stalled.iter_mut()) {
            if w.state.load(Acquire) != OPEN {
                continue;
            }
            if let Some(wait) = serve_lane(w, stalled) {
                timeout = Some(timeout.map_or(wait, |t| t.min(wait)));
            }
            // A full segment nobody is appending: look again before sleeping.
            work |= segment_is_full(w, w.appended.load(Acquire)) && !w.appending.load(Acquire);
        }
        SLEEPING.store(true, SeqCst);
        if !work && WAKE.load(SeqCst) == seen {
            futex_wait(&WAKE, seen, timeout);
        }
        SLEEPING.store(false, SeqCst);
    }
}

/// One round of the writer thread on lane `w`: closes the chunks that keep the oldest segment
/// from filling (once half the ring is taken, or once it waited `IDLE_CHUNK_NS` while later
/// chunks were handed out), appends full segments, and says how long to sleep at most.
fn serve_lane(w: &Lane, stalled: &mut Option<(u64, u64)>) -> Option<u64> {
    let appended = w.appended.load(Acquire);
    let oldest_end = (appended / SEGMENT + 1) * SEGMENT;
    let next = w.next.load(Acquire);
    let mut timeout = None;
    if next > oldest_end && !segment_is_full(w, appended) {
        let now = monotonic_ns();
        let since = match *stalled {
            Some((at, since)) if at == appended => since,
            _ => {
                *stalled = Some((appended, now));
                now
            }
        };
        let waited = now.saturating_sub(since);
        if next - appended >= RING / 2 || waited >= IDLE_CHUNK_NS {
            close_open_chunks_before(w, oldest_end);
            *stalled = None;
            timeout = Some(IDLE_CHUNK_NS);
        } else {
            timeout = Some(IDLE_CHUNK_NS - waited);
        }
    } else {
        *stalled = None;
    }
    append_full_segments(w);
    timeout
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a live, aligned u32 of this process, with a live timespec or null.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
        )
    };
}

fn futex_wake(word: &AtomicU32, count: i32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32 of this process; it reads no memory of ours.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        )
    };
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one `timespec` to a live local; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn identity(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: a zeroed `stat` is a valid buffer for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live local; fstat only writes it.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// The writer's descriptor, if it still names the trace file: the program may have closed it
/// (`closefrom`, a daemon closing every fd) and reused the number. Then the file is opened again
/// by its path, and only if that is the same file.
fn checked_fd(w: &Lane) -> Option<libc::c_int> {
    let fd = w.fd.load(Acquire);
    let expected = (w.dev.load(Relaxed), w.ino.load(Relaxed));
    if fd >= 0 && identity(fd) == Some(expected) {
        return Some(fd);
    }
    let path = w.path.load(Acquire);
    if path.is_null() {
        return None;
    }
    let flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `path` is a NUL-terminated string this module leaked and never frees.
    let reopened = unsafe { libc::open(path, flags) };
    if reopened < 0 {
        return None;
    }
    if identity(reopened) == Some(expected) {
        w.fd.store(reopened, Release);
        Some(reopened)
    } else {
        // SAFETY: closing the descriptor just opened here.
        unsafe { libc::close(reopened) };
        None
    }
}

fn file_size_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live local getrlimit fills.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } != 0 {
        return None;
    }
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

fn stop(why: &str) {
    STOPPED_ALL.store(true, Release);
    for w in &LANES {
        // A lane still closed stays closed (no file); every other one stops.
        let _ = w.state.fetch_update(AcqRel, Acquire, |state| {
            (state != CLOSED).then_some(STOPPED)
        });
        mark_ring(w, ring::STOPPED);
    }
    crate::log::warn_once("trace-stopped", format_args!("{why}"));
}

/// Adds `bit` to the state word of lane `w`'s ring header, for a reader of the ring it leaves
/// ([`ring::STATE_AT`]): the header page is mapped and reserved, so this needs no disk space.
fn mark_ring(w: &Lane, bit: u64) {
    let map = w.map.load(Acquire);
    if !map.is_null() {
        // SAFETY: the header page is mapped while `map` is set; STATE_AT is an 8-aligned offset
        // in it, and the word is only ever or-ed into (atomically).
        let word = unsafe { &*map.add(ring::STATE_AT).cast::<AtomicU64>() };
        word.fetch_or(bit.to_le(), AcqRel);
    }
}

/// Whether records are being written (a lane is open and tracing did not stop).
pub fn is_open() -> bool {
    LANES.iter().any(|w| w.state.load(Acquire) == OPEN)
}

/// At exit: no more records; waits (as long as they make progress, at most [`EXIT_WAIT_NS`] in
/// all) for records being copied and for another thread's append, appends the rest of each lane's ring to its trace file and
/// removes the ring file. What it cannot append whole in that time (a record still being copied,
/// an append that does not finish: the thread doing it may be stopped) stays in the ring file for
/// a reader to recover, as it does when tracing had stopped (a full disk, the file size limit).
pub fn finish(frozen: Frozen) {
    if HELD.load(Acquire) != 0 {
        append_held();
    }
    STOPPED_ALL.store(true, Release);
    let was: Vec<u8> = LANES
        .iter()
        .map(|w| w.state.swap(STOPPED, AcqRel))
        .collect();
    let deadline = monotonic_ns() + EXIT_WAIT_NS;
    for (w, was) in LANES.iter().zip(was) {
        if was != CLOSED && !w.map.load(Acquire).is_null() {
            // Said first: a ring that stays (tracing had stopped, or its rest could not be
            // appended) tells its reader the process exited normally.
            mark_ring(w, ring::EXITED);
            finish_lane(w, was == OPEN, deadline, frozen);
        }
    }
}

fn finish_lane(w: &Lane, was_open: bool, deadline: u64, frozen: Frozen) {
    // Every chunk of the lane's threads: closed (an owner may be copying one last record; the
    // frozen slot's copy never ends, and its chunk stays open).
    let lane = lane_number(w);
    let seen = SLOTS_SEEN.load(Acquire).min(SLOTS);
    let mut stuck = false;
    for (index, slot) in SLOT_TABLE[..seen].iter().enumerate() {
        let word = slot.word.load(Acquire);
        if frozen.is(index) && word & BUSY != 0 && word != NO_CHUNK {
            stuck |= chunk_of(word).0 == lane;
            continue;
        }
        wait_while_moving(deadline, EXIT_IDLE_NS, || {
            let word = slot.word.load(Acquire);
            let done = word == NO_CHUNK
                || chunk_of(word).0 != lane
                || (word & BUSY == 0 && close_chunk(slot, word));
            (done, word)
        });
    }
    let end = w.next.load(Acquire);
    // Records being copied by other threads: their bytes counted, or the time is up (at once
    // when this thread's own copy was interrupted: the lane is never whole then).
    let whole = !stuck
        && wait_while_moving(deadline, EXIT_IDLE_NS, || {
            let copied: u64 = w.done.iter().map(|d| d.load(Acquire)).sum();
            (copied_up_to(w, end), copied)
        });
    // The appender's flag: its holder, if any, is between two segments (unless it is this
    // thread, interrupted while appending).
    // SAFETY: gettid has no preconditions and cannot fail.
    let me = unsafe { libc::gettid() };
    let held = !(frozen.0.is_some() && w.append_holder.load(Relaxed) == me)
        && wait_while_moving(deadline, EXIT_IDLE_NS, || {
            let taken = w
                .appending
                .compare_exchange(false, true, AcqRel, Acquire)
                .is_ok();
            (taken, w.appended.load(Acquire))
        });
    let mut ok = held && was_open;
    // Whole segments only, unless every record is in: a chunk still being copied (or reserved
    // and never counted) holds bytes the trace must not get; the ring keeps them for a reader.
    let upto = if whole {
        end
    } else {
        let mut full = w.appended.load(Acquire);
        while full < end && segment_is_full(w, full) {
            full += SEGMENT;
        }
        full.min(end)
    };
    while ok && w.appended.load(Acquire) < upto {
        let len = (upto - w.appended.load(Acquire)).min(SEGMENT);
        ok = append_bytes(w, len).is_ok();
    }
    if held {
        give_back_reserve(w);
    }
    let ring_path = w.ring_path.load(Acquire);
    if ok && whole && !ring_path.is_null() {
        // Everything is in the trace: the ring is no longer needed.
        // SAFETY: a NUL-terminated path this module leaked.
        unsafe { libc::unlink(ring_path) };
    }
}

/// Whether every byte reserved before `end` has been copied in (counted in its segment).
fn copied_up_to(w: &Lane, end: u64) -> bool {
    let first = w.appended.load(Acquire) / SEGMENT;
    let last = end.div_ceil(SEGMENT);
    (first..last).all(|segment| {
        let lap_start = (segment / SEGMENTS) * SEGMENT;
        let want = lap_start + (end.min((segment + 1) * SEGMENT) - segment * SEGMENT);
        w.done[(segment % SEGMENTS) as usize].load(Acquire) >= want
    })
}

/// In a forked child: the parent's files are not the child's. Drops the inherited mapping and
/// descriptor without taking any lock (another thread of the parent may have held any), so the
/// child opens its own files on its first record.
pub fn after_fork_in_child() {
    for w in &LANES {
        let map = w.map.swap(std::ptr::null_mut(), AcqRel);
        if !map.is_null() {
            // SAFETY: unmaps the ring this module mapped; only this (the only) thread of the
            // child runs, and nothing references it any more.
            unsafe { libc::munmap(map.cast(), (HEADER + RING) as usize) };
        }
        let ours = [
            (
                w.fd.swap(-1, AcqRel),
                (w.dev.load(Relaxed), w.ino.load(Relaxed)),
            ),
            (
                w.ring_fd.swap(-1, AcqRel),
                (w.ring_id.0.load(Relaxed), w.ring_id.1.load(Relaxed)),
            ),
        ];
        for (fd, id) in ours {
            // Only while the number still names our file: the program may have closed it and
            // reused the number.
            if fd >= 0 && identity(fd) == Some(id) {
                // SAFETY: the inherited copy of our own descriptor (the parent's ring lock stays
                // the parent's: it is dropped when every copy is closed).
                unsafe { libc::close(fd) };
            }
        }
        // The parent's paths: leaked, never freed.
        w.path.store(std::ptr::null_mut(), Release);
        w.ring_path.store(std::ptr::null_mut(), Release);
        w.next.store(0, Release);
        w.appended.store(0, Release);
        w.file_len.store(0, Release);
        w.reserved.store(0, Release);
        w.carry.store(0, Release);
        w.capped.store(false, Release);
        for done in &w.done {
            done.store(0, Release);
        }
        w.appending.store(false, Release);
        w.opener.store(0, Release);
        w.state.store(CLOSED, Release);
    }
    // The parent's chunks, lanes and writer thread are not the child's.
    EPOCH.fetch_add(1, AcqRel);
    let seen = SLOTS_SEEN.swap(0, AcqRel).min(SLOTS);
    for slot in &SLOT_TABLE[..seen] {
        slot.word.store(NO_CHUNK, Release);
        slot.taken.store(false, Release);
        slot.next_number.store(0, Release);
        slot.end_number.store(0, Release);
        slot.in_flight.store(0, Release);
    }
    SLOT_TABLE[SHARED].in_flight.store(0, Release);
    for e in &EARLY {
        e.state.store(FREE, Release);
    }
    HELD.store(0, Release);
    CLOSING.store(false, Release);
    NUMBERS.store(0, Release);
    LANE_COUNT.store(0, Release);
    APPENDER.store(NO_THREAD, Release);
    SLEEPING.store(false, Release);
    BEHIND.store(false, Release);
    WAKE.store(0, Release);
    STOPPED_ALL.store(false, Release);
}

#[cfg(test)]
mod tests {
    use super::lane_path;

    #[test]
    fn lane_files_keep_the_jsonl_suffix() {
        assert_eq!(lane_path("/t/42.jsonl", 0), "/t/42.jsonl");
        assert_eq!(lane_path("/t/42.jsonl", 3), "/t/42.lane3.jsonl");
        assert_eq!(lane_path("/t/trace-42", 1), "/t/trace-42.lane1");
        assert_eq!(lane_path("/t/.jsonl", 1), "/t/.jsonl.lane1");
    }
}
