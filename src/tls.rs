//! Thread-local variables read with one `%fs`-relative load.
//!
//! A `thread_local!` in a shared object is reached through `__tls_get_addr` (the general-dynamic
//! model): a call into the loader that reads its thread's vector of modules, several cache lines
//! of the loader's on every access. On R580 every line a covered call touches costs (the driver's
//! work evicts them; issue 24), and the call path reads the thread's guard and a check's memo.
//! [`fast_thread_local!`] places a variable in the static TLS block instead (the initial-exec
//! model, as jemalloc's and tcmalloc's are): the thread pointer plus an offset the loader wrote
//! in the GOT. The shim is loaded at start (`LD_PRELOAD`, or linked), where static TLS is laid
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

/// `fast_thread_local! { static NAME: Type = init; "symbol" }`: a thread-local read with one
/// `%fs`-relative load ([the module](self)). The symbol names its storage in the object (hidden:
/// it is never exported); it must be unique in the crate (the link fails otherwise).
///
/// `...; "symbol"; offset in CACHE` keeps the variable's offset from the thread pointer (the same
/// on every thread) in `CACHE`, an `AtomicIsize` on a line the caller reads anyway, instead of
/// reading the GOT's line on every access (issue 24: the guard's state, `crate::hot`).
#[macro_export]
macro_rules! fast_thread_local {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr; $sym:literal) => {
        $crate::fast_thread_local! {
            @define $(#[$attr])* $vis static $name: $ty = $init; $sym;
            |got: fn() -> isize| got()
        }
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr; $sym:literal;
     offset in $cache:expr) => {
        $crate::fast_thread_local! {
            @define $(#[$attr])* $vis static $name: $ty = $init; $sym;
            |got: fn() -> isize| {
                let cache: &std::sync::atomic::AtomicIsize = &$cache;
                match cache.load(std::sync::atomic::Ordering::Relaxed) {
                    // Static TLS lies below the thread pointer (x86-64's variant II): no
                    // variable's offset is 0.
                    0 => {
                        let offset = got();
                        cache.store(offset, std::sync::atomic::Ordering::Relaxed);
                        offset
                    }
                    offset => offset,
                }
            }
        }
    };
    (@define $(#[$attr:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr; $sym:literal;
     $offset:expr) => {
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

            /// The slot's offset from the thread pointer, as the GOT holds it.
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            #[inline(always)]
            fn got() -> isize {
                let offset: isize;
                // SAFETY: reads the GOT's offset of the slot in the static TLS block (written by
                // the loader when it placed this object), nothing else.
                unsafe {
                    std::arch::asm!(
                        concat!("mov {offset}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                        offset = out(reg) offset,
                        options(pure, readonly, nostack),
                    );
                }
                offset
            }
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            #[inline(always)]
            pub fn slot() -> *const $crate::tls::Slot<$ty> {
                let offset: isize = ($offset)(got);
                $crate::tls::thread_pointer().wrapping_add_signed(offset)
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

    static CACHED_OFFSET: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

    crate::fast_thread_local! {
        static CACHED: Cell<u32> = Cell::new(3); "sharecheck_tls_test_cached";
        offset in CACHED_OFFSET
    }

    /// A variable whose offset is cached: the offset is learnt on the first use, is the same on
    /// every thread, and each thread's value is its own, at the thread pointer plus that offset.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn a_cached_offset_reaches_each_threads_own_value() {
        use std::sync::atomic::Ordering::Relaxed;
        CACHED.with(|c| c.set(c.get() + 1));
        let offset = CACHED_OFFSET.load(Relaxed);
        assert!(
            offset < 0,
            "static TLS lies below the thread pointer: {offset}"
        );
        let at = |v: &Cell<u32>| v as *const Cell<u32> as usize;
        let slot = super::thread_pointer().wrapping_add_signed(offset);
        let value_at = CACHED.with(at);
        assert!(
            value_at > slot && value_at < slot + 64,
            "the value {value_at:#x} lies in the slot at {slot:#x}"
        );
        let other = std::thread::spawn(move || {
            let first = CACHED.with(Cell::get);
            CACHED.with(|c| c.set(50));
            (first, CACHED.with(Cell::get), CACHED.with(at))
        })
        .join()
        .unwrap();
        assert_eq!((other.0, other.1), (3, 50));
        assert_ne!(other.2, value_at, "another thread's value lies elsewhere");
        assert_eq!(
            CACHED_OFFSET.load(Relaxed),
            offset,
            "one offset for every thread"
        );
        assert_eq!(CACHED.with(Cell::get), 4);
    }
}
