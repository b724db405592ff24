//! Every pool rule through the fake driver: a negative case where exactly that rule fires, with the
//! code R580 answers (scripts/gpu/results/*-pool-probe.txt), and correct lives that stay silent.
//! The end-to-end layer is `tests/pool_rules.rs`, with a C program on the simulated driver.

use super::PoolState;
use crate::engine::fake::{check_negative_cases, Case, FakeFacts, Harness, Ran};
use crate::engine::state::{FamilyState, Lifetime};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;
use std::ffi::c_void;

const POSIX_FD: u32 = 1;
const FABRIC: u32 = 8;
/// The pool handles the fake driver's creates and imports return.
const POOL: u64 = 0x5000;
const PLAIN_POOL: u64 = 0x5100;
const IMPORTED: u64 = 0x6000;
/// Where the fake driver allocates.
const P: u64 = 0x7f00_0000_0000;
const MB: u64 = 1 << 20;

fn world() -> Harness {
    Harness::new(FakeFacts::devices(2))
}

/// A whole `CUmemPoolProps` (88 bytes) for device 0 with `types`: the driver reads all of it.
#[repr(C)]
struct Props {
    head: CUmemAllocationPropHead,
    rest: [u64; 9],
}

fn create(h: &Harness, pool: u64, types: u32) {
    let props = Props {
        head: CUmemAllocationPropHead {
            type_: 1,
            requested_handle_types: types,
            location_type: CU_MEM_LOCATION_TYPE_DEVICE,
            location_id: 0,
        },
        rest: [0; 9],
    };
    let mut out = CUmemoryPool(pool as *mut c_void);
    h.ok(args::cuMemPoolCreate {
        pool: Out(&mut out),
        poolProps: MemPoolPropsPtr(&props.head),
    });
}

fn import(h: &Harness, pool: u64) {
    let mut out = CUmemoryPool(pool as *mut c_void);
    h.ok(args::cuMemPoolImportFromShareableHandle {
        pool_out: Out(&mut out),
        handle: ShareableHandleIn(7 as *mut c_void),
        handleType: MemHandleTypes(POSIX_FD),
        flags: ReservedFlags64(0),
    });
}

fn alloc_from(h: &Harness, pool: u64, at: u64, ret: i32) -> Ran {
    let mut out = CUdeviceptr(at);
    h.call(
        args::cuMemAllocFromPoolAsync {
            dptr: Out(&mut out),
            bytesize: Size(MB as usize),
            pool: CUmemoryPool(pool as *mut c_void),
            hStream: CUstream(std::ptr::null_mut()),
        },
        ret,
    )
}

fn alloc_default(h: &Harness, at: u64) {
    let mut out = CUdeviceptr(at);
    h.ok(args::cuMemAllocAsync {
        dptr: Out(&mut out),
        bytesize: Size(MB as usize),
        hStream: CUstream(std::ptr::null_mut()),
    });
}

fn export(h: &Harness, pool: u64, handle_type: u32, ret: i32) -> Ran {
    let mut fd = 0i32;
    h.call(
        args::cuMemPoolExportToShareableHandle {
            handle_out: ShareableHandleOut((&mut fd as *mut i32).cast()),
            pool: CUmemoryPool(pool as *mut c_void),
            handleType: MemHandleTypes(handle_type),
            flags: ReservedFlags64(0),
        },
        ret,
    )
}

fn export_pointer(h: &Harness, ptr: u64, ret: i32) -> Ran {
    let mut data = [0x5au8; 64];
    h.call(
        args::cuMemPoolExportPointer {
            shareData_out: PoolExportDataPtr(data.as_mut_ptr().cast()),
            ptr: CUdeviceptr(ptr),
        },
        ret,
    )
}

fn import_pointer(h: &Harness, pool: u64, at: u64, ret: i32) -> Ran {
    let mut data = [0x5au8; 64];
    let mut out = CUdeviceptr(at);
    h.call(
        args::cuMemPoolImportPointer {
            ptr_out: Out(&mut out),
            pool: CUmemoryPool(pool as *mut c_void),
            shareData: PoolExportDataPtr(data.as_mut_ptr().cast()),
        },
        ret,
    )
}

fn free(h: &Harness, ptr: u64) {
    h.ok(args::cuMemFreeAsync {
        dptr: CUdeviceptr(ptr),
        hStream: CUstream(std::ptr::null_mut()),
    });
}

const NEGATIVE: &[Case] = &[
    (
        "an export of a pool created with CU_MEM_HANDLE_TYPE_NONE",
        &["cuMemPoolExportToShareableHandle.type-not-requested"],
        |h| {
            create(h, PLAIN_POOL, 0);
            export(h, PLAIN_POOL, POSIX_FD, INVALID_VALUE)
        },
    ),
    (
        "an export as FABRIC of a pool created for POSIX fds",
        &["cuMemPoolExportToShareableHandle.type-not-requested"],
        |h| {
            create(h, POOL, POSIX_FD);
            export(h, POOL, FABRIC, INVALID_VALUE)
        },
    ),
    (
        "an allocation from an imported pool",
        &["cuMemAllocFromPoolAsync.imported-pool"],
        |h| {
            import(h, IMPORTED);
            alloc_from(h, IMPORTED, P, INVALID_VALUE)
        },
    ),
    (
        "a pointer export of memory from a pool that is not shared",
        &["cuMemPoolExportPointer.pool-not-shared"],
        |h| {
            create(h, PLAIN_POOL, 0);
            alloc_from(h, PLAIN_POOL, P, SUCCESS);
            export_pointer(h, P, INVALID_VALUE)
        },
    ),
    (
        "a pointer export of memory from a pool not exported yet",
        &["cuMemPoolExportPointer.pool-not-shared"],
        |h| {
            create(h, POOL, POSIX_FD);
            alloc_from(h, POOL, P, SUCCESS);
            export_pointer(h, P, INVALID_VALUE)
        },
    ),
    (
        "a pointer export of memory from the default pool",
        &["cuMemPoolExportPointer.pool-not-shared"],
        |h| {
            alloc_default(h, P);
            export_pointer(h, P, INVALID_VALUE)
        },
    ),
    (
        "a pointer export of an address inside an allocation",
        &["cuMemPoolExportPointer.pool-not-shared"],
        |h| {
            create(h, POOL, POSIX_FD);
            export(h, POOL, POSIX_FD, SUCCESS);
            alloc_from(h, POOL, P, SUCCESS);
            export_pointer(h, P + 4096, INVALID_VALUE)
        },
    ),
    (
        "a FABRIC pool's export refused on a host without an IMEX channel",
        &["cuMemPoolExportToShareableHandle.fabric-without-imex-channel"],
        |h| {
            create(h, POOL, FABRIC | POSIX_FD);
            export(h, POOL, POSIX_FD, NOT_PERMITTED)
        },
    ),
    (
        "a pointer import into the process's own pool",
        &["cuMemPoolImportPointer.pool-not-imported"],
        |h| {
            create(h, POOL, POSIX_FD);
            import_pointer(h, POOL, P, INVALID_VALUE)
        },
    ),
];

/// The IMEX explanation is given only where the host lacks a channel, only for a FABRIC pool and
/// only for the driver's NOT_PERMITTED.
#[test]
fn a_fabric_pool_export_is_explained_by_imex_only_where_the_host_lacks_it() {
    use crate::engine::facts::Imex;
    const RULE: &str = "cuMemPoolExportToShareableHandle.fabric-without-imex-channel";
    let h = world();
    h.facts.imex.set(Some(Imex {
        listed: true,
        channel: true,
    }));
    create(&h, POOL, FABRIC);
    let ran = export(&h, POOL, FABRIC, NOT_PERMITTED);
    assert!(!ran.rules.contains(&RULE), "{:?}", ran.rules);
    h.facts.imex.set(None);
    // A pool without FABRIC: NOT_PERMITTED is not this rule's.
    create(&h, PLAIN_POOL, POSIX_FD);
    let ran = export(&h, PLAIN_POOL, POSIX_FD, NOT_PERMITTED);
    assert!(!ran.rules.contains(&RULE), "{:?}", ran.rules);
    // Accepted: nothing to explain.
    let ran = export(&h, POOL, FABRIC, SUCCESS);
    assert!(ran.rules.is_empty(), "{:?}", ran.messages);
}

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_pool_rule_has_one() {
    // The report phase's rule is staged by tests/pool_rules.rs and core's crossproc tests; the
    // HIP rules by the `hip` module below.
    let report_phase = sharecheck_core::rules::pool::report::REPORTED_ON
        .iter()
        .map(|(rule, _)| rule.id);
    let hip = sharecheck_core::rules::pool::FAMILY
        .rules()
        .into_iter()
        .filter(|r| r.id.starts_with("hip"))
        .map(|r| r.id);
    check_negative_cases(world, NEGATIVE, &["pool"], report_phase.chain(hip));
}

/// The exporter's life: a shareable pool created, exported, allocated from, the pointer exported,
/// freed, the pool destroyed; the importer's: the pool imported, the pointer imported and freed.
#[test]
fn a_pool_shared_done_right_is_silent() {
    let h = world();
    create(&h, POOL, POSIX_FD);
    assert!(export(&h, POOL, POSIX_FD, SUCCESS).rules.is_empty());
    assert!(alloc_from(&h, POOL, P, SUCCESS).rules.is_empty());
    assert!(export_pointer(&h, P, SUCCESS).rules.is_empty());
    free(&h, P);
    h.ok(args::cuMemPoolDestroy {
        pool: CUmemoryPool(POOL as *mut c_void),
    });
    import(&h, IMPORTED);
    assert!(import_pointer(&h, IMPORTED, P + 8 * MB, SUCCESS)
        .rules
        .is_empty());
    h.ok(args::cuMemFree_v2 {
        dptr: CUdeviceptr(P + 8 * MB),
    });
}

/// What the shim did not see is the driver's to judge: a pool created before the shim was loaded
/// exports and imports without a finding, and its memory exports too.
#[test]
fn what_predates_the_shim_is_trusted_to_the_driver() {
    let h = world();
    assert!(export(&h, POOL, FABRIC, SUCCESS).rules.is_empty());
    assert!(alloc_from(&h, POOL, P, SUCCESS).rules.is_empty());
    assert!(export_pointer(&h, P, SUCCESS).rules.is_empty());
    assert!(import_pointer(&h, POOL, P + MB, SUCCESS).rules.is_empty());
}

/// A free forgets the allocation (and the family's watch word, which a free of other memory reads
/// instead of the family's state, holds nothing again): the address allocated again from a
/// shared pool exports.
#[test]
fn a_freed_allocation_is_forgotten() {
    let h = world();
    let watch = || {
        h.states
            .watch::<PoolState>()
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    alloc_default(&h, P);
    assert_eq!(watch(), crate::engine::state::pointer_bit(P));
    free(&h, P);
    assert_eq!(watch(), 0);
    create(&h, POOL, POSIX_FD);
    assert!(export(&h, POOL, POSIX_FD, SUCCESS).rules.is_empty());
    assert!(alloc_from(&h, POOL, P, SUCCESS).rules.is_empty());
    assert!(export_pointer(&h, P, SUCCESS).rules.is_empty());
    // The same as the shim observes frees without a trace (the rows' quick path), both spellings.
    h.observed_quickly(args::cuMemFreeAsync {
        dptr: CUdeviceptr(P),
        hStream: CUstream(std::ptr::null_mut()),
    });
    assert_eq!(watch(), 0);
    alloc_default(&h, P);
    assert_ne!(watch(), 0);
    h.observed_quickly(args::cuMemFree_v2 {
        dptr: CUdeviceptr(P),
    });
    assert_eq!(watch(), 0);
}

/// A pool exported after its allocation was made shares it from then on (R580 exports the
/// pointer once the pool is exported).
#[test]
fn a_pool_exported_late_shares_what_it_allocated_before() {
    let h = world();
    create(&h, POOL, POSIX_FD);
    assert!(alloc_from(&h, POOL, P, SUCCESS).rules.is_empty());
    assert!(export(&h, POOL, POSIX_FD, SUCCESS).rules.is_empty());
    let ran = export_pointer(&h, P, INVALID_VALUE);
    assert!(ran.is_quiet(), "{:?}", ran.messages);
}

/// A device's end forgets everything: a pool handle the driver may hand out again is no longer
/// judged by the old pool's handle types.
#[test]
fn a_device_end_clears_what_is_tracked() {
    let h = world();
    create(&h, PLAIN_POOL, 0);
    h.states
        .family::<PoolState>()
        .forget(Lifetime::PrimaryContextEnded(0));
    assert!(export(&h, PLAIN_POOL, POSIX_FD, SUCCESS).rules.is_empty());
}

mod hip {
    //! The HIP side: each rule's negative case with the ROCm 6.2 runtime's answer (read in its
    //! source, `hipamd/src/hip_mempool.cpp`), and a shared pool's life that stays silent.

    use super::{world, IMPORTED, MB, P, PLAIN_POOL, POOL, POSIX_FD};
    use crate::engine::fake::{check_negative_cases, Case, Harness, Ran};
    use sharecheck_core::codes::*;
    use sharecheck_core::ffi::*;
    use sharecheck_core::functions::args;
    use std::ffi::c_void;

    /// A whole `hipMemPoolProps` (88 bytes) for device 0 with `types`.
    #[repr(C)]
    struct Props {
        alloc_type: u32,
        handle_types: u32,
        rest: [u64; 10],
    }

    fn pool(at: u64) -> hipMemPool_t {
        hipMemPool_t(at as *mut c_void)
    }

    fn create(h: &Harness, at: u64, types: u32) {
        let props = Props {
            alloc_type: 1,
            handle_types: types,
            rest: [0; 10],
        };
        let mut out = pool(at);
        h.ok(args::hipMemPoolCreate {
            mem_pool: Out(&mut out),
            pool_props: HipMemPoolPropsPtr((&props as *const Props).cast()),
        });
    }

    fn import(h: &Harness, at: u64, flags: u32, ret: i32) -> Ran {
        let mut out = pool(at);
        h.call(
            args::hipMemPoolImportFromShareableHandle {
                mem_pool: Out(&mut out),
                shared_handle: ShareableHandleIn(7 as *mut c_void),
                handle_type: HipMemHandleTypes(POSIX_FD),
                flags: ReservedFlags(flags),
            },
            ret,
        )
    }

    fn export(h: &Harness, at: u64, flags: u32, ret: i32) -> Ran {
        let mut fd = 9;
        h.call(
            args::hipMemPoolExportToShareableHandle {
                shared_handle: ShareableHandleOut((&mut fd as *mut i32).cast()),
                mem_pool: pool(at),
                handle_type: HipMemHandleTypes(POSIX_FD),
                flags: ReservedFlags(flags),
            },
            ret,
        )
    }

    fn alloc(h: &Harness, from: u64, at: u64, ret: i32) -> Ran {
        let mut out = VoidPtrOut(at as *mut c_void);
        h.call(
            args::hipMallocFromPoolAsync {
                dev_ptr: Out(&mut out),
                size: Size(MB as usize),
                mem_pool: pool(from),
                stream: hipStream_t(std::ptr::null_mut()),
            },
            ret,
        )
    }

    const NEGATIVE: &[Case] = &[
        (
            "an export with flags",
            &["hipMemPoolExportToShareableHandle.flags-not-zero"],
            |h| {
                create(h, POOL, POSIX_FD);
                export(h, POOL, 1, INVALID_VALUE)
            },
        ),
        (
            "an import with flags",
            &["hipMemPoolImportFromShareableHandle.flags-not-zero"],
            |h| import(h, IMPORTED, 1, INVALID_VALUE),
        ),
        (
            "an export of a pool created without a handle type",
            &["hipMemPoolExportToShareableHandle.pool-not-ipc-capable"],
            |h| {
                create(h, PLAIN_POOL, 0);
                export(h, PLAIN_POOL, 0, INVALID_VALUE)
            },
        ),
        (
            "an allocation from an imported pool (the runtime accepts it)",
            &["hipMallocFromPoolAsync.imported-pool"],
            |h| {
                let ran = import(h, IMPORTED, 0, SUCCESS);
                assert!(ran.rules.is_empty(), "{:?}", ran.messages);
                alloc(h, IMPORTED, P, SUCCESS)
            },
        ),
    ];

    #[test]
    fn each_hip_negative_case_reports_exactly_its_rules() {
        // CUDA's rules have their cases above; the report phase's are staged by
        // tests/pool_rules.rs and core's crossproc tests.
        let elsewhere = sharecheck_core::rules::pool::FAMILY
            .rules()
            .into_iter()
            .filter(|r| !r.id.starts_with("hip"))
            .map(|r| r.id)
            .chain(
                sharecheck_core::rules::pool::report::REPORTED_ON
                    .iter()
                    .map(|(rule, _)| rule.id),
            );
        check_negative_cases(world, NEGATIVE, &["pool"], elsewhere);
    }

    /// The exporter: a shareable pool created, allocated from, exported, its pointer exported,
    /// destroyed; the importer: the pool imported, the pointer imported; a pool of its own
    /// allocated from; a pool without a handle type allocated from and never exported.
    #[test]
    fn a_hip_pool_shared_done_right_is_silent() {
        let h = world();
        create(&h, POOL, POSIX_FD);
        assert!(alloc(&h, POOL, P, SUCCESS).rules.is_empty());
        assert!(export(&h, POOL, 0, SUCCESS).rules.is_empty());
        let mut data = [0u8; 64];
        h.ok(args::hipMemPoolExportPointer {
            export_data: HipPoolExportDataPtr(data.as_mut_ptr().cast()),
            dev_ptr: VoidPtr(P as *mut c_void),
        });
        assert!(import(&h, IMPORTED, 0, SUCCESS).rules.is_empty());
        let mut out = VoidPtrOut(std::ptr::null_mut());
        h.ok(args::hipMemPoolImportPointer {
            dev_ptr: Out(&mut out),
            mem_pool: pool(IMPORTED),
            export_data: HipPoolExportDataPtr(data.as_mut_ptr().cast()),
        });
        create(&h, PLAIN_POOL, 0);
        assert!(alloc(&h, PLAIN_POOL, P + MB, SUCCESS).rules.is_empty());
        h.ok(args::hipMemPoolDestroy {
            mem_pool: pool(POOL),
        });
        // A pool value the runtime hands out again is no longer the imported one once destroyed.
        h.ok(args::hipMemPoolDestroy {
            mem_pool: pool(IMPORTED),
        });
        create(&h, IMPORTED, POSIX_FD);
        assert!(alloc(&h, IMPORTED, P + 2 * MB, SUCCESS).rules.is_empty());
    }
}
