//! Constants of the trace file format (documented in README.md, "Trace records"), and the names
//! the shim, the simulated driver, the CLI and the tests share: environment variables, library
//! file names, where traces go by default.

/// Schema version, written in the `"v"` of each file's first record (the process record); the
/// records after it are of the same version.
pub const VERSION: u64 = 2;

/// The directory `sharecheck run` traces into by default (relative to the current directory),
/// and `sharecheck report` reads by default.
pub const DEFAULT_TRACE_DIR: &str = "sharecheck-trace";
/// The file-name pattern of each process's trace in [`DEFAULT_TRACE_DIR`].
pub const DEFAULT_TRACE_FILE: &str = "%p.jsonl";
/// How a trace file's name ends (before a `.PID` the shim adds when the name is taken).
pub const TRACE_SUFFIX: &str = ".jsonl";

/// Environment variables shared by the shim, the simulated driver, the CLI and the tests.
pub mod env {
    /// What every variable of sharecheck starts with.
    pub const PREFIX: &str = "SHARECHECK_";

    /// Trace file pattern (`%p`, `%h`, `%q{VAR}`, `%%`; see [`crate::pattern`]).
    pub const TRACE: &str = "SHARECHECK_TRACE";
    /// Log filter for the human-readable log (RUST_LOG syntax).
    pub const LOG: &str = "SHARECHECK_LOG";
    /// `key=value:key=value` options ([`crate::options`]).
    pub const OPTIONS: &str = "SHARECHECK_OPTIONS";
    /// The `SHARECHECK_OPTIONS` text whose problems `sharecheck run` already printed: a shim
    /// that reads the same text does not print them again (in each process).
    pub const OPTIONS_REPORTED: &str = "SHARECHECK_OPTIONS_REPORTED";
    /// Path of the CUDA driver library to forward to.
    pub const CUDA_LIBRARY: &str = "SHARECHECK_CUDA_LIBRARY";
    /// Path of the HIP runtime library to forward to.
    pub const HIP_LIBRARY: &str = "SHARECHECK_HIP_LIBRARY";
    /// Hex key of the handle fingerprints, shared by every process of one job.
    pub const JOB_KEY: &str = "SHARECHECK_JOB_KEY";
    /// `sharecheck run`: path of the shim to preload.
    pub const SHIM: &str = "SHARECHECK_SHIM";
    /// `sharecheck run --sim`: path of the simulated driver.
    pub const SIM_LIBRARY: &str = "SHARECHECK_SIM_LIBRARY";
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
    /// Simulated driver: peer grants one context may hold (`N` or `unlimited`).
    pub const SIM_MAX_PEERS: &str = "SHARECHECK_SIM_MAX_PEERS";
    /// Simulated driver: per-run state directory that makes IPC exports visible across processes.
    pub const SIM_STATE_DIR: &str = "SHARECHECK_SIM_STATE_DIR";
    /// Simulated driver: file the driver appends one line per call to (for call counting in tests).
    pub const SIM_CALL_LOG: &str = "SHARECHECK_SIM_CALL_LOG";
    /// `sharecheck report`: traces of more bytes than this get a progress bar on a terminal
    /// (default 256 MiB).
    pub const PROGRESS_MIN_BYTES: &str = "SHARECHECK_PROGRESS_MIN_BYTES";
    /// `sharecheck report`: set, how long each phase of the report took, on stderr.
    pub const REPORT_PHASES: &str = "SHARECHECK_REPORT_PHASES";
    /// The IMEX domain the process record names, where the IMEX service's node list
    /// (`/etc/nvidia-imex`) is not visible (a container, a Kubernetes ComputeDomain).
    pub const IMEX_DOMAIN: &str = "SHARECHECK_IMEX_DOMAIN";

    /// Every variable above that changes what a run does: a test clears them all so that none
    /// leaks in from the environment it runs in.
    pub const ALL: &[&str] = &[
        TRACE,
        LOG,
        OPTIONS,
        OPTIONS_REPORTED,
        CUDA_LIBRARY,
        HIP_LIBRARY,
        JOB_KEY,
        SHIM,
        SIM_LIBRARY,
        SIM_DEVICES,
        SIM_PEERS,
        SIM_BEHAVIOUR,
        SIM_ATTRS,
        SIM_DRIVER_VERSION,
        SIM_MAX_PEERS,
        SIM_STATE_DIR,
        SIM_CALL_LOG,
        PROGRESS_MIN_BYTES,
        REPORT_PHASES,
        IMEX_DOMAIN,
    ];

    /// Variables of the build and test tools only (never read by the shim, driver or CLI).
    pub mod dev {
        /// `1`: rewrite RULES.md from `sharecheck rules` instead of comparing.
        pub const UPDATE_RULES: &str = "SHARECHECK_UPDATE_RULES";
        /// `1`: rewrite README.md's generated sections instead of comparing.
        pub const UPDATE_README: &str = "SHARECHECK_UPDATE_README";
        /// Set: rewrite include/sharecheck.h instead of comparing.
        pub const UPDATE_HEADER: &str = "SHARECHECK_UPDATE_HEADER";
        /// The CUDA include directory of the ABI check.
        pub const CUDA_INCLUDE: &str = "SHARECHECK_CUDA_INCLUDE";
        /// The HIP include directory of the ABI check.
        pub const HIP_INCLUDE: &str = "SHARECHECK_HIP_INCLUDE";
        /// The C compiler of the ABI check.
        pub const CC: &str = "SHARECHECK_CC";
        /// The C++ compiler of the ABI check.
        pub const CXX: &str = "SHARECHECK_CXX";
    }
}

/// File names of the libraries: the drivers the shim forwards to (and the simulated driver
/// stands in for), the shim and the simulated driver themselves.
pub mod libraries {
    use std::ffi::CStr;

    /// A driver library: the names programs load it by.
    #[derive(Clone, Copy, Debug)]
    pub struct Driver {
        /// What every file name of the library starts with (`libcuda.so.1` and `libcuda.so.580`
        /// are both `libcuda.so*`); also the unversioned name linkers look for.
        pub prefix: &'static str,
        /// The sonames the shim tries, in order; the first is the one programs link against.
        pub sonames: &'static [&'static CStr],
        /// The simulated driver's library that stands in for it (its soname is the vendor's).
        pub sim: &'static str,
    }

    impl Driver {
        /// The soname programs link against: `libcuda.so.1`, `libamdhip64.so`.
        pub fn soname(&self) -> &'static str {
            self.names().next().expect("at least one soname")
        }

        /// The unversioned name, which `cc -l...` links against: `libcuda.so`.
        pub fn link_name(&self) -> &'static str {
            self.prefix
        }

        /// The linker flag that links against it: `-lcuda`.
        pub fn link_flag(&self) -> String {
            let stem = self.prefix.strip_prefix("lib").unwrap_or(self.prefix);
            format!("-l{}", stem.strip_suffix(".so").unwrap_or(stem))
        }

        /// The sonames as text.
        pub fn names(&self) -> impl Iterator<Item = &'static str> {
            self.sonames
                .iter()
                .map(|c| c.to_str().expect("sonames are ASCII"))
        }
    }

    /// The CUDA driver API.
    pub const CUDA: Driver = Driver {
        prefix: "libcuda.so",
        sonames: &[c"libcuda.so.1", c"libcuda.so"],
        sim: SIM,
    };

    /// The HIP runtime (ROCm 7, 6 and 5 sonames, the unversioned development link first).
    pub const HIP: Driver = Driver {
        prefix: "libamdhip64.so",
        sonames: &[
            c"libamdhip64.so",
            c"libamdhip64.so.7",
            c"libamdhip64.so.6",
            c"libamdhip64.so.5",
        ],
        sim: SIM_HIP,
    };

    /// Both drivers.
    pub const DRIVERS: [Driver; 2] = [CUDA, HIP];

    /// Every driver soname: the names the simulated driver is offered under.
    pub fn driver_sonames() -> impl Iterator<Item = &'static str> {
        DRIVERS.into_iter().flat_map(|d| d.names())
    }

    /// The shim.
    pub const SHIM: &str = "libsharecheck.so";
    /// The simulated CUDA driver (soname `libcuda.so.1`; the CUDA functions only).
    pub const SIM: &str = "libsharecheck_sim.so";
    /// The simulated HIP runtime (soname `libamdhip64.so.5`; the HIP functions only), built from
    /// the same code (`sim/hip`) and found beside [`SIM`].
    pub const SIM_HIP: &str = "libsharecheck_sim_hip.so";

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn names() {
            assert_eq!(CUDA.soname(), "libcuda.so.1");
            assert_eq!(HIP.soname(), "libamdhip64.so");
            assert_eq!(CUDA.link_name(), "libcuda.so");
            assert_eq!(CUDA.link_flag(), "-lcuda");
            assert_eq!(HIP.link_flag(), "-lamdhip64");
            let all: Vec<&str> = driver_sonames().collect();
            assert_eq!(all.len(), 6);
            for d in DRIVERS {
                assert!(d.names().all(|n| n.starts_with(d.prefix)));
            }
        }
    }
}
