//! Constants of the trace file format (documented in README.md, "Trace records").

/// Schema version written in every record's `"v"`.
pub const VERSION: u64 = 1;

/// Environment variables shared by the shim, the simulated driver and the CLI.
pub mod env {
    /// Trace file pattern (`%p`, `%h`, `%q{VAR}`, `%%`).
    pub const TRACE: &str = "SHARECHECK_TRACE";
    /// Log filter for the human-readable log (RUST_LOG syntax).
    pub const LOG: &str = "SHARECHECK_LOG";
    /// `key=value:key=value` options.
    pub const OPTIONS: &str = "SHARECHECK_OPTIONS";
    /// Path of the CUDA driver library to forward to.
    pub const CUDA_LIBRARY: &str = "SHARECHECK_CUDA_LIBRARY";
    /// Path of the HIP runtime library to forward to.
    pub const HIP_LIBRARY: &str = "SHARECHECK_HIP_LIBRARY";
    /// Hex key of the handle fingerprints, shared by every process of one job.
    pub const JOB_KEY: &str = "SHARECHECK_JOB_KEY";
    /// Simulated driver: number of devices.
    pub const SIM_DEVICES: &str = "SHARECHECK_SIM_DEVICES";
    /// Simulated driver: peer matrix (`all`, `none`, or `0>1,1>0,...`).
    pub const SIM_PEERS: &str = "SHARECHECK_SIM_PEERS";
    /// Simulated driver: `r580` (answer as the real R580 driver does) or `documented`.
    pub const SIM_BEHAVIOUR: &str = "SHARECHECK_SIM_BEHAVIOUR";
    /// Simulated driver: per-device attribute overrides (`dev:attr=value,...`).
    pub const SIM_ATTRS: &str = "SHARECHECK_SIM_ATTRS";
    /// Simulated driver: the version `cuDriverGetVersion` reports.
    pub const SIM_DRIVER_VERSION: &str = "SHARECHECK_SIM_DRIVER_VERSION";
    /// Simulated driver: per-run state directory that makes IPC exports visible across processes.
    pub const SIM_STATE_DIR: &str = "SHARECHECK_SIM_STATE_DIR";
    /// Simulated driver: file the driver appends one line per call to (for call counting in tests).
    pub const SIM_CALL_LOG: &str = "SHARECHECK_SIM_CALL_LOG";
}
