//! sharecheck: the interposing shim.
//!
//! Loaded into CUDA and HIP programs (by `LD_PRELOAD` or by linking), it exports the driver
//! symbols listed in `sharecheck_core::interposed_functions!`, forwards every call unchanged to
//! the real driver, writes a trace record for it and validates it.
//!
//! Layout:
//! - [`exports`]: the exported wrappers, generated from the declaration list;
//! - [`dispatch`]: the path every wrapped call takes (guard, forward, record);
//! - [`loader`]: finding the real driver and its functions (lazily, without locks);
//! - [`dlsym_hook`]: the `dlsym` override; [`resolvers`]: `cuGetProcAddress`/`hipGetProcAddress`;
//! - [`engine`]: the contract validation engine (checks composed per the table, driver facts
//!   behind an interface, family state); [`families`]: the rule families' checks;
//! - [`trace`]: the trace file; [`findings`]: what validation reports; [`log`]: stderr output;
//! - [`capi`]: the library's own C API (`include/sharecheck.h`).

// Every unsafe operation sits in its own `unsafe {}` block, even inside an `unsafe fn`, and
// each block says in a `// SAFETY:` comment why it is sound.

/// Every allocation of the shim's own: lock-free, async-signal-safe (`heap`).
#[global_allocator]
static HEAP: heap::ShimHeap = heap::ShimHeap;

pub mod capi;
mod clock;
mod config;
mod deferred;
mod dispatch;
mod dlsym_hook;
mod elf;
mod engine;
mod exports;
mod families;
mod findings;
mod fingerprint;
mod guard;
mod heap;
mod hot;
mod loader;
mod log;
mod phases;
mod process;
mod resolvers;
mod stack;
pub mod tls;
mod trace;
mod writer;
