//! sharecheck-sim: a simulated CUDA driver and HIP runtime.
//!
//! Built twice (`build.rs`): as `libsharecheck_sim.so` (soname `libcuda.so.1`, the CUDA functions
//! exported) and by `hip/` as `libsharecheck_sim_hip.so` (soname `libamdhip64.so.5`, the HIP
//! functions). Installed as `libcuda.so.1`/`libcuda.so` and `libamdhip64.so[.5|.6|.7]`, it lets sharecheck's shim, tests and demos run without a GPU. It keeps
//! real state (contexts, memory that really holds bytes, streams, events, peer grants, IPC exports
//! across processes, logical endpoints) and answers with the codes of the R580 driver or of the
//! documentation (`SHARECHECK_SIM_BEHAVIOUR`). See README.md beside this crate.
//!
//! Layout: [`config`] reads the environment; the model lives in [`state`] (one lock) with one
//! module per area ([`context`], [`memory`], [`stream_event`], [`peer`], [`ipc`],
//! [`logical_endpoint`]); [`procaddress`] holds the get-proc-address table; [`cuda_exports`] and
//! [`hip_exports`] are the C entry points.

// Every unsafe operation sits in its own `unsafe {}` block, even inside an `unsafe fn`, and
// each block says in a `// SAFETY:` comment why it is sound.

pub mod config;
pub mod context;
pub mod cuda_exports;
pub mod device;
pub mod entry;
pub mod errors;
pub mod handles;
pub mod hip_exports;
pub mod ipc;
pub mod logical_endpoint;
pub mod memory;
pub mod multicast;
pub mod peer;
pub mod pool;
pub mod procaddress;
pub mod state;
pub mod state_dir;
pub mod stream_event;
pub mod types;

#[cfg(test)]
mod tests;
