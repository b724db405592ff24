//! Tracked state, owned by the families, behind one interface.
//!
//! Each family keeps what the driver cannot tell (peer grants, ...) in its own state, which
//! implements [`FamilyState`]: its slot, and what it forgets when a context, stream or device
//! ends ([`Lifetime`], from the engine's lifecycle observers). [`States`] holds every family's
//! state, made on its first use in its slot (the engine does not list the families), plus the
//! engine's own reporting state; checks reach it through [`super::Cx`]
//! ([`States::family`]), never through globals, so unit tests give each test a fresh one.

use crate::hot::HOT;
use parking_lot::Mutex;
use sharecheck_core::options::Options;
use std::any::TypeId;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Something ended that tracked state may refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// `cuCtxDestroy`: the context handle.
    ContextDestroyed(u64),
    /// A device's primary context ended (released for the last time, or reset).
    PrimaryContextEnded(i32),
    /// `cuStreamDestroy`: the stream handle.
    StreamDestroyed(u64),
    /// `hipDeviceReset` of this device (`None`: the runtime could not say which).
    HipDeviceReset(Option<i32>),
    /// Memory was freed, released or unmapped (which, the shim does not need to know).
    MemoryFreed,
}

/// What every family's state provides.
pub trait FamilyState: Default + Send + Sync + 'static {
    /// The family's slot in [`States`], its own (`0..FAMILY_SLOTS`; a second family's state in
    /// a slot is refused when it is first asked for).
    const SLOT: usize;
    /// Forget what belonged to something that ended. Forgetting must always be safe: a check
    /// never reports on tracked state alone without the driver's answer confirming it.
    fn forget(&self, gone: Lifetime);
    /// Whether [`FamilyState::forget`] does anything when memory is freed. A free is frequent
    /// and on the program's path: families that keep nothing about memory are not called then.
    const FORGETS_FREED_MEMORY: bool = true;
    /// What the process still holds as it exits that a rule says it must have given back (a
    /// handle never released, a mapping never unmapped, ...): reported live when the process
    /// writes no trace (`sharecheck report` decides the same rules from a trace).
    fn left_at_exit(&self) -> Vec<Left> {
        Vec::new()
    }
    /// Whether the process imported something another process exported (memory, a pool, an
    /// endpoint): its use of it is judged by rules that need both processes' traces. (An
    /// exporter alone cannot know whether anyone imported; the importer says it for the pair.)
    fn imports_from_other_processes(&self) -> bool {
        false
    }
    /// The descriptors the process exported (a POSIX fd of an allocation) that are still open as
    /// it exits, by number: written in a trace's exit record, for `sharecheck report` to decide
    /// what [`FamilyState::left_at_exit`] decides live (a trace cannot say what was closed).
    fn exported_fds_open(&self) -> Vec<i32> {
        Vec::new()
    }
}

/// How long the exit's look at a family's state waits for a lock another thread holds: a check
/// in flight lets go within microseconds; beyond this, nothing is said (a signal handler's exit
/// that interrupted this thread's own check must not wait for it at all).
pub const AT_EXIT_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Something a process left at its exit, for a rule of the report phase decided live.
#[derive(Debug)]
pub struct Left {
    pub rule: &'static sharecheck_core::rules::Rule,
    /// The function whose call made it, with what it made: `cuMemCreate(handle=0x..)`.
    pub call: String,
    pub message: String,
}

/// Slots for the families' states: seven, so that [`Watch`] holds a word for each and the
/// forget mask on one cache line.
pub const FAMILY_SLOTS: usize = 7;

/// A family's state in its slot: owned (boxed), with its type and how it forgets.
struct Held {
    state: Box<dyn std::any::Any + Send + Sync>,
    at: *const (),
    type_id: TypeId,
    forget: fn(*const (), Lifetime),
    left: fn(*const ()) -> Vec<Left>,
    shares: fn(*const ()) -> bool,
    open: fn(*const ()) -> Vec<i32>,
}

// SAFETY: `at` points into `state`, which is Send + Sync and lives as long as `Held`.
unsafe impl Send for Held {}
// SAFETY: as above.
unsafe impl Sync for Held {}

impl Held {
    fn new<F: FamilyState>() -> Held {
        let state = Box::new(F::default());
        let at = &*state as *const F as *const ();
        Held {
            state,
            at,
            type_id: TypeId::of::<F>(),
            forget: |at, gone| {
                // SAFETY: `at` is the `F` made above (this closure is stored beside it only).
                unsafe { &*at.cast::<F>() }.forget(gone);
            },
            left: |at| {
                // SAFETY: as above.
                unsafe { &*at.cast::<F>() }.left_at_exit()
            },
            shares: |at| {
                // SAFETY: as above.
                unsafe { &*at.cast::<F>() }.imports_from_other_processes()
            },
            open: |at| {
                // SAFETY: as above.
                unsafe { &*at.cast::<F>() }.exported_fds_open()
            },
        }
    }
}

/// The engine's own state: what was reported, for the duplicate limit and once-per-process
/// findings. Touched only when a call has findings.
#[derive(Default)]
pub struct Reporting {
    /// Reports per rule.
    pub reported: HashMap<&'static str, u32>,
    /// Keys of findings reported once per process (divergences).
    pub once: HashSet<String>,
}

/// Each slot's family state, once made: the one line a check reads to reach its family (the
/// `Held` beside it spans two lines per slot; on R580 every line a call touches costs, issue 24).
#[derive(Default)]
#[repr(align(64))]
struct Slots([AtomicPtr<()>; FAMILY_SLOTS]);

/// What a check asks of a family before it reaches the family's state, every family's on one
/// line (issue 24: on R580 each line a call touches after the driver's call costs a miss; a free
/// asks three families).
#[derive(Default)]
#[repr(C, align(64))]
struct Watch {
    /// Each slot's watch word ([`States::watch`]).
    memory: [AtomicU64; FAMILY_SLOTS],
    /// The slots (bits) whose family forgets something when memory is freed.
    forget_freed: AtomicU32,
}

const _: () = assert!(
    std::mem::size_of::<Watch>() == 64,
    "the watch spans one line"
);

/// All tracked state of one process.
#[derive(Default)]
pub struct States {
    watch: Watch,
    slots: Slots,
    families: [OnceLock<Held>; FAMILY_SLOTS],
    /// The process's recent frees (a forked child starts without its parent's).
    pub frees: super::frees::RecentFrees,
    pub reporting: Mutex<Reporting>,
}

impl States {
    /// Family `F`'s state (made empty on first use).
    #[inline(always)]
    pub fn family<F: FamilyState>(&self) -> &F {
        let at = self.slots.0[F::SLOT].load(Ordering::Acquire);
        if at.is_null() {
            return self.first_family::<F>();
        }
        // Only `first_family` stores a slot's pointer, after checking the slot's type; no two
        // families share a slot (`families::SLOTS_DISTINCT`).
        debug_assert!(self.families[F::SLOT]
            .get()
            .is_some_and(|held| held.type_id == TypeId::of::<F>()));
        // SAFETY: `at` points at the `F` that `families[F::SLOT]` owns (see above), which lives
        // as long as `self`.
        unsafe { &*at.cast::<F>() }
    }

    /// [`States::family`] the first time: the state made, its type checked, its slot filled.
    #[cold]
    #[inline(never)]
    fn first_family<F: FamilyState>(&self) -> &F {
        let held = self.families[F::SLOT].get_or_init(|| {
            if F::FORGETS_FREED_MEMORY {
                self.watch
                    .forget_freed
                    .fetch_or(1 << F::SLOT, Ordering::AcqRel);
            }
            Held::new::<F>()
        });
        assert!(
            held.type_id == TypeId::of::<F>(),
            "two families' states in slot {}",
            F::SLOT
        );
        let _ = &held.state;
        self.slots.0[F::SLOT].store(held.at.cast_mut(), Ordering::Release);
        // SAFETY: `at` points at the `F` that `held.state` owns (its type checked above), which
        // lives as long as `self`.
        unsafe { &*held.at.cast::<F>() }
    }

    /// Family `F`'s watch word: what its checks read to know, without reaching its state, that
    /// they have nothing to do (0 while it tracks nothing); every family's shares one line. The
    /// family changes it under its own lock, when what it tracks changes. A family that tracks
    /// memory by address keeps its *memory watch* there: the union of the [`pointer_bit`]s of
    /// that memory, which a free of other memory (almost every free) reads instead of the
    /// family's state. A bit may outlive its memory: a free with it then asks the family, which
    /// finds nothing.
    #[inline(always)]
    pub fn watch<F: FamilyState>(&self) -> &AtomicU64 {
        &self.watch.memory[F::SLOT]
    }

    /// Family `F`'s state and its watch word ([`States::watch`]), for a change to what it
    /// tracks.
    pub fn family_watched<F: FamilyState>(&self) -> (&F, &AtomicU64) {
        (self.family::<F>(), self.watch::<F>())
    }

    /// What every family whose state exists says the process left at its exit.
    pub fn left_at_exit(&self) -> Vec<Left> {
        self.families
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|held| (held.left)(held.at))
            .collect()
    }

    /// Whether any family says the process imported something from another process.
    pub fn imports_from_other_processes(&self) -> bool {
        self.families
            .iter()
            .filter_map(OnceLock::get)
            .any(|held| (held.shares)(held.at))
    }

    /// The descriptors every family says the process exported and still holds open at its
    /// exit ([`FamilyState::exported_fds_open`]), in order.
    pub fn exported_fds_open(&self) -> Vec<i32> {
        let mut fds: Vec<i32> = self
            .families
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|held| (held.open)(held.at))
            .collect();
        fds.sort_unstable();
        fds.dedup();
        fds
    }

    /// [`States::forget`] of [`Lifetime::MemoryFreed`]: one load when no family forgets freed
    /// memory (none does today).
    #[inline(always)]
    pub fn forget_freed_memory(&self) {
        if self.watch.forget_freed.load(Ordering::Acquire) != 0 {
            self.forget(Lifetime::MemoryFreed);
        }
    }

    /// Every family whose state exists forgets what belonged to `gone`.
    #[inline(never)]
    pub fn forget(&self, gone: Lifetime) {
        let mut slots = if gone == Lifetime::MemoryFreed {
            self.watch.forget_freed.load(Ordering::Acquire)
        } else {
            u32::MAX
        };
        for held in &self.families {
            if slots == 0 {
                break;
            }
            if let (1, Some(held)) = (slots & 1, held.get()) {
                (held.forget)(held.at, gone);
            }
            slots >>= 1;
        }
    }
}

/// The process's options ([`crate::config::options`]), reached through `crate::hot`'s line.
#[inline]
pub fn options() -> &'static Options {
    let at = HOT.options.load(Ordering::Acquire);
    if !at.is_null() {
        // SAFETY: a non-null pointer here is the `'static` options stored by `first_options`.
        return unsafe { &*at };
    }
    first_options()
}

#[cold]
#[inline(never)]
fn first_options() -> &'static Options {
    let options = crate::config::options();
    HOT.options
        .store(std::ptr::from_ref(options).cast_mut(), Ordering::Release);
    options
}

/// The process's tracked state (made on first use).
#[inline]
pub fn states() -> &'static States {
    let current = HOT.states.load(Ordering::Acquire);
    if !current.is_null() {
        // SAFETY: a non-null pointer here is a `States` from Box::into_raw (stored only below),
        // never freed.
        return unsafe { &*current.cast::<States>() };
    }
    first_states()
}

#[cold]
fn first_states() -> &'static States {
    let fresh: *mut States = Box::into_raw(Box::default());
    match HOT.states.compare_exchange(
        std::ptr::null_mut(),
        fresh.cast(),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just made from a Box, never freed.
        Ok(_) => unsafe { &*fresh },
        Err(winner) => {
            // SAFETY: `fresh` lost the race and was never shared.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as for `current` above.
            unsafe { &*winner.cast::<States>() }
        }
    }
}

/// In a forked child: every family starts empty (the child's contexts are not the parent's: CUDA
/// and HIP state does not survive fork). The parent's state is left behind, not freed: a thread
/// of the parent may have held one of its locks at fork, and only the forking thread lives on.
pub fn restart_after_fork_in_child() {
    let fresh: *mut States = Box::into_raw(Box::default());
    HOT.states.store(fresh.cast(), Ordering::Release);
}

/// One of 64 bits for a pointer (its bits above a page, folded): a family keeps the union of its
/// tracked pointers' bits, read without its lock, so that a free of memory it does not track
/// (almost every free) costs one load and no lock.
#[inline(always)]
pub fn pointer_bit(ptr: u64) -> u64 {
    let h = (ptr >> 12) ^ (ptr >> 18) ^ (ptr >> 24) ^ (ptr >> 30);
    1 << (h & 63)
}

/// Up to how many tracked pointers [`rewatch`] recomputes a memory watch exactly.
pub const EXACT_WATCH: usize = 64;

/// After a family forgot memory: its memory watch ([`States::watch`]) again from the
/// pointers it still tracks, exactly while at most [`EXACT_WATCH`] are (beyond, the watch keeps
/// the bits it had; a free with one of them then asks the family, which finds nothing).
pub fn rewatch(watch: &AtomicU64, tracked: impl ExactSizeIterator<Item = u64>) {
    if tracked.len() <= EXACT_WATCH {
        watch.store(
            tracked.fold(0, |bits, p| bits | pointer_bit(p)),
            Ordering::Relaxed,
        );
    }
}

/// Whether `bits` (a union of [`pointer_bit`]s) may hold `ptr`: no fold at all while none is held
/// (a free's usual case).
#[inline(always)]
pub fn may_hold(bits: u64, ptr: u64) -> bool {
    bits != 0 && bits & pointer_bit(ptr) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// A family that counts what it was asked to forget.
    #[derive(Default)]
    struct Counting<const SLOT: usize, const FREED: bool>(AtomicUsize);

    impl<const SLOT: usize, const FREED: bool> FamilyState for Counting<SLOT, FREED> {
        const SLOT: usize = SLOT;
        const FORGETS_FREED_MEMORY: bool = FREED;
        fn forget(&self, _: Lifetime) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn a_free_reaches_only_the_families_that_forget_freed_memory() {
        type Keeps = Counting<5, true>;
        type Ignores = Counting<6, false>;
        let states = States::default();
        let (keeps, ignores) = (states.family::<Keeps>(), states.family::<Ignores>());
        states.forget(Lifetime::MemoryFreed);
        assert_eq!((keeps.0.load(Relaxed), ignores.0.load(Relaxed)), (1, 0));
        // Every other end reaches every family.
        states.forget(Lifetime::StreamDestroyed(0x10));
        states.forget(Lifetime::ContextDestroyed(0x20));
        assert_eq!((keeps.0.load(Relaxed), ignores.0.load(Relaxed)), (3, 2));
    }
}
