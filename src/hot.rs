//! The line every wrapped call reads first, and reads again after the driver's call (issue 24: on
//! R580 the driver's work evicts the shim's lines, and each line and each page a call touches
//! costs then, about 2 and 2.4 ns, `scripts/gpu/line_cost.c`).
//!
//! What would otherwise be a line (and a page) each is here: whether calls take the untraced
//! path (set by `process` at load), where the thread's guard state lies in the static TLS block
//! (`guard`'s, otherwise read from the GOT), and the process's tracked state and options
//! (`engine`'s). Each field is written by the layer that owns its meaning, which reads it through
//! its own functions; this layer is below them all, so the tracked state's type is erased here.

use sharecheck_core::options::Options;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicPtr};

#[repr(C, align(64))]
pub struct Hot {
    /// Whether calls take the untraced path (`process::untraced`).
    pub untraced: AtomicBool,
    /// The guard's thread state's offset from the thread pointer (0 until its first use).
    pub thread_offset: AtomicIsize,
    /// `engine::state::States`, made on first use (`engine::states`).
    pub states: AtomicPtr<()>,
    /// The process's options, once read (`engine::options`).
    pub options: AtomicPtr<Options>,
}

pub static HOT: Hot = Hot {
    untraced: AtomicBool::new(false),
    thread_offset: AtomicIsize::new(0),
    states: AtomicPtr::new(std::ptr::null_mut()),
    options: AtomicPtr::new(std::ptr::null_mut()),
};
