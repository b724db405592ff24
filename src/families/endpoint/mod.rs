//! The logical endpoint family (CUDA 13.3): checks for the `cuLogicalEndpoint*` functions.
//! Catalogue: `sharecheck_core::rules::endpoint`.
//!
//! This first part tracks the life of ids in this process: the ranges `cuLogicalEndpointIdReserve`
//! handed out, the ids a create or an import holds until their destroy, and what a release gives
//! back. Findings are decided from that state and withdrawn when the driver accepts the call
//! anyway (the state did not see something).

#[cfg(test)]
mod tests;

use crate::engine::state::{FamilyState, Lifetime};
use crate::engine::{Check, Cx};
use parking_lot::Mutex;
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::args;
use sharecheck_core::rules::endpoint::cuda;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::c_int;

pub struct Reserve;
pub struct Release;
pub struct Create;
pub struct Import;
pub struct Destroy;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const RESERVE: super::Reserve = super::Reserve;
    pub const RELEASE: super::Release = super::Release;
    pub const CREATE: super::Create = super::Create;
    pub const IMPORT: super::Import = super::Import;
    pub const DESTROY: super::Destroy = super::Destroy;
}

/// What the family tracks: the ids reserved (as ranges `start -> end`, end excluded, merged) and
/// the ids that hold an endpoint (created or imported, not destroyed). A forked child starts
/// empty, as every family does.
#[derive(Default)]
pub struct EndpointState {
    ids: Mutex<Ids>,
}

#[derive(Default)]
struct Ids {
    reserved: BTreeMap<u64, u64>,
    live: BTreeSet<u32>,
}

impl FamilyState for EndpointState {
    fn forget(&self, _: Lifetime) {}
}

impl Ids {
    /// The first id of `[start, end)` that is not reserved.
    fn first_unreserved(&self, start: u64, end: u64) -> Option<u64> {
        let mut at = start;
        // The range that holds `at` (if any), then the ones after it, until `end` is covered.
        let mut ranges = self
            .reserved
            .range(..=at)
            .next_back()
            .filter(|(_, &e)| e > at)
            .into_iter()
            .chain(self.reserved.range(at + 1..end));
        while at < end {
            match ranges.next() {
                Some((&s, &e)) if s <= at => at = at.max(e),
                _ => return Some(at),
            }
        }
        None
    }

    fn reserve(&mut self, start: u64, end: u64) {
        let (mut start, mut end) = (start, end);
        let touching: Vec<(u64, u64)> = self
            .reserved
            .range(..=end)
            .filter(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.reserved.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.reserved.insert(start, end);
    }

    fn release(&mut self, start: u64, end: u64) {
        let overlapping: Vec<(u64, u64)> = self
            .reserved
            .range(..end)
            .filter(|(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            self.reserved.remove(&s);
            if s < start {
                self.reserved.insert(s, start);
            }
            if e > end {
                self.reserved.insert(end, e);
            }
        }
        let gone: Vec<u32> = self
            .live
            .range(start as u32..)
            .take_while(|&&id| u64::from(id) < end)
            .copied()
            .collect();
        for id in gone {
            self.live.remove(&id);
        }
    }
}

/// `[base, base + count)` as 64-bit bounds (no overflow for any `u32` pair).
fn span(base: u32, count: u32) -> (u64, u64) {
    (u64::from(base), u64::from(base) + u64::from(count))
}

impl Check<args::cuLogicalEndpointIdReserve> for Reserve {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuLogicalEndpointIdReserve, _: &mut Cx) {}
    fn after(&self, a: &args::cuLogicalEndpointIdReserve, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(base) = a.baseLeId.written(Outcome::Returned(ret)) {
            let (start, end) = span(base.0, a.count.0);
            cx.states.endpoint.ids.lock().reserve(start, end);
        }
    }
}

impl Check<args::cuLogicalEndpointIdRelease> for Release {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointIdRelease, cx: &mut Cx) {
        let (start, end) = span(a.baseLeId.0, a.count.0);
        let (unreserved, live) = {
            let ids = cx.states.endpoint.ids.lock();
            let live: Vec<u32> = ids
                .live
                .range(a.baseLeId.0..)
                .take_while(|&&id| u64::from(id) < end)
                .take(8)
                .copied()
                .collect();
            (ids.first_unreserved(start, end), live)
        };
        if let Some(id) = unreserved {
            cx.tracked(&cuda::RELEASE_NOT_RESERVED, || {
                format!(
                    "id {id} of [{start}, {end}) was not reserved by this process (or was \
                     released already)"
                )
            });
        } else if !live.is_empty() {
            cx.tracked(&cuda::RELEASE_NOT_DESTROYED, || {
                let list: Vec<String> = live.iter().map(u32::to_string).collect();
                format!(
                    "id(s) {} of [{start}, {end}) still hold a logical endpoint: destroy it first",
                    list.join(", ")
                )
            });
        }
    }
    fn after(&self, a: &args::cuLogicalEndpointIdRelease, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            let (start, end) = span(a.baseLeId.0, a.count.0);
            cx.states.endpoint.ids.lock().release(start, end);
        }
    }
}

/// Create and import: the id must be reserved; once accepted, it holds an endpoint.
fn use_id(cx: &mut Cx, rule: &'static sharecheck_core::rules::Rule, id: u32) {
    let unreserved = cx
        .states
        .endpoint
        .ids
        .lock()
        .first_unreserved(u64::from(id), u64::from(id) + 1)
        .is_some();
    if unreserved {
        cx.tracked(rule, || {
            format!("leId {id} was not reserved by this process (cuLogicalEndpointIdReserve)")
        });
    }
}

fn holds_endpoint(cx: &mut Cx, id: u32, ret: c_int) {
    if ret == 0 {
        cx.states.endpoint.ids.lock().live.insert(id);
    }
}

impl Check<args::cuLogicalEndpointCreate> for Create {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointCreate, cx: &mut Cx) {
        use_id(cx, &cuda::CREATE_NOT_RESERVED, a.leId.0);
    }
    fn after(&self, a: &args::cuLogicalEndpointCreate, _: (), ret: c_int, cx: &mut Cx) {
        holds_endpoint(cx, a.leId.0, ret);
    }
}

impl Check<args::cuLogicalEndpointImport> for Import {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointImport, cx: &mut Cx) {
        use_id(cx, &cuda::IMPORT_NOT_RESERVED, a.leId.0);
    }
    fn after(&self, a: &args::cuLogicalEndpointImport, _: (), ret: c_int, cx: &mut Cx) {
        holds_endpoint(cx, a.leId.0, ret);
    }
}

impl Check<args::cuLogicalEndpointDestroy> for Destroy {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuLogicalEndpointDestroy, _: &mut Cx) {}
    fn after(&self, a: &args::cuLogicalEndpointDestroy, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            cx.states.endpoint.ids.lock().live.remove(&a.leId.0);
        }
    }
}
