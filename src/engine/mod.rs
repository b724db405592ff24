//! The contract validation engine.
//!
//! For every call, the checks its row of the table (`sharecheck_core::check_table!`) names run in
//! order before the call ([`Check::before`]: arguments, driver facts and tracked state give the
//! predicted findings), then the call is forwarded unchanged (or, in `mode=strict`, refused with
//! the documented code), then every check's after-call step runs ([`Check::after`]: tracked state
//! follows the driver's answer, and findings the answer shows are added). No step replaces
//! another. [`settle`] then compares the driver's answer with the prediction (tracked findings the
//! driver contradicts are withdrawn; an answer outside the documented codes is a divergence) and
//! [`report`] applies mute and duplicate limits.
//!
//! Checks reach the driver only through [`facts::Facts`] and tracked state only through
//! [`state::States`], both handed to them in [`Cx`]; the families of checks live in
//! `crate::families`, their catalogue in `sharecheck_core::rules`.

pub mod driver_facts;
pub mod facts;
#[cfg(test)]
pub mod fake;
pub mod frees;
#[cfg(test)]
mod general_tests;
pub mod memo;
pub mod state;

use crate::findings::{self, Finding};
use driver_facts::DriverFacts;
use facts::Facts;
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::{Api, FnInfo};
use sharecheck_core::options::{Mode, Options};
use sharecheck_core::rules::{self as catalogue, divergences, Kind, Rule, Severity};
use sharecheck_core::schema::env;
use state::States;
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
    pub rule: &'static Rule,
    pub message: String,
    pub basis: Basis,
}

/// What a check sees of one call besides its arguments: driver facts, tracked state, and where
/// its findings go. Messages are built only once a finding exists.
pub struct Cx<'a> {
    pub facts: &'a dyn Facts,
    pub states: &'a States,
    /// The calling thread's shard of read-mostly state (`crate::guard::SHARDS`).
    pub shard: usize,
    /// The mode and the muted rules (read only once a finding exists).
    options: &'a Options,
    /// Findings so far: predicted ones (`Certain`, `Tracked`), then those the answer showed
    /// (`Driver`).
    found: Vec<Pending>,
    /// Where a check says the call acted, written in its trace record for the report phase
    /// (rare: IPC exports and opens; one word, `None`, on every other call). Boxed: inline, it
    /// would make every call's context a memcpy to move (the clean path's instructions grew by a
    /// fifth).
    pub place: Option<Box<Place>>,
    /// Findings were reported before the call ([`before_call_findings`]): the call is explained.
    /// (`found` and `place` are the only fields that own memory: [`Cx::dispose`] forgets a clean
    /// context without its drop glue, so a field that owns anything must be added there too.)
    reported_early: bool,
    /// A check asked for the call's stack in its record ([`Cx::keep_stack`]).
    pub stack_wanted: bool,
    /// The stack now is not the call's (a signal handler's call, checked as its thread leaves
    /// the shim): none is kept, whatever the function.
    pub stack_refused: bool,
    /// The check running now (debug builds): a rule it raises must be one its `CheckInfo` lists,
    /// which is how the catalogue knows where each rule is checked.
    #[cfg(debug_assertions)]
    running: Option<&'static sharecheck_core::rules::CheckInfo>,
}

/// Where a call acted ([`crate::trace::Place`]).
pub use crate::trace::Place;

impl<'a> Cx<'a> {
    /// Keeps the call's stack in its trace record: a report-phase rule may name the call
    /// ([`sharecheck_core::rules::ACCUSED_ON_REQUEST`]).
    #[inline]
    pub fn keep_stack(&mut self) {
        self.stack_wanted = true;
    }

    /// The call's [`Place`], made on first use.
    pub fn place(&mut self) -> &mut Place {
        self.place.get_or_insert_with(Box::default)
    }

    #[inline]
    pub fn new(
        facts: &'a dyn Facts,
        states: &'a States,
        options: &'a Options,
        shard: usize,
    ) -> Self {
        Cx {
            facts,
            states,
            shard,
            options,
            found: Vec::new(),
            place: None,
            reported_early: false,
            stack_wanted: false,
            stack_refused: false,
            #[cfg(debug_assertions)]
            running: None,
        }
    }

    /// The check about to run (its catalogue entry), for the debug check in [`Cx::flag`] and
    /// the others: nothing in release builds.
    #[inline(always)]
    pub fn running(&mut self, _check: &'static sharecheck_core::rules::CheckInfo) {
        #[cfg(debug_assertions)]
        {
            self.running = Some(_check);
        }
    }

    /// Before the call: a finding decided from the arguments and driver facts. The message is
    /// built only if the finding is kept.
    pub fn flag(&mut self, rule: &'static Rule, message: impl FnOnce() -> String) {
        self.push(rule, message, Basis::Certain);
    }

    /// Before the call: a finding decided from tracked state.
    pub fn tracked(&mut self, rule: &'static Rule, message: impl FnOnce() -> String) {
        self.push(rule, message, Basis::Tracked);
    }

    /// After the call: a finding the driver's answer shows.
    pub fn shown(&mut self, rule: &'static Rule, message: impl FnOnce() -> String) {
        self.push(rule, message, Basis::Driver);
    }

    /// After the call: [`Self::shown`], once per process (for what a driver always does, such as
    /// ignoring a call it accepts).
    pub fn shown_once(&mut self, rule: &'static Rule, message: impl FnOnce() -> String) {
        if self
            .states
            .reporting
            .lock()
            .once
            .insert(rule.id.to_string())
        {
            self.shown(rule, message);
        }
    }

    /// A muted rule with a documented code still takes part in deciding the call (strict mode's
    /// refusal, a divergence the driver's answer shows), but its message is never built: `report`
    /// drops it. One without a documented code decides nothing, so it costs nothing at all.
    ///
    /// Out of line and cold: a check's hot path then holds a call here, not the message's
    /// formatting (on R580 the driver's work evicts the shim's code, so every line of a check
    /// costs; issue 24).
    #[cold]
    #[inline(never)]
    fn push(&mut self, rule: &'static Rule, message: impl FnOnce() -> String, basis: Basis) {
        #[cfg(debug_assertions)]
        if let Some(check) = self.running {
            assert!(
                check.rules.iter().any(|r| std::ptr::eq(*r, rule)),
                "check {} raised {}, which its CheckInfo does not list",
                check.name,
                rule.id
            );
        }
        let muted = self.options.mute.contains(&rule.id);
        if muted && rule.documented_code.is_none() {
            return;
        }
        self.found.push(Pending {
            rule,
            message: if muted { String::new() } else { message() },
            basis,
        });
    }

    /// Documented codes of the misuse predicted: the driver must answer one of them.
    fn documented_codes(&self, include_tracked: bool) -> Vec<c_int> {
        self.found
            .iter()
            .filter(|p| p.rule.kind == Kind::Misuse)
            .filter(|p| p.basis == Basis::Certain || (include_tracked && p.basis == Basis::Tracked))
            .filter_map(|p| p.rule.documented_code)
            .collect()
    }

    /// In strict mode: the code to return instead of calling the driver.
    #[inline(always)]
    pub fn refusal(&self) -> Option<c_int> {
        if self.found.is_empty() {
            return None;
        }
        self.strict_refusal()
    }

    #[cold]
    #[inline(never)]
    fn strict_refusal(&self) -> Option<c_int> {
        if self.options.mode != Mode::Strict {
            return None;
        }
        self.documented_codes(true).first().copied()
    }

    /// Ends a call's context. A clean one holds nothing to free (no finding was ever pushed,
    /// no place made): it ends without its drop glue, an out-of-line call on the clean path.
    #[inline(always)]
    pub fn dispose(self) {
        if self.holds_nothing() {
            std::mem::forget(self);
        } else {
            Self::drop_held(self);
        }
    }

    /// Nothing found and no place made: the context owns no memory.
    #[inline(always)]
    pub fn holds_nothing(&self) -> bool {
        self.found.capacity() == 0 && self.place.is_none()
    }

    #[cold]
    #[inline(never)]
    pub fn drop_held(self) {}

    /// Something ended: every family forgets what belonged to it, and so do the fact caches.
    #[inline(always)]
    pub fn forget(&mut self, gone: state::Lifetime) {
        if gone == state::Lifetime::MemoryFreed {
            let _ = self.memory_freed();
        } else {
            self.forget_ended(gone);
            let _ = moved_on();
        }
    }

    /// Memory ended ([`state::Lifetime::MemoryFreed`]); returns the end's number, unique in the
    /// process. Frees are frequent and on the program's path: the families that keep nothing
    /// about memory are not reached, and the pointer facts are dropped in one step. The facts'
    /// step moves the generation too: for the driver's facts, its pointer epoch is part of the
    /// generation (one locked add per free, not two, and its number names the free in
    /// [`States::frees`](state::States)).
    #[inline(always)]
    pub fn memory_freed(&mut self) -> u64 {
        memory_freed(self.states, self.facts)
    }

    #[inline(never)]
    fn forget_ended(&mut self, gone: state::Lifetime) {
        self.states.forget(gone);
        self.facts.forget(gone);
    }

    /// Whether anything was found so far (the clean path skips settling).
    #[inline]
    pub fn is_clean(&self) -> bool {
        self.found.is_empty()
    }
}

/// [`Cx::memory_freed`]'s step, with or without a context.
#[inline(always)]
pub(crate) fn memory_freed(states: &States, facts: &dyn Facts) -> u64 {
    states.forget_freed_memory();
    // The process's driver (every call's but the tests'): its step inline, as
    // `DriverFacts::memory_freed` takes it, without the trait object's table and call (a data
    // line and a code line, cold after the driver's call).
    let at = (facts as *const dyn Facts).cast::<()>();
    if std::ptr::eq(at, (&DRIVER as *const DriverFacts).cast::<()>()) {
        DRIVER.freed()
    } else {
        facts.memory_freed()
    }
}

/// [`Facts::cached_range`]: on the process's driver inline and through
/// [`DriverFacts::cached_range_now`], as [`memory_freed`] takes its step (a free reads it).
#[inline(always)]
pub(crate) fn cached_range(facts: &dyn Facts, ptr: u64) -> Option<(u64, u64)> {
    let at = (facts as *const dyn Facts).cast::<()>();
    if std::ptr::eq(at, (&DRIVER as *const DriverFacts).cast::<()>()) {
        DRIVER.cached_range_now(ptr)
    } else {
        facts.cached_range(ptr)
    }
}

/// What a check's quick path ([`Check::quick`]) reads: the tracked state and the driver's facts,
/// without the checks' context (no findings, no options, no place).
pub struct Quick<'a> {
    pub states: &'a States,
    pub facts: &'a dyn Facts,
    /// The call is recorded (a trace is written): a check whose full path would keep something
    /// in the record (a stack, [`Cx::keep_stack`]) declines.
    pub recorded: bool,
}

impl Quick<'static> {
    /// The process's, for a call recorded or not.
    #[inline(always)]
    pub fn process(recorded: bool) -> Self {
        Quick {
            states: states(),
            facts: driver(),
            recorded,
        }
    }
}

impl Quick<'_> {
    /// Memory ended, as [`Cx::memory_freed`] takes it.
    #[inline(always)]
    pub fn memory_freed(&self) -> u64 {
        memory_freed(self.states, self.facts)
    }
}

/// One check: its step before the call and, optionally, after it. `Plan` carries what the
/// after-call step needs from before the call.
///
/// A check may also decide a call clean without the checks' context ([`Check::quick`]): a call
/// whose every check does is staged, forwarded and settled with no context made, and recorded
/// as a clean call is when a trace is written (issue 24: on R580 the context's making, the
/// composed steps and the clean tail were half the VMM pair's instructions, and the cost tracks
/// them). What `quick` and `quick_after` change must be exactly what `before` and `after` change
/// on a clean call; a call whose record would hold more than a clean call's (a stack) is not
/// quick when [`Quick::recorded`].
pub trait Check<A> {
    type Plan;
    /// Whether `before` does anything. Rows whose checks only act after the call (lifecycle
    /// observers) take a shorter path when no trace is written.
    const BEFORE: bool = true;
    fn before(&self, args: &A, cx: &mut Cx) -> Self::Plan;
    fn after(&self, _args: &A, _plan: Self::Plan, _ret: c_int, _cx: &mut Cx) {}
    /// Whether the check has nothing to do on any call now, read from tracked state (no managed
    /// memory attached, say). A row whose checks are all idle is forwarded as an unchecked one
    /// (and recorded, with a trace, without the checks' context).
    #[inline(always)]
    fn idle(&self, _states: &States) -> bool {
        false
    }
    /// Whether the check has a quick path ([`Check::quick`]); a row takes it only when all its
    /// checks have one.
    const QUICK: bool = false;
    /// The untraced clean path, before the call: `Some(plan)` when this check is sure the call
    /// is clean whatever the driver answers (nothing to flag, no stack to keep), with what it
    /// tracks changed as `before` changes it; `None` to take the full path, with nothing changed.
    #[inline(always)]
    fn quick(&self, _args: &A, _q: &Quick) -> Option<Self::Plan> {
        None
    }
    /// After [`Check::quick`] said `Some`: as `after` on a clean call, given the driver's answer;
    /// `Outcome::NotCalled` when a later check of the row sent the call to the full path, which
    /// undoes what `quick` changed.
    #[inline(always)]
    fn quick_after(&self, _args: &A, _plan: Self::Plan, _outcome: Outcome, _q: &Quick) {}
}

/// The [`Check`] of an observer: a check whose only step runs once the driver succeeded, on the
/// tracked state and the driver's facts alone (no finding, no stack kept), so that its full path
/// (`after`) and its quick path (`quick_after`: an untraced free, [`Checked::OBSERVED_QUICKLY`])
/// are one step: `on_success!(Check for args::fn, |a, states, facts| step)`.
macro_rules! on_success {
    ($check:ty, $args:ty, |$a:ident, $states:ident, $facts:ident| $step:expr) => {
        impl $crate::engine::Check<$args> for $check {
            type Plan = ();
            const BEFORE: bool = false;
            fn before(&self, _: &$args, _: &mut $crate::engine::Cx) {}
            #[inline(always)]
            fn after(&self, $a: &$args, _: (), ret: std::ffi::c_int, cx: &mut $crate::engine::Cx) {
                if ret == 0 {
                    let ($states, $facts) = (cx.states, cx.facts);
                    $step
                }
            }
            const QUICK: bool = true;
            #[inline(always)]
            fn quick(&self, _: &$args, _: &$crate::engine::Quick) -> Option<()> {
                Some(())
            }
            #[inline(always)]
            fn quick_after(
                &self,
                $a: &$args,
                _: (),
                outcome: sharecheck_core::ffi::Outcome,
                q: &$crate::engine::Quick,
            ) {
                if outcome == sharecheck_core::ffi::Outcome::Returned(0) {
                    let ($states, $facts) = (q.states, q.facts);
                    $step
                }
            }
        }
    };
}
pub(crate) use on_success;

/// `C::QUICK` of a check value (for the table's generated constants).
pub const fn has_quick<A, C: Check<A>>(_: &C) -> bool {
    C::QUICK
}

/// `C::BEFORE` of a check value (for the table's generated constants).
pub const fn has_before<A, C: Check<A>>(_: &C) -> bool {
    C::BEFORE
}

/// The composed checks of one function (generated from the table for every declared function).
pub trait Checked: sharecheck_core::functions::CallArgs {
    /// Whether any check runs on this function, decided at compile time.
    const CHECKED: bool = sharecheck_core::table::is_checked(Self::ID);
    /// Whether the shim stands in for this function ([`sharecheck_core::table::is_wrapped`]).
    const WRAPPED: bool = sharecheck_core::table::is_wrapped(Self::ID);
    /// Whether a report-phase rule may name this function's calls
    /// ([`sharecheck_core::rules::accused`]), decided at compile time.
    const ACCUSED: sharecheck_core::rules::Accused =
        sharecheck_core::rules::accused(Self::ID.info().symbol);
    /// No check of the row does anything before the call: it only observes the answer.
    const OBSERVE_ONLY: bool;
    /// Every check of the row is idle now ([`Check::idle`]).
    fn idle(states: &States) -> bool;
    /// Runs every check's `before`, then `forward` (the driver call, or a refusal), then every
    /// check's `after` when the driver answered.
    fn run(&self, cx: &mut Cx, forward: impl FnOnce(&mut Cx) -> Outcome) -> Outcome;
    /// Every check of the row has a quick path ([`Check::QUICK`]) and one has a step before the
    /// call (a row of no check, or of after-steps only, is forwarded or observed before).
    const QUICK: bool;
    /// The row only observes the driver's answer ([`Checked::OBSERVE_ONLY`]) and every check has
    /// a quick path: an untraced call is observed through [`Checked::quick`], with no context
    /// made (the frees: issue 28's budget, on R580 every line and instruction after the driver's
    /// call costs).
    const OBSERVED_QUICKLY: bool;
    /// The row's quick path: every check's `quick`, then `call` (the driver's) when all said
    /// `Some`, then every `quick_after`. `None`: a check wants the full path; nothing was changed
    /// and `call` was not made.
    fn quick(&self, q: &Quick, call: impl FnOnce() -> c_int) -> Option<c_int>;
}

// ---------------------------------------------------------------------------------------------
// Settling: the driver's answer against the prediction.

/// The calling thread's stack, from the program's side (the shim's own frames left out), at most
/// `stack_depth` frames: a finding's, or a call's that a report-phase rule may name.
pub fn capture_stack(options: &Options) -> Vec<crate::stack::Frame> {
    crate::stack::capture(
        options.stack_depth as usize,
        Some(halt_if_asked as *const () as usize),
    )
}

/// Compares the driver's answer with the prediction and returns this call's findings, before
/// muting and limits.
/// Before the call is forwarded: the certain misuse of rules a known driver does not return from
/// ([`sharecheck_core::rules::REPORTED_BEFORE_CALL`]), taken out of `cx` (they are
/// reported now, not settled after the call). Empty on every other call.
pub fn before_call_findings(cx: &mut Cx) -> Vec<Finding> {
    use sharecheck_core::rules::REPORTED_BEFORE_CALL;
    if cx.found.is_empty() {
        return Vec::new();
    }
    let early = |p: &Pending| {
        p.basis == Basis::Certain
            && REPORTED_BEFORE_CALL
                .iter()
                .any(|r| std::ptr::eq(*r, p.rule))
    };
    if !cx.found.iter().any(early) {
        return Vec::new();
    }
    let (now, later): (Vec<Pending>, Vec<Pending>) =
        std::mem::take(&mut cx.found).into_iter().partition(early);
    cx.found = later;
    cx.reported_early = true;
    now.into_iter()
        .map(|p| Finding {
            rule: p.rule,
            message: p.message,
            stack: Default::default(),
        })
        .collect()
}

pub fn settle(info: &FnInfo, cx: Cx, outcome: Outcome) -> Vec<Finding> {
    let expected_any = cx.documented_codes(true);
    let Cx {
        states,
        found,
        reported_early,
        ..
    } = cx;
    let (shown, mut predicted): (Vec<Pending>, Vec<Pending>) =
        found.into_iter().partition(|p| p.basis == Basis::Driver);
    if let Outcome::Returned(actual) = outcome {
        let expected: Vec<c_int> = if actual != 0 {
            expected_any
        } else {
            predicted
                .iter()
                .filter(|p| p.basis == Basis::Certain && p.rule.kind == Kind::Misuse)
                .filter_map(|p| p.rule.documented_code)
                .collect()
        };
        if actual == 0 {
            predicted.retain(|p| p.basis != Basis::Tracked);
        }
        let already_explained = expected.contains(&actual);
        for p in shown {
            if !already_explained && !predicted.iter().any(|q| std::ptr::eq(q.rule, p.rule)) {
                predicted.push(p);
            }
        }
        if !expected.is_empty() && !already_explained {
            predicted.extend(divergence_of(states, info, &predicted, &expected, actual));
        } else if expected.is_empty() {
            // A finding shown only by the driver's answer: a listed divergence may explain the
            // code (unlisted ones are not guessed at without a prediction).
            let shown_codes: Vec<c_int> = predicted
                .iter()
                .filter_map(|p| p.rule.documented_code.filter(|&c| c != actual))
                .collect();
            if !shown_codes.is_empty() && known_divergence(&predicted, actual).is_some() {
                predicted.extend(divergence_of(
                    states,
                    info,
                    &predicted,
                    &shown_codes,
                    actual,
                ));
            }
        }
    }
    let mut found: Vec<Finding> = predicted
        .into_iter()
        .map(|p| Finding {
            rule: p.rule,
            message: p.message,
            stack: Default::default(),
        })
        .collect();
    // A covered call that failed is never left unexplained (where a rule speaks, the expected
    // codes above decide whether the answer diverges).
    if let Outcome::Returned(actual) = outcome {
        if actual != 0 && found.is_empty() && !reported_early && !info.observed {
            found.push(failure_finding(states, info, actual));
        }
    }
    found
}

/// The explanation of a covered call that failed with no other finding: `divergence.unlisted`
/// the first time the function returns a code its documentation does not name, `call.failed`
/// otherwise.
pub fn failure_finding(states: &States, info: &FnInfo, code: c_int) -> Finding {
    unlisted_code(states, info, code).unwrap_or_else(|| Finding {
        rule: &catalogue::general::CALL_FAILED,
        message: failure_text(info.api, code),
        stack: Default::default(),
    })
}

/// `divergence.unlisted` for a code the function's documentation does not name, once per
/// process for each function and code.
fn unlisted_code(states: &States, info: &FnInfo, code: c_int) -> Option<Finding> {
    if info.documents_code(code)? {
        return None;
    }
    let key = format!("{}::{code}", info.base);
    if !states.reporting.lock().once.insert(key) {
        return None;
    }
    let header = match info.api {
        Api::Cuda => "cuda.h",
        Api::Hip => "hip_runtime_api.h",
    };
    Some(Finding {
        rule: &divergences::UNLISTED,
        message: format!(
            "{} is not among the codes {header} names for {}; {} (reported once per process; \
             later calls with it get call.failed)",
            code_name(info.api, code),
            info.base,
            failure_text(info.api, code)
        ),
        stack: Default::default(),
    })
}

/// `the driver returned NAME (code): what the header says it means`.
fn failure_text(api: Api, code: c_int) -> String {
    let who = match api {
        Api::Cuda => "the driver",
        Api::Hip => "the runtime",
    };
    match api.result_meaning(code) {
        Some(meaning) => format!("{who} returned {}: {meaning}", code_name(api, code)),
        None => format!(
            "{who} returned {}, a code its header does not describe",
            code_name(api, code)
        ),
    }
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
) -> Option<&'static catalogue::KnownDivergence> {
    pending
        .iter()
        .find_map(|p| catalogue::known_divergence(p.rule, actual))
}

/// The divergence finding for an answer outside the documented ones, once per process.
fn divergence_of(
    states: &States,
    info: &FnInfo,
    pending: &[Pending],
    expected: &[c_int],
    actual: c_int,
) -> Option<Pending> {
    let documented = expected
        .iter()
        .map(|&c| code_name(info.api, c))
        .collect::<Vec<_>>()
        .join(" or ");
    let (rule, key) = match known_divergence(pending, actual) {
        Some(known) => (known.rule, known.rule.id.to_string()),
        None => (
            &divergences::UNLISTED,
            format!("{}:{documented}:{actual}", info.symbol),
        ),
    };
    if !states.reporting.lock().once.insert(key) {
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
// The process's engine: driver facts, options, reporting.

/// Where a finding happened, for its printed line.
#[derive(Clone, Copy, Debug)]
pub struct At {
    pub pid: u32,
    pub tid: i32,
    pub seq: u64,
}

static DRIVER: DriverFacts = DriverFacts::new();

/// The real driver's facts.
pub fn driver() -> &'static DriverFacts {
    &DRIVER
}

pub use state::{options, states};

/// Drops muted findings, counts the rest, prints those within the duplicate limit and returns
/// what the trace records. `call` describes the call for the printed line.
pub fn report(
    states: &States,
    found: Vec<Finding>,
    call: impl FnOnce() -> String,
    at: At,
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
    let shown: Vec<Option<Option<u32>>> = {
        let mut reporting = states.reporting.lock();
        kept.iter()
            .map(|f| {
                let n = reporting.reported.entry(f.rule.id).or_insert(0);
                *n = n.saturating_add(1);
                match limit {
                    0 => Some(None),
                    l if *n < l => Some(None),
                    l if *n == l => Some(Some(l)),
                    _ => None,
                }
            })
            .collect()
    };
    let printed = shown.iter().any(Option::is_some);
    let mut kept = kept;
    // The stack is for the lines printed and the trace's record: a finding repeated past the
    // duplicate limit without a trace is only counted, and a loop that repeats it pays no
    // unwind (issue 28: tens of microseconds per call).
    if options.stack_depth > 0 && (printed || crate::trace::enabled()) {
        // One capture for the call: its findings share it.
        let stack = std::sync::Arc::new(capture_stack(options));
        for f in &mut kept {
            f.stack = stack.clone();
        }
    }
    let call = if printed { call() } else { String::new() };
    for (f, show) in kept.iter().zip(shown) {
        findings::counted();
        if let Some(last_of) = show {
            findings::print(f, &call, at.pid, at.tid, at.seq, last_of);
        }
    }
    kept
}

/// At the exit of a process that writes no trace: what it still holds that a rule says it must
/// have given back, decided live from the families' tracked state ([`state::Left`]; with a
/// trace, `sharecheck report` decides the same rules from it). Printed as findings on the call
/// that made each thing (`at exit`, no stack: the exit's own would say nothing), within the
/// duplicate limit, muted rules left out.
pub fn report_left_at_exit() {
    let states = states();
    if states.imports_from_other_processes() {
        crate::log::warn_once(
            "cross-process-off",
            format_args!(
                "this process imported memory from another process and wrote no trace: the checks \
                 across processes (an exporter freeing what another process still holds, ...) \
                 need every process's trace; run it under `sharecheck run` or set {}",
                sharecheck_core::schema::env::TRACE
            ),
        );
    }
    let pid = std::process::id();
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    for left in states.left_at_exit() {
        let f = Finding {
            rule: left.rule,
            message: left.message,
            stack: Default::default(),
        };
        let at = At { pid, tid, seq: 0 };
        if report_away(states, &f, &left.call, at, state::AT_EXIT_WAIT).is_none() {
            return;
        }
    }
}

/// A finding made away from its call's thread or moment (at exit; by the multicast watchdog, on
/// its own thread): a muted rule is dropped, the rest counted against the duplicate limit and
/// printed with the stack the finding carries (none is captured here). `None` when the
/// reporting lock did not come within `wait`; else whether it was kept (not muted).
pub fn report_away(
    states: &States,
    f: &Finding,
    call: &str,
    at: At,
    wait: std::time::Duration,
) -> Option<bool> {
    let options = options();
    if options.is_muted(f.rule.id) {
        return Some(false);
    }
    let mut reporting = states.reporting.try_lock_for(wait)?;
    let n = reporting.reported.entry(f.rule.id).or_insert(0);
    *n = n.saturating_add(1);
    let n = *n;
    drop(reporting);
    findings::counted();
    let last_of = match options.duplicate_limit {
        0 => None,
        l if n < l => None,
        l if n == l => Some(l),
        _ => return Some(true),
    };
    findings::print(f, call, at.pid, at.tid, at.seq, last_of);
    Some(true)
}

/// `halt_on_error=1`: called after the record of a call with an error finding is written.
pub fn halt_if_asked(recorded: &[Finding]) {
    if options().halt_on_error && recorded.iter().any(|f| f.rule.severity == Severity::Error) {
        crate::log::error(format_args!(
            "halting after the first error (halt_on_error=1 in {})",
            env::OPTIONS
        ));
        crate::trace::finish(|| states().exported_fds_open());
        std::process::abort();
    }
}

/// In a forked child: fresh state and fact caches.
pub fn after_fork_in_child() {
    state::restart_after_fork_in_child();
    DRIVER.reset();
    moved_on();
}

#[cfg(test)]
pub use memo::OWN_MOVES;
pub use memo::{generation, moved_on, LastClean, Remember};

// ---------------------------------------------------------------------------------------------
// Helpers shared by the families.

/// `0x...` for messages.
pub fn hex(value: u64) -> String {
    format!("{value:#x}")
}
