//! The `dlsym` override.
//!
//! Programs and runtimes that `dlopen` the driver reach it through `dlsym`, which never sees
//! `LD_PRELOAD` exports. For a covered name whose real lookup lands in a CUDA or HIP driver
//! library, the override returns the shim's wrapper; for every other name it jumps straight into
//! glibc's `dlsym` with the caller's own arguments and return address, so the answer (including
//! the meaning of `RTLD_NEXT`, which glibc takes from the return address) is exactly glibc's.

use crate::guard::Guard;
use crate::loader::{self, loaded_objects, object_of, real_dlsym, real_dlsym_address};
use crate::resolvers;
use libc::{c_char, c_void};
use sharecheck_core::functions::{lookup_symbol, Api};
use std::ffi::CStr;

/// What a covered name stands for.
enum Covered {
    Function(sharecheck_core::FnId),
    Resolver(Api),
}

fn covered(name: &[u8]) -> Option<Covered> {
    // Cheap rejection first: every covered name starts with "cu" or "hip".
    if !(name.starts_with(b"cu") || name.starts_with(b"hip")) {
        return None;
    }
    lookup_symbol(name)
        .map(Covered::Function)
        .or_else(|| resolvers::resolver_api(name).map(Covered::Resolver))
}

/// Decides a `dlsym` call. Returns 0 to pass it through (`*slot` = glibc's `dlsym`), or 1 with the
/// answer in `*slot`.
extern "C" fn route(
    handle: *mut c_void,
    name: *const c_char,
    caller: usize,
    slot: *mut usize,
) -> u32 {
    let real = real_dlsym_address();
    // SAFETY: `slot` points to a writable `usize` in the caller's own stack frame: the only
    // callers are the `dlsym` trampoline (its answer slot, `rsp` at the call) and the portable
    // fallback (a local).
    unsafe { *slot = real };
    if real == 0 {
        // Without glibc's dlsym there is nothing to jump to: answer "not found".
        return 1;
    }
    if name.is_null() || Guard::is_inside() {
        return 0;
    }
    // SAFETY: `name` is not NULL, and dlsym's contract makes it a NUL-terminated string (glibc's
    // dlsym reads it too); it is only read, and only during this call.
    let name = unsafe { CStr::from_ptr(name) };
    let Some(target) = covered(name.to_bytes()) else {
        return 0;
    };
    let Some(_guard) = Guard::enter_outside() else {
        return 0;
    };
    let found = crate::guard::shielded(0, || {
        let found = if handle == libc::RTLD_NEXT {
            next_definition_after(caller, name)
        } else if handle == libc::RTLD_DEFAULT {
            default_definition(name)
        } else {
            real_dlsym(handle, name)
        };
        substitute(&target, found as usize)
    });
    // SAFETY: as above.
    unsafe { *slot = found };
    1
}

/// `dlsym(RTLD_DEFAULT, name)` as it would answer without the shim: the shim's own export is
/// first in the global scope (preloaded), so when glibc finds it, the definition that counts is
/// the next one in that scope (`RTLD_NEXT` asked from the shim's code): the driver's where the
/// program made it global, nothing where the driver was opened `RTLD_LOCAL` or lacks the function
/// (the 13.3 logical endpoints on a 13.0 driver). A program probing for a function this way
/// falls back exactly as it would without the shim.
fn default_definition(name: &CStr) -> *mut c_void {
    let found = real_dlsym(libc::RTLD_DEFAULT, name);
    let own = |address: usize| {
        let here = object_of(default_definition as *const () as usize).map(|o| o.load_bias);
        here.is_some() && object_of(address).map(|o| o.load_bias) == here
    };
    if !found.is_null() && own(found as usize) {
        real_dlsym(libc::RTLD_NEXT, name)
    } else {
        found
    }
}

/// The wrapper for `found` when it is a driver's definition of a covered name; else `found`.
fn substitute(target: &Covered, found: usize) -> usize {
    if found == 0 {
        return found;
    }
    if let Covered::Function(id) = *target {
        if !sharecheck_core::table::is_wrapped(id) {
            // Nobody observes it: the driver's own, even where the shim's export was found.
            return if found == crate::exports::wrapper_address(id) {
                loader::real_function(id).unwrap_or(found)
            } else {
                found
            };
        }
    }
    if !loader::is_driver_address(found) {
        return found;
    }
    // The program looks functions up in a driver library: keep that library loaded for good,
    // since the shim keeps its functions' addresses. Safe here: the program's own dlsym takes the
    // loader lock too.
    loader::pin_object_of(found);
    match *target {
        Covered::Function(id) => {
            loader::adopt_real_function(id, found);
            if loader::real_function(id) == Some(found) {
                crate::exports::wrapper_address(id)
            } else {
                // A second copy of the driver, not the one the shim forwards to: leave it alone.
                found
            }
        }
        Covered::Resolver(api) => resolvers::substitute(api, found).unwrap_or(found),
    }
}

/// `dlsym(RTLD_NEXT, name)` as seen from `caller`: the first object after the caller's, in load
/// order, that itself defines `name`. (Used for covered names only; all others reach glibc.)
fn next_definition_after(caller: usize, name: &CStr) -> *mut c_void {
    let Some(caller_object) = object_of(caller) else {
        return std::ptr::null_mut();
    };
    let objects = loaded_objects();
    let Some(position) = objects
        .iter()
        .position(|(_, bias)| *bias == caller_object.load_bias)
    else {
        return std::ptr::null_mut();
    };
    for (path, bias) in &objects[position + 1..] {
        let Ok(c_path) = std::ffi::CString::new(path.as_str()) else {
            continue;
        };
        if path.is_empty() {
            continue;
        }
        // SAFETY: NOLOAD only takes a reference to an object that is already loaded.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            continue;
        }
        let found = real_dlsym(handle, name);
        // SAFETY: drops the reference the `dlopen` above took (the object stays loaded: NOLOAD
        // found it already loaded); `handle` is not used again.
        unsafe { libc::dlclose(handle) };
        if !found.is_null() && object_of(found as usize).is_some_and(|o| o.load_bias == *bias) {
            return found;
        }
    }
    std::ptr::null_mut()
}

/// The exported `dlsym`: a trampoline that asks [`route`], then either returns its answer or
/// tail-jumps into glibc's `dlsym` with the original arguments and return address intact.
///
/// # Safety
/// dlsym's contract: `handle` is a handle `dlopen` gave, or a pseudo-handle; `name` is NULL or
/// a NUL-terminated string.
#[cfg(target_arch = "x86_64")]
// SAFETY: the body follows the System V x86-64 ABI by hand: the stack is 16-byte aligned at the
// call to `route` (entry 8 mod 16, plus 16 pushed and 24 reserved), `route`'s arguments are in
// rdi, rsi, rdx, rcx, the caller's arguments are restored before the tail jump, the stack is
// left exactly as at entry on both exits, and only caller-saved registers are clobbered.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        // Entry: rsp = 8 mod 16. Save the arguments and make room for the answer slot.
        "push rdi",
        "push rsi",
        "sub rsp, 24",
        // route(handle, name, caller = our return address, slot = rsp); rsp is 16-aligned here.
        "mov rdx, [rsp + 40]",
        "mov rcx, rsp",
        "call {route}",
        "mov rdx, [rsp]",
        "add rsp, 24",
        "pop rsi",
        "pop rdi",
        "test eax, eax",
        "jnz 2f",
        // Pass through: glibc sees the caller's return address, as if called directly.
        "jmp rdx",
        "2:",
        "mov rax, rdx",
        "ret",
        route = sym route,
    )
}

/// Portable fallback: correct for every handle but `RTLD_NEXT`, which becomes relative to the shim.
///
/// # Safety
/// As for the x86-64 `dlsym`.
#[cfg(not(target_arch = "x86_64"))]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    let mut slot = 0usize;
    let caller = dlsym as *const () as usize;
    if route(handle, name, caller, &mut slot) != 0 {
        return slot as *mut c_void;
    }
    // SAFETY: `route` returned 0, so `slot` holds glibc's own `dlsym` (non-zero: found by
    // versioned lookup), whose prototype is spelled here.
    let real: unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void =
        unsafe { std::mem::transmute(slot) };
    // SAFETY: the caller's own arguments, unchanged: its obligations are dlsym's contract.
    unsafe { real(handle, name) }
}
