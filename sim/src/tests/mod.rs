//! Unit tests that call the exported functions directly, as a C program would.
//!
//! Tests run in parallel threads of one process: each sets its own configuration (thread-local)
//! and creates its own contexts (the context stack is per thread too). HIP state is per device
//! and process-wide, so HIP tests take [`HIP_LOCK`].

use crate::config::{set_test_config, Behaviour, Config};
use crate::cuda_exports::*;
use crate::types::*;
use std::ffi::c_void;
use std::ptr::null_mut;

mod attach;
mod context_memory;
mod hip;
mod ipc;
mod logical_endpoint;
mod peer;
mod procaddress;
mod stream;

pub static HIP_LOCK: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Configures this test thread and initializes the driver.
pub fn setup(config: Config) {
    set_test_config(config);
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
    assert_eq!(
        unsafe { cuCtxCreate_v4(&mut ctx, null_mut(), 0, device) },
        SUCCESS
    );
    ctx
}

pub fn alloc(size: usize) -> CUdeviceptr {
    let mut p = 0;
    assert_eq!(unsafe { cuMemAlloc_v2(&mut p, size) }, SUCCESS);
    p
}

pub fn upload(dst: CUdeviceptr, bytes: &[u8]) {
    assert_eq!(
        unsafe { cuMemcpyHtoD_v2(dst, bytes.as_ptr().cast(), bytes.len()) },
        SUCCESS
    );
}

pub fn download(src: CUdeviceptr, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    assert_eq!(
        unsafe { cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), src, n) },
        SUCCESS
    );
    out
}
