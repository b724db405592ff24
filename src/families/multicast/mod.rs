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
use crate::engine::{hex, Check, Cx, Quick};
use crate::families::vmm::{granular, Location, Physical, VmmState};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::args;
use sharecheck_core::rules::multicast::cuda;
use sharecheck_core::rules::Rule;
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;

pub struct Create;
pub struct AddDevice;
pub struct Binds;
pub struct Unbind;
pub struct Mapped;
pub struct Released;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const CREATE: super::Create = super::Create;
    pub const ADD_DEVICE: super::AddDevice = super::AddDevice;
    pub const BIND_MEM: super::Binds = super::Binds;
    pub const BIND_ADDR: super::Binds = super::Binds;
    pub const UNBIND: super::Unbind = super::Unbind;
    pub const MAPPED: super::Mapped = super::Mapped;
    pub const RELEASED: super::Released = super::Released;
}

/// A multicast object this process created.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Team {
    num_devices: u32,
    size: u64,
    /// `CUmulticastObjectProp::handleTypes`: non-zero, the object is externally shareable.
    handle_types: u64,
    /// The driver's minimum granularity for its properties.
    granularity: Option<u64>,
    /// The devices this process added, in order.
    devices: Vec<i32>,
    /// The binds this process made: `(device, mcOffset)` -> size.
    binds: BTreeMap<(i32, u64), u64>,
    /// A bind whose device the shim could not tell (a `cuMulticastBindMem` of memory it did not
    /// see created): the binds above are not all of them.
    binds_unseen: bool,
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
    /// The objects tracked; how many, the family's watch word (`States::watch`): while none,
    /// a map or a release has nothing to do.
    teams: Mutex<FxHashMap<u64, Team>>,
}

impl FamilyState for MulticastState {
    const SLOT: usize = 6;
    const FORGETS_FREED_MEMORY: bool = false;
    /// A multicast object belongs to no context: nothing ends with one.
    fn forget(&self, _: Lifetime) {}
    /// Objects created and never released (`cuMemRelease` releases them as it releases any
    /// allocation handle: the VMM family's rule).
    fn left_at_exit(&self) -> Vec<crate::engine::state::Left> {
        use sharecheck_core::rules::vmm::report::NEVER_RELEASED_RULE;
        let Some(teams) = self.teams.try_lock_for(crate::engine::state::AT_EXIT_WAIT) else {
            return Vec::new();
        };
        let mut handles: Vec<u64> = teams.keys().copied().collect();
        handles.sort_unstable();
        handles
            .into_iter()
            .map(|h| crate::engine::state::Left {
                rule: &NEVER_RELEASED_RULE,
                call: format!("cuMulticastCreate(mcHandle={})", hex(h)),
                message: format!(
                    "the multicast object {} created here was never released (cuMemRelease) \
                     before the process exited",
                    hex(h)
                ),
            })
            .collect()
    }
}

impl MulticastState {
    fn team(&self, handle: u64) -> Option<Team> {
        self.teams.lock().get(&handle).cloned()
    }
}

fn state<'a>(cx: &Cx<'a>) -> &'a MulticastState {
    cx.states.family::<MulticastState>()
}

/// Runs `f` on the objects tracked, under the lock, then publishes how many there are.
fn with<T>(cx: &Cx, f: impl FnOnce(&mut FxHashMap<u64, Team>) -> T) -> T {
    let (state, watch) = cx.states.family_watched::<MulticastState>();
    let mut teams = state.teams.lock();
    let out = f(&mut teams);
    watch.store(teams.len() as u64, Relaxed);
    out
}

/// Whether no multicast object is tracked.
#[inline(always)]
fn none_tracked(states: &crate::engine::state::States) -> bool {
    states.watch::<MulticastState>().load(Relaxed) == 0
}

/// The properties of a create, read as the driver reads them (32 bytes: numDevices, size,
/// handleTypes, flags), and the granularity the driver gives for them.
pub struct CreatePlan {
    num_devices: u32,
    size: u64,
    handle_types: u64,
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
            handle_types: prop[2],
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
            handle_types: plan.handle_types,
            granularity: plan.granularity,
            devices: Vec::new(),
            binds: BTreeMap::new(),
            binds_unseen: false,
        };
        with(cx, |t| t.insert(handle.0, team));
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
            with(cx, |t| {
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

/// A bind as the family keeps it once the driver accepted it: its device (`None`: not known)
/// and place in the object.
pub struct Seen {
    mc: u64,
    dev: Option<i32>,
    mc_offset: u64,
    size: u64,
}

/// What a bind's check keeps across the driver's call: the watchdog armed while it runs, and
/// the bind to remember if it succeeds.
pub type BindPlan = (Option<watchdog::Armed>, Seen);

/// The device a bind names (`_v2`) or that the bound memory was created on.
fn bind_device(named: Option<i32>, memory: Option<Physical>) -> Option<i32> {
    named.or(match memory.and_then(|m| m.location) {
        Some(Location::Device(d)) => Some(d),
        _ => None,
    })
}

/// After a bind: remembered in its team (or the team told it missed one).
fn bound(cx: &Cx, seen: &Seen, ret: c_int) {
    if ret != 0 {
        return;
    }
    with(cx, |t| {
        if let Some(team) = t.get_mut(&seen.mc) {
            match seen.dev {
                Some(dev) => {
                    team.binds.insert((dev, seen.mc_offset), seen.size);
                }
                None => team.binds_unseen = true,
            }
        }
    });
}

/// The watchdog armed for a bind that may block: on an object this process did not create, or
/// whose team it has not filled ([`watchdog`]).
fn watch(call: &'static str, b: &Bind) -> Option<watchdog::Armed> {
    match &b.team {
        Some(team) if team.whole() => None,
        Some(team) => {
            let known = Some((team.num_devices, team.devices.clone()));
            watchdog::arm(call, &cuda::BIND_BLOCKED, b.mc, known)
        }
        None => watchdog::arm(call, &cuda::BIND_BLOCKED, b.mc, None),
    }
}

/// The checks every bind shares: its flags, the object's extent, and the memory's device against
/// a team this process filled. `memory`: what is known of the bound memory. Returns the team
/// (this process's view of it).
fn check_bind(
    cx: &mut Cx,
    b: &Bind,
    past_object: &'static Rule,
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

/// What the four binds' arguments give the shared checks.
trait BindArgs {
    /// The rules that differ between binding by handle and by address: the object's extent,
    /// the granularity, and the name of the memory's offset or address.
    const PAST_OBJECT: &'static Rule;
    const NOT_GRANULAR: &'static Rule;
    const MEMORY: &'static str;
    fn bind(&self, cx: &Cx) -> Bind;
    /// The device a `_v2` bind names.
    fn named_device(&self) -> Option<i32>;
    /// What is known of the bound memory, and its offset (or address), after any check of
    /// its own.
    fn memory(&self, cx: &mut Cx) -> (Option<Physical>, u64);

    /// The bind's checks; the watchdog armed while it runs, and the bind to remember.
    fn plan(&self, cx: &mut Cx, call: &'static str) -> BindPlan {
        let bind = self.bind(cx);
        let (memory, at) = self.memory(cx);
        let team = check_bind(cx, &bind, Self::PAST_OBJECT, memory);
        check_named_device(cx, self.named_device(), team.as_ref(), memory);
        if let Some(g) = team.and_then(|t| t.granularity) {
            let named = [
                ("size", bind.size),
                ("mcOffset", bind.mc_offset),
                (Self::MEMORY, at),
            ];
            not_granular(cx, Self::NOT_GRANULAR, &named, g);
        }
        let seen = Seen {
            mc: bind.mc,
            dev: bind_device(self.named_device(), memory),
            mc_offset: bind.mc_offset,
            size: bind.size,
        };
        (watch(call, &bind), seen)
    }
}

macro_rules! bind_args {
    ($($function:ident($($dev:ident)?)),*) => {$(
        impl BindArgs for args::$function {
            bind_args!(@kind $function);
            fn bind(&self, cx: &Cx) -> Bind {
                Bind {
                    mc: self.mcHandle.0,
                    mc_offset: self.mcOffset.0 as u64,
                    size: self.size.0 as u64,
                    flags: self.flags.0,
                    team: state(cx).team(self.mcHandle.0),
                }
            }
            fn named_device(&self) -> Option<i32> {
                None $(.or(Some(self.$dev.0)))?
            }
            fn memory(&self, cx: &mut Cx) -> (Option<Physical>, u64) {
                bind_args!(@memory self, cx, $function)
            }
        }
        impl Check<args::$function> for Binds {
            type Plan = BindPlan;
            fn before(&self, a: &args::$function, cx: &mut Cx) -> BindPlan {
                a.plan(cx, stringify!($function))
            }
            fn after(&self, _: &args::$function, (armed, seen): BindPlan, ret: c_int, cx: &mut Cx) {
                drop(armed);
                bound(cx, &seen, ret);
            }
        }
    )*};
    (@kind cuMulticastBindMem) => { bind_args!(@by_handle); };
    (@kind cuMulticastBindMem_v2) => { bind_args!(@by_handle); };
    (@kind cuMulticastBindAddr) => { bind_args!(@by_address); };
    (@kind cuMulticastBindAddr_v2) => { bind_args!(@by_address); };
    (@by_handle) => {
        const PAST_OBJECT: &'static Rule = &cuda::BIND_MEM_PAST_OBJECT;
        const NOT_GRANULAR: &'static Rule = &cuda::BIND_MEM_NOT_GRANULAR;
        const MEMORY: &'static str = "memOffset";
    };
    (@by_address) => {
        const PAST_OBJECT: &'static Rule = &cuda::BIND_ADDR_PAST_OBJECT;
        const NOT_GRANULAR: &'static Rule = &cuda::BIND_ADDR_NOT_GRANULAR;
        const MEMORY: &'static str = "memptr";
    };
    (@memory $a:ident, $cx:ident, cuMulticastBindMem) => { by_handle($cx, $a.memHandle.0, $a.memOffset.0 as u64, $a.size.0 as u64) };
    (@memory $a:ident, $cx:ident, cuMulticastBindMem_v2) => { by_handle($cx, $a.memHandle.0, $a.memOffset.0 as u64, $a.size.0 as u64) };
    (@memory $a:ident, $cx:ident, cuMulticastBindAddr) => { by_address($cx, $a.memptr.0) };
    (@memory $a:ident, $cx:ident, cuMulticastBindAddr_v2) => { by_address($cx, $a.memptr.0) };
}

bind_args!(
    cuMulticastBindMem(),
    cuMulticastBindMem_v2(dev),
    cuMulticastBindAddr(),
    cuMulticastBindAddr_v2(dev)
);

/// The allocation `mem` a bind by handle names (what this process saw created), checked to hold
/// `mem_offset + size`.
fn by_handle(cx: &mut Cx, mem: u64, mem_offset: u64, size: u64) -> (Option<Physical>, u64) {
    let memory = cx.states.family::<VmmState>().handle(mem);
    if let Some(total) = memory.and_then(|m| m.size).map(std::num::NonZero::get) {
        if mem_offset.checked_add(size).is_none_or(|end| end > total) {
            cx.flag(&cuda::BIND_PAST_MEMORY, || {
                format!(
                    "memOffset {mem_offset:#x} + size {size:#x} runs past the allocation's \
                     {total:#x} bytes (handle {})",
                    hex(mem)
                )
            });
        }
    }
    (memory, mem_offset)
}

/// The allocation mapped at `memptr`, where this process mapped it.
fn by_address(cx: &mut Cx, memptr: u64) -> (Option<Physical>, u64) {
    let memory = cx
        .states
        .family::<VmmState>()
        .mapping(memptr)
        .map(|(_, m)| m.physical);
    (memory, memptr)
}

/// What a bind's memory and (`_v2`) named device owe the team: memory of that device, a device
/// of a team this process filled, shareable memory for a shareable object.
fn check_named_device(
    cx: &mut Cx,
    named: Option<i32>,
    team: Option<&Team>,
    memory: Option<Physical>,
) {
    let location = memory.and_then(|m| m.location);
    if let Some(dev) = named {
        if let Some(Location::Device(d)) = location.filter(|l| *l != Location::Device(dev)) {
            cx.flag(&cuda::BIND_MEMORY_NOT_ON_DEV, || {
                format!("the bind names device {dev}; the memory was created on device {d}")
            });
        }
        if let Some(team) = team.filter(|t| t.whole() && !t.devices.contains(&dev)) {
            cx.flag(&cuda::BIND_DEV_NOT_IN_TEAM, || {
                format!(
                    "the bind names device {dev}; the team's devices are {}",
                    team.devices()
                )
            });
        }
    }
    let plain = memory.and_then(|m| m.handle_types) == Some(0);
    if let (true, Some(team)) = (plain, team.filter(|t| t.handle_types != 0)) {
        let types = team.handle_types;
        cx.flag(&cuda::BIND_MEMORY_NOT_SHAREABLE, || {
            format!(
                "the object was created with handle types {types:#x}; the memory with none \
                 (CUmemAllocationProp::requestedHandleTypes 0)"
            )
        });
    }
}

/// One finding naming every value of `named` that is not a multiple of `g`.
fn not_granular(cx: &mut Cx, rule: &'static Rule, named: &[(&str, u64)], g: u64) {
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

impl Check<args::cuMulticastUnbind> for Unbind {
    type Plan = ();
    fn before(&self, a: &args::cuMulticastUnbind, cx: &mut Cx) {
        let (handle, dev) = (a.mcHandle.0, a.dev.0);
        let (mc_offset, size) = (a.mcOffset.0 as u64, a.size.0 as u64);
        let Some(team) = state(cx).team(handle) else {
            return;
        };
        if let Some(g) = team.granularity {
            let named = [("size", size), ("mcOffset", mc_offset)];
            not_granular(cx, &cuda::UNBIND_NOT_GRANULAR, &named, g);
        }
        if mc_offset
            .checked_add(size)
            .is_none_or(|end| end > team.size)
        {
            let total = team.size;
            cx.flag(&cuda::UNBIND_PAST_OBJECT, || {
                format!(
                    "mcOffset {mc_offset:#x} + size {size:#x} runs past the multicast object's \
                     {total:#x} bytes"
                )
            });
        }
        if team.whole() && !team.binds_unseen {
            let bound = team.binds.get(&(dev, mc_offset)).copied();
            if bound != Some(size) {
                cx.flag(&cuda::UNBIND_NOT_A_BIND, || match bound {
                    Some(made) => format!(
                        "device {dev}'s bind at mcOffset {mc_offset:#x} is {made:#x} bytes, not \
                         {size:#x}"
                    ),
                    None => format!(
                        "device {dev} has no bind at mcOffset {mc_offset:#x} in multicast object \
                         {}",
                        hex(handle)
                    ),
                });
            }
        }
    }
    fn after(&self, a: &args::cuMulticastUnbind, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            with(cx, |t| {
                if let Some(team) = t.get_mut(&a.mcHandle.0) {
                    team.binds.remove(&(a.dev.0, a.mcOffset.0 as u64));
                }
            });
        }
    }
}

impl Mapped {
    /// A map of a multicast object this process created and has not filled: armed.
    #[cold]
    #[inline(never)]
    fn arm(a: &args::cuMemMap, cx: &mut Cx) -> Option<watchdog::Armed> {
        let team = state(cx).team(a.handle.0).filter(|t| !t.whole())?;
        let known = Some((team.num_devices, team.devices));
        watchdog::arm("cuMemMap", &cuda::MAP_BLOCKED, a.handle.0, known)
    }
}

impl Check<args::cuMemMap> for Mapped {
    /// Armed while the driver's call runs, for an object this process created and has not
    /// filled (the driver blocks the map until the team is whole).
    type Plan = Option<watchdog::Armed>;
    #[inline(always)]
    fn before(&self, a: &args::cuMemMap, cx: &mut Cx) -> Option<watchdog::Armed> {
        if none_tracked(cx.states) {
            // The VMM pair's path: one load and no call while no multicast object is tracked.
            return None;
        }
        Mapped::arm(a, cx)
    }
    /// No multicast object tracked: a map is the VMM family's alone.
    #[inline(always)]
    fn idle(&self, states: &crate::engine::state::States) -> bool {
        none_tracked(states)
    }
    const QUICK: bool = true;
    /// Clean while no multicast object is tracked (nothing armed).
    #[inline(always)]
    fn quick(&self, _: &args::cuMemMap, q: &Quick) -> Option<Option<watchdog::Armed>> {
        none_tracked(q.states).then_some(None)
    }
}

impl Check<args::cuMemRelease> for Released {
    type Plan = ();
    const BEFORE: bool = false;
    fn before(&self, _: &args::cuMemRelease, _: &mut Cx) {}
    fn after(&self, a: &args::cuMemRelease, _: (), ret: c_int, cx: &mut Cx) {
        if ret == 0 {
            with(cx, |t| t.remove(&a.handle.0));
        }
    }
    /// No multicast object tracked: nothing to forget.
    #[inline(always)]
    fn idle(&self, states: &crate::engine::state::States) -> bool {
        none_tracked(states)
    }
}
