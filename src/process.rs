//! Process life, in one place: what the shim does when it is loaded and unloaded, and when the
//! process forks. Every hook runs inside `guard::shielded`: no panic escapes into the host.
//!
//! - **Load** (constructor): stands aside if another copy of the shim is already active
//!   ([`passive`]); otherwise registers the fork handler and the thread-exit hook, reads its
//!   settings (the job's fingerprint key, the options, whether to trace) and, when tracing, makes
//!   the pool of record buffers; nothing else (no file, no thread), so a process that never
//!   touches a GPU pays nothing measurable.
//! - **Fork** (child handler): the child gets its own trace file (the writer drops the parent's
//!   mappings and descriptor), numbering, tracked state and driver-fact caches. No lock is taken
//!   (a thread of the parent may have held any at fork), so a fork in any state of any thread
//!   cannot hang the child. Nothing is done before fork or in the parent: records are already
//!   on disk as they are written.
//! - **Exit** (an `atexit` handler the writer thread registers when it starts, so that it runs
//!   before the driver's teardown; else the destructor): an `exit` record; every lane's open
//!   chunks are closed and the rest of its ring appended to its file, and the ring file removed.
//! - **Thread exit**: a thread's record buffer goes back to the pool (or is freed) by a pthread
//!   key destructor (`guard`),
//!   which also closes its chunk of the trace ([`thread_exit`]).
//! - **exec, `_exit`, fatal signals, `kill -9`**: nothing to do; every completed record is already
//!   in the kernel's page cache (see `writer`).

use crate::guard::shielded;
use crate::{engine, trace};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Whether this copy of the shim stands aside: another copy was loaded first (preloaded, say, and
/// this one `dlopen`ed from another path). The first copy checks and traces; this one forwards
/// every call untouched and writes nothing, so one process never has two traces with clashing
/// sequence numbers.
#[inline]
pub fn passive() -> bool {
    crate::hot::HOT.passive.load(Relaxed)
}

/// Whether calls take the untraced fast path: this copy is active and writes no trace. Set once
/// at load, so that a wrapped call knows its path from one load (of the line it reads next,
/// `crate::hot`'s); false until then (and in a passive or tracing copy), when calls take the
/// general path, which asks [`passive`] and `trace::enabled` itself.
#[inline(always)]
pub fn untraced() -> bool {
    crate::hot::HOT.untraced.load(Relaxed)
}

/// Another copy of the shim is in the global scope when `sharecheck_version` resolves into
/// another object (compared by object: an exported function's address, taken here, would itself
/// resolve to the first copy's).
fn another_copy_is_active() -> bool {
    use crate::loader;
    let first = loader::real_dlsym(libc::RTLD_DEFAULT, c"sharecheck_version") as usize;
    first != 0 && loader::object_of(first).is_some_and(|o| o.load_bias != loader::own_object_base())
}

#[ctor::ctor]
fn on_load() {
    crate::phases::outside(crate::phases::Outside::Constructor, load);
}

fn load() {
    if shielded(false, another_copy_is_active) {
        crate::hot::HOT.passive.store(true, Relaxed);
        return;
    }
    shielded((), crate::guard::quiet_panics);
    // SAFETY: registers a plain `extern "C" fn()` handler that lives as long as the process.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    crate::guard::on_thread_exit(thread_exit);
    crate::writer::at_exit(at_exit);
    // Before the program's threads run, so that no covered call (from a signal handler, say)
    // reads the environment or allocates to set them up: the job's fingerprint key (made and
    // handed down to the children when the environment has none), the options and whether to
    // trace.
    shielded((), || {
        crate::fingerprint::establish_key();
        // A failed import's FABRIC handle is read only without trusting its pointer.
        sharecheck_core::ffi::set_untrusted_reader(|ptr, out| {
            crate::guard::peek(ptr.cast::<[u8; sharecheck_core::ffi::CAPABILITY_SIZE]>())
                .map(|bytes| *out = bytes)
                .is_some()
        });
        let _ = engine::options();
        if trace::enabled() {
            // A thread's first record then allocates nothing.
            crate::guard::prepare_scratch();
        } else {
            crate::hot::HOT.untraced.store(true, Relaxed);
        }
        trace::init_clock();
    });
}

extern "C" fn after_fork_in_child() {
    // The child's exit is its own to finish (it inherits the parent's `atexit` registration and
    // registers again when its writer thread starts: the second call does nothing).
    FINISHED.store(false, Relaxed);
    shielded((), || {
        trace::after_fork_in_child();
        engine::after_fork_in_child();
        crate::families::multicast::watchdog::after_fork_in_child();
    });
}

/// A thread that wrote records exits (called by the pthread key destructor of its record
/// buffer, `guard`): its chunk of the trace is closed and given back.
fn thread_exit(slot: &crate::writer::ThreadSlot) {
    shielded((), || crate::writer::thread_exit(slot));
}

/// Set once the exit's work is done: it runs from an `atexit` handler (registered by the writer
/// thread, so before the driver's teardown) or, failing that, the destructor, whichever is first.
static FINISHED: AtomicBool = AtomicBool::new(false);

/// The exit's work: the exit record, the rest of the ring appended.
fn finish_once() {
    if passive() || FINISHED.swap(true, Relaxed) {
        return;
    }
    crate::phases::outside(crate::phases::Outside::Exit, finish);
}

fn finish() {
    // The program's later exit handlers see the errno they would have seen.
    crate::guard::keeping_errno(|| {
        if !trace::enabled() && !crate::guard::Guard::is_inside() {
            // No trace for `sharecheck report` to decide what the process left: decided now (not
            // from a signal handler's exit that interrupted the shim's own work).
            shielded((), engine::report_left_at_exit);
        }
        shielded((), || {
            trace::finish(|| {
                // Not from a signal handler's exit that interrupted the shim's own work, which
                // may hold the families' locks: the exit record then lists no descriptor.
                if crate::guard::Guard::is_inside() {
                    Vec::new()
                } else {
                    engine::states().exported_fds_open()
                }
            });
        });
    });
}

extern "C" fn at_exit() {
    finish_once();
}

#[ctor::dtor]
fn on_unload() {
    finish_once();
    // A measurement build's times, the exit's included (after it, whichever ran it).
    crate::phases::dump();
}
