//! A table-backed [`Facts`] for unit tests, and a harness that runs one call's checks against it
//! as the shim would: before-steps, the driver's answer (given by the test), after-steps, settle.

use super::facts::{Facts, MemoryKind};
use super::state::States;
use super::{settle, Checked, Cx};
use sharecheck_core::codes::{INVALID_CONTEXT, INVALID_HANDLE, INVALID_VALUE, SUCCESS};
use sharecheck_core::ffi::{CUcontext, CUlogicalEndpointProp, CUstream, Outcome};
use sharecheck_core::options::{Mode, Options};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void};

/// One allocation the fake driver knows.
#[derive(Clone, Copy, Debug)]
pub struct Allocation {
    pub base: u64,
    pub size: u64,
    /// `Some(device)` for plain device memory, `None` for managed or host memory.
    pub device: Option<i32>,
}

/// The driver's answers, as tables. Everything starts "unknown" except what a test sets.
#[derive(Default)]
pub struct FakeFacts {
    /// `None`: the driver cannot say; `Some(None)`: no context is current.
    pub current: Cell<Option<Option<u64>>>,
    /// Live contexts and their devices.
    pub contexts: RefCell<HashMap<u64, i32>>,
    pub device_count: Cell<Option<i32>>,
    pub attributes: RefCell<HashMap<(i32, c_int), i32>>,
    /// `(dev, peer)` pairs that can peer.
    pub peers: RefCell<HashSet<(i32, i32)>>,
    pub allocations: RefCell<Vec<Allocation>>,
    /// Live streams and their contexts (CUDA) or devices (HIP).
    pub streams: RefCell<HashMap<u64, u64>>,
    pub busy_streams: RefCell<HashSet<u64>>,
    pub primary_active: RefCell<HashMap<i32, bool>>,
    /// HIP: the thread's last error, and how many times a query cleared it.
    pub hip_last_error: Cell<c_int>,
    pub hip_cleared: Cell<u32>,
    /// HIP: whether the runtime has hipStreamGetDevice (ROCm 6+).
    pub hip_stream_get_device: Cell<bool>,
    /// Queries asked uncached (`fresh`): to show findings are confirmed.
    pub fresh_queries: Cell<u32>,
    /// Contexts the program destroyed, as the lifecycle observer tells `DriverFacts`.
    pub destroyed: RefCell<HashSet<u64>>,
    /// Every context asked for its device.
    pub asked_device_of: RefCell<Vec<u64>>,
    /// The kind of memory of allocations (by base) other than what their device says: device
    /// memory is `Device`, memory of no device `Managed`.
    pub kinds: RefCell<HashMap<u64, MemoryKind>>,
    /// `cuLogicalEndpointGetLimits`' answer for every property set (`None`: refused).
    pub endpoint_limits: Cell<Option<(u64, u64)>>,
    /// `cuMemGetAllocationGranularity`'s minimum for every property set (`None`: refused; 2 MiB
    /// unless a test sets it).
    pub granularity: Cell<Option<u64>>,
    /// `hipRuntimeGetVersion`'s answer (`None`: the runtime cannot say).
    pub hip_runtime_version: Cell<Option<i32>>,
    /// The host's IMEX devices (none unless a test says).
    pub imex: Cell<Option<super::facts::Imex>>,
}

impl FakeFacts {
    /// `count` devices that can all peer with each other, unified addressing and compute
    /// capability 9 on each, and no context current.
    pub fn devices(count: i32) -> FakeFacts {
        let f = FakeFacts::default();
        f.granularity.set(Some(2 << 20));
        f.device_count.set(Some(count));
        f.current.set(Some(None));
        for d in 0..count {
            for p in 0..count {
                if d != p {
                    f.peers.borrow_mut().insert((d, p));
                }
            }
            f.attributes
                .borrow_mut()
                .insert((d, super::facts::ATTRIBUTE_UNIFIED_ADDRESSING), 1);
            f.attributes
                .borrow_mut()
                .insert((d, super::facts::ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 9);
        }
        f.hip_stream_get_device.set(true);
        f
    }

    pub fn context(&self, ctx: u64, dev: i32) -> CUcontext {
        self.contexts.borrow_mut().insert(ctx, dev);
        CUcontext(ctx as usize as *mut c_void)
    }

    pub fn make_current(&self, ctx: Option<CUcontext>) {
        self.current.set(Some(ctx.map(CUcontext::addr)));
    }

    pub fn allocate(&self, base: u64, size: u64, device: Option<i32>) -> u64 {
        self.allocations
            .borrow_mut()
            .push(Allocation { base, size, device });
        base
    }

    pub fn stream(&self, stream: u64, owner: u64) -> CUstream {
        self.streams.borrow_mut().insert(stream, owner);
        CUstream(stream as usize as *mut c_void)
    }

    fn allocation(&self, ptr: u64) -> Option<Allocation> {
        self.allocations
            .borrow()
            .iter()
            .copied()
            .find(|a| (a.base..a.base + a.size).contains(&ptr))
    }

    fn hip(&self) -> Option<c_int> {
        Some(SUCCESS)
    }
}

impl Facts for FakeFacts {
    fn current_context(&self) -> Option<Option<CUcontext>> {
        self.current
            .get()
            .map(|c| c.map(|c| CUcontext(c as usize as *mut c_void)))
    }

    fn current_device(&self) -> Option<i32> {
        let ctx = self.current.get()??;
        self.contexts.borrow().get(&ctx).copied()
    }

    fn context_destroyed(&self, ctx: CUcontext) -> bool {
        self.destroyed.borrow().contains(&ctx.addr())
    }

    fn context_alive(&self, ctx: CUcontext) {
        self.destroyed.borrow_mut().remove(&ctx.addr());
    }

    fn context_device(&self, ctx: CUcontext, fresh: bool) -> Option<Result<i32, c_int>> {
        self.asked_device_of.borrow_mut().push(ctx.addr());
        if fresh {
            self.fresh_queries.set(self.fresh_queries.get() + 1);
        }
        if ctx == CUcontext::NULL {
            return None;
        }
        Some(
            self.contexts
                .borrow()
                .get(&ctx.addr())
                .copied()
                .ok_or(INVALID_CONTEXT),
        )
    }

    fn device_count(&self) -> Option<i32> {
        self.device_count.get()
    }

    fn attribute(&self, dev: i32, attribute: c_int) -> Option<i32> {
        self.attributes.borrow().get(&(dev, attribute)).copied()
    }

    fn can_access_peer(&self, dev: i32, peer: i32) -> Option<bool> {
        Some(self.peers.borrow().contains(&(dev, peer)))
    }

    fn allocation_context(&self, _ptr: u64) -> Option<u64> {
        None
    }

    fn device_uuid(&self, dev: i32) -> Option<[u8; 16]> {
        Some([dev as u8; 16])
    }

    fn memory_kind(&self, ptr: u64, _fresh: bool) -> Option<MemoryKind> {
        let a = self.allocation(ptr)?;
        Some(match self.kinds.borrow().get(&a.base) {
            Some(&kind) => kind,
            None if a.device.is_some() => MemoryKind::Device,
            None => MemoryKind::Managed,
        })
    }

    fn allocation_range(&self, ptr: u64, fresh: bool) -> Option<(u64, u64)> {
        if fresh {
            self.fresh_queries.set(self.fresh_queries.get() + 1);
        }
        self.allocation(ptr).map(|a| (a.base, a.size))
    }

    fn cached_range(&self, ptr: u64) -> Option<(u64, u64)> {
        self.allocation(ptr).map(|a| (a.base, a.size))
    }

    fn endpoint_limits(&self, _: &CUlogicalEndpointProp) -> Option<(u64, u64)> {
        self.endpoint_limits.get()
    }

    fn granularity(&self, _: super::facts::GranularityOf, _: &[u64; 4]) -> Option<u64> {
        self.granularity.get()
    }

    fn imex(&self) -> super::facts::Imex {
        self.imex.get().unwrap_or(super::facts::Imex {
            listed: false,
            channel: false,
        })
    }

    fn device_memory_owner(&self, ptr: u64, fresh: bool) -> Option<i32> {
        if fresh {
            self.fresh_queries.set(self.fresh_queries.get() + 1);
        }
        self.allocation(ptr)?.device
    }

    fn stream_context(&self, stream: CUstream, fresh: bool) -> Option<Result<CUcontext, c_int>> {
        if fresh {
            self.fresh_queries.set(self.fresh_queries.get() + 1);
        }
        Some(
            self.streams
                .borrow()
                .get(&stream.addr())
                .map(|&c| CUcontext(c as usize as *mut c_void))
                .ok_or(INVALID_HANDLE),
        )
    }

    fn stream_busy(&self, stream: u64) -> Option<bool> {
        Some(self.busy_streams.borrow().contains(&stream))
    }

    fn primary_context_active(&self, dev: i32) -> Option<bool> {
        self.primary_active.borrow().get(&dev).copied()
    }

    fn hip_last_error_clear(&self) -> bool {
        self.hip_last_error.get() == SUCCESS
    }

    fn hip_clear_last_error(&self) {
        self.hip_cleared.set(self.hip_cleared.get() + 1);
        self.hip_last_error.set(SUCCESS);
    }

    fn hip_current_device(&self) -> Option<(c_int, i32)> {
        // HIP keeps a current device per thread; the fake uses the current context's.
        Some((self.hip()?, self.current_device().unwrap_or(0)))
    }

    fn hip_device_count(&self) -> Option<(c_int, i32)> {
        Some((self.hip()?, self.device_count.get()?))
    }

    fn hip_runtime_version(&self) -> Option<(c_int, i32)> {
        Some((self.hip()?, self.hip_runtime_version.get()?))
    }

    fn hip_can_access_peer(&self, dev: i32, peer: i32) -> Option<(c_int, bool)> {
        Some((self.hip()?, self.peers.borrow().contains(&(dev, peer))))
    }

    fn hip_allocation_range(&self, ptr: u64) -> Option<(c_int, (u64, u64))> {
        match self.allocation_range(ptr, false) {
            Some(range) => Some((SUCCESS, range)),
            // A failing query sets the thread's last error, as HIP does.
            None => {
                self.hip_last_error
                    .set(sharecheck_core::codes::INVALID_VALUE);
                Some((sharecheck_core::codes::INVALID_VALUE, (0, 0)))
            }
        }
    }

    fn hip_device_uuid(&self, dev: i32) -> Option<(c_int, [u8; 16])> {
        Some((self.hip()?, [dev as u8; 16]))
    }

    fn hip_device_memory_owner(&self, ptr: u64) -> Option<(c_int, Option<i32>)> {
        self.hip()?;
        // hipPointerGetAttributes fails on a pointer the runtime does not know.
        match self.allocation(ptr) {
            Some(a) => Some((SUCCESS, a.device)),
            None => Some((INVALID_VALUE, None)),
        }
    }

    fn hip_stream_device(&self, stream: *mut c_void) -> Option<(c_int, i32)> {
        if !self.hip_stream_get_device.get() {
            return None;
        }
        match self.streams.borrow().get(&(stream as usize as u64)) {
            Some(&dev) => Some((SUCCESS, dev as i32)),
            None => Some((INVALID_HANDLE, -1)),
        }
    }
}

/// One process as the checks see it: fake driver facts and fresh tracked state.
pub struct Harness {
    pub facts: FakeFacts,
    pub states: States,
    pub mode: Mode,
    /// `mute=` rule IDs.
    pub mute: Vec<&'static str>,
}

/// What one call gave.
#[derive(Debug)]
pub struct Ran {
    /// The rule IDs found, in order.
    pub rules: Vec<&'static str>,
    pub messages: Vec<String>,
    /// Whether the driver was called (false: refused in strict mode).
    pub forwarded: bool,
    /// What the program got.
    pub ret: c_int,
}

impl Ran {
    /// No rule spoke: no finding, or for a covered call the driver refused, only the generic
    /// explanation every unexplained failure gets (`call.failed`, or `divergence.unlisted` for a
    /// code the function's documentation does not name).
    pub fn is_quiet(&self) -> bool {
        use sharecheck_core::rules::{divergences::UNLISTED, general::CALL_FAILED};
        self.rules.is_empty()
            || (self.ret != 0
                && self.forwarded
                && (self.rules == [CALL_FAILED.id] || self.rules == [UNLISTED.id]))
    }
}

impl Harness {
    pub fn new(facts: FakeFacts) -> Harness {
        Harness {
            facts,
            states: States::default(),
            mode: Mode::Report,
            mute: Vec::new(),
        }
    }

    /// Runs a call the test expects to be clean (the driver answers success).
    pub fn ok<A: Checked>(&self, args: A) {
        let ran = self.call(args, sharecheck_core::codes::SUCCESS);
        assert!(
            ran.rules.is_empty(),
            "correct call reported {:?}: {:?}",
            ran.rules,
            ran.messages
        );
    }

    /// Runs a successful call of a row that only observes the driver's answer as the shim does
    /// without a trace where every check of the row has a quick path
    /// ([`Checked::OBSERVED_QUICKLY`], `dispatch::observe_with`): through the row's quick path,
    /// with no checks' context made.
    pub fn observed_quickly<A: Checked>(&self, args: A) {
        assert!(A::OBSERVED_QUICKLY, "{:?} is not observed quickly", A::ID);
        crate::engine::moved_on();
        let q = super::Quick {
            states: &self.states,
            facts: &self.facts,
            recorded: false,
        };
        assert_eq!(args.quick(&q, || SUCCESS), Some(SUCCESS));
    }

    /// Runs `args` through its row of the table; the driver answers `driver_ret`. A test may
    /// change the fake driver between calls: no clean verdict carries over
    /// ([`crate::engine::generation`]).
    pub fn call<A: Checked>(&self, args: A, driver_ret: c_int) -> Ran {
        crate::engine::moved_on();
        self.call_as_is(args, driver_ret)
    }

    /// Runs `f` (calls that end with one a check remembers) again until no other test moved the
    /// process's checks' generation while it ran: tests run in parallel, and every test's calls
    /// move it.
    pub fn remembering<T>(&self, mut f: impl FnMut(&Harness) -> T) -> T {
        let own = || crate::engine::OWN_MOVES.with(std::cell::Cell::get);
        for _ in 0..1000 {
            let (before, own_before) = (crate::engine::generation(), own());
            let out = f(self);
            if crate::engine::generation() - before == own() - own_before {
                return out;
            }
        }
        panic!("other tests moved the generation during every one of 1000 tries");
    }

    /// Runs `args` through its row's quick path ([`Checked::quick`]); the driver answers
    /// `driver_ret`. `Some(ret)`: the row decided the call clean (and the driver was called);
    /// `None`: it sent the call to the full path (and the driver was not called).
    pub fn quick<A: Checked>(&self, args: A, driver_ret: c_int) -> Option<c_int> {
        self.quick_as(args, driver_ret, false)
    }

    /// [`Harness::quick`] of a call that is `recorded` (a trace is written) or not.
    pub fn quick_as<A: Checked>(
        &self,
        args: A,
        driver_ret: c_int,
        recorded: bool,
    ) -> Option<c_int> {
        crate::engine::moved_on();
        self.quick_as_is(args, driver_ret, recorded)
    }

    /// [`Harness::quick_as`], keeping what checks remember of earlier calls.
    pub fn quick_as_is<A: Checked>(
        &self,
        args: A,
        driver_ret: c_int,
        recorded: bool,
    ) -> Option<c_int> {
        let q = crate::engine::Quick {
            states: &self.states,
            facts: &self.facts,
            recorded,
        };
        let mut called = false;
        let ret = args.quick(&q, || {
            called = true;
            driver_ret
        });
        assert_eq!(
            ret.is_some(),
            called,
            "the driver is called exactly when the row decides"
        );
        ret
    }

    /// [`Harness::call`], keeping what checks remember of earlier calls.
    pub fn call_as_is<A: Checked>(&self, args: A, driver_ret: c_int) -> Ran {
        let options = Options {
            mode: self.mode,
            mute: self.mute.clone(),
            ..Options::default()
        };
        let mut cx = Cx::new(&self.facts, &self.states, &options, 0);
        let mut ret = driver_ret;
        let outcome = args.run(&mut cx, |cx| match cx.refusal() {
            Some(code) => {
                ret = code;
                Outcome::NotCalled
            }
            None => Outcome::Returned(driver_ret),
        });
        let found = settle(A::ID.info(), cx, outcome);
        Ran {
            rules: found.iter().map(|f| f.rule.id).collect(),
            messages: found.into_iter().map(|f| f.message).collect(),
            forwarded: outcome != Outcome::NotCalled,
            ret,
        }
    }
}

/// A negative unit case of a family's tests: its name, exactly the rules it must report, and the
/// scenario (run in a fresh world; what its last call gave).
pub type Case = (&'static str, &'static [&'static str], fn(&Harness) -> Ran);

/// The negative cases of `families`: each, in a fresh `world()`, reports exactly its rules and is
/// forwarded (report mode); and every rule of the families has a case (or is in `elsewhere`:
/// staged by other tests).
pub fn check_negative_cases<'a>(
    world: fn() -> Harness,
    cases: &[Case],
    families: &[&str],
    elsewhere: impl IntoIterator<Item = &'a str>,
) {
    for (name, expected, scenario) in cases {
        let ran = scenario(&world());
        assert_eq!(ran.rules, *expected, "{name}: {:?}", ran.messages);
        assert!(ran.forwarded, "{name}: report mode forwards");
    }
    let covered = cases
        .iter()
        .flat_map(|(_, ids, _)| ids.iter().copied())
        .chain(elsewhere);
    let missing = sharecheck_core::rules::without_case(families, covered);
    assert!(
        missing.is_empty(),
        "rules without a negative unit test: {missing:?}"
    );
}
