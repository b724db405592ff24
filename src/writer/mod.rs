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
//!   (all signals blocked but SIGSYS; it never takes the loader lock). The thread that fills a segment only
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

use crate::clock::monotonic_ns;
use crate::hot::HOT;
use sharecheck_core::ring::{self, CHUNK, HEADER, RING, SEGMENT, SEGMENTS};
use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};

mod appender;
mod exit;
mod files;
mod records;
mod sink;
mod slots;

pub use self::appender::*;
pub use self::exit::*;
pub use self::files::*;
pub use self::records::*;
use self::sink::*;
pub use self::slots::*;

const CLOSED: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
const STOPPED: u8 = 3;

/// How long a record waits for its segment to be free before tracing stops.
const WAIT_NS: u64 = 2_000_000_000;
/// How long the oldest segment may wait for chunks left open before they are closed.
const IDLE_CHUNK_NS: u64 = 10_000_000;

/// The ring's bytes provided writable when its file is made, by the thread that opens the lane:
/// its first four chunks (the lane's header record and the first records). The rest (about
/// 4 MB) the writer thread provides, off the program's path: providing the whole ring there cost
/// every traced process 2.6 ms at its first record on the VM (6.0 -> 3.4 ms for a process of 5
/// calls, plain 0.9), however few records it made.
const EAGER: u64 = 4 * CHUNK;

/// Full segments that wake the writer thread.
const WAKE_BATCH: u64 = 4;

/// The JSON Lines a segment converts to are written out from a buffer of this many bytes.
const OUT_BUFFER: usize = 2 * SEGMENT as usize;

/// One lane of the trace: a file of its own (the process's trace for lane 0, `NAME.laneK.jsonl`
/// for lane K) with its ring. Threads are spread over the lanes, so that threads on many cores
/// do not all wait on one file's appends (the kernel appends to one file at a time).
/// `repr(C)`: what a record reads of its lane (`state`, `map`) shares the first line.
#[repr(C)]
struct Lane {
    state: AtomicU8,
    /// The ring file's mapping: `HEADER` bytes of header, then the ring.
    map: AtomicPtr<u8>,
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
    /// The ring's pages past its first `EAGER` bytes were provided by the writer thread
    /// ([`appender::populate_rest`]).
    populated: AtomicBool,
}

/// Bumped when a segment fills: the writer thread sleeps on it (a futex word).
static WAKE: Line<AtomicU32> = Line(AtomicU32::new(0));
/// Whether the writer thread runs (`NO_THREAD`, `RUNNING`, `FAILED`, `DEFERRED`).
static APPENDER: AtomicU8 = AtomicU8::new(NO_THREAD);
/// Whether the writer thread sleeps (only then does a filled segment wake it).
static SLEEPING: AtomicBool = AtomicBool::new(false);
// This module's flags that every traced call reads are on the hot block's second line
// (`crate::hot::HOT.trace`: `behind`, `stopped`).

/// Whether the appender falls behind: a record is then better formatted by its own thread (the
/// appender only copies it), so that a thread making calls as fast as it can is not held up by
/// the formatting of its own records on one other CPU.
#[inline]
pub fn behind() -> bool {
    HOT.trace.behind.load(Relaxed)
}

/// Lanes at most, and in use (decided when the first lane opens: the CPUs this process may run
/// on, at most `MAX_LANES`; 0 until then).
const MAX_LANES: usize = 8;
static LANE_COUNT: AtomicUsize = AtomicUsize::new(0);

const NO_THREAD: u8 = 0;
const RUNNING: u8 = 1;
const FAILED: u8 = 2;
/// Not started yet: the record that was to start it may have been a signal handler's
/// ([`appender::start_appender`]); a later record of a thread that is not in one starts it.
const DEFERRED: u8 = 3;

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
    populated: AtomicBool::new(false),
};
static LANES: [Lane; MAX_LANES] = [CLOSED_LANE; MAX_LANES];

/// What opening the file needs from the trace module: the trace file (created exclusively) and
/// its path.
pub struct Opened {
    pub fd: libc::c_int,
    pub path: String,
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

fn identity(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: a zeroed `stat` is a valid buffer for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live local; fstat only writes it.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

fn stop(why: &str) {
    HOT.trace.stopped.store(true, Release);
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
    HOT.trace.epoch.fetch_add(1, AcqRel);
    forget_asymmetric_fence();
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
    HOT.trace.held.store(0, Release);
    HOT.trace.closing.store(false, Release);
    NUMBERS.store(0, Release);
    LANE_COUNT.store(0, Release);
    APPENDER.store(NO_THREAD, Release);
    SLEEPING.store(false, Release);
    HOT.trace.behind.store(false, Release);
    WAKE.store(0, Release);
    HOT.trace.stopped.store(false, Release);
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
