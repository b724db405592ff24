//! Every logical endpoint rule through the fake driver: a negative case where exactly that rule
//! fires, and correct calls that stay silent. The end-to-end layer is `tests/endpoint_rules.rs`,
//! with a C program on the simulated driver.

use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use std::ffi::c_void;

fn world() -> Harness {
    Harness::new(FakeFacts::devices(1))
}

/// A reserve of `count` ids that the driver answers with `base` (the out-parameter written as the
/// driver would).
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

static PROP: CUlogicalEndpointProp = CUlogicalEndpointProp {
    type_: CU_LOGICAL_ENDPOINT_TYPE_UNICAST,
    device_or_num_devices: 0,
    size: 2 << 20,
    ipc_handle_types: 0,
    flags: 0,
};

fn create(id: u32) -> args::cuLogicalEndpointCreate {
    args::cuLogicalEndpointCreate {
        leId: CUlogicalEndpointId(id),
        prop: LogicalEndpointPropPtr(&PROP),
    }
}

fn import(id: u32) -> args::cuLogicalEndpointImport {
    args::cuLogicalEndpointImport {
        leId: CUlogicalEndpointId(id),
        handle: LogicalEndpointHandleConstPtr(std::ptr::null::<c_void>()),
        handleType: CUlogicalEndpointIpcHandleType(1),
    }
}

fn destroy(id: u32) -> args::cuLogicalEndpointDestroy {
    args::cuLogicalEndpointDestroy {
        leId: CUlogicalEndpointId(id),
    }
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
            h.ok(create(12));
            h.call(release(10, 4), INVALID_VALUE)
        },
    ),
    (
        "create on an id never reserved",
        &["cuLogicalEndpointCreate.id-not-reserved"],
        |h| h.call(create(7), INVALID_VALUE),
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
];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_endpoint_rule_has_one() {
    check_negative_cases(world, NEGATIVE, &["endpoint"], []);
}

/// The life of ids done right: reserved ranges (two, adjacent, released as one and in parts),
/// endpoints created and imported on reserved ids, destroyed before their release.
#[test]
fn the_life_of_ids_done_right_is_silent() {
    let h = world();
    reserve(&h, 10, 4);
    reserve(&h, 14, 4);
    h.ok(create(10));
    h.ok(import(17));
    h.ok(destroy(10));
    h.ok(destroy(17));
    h.ok(release(10, 8));
    reserve(&h, 30, 8);
    h.ok(create(31));
    h.ok(release(34, 4));
    h.ok(destroy(31));
    h.ok(release(30, 4));
}

/// A finding from tracked state is withdrawn when the driver accepts the call (what the shim did
/// not see, e.g. ids of a range reserved before it was loaded).
#[test]
fn a_call_the_driver_accepts_is_not_reported_from_tracked_state() {
    let h = world();
    let ran = h.call(create(5), SUCCESS);
    assert!(ran.rules.is_empty(), "{:?}", ran.messages);
    let ran = h.call(release(5, 1), SUCCESS);
    assert!(ran.rules.is_empty(), "{:?}", ran.messages);
}
