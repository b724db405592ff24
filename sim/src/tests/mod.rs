//! Unit tests that call the exported functions directly, as a C program would.
//!
//! A test is a C program's sequence of calls, so its body is one `unsafe` block; its `SAFETY`
//! comment says what the host pointers it passes point to. Handles (contexts, streams, events)
//! are plain values the simulator never dereferences, and it copies to or from a device address
//! only inside its own mappings, so garbage ones of both are safe to pass.
//!
//! Tests run in parallel threads of one process: each sets its own configuration (thread-local)
//! and creates its own contexts (the context stack is per thread too). HIP state is per device
//! and process-wide, so HIP tests take [`HIP_LOCK`].

use crate::config::{set_test_config, Behaviour, Config};
use crate::cuda_exports::*;
use crate::types::*;
use std::ffi::c_void;
use std::ptr::null_mut;

mod alloc;
mod attach;
mod context_memory;
mod hip;
mod ipc;
mod logical_endpoint;
mod peer;
mod procaddress;
mod prototypes;
mod stream;

pub static HIP_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Configures this test thread and initializes the driver.
pub fn setup(config: Config) {
    set_test_config(config);
    // SAFETY: cuInit takes no pointer.
    assert_eq!(unsafe { cuInit(0) }, SUCCESS);
}

/// The default configuration (its state directory is the per-session default one).
pub fn r580() -> Config {
    Config::default()
}

pub fn documented() -> Config {
    Config {
        behaviour: Behaviour::Documented,
        ..r580()
    }
}

/// A new context on `device`, current on this thread.
pub fn context(device: i32) -> CUcontext {
    let mut ctx = null_mut();
    // SAFETY: `ctx` is a live local `CUcontext`; NULL create params are allowed.
    let rc = unsafe { cuCtxCreate_v4(&mut ctx, null_mut(), 0, device) };
    assert_eq!(rc, SUCCESS);
    ctx
}

pub fn alloc(size: usize) -> CUdeviceptr {
    let mut p = 0;
    // SAFETY: `p` is a live local `CUdeviceptr`.
    assert_eq!(unsafe { cuMemAlloc_v2(&mut p, size) }, SUCCESS);
    p
}

pub fn upload(dst: CUdeviceptr, bytes: &[u8]) {
    // SAFETY: `bytes` is readable for `bytes.len()` bytes.
    let rc = unsafe { cuMemcpyHtoD_v2(dst, bytes.as_ptr().cast(), bytes.len()) };
    assert_eq!(rc, SUCCESS);
}

pub fn download(src: CUdeviceptr, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    // SAFETY: `out` is writable for `n` bytes.
    let rc = unsafe { cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), src, n) };
    assert_eq!(rc, SUCCESS);
    out
}
