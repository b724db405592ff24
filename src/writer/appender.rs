//! The writer thread: appends full segments and closes idle chunks, so that calling threads do
//! neither.

use super::*;

/// Starts the thread that appends full segments, with every signal blocked but SIGSYS (the
/// program's handlers never run on it but for a seccomp trap of its own system call:
/// [`crate::guard::spawn_quiet`]) and a small stack; detached. Without it the thread that fills a
/// segment appends it. Never from a thread that may be running a signal handler
/// ([`crate::guard::Spawned::NotNow`]): then `DEFERRED`, and started by the next chunk taken or
/// segment filled on a thread that is not.
pub(super) fn start_appender() {
    let state = APPENDER.load(Acquire);
    if state != NO_THREAD && state != DEFERRED {
        return; // running already (or could not be started)
    }
    if APPENDER
        .compare_exchange(state, RUNNING, AcqRel, Acquire)
        .is_err()
    {
        return;
    }
    let not_running = match crate::guard::spawn_quiet(appender_main) {
        crate::guard::Spawned::Started => return,
        crate::guard::Spawned::NotNow => DEFERRED,
        crate::guard::Spawned::Failed => FAILED,
    };
    APPENDER.store(not_running, Release);
    // Segments filled meanwhile found the thread running: append them here.
    LANES.iter().for_each(append_full_segments);
}

/// Starts the writer thread if an earlier record left it `DEFERRED` (a cold path: a chunk taken,
/// a segment filled).
#[inline]
pub(super) fn start_deferred_appender() {
    if APPENDER.load(Relaxed) == DEFERRED {
        start_appender();
    }
}

/// What runs at exit, registered with `atexit` by the writer thread when it starts
/// ([`at_exit`]); 0: nothing.
pub(super) static AT_EXIT: AtomicUsize = AtomicUsize::new(0);

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

/// Provides the pages of lane `w`'s ring past its first `EAGER` bytes writable, once per ring
/// file: one system call here rather than a write fault per page in the threads that make
/// records (and not at the lane's opening, on the program's path). Records written meanwhile
/// fault their pages in as they go; the advice leaves the ring's contents as they are.
pub(super) fn populate_rest(w: &Lane) {
    // Read first: the loop calls this for every open lane at every wake, a locked swap only once.
    if w.populated.load(Acquire) || w.populated.swap(true, AcqRel) {
        return;
    }
    let map = w.map.load(Acquire);
    if !map.is_null() {
        // SAFETY: the ring file's mapping holds HEADER + RING bytes while `map` is set (it is
        // unmapped only in a forked child, where this thread does not run); the advice reads and
        // writes no memory.
        unsafe {
            libc::madvise(
                map.add((HEADER + EAGER) as usize).cast(),
                (RING - EAGER) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }
}

/// Appends full segments as they fill; closes the chunks that keep the oldest segment from
/// filling once it has waited `IDLE_CHUNK_NS` while later chunks were handed out.
pub(super) fn appender_loop() {
    let mut stalled = [None; MAX_LANES];
    let mut registered = false;
    loop {
        let seen = WAKE.load(SeqCst);
        if HOT.trace.stopped.load(Acquire) {
            return;
        }
        let mut timeout: Option<u64> = None;
        let mut work = false;
        for (w, stalled) in LANES.iter().zip(stalled.iter_mut()) {
            if w.state.load(Acquire) != OPEN {
                continue;
            }
            populate_rest(w);
            if let Some(wait) = serve_lane(w, stalled) {
                timeout = Some(timeout.map_or(wait, |t| t.min(wait)));
            }
            // A full segment nobody is appending: look again before sleeping.
            work |= segment_is_full(w, w.appended.load(Acquire)) && !w.appending.load(Acquire);
        }
        // Once the rings are provided: the kernel's answer may take a grace period.
        if !registered {
            registered = true;
            register_asymmetric_fence();
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
pub(super) fn serve_lane(w: &Lane, stalled: &mut Option<(u64, u64)>) -> Option<u64> {
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

pub(super) fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
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

pub(super) fn futex_wake(word: &AtomicU32, count: i32) {
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
