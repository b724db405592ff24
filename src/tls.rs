//! Thread-local variables read with one `%fs`-relative load.
//!
//! A `thread_local!` in a shared object is reached through `__tls_get_addr` (the general-dynamic
//! model): a call into the loader that reads its thread's vector of modules, several cache lines
//! of the loader's on every access. On R580 every line a covered call touches costs (the driver's
//! work evicts them; issue 24), and the call path reads the thread's guard and a check's memo.
//! [`fast_thread_local!`] places a variable in the static TLS block instead (the initial-exec
//! model, as jemalloc's and tcmalloc's are): the thread pointer plus an offset the loader wrote
//! in the GOT, which is the block's start (the same for every variable, learnt once and kept on
//! `crate::hot`'s line, [`block`]) plus the variable's offset in the block (a link-time constant):
//! no GOT line is read on the call path. The shim is loaded at start (`LD_PRELOAD`, or linked), where static TLS is laid
//! out for it; a later `dlopen` of it uses the loader's reserve for such objects (Rust's standard
//! library already needs it: the object carries `DF_STATIC_TLS` either way).
//!
//! The variable starts as zero bytes in `.tbss`: a [`Slot`] whose flag says its value is not
//! made yet. Its first use on a thread makes it from the initial value. The value must need no
//! drop (nothing runs at thread exit), which every use here is: cells of plain data.
//! Elsewhere than x86-64 Linux the macro falls back to a `thread_local!`.

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;

/// A variable's storage: zero bytes mean "not made yet".
#[repr(C)]
pub struct Slot<T> {
    made: Cell<bool>,
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Slot<T> {
    /// The storage before the first use (what `.tbss` holds); a template for the fallback's
    /// `thread_local!`, never shared.
    #[allow(clippy::declare_interior_mutable_const)]
    pub const EMPTY: Slot<T> = Slot {
        made: Cell::new(false),
        value: UnsafeCell::new(MaybeUninit::uninit()),
    };
}

/// What [`fast_thread_local!`] makes for one variable: where its storage is and how to make its
/// value. Static functions, so that every access inlines to the `%fs`-relative load.
pub trait Key: 'static {
    type Value: 'static;
    fn slot() -> *const Slot<Self::Value>;
    fn init() -> Self::Value;
}

/// A thread-local variable made by [`fast_thread_local!`].
pub struct Local<K: Key>(std::marker::PhantomData<K>);

impl<K: Key> Local<K> {
    /// Used by [`fast_thread_local!`] only (no `Default`: a `Local` is made by the macro, beside
    /// its storage).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        assert!(
            !std::mem::needs_drop::<K::Value>(),
            "a fast thread-local's value is never dropped"
        );
        Local(std::marker::PhantomData)
    }

    /// Runs `f` on this thread's value (made on the thread's first use).
    #[inline(always)]
    pub fn with<R>(&'static self, f: impl FnOnce(&K::Value) -> R) -> R {
        // SAFETY: the slot is this thread's own, valid for the thread's life; the reference does
        // not leave `f`.
        let slot = unsafe { &*K::slot() };
        if !slot.made.get() {
            Self::make(slot);
        }
        // SAFETY: `made` is set only once the value was written.
        f(unsafe { (*slot.value.get()).assume_init_ref() })
    }

    #[cold]
    #[inline(never)]
    fn make(slot: &Slot<K::Value>) {
        // SAFETY: nothing refers to the value yet on this thread (`made` is false). A signal
        // handler that interrupts this writes the same initial value and sets `made` itself;
        // the value needs no drop, so writing it over is harmless.
        unsafe { (*slot.value.get()).write(K::init()) };
        slot.made.set(true);
    }
}

/// The thread pointer (`%fs:0`, the thread's own address in its control block).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
pub fn thread_pointer() -> usize {
    let at: usize;
    // SAFETY: reads the thread pointer, nothing else.
    unsafe {
        std::arch::asm!(
            "mov {at}, qword ptr fs:[0]",
            at = out(reg) at,
            options(pure, readonly, nostack),
        );
    }
    at
}

/// The offset from the thread pointer of the start of this object's block of static TLS: the
/// same on every thread, kept on `crate::hot`'s line (which a wrapped call reads first anyway),
/// learnt on the first use with `learn` (one variable's GOT entry less its offset in the block).
/// A variable is then the thread pointer plus this plus its offset in the block, a constant the
/// linker writes into the instruction (`@DTPOFF`): no line of the GOT is read (issue 24: on R580
/// each line a call touches after the driver's call costs).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
pub fn block(learn: impl FnOnce() -> isize) -> isize {
    use std::sync::atomic::Ordering::Relaxed;
    match crate::hot::HOT.tls_block.load(Relaxed) {
        // Not learnt yet. In a shared object (the shim) static TLS lies below the thread pointer
        // (x86-64's variant II), so a block's start is never at it; in an executable (the unit
        // tests) the linker writes offsets from the thread pointer itself, the block is 0 and
        // learnt on every use, still exact.
        0 => learn_block(learn),
        block => block,
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[cold]
#[inline(never)]
fn learn_block(learn: impl FnOnce() -> isize) -> isize {
    let block = learn();
    crate::hot::HOT
        .tls_block
        .store(block, std::sync::atomic::Ordering::Relaxed);
    block
}

/// `fast_thread_local! { static NAME: Type = init; "symbol" }`: a thread-local read with one
/// `%fs`-relative load ([the module](self)), at [`block`] plus its offset in the block. The
/// symbol names its storage in the object (hidden: it is never exported); it must be unique in
/// the crate (the link fails otherwise).
#[macro_export]
macro_rules! fast_thread_local {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr; $sym:literal) => {
        #[allow(non_snake_case)]
        #[doc(hidden)]
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            std::arch::global_asm!(
                concat!(".pushsection .tbss.", $sym, ",\"awT\",@nobits"),
                ".balign {align}",
                concat!(".globl ", $sym),
                concat!(".hidden ", $sym),
                concat!(".type ", $sym, ", @object"),
                concat!(".size ", $sym, ", {size}"),
                concat!($sym, ":"),
                ".zero {size}",
                ".popsection",
                size = const std::mem::size_of::<$crate::tls::Slot<$ty>>(),
                align = const std::mem::align_of::<$crate::tls::Slot<$ty>>(),
            );

            /// The slot's offset from the thread pointer, as the GOT holds it (written by the
            /// loader when it placed this object).
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            #[inline(always)]
            pub fn got() -> isize {
                let offset: isize;
                // SAFETY: reads the GOT's entry of the slot, nothing else.
                unsafe {
                    std::arch::asm!(
                        concat!("mov {offset}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                        offset = out(reg) offset,
                        options(pure, readonly, nostack),
                    );
                }
                offset
            }

            /// The slot's offset in this object's block of static TLS (a link-time constant).
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            #[inline(always)]
            pub fn within() -> isize {
                let within: isize;
                // SAFETY: computes a constant; reads and writes no memory.
                unsafe {
                    std::arch::asm!(
                        concat!("lea {within}, [{zero} + ", $sym, "@DTPOFF]"),
                        zero = in(reg) 0isize,
                        within = lateout(reg) within,
                        options(pure, nomem, nostack),
                    );
                }
                within
            }

            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            #[inline(always)]
            pub fn slot() -> *const $crate::tls::Slot<$ty> {
                let within = within();
                let block = $crate::tls::block(|| got() - within);
                $crate::tls::thread_pointer().wrapping_add_signed(block + within)
                    as *const $crate::tls::Slot<$ty>
            }

            #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
            thread_local! {
                static SLOT: $crate::tls::Slot<$ty> = const { $crate::tls::Slot::EMPTY };
            }

            #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
            #[inline(always)]
            pub fn slot() -> *const $crate::tls::Slot<$ty> {
                SLOT.with(|s| s as *const $crate::tls::Slot<$ty>)
            }

            pub(super) struct Key;

            impl $crate::tls::Key for Key {
                type Value = $ty;
                #[inline(always)]
                fn slot() -> *const $crate::tls::Slot<$ty> {
                    slot()
                }
                fn init() -> $ty {
                    $init
                }
            }
        }
        $(#[$attr])*
        $vis static $name: $crate::tls::Local<$name::Key> = $crate::tls::Local::new();
    };
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    crate::fast_thread_local! {
        static COUNTER: Cell<u32> = Cell::new(7); "sharecheck_tls_test_counter"
    }

    /// Each thread starts from the initial value and keeps its own.
    #[test]
    fn each_thread_has_its_own_value_made_from_the_initial_one() {
        COUNTER.with(|c| c.set(c.get() + 1));
        COUNTER.with(|c| c.set(c.get() + 1));
        assert_eq!(COUNTER.with(Cell::get), 9);
        let other = std::thread::spawn(|| {
            let first = COUNTER.with(Cell::get);
            COUNTER.with(|c| c.set(100));
            (first, COUNTER.with(Cell::get))
        })
        .join()
        .unwrap();
        assert_eq!(other, (7, 100));
        assert_eq!(
            COUNTER.with(Cell::get),
            9,
            "another thread's write is its own"
        );
    }

    crate::fast_thread_local! {
        static OTHER: Cell<u64> = Cell::new(5); "sharecheck_tls_test_other"
    }

    /// Every variable is where the loader placed it: the block's start (learnt once, kept on
    /// the hot line) plus its offset in the block is what its GOT entry says, on every thread.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn each_variable_is_where_its_got_entry_says_on_every_thread() {
        let check = || {
            let tp = super::thread_pointer();
            for (slot, got) in [
                (COUNTER::slot() as usize, COUNTER::got()),
                (OTHER::slot() as usize, OTHER::got()),
            ] {
                assert_eq!(slot, tp.wrapping_add_signed(got));
            }
            assert_ne!(COUNTER::slot() as usize, OTHER::slot() as usize);
            // What the hot line keeps: the GOT's offset less the one in the block (0 in this
            // test executable, where the linker writes offsets from the thread pointer).
            let block = crate::hot::HOT
                .tls_block
                .load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(block, COUNTER::got() - COUNTER::within());
            assert_eq!(block, OTHER::got() - OTHER::within());
            (COUNTER::slot() as usize, block)
        };
        let here = check();
        let there = std::thread::spawn(check).join().unwrap();
        assert_ne!(here.0, there.0, "each thread's variable is its own");
        assert_eq!(here.1, there.1, "one block offset for every thread");
        OTHER.with(|o| o.set(o.get() + 1));
        assert_eq!(OTHER.with(Cell::get), 6);
    }
}
