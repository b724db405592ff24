//! The path every wrapped call takes.
//!
//! enter the guard -> find the real function -> the checks of its table row, around the call:
//! before-steps, forward unchanged (or, in `mode=strict`, refuse a call the contract says must
//! fail), after-steps -> settle, report and record. A panic in the shim's own work degrades that
//! call to pure forwarding plus one log line; the program always gets the driver's own return
//! value and out-parameters (strict mode aside). The clean path allocates nothing, formats
//! nothing, takes no lock that other threads' clean calls take and, without a trace, reads no
//! clock: one thread-local lookup, a few atomic loads, the checks' driver facts (cached where they
//! cannot change), and the call. A row whose every check can decide a call clean without the
//! checks' context (`engine::Check::quick`: the VMM map, unmap and set access) is staged, forwarded and
//! settled with no context made, and traced as a clean call is; a check that is not sure sends it
//! to the full path, unchanged. A row that only observes the answer and whose every check has a
//! quick path (CUDA's frees: `Checked::OBSERVED_QUICKLY`) is observed so when untraced.
//!
//! On R580 each code page a call's path touches costs its own TLB walk after the driver's call
//! (about 3.5 ns a page on a 2x H100 host, `scripts/gpu/line_cost.c`). The out-of-line steps of
//! the budgeted clean paths (the free's pointer facts, the VMM staging, the multicast map step,
//! the access, attach and IPC-get steps) are therefore placed in one section,
//! `#[link_section = ".text.hot.sharecheck"]`, which `-z keep-text-section-prefix` (build.rs)
//! keeps together as `.text.hot`: a pair's code touches 4 pages instead of 5 to 7.
//!
//! The same holds for data (about 2 ns a line and 2.4 more a page): what every wrapped call reads
//! first is one line (`crate::hot`: the path, the TLS block's offset, the states, the options;
//! every thread-local is then that offset plus a link-time constant, with no GOT line), what a
//! traced call reads besides is the next line (the trace's, the writer's and the clock's flags)
//! and the function's facts its record needs are constants,
//! what a free asks every family is one line (`States::watch`), a pointer fact is one line, and
//! the pointer epoch is told by address. `SHARECHECK_SIM_EVICT_KB` makes the simulator evict as
//! R580 does, so that callgrind's cache simulation counts a path's lines on the VM.

use crate::engine::{self, At, Checked, Cx};
use crate::findings::Finding;
use crate::guard::{shielded, Entry, Guard};
use crate::phases::{self, Phase};
use crate::{loader, trace};
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::CallArgs;
use std::ffi::c_int;

/// A call's arguments, passed on to the real function (implemented for every interposed symbol in
/// `exports`).
pub trait Invoke: Checked {
    /// Calls the real function at `real` (the loader's address for `Self::ID`) with these
    /// arguments, unchanged.
    fn invoke(self, real: usize) -> c_int;
}

/// Runs one interposed call.
#[inline(always)]
pub fn call<A: Invoke>(args: A) -> c_int {
    if !A::WRAPPED {
        // Observed by nobody: forwarded untouched.
        return forward(args);
    }
    if crate::process::untraced() {
        // The usual case, decided at load with one flag: the constant `TRACED` folds away every
        // branch of the trace.
        wrapped::<A, false>(args)
    } else {
        general(args)
    }
}

/// Before the shim's constructor ran, in a passive copy, or with a trace.
#[inline(never)]
fn general<A: Invoke>(args: A) -> c_int {
    if crate::process::passive() {
        // Another copy of the shim is the active one: forwarded untouched, as if this copy were
        // not there.
        return forward(args);
    }
    if trace::enabled() {
        wrapped::<A, true>(args)
    } else {
        wrapped::<A, false>(args)
    }
}

/// Forwards a call untouched.
#[inline(always)]
fn forward<A: Invoke>(args: A) -> c_int {
    match loader::resolved(A::ID) {
        Some(real) => args.invoke(real),
        None => forward_first(args),
    }
}

/// [`forward`] on the first use of the function, or when the driver lacks it.
#[cold]
#[inline(never)]
fn forward_first<A: Invoke>(args: A) -> c_int {
    match loader::real_function(A::ID) {
        Some(real) => args.invoke(real),
        None => missing(args),
    }
}

/// A call this copy checks (and traces when `TRACED`).
#[inline(always)]
fn wrapped<A: Invoke, const TRACED: bool>(args: A) -> c_int {
    if A::OBSERVE_ONLY && !TRACED {
        return observe(args);
    }
    // The call's time, read now and converted after the call, which hides the read's latency.
    let stamp = if TRACED { crate::clock::stamp() } else { 0 };
    phases::start(A::ID);
    let guard = match Guard::enter() {
        Entry::Whole(guard) => guard,
        // A signal handler's call, made while this thread was in the shim or its driver call.
        Entry::Interrupted => return interrupted::<A, TRACED>(args),
    };
    guard.count_call();
    let Some(real) = loader::real_function(A::ID) else {
        return missing(args);
    };
    phases::mark(A::ID, Phase::Enter);
    if !TRACED && (!A::CHECKED || A::idle(engine::states())) {
        // No check, or none with anything to do now: forwarded, and a covered failure explained.
        let ret = guard.in_driver(|| args.invoke(real));
        phases::mark(A::ID, Phase::Driver);
        if ret != 0 && !A::ID.info().observed {
            explain_failure(&args, ret, guard.call_number());
        }
        return ret;
    }
    if TRACED && (!A::CHECKED || A::idle(engine::states())) {
        return traced_idle(&guard, args, real, stamp);
    }
    if A::QUICK && (!TRACED || quick_recordable::<A>()) {
        // By reference: moved, the arguments were copied once more on the stack (issue 24).
        if let Some(ret) = quick::<A, TRACED>(&guard, &args, real, stamp) {
            return ret;
        }
        if !TRACED {
            // Out of line: the full path's context and answers would otherwise widen the
            // export's frame, whose lines the quick path then touches (issue 24).
            return checked_apart::<A>(&guard, args, real);
        }
    }
    checked::<A, TRACED>(&guard, args, real, stamp)
}

/// [`checked`] out of line, for an untraced call of a quick row that a check sent to the full
/// path.
#[cold]
#[inline(never)]
fn checked_apart<A: Invoke>(guard: &Guard, args: A, real: usize) -> c_int {
    checked::<A, false>(guard, args, real, 0)
}

/// The full path of a checked call: the checks' context made, their steps around the driver's
/// call, the call settled, reported and recorded.
#[inline(always)]
fn checked<A: Invoke, const TRACED: bool>(
    guard: &Guard,
    args: A,
    real: usize,
    stamp: u64,
) -> c_int {
    // The record's number, held until the call is recorded: an exiting process waits for the
    // numbers in flight. Taken once the driver returned (a call blocked in the driver holds
    // none, so an exit never waits for one), or before the call for findings reported then.
    let mut number = None;
    // `durations=1`: a second clock read, after the driver returned.
    let timed = TRACED && engine::options().durations;
    // The driver is called exactly once, whether or not a check panics: `answer` is set as soon
    // as it returned (or was refused in strict mode), so no answer means no call yet.
    let mut answer: Option<(Outcome, c_int)> = None;
    let mut dur_ns = None;
    // Held without drop glue until a path takes it: the clean path ends it in place (moved into
    // a consuming call, the context is copied, two more code lines after the driver's call).
    let mut cx = std::mem::ManuallyDrop::new(process_cx(guard));
    phases::mark(A::ID, Phase::Context);
    let ran = shielded(false, || {
        args.run(&mut cx, |cx| {
            if let Some(code) = cx.refusal() {
                answer = Some((Outcome::NotCalled, code));
                return Outcome::NotCalled;
            }
            // Misuse a known driver does not return from: reported now, while it can be.
            if !cx.is_clean() {
                // Untraced, no number is taken: `number` stays a known `None`, with no drop
                // to test after the call.
                report_early::<A, TRACED>(cx, &args, guard, TRACED.then_some(&mut number));
            }
            let start = if timed {
                trace::now_on(guard.clock())
            } else {
                0
            };
            phases::mark(A::ID, Phase::Before);
            let ret = guard.in_driver(|| args.invoke(real));
            phases::mark(A::ID, Phase::Driver);
            answer = Some((Outcome::Returned(ret), ret));
            if timed {
                dur_ns = Some(trace::now_on(guard.clock()).saturating_sub(start));
            }
            Outcome::Returned(ret)
        });
        true
    });
    phases::mark(A::ID, Phase::After);
    if !TRACED {
        if let (true, Some((_, ret))) = (ran, answer) {
            if cx.is_clean() && (ret == 0 || A::ID.info().observed) {
                // The clean path: nothing found, nothing to explain, no record. The fewest
                // instructions and cache lines after the driver's call (issue 24: on R580 the
                // driver's work evicts them).
                if !cx.holds_nothing() {
                    Cx::drop_held(std::mem::ManuallyDrop::into_inner(cx));
                }
                phases::mark(A::ID, Phase::Settle);
                return ret;
            }
        }
        // Out of line, so that the clean path's code after the driver's call is a few
        // contiguous lines.
        let cx = std::mem::ManuallyDrop::into_inner(cx);
        return unclean::<A>(guard, args, real, cx, ran, answer);
    }
    if let (true, Some((Outcome::Returned(_), ret))) = (ran, answer) {
        if cx.is_clean()
            && (ret == 0 || A::ID.info().observed)
            && dur_ns.is_none()
            && !stack_wanted::<A>(cx.stack_refused, cx.stack_wanted)
        {
            // The traced clean path: the plain record, with the context read in place (moved,
            // it would be copied twice more) and the other paths out of line.
            let ts_ns = trace::at_stamp(guard.clock(), stamp);
            let number = number.unwrap_or_else(|| trace::next_seq(guard.writer_slot(), false));
            phases::mark(A::ID, Phase::Number);
            shielded((), || {
                trace::write_plain(guard, &args, ret, number.seq, ts_ns, cx.place.as_deref());
            });
            drop(number);
            if !cx.holds_nothing() {
                Cx::drop_held(std::mem::ManuallyDrop::into_inner(cx));
            }
            phases::mark(A::ID, Phase::Settle);
            return ret;
        }
    }
    let cx = std::mem::ManuallyDrop::into_inner(cx);
    traced_unclean::<A>(
        guard,
        args,
        real,
        cx,
        (ran, answer),
        (number, stamp, dur_ns),
    )
}

/// A call of a row whose checks can each decide it clean without the checks' context
/// ([`engine::Checked::quick`]): staged, forwarded and settled with no context made, and recorded
/// as [`traced_idle`] records (`TRACED`). `None`: a check wants the full path, and nothing was
/// changed or called. A check's panic before the call sends it to the full path; after it, the
/// driver's answer stands (the panic is logged).
#[inline(always)]
fn quick<A: Invoke, const TRACED: bool>(
    guard: &Guard,
    args: &A,
    real: usize,
    stamp: u64,
) -> Option<c_int> {
    let q = engine::Quick::process(TRACED);
    let mut answer = None;
    let decided = shielded(None, || {
        args.quick(&q, || {
            let ret = guard.in_driver(|| args.invoke(real));
            answer = Some(ret);
            ret
        })
    });
    let ret = decided.or(answer)?;
    phases::mark(A::ID, Phase::Driver);
    if TRACED {
        record_unchecked(guard, *args, ret, stamp, None);
    } else if ret != 0 && !A::ID.info().observed {
        explain_failure(args, ret, guard.call_number());
    }
    Some(ret)
}

/// Whether a traced call of a quick row may take the quick path: its record would be a clean
/// call's (no duration, no stack; a first map's stack is the check's to decline,
/// [`engine::Quick::recorded`]).
#[inline(always)]
fn quick_recordable<A: Invoke>() -> bool {
    !engine::options().durations && !stack_wanted::<A>(false, false)
}

/// A traced call that is not clean: a finding, a covered failure to explain, a duration or a
/// stack to record, or a check that panicked.
#[cold]
#[inline(never)]
fn traced_unclean<A: Invoke>(
    guard: &Guard,
    args: A,
    real: usize,
    cx: Cx,
    answered: (bool, Option<(Outcome, c_int)>),
    held: (Option<crate::writer::Number>, u64, Option<u64>),
) -> c_int {
    finish::<A, true>(guard, args, real, cx, answered, held)
}

/// Misuse a known driver does not return from, reported before the call
/// ([`engine::before_call_findings`]), under the record's number when traced (`number`: where
/// it is held), else under the call's number.
#[cold]
#[inline(never)]
fn report_early<A: Invoke, const TRACED: bool>(
    cx: &mut Cx,
    args: &A,
    guard: &Guard,
    number: Option<&mut Option<crate::writer::Number>>,
) {
    let early = engine::before_call_findings(cx);
    if !early.is_empty() {
        let seq_shown = match number {
            Some(number) => {
                number
                    .insert(trace::next_seq(guard.writer_slot(), false))
                    .seq
            }
            None => guard.call_number(),
        };
        report_before_call(args, early, seq_shown);
    }
}

/// An untraced call that is not clean: something found, a covered failure to explain, or a
/// check that panicked.
#[cold]
#[inline(never)]
fn unclean<A: Invoke>(
    guard: &Guard,
    args: A,
    real: usize,
    cx: Cx,
    ran: bool,
    answer: Option<(Outcome, c_int)>,
) -> c_int {
    finish::<A, false>(guard, args, real, cx, (ran, answer), (None, 0, None))
}

/// After the checks' steps: the call forwarded if a check panicked before it, its number taken,
/// and its findings settled and recorded.
#[inline(always)]
fn finish<A: Invoke, const TRACED: bool>(
    guard: &Guard,
    args: A,
    real: usize,
    cx: Cx,
    (ran, answer): (bool, Option<(Outcome, c_int)>),
    (mut number, stamp, dur_ns): (Option<crate::writer::Number>, u64, Option<u64>),
) -> c_int {
    let (outcome, ret) = answer.unwrap_or_else(|| {
        // A check panicked before the call: forward it untouched.
        let ret = guard.in_driver(|| args.invoke(real));
        (Outcome::Returned(ret), ret)
    });
    let ts_ns = if TRACED {
        trace::at_stamp(guard.clock(), stamp)
    } else {
        0
    };
    let seq = match (TRACED, &number) {
        (false, _) => 0,
        (true, Some(n)) => n.seq,
        (true, None) => {
            number
                .insert(trace::next_seq(guard.writer_slot(), false))
                .seq
        }
    };
    phases::mark(A::ID, Phase::Number);
    if ran {
        settle_or_record::<A, TRACED>(guard, args, cx, (outcome, ret), seq, ts_ns, dur_ns);
    }
    drop(number);
    phases::mark(A::ID, Phase::Settle);
    ret
}

/// A traced call whose row has no check with anything to do now: forwarded and recorded
/// without the checks' context (what they would record is nothing), as the untraced path
/// forwards it. A covered failure is settled (explained) as on the full path. Inlined: out of
/// line it read no fewer lines under callgrind, and on R580 two A/B windows put +10 and +30 ns
/// on the idle calls (a call, and another code page).
#[inline(always)]
fn traced_idle<A: Invoke>(guard: &Guard, args: A, real: usize, stamp: u64) -> c_int {
    let timed = engine::options().durations;
    let start = if timed {
        trace::now_on(guard.clock())
    } else {
        0
    };
    let ret = guard.in_driver(|| args.invoke(real));
    phases::mark(A::ID, Phase::Driver);
    let dur_ns = timed.then(|| trace::now_on(guard.clock()).saturating_sub(start));
    record_unchecked(guard, args, ret, stamp, dur_ns);
    ret
}

/// The record of a traced call no check's context saw ([`traced_idle`], [`quick`]): numbered once
/// the driver returned, a covered failure settled (explained) as on the full path, else the
/// plain record (with its duration and stack where wanted).
#[inline(always)]
fn record_unchecked<A: Invoke>(
    guard: &Guard,
    args: A,
    ret: c_int,
    stamp: u64,
    dur_ns: Option<u64>,
) {
    let ts_ns = trace::at_stamp(guard.clock(), stamp);
    let number = trace::next_seq(guard.writer_slot(), false);
    phases::mark(A::ID, Phase::Number);
    let outcome = Outcome::Returned(ret);
    if ret != 0 && !A::ID.info().observed {
        let cx = process_cx(guard);
        settle_or_record::<A, true>(guard, args, cx, (outcome, ret), number.seq, ts_ns, dur_ns);
    } else if dur_ns.is_none() && !stack_wanted::<A>(false, false) {
        shielded((), || {
            trace::write_plain(guard, &args, ret, number.seq, ts_ns, None);
        });
    } else {
        shielded((), || {
            let extra = Extra {
                dur_ns,
                place: None,
                stack: accused_stack::<A>(false, false),
            };
            record(
                Some(guard),
                &args,
                outcome,
                ret,
                number.seq,
                ts_ns,
                &extra,
                &[],
            );
        });
    }
    drop(number);
    phases::mark(A::ID, Phase::Settle);
}

/// The check context of a call on the guard's thread: the process's driver, state and options.
#[inline(always)]
fn process_cx(guard: &Guard) -> Cx<'static> {
    Cx::new(
        engine::driver(),
        engine::states(),
        engine::options(),
        guard.shard(),
    )
}

/// After a call whose checks ran: its findings settled, reported and recorded, or (none, and
/// not a covered failure) its plain record.
#[inline(always)]
fn settle_or_record<A: engine::Checked, const TRACED: bool>(
    guard: &Guard,
    args: A,
    mut cx: Cx,
    (outcome, ret): (Outcome, c_int),
    seq: u64,
    ts_ns: u64,
    dur_ns: Option<u64>,
) {
    if !cx.is_clean() || (ret != 0 && !A::ID.info().observed) {
        // Findings to settle, or a covered call that failed (explained in `settle`).
        let seq_shown = if TRACED { seq } else { guard.call_number() };
        shielded((), move || {
            settle_and_record(
                guard,
                args,
                cx,
                outcome,
                ret,
                (seq, seq_shown),
                ts_ns,
                dur_ns,
                TRACED,
            );
        });
    } else if TRACED
        && dur_ns.is_none()
        && outcome == Outcome::Returned(ret)
        && !stack_wanted::<A>(cx.stack_refused, cx.stack_wanted)
    {
        shielded((), || {
            trace::write_plain(guard, &args, ret, seq, ts_ns, cx.place.as_deref());
        });
        cx.dispose();
    } else if TRACED {
        shielded((), || {
            let mut extra = Extra::of(dur_ns, &mut cx);
            extra.stack = accused_stack::<A>(cx.stack_refused, cx.stack_wanted);
            record(Some(guard), &args, outcome, ret, seq, ts_ns, &extra, &[]);
        });
        cx.dispose();
    }
}

/// A covered call a signal handler made while its thread was in the shim's own work (which may
/// hold the checks' locks, or be in `malloc`) or in a driver call the shim forwarded (which the
/// checks' own questions to the driver would re-enter): forwarded as without the shim and
/// numbered once the driver returned, as every call is; then kept, without a lock or an
/// allocation, and checked and recorded by its thread when it leaves the shim
/// ([`crate::deferred`], [`check_kept`]). Its number comes from the process's counter: it is
/// held past the handler's return. With no room to keep it, it is recorded now, unchecked, and
/// counted as such.
#[cold]
#[inline(never)]
fn interrupted<A: Invoke, const TRACED: bool>(args: A) -> c_int {
    let Some(real) = loader::resolved(A::ID).or_else(|| loader::real_function(A::ID)) else {
        return A::ID.info().api.not_supported();
    };
    // Forwarded for the program, even where it interrupted one of the shim's own questions.
    if !TRACED && !A::CHECKED && !A::OBSERVE_ONLY {
        return crate::guard::not_asking(|| args.invoke(real));
    }
    let t = if TRACED { trace::now() } else { 0 };
    let ret = crate::guard::not_asking(|| args.invoke(real));
    let number = TRACED.then(|| crate::guard::writer_slot(|slot| trace::next_seq(slot, true)));
    let owner = crate::guard::kept_call_owner();
    match crate::deferred::keep(owner, args, ret, t, number, check_kept::<A, TRACED>) {
        Ok(()) => crate::guard::mark_kept(),
        Err((args, number)) => {
            crate::deferred::count_unchecked();
            if let Some(number) = number {
                crate::guard::interrupting(|| {
                    shielded((), || {
                        record(
                            None,
                            &args,
                            Outcome::Returned(ret),
                            ret,
                            number.seq,
                            t,
                            &Extra::default(),
                            &[],
                        );
                    });
                });
            }
        }
    }
    ret
}

/// A call [`interrupted`] kept, checked and recorded by its thread as it leaves the shim, as
/// [`wrapped`] would have once the driver returned `ret` (its strict mode aside: the call was
/// made already). Its pointers point at copies of what the driver wrote or read.
pub fn check_kept<A: Invoke, const TRACED: bool>(
    guard: &Guard,
    args: A,
    ret: c_int,
    ts_ns: u64,
    number: Option<crate::writer::Number>,
) {
    let outcome = Outcome::Returned(ret);
    let seq = number.as_ref().map_or(0, |n| n.seq);
    let mut cx = process_cx(guard);
    // Checked as the thread leaves the shim: the stack now is not the handler's call's.
    cx.stack_refused = true;
    let ran = shielded(false, || {
        args.run(&mut cx, |_| outcome);
        true
    });
    if ran {
        settle_or_record::<A, TRACED>(guard, args, cx, (outcome, ret), seq, ts_ns, None);
    }
    drop(number);
}

/// A call only observers run on (a free, a destroy), with no trace: nothing is decided before the
/// call, so it goes first, and they see its answer. No guard is needed: observers only forget
/// state, and a driver that frees through its own export is observed correctly too.
#[inline(always)]
fn observe<A: Invoke>(args: A) -> c_int {
    match loader::resolved(A::ID) {
        Some(real) => observe_with(args, real),
        None => observe_first(args),
    }
}

/// [`observe`] on the first use of the function, or when the driver lacks it.
#[cold]
#[inline(never)]
fn observe_first<A: Invoke>(args: A) -> c_int {
    match loader::real_function(A::ID) {
        Some(real) => observe_with(args, real),
        None => missing(args),
    }
}

#[inline(always)]
fn observe_with<A: Invoke>(args: A, real: usize) -> c_int {
    let ret = args.invoke(real);
    if ret != 0 && !A::ID.info().observed {
        explain_failure(&args, ret, 0);
    }
    if ret == 0 {
        shielded((), || {
            if A::OBSERVED_QUICKLY && args.quick(&engine::Quick::process(false), || ret).is_some() {
                return;
            }
            let mut cx = Cx::new(engine::driver(), engine::states(), engine::options(), 0);
            args.run(&mut cx, |_| Outcome::Returned(ret));
            cx.dispose();
        });
    }
    ret
}

/// A covered call that failed on a path that settles nothing (no check before it, no trace): its
/// `call.failed` explanation, as `settle` gives it on the full path.
#[cold]
#[inline(never)]
fn explain_failure<A: CallArgs>(args: &A, ret: c_int, seq: u64) {
    shielded((), || {
        let found = vec![engine::failure_finding(engine::states(), A::ID.info(), ret)];
        let at = At {
            pid: trace::pid(),
            tid: trace::tid(),
            seq,
        };
        let shown = engine::report(
            engine::states(),
            found,
            || describe_call(args, Outcome::Returned(ret)),
            at,
        );
        engine::halt_if_asked(&shown);
    });
}

/// The driver (or this function of it) is missing: the documented "not supported" code.
#[cold]
#[inline(never)]
fn missing<A: CallArgs>(args: A) -> c_int {
    shielded((), || loader::warn_missing(A::ID));
    let ret = A::ID.info().api.not_supported();
    if trace::enabled() {
        shielded((), || {
            let seq = trace::next_seq_shared();
            record(
                None,
                &args,
                Outcome::NotCalled,
                ret,
                seq,
                trace::now(),
                &Extra::default(),
                &[],
            );
        });
    }
    ret
}

/// Findings reported before the call is forwarded (a known driver does not return from it): on
/// stderr, and in the trace as a `before-call` event naming the call's function and number
/// (`call_fn`, `call_seq`).
#[cold]
#[inline(never)]
fn report_before_call<A: CallArgs>(args: &A, found: Vec<Finding>, seq_shown: u64) {
    shielded((), || {
        let at = At {
            pid: trace::pid(),
            tid: trace::tid(),
            seq: seq_shown,
        };
        let recorded = engine::report(
            engine::states(),
            found,
            || describe_call(args, Outcome::NotCalled),
            at,
        );
        if !recorded.is_empty() {
            trace::write_event("before-call", &recorded, |w| {
                w.kv_ident("call_fn", A::ID.info().symbol);
                w.kv_u64("call_seq", seq_shown);
            });
        }
    });
}

/// A call with findings: settle them against the driver's answer, report, record, maybe halt.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn settle_and_record<A: engine::Checked>(
    guard: &Guard,
    args: A,
    cx: Cx,
    outcome: Outcome,
    ret: c_int,
    (seq, seq_shown): (u64, u64),
    ts_ns: u64,
    dur_ns: Option<u64>,
    traced: bool,
) {
    let mut cx = cx;
    let mut extra = Extra::of(dur_ns, &mut cx);
    if traced {
        extra.stack = accused_stack::<A>(cx.stack_refused, cx.stack_wanted);
    }
    let found = engine::settle(A::ID.info(), cx, outcome);
    let recorded = if found.is_empty() {
        found
    } else {
        let at = At {
            pid: trace::pid(),
            tid: trace::tid(),
            seq: seq_shown,
        };
        engine::report(
            engine::states(),
            found,
            || describe_call(&args, outcome),
            at,
        )
    };
    if traced {
        if !recorded.is_empty() {
            // Its findings carry the call's stack already.
            extra.stack = Vec::new();
        }
        record(
            Some(guard),
            &args,
            outcome,
            ret,
            seq,
            ts_ns,
            &extra,
            &recorded,
        );
    }
    engine::halt_if_asked(&recorded);
}

/// What a call record says besides its call and findings, when there is something to say.
#[derive(Default)]
struct Extra {
    /// The driver call's duration (`durations=1`).
    dur_ns: Option<u64>,
    /// Where the checks say the call acted ([`Cx::place`]).
    place: Option<Box<engine::Place>>,
    /// The call's stack, for a report-phase rule that may name the call ([`accused_stack`]).
    stack: Vec<crate::stack::Frame>,
}

/// The stack of a traced call a report-phase rule may name: every call of a function such a
/// rule names, except the frequent ones ([`sharecheck_core::rules::ACCUSED_ON_REQUEST`]), whose
/// checks ask where it matters (`requested`: [`Cx::keep_stack`]). Empty otherwise, with
/// `stack_depth=0`, and when `refused` (the call is checked away from its own stack).
#[inline(always)]
fn accused_stack<A: engine::Checked>(refused: bool, requested: bool) -> Vec<crate::stack::Frame> {
    if !stack_wanted::<A>(refused, requested) {
        return Vec::new();
    }
    accused_stack_now()
}

/// Whether [`accused_stack`] takes a stack.
#[inline(always)]
fn stack_wanted<A: engine::Checked>(refused: bool, requested: bool) -> bool {
    use sharecheck_core::rules::Accused;
    !refused
        && match A::ACCUSED {
            Accused::Never => false,
            Accused::Always => true,
            Accused::OnRequest => requested,
        }
}

#[cold]
#[inline(never)]
fn accused_stack_now() -> Vec<crate::stack::Frame> {
    match engine::options().stack_depth {
        0 => Vec::new(),
        _ => engine::capture_stack(engine::options()),
    }
}

impl Extra {
    /// The duration, and what the checks recorded in `cx` (taken out of it).
    #[inline]
    fn of(dur_ns: Option<u64>, cx: &mut Cx) -> Extra {
        Extra {
            dur_ns,
            place: cx.place.take(),
            stack: Vec::new(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn record<A: CallArgs>(
    guard: Option<&Guard>,
    args: &A,
    outcome: Outcome,
    ret: c_int,
    seq: u64,
    ts_ns: u64,
    extra: &Extra,
    findings: &[Finding],
) {
    trace::write_call(
        guard,
        args,
        &trace::CallRecord {
            info: A::ID.info(),
            outcome,
            ret,
            seq,
            t: ts_ns,
            dur_ns: extra.dur_ns,
            place: extra.place.as_deref(),
            stack: &extra.stack,
            findings,
        },
    );
}

/// `fn(arg=value, ...)` for the stderr line of a finding.
pub fn describe_call<A: CallArgs>(args: &A, outcome: Outcome) -> String {
    let mut buf = Vec::new();
    let mut w =
        sharecheck_core::json::JsonOut::with_fingerprint(&mut buf, crate::fingerprint::fingerprint);
    w.begin_object();
    args.encode(&mut w, outcome);
    w.end_object();
    let json = String::from_utf8_lossy(&buf).into_owned();
    let inner = json.trim_start_matches('{').trim_end_matches('}');
    let mut text = String::from(A::ID.info().symbol);
    text.push('(');
    text.push_str(
        &inner
            .replace(",\"", ", \"")
            .replace("\":", "=")
            .replace('"', ""),
    );
    text.push(')');
    text
}
