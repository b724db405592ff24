//! The path every wrapped call takes.
//!
//! enter the guard -> find the real function -> the checks of its table row, around the call:
//! before-steps, forward unchanged (or, in `mode=strict`, refuse a call the contract says must
//! fail), after-steps -> settle, report and record. A panic in the shim's own work degrades that
//! call to pure forwarding plus one log line; the program always gets the driver's own return
//! value and out-parameters (strict mode aside). The clean path allocates nothing, formats
//! nothing and, without a trace, reads no clock.

use crate::engine::{self, At, Checked, Cx};
use crate::guard::{shielded, Guard};
use crate::{loader, trace};
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::CallArgs;
use sharecheck_core::table::is_checked;
use std::cell::Cell;
use std::ffi::c_int;

/// Runs one interposed call. `invoke` calls the real function at the given address.
#[inline]
pub fn call<A: Checked>(args: A, invoke: impl FnOnce(usize) -> c_int) -> c_int {
    let info = A::ID.info();
    let Some(_guard) = Guard::enter() else {
        // Re-entered (the shim's own lookups, or a driver calling a wrapped symbol): forward only.
        return forward_only::<A>(invoke);
    };
    let traced = trace::enabled();
    let (seq, ts_ns) = if traced {
        (trace::next_seq(), trace::wall_ns())
    } else {
        trace::count_untraced_call();
        (0, 0)
    };
    let Some(real) = shielded(None, || loader::real_function(A::ID)) else {
        shielded((), || loader::warn_missing(A::ID));
        let ret = info.api.not_supported();
        if traced {
            record(&args, Outcome::NotCalled, ret, seq, ts_ns, 0, &[]);
        }
        return ret;
    };
    if !is_checked(A::ID) && !traced {
        return invoke(real);
    }
    // The driver is called exactly once, whether or not a check panics.
    let answered: Cell<Option<(Outcome, c_int, u64)>> = Cell::new(None);
    let mut invoke = Some(invoke);
    let mut forward = |cx: &mut Cx| -> Outcome {
        if let Some(code) = cx.refusal() {
            answered.set(Some((Outcome::NotCalled, code, 0)));
            return Outcome::NotCalled;
        }
        let invoke = invoke.take().expect("the driver is called once");
        let start = if traced { trace::monotonic_ns() } else { 0 };
        let ret = invoke(real);
        let dur_ns = if traced {
            trace::monotonic_ns().saturating_sub(start)
        } else {
            0
        };
        answered.set(Some((Outcome::Returned(ret), ret, dur_ns)));
        Outcome::Returned(ret)
    };
    let cx = shielded(None, || {
        let mut cx = Cx::new(engine::driver(), engine::states(), engine::options().mode);
        args.run(&mut cx, &mut forward);
        Some(cx)
    });
    let (outcome, ret, dur_ns) = match answered.get() {
        Some(answer) => answer,
        None => {
            // A check panicked before the call: forward it untouched.
            let ret = match invoke.take() {
                Some(invoke) => invoke(real),
                None => return info.api.not_supported(),
            };
            (Outcome::Returned(ret), ret, 0)
        }
    };
    match cx {
        Some(cx) if !cx.is_clean() => shielded((), || {
            let found = engine::settle(info, cx, outcome);
            let recorded = if found.is_empty() {
                found
            } else {
                let at = At {
                    pid: trace::pid(),
                    tid: trace::tid(),
                    seq: if traced { seq } else { trace::untraced_seq() },
                };
                engine::report(
                    engine::states(),
                    found,
                    || describe_call(&args, outcome),
                    at,
                )
            };
            if traced {
                record(&args, outcome, ret, seq, ts_ns, dur_ns, &recorded);
            }
            engine::halt_if_asked(&recorded);
        }),
        _ if traced => shielded((), || record(&args, outcome, ret, seq, ts_ns, dur_ns, &[])),
        _ => {}
    }
    ret
}

fn forward_only<A: CallArgs>(invoke: impl FnOnce(usize) -> c_int) -> c_int {
    match shielded(None, || loader::real_function(A::ID)) {
        Some(real) => invoke(real),
        None => A::ID.info().api.not_supported(),
    }
}

fn record<A: CallArgs>(
    args: &A,
    outcome: Outcome,
    ret: c_int,
    seq: u64,
    ts_ns: u64,
    dur_ns: u64,
    findings: &[crate::findings::Finding],
) {
    trace::write_call(
        args,
        &trace::CallRecord {
            info: A::ID.info(),
            outcome,
            ret,
            seq,
            ts_ns,
            dur_ns,
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
