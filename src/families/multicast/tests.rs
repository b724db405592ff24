//! Every multicast rule through the fake driver: a negative case where exactly that rule fires,
//! with the code the simulated driver answers (modelled on the documentation: no multicast object
//! is ever created on the project's GPU machines), and a correct team that stays silent. The
//! end-to-end layer is `tests/multicast.rs`, with a C program on the simulated driver.

use super::MulticastState;
use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness, Ran};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;

/// The fake driver's granularity (R580's multicast minimum, and its VMM one).
const G: u64 = 2 << 20;
/// The multicast object and the allocations the fake driver's creates return.
const MC: u64 = 0xAC00;
const MEM0: u64 = 0x100;
const MEM1: u64 = 0x200;
/// Where the fake driver reserves.
const VA: u64 = 0x7f00_0000_0000;
const POSIX_FD: u32 = 1;

fn world() -> Harness {
    Harness::new(FakeFacts::devices(2))
}

fn create_with(h: &Harness, prop: CUmulticastObjectProp, ret: i32) -> Ran {
    let mut out = CUmemGenericAllocationHandle(MC);
    h.call(
        args::cuMulticastCreate {
            mcHandle: Out(&mut out),
            prop: MulticastObjectPropPtr(&prop),
        },
        ret,
    )
}

fn team_prop() -> CUmulticastObjectProp {
    CUmulticastObjectProp {
        num_devices: 2,
        size: 2 * G as usize,
        handle_types: u64::from(POSIX_FD),
        flags: 0,
    }
}

fn add(h: &Harness, dev: i32, ret: i32) -> Ran {
    h.call(
        args::cuMulticastAddDevice {
            mcHandle: CUmemGenericAllocationHandle(MC),
            dev: CUdevice(dev),
        },
        ret,
    )
}

/// A team of devices 0 and 1, both added by this process.
fn team(h: &Harness) {
    assert!(create_with(h, team_prop(), SUCCESS).rules.is_empty());
    assert!(add(h, 0, SUCCESS).rules.is_empty());
    assert!(add(h, 1, SUCCESS).rules.is_empty());
}

/// A VMM allocation of `size` bytes on `dev` (the VMM family learns its size and location).
fn memory(h: &Harness, handle: u64, dev: i32, size: u64) {
    memory_at(h, handle, CU_MEM_LOCATION_TYPE_DEVICE, dev, POSIX_FD, size);
}

/// A VMM allocation of `size` bytes at a location, with handle types `types`.
fn memory_at(h: &Harness, handle: u64, location_type: u32, id: i32, types: u32, size: u64) {
    #[repr(C)]
    struct Prop {
        head: CUmemAllocationPropHead,
        rest: [u64; 2],
    }
    let p = Prop {
        head: CUmemAllocationPropHead {
            type_: 1,
            requested_handle_types: types,
            location_type,
            location_id: id,
        },
        rest: [0; 2],
    };
    let mut out = CUmemGenericAllocationHandle(handle);
    h.ok(args::cuMemCreate {
        handle: Out(&mut out),
        size: Size(size as usize),
        prop: MemAllocationPropPtr(&p.head),
        flags: ReservedFlags64(0),
    });
}

/// `handle` mapped whole at `va`.
fn mapped(h: &Harness, handle: u64, va: u64, size: u64) {
    let mut out = CUdeviceptr(va);
    h.ok(args::cuMemAddressReserve {
        ptr: Out(&mut out),
        size: Size(size as usize),
        alignment: Size(0),
        addr: CUdeviceptr(0),
        flags: ReservedFlags64(0),
    });
    h.ok(args::cuMemMap {
        ptr: CUdeviceptr(va),
        size: Size(size as usize),
        offset: Size(0),
        handle: CUmemGenericAllocationHandle(handle),
        flags: ReservedFlags64(0),
    });
}

fn bind_mem(
    h: &Harness,
    mc_offset: u64,
    mem: u64,
    mem_offset: u64,
    size: u64,
    flags: u64,
    ret: i32,
) -> Ran {
    h.call(
        args::cuMulticastBindMem {
            mcHandle: CUmemGenericAllocationHandle(MC),
            mcOffset: Size(mc_offset as usize),
            memHandle: CUmemGenericAllocationHandle(mem),
            memOffset: Size(mem_offset as usize),
            size: Size(size as usize),
            flags: ReservedFlags64(flags),
        },
        ret,
    )
}

fn bind_mem_v2(h: &Harness, dev: i32, mem: u64, ret: i32) -> Ran {
    h.call(
        args::cuMulticastBindMem_v2 {
            mcHandle: CUmemGenericAllocationHandle(MC),
            dev: CUdevice(dev),
            mcOffset: Size(0),
            memHandle: CUmemGenericAllocationHandle(mem),
            memOffset: Size(0),
            size: Size(G as usize),
            flags: ReservedFlags64(0),
        },
        ret,
    )
}

fn bind_addr_v2(h: &Harness, dev: i32, mc_offset: u64, memptr: u64, size: u64, ret: i32) -> Ran {
    h.call(
        args::cuMulticastBindAddr_v2 {
            mcHandle: CUmemGenericAllocationHandle(MC),
            dev: CUdevice(dev),
            mcOffset: Size(mc_offset as usize),
            memptr: CUdeviceptr(memptr),
            size: Size(size as usize),
            flags: ReservedFlags64(0),
        },
        ret,
    )
}

fn unbind(h: &Harness, dev: i32, mc_offset: u64, size: u64, ret: i32) -> Ran {
    h.call(
        args::cuMulticastUnbind {
            mcHandle: CUmemGenericAllocationHandle(MC),
            dev: CUdevice(dev),
            mcOffset: Size(mc_offset as usize),
            size: Size(size as usize),
        },
        ret,
    )
}

/// A team of one device, device 0, added: whole.
fn solo_team(h: &Harness) {
    let prop = CUmulticastObjectProp {
        num_devices: 1,
        ..team_prop()
    };
    assert!(create_with(h, prop, SUCCESS).rules.is_empty());
    assert!(add(h, 0, SUCCESS).rules.is_empty());
}

/// A team of two of which this process added device 0 only (others may add the rest).
fn half_team(h: &Harness) {
    assert!(create_with(h, team_prop(), SUCCESS).rules.is_empty());
    assert!(add(h, 0, SUCCESS).rules.is_empty());
}

const NEGATIVE: &[Case] = &[
    (
        "a create whose size is not a multiple of the granularity",
        &["cuMulticastCreate.size-not-granular"],
        |h| {
            let prop = CUmulticastObjectProp {
                size: (G + 4096) as usize,
                ..team_prop()
            };
            create_with(h, prop, INVALID_VALUE)
        },
    ),
    (
        "a create with flags",
        &["cuMulticastCreate.flags-not-zero"],
        |h| {
            let prop = CUmulticastObjectProp {
                flags: 1,
                ..team_prop()
            };
            create_with(h, prop, INVALID_VALUE)
        },
    ),
    (
        "a third device added to a team of two",
        &["cuMulticastAddDevice.team-full"],
        |h| {
            team(h);
            add(h, 0, INVALID_VALUE)
        },
    ),
    (
        "a bind of half a granule",
        &["cuMulticastBindMem.not-granular"],
        |h| {
            team(h);
            memory(h, MEM0, 0, G);
            bind_mem(h, 0, MEM0, 0, G / 2, 0, INVALID_VALUE)
        },
    ),
    (
        "a bind by address at an address off the granularity",
        &["cuMulticastBindAddr.not-granular"],
        |h| {
            team(h);
            memory(h, MEM1, 1, 2 * G);
            mapped(h, MEM1, VA, 2 * G);
            bind_addr_v2(h, 1, 0, VA + 4096, G, INVALID_VALUE)
        },
    ),
    (
        "a bind past the end of the allocation",
        &["cuMulticastBindMem.past-memory"],
        |h| {
            team(h);
            memory(h, MEM0, 0, G);
            bind_mem(h, 0, MEM0, G, G, 0, INVALID_VALUE)
        },
    ),
    (
        "a bind past the end of the multicast object",
        &["cuMulticastBindMem.past-object"],
        |h| {
            team(h);
            memory(h, MEM0, 0, 2 * G);
            bind_mem(h, 2 * G, MEM0, 0, G, 0, INVALID_VALUE)
        },
    ),
    (
        "a bind by address past the end of the multicast object",
        &["cuMulticastBindAddr.past-object"],
        |h| {
            team(h);
            memory(h, MEM1, 1, 2 * G);
            mapped(h, MEM1, VA, 2 * G);
            bind_addr_v2(h, 1, G, VA, 2 * G, INVALID_VALUE)
        },
    ),
    (
        "a bind of memory of a device outside the whole team",
        &["multicast.bind-memory-not-on-team"],
        |h| {
            solo_team(h);
            memory(h, MEM1, 1, G);
            bind_mem(h, 0, MEM1, 0, G, 0, INVALID_DEVICE)
        },
    ),
    (
        "an unbind of half a granule",
        &["cuMulticastUnbind.not-granular"],
        |h| {
            half_team(h);
            unbind(h, 0, 0, G / 2, INVALID_VALUE)
        },
    ),
    (
        "an unbind past the end of the multicast object",
        &["cuMulticastUnbind.past-object"],
        |h| {
            half_team(h);
            unbind(h, 0, 2 * G, G, INVALID_VALUE)
        },
    ),
    (
        "an unbind of more than the bind",
        &["cuMulticastUnbind.not-a-bind"],
        |h| {
            team(h);
            memory(h, MEM0, 0, G);
            assert!(bind_mem(h, 0, MEM0, 0, G, 0, SUCCESS).rules.is_empty());
            unbind(h, 0, 0, 2 * G, INVALID_VALUE)
        },
    ),
    (
        "a _v2 bind naming a device other than the memory's",
        &["multicast.bind-memory-not-on-dev"],
        |h| {
            team(h);
            memory(h, MEM1, 1, G);
            bind_mem_v2(h, 0, MEM1, INVALID_DEVICE)
        },
    ),
    (
        "a _v2 bind naming a device outside the whole team (host memory)",
        &["multicast.bind-dev-not-in-team"],
        |h| {
            solo_team(h);
            memory_at(h, MEM1, CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, POSIX_FD, G);
            bind_mem_v2(h, 1, MEM1, INVALID_DEVICE)
        },
    ),
    (
        "a bind of memory without handle types to a shareable object",
        &["multicast.bind-memory-not-shareable"],
        |h| {
            team(h);
            memory_at(h, MEM0, CU_MEM_LOCATION_TYPE_DEVICE, 0, 0, G);
            bind_mem(h, 0, MEM0, 0, G, 0, INVALID_VALUE)
        },
    ),
    (
        "a bind with flags",
        &["multicast.bind-flags-not-zero"],
        |h| {
            team(h);
            memory(h, MEM0, 0, G);
            bind_mem(h, 0, MEM0, 0, G, 1, INVALID_VALUE)
        },
    ),
];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_multicast_rule_has_one() {
    // The watchdog's rule is reported on its own thread while a bind blocks: tests/multicast.rs.
    check_negative_cases(
        world,
        NEGATIVE,
        &["multicast"],
        ["multicast.bind-blocked", "multicast.map-blocked"],
    );
}

/// A team filled and bound done right: memory of each device bound by handle and by address,
/// unbound, the object released; a second object then starts a team of its own.
#[test]
fn a_team_done_right_is_silent() {
    let h = world();
    team(&h);
    memory(&h, MEM0, 0, G);
    memory(&h, MEM1, 1, G);
    assert!(bind_mem(&h, 0, MEM0, 0, G, 0, SUCCESS).rules.is_empty());
    mapped(&h, MEM1, VA, G);
    assert!(bind_addr_v2(&h, 1, G, VA, G, SUCCESS).rules.is_empty());
    assert!(unbind(&h, 1, G, G, SUCCESS).rules.is_empty());
    assert!(unbind(&h, 0, 0, G, SUCCESS).rules.is_empty());
    h.ok(args::cuMemRelease {
        handle: CUmemGenericAllocationHandle(MC),
    });
    let tracked = h.states.family::<MulticastState>().teams.lock().len();
    assert_eq!(tracked, 0, "the released object is forgotten");
    team(&h);
}

/// An object this process did not create (imported, or made before the shim was loaded) is the
/// driver's to judge, and so is a team other processes may fill: memory of any device binds
/// without a finding while this process has not added every device.
#[test]
fn what_this_process_cannot_see_is_trusted_to_the_driver() {
    let h = world();
    memory(&h, MEM1, 1, G);
    assert!(bind_mem(&h, 0, MEM1, 0, G, 0, SUCCESS).rules.is_empty());
    assert!(add(&h, 0, SUCCESS).rules.is_empty());
    assert!(create_with(&h, team_prop(), SUCCESS).rules.is_empty());
    assert!(add(&h, 0, SUCCESS).rules.is_empty());
    assert!(bind_mem(&h, 0, MEM1, 0, G, 0, SUCCESS).rules.is_empty());
}
