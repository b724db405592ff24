//! The thread-local re-entrancy guard.
//!
//! A thread is outside the shim, in the shim's own work, or in the driver (a covered call
//! forwarded, [`Guard::in_driver`]). A covered call that arrives while the thread is in the shim
//! or in the driver (a signal handler that interrupted it, or the driver calling a wrapped
//! symbol) is forwarded and numbered without a lock or an allocation, and kept: the thread checks
//! and records it as it leaves the shim (`deferred`). Not at once: the interrupted work may hold
//! the checks' locks, and the checks' own questions to the driver would re-enter a driver call in
//! progress on this thread, which the driver does not allow (measured on R580: a signal
//! handler's call whose checks asked the driver during an interrupted driver call hung a
//! 64-thread program once in 20 runs). The program's own call is made exactly as without the
//! shim.

use std::cell::Cell;

/// What the shim keeps per thread: one thread-local, reached once per call. In this order
/// (`repr(C)`): what every call reads and writes (the flags and the call count) comes first, with
/// the slot's own flag before it, on one line wherever the slot lies in its first 40 bytes of a
/// line (issue 24: laid out by the compiler, the count and the flags were a line apart, two lines
/// per call, each evicted by the driver's work on R580).
#[repr(C)]
pub struct ThreadState {
    /// [`OUTSIDE`], [`IN_SHIM`] or [`IN_DRIVER`].
    inside: Cell<u8>,
    /// Set by a signal handler's call that was kept to be checked once the thread leaves the
    /// shim (`deferred`).
    kept: Cell<bool>,
    /// Set while the thread's record buffer is in use (a signal handler's record then uses one
    /// of the pool's).
    scratch_busy: Cell<bool>,
    /// Set while a call that interrupted the shim's own work on this thread is recorded: its
    /// record must not wait for ring space (the interrupted work may be what frees it).
    interrupting: Cell<bool>,
    /// In a call the shim itself makes into the driver ([`asking`]).
    asking: Cell<bool>,
    /// This thread's shard of state that many threads read (0 until first asked).
    shard: Cell<u8>,
    /// Covered calls this thread made (numbers findings when no trace is written).
    calls: Cell<u64>,
    /// The thread's record buffer (a leaked `Box<Vec<u8>>`; null until first used or while in
    /// use), freed by a pthread key destructor at thread exit.
    scratch: Cell<*mut Vec<u8>>,
    /// The kernel thread id, with the fork generation it was read in (a forked child's thread
    /// has another id than the parent's that forked).
    tid: Cell<(u32, i32)>,
    /// The records' `,"tid":T` member for that id, and its length (made when the id is read).
    tid_member: Cell<([u8; TID_MEMBER], u8)>,
    /// The thread's chunk of the trace (`writer`'s, opaque here).
    writer_slot: WriterSlot,
    /// The thread's anchor for reading the clock from the TSC.
    clock: crate::clock::ThreadClock,
}

const _: () = assert!(std::mem::offset_of!(ThreadState, calls) == 8);

/// Bytes of room for `,"tid":T` (7 and at most 11 for an `i32`).
const TID_MEMBER: usize = 24;

impl ThreadState {
    #[inline(always)]
    fn tid(&self, generation: u32) -> i32 {
        let (cached_generation, tid) = self.tid.get();
        if cached_generation == generation {
            return tid;
        }
        self.learn_tid(generation)
    }

    /// [`ThreadState::tid`] on the thread's first record (or the first after a fork).
    #[cold]
    #[inline(never)]
    fn learn_tid(&self, generation: u32) -> i32 {
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        self.tid.set((generation, tid));
        let mut member = [0u8; TID_MEMBER];
        let text = format_tid_member(tid);
        member[..text.len()].copy_from_slice(text.as_bytes());
        self.tid_member.set((member, text.len() as u8));
        tid
    }
}

/// `,"tid":T` without allocating (a thread's first record may come from a signal handler).
fn format_tid_member(tid: i32) -> TidText {
    let mut text = TidText::default();
    text.push(b",\"tid\":");
    if tid < 0 {
        text.push(b"-");
    }
    let mut digits = [0u8; 10];
    let mut n = tid.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    text.push(&digits[at..]);
    text
}

#[derive(Default)]
struct TidText {
    bytes: [u8; TID_MEMBER],
    len: usize,
}

impl TidText {
    fn push(&mut self, b: &[u8]) {
        self.bytes[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }
    fn len(&self) -> usize {
        self.len
    }
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// This thread's kernel id (`generation`: the process's fork generation).
pub fn thread_id(generation: u32) -> i32 {
    THREAD.with(|t| t.tid(generation))
}

/// Runs `f`, a call the shim itself makes into the driver (a question of its checks, never a
/// call it forwards), with the thread marked as asking: [`is_asking`], which the simulated
/// driver reads through `sharecheck_asking_driver` to tell the shim's calls from the program's.
#[inline]
pub fn asking<R>(f: impl FnOnce() -> R) -> R {
    let was = THREAD.with(|t| t.asking.replace(true));
    let r = f();
    THREAD.with(|t| t.asking.set(was));
    r
}

/// Runs `f`, a call forwarded for the program, with the thread not marked as asking (a signal
/// handler's call that interrupted one of the shim's questions).
#[inline]
pub fn not_asking<R>(f: impl FnOnce() -> R) -> R {
    let was = THREAD.with(|t| t.asking.replace(false));
    let r = f();
    THREAD.with(|t| t.asking.set(was));
    r
}

/// Whether this thread is in a call the shim itself makes into the driver ([`asking`]).
pub fn is_asking() -> bool {
    THREAD.with(|t| t.asking.get())
}

/// Shards of read-mostly state: threads spread over them so that readers do not share a lock
/// word.
pub const SHARDS: usize = 8;

crate::fast_thread_local! {
    /// This thread's state: no lazy initialisation beyond a flag and no destructor, so it works
    /// during thread teardown and in signal handlers; read with one `%fs`-relative load
    /// ([`crate::tls`]).
    static THREAD: ThreadState = ThreadState {
        inside: Cell::new(OUTSIDE),
        kept: Cell::new(false),
        scratch_busy: Cell::new(false),
        interrupting: Cell::new(false),
        asking: Cell::new(false),
        calls: Cell::new(0),
        shard: Cell::new(0),
        scratch: Cell::new(std::ptr::null_mut()),
        tid: Cell::new((u32::MAX, 0)),
        tid_member: Cell::new(([0; TID_MEMBER], 0)),
        writer_slot: Cell::new(0),
        clock: crate::clock::ThreadClock::new(),
    }; "sharecheck_tls_thread"
}

/// Where a thread is: outside the shim, in its own work, in the driver (a call forwarded).
const OUTSIDE: u8 = 0;
const IN_SHIM: u8 = 1;
const IN_DRIVER: u8 = 2;

/// Held while this thread runs shim code; dropping it gives the thread back to the program.
pub struct Guard(*const ThreadState);

/// What [`Guard::enter`] found.
pub enum Entry {
    /// The thread was outside the shim: the call takes the whole path.
    Whole(Guard),
    /// The thread was in the shim's own work or in the driver (a signal handler interrupted it):
    /// forward and number now, check and record once the thread leaves the shim.
    Interrupted,
}

impl Guard {
    /// Enters the shim: the whole path, unless this thread is in the shim already (its own
    /// work, or a call it forwarded).
    #[inline]
    pub fn enter() -> Entry {
        let state = THREAD.with(|t| t as *const ThreadState);
        // SAFETY: the thread-local lives as long as this thread, and the guard never leaves it
        // (it is neither Send nor Sync: it holds a raw pointer).
        let t = unsafe { &*state };
        match t.inside.get() {
            OUTSIDE => {
                t.inside.set(IN_SHIM);
                Entry::Whole(Guard(state))
            }
            _ => Entry::Interrupted,
        }
    }

    /// Enters the shim only from outside it (lookups and the C API: never for the driver's
    /// own lookups during a forwarded call).
    #[inline]
    pub fn enter_outside() -> Option<Guard> {
        match Guard::enter() {
            Entry::Whole(guard) => Some(guard),
            Entry::Interrupted => None,
        }
    }

    /// Whether this thread is in the shim: its own work, or a call it forwarded.
    pub fn is_inside() -> bool {
        THREAD.with(|t| t.inside.get() != OUTSIDE)
    }

    /// Runs `f`, the forwarded call, with the thread marked as in the driver: a covered call a
    /// signal handler makes meanwhile is forwarded and recorded, never checked (its checks' own
    /// driver questions would re-enter the driver).
    #[inline(always)]
    pub fn in_driver<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        t.inside.set(IN_DRIVER);
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        let r = f();
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        t.inside.set(IN_SHIM);
        r
    }

    /// This thread's writer word (a signal handler's call never uses it: it takes its number
    /// from the process's counter, since it holds it past its return).
    #[inline(always)]
    pub fn writer_slot(&self) -> &WriterSlot {
        // SAFETY: see `enter`.
        &unsafe { &*self.0 }.writer_slot
    }

    /// Counts a covered call of this thread.
    #[inline]
    pub fn count_call(&self) {
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        t.calls.set(t.calls.get() + 1);
    }

    /// This thread's anchor for the clock (`clock`'s).
    #[inline]
    pub fn clock(&self) -> &crate::clock::ThreadClock {
        // SAFETY: see `enter`.
        &unsafe { &*self.0 }.clock
    }

    /// The number of this thread's current covered call (calls made while it runs are not
    /// counted: the guard forwards them only).
    pub fn call_number(&self) -> u64 {
        // SAFETY: see `enter`.
        unsafe { &*self.0 }.calls.get()
    }
}

impl Guard {
    /// This thread's shard (`0..SHARDS`), given out round-robin on first use.
    #[inline]
    pub fn shard(&self) -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        match t.shard.get() {
            0 => {
                let shard = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
                t.shard.set(shard as u8 + 1);
                shard
            }
            s => usize::from(s) - 1,
        }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        if t.kept.get() {
            self.check_kept();
        }
        t.inside.set(OUTSIDE);
    }
}

impl Guard {
    /// Checks and records the calls that signal handlers made while this thread was in the
    /// shim (kept by `deferred`), before the thread leaves it: still inside, so that a handler's
    /// call meanwhile is kept in turn (and checked at the next leave).
    #[cold]
    #[inline(never)]
    fn check_kept(&self) {
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        let check = CHECK_KEPT.load(std::sync::atomic::Ordering::Acquire);
        if check == 0 {
            return;
        }
        // SAFETY: stored by `on_kept` from a `KeptChecker`.
        let check = unsafe { std::mem::transmute::<usize, KeptChecker>(check) };
        // Once: what a handler keeps meanwhile sets the mark again, for the next leave.
        t.kept.set(false);
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        check(self.0 as usize, self);
    }
}

/// What checks the calls kept for a thread (its key, [`kept_call_owner`], and its guard).
pub type KeptChecker = fn(usize, &Guard);

/// The [`KeptChecker`] (`deferred`'s, which sits above this module: set by it, not called by
/// name), 0 until a call is kept.
static CHECK_KEPT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets what checks the kept calls.
pub fn on_kept(check: KeptChecker) {
    CHECK_KEPT.store(check as usize, std::sync::atomic::Ordering::Release);
}

/// This thread's key among live threads (for calls kept by `deferred`), and a mark that one was
/// kept: the thread checks them when it leaves the shim.
pub fn kept_call_owner() -> usize {
    THREAD.with(|t| t as *const ThreadState as usize)
}

/// A call was kept for this thread (from a signal handler on it).
pub fn mark_kept() {
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    THREAD.with(|t| t.kept.set(true));
}

/// This thread's writer word, for a call that interrupted the shim's own work on it (no guard).
pub fn writer_slot<R>(f: impl FnOnce(&WriterSlot) -> R) -> R {
    THREAD.with(|t| f(&t.writer_slot))
}

/// Runs `f`, the recording of a call that interrupted the shim's own work on this thread, marked
/// as such ([`is_interrupting`]).
pub fn interrupting<R>(f: impl FnOnce() -> R) -> R {
    let was = THREAD.with(|t| t.interrupting.replace(true));
    let r = f();
    THREAD.with(|t| t.interrupting.set(was));
    r
}

/// Whether this thread is recording a call that interrupted the shim's own work on it.
#[inline]
pub fn is_interrupting() -> bool {
    THREAD.with(|t| t.interrupting.get())
}

/// The pthread key whose destructor frees a thread's record buffer (`u32::MAX`: not made yet,
/// `u32::MAX - 1`: cannot be made). A pthread key, not a Rust thread-local with a destructor:
/// registering one of those on a thread's first use takes the loader lock.
static SCRATCH_KEY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

fn scratch_key() -> Option<libc::pthread_key_t> {
    use std::sync::atomic::Ordering;
    match SCRATCH_KEY.load(Ordering::Acquire) {
        u32::MAX => {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is a live local; `free_scratch` has the destructor's signature.
            let made = unsafe { libc::pthread_key_create(&mut key, Some(free_scratch)) } == 0;
            let value = if made { key } else { u32::MAX - 1 };
            match SCRATCH_KEY.compare_exchange(u32::MAX, value, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => made.then_some(key),
                Err(winner) => {
                    if made {
                        // SAFETY: the key just made here, unused: another thread's key won.
                        unsafe { libc::pthread_key_delete(key) };
                    }
                    (winner != u32::MAX - 1).then_some(winner)
                }
            }
        }
        value if value == u32::MAX - 1 => None,
        key => Some(key),
    }
}

/// Frees a thread's record buffer at its exit (a C callback: nothing may unwind out of it).
extern "C" fn free_scratch(buffer: *mut libc::c_void) {
    if buffer.is_null() {
        return;
    }
    shielded((), || {
        THREAD.with(|t| {
            // Calls its signal handlers made during its last covered call, still kept: checked
            // and recorded now (its buffer is still its own), before its chunk is closed.
            if t.kept.get() {
                drop(Guard::enter_outside());
            }
            if t.scratch.get() == buffer.cast() {
                t.scratch.set(std::ptr::null_mut());
            }
            let hook = THREAD_EXIT.load(std::sync::atomic::Ordering::Acquire);
            if hook != 0 {
                // SAFETY: only `on_thread_exit` stores here, and it stores a `fn(&WriterSlot)`.
                let hook: fn(&WriterSlot) = unsafe { std::mem::transmute(hook) };
                hook(&t.writer_slot);
            }
        });
        // `buffer` is the buffer `with_scratch` registered with this key; the thread no longer
        // refers to it (cleared above), and pthread calls this once per value.
        give_back_scratch(buffer.cast());
    });
}

/// Record buffers made ahead, at load when tracing: a thread's first record takes one rather than
/// allocating (so that it is async-signal-safe), and a thread gives its buffer back at exit.
/// Threads beyond the pool's size allocate theirs.
const SCRATCH_POOL_SIZE: usize = 64;
const SCRATCH_CAPACITY: usize = 1024;
static SCRATCH_POOL: [std::sync::atomic::AtomicPtr<Vec<u8>>; SCRATCH_POOL_SIZE] =
    [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; SCRATCH_POOL_SIZE];

/// Fills the pool of record buffers and makes the key that frees them (the constructor, when a
/// trace is written).
pub fn prepare_scratch() {
    use std::sync::atomic::Ordering::{AcqRel, Acquire};
    let _ = scratch_key();
    for slot in &SCRATCH_POOL {
        if slot.load(Acquire).is_null() {
            let fresh = Box::into_raw(Box::new(Vec::with_capacity(SCRATCH_CAPACITY)));
            if slot
                .compare_exchange(std::ptr::null_mut(), fresh, AcqRel, Acquire)
                .is_err()
            {
                // SAFETY: `fresh` was just leaked here and is not stored anywhere.
                drop(unsafe { Box::from_raw(fresh) });
            }
        }
    }
}

/// A record buffer: one of the pool's, else a new one (a leaked `Box`).
fn take_scratch() -> *mut Vec<u8> {
    SCRATCH_POOL
        .iter()
        .map(|slot| slot.swap(std::ptr::null_mut(), std::sync::atomic::Ordering::AcqRel))
        .find(|buffer| !buffer.is_null())
        .unwrap_or_else(|| Box::into_raw(Box::new(Vec::with_capacity(SCRATCH_CAPACITY))))
}

/// Puts a buffer from [`take_scratch`], no longer used, back in the pool, or frees it.
fn give_back_scratch(buffer: *mut Vec<u8>) {
    use std::sync::atomic::Ordering::{AcqRel, Acquire};
    // SAFETY: the caller owns `buffer`, a leaked `Box<Vec<u8>>` nothing else refers to.
    let kept = unsafe { (*buffer).capacity() } <= 16 * SCRATCH_CAPACITY;
    if kept {
        for slot in &SCRATCH_POOL {
            if slot
                .compare_exchange(std::ptr::null_mut(), buffer, AcqRel, Acquire)
                .is_ok()
            {
                return;
            }
        }
    }
    // SAFETY: as above; not stored in the pool.
    drop(unsafe { Box::from_raw(buffer) });
}

/// A word the trace writer keeps per thread (its claim on a chunk of the trace).
pub type WriterSlot = Cell<u64>;

/// What runs when a thread that wrote records exits (a `fn(&WriterSlot)`; 0: nothing).
static THREAD_EXIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets what runs, with the thread's writer word, when a thread that wrote records exits (from
/// the pthread key destructor of its record buffer).
pub fn on_thread_exit(hook: fn(&WriterSlot)) {
    THREAD_EXIT.store(hook as usize, std::sync::atomic::Ordering::Release);
}

/// What a record is written with: the thread's record buffer, its id (and `,"tid":T` member, see
/// [`sharecheck_core::json::JsonOut::begin_call_record`]) and its writer word.
pub struct Scratch<'a> {
    pub buf: &'a mut Vec<u8>,
    pub tid: i32,
    pub tid_member: &'a [u8],
    pub slot: &'a WriterSlot,
}

/// Runs `f` with this thread's [`Scratch`] (a fresh buffer when the thread's is in use or cannot
/// be kept).
pub fn with_scratch<R>(generation: u32, f: impl FnOnce(Scratch) -> R) -> R {
    let state = THREAD.with(|t| t as *const ThreadState);
    // SAFETY: the thread-local lives as long as this thread and is only used on it.
    scratch_of(unsafe { &*state }, generation, f)
}

impl Guard {
    /// What a record made without the scratch buffer needs: the thread's id and writer word.
    /// The thread's scratch is set up on its first record all the same (its pthread key's
    /// destructor is what closes the thread's chunk at exit).
    #[inline]
    pub fn record_identity(&self, generation: u32) -> (i32, &WriterSlot) {
        // SAFETY: see `enter`.
        let t = unsafe { &*self.0 };
        if t.scratch.get().is_null() {
            scratch_of(t, generation, |_| ());
        }
        (t.tid(generation), &t.writer_slot)
    }

    /// [`with_scratch`] on the guard's thread, without looking its state up again.
    #[inline]
    pub fn with_scratch<R>(&self, generation: u32, f: impl FnOnce(Scratch) -> R) -> R {
        // SAFETY: see `enter`.
        scratch_of(unsafe { &*self.0 }, generation, f)
    }
}

#[inline]
fn scratch_of<R>(t: &ThreadState, generation: u32, f: impl FnOnce(Scratch) -> R) -> R {
    let tid = t.tid(generation);
    let (member, member_len) = t.tid_member.get();
    let tid_member = &member[..usize::from(member_len)];
    let mut buffer = t.scratch.get();
    let registered = !buffer.is_null() || {
        // The thread's first record: a buffer of the pool's, freed at thread exit by the key's
        // destructor. Not while the thread's buffer is in use (a signal handler's record).
        !t.scratch_busy.get() && {
            let fresh = take_scratch();
            match scratch_key() {
                // SAFETY: registering the buffer with our key so its destructor gives it back.
                Some(key) if unsafe { libc::pthread_setspecific(key, fresh.cast()) } == 0 => {
                    t.scratch.set(fresh);
                    buffer = fresh;
                    true
                }
                _ => {
                    give_back_scratch(fresh);
                    false
                }
            }
        }
    };
    if !registered || t.scratch_busy.get() {
        // In use by the code this record interrupted (a signal handler's), or no key: a buffer
        // of the pool's for this record alone.
        let fresh = take_scratch();
        let result = f(Scratch {
            // SAFETY: `fresh` is ours alone (taken above, registered nowhere).
            buf: unsafe { &mut *fresh },
            tid,
            tid_member,
            slot: &t.writer_slot,
        });
        give_back_scratch(fresh);
        return result;
    }
    t.scratch_busy.set(true);
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    let result = f(Scratch {
        // SAFETY: `buffer` is this thread's leaked buffer; `scratch_busy` keeps any other use of
        // it (a signal handler's record on this thread) away until it is cleared.
        buf: unsafe { &mut *buffer },
        tid,
        tid_member,
        slot: &t.writer_slot,
    });
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    t.scratch_busy.set(false);
    result
}

/// Runs shim-internal work that must not unwind into the program: a panic gives `fallback`
/// (the caller then behaves as pure forwarding) and one log line. This needs `panic = "unwind"`
/// (the release profile in Cargo.toml): with "abort" the panic would kill the program.
#[inline(always)]
pub fn shielded<T>(fallback: T, work: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(value) => value,
        Err(payload) => {
            internal_error(&*payload);
            fallback
        }
    }
}

/// Silences Rust's default panic hook for the shim's own panics (the constructor installs this):
/// the default prints `thread '...' panicked at ...` (and a backtrace with RUST_BACKTRACE) on the
/// program's stderr, which is the program's, not the shim's. Every shim panic is caught by
/// [`shielded`], which reports it as one warning line instead. The hook belongs to the shim's own
/// copy of the Rust runtime: a Rust host program keeps its own. Unit tests keep the default hook,
/// so a failed assertion says what failed.
pub fn quiet_panics() {
    if cfg!(test) {
        return;
    }
    std::panic::set_hook(Box::new(|_| {}));
}

#[cold]
#[inline(never)]
fn internal_error(payload: &(dyn std::any::Any + Send)) {
    let what = panic_message(payload);
    crate::log::warn_once(
        "panic",
        format_args!(
            "internal error ({what}); the call was forwarded unchanged (further internal errors \
             are not reported)"
        ),
    );
}

/// A panic's message, when it has one.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "no message"
    }
}

/// Runs `f`, leaving the calling thread's `errno` as it was: the shim's own system calls (reading
/// a file, opening the trace) must not change what the program sees.
#[inline]
pub fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: errno is the calling thread's own int.
    let errno = unsafe { *libc::__errno_location() };
    let out = f();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    out
}

/// Reads a `T` the program passed by pointer without trusting the pointer: through
/// `process_vm_readv` on this process, which fails with `EFAULT` where a plain read would fault.
/// `None` for NULL, unreadable memory, or a kernel or sandbox that refuses the call. The calling
/// thread's `errno` is left as it was. For inputs the driver reads (a create's properties), taken
/// before the call so that findings can explain a call the driver refuses.
pub fn peek<T: Copy>(ptr: *const T) -> Option<T> {
    if ptr.is_null() {
        return None;
    }
    let mut value = std::mem::MaybeUninit::<T>::uninit();
    let size = std::mem::size_of::<T>();
    let local = libc::iovec {
        iov_base: value.as_mut_ptr().cast(),
        iov_len: size,
    };
    let remote = libc::iovec {
        iov_base: ptr as *mut libc::c_void,
        iov_len: size,
    };
    // SAFETY: `local` covers `value`, which the kernel writes; `remote` is only read by the
    // kernel, which checks it.
    let read = keeping_errno(|| unsafe {
        libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
    });
    // SAFETY: the kernel wrote all `size` bytes of `value`; `T: Copy` has no invariants beyond
    // its bytes for the plain C structures this is used on.
    (read == size as isize).then(|| unsafe { value.assume_init() })
}

/// Whether the calling thread may be running a signal handler: it has blocked a signal whose
/// disposition is a handler. A thread running a handler has the signal it handles blocked (unless
/// the handler was installed with `SA_NODEFER` and an empty mask), so a thread without such a
/// signal is surely not in one. A signal a program keeps blocked for `sigwait` or a `signalfd`
/// has no handler, so it does not count. A few system calls (the mask, then the disposition of
/// each blocked signal); the caller's `errno` is kept.
fn may_be_in_signal_handler() -> bool {
    keeping_errno(|| {
        // SAFETY: a zeroed sigset_t is a valid buffer; this reads the thread's own mask.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; a NULL new set only reads.
        if unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut set) } != 0 {
            return true;
        }
        // The kernel's mask is the set's first 64 bits (signals 1 to 64).
        // SAFETY: sigset_t is at least 8 bytes of plain data.
        let blocked: u64 = unsafe { std::ptr::read_unaligned(std::ptr::addr_of!(set).cast()) };
        (1..=64)
            .filter(|s| blocked & (1 << (s - 1)) != 0)
            .any(|signal| {
                // SAFETY: a zeroed sigaction is a valid buffer; a NULL new action only reads.
                let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
                // SAFETY: as above. A signal glibc keeps for itself answers EINVAL: no handler.
                (unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } == 0)
                    && old.sa_sigaction != libc::SIG_DFL
                    && old.sa_sigaction != libc::SIG_IGN
            })
    })
}

/// What [`spawn_quiet`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spawned {
    Started,
    /// `pthread_create` failed.
    Failed,
    /// Not tried: the calling thread may be running a signal handler
    /// ([`may_be_in_signal_handler`]), which may have interrupted `malloc` or `pthread_create`,
    /// and `pthread_create` allocates the new thread's TLS with `malloc` and takes the loader's
    /// stack lock: the handler would wait forever on a lock its own thread holds (measured on
    /// R580: `scripts/gpu/results/2026-11-29-1xH200-R580-sigcheck-first-record.txt`). The caller
    /// tries again from a later call.
    NotNow,
}

/// Starts a detached thread of the shim's own running `main`, with every signal blocked but
/// SIGSYS (the program's handlers never run on it) and a 256 KiB stack: the writer thread, the
/// multicast watchdog. SIGSYS is what a seccomp filter that traps a system call raises on the
/// thread that made it, and the kernel kills the process when that thread blocks it: a sandbox
/// that traps `membarrier` (the writer thread's registration) gets its own handler's answer
/// there, as on any thread of the program (so may a SIGSYS sent to the process with `kill`).
/// Never under the loader's lock (a call's path, not a
/// constructor), and never from a thread that may be running a signal handler.
pub fn spawn_quiet(main: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void) -> Spawned {
    if may_be_in_signal_handler() {
        return Spawned::NotNow;
    }
    // SAFETY: plain pthread calls on live locals; the attribute object is destroyed after use,
    // and this thread's signal mask is restored right after the thread is made (which inherits
    // that mask).
    let rc = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigdelset(&mut all, libc::SIGSYS);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, 256 << 10);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = 0;
        let rc = libc::pthread_create(&mut thread, &attr, main, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        rc
    };
    if rc == 0 {
        Spawned::Started
    } else {
        Spawned::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread with no signal blocked is not in a handler, nor one whose blocked signal has no
    /// handler (kept for `sigwait`); one with a handled signal blocked, as while running that
    /// handler, may be (the writer thread is started only from the first two). On a thread of its
    /// own, so that the harness's mask does not matter; SIGRTMIN+7, which nothing else here uses,
    /// gets a handler for the test and its old action back; errno is kept.
    #[test]
    fn may_be_in_signal_handler_tells_a_blocked_handled_signal() {
        extern "C" fn ignore(_: libc::c_int) {}
        static RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        extern "C" fn never(_: *mut libc::c_void) -> *mut libc::c_void {
            RAN.store(true, std::sync::atomic::Ordering::SeqCst);
            std::ptr::null_mut()
        }
        let seen = std::thread::spawn(|| {
            let signal = libc::SIGRTMIN() + 7;
            // SAFETY: plain sigset and sigaction calls on live locals; this thread's own mask and
            // a signal nothing else in this process uses.
            unsafe {
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                *libc::__errno_location() = 1234;
                let clear = may_be_in_signal_handler();
                let errno = *libc::__errno_location();
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, signal);
                libc::pthread_sigmask(libc::SIG_BLOCK, &one, std::ptr::null_mut());
                let unhandled = may_be_in_signal_handler();
                let mut handler: libc::sigaction = std::mem::zeroed();
                handler.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, &handler, &mut old);
                let handled = may_be_in_signal_handler();
                let spawned = spawn_quiet(never);
                libc::sigaction(signal, &old, std::ptr::null_mut());
                (clear, errno, unhandled, handled, spawned)
            }
        })
        .join()
        .unwrap();
        assert_eq!(seen, (false, 1234, false, true, Spawned::NotNow));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !RAN.load(std::sync::atomic::Ordering::SeqCst),
            "a thread was started"
        );
    }

    /// The shim's own threads (the writer, the multicast watchdog) start with every signal that
    /// can be blocked blocked but SIGSYS (a seccomp trap of their own system call, which kills
    /// the process when blocked), so the program's handlers never run on them otherwise; the
    /// caller's mask is what it was.
    #[test]
    fn a_quiet_thread_blocks_every_signal_but_sigsys_and_its_starter_keeps_its_mask() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        static MASK: AtomicU64 = AtomicU64::new(u64::MAX);
        fn blocked() -> u64 {
            // SAFETY: a zeroed sigset_t is a valid buffer; reading this thread's own mask.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut set);
                (1..=31).fold(0u64, |m, sig| {
                    m | (u64::from(libc::sigismember(&set, sig) == 1) << (sig - 1))
                })
            }
        }
        extern "C" fn main(_: *mut libc::c_void) -> *mut libc::c_void {
            MASK.store(blocked(), SeqCst);
            std::ptr::null_mut()
        }
        let before = blocked();
        assert_eq!(spawn_quiet(main), Spawned::Started);
        assert_eq!(blocked(), before, "the starter's mask changed");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while MASK.load(SeqCst) == u64::MAX {
            assert!(std::time::Instant::now() < deadline, "the thread never ran");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mask = MASK.load(SeqCst);
        assert_eq!(
            mask & (1 << (libc::SIGSYS - 1)),
            0,
            "SIGSYS blocked: {mask:x}"
        );
        for sig in 1..=31 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP || sig == libc::SIGSYS {
                continue;
            }
            assert_ne!(
                mask & (1 << (sig - 1)),
                0,
                "signal {sig} not blocked: {mask:x}"
            );
        }
    }

    /// A readable value is read; NULL and an unmapped address are not (no fault), and the
    /// caller's errno is what it was, whichever way the read went.
    #[test]
    fn peek_reads_what_is_readable_and_keeps_errno() {
        // SAFETY: errno is the calling thread's own int.
        let set_errno = |v| unsafe { *libc::__errno_location() = v };
        // SAFETY: as above.
        let errno = || unsafe { *libc::__errno_location() };
        let value: u64 = 0x1234_5678;
        set_errno(77);
        assert_eq!(peek(&value as *const u64), Some(0x1234_5678));
        assert_eq!(errno(), 77);
        assert_eq!(peek(std::ptr::null::<u64>()), None);
        // The first page is never mapped.
        assert_eq!(peek(std::ptr::dangling::<u64>()), None);
        assert_eq!(
            errno(),
            77,
            "EFAULT from the kernel does not reach the caller"
        );
    }

    #[test]
    fn panic_messages_are_read_from_either_payload() {
        let literal = std::panic::catch_unwind(|| panic!("a literal")).unwrap_err();
        assert_eq!(panic_message(&*literal), "a literal");
        let formatted = std::panic::catch_unwind(|| panic!("n = {}", 3)).unwrap_err();
        assert_eq!(panic_message(&*formatted), "n = 3");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(5u8)).unwrap_err();
        assert_eq!(panic_message(&*other), "no message");
    }

    #[test]
    fn shielded_work_that_panics_gives_the_fallback() {
        assert_eq!(shielded(7, || 1), 1);
        assert_eq!(shielded(7, || -> i32 { panic!("internal") }), 7);
    }

    #[test]
    fn the_tid_member_is_written_as_json_writes_it() {
        for tid in [0, 7, 27223, i32::MAX, -1, i32::MIN] {
            let text = format_tid_member(tid);
            assert_eq!(
                std::str::from_utf8(text.as_bytes()).unwrap(),
                format!(",\"tid\":{tid}")
            );
        }
    }

    fn whole(entry: Entry) -> Guard {
        match entry {
            Entry::Whole(guard) => guard,
            Entry::Interrupted => panic!("the whole path was expected"),
        }
    }

    /// Inside the shim's own work or a driver call it forwarded, a second entry is an
    /// interrupting call (forward and record only); leaving the driver call gives the thread
    /// back to the shim's work, and leaving the guard to the program.
    #[test]
    fn a_call_made_inside_the_shim_or_its_driver_call_is_an_interrupting_one() {
        let outer = whole(Guard::enter());
        assert!(Guard::is_inside());
        assert!(matches!(Guard::enter(), Entry::Interrupted));
        outer.in_driver(|| {
            assert!(Guard::is_inside());
            assert!(Guard::enter_outside().is_none(), "the driver's own lookups");
            assert!(matches!(Guard::enter(), Entry::Interrupted));
        });
        assert!(Guard::is_inside());
        drop(outer);
        assert!(!Guard::is_inside());
        assert!(Guard::enter_outside().is_some());
    }
}
