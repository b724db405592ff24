//! Configuration from the environment, read once on the first call into the simulator.
//!
//! A bad value is reported in one line on stderr naming the variable, and the default is used:
//! a test setup mistake must be visible but must not crash the program under test.

use sharecheck_core::schema::env;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::LazyLock;

/// Not (yet) among the shared names of `sharecheck_core::schema::env`; only the simulator reads it.
pub const SIM_ATTRS: &str = "SHARECHECK_SIM_ATTRS";
/// How many peer grants one context may hold before `cuCtxEnablePeerAccess` answers
/// CUDA_ERROR_TOO_MANY_PEERS (711): a number from 0, or `unlimited` (the default). Only the
/// simulator reads it.
pub const SIM_MAX_PEERS: &str = "SHARECHECK_SIM_MAX_PEERS";
/// The fabric (IMEX) channel of this process, a number from 0 (the default): a logical endpoint
/// exported on one channel cannot be imported on another (CUDA_ERROR_NOT_PERMITTED, the
/// importer "does not have access permissions"). `none`: the process has no channel, and a
/// `cuMemCreate` that requests FABRIC handles answers CUDA_ERROR_NOT_PERMITTED, as R580 does
/// where no channel file is accessible (scripts/gpu/results/*-fabric-imex.txt). Only the
/// simulator reads it.
pub const SIM_FABRIC_CHANNEL: &str = "SHARECHECK_SIM_FABRIC_CHANNEL";
/// Nanoseconds every call the shim itself makes into the simulator (a question of its checks,
/// `sharecheck_asking_driver`) spends before it is answered: what such a question costs on a
/// real driver (scripts/bench: `pointer_get_attribute`, 37 ns on R580), so that
/// `scripts/bench.sh` shows what caching saves there. 0 (the default) charges nothing; at most
/// 1000000. Only the simulator reads it.
pub const SIM_SHIM_CALL_NS: &str = "SHARECHECK_SIM_SHIM_CALL_NS";
/// Kilobytes of its own memory every call into the simulator writes before it answers, a cache
/// line each 64 bytes: R580's work evicts its caller's lines and TLB entries (issue 24,
/// `scripts/gpu/line_cost.c`), which the simulator otherwise keeps warm, so that callgrind's
/// cache simulation or `scripts/bench.sh` counts what a call path touches after the driver's
/// call. 0 (the default) writes nothing; at most 65536. Only the simulator reads it.
pub const SIM_EVICT_KB: &str = "SHARECHECK_SIM_EVICT_KB";
/// `1`: every call into the simulator also runs through 64 KiB of straight-line code before it
/// answers (twice a 32 KiB L1 instruction cache): R580's work evicts its caller's code lines too
/// (issue 24: under callgrind, a VMM map and unmap pair's shim fetched 59 cold code lines, the
/// peer query 13), which a simulator that runs a few hundred instructions keeps warm. `0` (the
/// default) runs none. Only the simulator reads it.
pub const SIM_EVICT_CODE: &str = "SHARECHECK_SIM_EVICT_CODE";
/// How long a multicast bind waits for the team's devices before the simulator gives up.
pub const SIM_MULTICAST_WAIT_MS: &str = "SHARECHECK_SIM_MULTICAST_WAIT_MS";

pub const DEFAULT_DEVICES: i32 = 2;
pub const MAX_DEVICES: i32 = 64;
pub const DEFAULT_DRIVER_VERSION: i32 = 13030;

/// Whose answers the simulator gives where the real driver and its documentation disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// As driver 580.159.04 answered in the probes of api-facts.md.
    R580,
    /// As the documentation says.
    Documented,
}

/// Which devices can access which peers (before the attribute rules of `cuCtxEnablePeerAccess`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMatrix {
    All,
    None,
    /// Directed pairs `(device, peer)`: `device` can access memory on `peer`.
    Pairs(HashSet<(i32, i32)>),
}

impl PeerMatrix {
    pub fn allows(&self, device: i32, peer: i32) -> bool {
        match self {
            PeerMatrix::All => true,
            PeerMatrix::None => false,
            PeerMatrix::Pairs(pairs) => pairs.contains(&(device, peer)),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub devices: i32,
    pub peers: PeerMatrix,
    pub behaviour: Behaviour,
    /// What `cuDriverGetVersion` reports; also gates the CUDA 13.3 functions and attributes.
    pub driver_version: i32,
    /// `(device, attribute) -> value` overrides of `cuDeviceGetAttribute`.
    pub attributes: HashMap<(i32, i32), i32>,
    /// The most peer grants (current context -> peer) one CUDA context may hold; `None`: no limit.
    pub max_peers: Option<u32>,
    /// [`SIM_FABRIC_CHANNEL`].
    pub fabric_channel: u32,
    /// [`SIM_FABRIC_CHANNEL`] `none`: no IMEX channel.
    pub no_fabric_channel: bool,
    pub(crate) state_dir: Option<PathBuf>,
    pub call_log: Option<PathBuf>,
    /// [`SIM_SHIM_CALL_NS`].
    pub shim_call_ns: u64,
    /// [`SIM_EVICT_KB`].
    pub evict_kb: usize,
    /// [`SIM_EVICT_CODE`].
    pub evict_code: bool,
    /// [`SIM_MULTICAST_WAIT_MS`].
    pub multicast_wait_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            devices: DEFAULT_DEVICES,
            peers: PeerMatrix::All,
            behaviour: Behaviour::R580,
            driver_version: DEFAULT_DRIVER_VERSION,
            attributes: HashMap::new(),
            max_peers: None,
            fabric_channel: 0,
            no_fabric_channel: false,
            state_dir: None,
            call_log: None,
            shim_call_ns: 0,
            evict_kb: 0,
            evict_code: false,
            multicast_wait_ms: 10_000,
        }
    }
}

impl Config {
    /// Reads the configuration through `get`, reporting each bad variable through `warn`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>, mut warn: impl FnMut(String)) -> Self {
        let mut config = Config::default();
        let mut bad = |name: &str, value: &str, why: String, default: &str| {
            warn(format!(
                "sharecheck-sim: {name}={value:?}: {why}; using the default ({default})"
            ));
        };

        if let Some(v) = get(env::SIM_DEVICES) {
            match v.trim().parse::<i32>() {
                Ok(n) if (0..=MAX_DEVICES).contains(&n) => config.devices = n,
                _ => bad(
                    env::SIM_DEVICES,
                    &v,
                    format!("expected a device count from 0 to {MAX_DEVICES}"),
                    "2",
                ),
            }
        }
        if let Some(v) = get(env::SIM_BEHAVIOUR) {
            match v.trim().to_ascii_lowercase().as_str() {
                "r580" => config.behaviour = Behaviour::R580,
                "documented" => config.behaviour = Behaviour::Documented,
                _ => bad(
                    env::SIM_BEHAVIOUR,
                    &v,
                    "expected `r580` or `documented`".into(),
                    "r580",
                ),
            }
        }
        if let Some(v) = get(env::SIM_DRIVER_VERSION) {
            match v.trim().parse::<i32>() {
                Ok(n) if (2000..=99990).contains(&n) => config.driver_version = n,
                _ => bad(
                    env::SIM_DRIVER_VERSION,
                    &v,
                    "expected a CUDA version as 1000*major+10*minor, e.g. 13030".into(),
                    "13030",
                ),
            }
        }
        // Device ordinals in the lists below are checked against the final device count.
        let devices = config.devices;
        if let Some(v) = get(env::SIM_PEERS) {
            match parse_peers(&v, devices) {
                Ok(peers) => config.peers = peers,
                Err(why) => bad(env::SIM_PEERS, &v, why, "all"),
            }
        }
        if let Some(v) = get(SIM_ATTRS) {
            match parse_attributes(&v, devices) {
                Ok(attributes) => config.attributes = attributes,
                Err(why) => bad(SIM_ATTRS, &v, why, "no overrides"),
            }
        }
        if let Some(v) = get(SIM_MAX_PEERS) {
            match v.trim().to_ascii_lowercase().as_str() {
                "unlimited" => config.max_peers = None,
                n => match n.parse::<u32>() {
                    Ok(n) => config.max_peers = Some(n),
                    Err(_) => bad(
                        SIM_MAX_PEERS,
                        &v,
                        "expected a number of peer grants from 0, or `unlimited`".into(),
                        "unlimited",
                    ),
                },
            }
        }
        if let Some(v) = get(SIM_FABRIC_CHANNEL) {
            match v.trim().parse::<u32>() {
                Ok(channel) => config.fabric_channel = channel,
                Err(_) if v.trim() == "none" => config.no_fabric_channel = true,
                Err(_) => bad(
                    SIM_FABRIC_CHANNEL,
                    &v,
                    "expected a channel number from 0, or none".into(),
                    "0",
                ),
            }
        }
        if let Some(v) = get(SIM_SHIM_CALL_NS) {
            match v.trim().parse::<u64>() {
                Ok(ns) if ns <= 1_000_000 => config.shim_call_ns = ns,
                _ => bad(
                    SIM_SHIM_CALL_NS,
                    &v,
                    "expected nanoseconds from 0 to 1000000".into(),
                    "0",
                ),
            }
        }
        if let Some(v) = get(SIM_EVICT_KB) {
            match v.trim().parse::<usize>() {
                Ok(kb) if kb <= 65536 => config.evict_kb = kb,
                _ => bad(
                    SIM_EVICT_KB,
                    &v,
                    "expected kilobytes from 0 to 65536".into(),
                    "0",
                ),
            }
        }
        if let Some(v) = get(SIM_EVICT_CODE) {
            match v.trim() {
                "0" => config.evict_code = false,
                "1" => config.evict_code = true,
                _ => bad(SIM_EVICT_CODE, &v, "expected 0 or 1".into(), "0"),
            }
        }
        if let Some(v) = get(SIM_MULTICAST_WAIT_MS) {
            match v.trim().parse::<u64>() {
                Ok(ms) if ms <= 3_600_000 => config.multicast_wait_ms = ms,
                _ => bad(
                    SIM_MULTICAST_WAIT_MS,
                    &v,
                    "expected milliseconds from 0 to 3600000".into(),
                    "10000",
                ),
            }
        }
        config.state_dir = get(env::SIM_STATE_DIR)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        config.call_log = get(env::SIM_CALL_LOG)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        config
    }

    /// The per-run directory shared by the processes of one run (IPC exports live there).
    pub fn state_dir(&self) -> PathBuf {
        if let Some(dir) = &self.state_dir {
            return dir.clone();
        }
        let base = std::env::var_os("TMPDIR")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        // SAFETY: getuid and getsid have no preconditions.
        let (uid, sid) = unsafe { (libc::getuid(), libc::getsid(0)) };
        base.join(format!("sharecheck-sim-{uid}-{sid}"))
    }

    /// Does `driver_version` include the CUDA 13.3 logical endpoint API?
    pub fn has_logical_endpoints(&self) -> bool {
        self.driver_version >= crate::types::LOGICAL_ENDPOINT_VERSION
    }
}

fn parse_device(text: &str, devices: i32) -> Result<i32, String> {
    match text.trim().parse::<i32>() {
        Ok(d) if (0..devices).contains(&d) => Ok(d),
        _ => Err(format!(
            "`{}` is not a device ordinal below {devices}",
            text.trim()
        )),
    }
}

/// `all`, `none`, or `0>1,1>0,...`.
fn parse_peers(text: &str, devices: i32) -> Result<PeerMatrix, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "all" => return Ok(PeerMatrix::All),
        "none" | "" => return Ok(PeerMatrix::None),
        _ => {}
    }
    let mut pairs = HashSet::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (from, to) = item
            .split_once('>')
            .ok_or_else(|| format!("`{item}` is not a pair `device>peer`"))?;
        pairs.insert((parse_device(from, devices)?, parse_device(to, devices)?));
    }
    Ok(PeerMatrix::Pairs(pairs))
}

/// `dev:attr=value,...`.
fn parse_attributes(text: &str, devices: i32) -> Result<HashMap<(i32, i32), i32>, String> {
    let mut map = HashMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let malformed = || format!("`{item}` is not `device:attribute=value`");
        let (dev, rest) = item.split_once(':').ok_or_else(malformed)?;
        let (attr, value) = rest.split_once('=').ok_or_else(malformed)?;
        let dev = parse_device(dev, devices)?;
        let attr = attr
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|a| *a > 0)
            .ok_or_else(malformed)?;
        let value = value.trim().parse::<i32>().map_err(|_| malformed())?;
        map.insert((dev, attr), value);
    }
    Ok(map)
}

static GLOBAL: LazyLock<Config> = LazyLock::new(|| {
    Config::from_lookup(|name| std::env::var(name).ok(), |line| eprintln!("{line}"))
});

#[cfg(test)]
thread_local! {
    /// Unit tests run in threads of one process: each test thread may use its own configuration.
    static TEST_CONFIG: std::cell::Cell<Option<&'static Config>> = const { std::cell::Cell::new(None) };
}

/// The configuration in force.
pub fn config() -> &'static Config {
    #[cfg(test)]
    if let Some(config) = TEST_CONFIG.with(std::cell::Cell::get) {
        return config;
    }
    &GLOBAL
}

/// Makes `config` the configuration of the calling test thread.
#[cfg(test)]
pub fn set_test_config(config: Config) {
    TEST_CONFIG.with(|c| c.set(Some(Box::leak(Box::new(config)))));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        let mut warnings = Vec::new();
        let config = Config::from_lookup(
            |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            },
            |w| warnings.push(w),
        );
        (config, warnings)
    }

    #[test]
    fn defaults() {
        let (c, w) = parse(&[]);
        assert!(w.is_empty());
        assert_eq!(c.devices, 2);
        assert_eq!(c.peers, PeerMatrix::All);
        assert_eq!(c.behaviour, Behaviour::R580);
        assert_eq!(c.driver_version, 13030);
        assert!(c.attributes.is_empty());
        assert_eq!(c.max_peers, None);
    }

    #[test]
    fn values_are_parsed() {
        let (c, w) = parse(&[
            (env::SIM_DEVICES, "4"),
            (env::SIM_PEERS, "0>1, 2>3"),
            (env::SIM_BEHAVIOUR, "documented"),
            (env::SIM_DRIVER_VERSION, "13000"),
            (SIM_ATTRS, "1:75=8,1:41=0"),
            (SIM_MAX_PEERS, " 3 "),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.max_peers, Some(3));
        assert_eq!(c.devices, 4);
        assert!(c.peers.allows(0, 1) && c.peers.allows(2, 3) && !c.peers.allows(1, 0));
        assert_eq!(c.behaviour, Behaviour::Documented);
        assert!(!c.has_logical_endpoints());
        assert_eq!(c.attributes.get(&(1, 75)), Some(&8));
        assert_eq!(c.attributes.get(&(1, 41)), Some(&0));
    }

    #[test]
    fn bad_values_warn_once_each_and_fall_back() {
        let (c, w) = parse(&[
            (env::SIM_DEVICES, "65"),
            (env::SIM_PEERS, "0>7"),
            (env::SIM_BEHAVIOUR, "r590"),
            (env::SIM_DRIVER_VERSION, "thirteen"),
            (SIM_ATTRS, "0:75"),
            (SIM_MAX_PEERS, "-1"),
        ]);
        assert_eq!(w.len(), 6, "{w:?}");
        for (line, var) in w.iter().zip([
            env::SIM_DEVICES,
            env::SIM_BEHAVIOUR,
            env::SIM_DRIVER_VERSION,
            env::SIM_PEERS,
            SIM_ATTRS,
            SIM_MAX_PEERS,
        ]) {
            assert!(line.contains(var), "{line}");
        }
        assert_eq!(c.max_peers, None, "unlimited");
        assert_eq!(c.devices, 2);
        assert_eq!(c.peers, PeerMatrix::All);
        assert_eq!(c.behaviour, Behaviour::R580);
        assert_eq!(c.driver_version, 13030);
        assert!(c.attributes.is_empty());
    }

    #[test]
    fn a_multicast_bind_waits_ten_seconds_or_the_milliseconds_given() {
        assert_eq!(parse(&[]).0.multicast_wait_ms, 10_000);
        let (c, w) = parse(&[(SIM_MULTICAST_WAIT_MS, "250")]);
        assert_eq!((c.multicast_wait_ms, w.len()), (250, 0));
        let (c, w) = parse(&[(SIM_MULTICAST_WAIT_MS, "soon")]);
        assert_eq!(c.multicast_wait_ms, 10_000);
        assert!(w[0].contains(SIM_MULTICAST_WAIT_MS), "{w:?}");
    }

    #[test]
    fn the_cost_of_the_shim_s_calls_is_nanoseconds_up_to_a_millisecond() {
        assert_eq!(parse(&[]).0.shim_call_ns, 0);
        let (c, w) = parse(&[(SIM_SHIM_CALL_NS, " 60 ")]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.shim_call_ns, 60);
        for bad in ["-1", "60ns", "1000001"] {
            let (c, w) = parse(&[(SIM_SHIM_CALL_NS, bad)]);
            assert_eq!(c.shim_call_ns, 0, "{bad}");
            assert!(
                w.len() == 1 && w[0].contains(SIM_SHIM_CALL_NS),
                "{bad}: {w:?}"
            );
        }
    }

    #[test]
    fn code_eviction_is_0_or_1() {
        assert!(!parse(&[]).0.evict_code);
        let (c, w) = parse(&[(SIM_EVICT_CODE, " 1 ")]);
        assert!(c.evict_code && w.is_empty());
        assert!(!parse(&[(SIM_EVICT_CODE, "0")]).0.evict_code);
        for bad in ["2", "yes", ""] {
            let (c, w) = parse(&[(SIM_EVICT_CODE, bad)]);
            assert!(!c.evict_code, "{bad}");
            assert!(
                w.len() == 1 && w[0].contains(SIM_EVICT_CODE),
                "{bad}: {w:?}"
            );
        }
    }

    #[test]
    fn the_memory_a_call_evicts_is_kilobytes_up_to_64_mib() {
        assert_eq!(parse(&[]).0.evict_kb, 0);
        let (c, w) = parse(&[(SIM_EVICT_KB, " 512 ")]);
        assert_eq!((c.evict_kb, w.len()), (512, 0));
        for bad in ["-1", "512K", "65537"] {
            let (c, w) = parse(&[(SIM_EVICT_KB, bad)]);
            assert_eq!(c.evict_kb, 0, "{bad}");
            assert!(w.len() == 1 && w[0].contains(SIM_EVICT_KB), "{bad}: {w:?}");
        }
    }

    #[test]
    fn a_process_may_have_no_fabric_channel() {
        let (c, w) = parse(&[(SIM_FABRIC_CHANNEL, "none")]);
        assert!(w.is_empty() && c.no_fabric_channel, "{w:?}");
        let (c, _) = parse(&[(SIM_FABRIC_CHANNEL, "3")]);
        assert!(!c.no_fabric_channel && c.fabric_channel == 3);
        assert!(!parse(&[]).0.no_fabric_channel);
    }

    #[test]
    fn max_peers_zero_and_unlimited() {
        let (c, w) = parse(&[(SIM_MAX_PEERS, "0")]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.max_peers, Some(0));
        let (c, w) = parse(&[(SIM_MAX_PEERS, "Unlimited")]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.max_peers, None);
        let (c, w) = parse(&[(SIM_MAX_PEERS, "two")]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(SIM_MAX_PEERS) && w[0].contains("unlimited"),
            "{}",
            w[0]
        );
        assert_eq!(c.max_peers, None);
    }

    #[test]
    fn none_and_zero_devices() {
        let (c, w) = parse(&[(env::SIM_DEVICES, "0"), (env::SIM_PEERS, "none")]);
        assert!(w.is_empty());
        assert_eq!(c.devices, 0);
        assert_eq!(c.peers, PeerMatrix::None);
    }
}
