//! The contract validation engine.
//!
//! For every checked call: predict (arguments, driver facts and tracked state give the findings
//! and the documented outcome) -> forward unchanged (or, in `mode=strict`, return the documented
//! code) -> compare the driver's answer with the prediction -> update tracked state -> report.
//! The rules themselves live in [`cuda_peer`], [`hip_peer`] and [`lifecycle`]; their catalogue
//! (IDs, sentences, fixes) is `sharecheck_core::rules`.

mod cuda_peer;
mod hip_peer;
mod lifecycle;
mod state;

use crate::findings::{self, Finding};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::{args, Api, CallArgs, FnInfo};
use sharecheck_core::options::{Mode, Options};
use sharecheck_core::rules::{self as catalogue, divergence, Kind, Rule, Severity};
use sharecheck_core::schema::env;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::ffi::c_int;

/// Why the shim believes a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// Decided from the arguments and the driver's own answers to the shim's queries.
    Certain,
    /// Decided from state the shim tracks; withdrawn if the driver then succeeds (the state was
    /// stale, e.g. access enabled through a path the shim does not see).
    Tracked,
    /// The driver's result for this call says so.
    Driver,
}

pub struct Pending {
    rule: &'static Rule,
    message: String,
    basis: Basis,
}

/// Runs after the driver answered (never in strict mode's refusals): updates tracked state and
/// returns the findings the driver's answer shows.
type After = Box<dyn FnOnce(c_int) -> Vec<Pending>>;

/// What the rules expect of one call.
#[derive(Default)]
pub struct Prediction {
    pending: Vec<Pending>,
    after: Option<After>,
}

impl Prediction {
    pub fn flag(&mut self, rule: &'static Rule, message: String) {
        self.push(rule, message, Basis::Certain);
    }

    pub fn tracked(&mut self, rule: &'static Rule, message: String) {
        self.push(rule, message, Basis::Tracked);
    }

    fn push(&mut self, rule: &'static Rule, message: String, basis: Basis) {
        self.pending.push(Pending {
            rule,
            message,
            basis,
        });
    }

    pub fn then(&mut self, after: impl FnOnce(c_int) -> Vec<Pending> + 'static) {
        self.after = Some(Box::new(after));
    }

    /// Documented codes of the misuse predicted: the driver must answer one of them.
    fn documented_codes(&self, include_tracked: bool) -> Vec<c_int> {
        self.pending
            .iter()
            .filter(|p| p.rule.kind == Kind::Misuse)
            .filter(|p| p.basis == Basis::Certain || (include_tracked && p.basis == Basis::Tracked))
            .filter_map(|p| p.rule.documented_code)
            .collect()
    }

    /// In strict mode: the code to return instead of calling the driver.
    pub fn refusal(&self) -> Option<c_int> {
        if options().mode != Mode::Strict {
            return None;
        }
        self.documented_codes(true).first().copied()
    }
}

/// A finding the driver's result shows (for `Prediction::then`).
pub fn from_driver(rule: &'static Rule, message: String) -> Pending {
    Pending {
        rule,
        message,
        basis: Basis::Driver,
    }
}

/// The rules of one call, chosen by its argument type.
pub fn predict<A: CallArgs>(call: &A) -> Prediction {
    let any: &dyn Any = call;
    macro_rules! route {
        ($($sym:ident => $check:path),* $(,)?) => {
            $( if let Some(a) = any.downcast_ref::<args::$sym>() { return $check(a); } )*
        };
    }
    route! {
        cuDeviceCanAccessPeer => cuda_peer::can_access_peer,
        cuCtxEnablePeerAccess => cuda_peer::enable,
        cuCtxDisablePeerAccess => cuda_peer::disable,
        cuMemcpyPeer => cuda_peer::memcpy_peer,
        cuMemcpyPeer_ptds => cuda_peer::memcpy_peer_ptds,
        cuMemcpyPeerAsync => cuda_peer::memcpy_peer_async,
        cuMemcpyPeerAsync_ptsz => cuda_peer::memcpy_peer_async_ptsz,
        hipDeviceCanAccessPeer => hip_peer::can_access_peer,
        hipDeviceEnablePeerAccess => hip_peer::enable,
        hipDeviceDisablePeerAccess => hip_peer::disable,
        hipMemcpyPeer => hip_peer::memcpy_peer,
        hipMemcpyPeerAsync => hip_peer::memcpy_peer_async,
        cuCtxDestroy_v2 => lifecycle::context_destroy,
        cuStreamDestroy_v2 => lifecycle::stream_destroy,
        cuDevicePrimaryCtxRelease_v2 => lifecycle::primary_release,
        cuDevicePrimaryCtxReset_v2 => lifecycle::primary_reset,
        hipDeviceReset => lifecycle::hip_device_reset,
    }
    Prediction::default()
}

/// Divergences of real drivers the catalogue lists: (divergence rule, the misuse rule whose
/// documented code the driver does not return, what it returns instead).
const KNOWN_DIVERGENCES: &[(&Rule, &Rule, c_int)] = &[
    (
        &divergence::ENABLE_SELF_UNSUPPORTED,
        &catalogue::cuda::ENABLE_PEER_IS_CURRENT,
        217,
    ),
    (
        &divergence::ENABLE_DESTROYED_PEER_CONTEXT_IS_DESTROYED,
        &catalogue::cuda::ENABLE_INVALID_PEER_CONTEXT,
        709,
    ),
    (
        &divergence::MEMCPY_PEER_NULL_CONTEXT_ACCEPTED,
        &catalogue::cuda::MEMCPY_PEER_NULL_CONTEXT,
        0,
    ),
    (
        &divergence::HIP_DISABLE_UNSUPPORTED_PAIR_INVALID_DEVICE,
        &catalogue::hip::DISABLE_NOT_ENABLED,
        101,
    ),
];

/// Compares the driver's answer with the prediction and returns this call's findings, before
/// muting and limits.
pub fn settle(info: &FnInfo, prediction: Prediction, outcome: Outcome) -> Vec<Finding> {
    let Prediction { mut pending, after } = prediction;
    if let Outcome::Returned(actual) = outcome {
        let misuse = Prediction {
            pending: std::mem::take(&mut pending),
            after: None,
        };
        let expected = misuse.documented_codes(actual != 0);
        pending = misuse.pending;
        if actual == 0 {
            pending.retain(|p| p.basis != Basis::Tracked);
        }
        let shown = after.map(|f| f(actual)).unwrap_or_default();
        let already_explained = expected.contains(&actual);
        for p in shown {
            if !already_explained && !pending.iter().any(|q| std::ptr::eq(q.rule, p.rule)) {
                pending.push(p);
            }
        }
        if !expected.is_empty() && !already_explained {
            pending.extend(divergence_of(info, &pending, &expected, actual));
        } else if expected.is_empty() {
            // A finding shown only by the driver's answer: a listed divergence may explain the
            // code (unlisted ones are not guessed at without a prediction).
            let shown_codes: Vec<c_int> = pending
                .iter()
                .filter_map(|p| p.rule.documented_code.filter(|&c| c != actual))
                .collect();
            if !shown_codes.is_empty() && known_divergence(&pending, actual).is_some() {
                pending.extend(divergence_of(info, &pending, &shown_codes, actual));
            }
        }
    }
    pending
        .into_iter()
        .map(|p| Finding {
            rule: p.rule,
            message: p.message,
        })
        .collect()
}

fn code_name(api: Api, code: c_int) -> String {
    match api.result_name(code) {
        Some(name) => format!("{name} ({code})"),
        None => code.to_string(),
    }
}

fn known_divergence(
    pending: &[Pending],
    actual: c_int,
) -> Option<&'static (&'static Rule, &'static Rule, c_int)> {
    KNOWN_DIVERGENCES.iter().find(|(_, misuse, observed)| {
        *observed == actual && pending.iter().any(|p| std::ptr::eq(p.rule, *misuse))
    })
}

/// The divergence finding for an answer outside the documented ones, once per process.
fn divergence_of(
    info: &FnInfo,
    pending: &[Pending],
    expected: &[c_int],
    actual: c_int,
) -> Option<Pending> {
    let known = known_divergence(pending, actual);
    let documented = expected
        .iter()
        .map(|&c| code_name(info.api, c))
        .collect::<Vec<_>>()
        .join(" or ");
    let (rule, key) = match known {
        Some((rule, _, _)) => (*rule, rule.id.to_string()),
        None => (
            &divergence::UNLISTED,
            format!("{}:{documented}:{actual}", info.symbol),
        ),
    };
    if !with_state(|s| s.once.insert(key)) {
        return None;
    }
    Some(Pending {
        rule,
        message: format!(
            "the documentation gives {documented} for this call; the driver returned {} \
             (reported once per process)",
            code_name(info.api, actual)
        ),
        basis: Basis::Driver,
    })
}

// ---------------------------------------------------------------------------------------------
// State, options, reporting.

#[derive(Default)]
struct EngineState {
    grants: state::Grants,
    /// Reports per rule, for the duplicate limit.
    reported: HashMap<&'static str, u32>,
    /// Keys of findings reported once per process (divergences).
    once: HashSet<String>,
}

static STATE: Lazy<Mutex<EngineState>> = Lazy::new(Default::default);

/// Runs `f` on the engine state. Never called across a driver call.
fn with_state<T>(f: impl FnOnce(&mut EngineState) -> T) -> T {
    f(&mut STATE.lock())
}

fn with_grants<T>(f: impl FnOnce(&mut state::Grants) -> T) -> T {
    with_state(|s| f(&mut s.grants))
}

static OPTIONS: Lazy<Options> = Lazy::new(|| {
    let text = std::env::var(env::OPTIONS).unwrap_or_default();
    let (options, problems) = Options::parse(&text);
    for problem in problems {
        crate::log::warn_once(
            &format!("options:{problem}"),
            format_args!("{}: {problem}", env::OPTIONS),
        );
    }
    options
});

pub fn options() -> &'static Options {
    &OPTIONS
}

/// Drops muted findings, counts the rest, prints those within the duplicate limit and returns
/// what the trace records. `call` describes the call for the printed line.
pub fn report(
    found: Vec<Finding>,
    call: impl FnOnce() -> String,
    pid: u32,
    tid: i32,
    seq: u64,
) -> Vec<Finding> {
    let options = options();
    let kept: Vec<Finding> = found
        .into_iter()
        .filter(|f| !options.is_muted(f.rule.id))
        .collect();
    if kept.is_empty() {
        return kept;
    }
    let limit = options.duplicate_limit;
    let shown: Vec<Option<Option<u32>>> = with_state(|s| {
        kept.iter()
            .map(|f| {
                let n = s.reported.entry(f.rule.id).or_insert(0);
                *n = n.saturating_add(1);
                match limit {
                    0 => Some(None),
                    l if *n < l => Some(None),
                    l if *n == l => Some(Some(l)),
                    _ => None,
                }
            })
            .collect()
    });
    let call = call();
    for (f, show) in kept.iter().zip(shown) {
        findings::counted();
        if let Some(last_of) = show {
            findings::print(f, &call, pid, tid, seq, last_of);
        }
    }
    kept
}

/// `halt_on_error=1`: called after the record of a call with an error finding is written.
pub fn halt_if_asked(recorded: &[Finding]) {
    if options().halt_on_error && recorded.iter().any(|f| f.rule.severity == Severity::Error) {
        crate::log::error(format_args!(
            "halting after the first error (halt_on_error=1 in {})",
            env::OPTIONS
        ));
        crate::trace::finish();
        std::process::abort();
    }
}

// fork: the child's contexts are not the parent's (CUDA and HIP state does not survive fork), so
// it starts with no grants; counts restart with its own trace.

pub fn before_fork() {
    std::mem::forget(STATE.lock());
}

pub fn after_fork_in_parent() {
    unsafe { STATE.force_unlock() };
}

pub fn after_fork_in_child() {
    unsafe { STATE.force_unlock() };
    let mut s = STATE.lock();
    s.grants.clear();
    s.reported.clear();
    s.once.clear();
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the rule modules.

/// `0x...` for messages.
pub fn hex(value: u64) -> String {
    format!("{value:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharecheck_core::functions::FnId;

    fn ids(found: &[Finding]) -> Vec<&'static str> {
        found.iter().map(|f| f.rule.id).collect()
    }

    fn flags_misuse() -> Prediction {
        let mut p = Prediction::default();
        p.flag(
            &catalogue::cuda::ENABLE_FLAGS_NOT_ZERO,
            "Flags is 0x1".into(),
        );
        p
    }

    #[test]
    fn an_answer_outside_the_documented_ones_is_an_unlisted_divergence_once() {
        let info = FnId::cuCtxEnablePeerAccess.info();
        let first = settle(info, flags_misuse(), Outcome::Returned(998));
        assert_eq!(
            ids(&first),
            [
                "cuCtxEnablePeerAccess.flags-not-zero",
                "divergence.unlisted"
            ]
        );
        assert!(first[1].message.contains("CUDA_ERROR_INVALID_VALUE (1)"));
        let again = settle(info, flags_misuse(), Outcome::Returned(998));
        assert_eq!(ids(&again), ["cuCtxEnablePeerAccess.flags-not-zero"]);
        let documented = settle(info, flags_misuse(), Outcome::Returned(1));
        assert_eq!(ids(&documented), ["cuCtxEnablePeerAccess.flags-not-zero"]);
        let refused = settle(info, flags_misuse(), Outcome::NotCalled);
        assert_eq!(ids(&refused), ["cuCtxEnablePeerAccess.flags-not-zero"]);
    }

    #[test]
    fn tracked_findings_are_withdrawn_when_the_driver_succeeds() {
        let info = FnId::cuCtxEnablePeerAccess.info();
        let tracked = || {
            let mut p = Prediction::default();
            p.tracked(
                &catalogue::cuda::ENABLE_ALREADY_ENABLED,
                "enabled before".into(),
            );
            p
        };
        assert!(settle(info, tracked(), Outcome::Returned(0)).is_empty());
        assert_eq!(
            ids(&settle(info, tracked(), Outcome::Returned(704))),
            ["cuCtxEnablePeerAccess.already-enabled"]
        );
    }

    #[test]
    fn the_drivers_answer_adds_a_finding_only_when_nothing_explains_it() {
        let info = FnId::cuCtxEnablePeerAccess.info();
        let shown = |p: &mut Prediction| {
            p.then(|code| {
                (code == 711)
                    .then(|| from_driver(&catalogue::cuda::ENABLE_TOO_MANY_PEERS, "out".into()))
                    .into_iter()
                    .collect()
            })
        };
        let mut plain = Prediction::default();
        shown(&mut plain);
        assert_eq!(
            ids(&settle(info, plain, Outcome::Returned(711))),
            ["cuCtxEnablePeerAccess.too-many-peers"]
        );
        let mut quiet = Prediction::default();
        shown(&mut quiet);
        assert!(settle(info, quiet, Outcome::Returned(0)).is_empty());
        let mut refused = Prediction::default();
        shown(&mut refused);
        assert!(settle(info, refused, Outcome::NotCalled).is_empty());
    }

    #[test]
    fn a_listed_divergence_explains_a_code_only_the_driver_showed() {
        let info = FnId::cuCtxEnablePeerAccess.info();
        let destroyed = || {
            let mut p = Prediction::default();
            p.then(|code| {
                (code == 709)
                    .then(|| {
                        from_driver(
                            &catalogue::cuda::ENABLE_INVALID_PEER_CONTEXT,
                            "destroyed".into(),
                        )
                    })
                    .into_iter()
                    .collect()
            });
            p
        };
        assert_eq!(
            ids(&settle(info, destroyed(), Outcome::Returned(709))),
            [
                "cuCtxEnablePeerAccess.invalid-peer-context",
                "divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed"
            ]
        );
        assert_eq!(
            ids(&settle(info, destroyed(), Outcome::Returned(709))),
            ["cuCtxEnablePeerAccess.invalid-peer-context"],
            "once per process"
        );
    }
}
