//! Every VMM rule through the fake driver: a negative case where exactly that rule fires, with the
//! code R580 answers (scripts/gpu/results/*-vmm-probe.txt), and correct lives that stay silent.
//! The end-to-end layer is `tests/vmm_rules.rs`, with a C program on the simulated driver.

use super::VmmState;
use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness, Ran};
use crate::engine::state::{FamilyState, Lifetime};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;

/// The fake driver's granularity (R580's on H100 and H200 for device memory).
const G: u64 = 2 << 20;
/// Where the fake driver reserves.
const VA: u64 = 0x7f00_0000_0000;
/// The handle the fake driver's creates return.
const H: u64 = 0x100;
const POSIX_FD: u32 = 1;
const FABRIC: u32 = 8;

fn world() -> Harness {
    Harness::new(FakeFacts::devices(2))
}

/// A whole `CUmemAllocationProp` (32 bytes) for device 0 with `types`: the check reads all of
/// it, as the driver does.
#[repr(C)]
struct Prop {
    head: CUmemAllocationPropHead,
    rest: [u64; 2],
}

fn prop(types: u32) -> Prop {
    Prop {
        head: CUmemAllocationPropHead {
            type_: 1,
            requested_handle_types: types,
            location_type: CU_MEM_LOCATION_TYPE_DEVICE,
            location_id: 0,
        },
        rest: [0; 2],
    }
}

fn create_call(h: &Harness, handle: u64, size: u64, ret: i32) -> Ran {
    create_typed(h, handle, size, POSIX_FD, ret)
}

fn create_typed(h: &Harness, handle: u64, size: u64, types: u32, ret: i32) -> Ran {
    let p = prop(types);
    let mut out = CUmemGenericAllocationHandle(handle);
    h.call(
        args::cuMemCreate {
            handle: Out(&mut out),
            size: Size(size as usize),
            prop: MemAllocationPropPtr(&p.head),
            flags: ReservedFlags64(0),
        },
        ret,
    )
}

fn create(h: &Harness, handle: u64, size: u64) {
    let ran = create_call(h, handle, size, SUCCESS);
    assert!(ran.rules.is_empty(), "{:?}", ran.messages);
}

/// Whether `handle` was mapped once (its first map made).
fn mapped_once(h: &Harness, handle: u64) -> bool {
    h.states
        .family::<VmmState>()
        .inner
        .lock()
        .handles
        .get(handle)
        .is_some_and(|e| e.mapped)
}

fn reserve(h: &Harness, at: u64, size: u64) {
    let mut out = CUdeviceptr(at);
    h.ok(args::cuMemAddressReserve {
        ptr: Out(&mut out),
        size: Size(size as usize),
        alignment: Size(0),
        addr: CUdeviceptr(0),
        flags: ReservedFlags64(0),
    });
}

fn map_at(ptr: u64, size: u64, offset: u64, handle: u64) -> args::cuMemMap {
    args::cuMemMap {
        ptr: CUdeviceptr(ptr),
        size: Size(size as usize),
        offset: Size(offset as usize),
        handle: CUmemGenericAllocationHandle(handle),
        flags: ReservedFlags64(0),
    }
}

fn unmap(ptr: u64, size: u64) -> args::cuMemUnmap {
    args::cuMemUnmap {
        ptr: CUdeviceptr(ptr),
        size: Size(size as usize),
    }
}

fn set_access(ptr: u64, size: u64) -> args::cuMemSetAccess {
    args::cuMemSetAccess {
        ptr: CUdeviceptr(ptr),
        size: Size(size as usize),
        desc: MemAccessDescPtr(std::ptr::null()),
        count: Size(1),
    }
}

fn address_free(ptr: u64, size: u64) -> args::cuMemAddressFree {
    args::cuMemAddressFree {
        ptr: CUdeviceptr(ptr),
        size: Size(size as usize),
    }
}

/// An export of `handle` as `handle_type` (the fd or fabric handle is the driver's to write).
fn export(handle: u64, handle_type: u32) -> args::cuMemExportToShareableHandle {
    args::cuMemExportToShareableHandle {
        shareableHandle: ShareableHandleOut(std::ptr::null_mut()),
        handle: CUmemGenericAllocationHandle(handle),
        handleType: MemHandleTypes(handle_type),
        flags: ReservedFlags64(0),
    }
}

fn memset_async(ptr: u64) -> args::cuMemsetD8Async {
    args::cuMemsetD8Async {
        dstDevice: CUdeviceptr(ptr),
        uc: UChar(1),
        N: Size(64),
        hStream: CUstream(std::ptr::null_mut()),
    }
}

fn release(handle: u64) -> args::cuMemRelease {
    args::cuMemRelease {
        handle: CUmemGenericAllocationHandle(handle),
    }
}

/// Two granules created (handle `H`), four reserved at `VA`, the first two mapped.
fn mapped(h: &Harness) {
    create(h, H, 2 * G);
    reserve(h, VA, 4 * G);
    h.ok(map_at(VA, 2 * G, 0, H));
}

const NEGATIVE: &[Case] = &[
    (
        "a create of half a granule",
        &["cuMemCreate.size-not-granular"],
        |h| create_call(h, H, G / 2, INVALID_VALUE),
    ),
    (
        "a FABRIC create refused on a host without an IMEX channel",
        &["cuMemCreate.fabric-without-imex-channel"],
        |h| create_typed(h, H, G, FABRIC, NOT_PERMITTED),
    ),
    (
        "a map at an address one page into a granule",
        &["cuMemMap.not-granular"],
        |h| {
            create(h, H, 2 * G);
            reserve(h, VA, 4 * G);
            h.call(map_at(VA + 4096, G, 0, H), NOT_SUPPORTED)
        },
    ),
    (
        "a map running past the allocation",
        &["cuMemMap.past-allocation"],
        |h| {
            create(h, H, 2 * G);
            reserve(h, VA, 4 * G);
            h.call(map_at(VA, 3 * G, 0, H), NOT_SUPPORTED)
        },
    ),
    (
        "a map outside every reservation",
        &["cuMemMap.not-in-reservation"],
        |h| {
            create(h, H, 2 * G);
            reserve(h, VA, 4 * G);
            h.call(map_at(VA + 4 * G, G, 0, H), NOT_SUPPORTED)
        },
    ),
    ("a map over a mapping", &["cuMemMap.already-mapped"], |h| {
        mapped(h);
        h.call(map_at(VA + G, 2 * G, 0, H), INVALID_VALUE)
    }),
    (
        "an unmap of half a mapping",
        &["cuMemUnmap.not-whole-mapping"],
        |h| {
            mapped(h);
            h.call(unmap(VA, G), INVALID_VALUE)
        },
    ),
    (
        "an access set on a range that runs into unmapped space",
        &["cuMemSetAccess.range-not-mapped"],
        |h| {
            mapped(h);
            h.call(set_access(VA, 3 * G), INVALID_VALUE)
        },
    ),
    (
        "an address free of part of a reservation",
        &["cuMemAddressFree.not-reservation"],
        |h| {
            reserve(h, VA, 4 * G);
            h.call(address_free(VA, 2 * G), INVALID_VALUE)
        },
    ),
    (
        "an export as a type the create did not request",
        &["cuMemExportToShareableHandle.type-not-requested"],
        |h| {
            create(h, H, 2 * G);
            h.call(export(H, FABRIC), INVALID_VALUE)
        },
    ),
    (
        "a memset on a mapping never given access",
        &["vmm.used-before-access"],
        |h| {
            mapped(h);
            h.call(memset_async(VA + 64), INVALID_VALUE)
        },
    ),
    (
        "a release of a handle released already",
        &["cuMemRelease.handle-not-live"],
        |h| {
            create(h, H, 2 * G);
            h.ok(release(H));
            h.call(release(H), INVALID_VALUE)
        },
    ),
];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_vmm_rule_has_one() {
    // The report phase's rules are staged by tests/vmm_rules.rs and core's crossproc tests; the
    // HIP rules by the `hip` module below.
    let report_phase = sharecheck_core::rules::vmm::report::REPORTED_ON
        .iter()
        .map(|(rule, _)| rule.id);
    let hip = sharecheck_core::rules::vmm::FAMILY
        .rules()
        .into_iter()
        .filter(|r| r.id.starts_with("hip"))
        .map(|r| r.id);
    check_negative_cases(world, NEGATIVE, &["vmm"], report_phase.chain(hip));
}

/// Created, reserved, mapped in two mappings, access set on both, a reference retained and
/// released, unmapped one at a time, released while mapped (legal: the memory lives until
/// unmapped), the reservation freed.
#[test]
fn a_vmm_life_done_right_is_silent() {
    let h = world();
    create(&h, H, 2 * G);
    reserve(&h, VA, 4 * G);
    h.ok(map_at(VA, G, 0, H));
    h.ok(map_at(VA + G, G, G, H));
    h.ok(set_access(VA, 2 * G));
    h.ok(memset_async(VA + G));
    let mut kept = CUmemGenericAllocationHandle(H);
    h.ok(args::cuMemRetainAllocationHandle {
        handle: Out(&mut kept),
        addr: VoidPtr(VA as usize as *mut std::ffi::c_void),
    });
    h.ok(export(H, POSIX_FD));
    h.ok(release(H));
    h.ok(release(H));
    h.ok(unmap(VA, G));
    h.ok(unmap(VA + G, G));
    h.ok(address_free(VA, 4 * G));
}

/// An unmap of a range where nothing is mapped: R580 answers 0 and does nothing. Inside a
/// reservation the shim saw made, it knows that: reported though the driver accepted it. In a
/// reservation it never saw (made before it was loaded), only the driver would know: silent.
#[test]
fn an_unmap_of_nothing_is_reported_where_the_shim_knows_the_reservation() {
    let h = world();
    mapped(&h);
    let ran = h.call(unmap(VA + 2 * G, G), SUCCESS);
    assert_eq!(
        ran.rules,
        ["cuMemUnmap.not-whole-mapping"],
        "{:?}",
        ran.messages
    );
    assert!(
        ran.messages[0].contains("nothing is mapped at"),
        "{:?}",
        ran.messages
    );
    let unseen = world();
    unseen.ok(unmap(VA, G));
}

/// A map, an access or a free in a reservation the shim did not see made is withdrawn when the
/// driver accepts it; an unknown handle's release too.
#[test]
fn what_predates_the_shim_is_trusted_to_the_driver() {
    let h = world();
    h.ok(map_at(VA, G, 0, 0x999));
    h.ok(set_access(VA, G));
    h.ok(address_free(VA, 4 * G));
    h.ok(release(0x999));
}

/// While every mapping has access, copies and memsets have nothing to check (the rows are idle
/// when untraced); a mapping without access makes them check, until access is set or it goes.
#[test]
fn copies_check_vmm_memory_only_while_a_mapping_lacks_access() {
    use crate::engine::Checked;
    let h = world();
    assert!(args::cuMemsetD8Async::idle(&h.states));
    mapped(&h);
    assert!(!args::cuMemsetD8Async::idle(&h.states));
    h.ok(set_access(VA, 2 * G));
    assert!(args::cuMemsetD8Async::idle(&h.states));
    h.ok(map_at(VA + 2 * G, 2 * G, 0, H));
    assert!(!args::cuMemsetD8Async::idle(&h.states));
    h.ok(unmap(VA + 2 * G, 2 * G));
    assert!(args::cuMemsetD8Async::idle(&h.states));
}

/// A map, unmap or access the shim applied to its state before the driver's call is taken back
/// when the driver refuses the call: what is tracked is what the driver did.
#[test]
fn a_refused_call_leaves_the_tracked_state_as_it_was() {
    let h = world();
    create(&h, H, 2 * G);
    reserve(&h, VA, 4 * G);
    // A map the driver refuses (nothing the shim knows is wrong with it): not mapped after.
    assert!(h.call(map_at(VA, 2 * G, 0, H), NOT_SUPPORTED).is_quiet());
    h.ok(map_at(VA, 2 * G, 0, H));
    // An unmap the driver refuses: still mapped, so a map over it is reported.
    assert!(h.call(unmap(VA, 2 * G), INVALID_VALUE).is_quiet());
    let ran = h.call(map_at(VA, 2 * G, 0, H), INVALID_VALUE);
    assert_eq!(ran.rules, ["cuMemMap.already-mapped"], "{:?}", ran.messages);
    // An access the driver refuses: a memset still uses memory without access.
    assert!(h.call(set_access(VA, 2 * G), INVALID_VALUE).is_quiet());
    let ran = h.call(memset_async(VA), INVALID_VALUE);
    assert_eq!(ran.rules, ["vmm.used-before-access"], "{:?}", ran.messages);
    h.ok(set_access(VA, 2 * G));
    h.ok(memset_async(VA));
    // An unmap the driver refuses puts back what the mapping was: its access (a memset stays
    // quiet) and what its handle's memory is.
    assert!(h.call(unmap(VA, 2 * G), INVALID_VALUE).is_quiet());
    h.ok(memset_async(VA));
    let state = h.states.family::<VmmState>();
    let (start, m) = state.mapping(VA).expect("still mapped");
    assert_eq!(
        (start, m.size, m.handle, m.accessible),
        (VA, 2 * G, H, true)
    );
    assert_eq!(m.physical.size.map(std::num::NonZero::get), Some(2 * G));
    assert_eq!(
        m.physical.granularity,
        state.handle(H).and_then(|p| p.granularity)
    );
    h.ok(unmap(VA, 2 * G));
    h.ok(map_at(VA, 2 * G, 0, H));
}

/// What a map reads beside the family's lock instead of the tables (issue 24: the handle last
/// taken or mapped, the latest reservation) is what the tables hold after every change: a handle
/// released, and its value handed out again for other memory; another handle taken; a
/// reservation made after another, and freed. Maps and unmaps out of address order (not at the
/// last mapping) find the mappings in the table.
#[test]
fn what_a_map_remembers_is_what_the_tables_hold() {
    const H2: u64 = H + 1;
    const VA2: u64 = VA + 16 * G;
    let h = world();
    let coherent = |h: &Harness| {
        let vmm = h.states.family::<VmmState>().inner.lock();
        if let Some((handle, entry)) = vmm.handles.recent {
            let held = vmm
                .handles
                .table
                .get(&handle)
                .expect("a remembered handle is held");
            assert_eq!(
                (held.physical.size, held.references, held.mapped),
                (entry.physical.size, entry.references, entry.mapped)
            );
        }
        let (start, size) = vmm.latest_reservation;
        if size != 0 {
            assert_eq!(vmm.reservations.get(start), Some(size));
        }
    };
    create(&h, H, 2 * G);
    reserve(&h, VA, 8 * G);
    h.ok(map_at(VA, 2 * G, 0, H));
    coherent(&h);
    assert!(
        h.states
            .family::<VmmState>()
            .inner
            .lock()
            .handles
            .get(H)
            .unwrap()
            .mapped
    );
    h.ok(unmap(VA, 2 * G));
    h.ok(release(H));
    coherent(&h);
    // Nothing is known of a released handle (what was known of its 2 granules would make 4 past
    // the allocation).
    assert!(h.call(map_at(VA, 4 * G, 0, H), INVALID_VALUE).is_quiet());
    // Its value handed out again, for one granule: two are past this allocation.
    create(&h, H, G);
    coherent(&h);
    let ran = h.call(map_at(VA, 2 * G, 0, H), INVALID_VALUE);
    assert_eq!(
        ran.rules,
        ["cuMemMap.past-allocation"],
        "{:?}",
        ran.messages
    );
    // Another handle taken and mapped high; `H` then mapped below it (not after the last
    // mapping), and over it.
    create(&h, H2, 2 * G);
    h.ok(map_at(VA + 4 * G, 2 * G, 0, H2));
    h.ok(map_at(VA, G, 0, H));
    coherent(&h);
    let ran = h.call(map_at(VA + 4 * G, G, 0, H), INVALID_VALUE);
    assert_eq!(ran.rules, ["cuMemMap.already-mapped"], "{:?}", ran.messages);
    // A second reservation, the latest: a map into the first finds it in the table.
    reserve(&h, VA2, 4 * G);
    coherent(&h);
    h.ok(map_at(VA + 6 * G, G, 0, H));
    // Unmaps of the first mapping and of the middle one (neither is the last).
    h.ok(unmap(VA, G));
    h.ok(unmap(VA + 4 * G, 2 * G));
    h.ok(unmap(VA + 6 * G, G));
    // The latest reservation freed: a map into its range is outside every reservation.
    h.ok(address_free(VA2, 4 * G));
    coherent(&h);
    let ran = h.call(map_at(VA2, G, 0, H), INVALID_VALUE);
    assert_eq!(
        ran.rules,
        ["cuMemMap.not-in-reservation"],
        "{:?}",
        ran.messages
    );
    assert!(h.states.family::<VmmState>().inner.lock().maps.0.is_empty());
}

/// An untraced clean map and unmap take the quick path (no checks' context) and change what the
/// full path changes (a handle's first map marks it mapped); a refused one is undone there;
/// anything else (a finding, a range that is not one mapping, a multicast object tracked) goes to
/// the full path with nothing changed and the driver not called.
#[test]
fn a_clean_map_and_unmap_take_the_quick_path_and_change_what_the_full_one_does() {
    let h = world();
    let state = || h.states.family::<VmmState>();
    let own = || crate::engine::OWN_MOVES.with(std::cell::Cell::get);
    create(&h, H, 2 * G);
    reserve(&h, VA, 4 * G);
    let mapped_once = || mapped_once(&h, H);
    // The handle's first map, refused and then made: marked mapped once made.
    assert_eq!(
        h.quick(map_at(VA, 2 * G, 0, H), INVALID_VALUE),
        Some(INVALID_VALUE)
    );
    assert!(!mapped_once());
    assert_eq!(h.quick(map_at(VA, 2 * G, 0, H), SUCCESS), Some(SUCCESS));
    assert!(mapped_once());
    h.ok(unmap(VA, 2 * G));
    // A clean map: mapped as the full path maps it (no access yet).
    assert_eq!(h.quick(map_at(VA, 2 * G, 0, H), SUCCESS), Some(SUCCESS));
    let (start, m) = state().mapping(VA).expect("mapped");
    assert_eq!(
        (start, m.size, m.handle, m.accessible),
        (VA, 2 * G, H, false)
    );
    assert_eq!(m.physical.size.map(std::num::NonZero::get), Some(2 * G));
    let ran = h.call(memset_async(VA), INVALID_VALUE);
    assert_eq!(ran.rules, ["vmm.used-before-access"], "{:?}", ran.messages);
    h.ok(set_access(VA, 2 * G));
    // An unmap the driver refuses: put back with its access; the memory's end is not told.
    let moves = own();
    assert_eq!(
        h.quick(unmap(VA, 2 * G), INVALID_VALUE),
        Some(INVALID_VALUE)
    );
    assert_eq!(own() - moves, 1, "only the harness's own move");
    assert!(state().mapping(VA).is_some_and(|(_, m)| m.accessible));
    assert!(h.call(memset_async(VA), INVALID_VALUE).is_quiet());
    // A clean unmap: gone, and the memory's end told (the facts' generation moved).
    let moves = own();
    assert_eq!(h.quick(unmap(VA, 2 * G), SUCCESS), Some(SUCCESS));
    assert_eq!(own() - moves, 2, "the harness's move and the end's");
    assert!(state().mapping(VA).is_none());
    // A map the driver refuses: not mapped.
    assert_eq!(
        h.quick(map_at(VA, 2 * G, 0, H), INVALID_VALUE),
        Some(INVALID_VALUE)
    );
    assert!(state().mapping(VA).is_none());
    // A map with a finding (one page into a granule) and one over a mapping: the full path's,
    // with the tracked mappings as they were.
    h.ok(map_at(VA, G, 0, H));
    assert_eq!(h.quick(map_at(VA + G + 4096, G, 0, H), SUCCESS), None);
    assert_eq!(h.quick(map_at(VA, G, G, H), SUCCESS), None);
    assert_eq!(state().inner.lock().maps.0.len(), 1);
    // An unmap of a range that is not one mapping.
    assert_eq!(h.quick(unmap(VA, 2 * G), SUCCESS), None);
    assert!(state().mapping(VA).is_some());
    h.ok(unmap(VA, G));
    // A multicast object tracked: the map is the full path's (its check may arm a watchdog),
    // and what the VMM check staged before the multicast one declined is taken back.
    let prop = CUmulticastObjectProp {
        num_devices: 2,
        size: 2 * G as usize,
        handle_types: u64::from(POSIX_FD),
        flags: 0,
    };
    let mut mc = CUmemGenericAllocationHandle(0x900);
    h.ok(args::cuMulticastCreate {
        mcHandle: Out(&mut mc),
        prop: MulticastObjectPropPtr(&prop),
    });
    assert_eq!(h.quick(map_at(VA, 2 * G, 0, H), SUCCESS), None);
    assert!(state().mapping(VA).is_none(), "taken back");
    h.ok(map_at(VA, 2 * G, 0, H));
}

/// A clean `cuMemSetAccess` (exactly one mapping) takes the quick path and changes what the full
/// one does: access given, taken back when the driver refuses; the same call again is the
/// thread's last clean one; a range that is not one mapping goes to the full path, unchanged.
#[test]
fn a_clean_set_access_takes_the_quick_path_and_changes_what_the_full_one_does() {
    let h = world();
    let state = || h.states.family::<VmmState>();
    let accessible = |va: u64| state().mapping(va).is_some_and(|(_, m)| m.accessible);
    create(&h, H, 2 * G);
    reserve(&h, VA, 4 * G);
    h.ok(map_at(VA, 2 * G, 0, H));
    // Refused by the driver: the access staged before the call is taken back.
    assert_eq!(
        h.quick(set_access(VA, 2 * G), INVALID_VALUE),
        Some(INVALID_VALUE)
    );
    assert!(!accessible(VA));
    let ran = h.call(memset_async(VA), INVALID_VALUE);
    assert_eq!(ran.rules, ["vmm.used-before-access"], "{:?}", ran.messages);
    // Made: access given, as the full path gives it; again: nothing to change, still quick.
    assert_eq!(h.quick(set_access(VA, 2 * G), SUCCESS), Some(SUCCESS));
    assert!(accessible(VA));
    assert!(h.call(memset_async(VA), SUCCESS).is_quiet());
    assert_eq!(h.quick(set_access(VA, 2 * G), SUCCESS), Some(SUCCESS));
    assert_eq!(
        h.quick_as(set_access(VA, 2 * G), SUCCESS, true),
        Some(SUCCESS),
        "recorded as a clean call"
    );
    // Part of a mapping, or past it: the full path's (its finding), with nothing changed.
    assert_eq!(h.quick(set_access(VA, G), SUCCESS), None);
    assert_eq!(h.quick(set_access(VA, 3 * G), SUCCESS), None);
    assert!(accessible(VA));
    let ran = h.call(set_access(VA, 3 * G), SUCCESS);
    assert_eq!(
        ran.rules,
        ["cuMemSetAccess.range-not-mapped"],
        "{:?}",
        ran.messages
    );
}

/// Recorded (a trace is written), a handle's first map is the full path's, which keeps its stack
/// in the record; its later clean maps and unmaps are quick, as unrecorded.
#[test]
fn a_recorded_first_map_takes_the_full_path_and_later_ones_the_quick_one() {
    let h = world();
    let state = || h.states.family::<VmmState>();
    let mapped_once = || mapped_once(&h, H);
    create(&h, H, 2 * G);
    reserve(&h, VA, 4 * G);
    // The first map: declined, with nothing staged or marked.
    assert_eq!(h.quick_as(map_at(VA, 2 * G, 0, H), SUCCESS, true), None);
    assert!(state().mapping(VA).is_none(), "nothing staged");
    assert!(!mapped_once());
    // Unrecorded, the same map is quick.
    assert_eq!(
        h.quick_as(map_at(VA, 2 * G, 0, H), SUCCESS, false),
        Some(SUCCESS)
    );
    assert!(mapped_once());
    assert_eq!(h.quick_as(unmap(VA, 2 * G), SUCCESS, true), Some(SUCCESS));
    // Later maps of the handle: quick when recorded too.
    assert_eq!(
        h.quick_as(map_at(VA, 2 * G, 0, H), SUCCESS, true),
        Some(SUCCESS)
    );
    assert!(state().mapping(VA).is_some());
}

/// The same access set again, with no change to the mappings since, is remembered clean: the
/// check neither looks at nor changes the tracked state. Any change to the mappings ends it.
#[test]
fn an_access_set_again_is_remembered_until_the_mappings_change() {
    let h = world();
    mapped(&h);
    h.ok(set_access(VA, 2 * G));
    // What only the state knows: the mapping gone, without the family's generation moving. A
    // check that looked would report the range unmapped.
    let hidden = |h: &Harness| {
        let state = h.states.family::<VmmState>();
        let taken = state.inner.lock().maps.remove(VA);
        let ran = h.call_as_is(set_access(VA, 2 * G), SUCCESS);
        let m = taken.expect("the mapping was tracked");
        state.inner.lock().maps.insert(VA, m);
        ran
    };
    let ran = h.remembering(|h| {
        h.ok(set_access(VA, 2 * G));
        hidden(h)
    });
    assert!(ran.rules.is_empty(), "remembered: {:?}", ran.messages);
    // A map elsewhere moves the family's generation: the range is looked at again.
    h.ok(map_at(VA + 2 * G, G, 0, H));
    let ran = hidden(&h);
    assert_eq!(
        ran.rules,
        ["cuMemSetAccess.range-not-mapped"],
        "{:?}",
        ran.messages
    );
}

/// A FABRIC create is explained by the IMEX devices only when the host lacks them: with a channel
/// the refusal is the driver's to explain, and a create that succeeds is silent.
#[test]
fn a_fabric_create_is_explained_by_imex_only_where_the_host_lacks_it() {
    use crate::engine::facts::Imex;
    let h = world();
    h.facts.imex.set(Some(Imex {
        listed: true,
        channel: false,
    }));
    let ran = create_typed(&h, H, G, FABRIC, NOT_PERMITTED);
    assert!(
        ran.messages.iter().any(|m| m.contains("no channel file")),
        "{:?}",
        ran.messages
    );
    h.facts.imex.set(Some(Imex {
        listed: true,
        channel: true,
    }));
    let ran = create_typed(&h, H, G, FABRIC, NOT_PERMITTED);
    assert!(
        !ran.rules
            .contains(&"cuMemCreate.fabric-without-imex-channel"),
        "{:?}",
        ran.rules
    );
    h.facts.imex.set(None);
    let ran = create_typed(&h, H + 1, G, FABRIC, SUCCESS);
    assert!(ran.rules.is_empty(), "{:?}", ran.messages);
    // Without FABRIC, NOT_PERMITTED is not this rule's.
    let ran = create_call(&h, H + 2, G, NOT_PERMITTED);
    assert!(
        !ran.rules
            .contains(&"cuMemCreate.fabric-without-imex-channel"),
        "{:?}",
        ran.rules
    );
}

/// A granularity the driver does not give (it refused the properties) decides nothing.
#[test]
fn without_the_driver_s_granularity_no_granularity_rule_fires() {
    let h = world();
    h.facts.granularity.set(None);
    create(&h, H, G / 2);
    reserve(&h, VA, 4 * G);
    h.ok(map_at(VA + 4096, G / 2, 0, H));
}

/// A context's end clears what is tracked: nothing is claimed about memory it may have taken.
#[test]
fn an_ended_context_clears_what_is_tracked() {
    let h = world();
    mapped(&h);
    FamilyState::forget(h.states.family::<VmmState>(), Lifetime::ContextDestroyed(1));
    assert!(h.states.family::<VmmState>().mapping(VA).is_none());
    // The reservation is unknown now: its unmapped part is the driver's to judge.
    h.ok(unmap(VA + 2 * G, G));
}

#[test]
fn the_sorted_map_finds_entries_by_address() {
    let mut s = super::Sorted::<u32>::default();
    assert_eq!(s.insert(30, 3), None);
    assert_eq!(s.insert(10, 1), None);
    assert_eq!(s.insert(20, 2), None);
    assert_eq!(s.insert(20, 4), Some(2), "a key again replaces its value");
    // The last entry is looked at first; keys before it are searched for.
    assert_eq!(super::Sorted::<u32>::default().at(5), Err(0));
    assert_eq!(
        (s.at(30), s.at(40), s.at(20), s.at(15), s.at(5)),
        (Ok(2), Err(3), Ok(1), Err(1), Err(0))
    );
    assert_eq!(s.at_or_before(35), Some((30, 3)));
    assert_eq!(s.at_or_before(30), Some((30, 3)));
    assert_eq!(s.get(20), Some(4));
    assert_eq!(s.get(25), None);
    assert_eq!(s.at_or_before(25), Some((20, 4)));
    assert_eq!(s.at_or_before(9), None);
    assert_eq!(s.range(10, 30), &[(10, 1), (20, 4)]);
    assert_eq!(s.range(31, 40), &[]);
    for (_, v) in s.range_mut(20, 31) {
        *v += 10;
    }
    assert_eq!(s.remove(20), Some(14));
    assert_eq!(s.range(0, 100), &[(10, 1), (30, 13)]);
}

/// An exported POSIX fd still open at exit is left, on the export that gave it; one closed is
/// not, nor one whose number now holds a file of another kind than the process's first export,
/// and a number exported again is the later export's.
#[test]
fn an_exported_fd_still_open_at_exit_is_left() {
    use sharecheck_core::rules::vmm::report::FD_NEVER_CLOSED_RULE;
    let h = world();
    create(&h, H, 2 * G);
    // Real descriptors, as the driver's exports are: memfds (the kind of the first export),
    // placed at numbers of this test's own (the test threads share the process's table).
    let place = |fd: i32, at: i32| {
        // SAFETY: dup2 of a descriptor this test made onto a number only this test uses; the
        // original is closed.
        unsafe {
            assert_eq!(libc::dup2(fd, at), at);
            libc::close(fd);
        }
        at
    };
    let memfd = |at: i32| {
        // SAFETY: memfd_create with a valid name; the result is checked.
        let fd = unsafe { libc::memfd_create(c"vmm-test-export".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        place(fd, at)
    };
    let exported = |h: &Harness, handle: u64, fd: i32| {
        let mut out = fd;
        let mut a = export(handle, POSIX_FD);
        a.shareableHandle = ShareableHandleOut((&mut out as *mut i32).cast());
        h.ok(a);
    };
    let left = |h: &Harness| -> Vec<String> {
        h.states
            .family::<VmmState>()
            .left_at_exit()
            .into_iter()
            .filter(|l| l.rule.id == FD_NEVER_CLOSED_RULE.id)
            .map(|l| l.call)
            .collect()
    };
    let (a, b) = (memfd(901), memfd(902));
    exported(&h, H, a);
    exported(&h, H, b);
    assert_eq!(
        left(&h),
        [
            "cuMemExportToShareableHandle(handle=0x100) -> fd 901",
            "cuMemExportToShareableHandle(handle=0x100) -> fd 902"
        ]
    );
    assert_eq!(h.states.family::<VmmState>().exported_fds_open(), [a, b]);
    // Closed: not left.
    // SAFETY: closes a descriptor this test made.
    unsafe { libc::close(b) };
    assert_eq!(left(&h).len(), 1);
    // The number given again by a later export: that export's.
    exported(&h, 0x200, memfd(b));
    assert_eq!(
        left(&h)[1],
        "cuMemExportToShareableHandle(handle=0x200) -> fd 902"
    );
    // The number now holding a file of another kind (not an export): not left.
    // SAFETY: opens /dev/null; the result is checked.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(null >= 0);
    place(null, b);
    assert_eq!(left(&h).len(), 1);
    // A refused export keeps nothing.
    let mut out = 903;
    let mut refused = export(H, POSIX_FD);
    refused.shareableHandle = ShareableHandleOut((&mut out as *mut i32).cast());
    h.call(refused, sharecheck_core::codes::INVALID_VALUE);
    memfd(903);
    assert_eq!(left(&h).len(), 1);
    // SAFETY: closes descriptors this test made.
    unsafe {
        libc::close(a);
        libc::close(b);
        libc::close(903);
    }
    assert!(left(&h).is_empty());
    assert!(h.states.family::<VmmState>().exported_fds_open().is_empty());
}

/// What a process still holds is what it left at its exit: a handle's references, its mappings,
/// its reservations; given back, nothing.
#[test]
fn what_is_still_held_is_left_at_exit() {
    use sharecheck_core::rules::vmm::report::*;
    let h = world();
    mapped(&h);
    let rules = |h: &Harness| -> Vec<&str> {
        h.states
            .family::<VmmState>()
            .left_at_exit()
            .iter()
            .map(|l| l.rule.id)
            .collect()
    };
    assert_eq!(
        rules(&h),
        [
            NEVER_RELEASED_RULE.id,
            NEVER_UNMAPPED_RULE.id,
            NEVER_FREED_RULE.id
        ]
    );
    let left = h.states.family::<VmmState>().left_at_exit();
    assert!(
        left[0].message.starts_with("1 reference to handle 0x100"),
        "{left:?}"
    );
    assert!(
        left[1].call.starts_with("cuMemMap(ptr=0x7f0000000000"),
        "{left:?}"
    );
    h.ok(unmap(VA, 2 * G));
    h.ok(address_free(VA, 4 * G));
    h.ok(release(H));
    assert!(rules(&h).is_empty());
}

mod hip {
    //! The HIP side: each rule's negative case with the ROCm 6.2 runtime's answer (read in its
    //! source, `hipamd/src/hip_vm.cpp`), and a correct life that stays silent.

    use super::{world, G, H, VA};
    use crate::engine::fake::{check_negative_cases, Case, Harness, Ran};
    use sharecheck_core::codes::*;
    use sharecheck_core::ffi::*;
    use sharecheck_core::functions::args;
    use std::ffi::c_void;

    fn ptr(at: u64) -> VoidPtr {
        VoidPtr(at as usize as *mut c_void)
    }

    fn create_flags(h: &Harness, handle: u64, flags: u64, ret: i32) -> Ran {
        let mut out = hipMemGenericAllocationHandle_t(handle);
        h.call(
            args::hipMemCreate {
                handle: Out(&mut out),
                size: Size(G as usize),
                prop: HipMemAllocationPropPtr(std::ptr::null()),
                flags: ReservedFlags64(flags),
            },
            ret,
        )
    }

    fn create(h: &Harness, handle: u64) {
        let ran = create_flags(h, handle, 0, SUCCESS);
        assert!(ran.rules.is_empty(), "{:?}", ran.messages);
    }

    fn release(handle: u64) -> args::hipMemRelease {
        args::hipMemRelease {
            handle: hipMemGenericAllocationHandle_t(handle),
        }
    }

    fn reserve_flags(h: &Harness, at: u64, flags: u64, ret: i32) -> Ran {
        let mut out = VoidPtrOut(at as usize as *mut c_void);
        h.call(
            args::hipMemAddressReserve {
                ptr: Out(&mut out),
                size: Size(4 * G as usize),
                alignment: Size(0),
                addr: ptr(0),
                flags: ReservedFlags64(flags),
            },
            ret,
        )
    }

    fn reserve(h: &Harness, at: u64) {
        let ran = reserve_flags(h, at, 0, SUCCESS);
        assert!(ran.rules.is_empty(), "{:?}", ran.messages);
    }

    fn address_free(at: u64) -> args::hipMemAddressFree {
        args::hipMemAddressFree {
            devPtr: ptr(at),
            size: Size(4 * G as usize),
        }
    }

    fn map(at: u64, offset: u64, flags: u64) -> args::hipMemMap {
        args::hipMemMap {
            ptr: ptr(at),
            size: Size(G as usize),
            offset: Size(offset as usize),
            handle: hipMemGenericAllocationHandle_t(H),
            flags: ReservedFlags64(flags),
        }
    }

    /// An export whose `shareableHandle` holds `fd` (what the runtime writes there).
    fn export(flags: u64, fd: i32) -> (args::hipMemExportToShareableHandle, Box<i32>) {
        let mut fd = Box::new(fd);
        let a = args::hipMemExportToShareableHandle {
            shareableHandle: ShareableHandleOut((&mut *fd as *mut i32).cast()),
            handle: hipMemGenericAllocationHandle_t(H),
            handleType: HipMemHandleTypes(1),
            flags: ReservedFlags64(flags),
        };
        (a, fd)
    }

    const NEGATIVE: &[Case] = &[
        (
            "a create with flags",
            &["hipMemCreate.flags-not-zero"],
            |h| create_flags(h, H, 1, INVALID_VALUE),
        ),
        (
            "a reserve with flags",
            &["hipMemAddressReserve.flags-not-zero"],
            |h| reserve_flags(h, VA, 4, INVALID_VALUE),
        ),
        (
            "an export with flags",
            &["hipMemExportToShareableHandle.flags-not-zero"],
            |h| {
                create(h, H);
                let (a, _fd) = export(2, -1);
                h.call(a, INVALID_VALUE)
            },
        ),
        ("a map with flags", &["hipMemMap.flags-not-zero"], |h| {
            create(h, H);
            reserve(h, VA);
            h.call(map(VA, 0, 1), INVALID_VALUE)
        }),
        ("a map at an offset", &["hipMemMap.offset-not-zero"], |h| {
            create(h, H);
            reserve(h, VA);
            h.call(map(VA, G, 0), INVALID_VALUE)
        }),
        (
            "a release of a handle released already (the runtime answers hipSuccess)",
            &["hipMemRelease.not-held"],
            |h| {
                create(h, H);
                h.ok(release(H));
                h.call(release(H), SUCCESS)
            },
        ),
        (
            "an address free of a reservation freed already (certain: whatever the runtime \
             answers; the ROCm 6.2 runtime dereferences the entry it does not find)",
            &["hipMemAddressFree.not-reservation"],
            |h| {
                reserve(h, VA);
                h.ok(address_free(VA));
                h.call(address_free(VA), SUCCESS)
            },
        ),
        (
            "an address free inside a reservation, not at its start",
            &["hipMemAddressFree.not-reservation"],
            |h| {
                reserve(h, VA);
                h.call(address_free(VA + G), SUCCESS)
            },
        ),
    ];

    #[test]
    fn each_hip_negative_case_reports_exactly_its_rules() {
        // The CUDA rules have their cases in the parent module's test; the at-exit rules theirs
        // in `what_a_hip_process_still_holds_is_left_at_exit` (and the report's).
        let cuda = sharecheck_core::rules::vmm::FAMILY
            .rules()
            .into_iter()
            .filter(|r| !r.id.starts_with("hip"))
            .map(|r| r.id);
        let report_phase = sharecheck_core::rules::vmm::report::REPORTED_ON
            .iter()
            .map(|(rule, _)| rule.id);
        check_negative_cases(world, NEGATIVE, &["vmm"], cuda.chain(report_phase));
    }

    /// Created, reserved, mapped, given access, exported, unmapped, released, the reservation
    /// freed; a handle created again at the value of one released is held again.
    #[test]
    fn a_hip_vmm_life_done_right_is_silent() {
        let h = world();
        create(&h, H);
        reserve(&h, VA);
        h.ok(map(VA, 0, 0));
        h.ok(args::hipMemSetAccess {
            ptr: ptr(VA),
            size: Size(G as usize),
            desc: HipMemAccessDescPtr(std::ptr::null()),
            count: Size(1),
        });
        let (a, _fd) = export(0, 7);
        h.ok(a);
        h.ok(args::hipMemUnmap {
            ptr: ptr(VA),
            size: Size(G as usize),
        });
        h.ok(release(H));
        h.ok(address_free(VA));
        create(&h, H);
        h.ok(release(H));
    }

    /// What a HIP process still holds is what it left at its exit, by HIP's rules: a handle's
    /// references, its mappings, its reservations. An unmap, or an address free that takes its
    /// mappings with it, and the releases give all back.
    #[test]
    fn what_a_hip_process_still_holds_is_left_at_exit() {
        use crate::engine::state::FamilyState;
        use crate::families::vmm::VmmState;
        use sharecheck_core::rules::vmm::report::*;
        let h = world();
        let left = |h: &Harness| h.states.family::<VmmState>().left_at_exit();
        create(&h, H);
        reserve(&h, VA);
        h.ok(map(VA, 0, 0));
        h.ok(map(VA + 2 * G, 0, 0));
        let ids: Vec<&str> = left(&h).iter().map(|l| l.rule.id).collect();
        assert_eq!(
            ids,
            [
                HIP_NEVER_RELEASED_RULE.id,
                HIP_NEVER_UNMAPPED_RULE.id,
                HIP_NEVER_UNMAPPED_RULE.id,
                HIP_NEVER_FREED_RULE.id
            ]
        );
        let l = left(&h);
        assert!(
            l[0].message.starts_with("1 reference to handle 0x100"),
            "{l:?}"
        );
        assert!(l[0].message.contains("(hipMemRelease)"), "{l:?}");
        assert!(
            l[1].call.starts_with("hipMemMap(ptr=0x7f0000000000"),
            "{l:?}"
        );
        assert!(l[3].call.starts_with("hipMemAddressReserve(size="), "{l:?}");
        // A refused unmap gives nothing back.
        h.call(
            args::hipMemUnmap {
                ptr: ptr(VA),
                size: Size(G as usize),
            },
            INVALID_VALUE,
        );
        assert_eq!(left(&h).len(), 4);
        h.ok(args::hipMemUnmap {
            ptr: ptr(VA),
            size: Size(G as usize),
        });
        assert_eq!(left(&h).len(), 3);
        // The address free takes the last mapping with the reservation.
        h.ok(address_free(VA));
        let ids: Vec<&str> = left(&h).iter().map(|l| l.rule.id).collect();
        assert_eq!(ids, [HIP_NEVER_RELEASED_RULE.id]);
        h.ok(release(H));
        assert!(left(&h).is_empty());
    }

    /// A release or address free of what the shim never saw (made before it was loaded) rests
    /// on tracked state: silent where the runtime accepts, reported where it refuses.
    #[test]
    fn what_the_shim_never_saw_is_left_to_the_runtime() {
        let h = world();
        let kept = h.call(release(0x9990), SUCCESS);
        assert!(kept.rules.is_empty(), "{:?}", kept.messages);
        let refused = h.call(address_free(VA), INVALID_VALUE);
        assert_eq!(refused.rules, ["hipMemAddressFree.not-reservation"]);
        let accepted = h.call(address_free(VA + 8 * G), SUCCESS);
        assert!(accepted.rules.is_empty(), "{:?}", accepted.messages);
    }

    /// What the shim saw of a reservation decides an address free with certainty, and such a
    /// finding is reported before the call is forwarded (the ROCm 6.2 runtime does not return);
    /// a start the runtime hands out again is a reservation again.
    #[test]
    fn an_address_free_of_what_the_shim_saw_freed_is_certain_and_reported_first() {
        use sharecheck_core::rules::{
            vmm::hip::ADDRESS_FREE_NOT_RESERVATION, REPORTED_BEFORE_CALL,
        };
        assert!(REPORTED_BEFORE_CALL
            .iter()
            .any(|r| std::ptr::eq(*r, &ADDRESS_FREE_NOT_RESERVATION)));
        let h = world();
        reserve(&h, VA);
        h.ok(address_free(VA));
        let again = h.call(address_free(VA), SUCCESS);
        assert_eq!(again.rules, ["hipMemAddressFree.not-reservation"]);
        assert!(
            again.messages[0].contains("freed already"),
            "{:?}",
            again.messages
        );
        reserve(&h, VA);
        let inside = h.call(address_free(VA + G), SUCCESS);
        assert!(
            inside.messages[0].contains("inside the reservation [0x7f0000000000"),
            "{:?}",
            inside.messages
        );
        h.ok(address_free(VA));
    }
}

/// The usual map's short staging (`Vmm::stage_usual_map`) decides exactly as the whole one
/// (`Vmm::stage_any_map`) wherever it decides: the same verdict, mappings, counts and
/// generation, over random states and maps near their reservations, handles and mappings.
#[test]
fn the_usual_map_is_staged_as_any_map_is() {
    use super::{Location, Physical, Vmm};
    use std::num::NonZeroU64;
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (mut usual, mut cases) = (0, 0);
    for _ in 0..100_000 {
        let mut vmm = Vmm::default();
        let granule = [G, 0x1000, 3 << 20][next(3) as usize];
        let reservations = 1 + next(3);
        for r in 0..reservations {
            vmm.reserve(VA + r * (64 * G), (1 + next(16)) * granule);
        }
        // Maps land mostly in the latest reservation, with the handle last taken.
        let latest = VA + (reservations - 1) * (64 * G);
        let handles = 1 + next(3);
        for h in 0..handles {
            let physical = Physical {
                size: NonZeroU64::new([4, 8, 0][next(3) as usize] * granule),
                location: Some(Location::Device(0)),
                handle_types: Some(0),
                granularity: NonZeroU64::new([granule, 0][(next(5) == 0) as usize]),
            };
            let mapped = next(2) == 0;
            vmm.handles.change(H + h, physical, |e| {
                e.references = 1;
                e.mapped = mapped;
            });
        }
        for _ in 0..next(4) {
            let at = [VA, latest][next(2) as usize] + next(12) * granule;
            let mapping = super::Mapping {
                size: (1 + next(3)) * granule,
                handle: H + next(4),
                physical: Physical::default(),
                accessible: next(2) == 0,
            };
            if vmm.first_overlap(at, at + mapping.size).is_none() {
                vmm.map(at, mapping);
            }
        }
        // Mostly whole granules, sometimes not.
        let unit = if next(8) == 0 { granule / 2 } else { granule };
        let ptr = [VA, latest, latest][next(3) as usize] + next(20) * unit;
        let size = next(4) * unit;
        let offset = next(5) * unit;
        let handle = H + [next(5), handles - 1][next(2) as usize];
        let (mut fast, mut whole) = (vmm.clone(), vmm.clone());
        let taken = fast.stage_usual_map(ptr, size, offset, handle);
        let mut detail = None;
        let expected = whole.stage_any_map(ptr, size, offset, handle, &mut detail);
        cases += 1;
        let Some(seen) = taken else {
            assert_eq!(
                format!("{:?}", fast.maps),
                format!("{:?}", vmm.maps),
                "changed"
            );
            continue;
        };
        usual += 1;
        let at = (ptr, size, offset, handle);
        assert_eq!(seen, expected, "{at:x?}");
        assert_eq!(detail, None, "{at:x?}");
        assert_eq!(
            format!("{:?}", fast.maps),
            format!("{:?}", whole.maps),
            "{at:x?}"
        );
        assert_eq!(
            (fast.unaccessed, fast.generation),
            (whole.unaccessed, whole.generation),
            "{at:x?}"
        );
    }
    assert!(
        usual > 1_000,
        "the usual map was taken {usual} times in {cases}"
    );
}
