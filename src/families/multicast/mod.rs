//! The multicast family: checks for `cuMulticastCreate`, `cuMulticastAddDevice` and the binds
//! (`cuMulticastBindMem`, `cuMulticastBindAddr` and their `_v2` forms), and the release of an
//! object (`cuMemRelease`). Catalogue: `sharecheck_core::rules::multicast`.
//!
//! The objects this process created are tracked with their properties, the driver's minimum
//! granularity for them and the devices this process added; the memory a bind names is what the
//! VMM family knows of it (an allocation this process created, or the mapping at an address). A
//! team is known whole only when this process added every device: another process may add
//! devices to an exported object, unseen here. No lock is held across a driver call.

#[cfg(test)]
mod tests;
pub mod watchdog;

use crate::engine::facts::GranularityOf;
use crate::engine::state::{FamilyState, Lifetime};
use crate::engine::{hex, Check, Cx};
use crate::families::vmm::{granular, Location, Physical, VmmState};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::args;
use sharecheck_core::rules::multicast::cuda;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct Create;
pub struct AddDevice;
pub struct BindMem;
pub struct BindAddr;
pub struct Released;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const CREATE: super::Create = super::Create;
    pub const ADD_DEVICE: super::AddDevice = super::AddDevice;
    pub const BIND_MEM: super::BindMem = super::BindMem;
    pub const BIND_ADDR: super::BindAddr = super::BindAddr;
    pub const RELEASED: super::Released = super::Released;
}

/// A multicast object this process created.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Team {
    num_devices: u32,
    size: u64,
    /// The driver's minimum granularity for its properties.
    granularity: Option<u64>,
    /// The devices this process added, in order.
    devices: Vec<i32>,
}

impl Team {
    /// Whether this process added every device of the team.
    fn whole(&self) -> bool {
        self.devices.len() as u64 >= u64::from(self.num_devices)
    }

    fn devices(&self) -> String {
        let list: Vec<String> = self.devices.iter().map(i32::to_string).collect();
        format!("[{}]", list.join(", "))
    }
}

/// What the family tracks. A forked child starts empty, as every family does.
#[derive(Default)]
pub struct MulticastState {
    teams: Mutex<FxHashMap<u64, Team>>,
    /// How many objects are tracked (read without the lock): while none, a release has nothing
    /// to forget.
    count: AtomicUsize,
}

impl FamilyState for MulticastState {
    const SLOT: usize = 6;
    const FORGETS_FREED_MEMORY: bool = false;
    /// A multicast object belongs to no context: nothing ends with one.
    fn forget(&self, _: Lifetime) {}
}

impl MulticastState {
    fn team(&self, handle: u64) -> Option<Team> {
        self.teams.lock().get(&handle).cloned()
    }

    fn with<T>(&self, f: impl FnOnce(&mut FxHashMap<u64, Team>) -> T) -> T {
        let mut teams = self.teams.lock();
        let out = f(&mut teams);
        self.count.store(teams.len(), Relaxed);
        out
    }
}

fn state<'a>(cx: &Cx<'a>) -> &'a MulticastState {
    cx.states.family::<MulticastState>()
}

/// The properties of a create, read as the driver reads them (32 bytes: numDevices, size,
/// handleTypes, flags), and the granularity the driver gives for them.
pub struct CreatePlan {
    num_devices: u32,
    size: u64,
    granularity: Option<u64>,
}

impl Check<args::cuMulticastCreate> for Create {
    type Plan = Option<CreatePlan>;
    fn before(&self, a: &args::cuMulticastCreate, cx: &mut Cx) -> Option<CreatePlan> {
        // A pointer the driver would fault on is not read here.
        let prop = crate::guard::peek(a.prop.0.cast::<[u64; 4]>())?;
        let (num_devices, size, flags) = (prop[0] as u32, prop[1], prop[3]);
        if flags != 0 {
            cx.flag(&cuda::CREATE_FLAGS, || {
                format!("CUmulticastObjectProp::flags is {flags:#x}")
            });
        }
        let granularity = cx.facts.granularity(GranularityOf::Multicast, &prop);
        if let Some(g) = granularity.filter(|&g| !granular(size, g)) {
            cx.flag(&cuda::CREATE_SIZE_NOT_GRANULAR, || {
                format!(
                    "CUmulticastObjectProp::size {size:#x} is not a multiple of {g:#x}, the \
                     minimum granularity cuMulticastGetGranularity gives for these properties"
                )
            });
        }
        Some(CreatePlan {
            num_devices,
            size,
            granularity,
        })
    }
    fn after(
        &self,
        a: &args::cuMulticastCreate,
        plan: Option<CreatePlan>,
        ret: c_int,
        cx: &mut Cx,
    ) {
        let (Some(plan), Some(handle)) = (plan, a.mcHandle.written(Outcome::Returned(ret))) else {
            return;
        };
        let team = Team {
            num_devices: plan.num_devices,
            size: plan.size,
            granularity: plan.granularity,
            devices: Vec::new(),
        };
        state(cx).with(|t| t.insert(handle.0, team));
    }
}

impl Check<args::cuMulticastAddDevice> for AddDevice {
    type Plan = ();
    fn before(&self, a: &args::cuMulticastAddDevice, cx: &mut Cx) {
        let (handle, dev) = (a.mcHandle.0, a.dev.0);
        let Some(team) = state(cx).team(handle) else {
            return;
        };
        if team.devices.contains(&dev) {
            cx.flag(&cuda::ADD_TEAM_FULL, || {
                format!(
                    "device {dev} was added to multicast object {} already",
                    hex(handle)
                )
            });
        } else if team.whole() {
            cx.flag(&cuda::ADD_TEAM_FULL, || {
                format!(
                    "the team of multicast object {} has its {} devices already: {}",
                    hex(handle),
                    team.num_devices,
                    team.devices()
                )
            });
        }
    }
    fn after(&self, a: &args::cuMulticastAddDevice, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            state(cx).with(|t| {
                if let Some(team) = t.get_mut(&a.mcHandle.0) {
                    team.devices.push(a.dev.0);
                }
            });
        }
    }
}

/// A bind's arguments, whichever of the four functions made it.
struct Bind {
    mc: u64,
    mc_offset: u64,
    size: u64,
    flags: u64,
    /// The object's team, where this process created it.
    team: Option<Team>,
}

/// The watchdog armed for a bind that may block: on an object this process did not create, or
/// whose team it has not filled ([`watchdog`]).
fn watch(call: &'static str, b: &Bind) -> Option<watchdog::Armed> {
    match &b.team {
        Some(team) if team.whole() => None,
        Some(team) => watchdog::arm(call, b.mc, Some((team.num_devices, team.devices.clone()))),
        None => watchdog::arm(call, b.mc, None),
    }
}

/// The checks every bind shares: its flags, the object's extent, and the memory's device against
/// a team this process filled. `memory`: what is known of the bound memory. Returns the team
/// (this process's view of it).
fn check_bind(
    cx: &mut Cx,
    b: &Bind,
    past_object: &'static sharecheck_core::rules::Rule,
    memory: Option<Physical>,
) -> Option<Team> {
    if b.flags != 0 {
        let flags = b.flags;
        cx.flag(&cuda::BIND_FLAGS, || format!("flags is {flags:#x}"));
    }
    let team = b.team.clone()?;
    if b.mc_offset
        .checked_add(b.size)
        .is_none_or(|end| end > team.size)
    {
        let (offset, size, total) = (b.mc_offset, b.size, team.size);
        cx.flag(past_object, || {
            format!(
                "mcOffset {offset:#x} + size {size:#x} runs past the multicast object's \
                 {total:#x} bytes"
            )
        });
    }
    if let (true, Some(Location::Device(d))) = (team.whole(), memory.and_then(|m| m.location)) {
        if !team.devices.contains(&d) {
            cx.flag(&cuda::BIND_MEMORY_NOT_ON_TEAM, || {
                format!(
                    "the memory was created on device {d}; the team's devices are {}",
                    team.devices()
                )
            });
        }
    }
    Some(team)
}

macro_rules! bind_mem {
    ($($function:ident),*) => {$(
        impl Check<args::$function> for BindMem {
            /// Armed while the driver's call runs.
            type Plan = Option<watchdog::Armed>;
            fn before(&self, a: &args::$function, cx: &mut Cx) -> Option<watchdog::Armed> {
                let (size, mem_offset) = (a.size.0 as u64, a.memOffset.0 as u64);
                let bind = Bind {
                    mc: a.mcHandle.0,
                    mc_offset: a.mcOffset.0 as u64,
                    size,
                    flags: a.flags.0,
                    team: state(cx).team(a.mcHandle.0),
                };
                let memory = cx.states.family::<VmmState>().handle(a.memHandle.0);
                if let Some(total) = memory.and_then(|m| m.size).map(|s| s.get()) {
                    if mem_offset.checked_add(size).is_none_or(|end| end > total) {
                        cx.flag(&cuda::BIND_PAST_MEMORY, || {
                            format!(
                                "memOffset {mem_offset:#x} + size {size:#x} runs past the \
                                 allocation's {total:#x} bytes (handle {})",
                                hex(a.memHandle.0)
                            )
                        });
                    }
                }
                let team = check_bind(cx, &bind, &cuda::BIND_MEM_PAST_OBJECT, memory);
                if let Some(g) = team.and_then(|t| t.granularity) {
                    let named = [("size", size), ("mcOffset", bind.mc_offset), ("memOffset", mem_offset)];
                    not_granular(cx, &cuda::BIND_MEM_NOT_GRANULAR, &named, g);
                }
                watch(stringify!($function), &bind)
            }
        }
    )*};
}

bind_mem!(cuMulticastBindMem, cuMulticastBindMem_v2);

macro_rules! bind_addr {
    ($($function:ident),*) => {$(
        impl Check<args::$function> for BindAddr {
            /// Armed while the driver's call runs.
            type Plan = Option<watchdog::Armed>;
            fn before(&self, a: &args::$function, cx: &mut Cx) -> Option<watchdog::Armed> {
                let (size, memptr) = (a.size.0 as u64, a.memptr.0);
                let bind = Bind {
                    mc: a.mcHandle.0,
                    mc_offset: a.mcOffset.0 as u64,
                    size,
                    flags: a.flags.0,
                    team: state(cx).team(a.mcHandle.0),
                };
                let memory = cx
                    .states
                    .family::<VmmState>()
                    .mapping(memptr)
                    .map(|(_, m)| m.physical);
                let team = check_bind(cx, &bind, &cuda::BIND_ADDR_PAST_OBJECT, memory);
                if let Some(g) = team.and_then(|t| t.granularity) {
                    let named = [("size", size), ("mcOffset", bind.mc_offset), ("memptr", memptr)];
                    not_granular(cx, &cuda::BIND_ADDR_NOT_GRANULAR, &named, g);
                }
                watch(stringify!($function), &bind)
            }
        }
    )*};
}

bind_addr!(cuMulticastBindAddr, cuMulticastBindAddr_v2);

/// One finding naming every value of `named` that is not a multiple of `g`.
fn not_granular(
    cx: &mut Cx,
    rule: &'static sharecheck_core::rules::Rule,
    named: &[(&str, u64)],
    g: u64,
) {
    if named.iter().all(|&(_, v)| granular(v, g)) {
        return;
    }
    cx.flag(rule, || {
        let off: Vec<String> = named
            .iter()
            .filter(|&&(_, v)| !granular(v, g))
            .map(|(name, v)| format!("{name} {v:#x}"))
            .collect();
        format!(
            "{} not a multiple of {g:#x}, the object's minimum granularity",
            off.join(", ") + if off.len() == 1 { " is" } else { " are" }
        )
    });
}

impl Check<args::cuMemRelease> for Released {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemRelease, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemRelease, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            state(cx).with(|t| t.remove(&a.handle.0));
        }
    }
    /// No multicast object tracked: nothing to forget.
    #[inline(always)]
    fn idle(&self, states: &crate::engine::state::States) -> bool {
        states.family::<MulticastState>().count.load(Relaxed) == 0
    }
}
