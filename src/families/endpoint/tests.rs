//! Every logical endpoint rule through the fake driver: a negative case where exactly that rule
//! fires, and correct life cycles that stay silent. The end-to-end layer is
//! `tests/endpoint_rules.rs`, with a C program on the simulated driver.

use crate::engine::facts::MemoryKind;
use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness, Ran};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use std::ffi::c_void;

const MIB: u64 = 1 << 20;
const ALIGN: u64 = 2 * MIB;
const MAX: u64 = 64 << 30;
/// Where the tests map VMM memory.
const VA: u64 = 0x7f00_0000_0000;
/// `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED`, `CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID`.
const FABRIC_SUPPORTED: i32 = 128;
const HOST_NUMA_ID: i32 = 134;
const FABRIC: u32 = 1;

/// Two devices with fabric support on NUMA node 0, limits (2 MiB, 64 GiB) for every property set.
fn world() -> Harness {
    let facts = FakeFacts::devices(2);
    facts.endpoint_limits.set(Some((ALIGN, MAX)));
    for d in 0..2 {
        facts
            .attributes
            .borrow_mut()
            .insert((d, FABRIC_SUPPORTED), 1);
        facts.attributes.borrow_mut().insert((d, HOST_NUMA_ID), 0);
    }
    Harness::new(facts)
}

/// A reserve of `count` ids that the driver answers with `base`.
fn reserve(h: &Harness, base: u32, count: u32) {
    let mut out = CUlogicalEndpointId(base);
    h.ok(args::cuLogicalEndpointIdReserve {
        baseLeId: Out(&mut out),
        count: Count32(count),
    });
}

fn release(base: u32, count: u32) -> args::cuLogicalEndpointIdRelease {
    args::cuLogicalEndpointIdRelease {
        baseLeId: CUlogicalEndpointId(base),
        count: Count32(count),
    }
}

fn prop(
    type_: u32,
    device_or_team: i32,
    size: u64,
    types: u32,
    flags: u32,
) -> CUlogicalEndpointProp {
    CUlogicalEndpointProp {
        type_,
        device_or_num_devices: device_or_team,
        size,
        ipc_handle_types: types,
        flags,
    }
}

fn unicast(owner: i32, types: u32) -> CUlogicalEndpointProp {
    prop(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, owner, 8 * MIB, types, 0)
}

fn multicast(team: i32) -> CUlogicalEndpointProp {
    prop(CU_LOGICAL_ENDPOINT_TYPE_MULTICAST, team, 8 * MIB, 0, 0)
}

/// A create with `p`, answered `ret`. The properties live as long as the call (a local).
fn create_with(h: &Harness, id: u32, p: CUlogicalEndpointProp, ret: i32) -> Ran {
    h.call(
        args::cuLogicalEndpointCreate {
            leId: CUlogicalEndpointId(id),
            prop: LogicalEndpointPropPtr(&p),
        },
        ret,
    )
}

fn create(h: &Harness, id: u32, p: CUlogicalEndpointProp) {
    let ran = create_with(h, id, p, SUCCESS);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

fn query(h: &Harness, id: u32, count: u32, status: i32) {
    let mut out = Int(status);
    h.ok(args::cuLogicalEndpointQuery {
        leId: CUlogicalEndpointId(id),
        count: Count32(count),
        queryStatus: Out(&mut out),
    });
}

fn add(id: u32, dev: i32) -> args::cuLogicalEndpointAddDevice {
    args::cuLogicalEndpointAddDevice {
        leId: CUlogicalEndpointId(id),
        dev: CUdevice(dev),
    }
}

fn bind_addr(
    id: u32,
    dev: i32,
    offset: u64,
    ptr: u64,
    size: u64,
) -> args::cuLogicalEndpointBindAddr {
    args::cuLogicalEndpointBindAddr {
        leId: CUlogicalEndpointId(id),
        dev: CUdevice(dev),
        offset: U64(offset),
        ptr: VoidPtr(ptr as usize as *mut c_void),
        size: U64(size),
        flags: ReservedFlags64(0),
    }
}

fn bind_mem(
    id: u32,
    dev: i32,
    offset: u64,
    handle: u64,
    mem_offset: u64,
    size: u64,
) -> args::cuLogicalEndpointBindMem {
    args::cuLogicalEndpointBindMem {
        leId: CUlogicalEndpointId(id),
        dev: CUdevice(dev),
        offset: U64(offset),
        memHandle: CUmemGenericAllocationHandle(handle),
        memOffset: U64(mem_offset),
        size: U64(size),
        flags: ReservedFlags64(0),
    }
}

fn unbind(id: u32, dev: i32, offset: u64, size: u64) -> args::cuLogicalEndpointUnbind {
    args::cuLogicalEndpointUnbind {
        leId: CUlogicalEndpointId(id),
        dev: CUdevice(dev),
        offset: U64(offset),
        size: U64(size),
    }
}

fn destroy(id: u32) -> args::cuLogicalEndpointDestroy {
    args::cuLogicalEndpointDestroy {
        leId: CUlogicalEndpointId(id),
    }
}

static HANDLE: [u8; 64] = [7; 64];

fn export(id: u32, handle_type: u32) -> args::cuLogicalEndpointExport {
    args::cuLogicalEndpointExport {
        handle: LogicalEndpointHandlePtr(HANDLE.as_ptr() as *mut c_void),
        leId: CUlogicalEndpointId(id),
        handleType: CUlogicalEndpointIpcHandleType(handle_type),
    }
}

fn import(id: u32) -> args::cuLogicalEndpointImport {
    args::cuLogicalEndpointImport {
        leId: CUlogicalEndpointId(id),
        handle: LogicalEndpointHandleConstPtr(HANDLE.as_ptr().cast()),
        handleType: CUlogicalEndpointIpcHandleType(FABRIC),
    }
}

enum At {
    Device(i32),
    Numa(i32),
}

/// `cuMemCreate` of `size` bytes at `at` with `types`, answered with `handle`.
fn mem_create(h: &Harness, handle: u64, size: u64, at: At, types: u32) {
    let (location_type, location_id) = match at {
        At::Device(d) => (CU_MEM_LOCATION_TYPE_DEVICE, d),
        At::Numa(n) => (CU_MEM_LOCATION_TYPE_HOST_NUMA, n),
    };
    let p = CUmemAllocationPropHead {
        type_: 1,
        requested_handle_types: types,
        location_type,
        location_id,
    };
    let mut out = CUmemGenericAllocationHandle(handle);
    h.ok(args::cuMemCreate {
        handle: Out(&mut out),
        size: Size(size as usize),
        prop: MemAllocationPropPtr(&p),
        flags: ReservedFlags64(0),
    });
}

fn mem_map(h: &Harness, ptr: u64, size: u64, handle: u64) {
    h.ok(args::cuMemMap {
        ptr: CUdeviceptr(ptr),
        size: Size(size as usize),
        offset: Size(0),
        handle: CUmemGenericAllocationHandle(handle),
        flags: ReservedFlags64(0),
    });
}

/// VMM memory of `size` bytes on `dev` (handle `0x100 + dev`), mapped at `VA + dev * 1 GiB`;
/// returns the address.
fn device_memory(h: &Harness, dev: i32, size: u64, types: u32) -> u64 {
    let handle = 0x100 + dev as u64;
    let ptr = VA + ((dev as u64) << 30);
    mem_create(h, handle, size, At::Device(dev), types);
    mem_map(h, ptr, size, handle);
    ptr
}

/// Ids 10..14 reserved, a unicast endpoint of 8 MiB on id 10 owned by device 0, created with
/// `types`, and queried ready; 4 MiB of device 0 memory mapped (returned).
fn ready_unicast(h: &Harness, types: u32) -> u64 {
    reserve(h, 10, 4);
    create(h, 10, unicast(0, types));
    query(h, 10, 1, 1);
    device_memory(h, 0, 4 * MIB, types)
}

/// Ids 10..14 reserved, a multicast endpoint of 8 MiB for a team of `team` on id 10.
fn multicast_endpoint(h: &Harness, team: i32) {
    reserve(h, 10, 4);
    create(h, 10, multicast(team));
}

const NEGATIVE: &[Case] = &[
    (
        "release of a range never reserved",
        &["cuLogicalEndpointIdRelease.not-reserved"],
        |h| h.call(release(100, 4), INVALID_VALUE),
    ),
    (
        "release of a range one id longer than the reserve",
        &["cuLogicalEndpointIdRelease.not-reserved"],
        |h| {
            reserve(h, 10, 4);
            h.call(release(10, 5), INVALID_VALUE)
        },
    ),
    (
        "release while an endpoint of the range is not destroyed",
        &["cuLogicalEndpointIdRelease.endpoints-not-destroyed"],
        |h| {
            reserve(h, 10, 4);
            create(h, 12, unicast(0, 0));
            h.call(release(10, 4), INVALID_VALUE)
        },
    ),
    (
        "create on an id never reserved",
        &["cuLogicalEndpointCreate.id-not-reserved"],
        |h| create_with(h, 7, unicast(0, 0), INVALID_VALUE),
    ),
    (
        "create on an id that holds an endpoint",
        &["cuLogicalEndpointCreate.id-in-use"],
        |h| {
            reserve(h, 10, 4);
            create(h, 10, unicast(0, 0));
            create_with(h, 10, unicast(0, 0), INVALID_VALUE)
        },
    ),
    (
        "import into an id released already",
        &["cuLogicalEndpointImport.id-not-reserved"],
        |h| {
            reserve(h, 10, 1);
            h.ok(release(10, 1));
            h.call(import(10), INVALID_VALUE)
        },
    ),
    (
        "import into an id that holds an endpoint",
        &["cuLogicalEndpointImport.id-in-use"],
        |h| {
            reserve(h, 10, 4);
            create(h, 10, unicast(0, 0));
            h.call(import(10), INVALID_VALUE)
        },
    ),
    (
        "a device added to an id without an endpoint",
        &["endpoint.no-endpoint-on-id"],
        |h| {
            reserve(h, 10, 4);
            h.call(add(11, 0), INVALID_VALUE)
        },
    ),
    (
        "create of type INVALID",
        &["cuLogicalEndpointCreate.type-invalid"],
        |h| {
            reserve(h, 10, 4);
            create_with(
                h,
                10,
                prop(CU_LOGICAL_ENDPOINT_TYPE_INVALID, 0, ALIGN, 0, 0),
                INVALID_VALUE,
            )
        },
    ),
    (
        "multicast create with a team of 0",
        &["cuLogicalEndpointCreate.team-empty"],
        |h| {
            reserve(h, 10, 4);
            create_with(h, 10, multicast(0), INVALID_VALUE)
        },
    ),
    (
        "create of a size that is not a multiple of the bind alignment",
        &["cuLogicalEndpointCreate.size-not-aligned"],
        |h| {
            reserve(h, 10, 4);
            let p = prop(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, ALIGN + 4096, 0, 0);
            create_with(h, 10, p, INVALID_VALUE)
        },
    ),
    (
        "create larger than maxSize",
        &["cuLogicalEndpointCreate.size-above-max"],
        |h| {
            reserve(h, 10, 4);
            create_with(
                h,
                10,
                prop(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, 2 * MAX, 0, 0),
                INVALID_VALUE,
            )
        },
    ),
    (
        "create with an unknown flag",
        &["cuLogicalEndpointCreate.flags-unknown"],
        |h| {
            reserve(h, 10, 4);
            create_with(
                h,
                10,
                prop(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, ALIGN, 0, 2),
                INVALID_VALUE,
            )
        },
    ),
    (
        "create with an unknown handle type",
        &["cuLogicalEndpointCreate.handle-type-unknown"],
        |h| {
            reserve(h, 10, 4);
            create_with(h, 10, unicast(0, 4), INVALID_VALUE)
        },
    ),
    (
        "create with FABRIC on a device without fabric handles",
        &["cuLogicalEndpointCreate.handle-type-not-supported"],
        |h| {
            h.facts
                .attributes
                .borrow_mut()
                .insert((1, FABRIC_SUPPORTED), 0);
            reserve(h, 10, 4);
            create_with(h, 10, unicast(1, FABRIC), NOT_SUPPORTED)
        },
    ),
    (
        "a device added to a unicast endpoint",
        &["cuLogicalEndpointAddDevice.not-multicast"],
        |h| {
            reserve(h, 10, 4);
            create(h, 10, unicast(0, 0));
            h.call(add(10, 0), INVALID_VALUE)
        },
    ),
    (
        "a second device added to a team of one",
        &["cuLogicalEndpointAddDevice.team-full"],
        |h| {
            multicast_endpoint(h, 1);
            h.ok(add(10, 0));
            h.call(add(10, 1), INVALID_VALUE)
        },
    ),
    (
        "the same device added twice",
        &["cuLogicalEndpointAddDevice.device-already-added"],
        |h| {
            multicast_endpoint(h, 2);
            h.ok(add(10, 0));
            h.call(add(10, 0), INVALID_VALUE)
        },
    ),
    (
        "a device added after memory was bound",
        &["cuLogicalEndpointAddDevice.after-bind"],
        |h| {
            multicast_endpoint(h, 2);
            h.ok(add(10, 0));
            query(h, 10, 1, 1);
            let ptr = device_memory(h, 0, 4 * MIB, 0);
            h.ok(bind_addr(10, 0, 0, ptr, ALIGN));
            h.call(add(10, 1), INVALID_VALUE)
        },
    ),
    (
        "a query over an id without an endpoint",
        &["cuLogicalEndpointQuery.id-not-endpoint"],
        |h| {
            reserve(h, 10, 4);
            create(h, 10, unicast(0, 0));
            let mut status = Int(-1);
            h.call(
                args::cuLogicalEndpointQuery {
                    leId: CUlogicalEndpointId(10),
                    count: Count32(2),
                    queryStatus: Out(&mut status),
                },
                INVALID_VALUE,
            )
        },
    ),
    (
        "a bind before any query",
        &["endpoint.bind-without-query"],
        |h| {
            reserve(h, 10, 4);
            create(h, 10, unicast(0, 0));
            let ptr = device_memory(h, 0, 4 * MIB, 0);
            h.call(bind_addr(10, 0, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a bind after queries that all answered not ready",
        &["endpoint.bind-before-ready"],
        |h| {
            multicast_endpoint(h, 2);
            h.ok(add(10, 0));
            query(h, 10, 1, 0);
            let ptr = device_memory(h, 0, 4 * MIB, 0);
            h.call(bind_addr(10, 0, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a bind with flags",
        &["endpoint.bind-flags-not-zero"],
        |h| {
            let ptr = ready_unicast(h, 0);
            let mut a = bind_addr(10, 0, 0, ptr, ALIGN);
            a.flags = ReservedFlags64(1);
            h.call(a, INVALID_VALUE)
        },
    ),
    (
        "BindAddr at an address off the bind alignment",
        &["cuLogicalEndpointBindAddr.not-aligned"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.call(bind_addr(10, 0, 0, ptr + 4096, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "BindMem at a memOffset off the bind alignment",
        &["cuLogicalEndpointBindMem.not-aligned"],
        |h| {
            ready_unicast(h, 0);
            h.call(bind_mem(10, 0, 0, 0x100, 4096, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "BindAddr of more bytes than the mapping holds",
        &["cuLogicalEndpointBindAddr.size-beyond-allocation"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.call(bind_addr(10, 0, 0, ptr, 8 * MIB), INVALID_VALUE)
        },
    ),
    (
        "BindMem past the end of the allocation",
        &["cuLogicalEndpointBindMem.size-beyond-allocation"],
        |h| {
            ready_unicast(h, 0);
            h.call(bind_mem(10, 0, 0, 0x100, 2 * MIB, 4 * MIB), INVALID_VALUE)
        },
    ),
    (
        "a bind past the end of the endpoint",
        &["endpoint.bind-beyond-endpoint"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.call(bind_addr(10, 0, 8 * MIB, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "BindAddr of cuMemAlloc memory",
        &["cuLogicalEndpointBindAddr.memory-not-vmm-or-pool"],
        |h| {
            ready_unicast(h, 0);
            let ptr = h.facts.allocate(0x5000_0000, 4 * MIB, Some(0));
            h.call(bind_addr(10, 0, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "BindMem of a handle released already",
        &["cuLogicalEndpointBindMem.memory-not-created"],
        |h| {
            ready_unicast(h, 0);
            h.ok(args::cuMemRelease {
                handle: CUmemGenericAllocationHandle(0x100),
            });
            h.call(bind_mem(10, 0, 0, 0x100, 0, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a bind of another device's memory",
        &["endpoint.bind-memory-of-other-device"],
        |h| {
            ready_unicast(h, 0);
            let ptr = device_memory(h, 1, 4 * MIB, 0);
            h.call(bind_addr(10, 0, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a bind of host memory of a NUMA node not closest to the device",
        &["endpoint.bind-host-memory-not-closest-numa"],
        |h| {
            ready_unicast(h, 0);
            mem_create(h, 0x300, 4 * MIB, At::Numa(1), 0);
            h.call(bind_mem(10, 0, 0, 0x300, 0, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a multicast bind on a device not added",
        &["endpoint.bind-device-not-in-team"],
        |h| {
            multicast_endpoint(h, 2);
            h.ok(add(10, 0));
            query(h, 10, 1, 1);
            let ptr = device_memory(h, 1, 4 * MIB, 0);
            h.call(bind_addr(10, 1, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a unicast bind on a device other than the owner",
        &["endpoint.bind-device-not-owner"],
        |h| {
            ready_unicast(h, 0);
            let ptr = device_memory(h, 1, 4 * MIB, 0);
            h.call(bind_addr(10, 1, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a FABRIC multicast endpoint bound to memory without FABRIC handles",
        &["endpoint.bind-memory-not-shareable"],
        |h| {
            reserve(h, 10, 4);
            create(
                h,
                10,
                prop(CU_LOGICAL_ENDPOINT_TYPE_MULTICAST, 1, 8 * MIB, FABRIC, 0),
            );
            h.ok(add(10, 0));
            query(h, 10, 1, 1);
            let ptr = device_memory(h, 0, 4 * MIB, 0);
            h.call(bind_addr(10, 0, 0, ptr, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "a bind over a bound range",
        &["endpoint.bind-overlaps-binding"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.ok(bind_addr(10, 0, 0, ptr, 4 * MIB));
            h.call(bind_mem(10, 0, 2 * MIB, 0x100, 0, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "an unbind off the bind alignment",
        &["cuLogicalEndpointUnbind.not-aligned"],
        |h| {
            let ptr = ready_unicast(h, 0);
            // The driver accepted a bind at 4 KiB (the finding withdrawn): unbinding it as bound
            // is still off the alignment.
            h.call(bind_addr(10, 0, 4096, ptr, ALIGN), SUCCESS);
            h.call(unbind(10, 0, 4096, ALIGN), INVALID_VALUE)
        },
    ),
    (
        "an unbind at an offset no bind started at",
        &["cuLogicalEndpointUnbind.offset-not-bound"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.ok(bind_addr(10, 0, 0, ptr, 4 * MIB));
            h.call(unbind(10, 0, 2 * MIB, 2 * MIB), INVALID_VALUE)
        },
    ),
    (
        "an unbind larger than the binds at its offset",
        &["cuLogicalEndpointUnbind.size-not-binds"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.ok(bind_addr(10, 0, 0, ptr, ALIGN));
            h.call(unbind(10, 0, 0, 4 * MIB), INVALID_VALUE)
        },
    ),
    (
        "an unbind that ends inside a binding",
        &["cuLogicalEndpointUnbind.cuts-binding"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.ok(bind_addr(10, 0, 0, ptr, 4 * MIB));
            h.call(unbind(10, 0, 0, 2 * MIB), INVALID_VALUE)
        },
    ),
    (
        "a destroy of an id without an endpoint",
        &["cuLogicalEndpointDestroy.not-created"],
        |h| {
            reserve(h, 10, 4);
            h.call(destroy(10), INVALID_VALUE)
        },
    ),
    (
        "a destroy of an endpoint with memory bound",
        &["cuLogicalEndpointDestroy.unbinds-memory"],
        |h| {
            let ptr = ready_unicast(h, 0);
            h.ok(bind_addr(10, 0, 0, ptr, ALIGN));
            h.call(destroy(10), SUCCESS)
        },
    ),
    (
        "an export of a handle type the endpoint was not created with",
        &["cuLogicalEndpointExport.handle-type-not-requested"],
        |h| {
            reserve(h, 10, 4);
            create(h, 10, unicast(0, 0));
            h.call(export(10, FABRIC), INVALID_VALUE)
        },
    ),
    (
        "an import the fabric does not permit",
        &["cuLogicalEndpointImport.not-permitted"],
        |h| {
            reserve(h, 10, 4);
            h.call(import(10), NOT_PERMITTED)
        },
    ),
    (
        "an import of an endpoint this process cannot support",
        &["cuLogicalEndpointImport.not-supported"],
        |h| {
            reserve(h, 10, 4);
            h.call(import(10), NOT_SUPPORTED)
        },
    ),
];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_endpoint_rule_has_one() {
    // The report phase's rules are staged by tests/endpoint_rules.rs and core's report tests.
    let report_phase = sharecheck_core::rules::endpoint::report::REPORTED_ON
        .iter()
        .map(|(rule, _)| rule.id);
    check_negative_cases(world, NEGATIVE, &["endpoint"], report_phase);
}

/// The life of ids done right: reserved ranges (two, adjacent, released as one and in parts),
/// endpoints created and imported on reserved ids, destroyed before their release.
#[test]
fn the_life_of_ids_done_right_is_silent() {
    let h = world();
    reserve(&h, 10, 4);
    reserve(&h, 14, 4);
    create(&h, 10, unicast(0, 0));
    h.ok(import(17));
    h.ok(destroy(10));
    h.ok(destroy(17));
    h.ok(release(10, 8));
    reserve(&h, 30, 8);
    create(&h, 31, unicast(0, 0));
    h.ok(release(34, 4));
    h.ok(destroy(31));
    h.ok(release(30, 4));
}

/// A unicast endpoint through its whole life: queried, bound by address and by handle, both
/// binds unbound with one call of their combined size, destroyed, released; the memory unmapped
/// and released after.
#[test]
fn a_unicast_life_cycle_done_right_is_silent() {
    let h = world();
    let ptr = ready_unicast(&h, 0);
    mem_create(&h, 0x200, 4 * MIB, At::Numa(0), 0);
    h.ok(bind_addr(10, 0, 0, ptr, 4 * MIB));
    h.ok(bind_mem(10, 0, 4 * MIB, 0x200, 2 * MIB, 2 * MIB));
    h.ok(bind_mem(10, 0, 6 * MIB, 0x200, 0, 2 * MIB));
    h.ok(unbind(10, 0, 0, 6 * MIB));
    h.ok(unbind(10, 0, 6 * MIB, 2 * MIB));
    h.ok(destroy(10));
    h.ok(release(10, 4));
    h.ok(args::cuMemUnmap {
        ptr: CUdeviceptr(ptr),
        size: Size(4 << 20),
    });
    h.ok(args::cuMemRelease {
        handle: CUmemGenericAllocationHandle(0x100),
    });
    h.ok(args::cuMemRelease {
        handle: CUmemGenericAllocationHandle(0x200),
    });
}

/// A multicast team of two: both devices added, a query that says "not yet", one that says
/// ready, a bind on each device of its own memory, unbinds, destroy.
#[test]
fn a_multicast_life_cycle_done_right_is_silent() {
    let h = world();
    multicast_endpoint(&h, 2);
    h.ok(add(10, 0));
    query(&h, 10, 1, 0);
    h.ok(add(10, 1));
    query(&h, 10, 1, 1);
    let on0 = device_memory(&h, 0, 4 * MIB, 0);
    let on1 = device_memory(&h, 1, 4 * MIB, 0);
    h.ok(bind_addr(10, 0, 0, on0, 4 * MIB));
    h.ok(bind_addr(10, 1, 0, on1, 4 * MIB));
    h.ok(unbind(10, 0, 0, 4 * MIB));
    h.ok(unbind(10, 1, 0, 4 * MIB));
    h.ok(destroy(10));
    h.ok(release(10, 4));
}

/// A FABRIC endpoint exported, and (as another process would) imported, queried and bound to
/// FABRIC memory; memory-pool memory bound by address.
#[test]
fn export_import_and_pool_memory_done_right_are_silent() {
    let h = world();
    reserve(&h, 10, 4);
    create(&h, 10, unicast(0, 0));
    create(&h, 11, unicast(0, FABRIC));
    h.ok(export(11, FABRIC));
    h.ok(import(12));
    query(&h, 10, 3, 1);
    mem_create(&h, 0x400, 4 * MIB, At::Device(0), CU_MEM_HANDLE_TYPE_FABRIC);
    h.ok(bind_mem(11, 0, 0, 0x400, 0, 4 * MIB));
    h.ok(bind_mem(12, 0, 0, 0x400, 0, 4 * MIB));
    let pool = h.facts.allocate(0x6000_0000, 4 * MIB, Some(0));
    h.facts.kinds.borrow_mut().insert(pool, MemoryKind::Pool);
    h.ok(bind_addr(10, 0, 0, pool, 4 * MIB));
    h.ok(unbind(11, 0, 0, 4 * MIB));
    h.ok(unbind(12, 0, 0, 4 * MIB));
    h.ok(unbind(10, 0, 0, 4 * MIB));
}

/// A finding from tracked state is withdrawn when the driver accepts the call (what the shim did
/// not see, e.g. ids of a range reserved before it was loaded).
#[test]
fn a_call_the_driver_accepts_is_not_reported_from_tracked_state() {
    let h = world();
    let ran = create_with(&h, 5, unicast(0, 0), SUCCESS);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    let ran = h.call(bind_addr(5, 0, 0, 0x1000, ALIGN), SUCCESS);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
    let ran = h.call(release(5, 1), SUCCESS);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

/// Properties behind a NULL or unreadable pointer are not read (the driver refuses them): no
/// finding, no fault.
#[test]
fn properties_behind_a_bad_pointer_are_not_read() {
    let h = world();
    reserve(&h, 10, 4);
    for bad in [
        std::ptr::null(),
        std::ptr::dangling::<CUlogicalEndpointProp>(),
    ] {
        let ran = h.call(
            args::cuLogicalEndpointCreate {
                leId: CUlogicalEndpointId(10),
                prop: LogicalEndpointPropPtr(bad),
            },
            INVALID_VALUE,
        );
        assert!(ran.is_quiet(), "{:?}", ran.messages);
    }
}

/// Where the driver cannot give limits, size rules say nothing (no guess at an alignment).
#[test]
fn without_the_drivers_limits_sizes_are_not_judged() {
    let h = world();
    h.facts.endpoint_limits.set(None);
    reserve(&h, 10, 4);
    let p = prop(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, ALIGN + 4096, 0, 0);
    let ran = create_with(&h, 10, p, INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

/// The shareable-memory sentence is read as multicast endpoints only: a FABRIC unicast endpoint
/// bound to memory without FABRIC handles by its owner is correct.
#[test]
fn a_fabric_unicast_endpoint_may_bind_memory_without_fabric_handles() {
    let h = world();
    reserve(&h, 10, 4);
    create(&h, 10, unicast(0, FABRIC));
    query(&h, 10, 1, 1);
    let ptr = device_memory(&h, 0, 4 * MIB, 0);
    h.ok(bind_addr(10, 0, 0, ptr, ALIGN));
}

/// The note of a destroy says which bindings ended with it, and the memory behind each.
#[test]
fn a_destroy_names_the_bindings_it_ended() {
    let h = world();
    let ptr = ready_unicast(&h, 0);
    h.ok(bind_addr(10, 0, 0, ptr, ALIGN));
    h.ok(bind_mem(10, 0, ALIGN, 0x100, ALIGN, ALIGN));
    let ran = h.call(destroy(10), SUCCESS);
    assert_eq!(ran.rules, ["cuLogicalEndpointDestroy.unbinds-memory"]);
    let text = &ran.messages[0];
    assert!(
        text.contains(&format!("device 0 at 0x0: 0x200000 bytes at {ptr:#x}"))
            && text
                .contains("device 0 at 0x200000: 0x200000 bytes of memHandle 0x100 from 0x200000"),
        "{text}"
    );
    // Gone with it: the next destroy has nothing to destroy.
    assert_eq!(
        h.call(destroy(10), INVALID_VALUE).rules,
        ["cuLogicalEndpointDestroy.not-created"]
    );
}
