//! Where trace records go: a ring mapped from a file, which threads copy whole records into
//! without a lock, appended to the trace file one segment at a time (layout and recovery:
//! [`sharecheck_core::ring`]).
//!
//! - **Lossless.** The ring's pages belong to the kernel's page cache as soon as a record is
//!   copied in, so every completed record survives the process however it ends: at `exit` the rest
//!   of the ring is appended and the ring file removed; after `_exit`, `exec`, `abort`, SIGSEGV or
//!   `kill -9` a reader recovers the ring's tail. Nothing is buffered in process memory.
//! - **Cheap.** The ring's pages are provided once and reused: a record costs one copy, and every
//!   64 KiB one `pwrite` appends a segment (the kernel provides page-cache pages for `pwrite` about
//!   four times cheaper than for a first write through a shared mapping).
//! - **Lock-free.** A record reserves its bytes with one atomic add, copies itself in and counts
//!   its bytes as done in its segment; the thread that completes a segment appends the full
//!   segments in order, while no other thread does (a flag, never waited on: a thread that finds
//!   it taken leaves the work to its holder, who looks again before letting go). A thread whose
//!   bytes fall in a segment the previous lap still holds helps append, and waits at most two
//!   seconds (then tracing stops with a warning).
//! - **Harmless.** The ring file is reserved whole with `posix_fallocate` before it is mapped (a
//!   full disk is an error at open, never a SIGBUS). The trace never grows past `RLIMIT_FSIZE`, so
//!   the host never gets SIGXFSZ; `ENOSPC` and `EFBIG` stop tracing with one warning. Descriptors
//!   are `O_CLOEXEC`, and the trace's is checked (device and inode) before each append: a program
//!   that closed it and reused the number is never written into.
//! - **Fork.** The child drops the parent's mapping and descriptors without taking any lock, and
//!   opens its own files on its first record.

use sharecheck_core::ring::{self, HEADER, RING, SEGMENT, SEGMENTS};
use std::ffi::CString;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8};

const CLOSED: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
const STOPPED: u8 = 3;

/// How long a record waits for its segment to be free before tracing stops.
const WAIT_NS: u64 = 2_000_000_000;

struct Writer {
    state: AtomicU8,
    /// The trace file, its identity (device, inode) and path (a leaked `CString`).
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
    path: AtomicPtr<std::ffi::c_char>,
    /// The ring file's path (leaked), removed at exit.
    ring_path: AtomicPtr<std::ffi::c_char>,
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
    /// Held by the thread appending segments.
    appending: AtomicBool,
}

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

static W: Writer = Writer {
    state: AtomicU8::new(CLOSED),
    fd: AtomicI32::new(-1),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    path: AtomicPtr::new(std::ptr::null_mut()),
    ring_path: AtomicPtr::new(std::ptr::null_mut()),
    map: AtomicPtr::new(std::ptr::null_mut()),
    next: Line(AtomicU64::new(0)),
    appended: Line(AtomicU64::new(0)),
    done: [const { Line(AtomicU64::new(0)) }; SEGMENTS as usize],
    appending: AtomicBool::new(false),
};

/// What opening the file needs from the trace module: the trace file (created exclusively) and
/// its path.
pub struct Opened {
    pub fd: libc::c_int,
    pub path: String,
}

/// Appends one whole record (ending in `\n`); opens the files on the first one with `open`,
/// which also gives the first record (who wrote the file). Returns whether the record is in.
pub fn append(record: &[u8], open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>) -> bool {
    if !ensure_open(open) {
        return false;
    }
    reserve_and_copy(record)
}

fn reserve_and_copy(record: &[u8]) -> bool {
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
    let mut offset = W.next.fetch_add(len, AcqRel);
    let mut bytes = record;
    let mut whole = true;
    while !bytes.is_empty() {
        let segment = offset / SEGMENT;
        let within = offset % SEGMENT;
        let n = bytes.len().min((SEGMENT - within) as usize);
        // Still committed when the copy is skipped, so that the segment fills and is appended.
        if whole && free_for(segment) {
            let slot = (segment % SEGMENTS) * SEGMENT + within;
            // SAFETY: the mapping holds HEADER + RING bytes and stays mapped while the writer is
            // open; `slot + n <= RING`; the reservation makes these bytes this record's alone,
            // and `free_for` says the previous lap's bytes here were appended.
            unsafe {
                let base = W.map.load(Acquire).add((HEADER + slot) as usize);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), base, n);
            }
        } else {
            whole = false;
        }
        let done = W.done[(segment % SEGMENTS) as usize].fetch_add(n as u64, AcqRel) + n as u64;
        if done == (segment / SEGMENTS + 1) * SEGMENT {
            append_full_segments();
        }
        offset += n as u64;
        bytes = &bytes[n..];
    }
    whole
}

/// Whether segment `segment`'s slot is free (the previous lap appended), helping to append while
/// it is not; false once tracing stopped or after waiting too long.
fn free_for(segment: u64) -> bool {
    let needed = (segment + 1).saturating_sub(SEGMENTS) * SEGMENT;
    if W.appended.load(Acquire) >= needed {
        return true;
    }
    let start = monotonic_ns();
    let mut spins = 0u32;
    loop {
        if W.state.load(Acquire) == STOPPED || W.map.load(Acquire).is_null() {
            return false;
        }
        append_full_segments();
        if W.appended.load(Acquire) >= needed {
            return true;
        }
        spins += 1;
        if spins.is_multiple_of(64) && monotonic_ns().saturating_sub(start) > WAIT_NS {
            stop(
                "a trace record waited 2 s for another thread to finish writing one; \
                 no more records are written",
            );
            return false;
        }
        std::thread::yield_now();
    }
}

/// Appends every full segment after `appended`, in order, unless another thread is doing so.
fn append_full_segments() {
    loop {
        if W.appending
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            return;
        }
        while segment_is_full(W.appended.load(Acquire)) {
            if !append_segment() {
                break;
            }
        }
        W.appending.store(false, Release);
        // A segment that filled after the last look, while the flag was still held, is this
        // thread's to append (its filler found the flag taken).
        if !segment_is_full(W.appended.load(Acquire)) || W.state.load(Acquire) == STOPPED {
            return;
        }
    }
}

fn segment_is_full(appended: u64) -> bool {
    let segment = appended / SEGMENT;
    W.done[(segment % SEGMENTS) as usize].load(Acquire) >= (segment / SEGMENTS + 1) * SEGMENT
}

/// Appends the full segment at `appended` to the trace, then frees its slot. Called only by the
/// holder of `appending`. False (and tracing stopped) on failure.
fn append_segment() -> bool {
    if W.state.load(Acquire) == STOPPED {
        return false;
    }
    match append_bytes(SEGMENT, true) {
        Ok(()) => true,
        Err(why) => {
            stop(&why);
            false
        }
    }
}

/// Appends `len` bytes of the ring from `appended` on to the trace, records it in the ring's
/// header and, with `clear`, zeroes them in the ring so that a reader after a crash finds zeros
/// rather than this lap's records in space not written again yet.
fn append_bytes(len: u64, clear: bool) -> Result<(), String> {
    let at = W.appended.load(Acquire);
    let map = W.map.load(Acquire);
    if map.is_null() {
        return Err("the trace's ring is gone".into());
    }
    let slot = ((at / SEGMENT) % SEGMENTS) * SEGMENT;
    write_at(at, map, slot, len)?;
    // SAFETY: the header's first page is mapped; APPENDED_AT is an 8-aligned offset in it. Only
    // the appender writes it; readers read it only after the process ended. The cleared bytes
    // are the slot just appended, which no record may use before `appended` passes it.
    unsafe {
        map.add(ring::APPENDED_AT)
            .cast::<u64>()
            .write_volatile((at + len).to_le());
        if clear {
            std::ptr::write_bytes(map.add((HEADER + slot) as usize), 0, len as usize);
        }
    }
    W.appended.store(at + len, Release);
    Ok(())
}

/// `pwrite`s `len` bytes of the ring slot at `slot` to the trace at `at`.
fn write_at(at: u64, map: *mut u8, slot: u64, len: u64) -> Result<(), String> {
    let fd = checked_fd().ok_or(
        "the trace file was closed by the program and cannot be reopened as the same file; \
         no more records are written",
    )?;
    if let Some(limit) = file_size_limit() {
        if at + len > limit {
            return Err(format!(
                "the trace would grow past the file size limit (RLIMIT_FSIZE, {limit} bytes); \
                 no more records are written"
            ));
        }
    }
    // pwrite is a cancellation point: a host thread cancelled here would unwind out of the shim.
    let mut cancel_state = 0;
    // SAFETY: sets this thread's cancel state; the old one is restored below.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut cancel_state) };
    let result = pwrite_all(fd, at, map, slot, len);
    // SAFETY: restores the state saved above.
    unsafe { pthread_setcancelstate(cancel_state, std::ptr::null_mut()) };
    result
}

/// glibc's `PTHREAD_CANCEL_DISABLE` (`<pthread.h>`; the libc crate does not declare it).
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

fn pwrite_all(fd: libc::c_int, at: u64, map: *mut u8, slot: u64, len: u64) -> Result<(), String> {
    let mut written = 0u64;
    while written < len {
        // SAFETY: reads `len - written` bytes of the mapped ring slot (`slot + len <= RING`) and
        // writes them to our own descriptor.
        let n = unsafe {
            libc::pwrite(
                fd,
                map.add((HEADER + slot + written) as usize).cast(),
                (len - written) as usize,
                (at + written) as libc::off_t,
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
        written += n as u64;
    }
    Ok(())
}

fn ensure_open(open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>) -> bool {
    match W.state.load(Acquire) {
        OPEN => return true,
        STOPPED => return false,
        _ => {}
    }
    if W.state
        .compare_exchange(CLOSED, OPENING, AcqRel, Acquire)
        .is_ok()
    {
        let opened = open().and_then(|(opened, header)| Ok((adopt(opened)?, header)));
        match opened {
            Ok(((), header)) => {
                // The header goes first, before any other thread may append.
                let ok = reserve_and_copy(&header);
                W.state.store(if ok { OPEN } else { STOPPED }, Release);
                return ok;
            }
            Err(message) => {
                W.state.store(STOPPED, Release);
                crate::log::error(format_args!("{message}; no trace is written"));
                return false;
            }
        }
    }
    // Another thread is opening: wait for it (opening is a few system calls).
    loop {
        match W.state.load(Acquire) {
            OPEN => return true,
            STOPPED | CLOSED => return false,
            _ => std::thread::yield_now(),
        }
    }
}

/// Takes the trace file in and creates its ring next to it.
fn adopt(opened: Opened) -> Result<(), String> {
    let Some((dev, ino)) = identity(opened.fd) else {
        // SAFETY: closing the descriptor this module just received.
        unsafe { libc::close(opened.fd) };
        return Err(format!("cannot stat the trace file {}", opened.path));
    };
    W.dev.store(dev, Relaxed);
    W.ino.store(ino, Relaxed);
    W.fd.store(opened.fd, Release);
    let ring_path = format!("{}{}", opened.path, ring::SUFFIX);
    if let Ok(path) = CString::new(opened.path) {
        W.path.store(path.into_raw(), Release);
    }
    match create_ring(&ring_path) {
        Ok(map) => {
            W.map.store(map, Release);
            Ok(())
        }
        Err(why) => {
            // Nothing was written: the empty trace file goes too.
            let path = W.path.swap(std::ptr::null_mut(), AcqRel);
            // SAFETY: our own descriptor, and the path of the file this process just created.
            unsafe {
                libc::close(W.fd.swap(-1, AcqRel));
                if !path.is_null() {
                    libc::unlink(path);
                }
            }
            Err(why)
        }
    }
}

fn create_ring(path: &str) -> Result<*mut u8, String> {
    let size = HEADER + RING;
    if file_size_limit().is_some_and(|limit| limit < size) {
        return Err(format!(
            "the file size limit (RLIMIT_FSIZE) is below the trace's ring of {size} bytes"
        ));
    }
    let c_path = CString::new(path).map_err(|_| format!("bad ring file name {path:?}"))?;
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
    // SAFETY: closing our own descriptor; the mapping stays valid without it.
    unsafe { libc::close(fd) };
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
    }
    W.ring_path.store(c_path.into_raw(), Release);
    Ok(map)
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
fn checked_fd() -> Option<libc::c_int> {
    let fd = W.fd.load(Acquire);
    let expected = (W.dev.load(Relaxed), W.ino.load(Relaxed));
    if fd >= 0 && identity(fd) == Some(expected) {
        return Some(fd);
    }
    let path = W.path.load(Acquire);
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
        W.fd.store(reopened, Release);
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
    W.state.store(STOPPED, Release);
    crate::log::warn_once("trace-stopped", format_args!("{why}"));
}

/// Whether records are being written (the file is open and tracing did not stop).
pub fn is_open() -> bool {
    W.state.load(Acquire) == OPEN
}

/// At exit: no more records; waits (briefly) for records being copied, appends the rest of the
/// ring to the trace and removes the ring file. If tracing had stopped (a full disk, the file
/// size limit), or another thread is stuck appending, the ring file stays for a reader to recover.
pub fn finish() {
    let was = W.state.swap(STOPPED, AcqRel);
    if was == CLOSED || W.map.load(Acquire).is_null() {
        return;
    }
    let end = W.next.load(Acquire);
    // Records being copied by other threads: a short wait for their bytes to be counted.
    for _ in 0..100_000 {
        if copied_up_to(end) {
            break;
        }
        std::thread::yield_now();
    }
    // The appender's flag: its holder, if any, is between two segments.
    let mut held = false;
    for _ in 0..100_000 {
        held = W
            .appending
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_ok();
        if held {
            break;
        }
        std::thread::yield_now();
    }
    let mut ok = held && was == OPEN;
    while ok && W.appended.load(Acquire) < end {
        let len = (end - W.appended.load(Acquire)).min(SEGMENT);
        ok = append_bytes(len, false).is_ok();
    }
    let ring_path = W.ring_path.load(Acquire);
    if ok && !ring_path.is_null() {
        // Everything is in the trace: the ring is no longer needed.
        // SAFETY: a NUL-terminated path this module leaked.
        unsafe { libc::unlink(ring_path) };
    }
}

/// Whether every byte reserved before `end` has been copied in (counted in its segment).
fn copied_up_to(end: u64) -> bool {
    let first = W.appended.load(Acquire) / SEGMENT;
    let last = end.div_ceil(SEGMENT);
    (first..last).all(|segment| {
        let lap_start = (segment / SEGMENTS) * SEGMENT;
        let want = lap_start + (end.min((segment + 1) * SEGMENT) - segment * SEGMENT);
        W.done[(segment % SEGMENTS) as usize].load(Acquire) >= want
    })
}

/// In a forked child: the parent's files are not the child's. Drops the inherited mapping and
/// descriptor without taking any lock (another thread of the parent may have held any), so the
/// child opens its own files on its first record.
pub fn after_fork_in_child() {
    let map = W.map.swap(std::ptr::null_mut(), AcqRel);
    if !map.is_null() {
        // SAFETY: unmaps the ring this module mapped; only this (the only) thread of the child
        // runs, and nothing references it any more.
        unsafe { libc::munmap(map.cast(), (HEADER + RING) as usize) };
    }
    let fd = W.fd.swap(-1, AcqRel);
    if fd >= 0 {
        // SAFETY: the inherited copy of our own descriptor.
        unsafe { libc::close(fd) };
    }
    // The parent's paths: leaked, never freed.
    W.path.store(std::ptr::null_mut(), Release);
    W.ring_path.store(std::ptr::null_mut(), Release);
    W.next.store(0, Release);
    W.appended.store(0, Release);
    for done in &W.done {
        done.store(0, Release);
    }
    W.appending.store(false, Release);
    W.state.store(CLOSED, Release);
}
