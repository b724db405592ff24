//! The path every wrapped call takes.
//!
//! enter the guard -> find the real function -> check -> forward unchanged -> record.
//! A panic in the shim's own work degrades that call to pure forwarding plus one log line; the
//! program always gets the driver's own return value and out-parameters.

use crate::findings::{self, Finding};
use crate::guard::Guard;
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
        return match crate::guard::shielded(None, || loader::real_function(A::ID)) {
            Some(real) => invoke(real),
            None => info.api.not_supported(),
        };
    };
    let seq = trace::next_seq();
    let ts_ns = trace::wall_ns();
    let Some(real) = crate::guard::shielded(None, || loader::real_function(A::ID)) else {
        crate::guard::shielded((), || loader::warn_missing(A::ID));
        let ret = info.api.not_supported();
        after_call(&args, Outcome::NotCalled, ret, seq, ts_ns, 0);
        return ret;
    };
    let start = trace::monotonic_ns();
    let ret = invoke(real);
    let dur_ns = trace::monotonic_ns().saturating_sub(start);
    after_call(&args, Outcome::Returned(ret), ret, seq, ts_ns, dur_ns);
    ret
}

fn after_call<A: CallArgs>(
    args: &A,
    outcome: Outcome,
    ret: c_int,
    seq: u64,
    ts_ns: u64,
    dur_ns: u64,
) {
    crate::guard::shielded((), || {
        let found: Vec<Finding> = Vec::new();
        if !found.is_empty() {
            let call = describe_call(args, outcome);
            findings::report(&found, &call, trace::pid(), trace::tid(), seq);
        }
        trace::write_call(
            args,
            &trace::CallRecord {
                info: A::ID.info(),
                outcome,
                ret,
                seq,
                ts_ns,
                dur_ns,
                findings: &found,
            },
        );
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
    text.push_str(&inner.replace("\":", "=").replace('"', ""));
    text.push(')');
    text
}
