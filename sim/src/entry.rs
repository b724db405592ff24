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

/// Appends `symbol` and a newline to the call log, in one `write` so that the lines of
/// concurrent threads and processes never interleave (O_APPEND makes each write atomic).
pub fn log_call(symbol: &str) {
    let Some(fd) = call_log() else { return };
    let mut line = [0u8; 96];
    let n = symbol.len().min(line.len() - 1);
    line[..n].copy_from_slice(&symbol.as_bytes()[..n]);
    line[n] = b'\n';
    // SAFETY: writes n+1 initialized bytes from a live buffer to an open descriptor.
    unsafe { libc::write(fd.as_raw_fd(), line.as_ptr().cast(), n + 1) };
}

/// Runs the body of the exported function `symbol`; a panic becomes `on_panic`.
pub fn guarded<R>(symbol: &'static str, on_panic: R, body: impl FnOnce() -> R) -> R {
    log_call(symbol);
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

/// Defines exported functions returning a `CUresult`/`hipError_t` whose bodies evaluate to an
/// [`Outcome`](crate::types::Outcome): `Ok(())` is success, `Err(code)` the error.
///
/// The `@returning $finish;` form passes every returned code (a panic's included) through
/// `$finish: fn(Code) -> Code` on its way out; [`hip_exports!`] uses it for HIP's last error.
macro_rules! exports {
    (@returning $finish:path; table $table:ident; $(
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
        #[no_mangle]
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
