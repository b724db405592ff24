//! The rule families: each is one folder of checks with its own tracked state. Their catalogue is
//! `sharecheck_core::rules::<family>`; where their checks run is `sharecheck_core::check_table!`.
//!
//! Adding a family: a folder here (its checks in `checks`, its state implementing
//! `engine::state::FamilyState` with a slot of its own), a catalogue file in `core/src/rules/`,
//! and rows in the table. The table is wired here: each row's checks composed into the
//! function's [`Checked`] (the engine runs them, and knows no family by name).

pub mod attach;
pub mod endpoint;
pub mod ipc;
pub mod lifecycle;
pub mod multicast;
pub mod peer;
pub mod pool;
pub mod vmm;

use crate::engine::state::{FamilyState, FAMILY_SLOTS};
use crate::engine::{has_before, has_quick, Check, Checked, Cx, Quick};
use sharecheck_core::ffi::Outcome;

/// A rule "flags must be 0" (HIP's VMM and pool calls): flagged with the value the call passed.
pub fn flags_not_zero(cx: &mut Cx, rule: &'static sharecheck_core::rules::Rule, flags: u64) {
    if flags != 0 {
        cx.flag(rule, || format!("flags is {flags:#x}; it must be 0"));
    }
}

/// Every family's slot is its own and in range, checked at compile time: `States::family`
/// trusts the slot's type on its fast path.
pub const SLOTS_DISTINCT: () = {
    let slots = [
        <peer::PeerState as FamilyState>::SLOT,
        <ipc::IpcState as FamilyState>::SLOT,
        <attach::AttachState as FamilyState>::SLOT,
        <endpoint::EndpointState as FamilyState>::SLOT,
        <vmm::VmmState as FamilyState>::SLOT,
        <pool::PoolState as FamilyState>::SLOT,
        <multicast::MulticastState as FamilyState>::SLOT,
    ];
    let mut i = 0;
    while i < slots.len() {
        assert!(slots[i] < FAMILY_SLOTS, "a family's slot is out of range");
        let mut j = i + 1;
        while j < slots.len() {
            assert!(slots[i] != slots[j], "two families share a slot");
            j += 1;
        }
        i += 1;
    }
};
const _: () = SLOTS_DISTINCT;

/// The checks of a row, nested so that each `before` has its own plan and every `after` runs.
macro_rules! compose {
    ($args:ident, $cx:ident, $forward:ident;) => { $forward($cx) };
    ($args:ident, $cx:ident, $forward:ident; $family:ident :: $check:ident $(, $rest_family:ident :: $rest_check:ident)*) => {{
        let check = &$family::checks::$check;
        let info = &sharecheck_core::rules::$family::checks::$check;
        $cx.running(info);
        let plan = Check::<Self>::before(check, $args, $cx);
        let outcome = compose!($args, $cx, $forward; $($rest_family :: $rest_check),*);
        if let Outcome::Returned(ret) = outcome {
            $cx.running(info);
            Check::<Self>::after(check, $args, plan, ret, $cx);
        }
        outcome
    }};
}

/// A row's quick path ([`Checked::quick`]), nested as `compose!`: a check whose `quick` says
/// `Some` hears how the call ended, `NotCalled` when a later one sent it to the full path.
macro_rules! quick {
    ($args:ident, $q:ident, $call:ident;) => { Some($call()) };
    ($args:ident, $q:ident, $call:ident; $family:ident :: $check:ident $(, $rest_family:ident :: $rest_check:ident)*) => {{
        let check = &$family::checks::$check;
        match Check::<Self>::quick(check, $args, $q) {
            None => None,
            Some(plan) => {
                let answer = quick!($args, $q, $call; $($rest_family :: $rest_check),*);
                let outcome = answer.map_or(Outcome::NotCalled, Outcome::Returned);
                Check::<Self>::quick_after(check, $args, plan, outcome, $q);
                answer
            }
        }
    }};
}

macro_rules! define_checked {
    ($( $sym:ident => $( $family:ident :: $check:ident ),* ; )*) => {
        $(
            impl Checked for sharecheck_core::functions::args::$sym {
                const OBSERVE_ONLY: bool =
                    true $( && !has_before::<Self, _>(&$family::checks::$check) )*;
                #[inline(always)]
                fn idle(states: &crate::engine::state::States) -> bool {
                    let _ = states;
                    true $( && Check::<Self>::idle(&$family::checks::$check, states) )*
                }
                #[inline(always)]
                fn run(&self, cx: &mut Cx, forward: impl FnOnce(&mut Cx) -> Outcome) -> Outcome {
                    let _ = &cx;
                    compose!(self, cx, forward; $( $family :: $check ),*)
                }
                // A row of no check, or of after-steps only, takes a shorter path before this one.
                const QUICK: bool = !Self::OBSERVE_ONLY
                    $( && has_quick::<Self, _>(&$family::checks::$check) )*;
                const OBSERVED_QUICKLY: bool = Self::OBSERVE_ONLY
                    $( && has_quick::<Self, _>(&$family::checks::$check) )*;
                #[inline(always)]
                fn quick(&self, q: &Quick, call: impl FnOnce() -> std::ffi::c_int) -> Option<std::ffi::c_int> {
                    let _ = &q;
                    quick!(self, q, call; $( $family :: $check ),*)
                }
            }
        )*
    };
}

sharecheck_core::check_table!(define_checked);
