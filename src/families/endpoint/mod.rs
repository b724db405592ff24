//! The logical endpoint family (CUDA 13.3): checks for the `cuLogicalEndpoint*` functions.
//! Catalogue: `sharecheck_core::rules::endpoint`.
//!
//! What this process did with ids and endpoints is tracked here: the ranges
//! `cuLogicalEndpointIdReserve` handed out; per id, the endpoint it holds (created here, with its
//! properties and the driver's own `cuLogicalEndpointGetLimits` answer for them, or imported,
//! whose properties the handle does not tell), the devices added to a multicast team, what the
//! queries said, and the bindings per device. What the VMM memory a bind names is (its handles
//! and mappings) is the VMM family's state ([`crate::families::vmm::VmmState`]).
//!
//! A create's properties are read before the call through [`crate::guard::peek`] (the driver
//! reads them; a pointer it would fault on is not read), so a create the driver refuses is
//! explained; rules on them, and on what the driver's facts say, are certain. Rules on ids, teams,
//! readiness and bindings rest on tracked state and are withdrawn when the driver accepts the call
//! anyway (another process may share the endpoint, or ids may predate the shim). No lock is held
//! across a driver call: state is read into locals, then the driver's facts are asked.

#[cfg(test)]
mod tests;

use crate::engine::facts::MemoryKind;
use crate::engine::state::{FamilyState, Left, Lifetime};
use crate::engine::{Check, Cx};
use crate::families::vmm::{Location, VmmState};
use crate::guard::peek;
use parking_lot::Mutex;
use sharecheck_core::codes::{NOT_PERMITTED, NOT_SUPPORTED};
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use sharecheck_core::rules::endpoint::cuda;
use sharecheck_core::rules::Rule;
use std::collections::BTreeMap;
use std::ffi::c_int;

/// `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED`.
const ATTRIBUTE_FABRIC_SUPPORTED: c_int = 128;
/// `CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID`.
const ATTRIBUTE_HOST_NUMA_ID: c_int = 134;
/// `CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC`.
const FABRIC: u32 = 1;
/// `CU_LOGICAL_ENDPOINT_FLAG_COUNTED_OPS`, the one flag.
const KNOWN_FLAGS: u32 = 1;

pub struct Reserve;
pub struct Release;
pub struct Create;
pub struct AddDevice;
pub struct Query;
pub struct Bind;
pub struct Unbind;
pub struct Export;
pub struct Import;
pub struct Destroy;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const RESERVE: super::Reserve = super::Reserve;
    pub const RELEASE: super::Release = super::Release;
    pub const CREATE: super::Create = super::Create;
    pub const ADD_DEVICE: super::AddDevice = super::AddDevice;
    pub const QUERY: super::Query = super::Query;
    pub const BIND_ADDR: super::Bind = super::Bind;
    pub const BIND_MEM: super::Bind = super::Bind;
    pub const UNBIND: super::Unbind = super::Unbind;
    pub const EXPORT: super::Export = super::Export;
    pub const IMPORT: super::Import = super::Import;
    pub const DESTROY: super::Destroy = super::Destroy;
}

/// What the family tracks. A forked child starts empty, as every family does.
#[derive(Default)]
pub struct EndpointState {
    ids: Mutex<Ids>,
}

impl FamilyState for EndpointState {
    const SLOT: usize = 3;
    fn forget(&self, _: Lifetime) {}
    const FORGETS_FREED_MEMORY: bool = false;
    /// Endpoints never destroyed and ids never released (the rules of
    /// `sharecheck_core::rules::endpoint::report`).
    fn left_at_exit(&self) -> Vec<Left> {
        use sharecheck_core::rules::endpoint::report::{NEVER_DESTROYED_RULE, NEVER_RELEASED_RULE};
        let Some(ids) = self.ids.try_lock_for(crate::engine::state::AT_EXIT_WAIT) else {
            return Vec::new();
        };
        let mut left: Vec<Left> = ids
            .endpoints
            .iter()
            .map(|(&id, e)| {
                let (call, how) = match e.created {
                    Some(_) => ("cuLogicalEndpointCreate", "created"),
                    None => ("cuLogicalEndpointImport", "imported"),
                };
                Left {
                    rule: &NEVER_DESTROYED_RULE,
                    call: format!("{call}(leId={id})"),
                    message: format!(
                        "leId {id}, {how} by this process, was never destroyed \
                         (cuLogicalEndpointDestroy) before the process exited"
                    ),
                }
            })
            .collect();
        left.extend(ids.reserved.iter().map(|(&start, &end)| Left {
            rule: &NEVER_RELEASED_RULE,
            call: format!("cuLogicalEndpointIdReserve(...) -> [{start}, {end})"),
            message: format!(
                "ids [{start}, {end}) reserved by this process were never released \
                 (cuLogicalEndpointIdRelease) before the process exited"
            ),
        }));
        left
    }
    /// An endpoint imported.
    fn imports_from_other_processes(&self) -> bool {
        self.ids
            .try_lock_for(crate::engine::state::AT_EXIT_WAIT)
            .is_some_and(|ids| ids.endpoints.values().any(|e| e.created.is_none()))
    }
}

#[derive(Default)]
struct Ids {
    /// Reserved ranges `start -> end` (end excluded), merged.
    reserved: BTreeMap<u64, u64>,
    /// Ids that hold an endpoint.
    endpoints: BTreeMap<u32, Endpoint>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Unicast { owner: i32 },
    Multicast { team: u32 },
}

/// What a create in this process said about its endpoint.
#[derive(Clone, Copy, Debug)]
struct Created {
    shape: Shape,
    size: u64,
    handle_types: u32,
    /// `(bindAlignment, maxSize)` from the driver for these properties.
    limits: Option<(u64, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readiness {
    NotQueried,
    /// Queried, and every answer so far was 0.
    NotReady,
    Ready,
}

#[derive(Clone, Debug)]
struct Endpoint {
    /// `None`: imported (the handle does not say its properties).
    created: Option<Created>,
    /// Devices this process added (multicast).
    members: Vec<i32>,
    readiness: Readiness,
    /// Any bind by this process, even one unbound since.
    bound_ever: bool,
    /// Per device: offset -> the live binding there.
    bindings: BTreeMap<i32, BTreeMap<u64, Binding>>,
}

impl Endpoint {
    fn new(created: Option<Created>) -> Endpoint {
        Endpoint {
            created,
            members: Vec::new(),
            readiness: Readiness::NotQueried,
            bound_ever: false,
            bindings: BTreeMap::new(),
        }
    }

    fn alignment(&self) -> Option<u64> {
        self.created?.limits.map(|(alignment, _)| alignment)
    }

    /// Whether only externally shareable memory may be bound: a multicast endpoint created
    /// with a FABRIC handle type, or an imported one (an imported unicast endpoint cannot be
    /// bound at all, so any memory it is bound to breaks one of the two sentences).
    fn shareable_only(&self) -> bool {
        self.created.is_none_or(|c| {
            matches!(c.shape, Shape::Multicast { .. }) && c.handle_types & FABRIC != 0
        })
    }
}

/// One bind: its size and the memory behind it.
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    size: u64,
    memory: BindMemory,
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.memory {
            BindMemory::Address(ptr) => write!(f, "{:#x} bytes at {ptr:#x}", self.size),
            BindMemory::Handle { handle, offset } => write!(
                f,
                "{:#x} bytes of memHandle {handle:#x} from {offset:#x}",
                self.size
            ),
        }
    }
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
        let gone: Vec<u32> = self.in_range(start, end).map(|(&id, _)| id).collect();
        for id in gone {
            self.endpoints.remove(&id);
        }
    }

    /// The endpoints of the ids `[start, end)`.
    fn in_range(&self, start: u64, end: u64) -> impl Iterator<Item = (&u32, &Endpoint)> {
        self.endpoints
            .range(start.min(u64::from(u32::MAX)) as u32..)
            .take_while(move |(&id, _)| u64::from(id) < end)
    }
}

/// `[base, base + count)` as 64-bit bounds (no overflow for any `u32` pair).
fn span(base: u32, count: u32) -> (u64, u64) {
    (u64::from(base), u64::from(base) + u64::from(count))
}

/// A copy of the endpoint an id holds (taken under the lock, read after it).
fn endpoint(cx: &Cx, id: u32) -> Option<Endpoint> {
    cx.states
        .family::<EndpointState>()
        .ids
        .lock()
        .endpoints
        .get(&id)
        .cloned()
}

fn with_endpoint(cx: &Cx, id: u32, change: impl FnOnce(&mut Endpoint)) {
    if let Some(e) = cx
        .states
        .family::<EndpointState>()
        .ids
        .lock()
        .endpoints
        .get_mut(&id)
    {
        change(e);
    }
}

/// The endpoint `id` holds, or the `endpoint.no-endpoint-on-id` finding.
fn endpoint_or_report(cx: &mut Cx, id: u32) -> Option<Endpoint> {
    let found = endpoint(cx, id);
    if found.is_none() {
        cx.tracked(&cuda::NO_ENDPOINT, || {
            format!(
                "leId {id} holds no logical endpoint in this process (never created or \
                 imported, or destroyed)"
            )
        });
    }
    found
}

fn misaligned(alignment: u64, values: &[(&str, u64)]) -> Option<String> {
    let bad: Vec<String> = values
        .iter()
        .filter(|(_, v)| !v.is_multiple_of(alignment))
        .map(|(name, v)| format!("{name} = {v:#x}"))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "{} not a multiple of the endpoint's bindAlignment {alignment:#x}",
            bad.join(", ")
        )
    })
}

impl Check<args::cuLogicalEndpointIdReserve> for Reserve {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuLogicalEndpointIdReserve, _: &mut Cx) {}
    fn after(&self, a: &args::cuLogicalEndpointIdReserve, _: (), ret: c_int, cx: &mut Cx) {
        if let Some(base) = a.baseLeId.written(Outcome::Returned(ret)) {
            let (start, end) = span(base.0, a.count.0);
            cx.states
                .family::<EndpointState>()
                .ids
                .lock()
                .reserve(start, end);
        }
    }
}

impl Check<args::cuLogicalEndpointIdRelease> for Release {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointIdRelease, cx: &mut Cx) {
        let (start, end) = span(a.baseLeId.0, a.count.0);
        let (unreserved, live) = {
            let ids = cx.states.family::<EndpointState>().ids.lock();
            let live: Vec<u32> = ids
                .in_range(start, end)
                .map(|(&id, _)| id)
                .take(8)
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
            cx.states
                .family::<EndpointState>()
                .ids
                .lock()
                .release(start, end);
        }
    }
}

/// Create and import: the id must be reserved and hold no endpoint yet.
fn use_id(cx: &mut Cx, not_reserved: &'static Rule, in_use: &'static Rule, id: u32) {
    let (unreserved, used) = {
        let ids = cx.states.family::<EndpointState>().ids.lock();
        (
            ids.first_unreserved(u64::from(id), u64::from(id) + 1)
                .is_some(),
            ids.endpoints.contains_key(&id),
        )
    };
    if unreserved {
        cx.tracked(not_reserved, || {
            format!("leId {id} was not reserved by this process (cuLogicalEndpointIdReserve)")
        });
    } else if used {
        cx.tracked(in_use, || {
            format!("leId {id} already holds a logical endpoint (not destroyed)")
        });
    }
}

fn holds_endpoint(cx: &mut Cx, id: u32, created: Option<Created>) {
    cx.states
        .family::<EndpointState>()
        .ids
        .lock()
        .endpoints
        .insert(id, Endpoint::new(created));
}

/// The properties' findings; returns the driver's limits where the properties are valid.
fn check_properties(p: &CUlogicalEndpointProp, cx: &mut Cx) -> Option<(u64, u64)> {
    let mut valid = true;
    match p.type_ {
        CU_LOGICAL_ENDPOINT_TYPE_UNICAST => {}
        CU_LOGICAL_ENDPOINT_TYPE_MULTICAST if p.device_or_num_devices == 0 => {
            valid = false;
            cx.flag(&cuda::CREATE_TEAM_EMPTY, || {
                "prop.multicast.numDevices is 0: a team needs at least one device".into()
            });
        }
        CU_LOGICAL_ENDPOINT_TYPE_MULTICAST => {}
        other => {
            valid = false;
            cx.flag(&cuda::CREATE_TYPE_INVALID, || {
                let name = if other == CU_LOGICAL_ENDPOINT_TYPE_INVALID {
                    "CU_LOGICAL_ENDPOINT_TYPE_INVALID".to_string()
                } else {
                    format!("{other}, no CUlogicalEndpointType")
                };
                format!("prop.type is {name}")
            });
        }
    }
    if p.flags & !KNOWN_FLAGS != 0 {
        valid = false;
        cx.flag(&cuda::CREATE_FLAGS_UNKNOWN, || {
            format!(
                "prop.flags {:#x} has unknown bits {:#x}",
                p.flags,
                p.flags & !KNOWN_FLAGS
            )
        });
    }
    if p.ipc_handle_types & !FABRIC != 0 {
        valid = false;
        cx.flag(&cuda::CREATE_HANDLE_TYPE_UNKNOWN, || {
            format!(
                "prop.ipcHandleTypes {:#x} has bits no CUlogicalEndpointIpcHandleType names \
                 ({:#x})",
                p.ipc_handle_types,
                p.ipc_handle_types & !FABRIC
            )
        });
    } else if p.ipc_handle_types & FABRIC != 0 && p.type_ == CU_LOGICAL_ENDPOINT_TYPE_UNICAST {
        let owner = p.device_or_num_devices;
        if cx.facts.attribute(owner, ATTRIBUTE_FABRIC_SUPPORTED) == Some(0) {
            cx.tracked(&cuda::CREATE_HANDLE_TYPE_NOT_SUPPORTED, || {
                format!(
                    "FABRIC handles requested, but device {owner} reports \
                     CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 0"
                )
            });
        }
    }
    if !valid {
        return None;
    }
    let (alignment, max) = cx.facts.endpoint_limits(p)?;
    if !p.size.is_multiple_of(alignment) {
        cx.flag(&cuda::CREATE_SIZE_NOT_ALIGNED, || {
            format!(
                "prop.size {:#x} is not a multiple of bindAlignment {alignment:#x} (the driver's \
                 cuLogicalEndpointGetLimits for these properties)",
                p.size
            )
        });
    }
    if p.size > max {
        cx.flag(&cuda::CREATE_SIZE_ABOVE_MAX, || {
            format!(
                "prop.size {:#x} is larger than maxSize {max:#x} (the driver's \
                 cuLogicalEndpointGetLimits for these properties)",
                p.size
            )
        });
    }
    Some((alignment, max))
}

fn created_from(p: &CUlogicalEndpointProp, limits: Option<(u64, u64)>) -> Option<Created> {
    let shape = match p.type_ {
        CU_LOGICAL_ENDPOINT_TYPE_UNICAST => Shape::Unicast {
            owner: p.device_or_num_devices,
        },
        CU_LOGICAL_ENDPOINT_TYPE_MULTICAST => Shape::Multicast {
            team: p.device_or_num_devices as u32,
        },
        _ => return None,
    };
    Some(Created {
        shape,
        size: p.size,
        handle_types: p.ipc_handle_types,
        limits,
    })
}

impl Check<args::cuLogicalEndpointCreate> for Create {
    /// The properties as read before the call, and the driver's limits for them.
    type Plan = Option<(CUlogicalEndpointProp, Option<(u64, u64)>)>;
    fn before(&self, a: &args::cuLogicalEndpointCreate, cx: &mut Cx) -> Self::Plan {
        use_id(
            cx,
            &cuda::CREATE_NOT_RESERVED,
            &cuda::CREATE_ID_IN_USE,
            a.leId.0,
        );
        let p = peek(a.prop.0)?;
        let limits = check_properties(&p, cx);
        Some((p, limits))
    }
    fn after(&self, a: &args::cuLogicalEndpointCreate, plan: Self::Plan, ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        // Where the read before the call was refused, the driver has read the properties now.
        let created = match plan {
            Some((p, limits)) => created_from(&p, limits),
            None => a
                .prop
                .read(Outcome::Returned(ret))
                .and_then(|p| created_from(&p, cx.facts.endpoint_limits(&p))),
        };
        holds_endpoint(cx, a.leId.0, created);
    }
}

impl Check<args::cuLogicalEndpointAddDevice> for AddDevice {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointAddDevice, cx: &mut Cx) {
        let (id, dev) = (a.leId.0, a.dev.0);
        let Some(e) = endpoint_or_report(cx, id) else {
            return;
        };
        match e.created.map(|c| c.shape) {
            Some(Shape::Unicast { owner }) => {
                cx.tracked(&cuda::ADD_NOT_MULTICAST, || {
                    format!("leId {id} is a unicast endpoint (owner device {owner})")
                });
                return;
            }
            Some(Shape::Multicast { team }) if e.members.len() as u64 >= u64::from(team) => {
                cx.tracked(&cuda::ADD_TEAM_FULL, || {
                    format!(
                        "the team of leId {id} has {team} device(s) and this process added {} \
                         already ({:?})",
                        e.members.len(),
                        e.members
                    )
                });
            }
            _ => {}
        }
        if e.members.contains(&dev) {
            cx.tracked(&cuda::ADD_TWICE, || {
                format!("device {dev} was added to leId {id} already")
            });
        }
        if e.bound_ever {
            cx.tracked(&cuda::ADD_AFTER_BIND, || {
                format!("this process bound memory to leId {id} before adding device {dev}")
            });
        }
    }
    fn after(&self, a: &args::cuLogicalEndpointAddDevice, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            with_endpoint(cx, a.leId.0, |e| e.members.push(a.dev.0));
        }
    }
}

impl Check<args::cuLogicalEndpointQuery> for Query {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointQuery, cx: &mut Cx) {
        let (start, end) = span(a.leId.0, a.count.0);
        let missing = {
            let ids = cx.states.family::<EndpointState>().ids.lock();
            let mut at = start;
            let mut held = ids.in_range(start, end).map(|(&id, _)| u64::from(id));
            loop {
                match held.next() {
                    Some(id) if id == at => at += 1,
                    _ => break (at < end).then_some(at),
                }
            }
        };
        if let Some(id) = missing {
            cx.tracked(&cuda::QUERY_NOT_ENDPOINT, || {
                format!(
                    "id {id} of [{start}, {end}) holds no logical endpoint (never created or \
                     imported, or destroyed)"
                )
            });
        }
    }
    fn after(&self, a: &args::cuLogicalEndpointQuery, _: (), ret: c_int, cx: &mut Cx) {
        let Some(status) = a.queryStatus.written(Outcome::Returned(ret)) else {
            return;
        };
        let (start, end) = span(a.leId.0, a.count.0);
        let mut ids = cx.states.family::<EndpointState>().ids.lock();
        let first = start.min(u64::from(u32::MAX)) as u32;
        for (_, e) in ids
            .endpoints
            .range_mut(first..)
            .take_while(|(&id, _)| u64::from(id) < end)
        {
            if status.0 != 0 {
                e.readiness = Readiness::Ready;
            } else if e.readiness == Readiness::NotQueried {
                e.readiness = Readiness::NotReady;
            }
        }
    }
}

/// The memory a bind names.
#[derive(Clone, Copy, Debug)]
pub enum BindMemory {
    Address(u64),
    Handle { handle: u64, offset: u64 },
}

/// One bind's arguments, for both binds.
struct BindCall {
    id: u32,
    dev: i32,
    offset: u64,
    size: u64,
    flags: u64,
    memory: BindMemory,
}

impl BindCall {
    fn check(&self, cx: &mut Cx) {
        let (id, dev, offset, size) = (self.id, self.dev, self.offset, self.size);
        if self.flags != 0 {
            cx.flag(&cuda::BIND_FLAGS, || format!("flags is {:#x}", self.flags));
        }
        let Some(e) = endpoint_or_report(cx, id) else {
            return;
        };
        match e.readiness {
            Readiness::NotQueried => cx.tracked(&cuda::BIND_WITHOUT_QUERY, || {
                format!("cuLogicalEndpointQuery was never called on leId {id}")
            }),
            Readiness::NotReady => cx.tracked(&cuda::BIND_BEFORE_READY, || {
                format!("every cuLogicalEndpointQuery of leId {id} answered queryStatus 0")
            }),
            Readiness::Ready => {}
        }
        match e.created.map(|c| c.shape) {
            Some(Shape::Unicast { owner }) if owner != dev => cx
                .tracked(&cuda::BIND_NOT_OWNER, || {
                    format!("leId {id} is unicast, owned by device {owner}; the bind names {dev}")
                }),
            Some(Shape::Multicast { .. }) if !e.members.contains(&dev) => {
                cx.tracked(&cuda::BIND_NOT_IN_TEAM, || {
                    format!(
                        "device {dev} was not added to leId {id} (added: {:?})",
                        e.members
                    )
                });
            }
            _ => {}
        }
        if let Some(alignment) = e.alignment() {
            let (rule, third) = match self.memory {
                BindMemory::Address(ptr) => (&cuda::BIND_ADDR_NOT_ALIGNED, ("ptr", ptr)),
                BindMemory::Handle { offset: mo, .. } => {
                    (&cuda::BIND_MEM_NOT_ALIGNED, ("memOffset", mo))
                }
            };
            if let Some(text) = misaligned(alignment, &[("offset", offset), ("size", size), third])
            {
                cx.tracked(rule, || text);
            }
        }
        if let Some(c) = e.created {
            if offset.checked_add(size).is_none_or(|end| end > c.size) {
                cx.tracked(&cuda::BIND_BEYOND_ENDPOINT, || {
                    format!(
                        "offset {offset:#x} + size {size:#x} is beyond the endpoint's size {:#x}",
                        c.size
                    )
                });
            }
        }
        let end = offset.saturating_add(size);
        let overlap = e.bindings.get(&dev).and_then(|b| {
            b.range(..end)
                .next_back()
                .filter(|(&s, b)| s.saturating_add(b.size) > offset)
                .map(|(&s, &b)| (s, b))
        });
        if let Some((s, b)) = overlap {
            cx.tracked(&cuda::BIND_OVERLAP, || {
                format!(
                    "[{offset:#x}, {end:#x}) on device {dev} overlaps the binding [{s:#x}, {:#x}) \
                     of leId {id} ({b})",
                    s + b.size
                )
            });
        }
        self.check_memory(&e, cx);
    }

    /// What the memory is: its kind, extent, location and handle types.
    fn check_memory(&self, e: &Endpoint, cx: &mut Cx) {
        let (dev, size) = (self.dev, self.size);
        let physical = match self.memory {
            BindMemory::Address(ptr) => {
                let mapped = cx.states.family::<VmmState>().mapping(ptr);
                match mapped {
                    Some((start, m)) => {
                        let room = start + m.size - ptr;
                        if size > room {
                            cx.tracked(&cuda::BIND_ADDR_BEYOND_ALLOCATION, || {
                                format!(
                                    "size {size:#x} from {ptr:#x} runs past the cuMemMap \
                                     mapping [{start:#x}, {:#x}) ({room:#x} bytes left)",
                                    start + m.size
                                )
                            });
                        }
                        m.physical
                    }
                    None => {
                        self.check_unmapped(ptr, cx);
                        return;
                    }
                }
            }
            BindMemory::Handle { handle, offset } => {
                let known = cx.states.family::<VmmState>().handle(handle);
                let Some(p) = known else {
                    cx.tracked(&cuda::BIND_MEM_NOT_CREATED, || {
                        format!(
                            "memHandle {handle:#x} is no live cuMemCreate (or imported) handle \
                             of this process"
                        )
                    });
                    return;
                };
                if let Some(total) = p.size.map(std::num::NonZeroU64::get) {
                    if offset.checked_add(size).is_none_or(|end| end > total) {
                        cx.tracked(&cuda::BIND_MEM_BEYOND_ALLOCATION, || {
                            format!(
                                "memOffset {offset:#x} + size {size:#x} is beyond the \
                                 allocation's {total:#x} bytes"
                            )
                        });
                    }
                }
                p
            }
        };
        match physical.location {
            Some(Location::Device(owner)) if owner != dev => cx
                .tracked(&cuda::BIND_OTHER_DEVICE, || {
                    format!("the memory was created on device {owner}; the bind names {dev}")
                }),
            Some(Location::HostNuma(node)) => {
                if let Some(closest) = cx
                    .facts
                    .attribute(dev, ATTRIBUTE_HOST_NUMA_ID)
                    .filter(|&n| n >= 0 && n != node)
                {
                    cx.tracked(&cuda::BIND_NUMA, || {
                        format!(
                            "the memory is on host NUMA node {node}; device {dev}'s closest \
                             node (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID) is {closest}"
                        )
                    });
                }
            }
            _ => {}
        }
        if let Some(types) = physical.handle_types {
            if e.shareable_only() && types & CU_MEM_HANDLE_TYPE_FABRIC == 0 {
                let why = if e.created.is_none() {
                    "imported"
                } else {
                    "multicast, created with CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC"
                };
                cx.tracked(&cuda::BIND_NOT_SHAREABLE, || {
                    format!(
                        "leId {} is {why}, and the memory was created without \
                         CU_MEM_HANDLE_TYPE_FABRIC (requestedHandleTypes {types:#x})",
                        self.id
                    )
                });
            }
        }
    }

    /// BindAddr on memory no observed `cuMemMap` made: the driver says what it is.
    fn check_unmapped(&self, ptr: u64, cx: &mut Cx) {
        let (dev, size) = (self.dev, self.size);
        match cx.facts.memory_kind(ptr, true) {
            Some(MemoryKind::Pool) => {
                if let Some((base, len)) = cx.facts.allocation_range(ptr, true) {
                    let room = base + len - ptr;
                    if size > room {
                        cx.flag(&cuda::BIND_ADDR_BEYOND_ALLOCATION, || {
                            format!(
                                "size {size:#x} from {ptr:#x} runs past its allocation \
                                 [{base:#x}, {:#x}) ({room:#x} bytes left)",
                                base + len
                            )
                        });
                    }
                }
                if let Some(owner) = cx.facts.device_memory_owner(ptr, true) {
                    if owner != dev {
                        cx.flag(&cuda::BIND_OTHER_DEVICE, || {
                            format!(
                                "the memory pool allocation is on device {owner}; the bind \
                                 names {dev}"
                            )
                        });
                    }
                }
            }
            Some(kind @ (MemoryKind::Device | MemoryKind::Managed | MemoryKind::Host)) => {
                cx.flag(&cuda::BIND_ADDR_MEMORY_KIND, || {
                    let what = match kind {
                        MemoryKind::Device => "cuMemAlloc device memory",
                        MemoryKind::Managed => "managed memory",
                        _ => "page-locked host memory",
                    };
                    format!("{ptr:#x} is {what}")
                });
            }
            Some(MemoryKind::Other) | None => {}
        }
    }

    fn record(&self, cx: &mut Cx) {
        with_endpoint(cx, self.id, |e| {
            e.bound_ever = true;
            let binding = Binding {
                size: self.size,
                memory: self.memory,
            };
            e.bindings
                .entry(self.dev)
                .or_default()
                .insert(self.offset, binding);
        });
    }
}

impl From<&args::cuLogicalEndpointBindAddr> for BindCall {
    fn from(a: &args::cuLogicalEndpointBindAddr) -> BindCall {
        BindCall {
            id: a.leId.0,
            dev: a.dev.0,
            offset: a.offset.0,
            size: a.size.0,
            flags: a.flags.0,
            memory: BindMemory::Address(a.ptr.addr()),
        }
    }
}

impl From<&args::cuLogicalEndpointBindMem> for BindCall {
    fn from(a: &args::cuLogicalEndpointBindMem) -> BindCall {
        BindCall {
            id: a.leId.0,
            dev: a.dev.0,
            offset: a.offset.0,
            size: a.size.0,
            flags: a.flags.0,
            memory: BindMemory::Handle {
                handle: a.memHandle.0,
                offset: a.memOffset.0,
            },
        }
    }
}

impl<A> Check<A> for Bind
where
    for<'a> &'a A: Into<BindCall>,
{
    type Plan = ();
    fn before(&self, a: &A, cx: &mut Cx) {
        a.into().check(cx);
    }
    fn after(&self, a: &A, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            a.into().record(cx);
        }
    }
}

impl Check<args::cuLogicalEndpointUnbind> for Unbind {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointUnbind, cx: &mut Cx) {
        let (id, dev, offset, size) = (a.leId.0, a.dev.0, a.offset.0, a.size.0);
        let Some(e) = endpoint_or_report(cx, id) else {
            return;
        };
        if let Some(alignment) = e.alignment() {
            if let Some(text) = misaligned(alignment, &[("offset", offset), ("size", size)]) {
                // Misaligned values match no bind: the finding says why, alone.
                cx.tracked(&cuda::UNBIND_NOT_ALIGNED, || text);
                return;
            }
        }
        let empty = BTreeMap::new();
        let binds = e.bindings.get(&dev).unwrap_or(&empty);
        if !binds.contains_key(&offset) {
            cx.tracked(&cuda::UNBIND_OFFSET, || {
                format!("no bind on device {dev} of leId {id} started at offset {offset:#x}")
            });
            return;
        }
        let end = offset.saturating_add(size);
        let mut at = offset;
        for (&s, b) in binds.range(offset..end) {
            if s != at {
                break;
            }
            at = s + b.size;
        }
        if at > end {
            cx.tracked(&cuda::UNBIND_CUTS, || {
                format!(
                    "[{offset:#x}, {end:#x}) ends inside the binding that ends at {at:#x} on \
                     device {dev}"
                )
            });
        } else if at < end {
            cx.tracked(&cuda::UNBIND_SIZE, || {
                format!(
                    "size {size:#x} is not the size of the bind at {offset:#x} nor of it and the \
                     binds that follow without a gap (they end at {at:#x})"
                )
            });
        }
    }
    fn after(&self, a: &args::cuLogicalEndpointUnbind, _: (), ret: c_int, cx: &mut Cx) {
        if ret != 0 {
            return;
        }
        let end = a.offset.0.saturating_add(a.size.0);
        with_endpoint(cx, a.leId.0, |e| {
            if let Some(b) = e.bindings.get_mut(&a.dev.0) {
                let gone: Vec<u64> = b.range(a.offset.0..end).map(|(&s, _)| s).collect();
                for s in gone {
                    b.remove(&s);
                }
            }
        });
    }
}

impl Check<args::cuLogicalEndpointDestroy> for Destroy {
    /// The bindings the endpoint held: `(device, offset, binding)`.
    type Plan = Vec<(i32, u64, Binding)>;
    fn before(&self, a: &args::cuLogicalEndpointDestroy, cx: &mut Cx) -> Self::Plan {
        let id = a.leId.0;
        match endpoint(cx, id) {
            Some(e) => e
                .bindings
                .iter()
                .flat_map(|(&dev, b)| {
                    b.iter()
                        .map(move |(&offset, &binding)| (dev, offset, binding))
                })
                .collect(),
            None => {
                cx.tracked(&cuda::DESTROY_NOT_CREATED, || {
                    format!(
                        "leId {id} holds no logical endpoint (never created or imported, or \
                         destroyed already)"
                    )
                });
                Vec::new()
            }
        }
    }
    fn after(
        &self,
        a: &args::cuLogicalEndpointDestroy,
        bound: Self::Plan,
        ret: c_int,
        cx: &mut Cx,
    ) {
        if ret != 0 {
            return;
        }
        cx.states
            .family::<EndpointState>()
            .ids
            .lock()
            .endpoints
            .remove(&a.leId.0);
        if !bound.is_empty() {
            cx.shown(&cuda::DESTROY_UNBINDS, || {
                let list: Vec<String> = bound
                    .iter()
                    .take(8)
                    .map(|(dev, offset, b)| format!("device {dev} at {offset:#x}: {b}"))
                    .chain((bound.len() > 8).then(|| format!("{} more", bound.len() - 8)))
                    .collect();
                format!(
                    "leId {}'s bindings by this process ended with it: {}",
                    a.leId.0,
                    list.join(", ")
                )
            });
        }
    }
}

impl Check<args::cuLogicalEndpointExport> for Export {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointExport, cx: &mut Cx) {
        let (id, wanted) = (a.leId.0, a.handleType.0);
        let Some(e) = endpoint_or_report(cx, id) else {
            return;
        };
        if let Some(c) = e.created {
            if wanted == 0 || c.handle_types & wanted != wanted {
                cx.tracked(&cuda::EXPORT_HANDLE_TYPE, || {
                    format!(
                        "handleType {wanted} was not among the ipcHandleTypes ({:#x}) leId {id} \
                         was created with",
                        c.handle_types
                    )
                });
            }
        }
    }
}

impl Check<args::cuLogicalEndpointImport> for Import {
    type Plan = ();
    fn before(&self, a: &args::cuLogicalEndpointImport, cx: &mut Cx) {
        use_id(
            cx,
            &cuda::IMPORT_NOT_RESERVED,
            &cuda::IMPORT_ID_IN_USE,
            a.leId.0,
        );
    }
    fn after(&self, a: &args::cuLogicalEndpointImport, _: (), ret: c_int, cx: &mut Cx) {
        match ret {
            0 => holds_endpoint(cx, a.leId.0, None),
            NOT_PERMITTED if a.handleType.0 == FABRIC => cx
                .shown(&cuda::IMPORT_NOT_PERMITTED, || {
                    "the FABRIC handle's endpoint is not accessible to this process".into()
                }),
            NOT_SUPPORTED => cx.shown(&cuda::IMPORT_NOT_SUPPORTED, || {
                "this process cannot support the endpoint the handle describes".into()
            }),
            _ => {}
        }
    }
}
