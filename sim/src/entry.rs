//! What every exported function does around its body: log the call, and turn a panic into an
//! error code instead of unwinding into C.

use crate::config::config;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The call log file, opened on first use (never in a constructor).
static CALL_LOG: OnceLock<Option<OwnedFd>> = OnceLock::new();

fn call_log() -> Option<&'static OwnedFd> {
    CALL_LOG
        .get_or_init(|| {
            let path = config().call_log.as_ref()?;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .map_err(|e| {
                    eprintln!(
                        "sharecheck-sim: {}={}: cannot open: {e}",
                        sharecheck_core::schema::env::SIM_CALL_LOG,
                        path.display()
                    );
                })
                .ok()
                .map(OwnedFd::from)
        })
        .as_ref()
}

/// Appends `symbol` and a newline to the call log (`shim SYMBOL` for a call the shim itself
/// made), in one `write` so that the lines of concurrent threads and processes never interleave
/// (O_APPEND makes each write atomic).
pub fn log_call(symbol: &str, by_shim: bool) {
    let Some(fd) = call_log() else { return };
    let mut line = [0u8; 96];
    let prefix: &[u8] = if by_shim { b"shim " } else { b"" };
    line[..prefix.len()].copy_from_slice(prefix);
    let n = prefix.len() + symbol.len().min(line.len() - 1 - prefix.len());
    line[prefix.len()..n].copy_from_slice(&symbol.as_bytes()[..n - prefix.len()]);
    line[n] = b'\n';
    // SAFETY: writes n+1 initialized bytes from a live buffer to an open descriptor.
    unsafe { libc::write(fd.as_raw_fd(), line.as_ptr().cast(), n + 1) };
}

/// Whether the shim made the call being received: its `sharecheck_asking_driver` says so (no shim
/// in the process: never). Looked up without a lock (a `OnceLock` would hold its waiters while
/// `dlsym` waits for the loader's lock, which a constructor calling into this library may hold):
/// two threads may both look it up, and find the same address.
fn made_by_shim() -> bool {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    type Asking = extern "C" fn() -> std::ffi::c_int;
    /// 0: not looked up yet; 1: no shim; else the function's address.
    static ASKING: AtomicUsize = AtomicUsize::new(0);
    let mut found = ASKING.load(Relaxed);
    if found == 0 {
        // SAFETY: a lookup by a NUL-terminated name in the process's global scope.
        let address =
            unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"sharecheck_asking_driver".as_ptr()) };
        found = if address.is_null() {
            1
        } else {
            address as usize
        };
        ASKING.store(found, Relaxed);
    }
    if found == 1 {
        return false;
    }
    // SAFETY: the shim's export of that name is `extern "C" fn() -> c_int` (src/capi.rs).
    let asking = unsafe { std::mem::transmute::<usize, Asking>(found) };
    asking() != 0
}

/// Spins for `ns` nanoseconds (the cost charged to a call the shim made).
fn spend(ns: u64) {
    let start = std::time::Instant::now();
    let until = std::time::Duration::from_nanos(ns);
    while start.elapsed() < until {
        std::hint::spin_loop();
    }
}

thread_local! {
    /// The memory this thread's calls write (`SHARECHECK_SIM_EVICT_KB`).
    static EVICTED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Writes `kb` kilobytes of this thread's own buffer, a line each 64 bytes
/// (`SHARECHECK_SIM_EVICT_KB`); returns how many lines it wrote (none while a call on this
/// thread, interrupted by a signal handler, is writing them).
fn evict(kb: usize) -> usize {
    EVICTED
        .try_with(|buffer| {
            let Ok(mut buffer) = buffer.try_borrow_mut() else {
                return 0;
            };
            buffer.resize(kb * 1024, 0);
            let mut lines = 0;
            for line in buffer.chunks_mut(64) {
                // SAFETY: a live byte of the buffer.
                unsafe { std::ptr::write_volatile(line.as_mut_ptr(), line[0].wrapping_add(1)) };
                lines += 1;
            }
            lines
        })
        .unwrap_or(0)
}

/// Bytes of straight-line code [`run_through_code`] runs through.
const CODE_SWEEP_BYTES: usize = 64 * 1024;

/// Runs through [`CODE_SWEEP_BYTES`] of code, one-byte `nop`s (`SHARECHECK_SIM_EVICT_CODE`):
/// every line of a 32 KiB instruction cache is replaced. Returns the bytes run through, as the
/// assembler counts them.
#[inline(never)]
fn run_through_code() -> usize {
    let bytes: usize;
    // SAFETY: straight-line `nop`s and two address computations into a register it declares;
    // no memory, stack or flags touched.
    unsafe {
        std::arch::asm!(
            "lea {start}, [rip + 2f]",
            "2:",
            ".rept {n}",
            "nop",
            ".endr",
            "3:",
            "lea {bytes}, [rip + 3b]",
            "sub {bytes}, {start}",
            start = out(reg) _,
            bytes = out(reg) bytes,
            n = const CODE_SWEEP_BYTES,
            options(nomem, nostack, preserves_flags),
        );
    }
    bytes
}

/// Runs the body of the exported function `symbol`; a panic becomes `on_panic`. A call the shim
/// made is logged as such and charged `SHARECHECK_SIM_SHIM_CALL_NS`; every call first writes
/// `SHARECHECK_SIM_EVICT_KB` and runs through `SHARECHECK_SIM_EVICT_CODE`'s code.
pub fn guarded<R>(symbol: &'static str, on_panic: R, body: impl FnOnce() -> R) -> R {
    let config = config();
    if config.call_log.is_some() || config.shim_call_ns > 0 {
        let by_shim = made_by_shim();
        log_call(symbol, by_shim);
        if by_shim && config.shim_call_ns > 0 {
            spend(config.shim_call_ns);
        }
    }
    catch_unwind(AssertUnwindSafe(|| {
        if config.evict_kb > 0 {
            evict(config.evict_kb);
        }
        if config.evict_code {
            run_through_code();
        }
        body()
    }))
    .unwrap_or(on_panic)
}

/// Defines exported functions returning a `CUresult`/`hipError_t` whose bodies evaluate to an
/// [`Outcome`](crate::types::Outcome): `Ok(())` is success, `Err(code)` the error.
///
/// `table NAME for "cuda";` (or `"hip"`) names the API: the library built without it (`sim_hides`,
/// set by `build.rs`) defines the functions but does not export them.
///
/// The `@returning $finish;` form passes every returned code (a panic's included) through
/// `$finish: fn(Code) -> Code` on its way out; [`hip_exports!`] uses it for HIP's last error.
macro_rules! exports {
    (@returning $finish:path; table $table:ident for $api:literal; $(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {
        /// The exports of this block: each one's name and its parameters' Rust types (checked
        /// against the vendor's headers by `tests::prototypes`).
        #[cfg(test)]
        pub const $table: &[(&str, &[&str])] =
            &[$((stringify!($name), &[$(stringify!($ty)),*])),*];
        $(
        $(#[$meta])*
        #[cfg_attr(not(sim_hides = $api), no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::types::Code {
            $finish($crate::entry::guarded(stringify!($name), $crate::types::UNKNOWN, || {
                // A closure, so that `?` and `return` in the body end the body only.
                let body = || -> $crate::types::Outcome { $body };
                match body() {
                    Ok(()) => $crate::types::SUCCESS,
                    Err(code) => code,
                }
            }))
        }
    )*
    };
    ($($items:tt)*) => {
        $crate::entry::exports! { @returning $crate::entry::as_returned; $($items)* }
    };
}
pub(crate) use exports;

/// The code an export returns, unchanged (CUDA has no last error).
pub fn as_returned(code: crate::types::Code) -> crate::types::Code {
    code
}

/// A required pointer argument: NULL is INVALID_VALUE, as the drivers answer.
pub fn require<T>(p: *const T) -> crate::types::Outcome {
    if p.is_null() {
        Err(crate::types::INVALID_VALUE)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod evict_tests {
    /// The code a call runs through is 64 KiB, twice a 32 KiB instruction cache.
    #[test]
    fn the_code_run_through_is_64_kib() {
        assert_eq!(super::run_through_code(), super::CODE_SWEEP_BYTES);
        assert_eq!(super::CODE_SWEEP_BYTES, 2 * 32 * 1024);
    }

    /// Each call writes every line of the thread's buffer once, and a thread's buffer is its own.
    #[test]
    fn each_call_writes_every_line_of_its_threads_buffer() {
        assert_eq!(super::evict(4), 64);
        assert_eq!(super::evict(4), 64);
        super::EVICTED.with(|b| {
            let b = b.borrow();
            assert_eq!(b.len(), 4096);
            assert!(b
                .chunks(64)
                .all(|line| line[0] == 2 && line[1..].iter().all(|&x| x == 0)));
        });
        let other = std::thread::spawn(|| {
            super::evict(1);
            super::EVICTED.with(|b| b.borrow()[0])
        })
        .join()
        .unwrap();
        assert_eq!(other, 1);
    }
}
