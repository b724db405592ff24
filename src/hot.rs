//! The line every wrapped call reads first, and reads again after the driver's call (issue 24: on
//! R580 the driver's work evicts the shim's lines, and each line and each page a call touches
//! costs then, about 2 and 2.4 ns, `scripts/gpu/line_cost.c`).
//!
//! What would otherwise be a line (and a page) each is here: whether calls take the untraced
//! path and whether this copy stands aside (set by `process` at load), where the shim's static
//! TLS block lies (`tls`'s, otherwise read from the GOT for each thread-local), and the process's
//! tracked state and options (`engine`'s). Each field is written by the layer that owns its meaning, which reads it through
//! its own functions; this layer is below them all, so the tracked state's type is erased here.

use sharecheck_core::options::Options;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicPtr};

#[repr(C, align(64))]
pub struct Hot {
    /// Whether calls take the untraced path (`process::untraced`).
    pub untraced: AtomicBool,
    /// Whether this copy stands aside (`process::passive`).
    pub passive: AtomicBool,
    /// The offset from the thread pointer of this object's block of static TLS (0 until a
    /// thread-local's first use): `crate::tls::block`.
    pub tls_block: AtomicIsize,
    /// `engine::state::States`, made on first use (`engine::states`).
    pub states: AtomicPtr<()>,
    /// The process's options, once read (`engine::options`).
    pub options: AtomicPtr<Options>,
}

pub static HOT: Hot = Hot {
    untraced: AtomicBool::new(false),
    passive: AtomicBool::new(false),
    tls_block: AtomicIsize::new(0),
    states: AtomicPtr::new(std::ptr::null_mut()),
    options: AtomicPtr::new(std::ptr::null_mut()),
};
