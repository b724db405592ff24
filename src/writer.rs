//! Where trace records go: a file mapped into memory that threads append whole records to
//! without a lock.
//!
//! - **Lossless.** The pages of a shared file mapping belong to the kernel's page cache as soon
//!   as they are written, so every completed record survives the process however it ends:
//!   `exit`, `_exit`, `exec`, `abort`, SIGSEGV, `kill -9`. Nothing is buffered in the process.
//! - **Lock-free.** A record reserves its bytes with one atomic add and copies itself in; the file
//!   grows one chunk at a time under a flag only growers touch.
//! - **Harmless.** Space is reserved with `posix_fallocate` before a chunk is mapped, so a full
//!   disk is an error when growing (one warning, tracing stops), never a SIGBUS later. The file
//!   never grows past `RLIMIT_FSIZE`, so the host never gets SIGXFSZ. The descriptor is
//!   `O_CLOEXEC`, used only to grow and trim, and checked (device and inode) before each use: a
//!   program that closed it and reused the number is never written into.
//! - **Fork.** The child drops the parent's mappings and descriptor without taking any lock, and
//!   opens its own file on its first record.
//!
//! At exit the file is trimmed to its records. A process that ends without exit handlers (`_exit`,
//! a fatal signal, `kill -9`) leaves the unused rest of the last chunk as NUL bytes, which readers
//! skip; a record being copied at that moment may be cut short (a torn line readers skip).

use std::ffi::CString;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8};

/// Bytes the file grows by.
pub const CHUNK: u64 = 1 << 20;
/// At most this many chunks (16 GiB); past it tracing stops with a warning.
const MAX_CHUNKS: usize = 16 * 1024;

const CLOSED: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
const STOPPED: u8 = 3;

struct Writer {
    state: AtomicU8,
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
    /// Reservation cursor: the next record's offset.
    next: AtomicU64,
    /// Bytes of the file reserved on disk and mapped (a multiple of `CHUNK`).
    allocated: AtomicU64,
    chunks: [AtomicPtr<u8>; MAX_CHUNKS],
    growing: AtomicBool,
    /// Records being copied right now.
    inflight: AtomicU32,
    /// `allocated` when growing ahead of need last failed (`u64::MAX`: never).
    ahead_failed_at: AtomicU64,
    /// The file's path (leaked `CString`), for reopening a descriptor the program closed.
    path: AtomicPtr<std::ffi::c_char>,
}

static W: Writer = Writer {
    state: AtomicU8::new(CLOSED),
    fd: AtomicI32::new(-1),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    next: AtomicU64::new(0),
    allocated: AtomicU64::new(0),
    chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_CHUNKS],
    growing: AtomicBool::new(false),
    inflight: AtomicU32::new(0),
    ahead_failed_at: AtomicU64::new(u64::MAX),
    path: AtomicPtr::new(std::ptr::null_mut()),
};

/// What opening the file needs from the trace module: the file (created exclusively, its path)
/// and the first record (who wrote the file).
pub struct Opened {
    pub fd: libc::c_int,
    pub path: String,
}

/// Appends one whole record (ending in `\n`); opens the file on the first one with `open`.
/// Returns whether the record is in the file.
pub fn append(record: &[u8], open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>) -> bool {
    if !ensure_open(open) {
        return false;
    }
    reserve_and_copy(record)
}

fn reserve_and_copy(record: &[u8]) -> bool {
    W.inflight.fetch_add(1, AcqRel);
    let len = record.len() as u64;
    let offset = W.next.fetch_add(len, AcqRel);
    let end = offset + len;
    let allocated = W.allocated.load(Acquire);
    let fits = end <= allocated || grow(end);
    if fits {
        copy_at(offset, record);
        // Past half of the last chunk: map the next one now, so no thread waits for it.
        if end + CHUNK / 2 > allocated && !W.growing.load(Relaxed) {
            grow_ahead(allocated);
        }
    }
    W.inflight.fetch_sub(1, Release);
    fits
}

fn copy_at(mut offset: u64, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let chunk = (offset / CHUNK) as usize;
        let within = offset % CHUNK;
        let n = bytes.len().min((CHUNK - within) as usize);
        let base = W.chunks[chunk].load(Acquire);
        debug_assert!(!base.is_null());
        // SAFETY: `base` maps CHUNK bytes of the file at chunk * CHUNK (published with Release
        // after mmap succeeded, and never unmapped while this process may append), `within + n
        // <= CHUNK`, and the reservation makes these bytes this record's alone.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(within as usize), n) };
        offset += n as u64;
        bytes = &bytes[n..];
    }
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
        match open() {
            Ok((opened, header)) => {
                // The header goes first, before any other thread may append.
                let ok = adopt(opened) && reserve_and_copy(&header);
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

fn adopt(opened: Opened) -> bool {
    let Some((dev, ino)) = identity(opened.fd) else {
        // SAFETY: closing the descriptor this module just received.
        unsafe { libc::close(opened.fd) };
        return false;
    };
    W.dev.store(dev, Relaxed);
    W.ino.store(ino, Relaxed);
    W.fd.store(opened.fd, Release);
    if let Ok(path) = CString::new(opened.path) {
        W.path.store(path.into_raw(), Release);
    }
    true
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

/// Makes `[0, end)` reserved and mapped, one chunk at a time; false once tracing stopped.
fn grow(end: u64) -> bool {
    loop {
        if W.allocated.load(Acquire) >= end {
            return true;
        }
        if W.state.load(Acquire) == STOPPED {
            return false;
        }
        if W.growing
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            std::thread::yield_now();
            continue;
        }
        let have = W.allocated.load(Acquire);
        if have < end {
            if let Err(why) = add_chunk(have) {
                stop(&why);
            }
        }
        W.growing.store(false, Release);
    }
}

/// Adds the chunk after `allocated` if no other thread is growing the file (never waits). A
/// failure here stops nothing (the current chunk still has room): the thread that needs the
/// chunk tries again and reports it; until then no other thread retries.
fn grow_ahead(allocated: u64) {
    if W.state.load(Acquire) != OPEN
        || W.ahead_failed_at.load(Relaxed) == allocated
        || W.growing
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
    {
        return;
    }
    if W.allocated.load(Acquire) == allocated && add_chunk(allocated).is_err() {
        W.ahead_failed_at.store(allocated, Relaxed);
    }
    W.growing.store(false, Release);
}

fn add_chunk(have: u64) -> Result<(), String> {
    let index = (have / CHUNK) as usize;
    if index >= MAX_CHUNKS {
        return Err(format!(
            "the trace reached {} GiB; no more records are written",
            (MAX_CHUNKS as u64 * CHUNK) >> 30
        ));
    }
    let fd = checked_fd().ok_or(
        "the trace file was closed by the program and cannot be reopened as the same file",
    )?;
    if let Some(limit) = file_size_limit() {
        if have + CHUNK > limit {
            return Err(format!(
                "the trace would grow past the file size limit (RLIMIT_FSIZE, {limit} bytes); \
                 no more records are written"
            ));
        }
    }
    // SAFETY: plain system call on our own descriptor; it writes nothing through pointers.
    let rc = unsafe { libc::posix_fallocate(fd, have as libc::off_t, CHUNK as libc::off_t) };
    if rc != 0 {
        return Err(format!(
            "cannot grow the trace file: {}; no more records are written",
            std::io::Error::from_raw_os_error(rc)
        ));
    }
    // SAFETY: maps CHUNK bytes of our own file at a page-aligned offset that posix_fallocate
    // just made part of the file; the mapping is private to this module.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            CHUNK as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            // Populated now, by the thread that grows the file, rather than page by page by
            // every thread that writes a record.
            libc::MAP_SHARED,
            fd,
            have as libc::off_t,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(format!(
            "cannot map the trace file: {}; no more records are written",
            std::io::Error::last_os_error()
        ));
    }
    // Shared file pages are mapped read-only at first so the kernel can track dirtying: every
    // first write to a page would fault (ext4: page_mkwrite, block mapping, zeroing). Populate
    // them writable now, in one system call by the thread that grows the file (Linux 5.14+;
    // older kernels say EINVAL and the pages fault one by one as before).
    // SAFETY: advice on the mapping just created; it reads and writes no memory of ours.
    unsafe { libc::madvise(base, CHUNK as usize, libc::MADV_POPULATE_WRITE) };
    W.chunks[index].store(base.cast(), Release);
    W.allocated.store(have + CHUNK, Release);
    Ok(())
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

/// At exit: waits (briefly) for records being copied, then trims the file to its records.
pub fn finish() {
    if W.state.load(Acquire) == CLOSED {
        return;
    }
    for _ in 0..100_000 {
        if W.inflight.load(Acquire) == 0 {
            break;
        }
        std::hint::spin_loop();
    }
    let used = W.next.load(Acquire).min(W.allocated.load(Acquire));
    if let Some(fd) = checked_fd() {
        // SAFETY: plain system call on our own descriptor. The mappings past `used` are never
        // written again (`next` is past them).
        unsafe { libc::ftruncate(fd, used as libc::off_t) };
    }
}

/// In a forked child: the parent's file is not the child's. Drops the inherited mappings and
/// descriptor without taking any lock (another thread of the parent may have held any), so the
/// child opens its own file on its first record.
pub fn after_fork_in_child() {
    for chunk in &W.chunks {
        let base = chunk.swap(std::ptr::null_mut(), AcqRel);
        if !base.is_null() {
            // SAFETY: unmaps a chunk this module mapped; only this (the only) thread of the child
            // runs, and nothing references it any more.
            unsafe { libc::munmap(base.cast(), CHUNK as usize) };
        }
    }
    let fd = W.fd.swap(-1, AcqRel);
    if fd >= 0 {
        // SAFETY: the inherited copy of our own descriptor.
        unsafe { libc::close(fd) };
    }
    W.path.store(std::ptr::null_mut(), Release); // the parent's path: leaked, never freed
    W.next.store(0, Release);
    W.allocated.store(0, Release);
    W.growing.store(false, Release);
    W.inflight.store(0, Release);
    W.ahead_failed_at.store(u64::MAX, Release);
    W.state.store(CLOSED, Release);
}
