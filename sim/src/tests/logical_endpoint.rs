use super::*;
use crate::logical_endpoint::{BIND_ALIGNMENT, MAX_SIZE};
use crate::types::logical_endpoint as le;

const A: u64 = BIND_ALIGNMENT;

fn unicast(device: i32, size: u64) -> CUlogicalEndpointProp {
    CUlogicalEndpointProp {
        type_: le::TYPE_UNICAST,
        device_or_num_devices: device,
        size,
        ipc_handle_types: le::IPC_HANDLE_TYPE_FABRIC,
        flags: 0,
    }
}

fn reserve(count: u32) -> u32 {
    let mut base = 0;
    // SAFETY: `base` is a live local `CUlogicalEndpointId`.
    let rc = unsafe { cuLogicalEndpointIdReserve(&mut base, count) };
    assert_eq!(rc, SUCCESS);
    base
}

fn query(id: u32, count: u32) -> (Code, i32) {
    let mut status = -1;
    // SAFETY: `status` is a live local `int`.
    let rc = unsafe { cuLogicalEndpointQuery(id, count, &mut status) };
    (rc, status)
}

/// A mapped, accessible VMM range of `size` bytes on `device`; returns (address, handle).
fn vmm(device: i32, size: u64, handle_types: u32) -> (u64, u64) {
    // SAFETY: `prop`, `handle`, `va` and `access` are live locals of the types the exports
    // read or write (`access` is the one `CUmemAccessDesc` that count 1 promises).
    unsafe {
        let prop = CUmemAllocationProp {
            type_: MEM_ALLOCATION_TYPE_PINNED,
            requested_handle_types: handle_types,
            location: CUmemLocation {
                type_: MEM_LOCATION_TYPE_DEVICE,
                id: device,
            },
            win32_handle_meta_data: null_mut(),
            compression_type: 0,
            gpu_direct_rdma_capable: 0,
            usage: 0,
            reserved: [0; 4],
        };
        let (mut handle, mut va) = (0, 0);
        assert_eq!(cuMemCreate(&mut handle, size as usize, &prop, 0), SUCCESS);
        assert_eq!(
            cuMemAddressReserve(&mut va, size as usize, 0, 0, 0),
            SUCCESS
        );
        assert_eq!(cuMemMap(va, size as usize, 0, handle, 0), SUCCESS);
        let access = CUmemAccessDesc {
            location: CUmemLocation {
                type_: MEM_LOCATION_TYPE_DEVICE,
                id: device,
            },
            flags: MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        assert_eq!(cuMemSetAccess(va, size as usize, &access, 1), SUCCESS);
        (va, handle)
    }
}

#[test]
fn limits() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let (mut alignment, mut max) = (0, 0);
        assert_eq!(
            cuLogicalEndpointGetLimits(&mut alignment, &mut max, &unicast(0, A)),
            SUCCESS
        );
        assert_eq!((alignment, max), (A, MAX_SIZE));
        assert_eq!(
            cuLogicalEndpointGetLimits(null_mut(), &mut max, &unicast(0, A)),
            INVALID_VALUE
        );
        assert_eq!(
            cuLogicalEndpointGetLimits(&mut alignment, &mut max, &unicast(9, A)),
            INVALID_VALUE
        );
        let mut bad_type = unicast(0, A);
        bad_type.type_ = 0;
        assert_eq!(
            cuLogicalEndpointGetLimits(&mut alignment, &mut max, &bad_type),
            INVALID_VALUE
        );
        // Multicast is off unless a device reports attribute 154.
        let multicast = CUlogicalEndpointProp {
            type_: le::TYPE_MULTICAST,
            device_or_num_devices: 2,
            ..unicast(0, A)
        };
        assert_eq!(
            cuLogicalEndpointGetLimits(&mut alignment, &mut max, &multicast),
            NOT_SUPPORTED
        );
    }
}

#[test]
fn unicast_lifecycle() {
    // SAFETY: the properties passed are live temporaries or NULL where checked; `va` is only a
    // device address to bind.
    unsafe {
        setup(r580());
        let _c = context(0);
        let base = reserve(4);
        let id = base + 1;
        let size = 8 * A;
        assert_eq!(
            cuLogicalEndpointCreate(id, &unicast(0, A + 1)),
            INVALID_VALUE,
            "not aligned"
        );
        assert_eq!(
            cuLogicalEndpointCreate(id, &unicast(0, MAX_SIZE + A)),
            INVALID_VALUE,
            "too big"
        );
        assert_eq!(
            cuLogicalEndpointCreate(u32::MAX - 1, &unicast(0, size)),
            INVALID_VALUE,
            "not reserved"
        );
        assert_eq!(cuLogicalEndpointCreate(id, null_mut()), INVALID_VALUE);
        assert_eq!(cuLogicalEndpointCreate(id, &unicast(0, size)), SUCCESS);
        assert_eq!(
            cuLogicalEndpointCreate(id, &unicast(0, size)),
            INVALID_VALUE,
            "taken"
        );
        assert_eq!(cuLogicalEndpointAddDevice(id, 1), INVALID_VALUE, "unicast");

        let (va, handle) = vmm(0, 4 * A, 0);
        let bind = |offset, ptr, len, flags| {
            cuLogicalEndpointBindAddr(id, 0, offset, ptr as *mut c_void, len, flags)
        };
        assert_eq!(bind(0, va, 2 * A, 0), INVALID_VALUE, "Query not called yet");
        assert_eq!(query(id, 1), (SUCCESS, 1));
        assert_eq!(
            query(base, 2),
            (INVALID_VALUE, -1),
            "id `base` has no endpoint"
        );
        assert_eq!(bind(0, va, 2 * A, 1), INVALID_VALUE, "flags must be 0");
        assert_eq!(bind(A / 2, va, A, 0), INVALID_VALUE, "offset alignment");
        assert_eq!(bind(0, va + 4096, A, 0), INVALID_VALUE, "ptr alignment");
        assert_eq!(
            bind(0, va, 5 * A, 0),
            INVALID_VALUE,
            "larger than the allocation"
        );
        assert_eq!(
            bind(7 * A, va, 2 * A, 0),
            INVALID_VALUE,
            "beyond the endpoint"
        );
        assert_eq!(
            cuLogicalEndpointBindAddr(id, 1, 0, va as *mut c_void, A, 0),
            INVALID_VALUE,
            "not the owner"
        );
        assert_eq!(bind(0, va, 2 * A, 0), SUCCESS);
        assert_eq!(bind(A, va, A, 0), INVALID_VALUE, "overlaps");
        let mem = |offset, mem_offset, len| {
            cuLogicalEndpointBindMem(id, 0, offset, handle, mem_offset, len, 0)
        };
        assert_eq!(
            mem(2 * A, 3 * A, 2 * A),
            INVALID_VALUE,
            "memOffset + size beyond the allocation"
        );
        assert_eq!(mem(2 * A, 2 * A, 2 * A), SUCCESS);
        assert_eq!(mem(6 * A, 0, A), SUCCESS);
        let unbind = |offset, len| cuLogicalEndpointUnbind(id, 0, offset, len);
        assert_eq!(unbind(A, A), INVALID_VALUE, "offset is inside a bind");
        assert_eq!(unbind(0, A), INVALID_VALUE, "size does not match");
        assert_eq!(unbind(0, 4 * A), SUCCESS, "two adjacent binds");
        assert_eq!(unbind(6 * A, A), SUCCESS);
        assert_eq!(unbind(6 * A, A), INVALID_VALUE, "already unbound");
        assert_eq!(
            cuLogicalEndpointIdRelease(base, 4),
            INVALID_VALUE,
            "endpoint still alive"
        );
        assert_eq!(cuLogicalEndpointDestroy(id), SUCCESS);
        assert_eq!(cuLogicalEndpointDestroy(id), INVALID_VALUE);
        // Ids beyond `base + 3` may belong to other test threads; this one is never handed out.
        assert_eq!(
            cuLogicalEndpointIdRelease(u32::MAX - 1, 1),
            INVALID_VALUE,
            "not reserved"
        );
        assert_eq!(cuLogicalEndpointIdRelease(base, 4), SUCCESS);
        assert_eq!(cuLogicalEndpointIdRelease(base, 4), INVALID_VALUE);
        assert_eq!(cuLogicalEndpointIdReserve(null_mut(), 1), INVALID_VALUE);
        let mut b = 0;
        assert_eq!(cuLogicalEndpointIdReserve(&mut b, 0), INVALID_VALUE);
    }
}

#[test]
fn export_and_import_in_one_process() {
    // SAFETY: `handle` and `garbage` are live 64-byte buffers, the size of the fabric handle that
    // is exported and imported; properties are live locals; `va` is only a device address.
    unsafe {
        setup(r580());
        let base = reserve(2);
        assert_eq!(cuLogicalEndpointCreate(base, &unicast(1, 2 * A)), SUCCESS);
        let mut handle = [0u8; le::FABRIC_HANDLE_SIZE];
        let out = handle.as_mut_ptr().cast::<c_void>();
        assert_eq!(
            cuLogicalEndpointExport(out, base, le::IPC_HANDLE_TYPE_NONE),
            INVALID_VALUE
        );
        assert_eq!(
            cuLogicalEndpointExport(null_mut(), base, le::IPC_HANDLE_TYPE_FABRIC),
            INVALID_VALUE
        );
        assert_eq!(
            cuLogicalEndpointExport(out, base, le::IPC_HANDLE_TYPE_FABRIC),
            SUCCESS
        );
        let input = handle.as_ptr().cast::<c_void>();
        assert_eq!(
            cuLogicalEndpointImport(base, input, le::IPC_HANDLE_TYPE_FABRIC),
            INVALID_VALUE,
            "id in use"
        );
        assert_eq!(
            cuLogicalEndpointImport(base + 1, input, le::IPC_HANDLE_TYPE_FABRIC),
            SUCCESS
        );
        assert_eq!(query(base + 1, 1), (SUCCESS, 1));
        let (va, _) = vmm(1, A, 0);
        let rc = cuLogicalEndpointBindAddr(base + 1, 1, 0, va as *mut c_void, A, 0);
        assert_eq!(
            rc, INVALID_VALUE,
            "imported unicast endpoints cannot be bound"
        );
        // Destroying the exported endpoint withdraws its handle.
        assert_eq!(cuLogicalEndpointDestroy(base), SUCCESS);
        assert_eq!(cuLogicalEndpointDestroy(base + 1), SUCCESS);
        assert_eq!(
            cuLogicalEndpointImport(base + 1, input, le::IPC_HANDLE_TYPE_FABRIC),
            INVALID_VALUE
        );
        let garbage = [0x5Au8; le::FABRIC_HANDLE_SIZE];
        let rc = cuLogicalEndpointImport(
            base + 1,
            garbage.as_ptr().cast(),
            le::IPC_HANDLE_TYPE_FABRIC,
        );
        assert_eq!(rc, INVALID_VALUE);
        // No FABRIC in ipcHandleTypes: cannot be exported.
        let mut local = unicast(0, A);
        local.ipc_handle_types = le::IPC_HANDLE_TYPE_NONE;
        assert_eq!(cuLogicalEndpointCreate(base, &local), SUCCESS);
        assert_eq!(
            cuLogicalEndpointExport(out, base, le::IPC_HANDLE_TYPE_FABRIC),
            INVALID_VALUE
        );
        assert_eq!(cuLogicalEndpointDestroy(base), SUCCESS);
    }
}

#[test]
fn multicast_membership_when_enabled() {
    // SAFETY: `prop` is a live local; `va` and `plain` are only device addresses to bind.
    unsafe {
        let mut config = r580();
        config
            .attributes
            .insert((0, attribute::LOGICAL_ENDPOINT_MULTICAST_SUPPORTED), 1);
        config
            .attributes
            .insert((1, attribute::LOGICAL_ENDPOINT_MULTICAST_SUPPORTED), 1);
        setup(config);
        let id = reserve(1);
        let prop = CUlogicalEndpointProp {
            type_: le::TYPE_MULTICAST,
            device_or_num_devices: 2,
            size: 2 * A,
            ipc_handle_types: le::IPC_HANDLE_TYPE_FABRIC,
            flags: 0,
        };
        assert_eq!(cuLogicalEndpointCreate(id, &prop), SUCCESS);
        assert_eq!(cuLogicalEndpointAddDevice(id, 0), SUCCESS);
        assert_eq!(cuLogicalEndpointAddDevice(id, 0), INVALID_VALUE, "twice");
        assert_eq!(query(id, 1), (SUCCESS, 0), "team incomplete");
        let (va, _) = vmm(0, A, MEM_HANDLE_TYPE_FABRIC);
        assert_eq!(
            cuLogicalEndpointBindAddr(id, 0, 0, va as *mut c_void, A, 0),
            INVALID_VALUE,
            "not ready"
        );
        assert_eq!(cuLogicalEndpointAddDevice(id, 1), SUCCESS);
        assert_eq!(query(id, 1), (SUCCESS, 1));
        let (plain, _) = vmm(0, A, 0);
        let rc = cuLogicalEndpointBindAddr(id, 0, 0, plain as *mut c_void, A, 0);
        assert_eq!(
            rc, INVALID_VALUE,
            "an exportable multicast endpoint needs shareable memory"
        );
        assert_eq!(
            cuLogicalEndpointBindAddr(id, 0, 0, va as *mut c_void, A, 0),
            SUCCESS
        );
        assert_eq!(cuLogicalEndpointDestroy(id), SUCCESS);
    }
}

/// BindAddr takes memory-pool memory (cudaMallocAsync) of the owner, within its allocation;
/// BindMem takes host NUMA memory of the owner's closest node; a node no device names is no
/// node.
#[test]
fn pool_and_host_numa_memory_bind() {
    // SAFETY: the out-pointers are live locals of the types written; device addresses and
    // handles are plain values.
    unsafe {
        setup(r580());
        let _c = context(0);
        let base = reserve(2);
        let plain = CUlogicalEndpointProp {
            ipc_handle_types: 0,
            ..unicast(0, 4 * A)
        };
        assert_eq!(cuLogicalEndpointCreate(base, &plain), SUCCESS);
        assert_eq!(query(base, 1), (SUCCESS, 1));
        let mut pool = 0;
        assert_eq!(
            cuMemAllocAsync(&mut pool, (3 * A) as usize, null_mut()),
            SUCCESS
        );
        let at = pool.next_multiple_of(A) as *mut c_void;
        assert_eq!(
            cuLogicalEndpointBindAddr(base, 0, 0, at, 4 * A, 0),
            INVALID_VALUE,
            "past the allocation's end"
        );
        assert_eq!(cuLogicalEndpointBindAddr(base, 0, 0, at, A, 0), SUCCESS);
        let host = |node: i32| {
            let prop = CUmemAllocationProp {
                type_: MEM_ALLOCATION_TYPE_PINNED,
                requested_handle_types: 0,
                location: CUmemLocation {
                    type_: MEM_LOCATION_TYPE_HOST_NUMA,
                    id: node,
                },
                win32_handle_meta_data: null_mut(),
                compression_type: 0,
                gpu_direct_rdma_capable: 0,
                usage: 0,
                reserved: [0; 4],
            };
            let mut handle = 0;
            let rc = cuMemCreate(&mut handle, A as usize, &prop, 0);
            (rc, handle)
        };
        assert_eq!(host(1).0, INVALID_VALUE, "no device is closest to node 1");
        let (rc, numa0) = host(0);
        assert_eq!(rc, SUCCESS);
        assert_eq!(
            cuLogicalEndpointBindMem(base, 0, 2 * A, numa0, 0, A, 0),
            SUCCESS
        );
        assert_eq!(cuLogicalEndpointUnbind(base, 0, 0, A), SUCCESS);
        assert_eq!(cuLogicalEndpointDestroy(base), SUCCESS);
        assert_eq!(cuMemRelease(numa0), SUCCESS);
    }
}
