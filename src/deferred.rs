//! Checks of covered calls made where the shim cannot check them: in a signal handler that
//! interrupted the shim's own work on its thread, or a call of the driver it forwarded (or the
//! driver, or another interposer, calling a covered export during a forwarded call).
//!
//! Such a call is forwarded at once, exactly as without the shim, and numbered; its checks wait,
//! because the interrupted work may hold the checks' locks or be in `malloc`, and the checks'
//! own questions to the driver would re-enter a driver call in progress on the thread (on R580
//! that hung a 64-thread program once in 20 runs). The call is kept, without a lock or an
//! allocation, in an entry of a fixed pool: its arguments, its result, its number, and a copy of
//! what its checks read through its pointers once the driver succeeded (the out-parameters it
//! wrote, the structures it read: the handler's stack is gone by the time they run). When the
//! thread leaves the shim, it checks and records the kept calls, in order, as the whole path
//! would have: findings on stderr and in the record, state kept and forgotten. A call that
//! finds no free entry (more than [`ENTRIES`] kept at once, or a copy larger than an entry) is
//! recorded at once and not checked, and counted ([`unchecked`]).

use crate::guard::Guard;
use crate::writer::Number;
use sharecheck_core::ffi::Keep;
use sharecheck_core::functions::CallArgs;
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize};

/// Calls kept at once, in the whole process.
pub const ENTRIES: usize = 256;
/// Bytes of an entry: the call and the copies of what its pointers point to.
const BYTES: usize = 1024;

const FREE: u8 = 0;
const FILLING: u8 = 1;
const READY: u8 = 2;
const RUNNING: u8 = 3;

#[repr(C, align(16))]
struct Bytes([u8; BYTES]);

struct Entry {
    state: AtomicU8,
    /// The thread that kept it (its state's address: unique among live threads).
    owner: AtomicUsize,
    /// Its place in its thread's order.
    order: AtomicU64,
    /// `replay::<A, TRACED>` for the call's arguments' type.
    replay: AtomicUsize,
    bytes: UnsafeCell<Bytes>,
}

// SAFETY: `bytes` is written only by the thread that moved `state` from FREE to FILLING, and read
// only by the one that moved it from READY to RUNNING (the owner).
unsafe impl Sync for Entry {}

static POOL: [Entry; ENTRIES] = [const {
    Entry {
        state: AtomicU8::new(FREE),
        owner: AtomicUsize::new(0),
        order: AtomicU64::new(0),
        replay: AtomicUsize::new(0),
        bytes: UnsafeCell::new(Bytes([0; BYTES])),
    }
}; ENTRIES];

static ORDER: AtomicU64 = AtomicU64::new(0);
/// Calls recorded without their checks: no entry was free.
static UNCHECKED: AtomicU64 = AtomicU64::new(0);

/// What checks and records a kept call, once its thread leaves the shim: the dispatcher's, for
/// the call's arguments' type (given by the caller: this module sits below the dispatcher).
pub type Check<A> = fn(&Guard, A, c_int, u64, Option<Number>);

/// What an entry holds, at its start; the copies follow.
#[repr(C)]
struct Kept<A> {
    args: A,
    ret: c_int,
    t: u64,
    number: Option<Number>,
    check: Check<A>,
}

/// Keeps a call (its arguments, the driver's `ret`, its time and number) for its thread, `owner`,
/// to `check` once it leaves the shim. `Err` gives the call back when no entry is free (or its
/// copies do not fit one).
pub fn keep<A: CallArgs>(
    owner: usize,
    args: A,
    ret: c_int,
    t: u64,
    number: Option<Number>,
    check: Check<A>,
) -> Result<(), (A, Option<Number>)> {
    const {
        assert!(std::mem::size_of::<Kept<A>>() <= BYTES / 2);
        assert!(std::mem::align_of::<Kept<A>>() <= 16);
    }
    let Some(entry) = POOL.iter().find(|e| {
        e.state.load(Relaxed) == FREE
            && e.state
                .compare_exchange(FREE, FILLING, Acquire, Relaxed)
                .is_ok()
    }) else {
        return Err((args, number));
    };
    let base = entry.bytes.get().cast::<u8>();
    let at = base.cast::<Kept<A>>();
    // SAFETY: FILLING is this thread's (see `Entry`); `Kept<A>` fits at the entry's start, which
    // is aligned for it (asserted above).
    unsafe {
        at.write(Kept {
            args,
            ret,
            t,
            number,
            check,
        });
    };
    let size = std::mem::size_of::<Kept<A>>();
    // SAFETY: the bytes after `Kept<A>` are the entry's, FILLING is this thread's.
    let room = unsafe { std::slice::from_raw_parts_mut(base.add(size), BYTES - size) };
    let mut keep = Keep::new(room);
    // SAFETY: `at` was written just above and is this thread's.
    let kept = unsafe { &mut *at };
    let outcome = sharecheck_core::ffi::Outcome::Returned(ret);
    if !sharecheck_core::functions::CallArgs::detach(&mut kept.args, outcome, &mut keep) {
        // SAFETY: as written above; read back once, and the entry freed.
        let Kept { args, number, .. } = unsafe { at.read() };
        entry.state.store(FREE, Release);
        return Err((args, number));
    }
    entry.owner.store(owner, Relaxed);
    entry.order.store(ORDER.fetch_add(1, Relaxed), Relaxed);
    entry.replay.store(replay::<A> as Replay as usize, Relaxed);
    entry.state.store(READY, Release);
    crate::guard::on_kept(drain);
    Ok(())
}

type Replay = unsafe fn(*mut u8, &Guard);

/// Checks and records one kept call.
///
/// # Safety
/// `at` is an entry's bytes, RUNNING on this thread, holding a `Kept<A>` that `keep::<A>`
/// wrote.
unsafe fn replay<A: CallArgs>(at: *mut u8, guard: &Guard) {
    // SAFETY: the caller's promise; read once (the entry is freed after).
    let Kept {
        args,
        ret,
        t,
        number,
        check,
    } = unsafe { at.cast::<Kept<A>>().read() };
    check(guard, args, ret, t, number);
}

/// Checks and records the calls `owner`'s thread kept before this began, oldest first; those
/// its signal handlers keep meanwhile wait for its next leave (its thread exit at the latest):
/// handlers that keep calls faster than their checks run never hold a thread in the shim.
/// Only on that thread, inside the shim's `guard` and outside any driver call (the guard calls
/// it as its thread leaves the shim).
fn drain(owner: usize, guard: &Guard) {
    let until = ORDER.load(Relaxed);
    loop {
        let next = POOL
            .iter()
            .filter(|e| {
                e.state.load(Acquire) == READY
                    && e.owner.load(Relaxed) == owner
                    && e.order.load(Relaxed) < until
            })
            .min_by_key(|e| e.order.load(Relaxed));
        let Some(entry) = next else {
            return;
        };
        if entry
            .state
            .compare_exchange(READY, RUNNING, AcqRel, Relaxed)
            .is_err()
        {
            continue;
        }
        let replay = entry.replay.load(Relaxed);
        // SAFETY: stored by `keep` from `replay::<A>`, for the `Kept<A>` it wrote here.
        let replay: Replay = unsafe { std::mem::transmute::<usize, Replay>(replay) };
        // SAFETY: RUNNING is this thread's; the entry holds what `keep` wrote for `replay`.
        unsafe { replay(entry.bytes.get().cast::<u8>(), guard) };
        entry.state.store(FREE, Release);
    }
}

/// A call recorded without its checks (no entry was free).
pub fn count_unchecked() {
    UNCHECKED.fetch_add(1, Relaxed);
}

/// Calls recorded without their checks so far.
pub fn unchecked() -> u64 {
    UNCHECKED.load(Relaxed)
}

/// Kept calls waiting for their thread to leave the shim (none is being checked): their
/// numbers cannot land before, which may be never (a thread blocked outside the shim), so an
/// exit does not wait for them.
pub fn parked() -> u64 {
    POOL.iter()
        .filter(|e| e.state.load(Acquire) == READY)
        .count() as u64
}

/// In a forked child: the kept calls are the parent's (its threads', numbered by it, recorded in
/// its trace), none the child's. Their numbers are dropped with the parent's numbering.
pub fn after_fork_in_child() {
    for e in &POOL {
        e.state.store(FREE, Release);
    }
    UNCHECKED.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharecheck_core::ffi::{CUdevice, Int, Out};
    use sharecheck_core::functions::args;

    /// The pool is the process's: one test at a time.
    static POOL_TESTS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    /// The pool holds `ENTRIES` calls at once and gives the next back (recorded unchecked by
    /// its caller); a kept call's out-parameter points at the entry's copy of what the driver
    /// wrote, not at the caller's (gone) variable; a forked child keeps none.
    #[test]
    fn the_pool_keeps_a_copy_of_what_the_driver_wrote_and_refuses_when_full() {
        let _one = POOL_TESTS.lock();
        after_fork_in_child();
        let owner = 0x5eed;
        let mut can = Int(1);
        let call = args::cuDeviceCanAccessPeer {
            canAccessPeer: Out(&mut can),
            dev: CUdevice(0),
            peerDev: CUdevice(1),
        };
        for _ in 0..ENTRIES {
            assert!(keep(owner, call, 0, 0, None, |_, _, _, _, _| {}).is_ok());
        }
        assert_eq!(parked(), ENTRIES as u64);
        assert!(
            keep(owner, call, 0, 0, None, |_, _, _, _, _| {}).is_err(),
            "full"
        );
        can = Int(0);
        let entry = &POOL[0];
        // SAFETY: the entry is READY and nobody drains it: read, not taken.
        let kept = unsafe {
            &*entry
                .bytes
                .get()
                .cast::<Kept<args::cuDeviceCanAccessPeer>>()
        };
        assert_ne!(kept.args.canAccessPeer.0, &mut can as *mut Int);
        // SAFETY: points into the entry's copy.
        assert_eq!(unsafe { (*kept.args.canAccessPeer.0).0 }, 1);
        assert_eq!(can.0, 0);
        after_fork_in_child();
        assert_eq!(parked(), 0);
        assert!(keep(owner, call, 0, 0, None, |_, _, _, _, _| {}).is_ok());
        after_fork_in_child();
    }

    /// A call kept while its thread checks its kept calls (a handler that interrupted the
    /// check) waits for the thread's next leave: handlers faster than the checks never hold
    /// the thread in the shim. The older ones are checked in the order they were kept.
    #[test]
    fn a_call_kept_during_the_checks_waits_for_the_next_leave() {
        let _one = POOL_TESTS.lock();
        use std::sync::atomic::AtomicUsize;
        const OWNER: usize = 0xfeed;
        static CHECKED: AtomicUsize = AtomicUsize::new(0);
        fn check_and_keep_another(
            _: &Guard,
            a: args::cuDeviceCanAccessPeer,
            _: c_int,
            _: u64,
            _: Option<Number>,
        ) {
            assert_eq!(
                a.peerDev.0 as usize,
                CHECKED.fetch_add(1, Relaxed),
                "oldest first"
            );
            let again = args::cuDeviceCanAccessPeer {
                peerDev: CUdevice(9),
                ..a
            };
            assert!(keep(OWNER, again, 0, 0, None, check_and_keep_another).is_ok());
        }
        after_fork_in_child();
        let mut can = Int(1);
        for peer in 0..3 {
            let call = args::cuDeviceCanAccessPeer {
                canAccessPeer: Out(&mut can),
                dev: CUdevice(0),
                peerDev: CUdevice(peer),
            };
            assert!(keep(OWNER, call, 1, 0, None, check_and_keep_another).is_ok());
        }
        let crate::guard::Entry::Whole(guard) = Guard::enter() else {
            panic!("outside the shim");
        };
        drain(OWNER, &guard);
        assert_eq!(CHECKED.load(Relaxed), 3, "the three kept before");
        assert_eq!(parked(), 3, "the three kept meanwhile wait");
        std::mem::forget(guard);
        after_fork_in_child();
    }
}
