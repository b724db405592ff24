//! Opening a lane: its trace file and ring file created (or the NAME.PID beside them), the other
//! lanes' names made ahead.

use super::*;

#[inline(always)]
pub(super) fn ensure_open(
    w: &Lane,
    index: usize,
    open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>,
) -> bool {
    // Open already: every record after the first.
    w.state.load(Acquire) == OPEN || open_lane(w, index, open)
}

/// [`ensure_open`] when the lane is not open yet (or stopped). Creating the files and reading
/// what the process record says (the boot id, the IMEX service's files, which most machines
/// lack) leave the program's errno as it was.
#[inline(never)]
fn open_lane(
    w: &Lane,
    index: usize,
    open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>,
) -> bool {
    crate::guard::keeping_errno(|| open_lane_keeping_errno(w, index, open))
}

fn open_lane_keeping_errno(
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
            HOT.trace.stopped.store(true, Release);
            crate::log::error(format_args!("{message}; no trace is written"));
            false
        }
    }
}

/// Whether a file (or anything else) has the name `path` (a system call only).
pub(super) fn taken(path: &CStr) -> bool {
    // SAFETY: a zeroed `stat` is a valid buffer for lstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated; lstat writes only `st`, a live local.
    unsafe { libc::lstat(path.as_ptr(), &mut st) == 0 }
}

/// The trace file `opened` (just created, empty) given up for `NAME.PID`, created the same way.
pub(super) fn beside(opened: Opened) -> Result<Opened, String> {
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
pub(super) fn claim_opening(w: &Lane) -> Result<(), bool> {
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
pub(super) fn finish_opening(w: &Lane, index: usize, header: &[u8]) -> bool {
    let ok = append_record(w, index, header)
        && w.state
            .compare_exchange(OPENING, OPEN, AcqRel, Acquire)
            .is_ok();
    if !ok {
        w.state.store(STOPPED, Release);
    } else {
        append_early(w);
        if !HOT.trace.stopped.load(Acquire) {
            start_appender();
            // A writer thread already running provides this lane's ring now.
            wake_appender();
        }
    }
    ok
}

/// Another thread is opening the lane: waits for it (opening is a few system calls).
pub(super) fn wait_while_opening(w: &Lane) -> bool {
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
pub(super) struct LaneFiles {
    pub(super) path: CString,
    pub(super) fallback: CString,
    pub(super) ring: CString,
    pub(super) ring_fallback: CString,
    pub(super) header: Vec<u8>,
}

pub(super) static LANE_FILES: [AtomicPtr<LaneFiles>; MAX_LANES] =
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

pub(super) fn prepare_lanes(path: &str, header: &[u8]) {
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
/// named when lane 0 opened, then writes the header. System calls only, unless it fails; the
/// program's errno is left as it was (the ring's name is looked for first: ENOENT).
#[inline]
pub(super) fn ensure_lane_open(w: &Lane, k: usize, index: usize) -> bool {
    // Every record of a thread on this lane asks: the open lane's answer reads one word.
    match w.state.load(Acquire) {
        OPEN => true,
        STOPPED => false,
        _ => crate::guard::keeping_errno(|| lane_opened(w, k, index)),
    }
}

/// [`ensure_lane_open`]'s work.
#[cold]
#[inline(never)]
fn lane_opened(w: &Lane, k: usize, index: usize) -> bool {
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
pub(super) fn adopt(
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

pub(super) fn create_ring(w: &Lane, c_path: &'static CStr) -> Result<*mut u8, String> {
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
    write_eager_pages(fd);
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
    // The header and the first `EAGER` bytes provided writable now, in one system call, rather
    // than one write fault per page later (Linux 5.14+; older kernels say EINVAL and the pages
    // fault in once, as they are reused); the writer thread provides the rest
    // ([`appender::populate_rest`]).
    w.populated.store(false, Release);
    // SAFETY: advice on the mapping just created; it reads and writes no memory of ours.
    unsafe { libc::madvise(base, (HEADER + EAGER) as usize, libc::MADV_POPULATE_WRITE) };
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

/// Writes the ring's first `HEADER + EAGER` bytes (zeros) through the descriptor before the file
/// is mapped. A file reserved whole with `posix_fallocate` is made of unwritten extents: on ext4
/// the first fault on its mapping reads ahead, zero-filling a large window of the file's pages,
/// 0.7 to 1.2 ms on the VM for the five pages `madvise(MADV_POPULATE_WRITE)` then asks for, paid by
/// the program's first traced call. Written first, those pages are in the page cache and the
/// populate takes 8 us (the write 20 us; `MADV_RANDOM` would also skip the read-ahead, but then
/// the writer thread's populate of the rest of the ring takes 1.5x as long). A failed or short
/// write changes nothing: the pages then fault in as before. Within the file's size, which the
/// size limit was checked against, so the write raises no `SIGXFSZ`.
fn write_eager_pages(fd: libc::c_int) {
    const PAGES: usize = ((HEADER + EAGER) / 4096) as usize;
    const _: () = assert!((HEADER + EAGER).is_multiple_of(4096));
    static ZEROS: [u8; 4096] = [0; 4096];
    let page = libc::iovec {
        iov_base: ZEROS.as_ptr().cast_mut().cast(),
        iov_len: ZEROS.len(),
    };
    let pages = [page; PAGES];
    // SAFETY: our own descriptor; every iovec names the static zero page, which the kernel only
    // reads. errno is the caller's to keep (`open_lane_keeping_errno`).
    unsafe { libc::pwritev(fd, pages.as_ptr(), PAGES as libc::c_int, 0) };
}
