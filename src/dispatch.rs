//! The path every wrapped call takes.
//!
//! enter the guard -> find the real function -> predict (rules) -> forward unchanged, or in
//! `mode=strict` refuse a call the contract says must fail -> compare and record.
//! A panic in the shim's own work degrades that call to pure forwarding plus one log line; the
//! program always gets the driver's own return value and out-parameters (strict mode aside).

use crate::guard::{shielded, Guard};
use crate::rules::{self, Prediction};
use crate::{loader, trace};
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::CallArgs;
use std::ffi::c_int;

/// Runs one interposed call. `invoke` calls the real function at the given address.
#[inline]
pub fn call<A: CallArgs>(args: A, invoke: impl FnOnce(usize) -> c_int) -> c_int {
    let info = A::ID.info();
    let Some(_guard) = Guard::enter() else {
        // Re-entered (the shim's own lookups, or a driver calling a wrapped symbol): forward only.
        return match shielded(None, || loader::real_function(A::ID)) {
            Some(real) => invoke(real),
            None => info.api.not_supported(),
        };
    };
    let seq = trace::next_seq();
    let ts_ns = trace::wall_ns();
    let Some(real) = shielded(None, || loader::real_function(A::ID)) else {
        shielded((), || loader::warn_missing(A::ID));
        let ret = info.api.not_supported();
        after_call(
            &args,
            Prediction::default(),
            Outcome::NotCalled,
            ret,
            seq,
            ts_ns,
            0,
        );
        return ret;
    };
    let prediction = shielded(Prediction::default(), || rules::predict(&args));
    if let Some(code) = shielded(None, || prediction.refusal()) {
        after_call(&args, prediction, Outcome::NotCalled, code, seq, ts_ns, 0);
        return code;
    }
    let start = trace::monotonic_ns();
    let ret = invoke(real);
    let dur_ns = trace::monotonic_ns().saturating_sub(start);
    after_call(
        &args,
        prediction,
        Outcome::Returned(ret),
        ret,
        seq,
        ts_ns,
        dur_ns,
    );
    ret
}

fn after_call<A: CallArgs>(
    args: &A,
    prediction: Prediction,
    outcome: Outcome,
    ret: c_int,
    seq: u64,
    ts_ns: u64,
    dur_ns: u64,
) {
    shielded((), || {
        let info = A::ID.info();
        let found = rules::settle(info, prediction, outcome);
        let recorded = if found.is_empty() {
            found
        } else {
            rules::report(
                found,
                || describe_call(args, outcome),
                trace::pid(),
                trace::tid(),
                seq,
            )
        };
        trace::write_call(
            args,
            &trace::CallRecord {
                info,
                outcome,
                ret,
                seq,
                ts_ns,
                dur_ns,
                findings: &recorded,
            },
        );
        rules::halt_if_asked(&recorded);
    });
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
