//! Full segments of the ring converted to JSON Lines and appended to the trace file: the file's
//! size limit, disk space reserved ahead, the trace limit.

use super::*;

/// Appends every full segment after `appended`, in order, unless another thread is doing so.
pub(super) fn append_full_segments(w: &Lane) {
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
                HOT.trace.behind.store(true, Relaxed);
            } else if backlog < RING / 4 && HOT.trace.behind.load(Relaxed) {
                HOT.trace.behind.store(false, Relaxed);
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

pub(super) fn segment_is_full(w: &Lane, appended: u64) -> bool {
    let segment = appended / SEGMENT;
    w.done[(segment % SEGMENTS) as usize].load(Acquire) >= (segment / SEGMENTS + 1) * SEGMENT
}

/// Appends the full segment at `appended` to the trace, then frees its slot. Called only by the
/// holder of `appending`. False (and tracing stopped) on failure.
pub(super) fn append_segment(w: &Lane) -> bool {
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
pub(super) fn append_bytes(w: &Lane, len: u64) -> Result<(), String> {
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
pub(super) struct FileSink<'a> {
    pub(super) w: &'a Lane,
    pub(super) out: &'a mut Vec<u8>,
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
pub(super) fn cut_back(w: &Lane, len: u64) {
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
pub(super) fn write_out(w: &Lane, bytes: &[u8]) -> Result<(), String> {
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
pub(super) const LIMIT_LINE_ROOM: u64 = 512;
/// `trace_limit` (bytes a trace file may hold; the options raise it to the least a file keeps,
/// saying so); `None` without one.
pub(super) fn trace_cap() -> Option<u64> {
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
pub(super) fn write_capped(
    w: &Lane,
    fd: libc::c_int,
    at: u64,
    bytes: &[u8],
    cap: u64,
) -> Result<(), String> {
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
pub(super) fn write_exit_lines(
    w: &Lane,
    fd: libc::c_int,
    mut at: u64,
    bytes: &[u8],
) -> Result<(), String> {
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
pub(super) fn reserve(w: &Lane, fd: libc::c_int, end: u64, limit: Option<u64>) {
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
pub(super) fn give_back_reserve(w: &Lane) {
    if w.reserved.swap(0, Relaxed) > w.file_len.load(Relaxed) {
        if let Some(fd) = checked_fd(w) {
            // SAFETY: plain system call on our own descriptor, to the file's own length.
            unsafe { libc::ftruncate(fd, w.file_len.load(Relaxed) as libc::off_t) };
        }
    }
}

pub(super) const RESERVE_STEP: u64 = 4 << 20;

/// glibc's `PTHREAD_CANCEL_DISABLE` (`<pthread.h>`; the libc crate does not declare it).
pub(super) const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

pub(super) fn pwrite_all(fd: libc::c_int, at: u64, bytes: &[u8]) -> Result<u64, String> {
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

/// The writer's descriptor, if it still names the trace file: the program may have closed it
/// (`closefrom`, a daemon closing every fd) and reused the number. Then the file is opened again
/// by its path, and only if that is the same file.
pub(super) fn checked_fd(w: &Lane) -> Option<libc::c_int> {
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

pub(super) fn file_size_limit() -> Option<u64> {
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
