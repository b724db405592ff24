//! The driver-wide operations of the `pool` area (on [`Driver`], which holds every area), with
//! R580's answers (`scripts/gpu/results/*-pool-probe.txt`); where R580 was not measured, the
//! comment says so.

use super::{Driver, Owner};
use crate::device;
use crate::ipc::{export_file, IpcHandle, KIND_MEMORY};
use crate::memory::{Allocation, MemKind};
use crate::pool::{self, Pool, KIND_POOL_POINTER};
use crate::state_dir;
use crate::types::*;
use std::os::fd::AsRawFd;

impl Driver {
    /// `cuMemPoolCreate`: a pinned pool on a device, of the POSIX fd and FABRIC handle types
    /// (R580 makes a FABRIC pool without an IMEX channel, and allocates from it; its export is
    /// refused: [`Driver::pool_export`]).
    pub fn pool_create(&mut self, props: &CUmemPoolProps) -> Outcome<u64> {
        if props.alloc_type != MEM_ALLOCATION_TYPE_PINNED
            || props.location.type_ != MEM_LOCATION_TYPE_DEVICE
        {
            return Err(INVALID_VALUE);
        }
        device::check(props.location.id)?;
        if !device::flag(props.location.id, attribute::MEMORY_POOLS_SUPPORTED) {
            return Err(NOT_SUPPORTED);
        }
        if props.handle_types & !(MEM_HANDLE_TYPE_POSIX_FD | MEM_HANDLE_TYPE_FABRIC) != 0 {
            return Err(NOT_SUPPORTED);
        }
        Ok(self.pools.add(Pool {
            device: props.location.id,
            handle_types: props.handle_types,
            source: None,
            shared: false,
            refused: false,
            poisoned: false,
        }))
    }

    /// `cuMemPoolDestroy`: its allocations live on until freed (R580: a destroy with an
    /// allocation outstanding is 0, and the later free is 0); a second destroy is INVALID_VALUE,
    /// and so is the destroy of an imported pool a pointer imported into it is still held from
    /// (R580).
    pub fn pool_destroy(&mut self, handle: u64) -> Outcome {
        self.pools.get(handle).ok_or(INVALID_VALUE)?;
        if self
            .pools
            .pointers
            .values()
            .any(|&(_, pool)| pool == handle)
        {
            return Err(INVALID_VALUE);
        }
        self.pools.pools.remove(&handle);
        self.pools.imports.retain(|_, h| *h != handle);
        Ok(())
    }

    /// `cuMemAllocFromPoolAsync[_ptsz]`: made at once, as `cuMemAllocAsync`'s memory is. An
    /// imported pool makes no allocation (R580: INVALID_VALUE).
    pub fn pool_allocate(&mut self, size: u64, handle: u64, stream: u64) -> Outcome<u64> {
        let p = self.pools.get(handle).ok_or(INVALID_VALUE)?;
        if p.source.is_some() {
            return Err(INVALID_VALUE);
        }
        self.stream_device(stream)?;
        let base = self
            .memory
            .allocate(size, p.device, Owner::MemPool(p.device), MemKind::Pool)?;
        let buffer = self.memory.find(base).expect("just made").buffer_id;
        self.pools.by_buffer.insert(buffer, handle);
        Ok(base)
    }

    /// `hipMallocFromPoolAsync` as the ROCm 6.2 CLR does it: it does not look whether the pool
    /// was imported, and an imported pool allocates from its own bookkeeping (memory of its
    /// device, which no other process shares).
    /// `stream` is a HIP stream (`hipErrorInvalidHandle` where it is not one).
    pub fn pool_allocate_hip(&mut self, size: u64, handle: u64, stream: u64) -> Outcome<u64> {
        let p = self.pools.get(handle).ok_or(INVALID_VALUE)?;
        if !self.streams.is_valid_stream(stream) {
            return Err(INVALID_HANDLE);
        }
        let base = self
            .memory
            .allocate(size, p.device, Owner::MemPool(p.device), MemKind::Pool)?;
        if p.source.is_none() {
            let buffer = self.memory.find(base).expect("just made").buffer_id;
            self.pools.by_buffer.insert(buffer, handle);
        }
        Ok(base)
    }

    /// `cuMemPoolSetAccess`: any pool this process holds (access is not modelled).
    pub fn pool_set_access(&self, handle: u64) -> Outcome {
        self.pools.get(handle).map(|_| ()).ok_or(INVALID_VALUE)
    }

    /// `cuMemPoolExportToShareableHandle`: a new fd per export (R580). A pool created without
    /// the handle type, or exported as NONE, is INVALID_VALUE; so are flags other than 0. An
    /// imported pool's export was not measured (INVALID_VALUE here). A FABRIC pool's export, as
    /// FABRIC or as POSIX fd, is NOT_PERMITTED in a process without an IMEX channel (R580, which
    /// then misbehaves: [`Pool::refused`]); with a channel, a FABRIC export is not modelled (no
    /// host measured had one: NOT_SUPPORTED here).
    pub fn pool_export(&mut self, handle: u64, handle_type: u32, flags: u64) -> Outcome<i32> {
        let p = self.pools.get(handle).ok_or(INVALID_VALUE)?;
        if flags != 0
            || p.source.is_some()
            || handle_type == 0
            || p.handle_types & handle_type != handle_type
        {
            return Err(INVALID_VALUE);
        }
        if p.handle_types & MEM_HANDLE_TYPE_FABRIC != 0 {
            if crate::config::config().no_fabric_channel {
                if let Some(p) = self.pools.pools.get_mut(&handle) {
                    p.refused = true;
                }
                return Err(NOT_PERMITTED);
            }
            if handle_type == MEM_HANDLE_TYPE_FABRIC {
                return Err(NOT_SUPPORTED);
            }
        }
        let fd =
            pool::export_fd(pool::id_of(handle), p.device, p.handle_types).ok_or(OUT_OF_MEMORY)?;
        if let Some(p) = self.pools.pools.get_mut(&handle) {
            p.shared = true;
        }
        Ok(fd)
    }

    /// `cuMemPoolImportFromShareableHandle`: the same pool handle for the same export (R580);
    /// the exporter importing its own export gets a pool of its own (R580). A FABRIC import of a
    /// POSIX fd pool is NOT_SUPPORTED, flags other than 0 INVALID_VALUE (R580).
    pub fn pool_import(&mut self, fd: i32, handle_type: u32, flags: u64) -> Outcome<u64> {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        if handle_type != MEM_HANDLE_TYPE_POSIX_FD {
            return Err(NOT_SUPPORTED);
        }
        let (pid, id, device, types) = pool::read_export(fd).ok_or(INVALID_VALUE)?;
        if let Some(&h) = self.pools.imports.get(&(pid, id)) {
            return Ok(h);
        }
        let h = self.pools.add(Pool {
            device,
            handle_types: types,
            source: Some((pid, id)),
            shared: false,
            refused: false,
            poisoned: false,
        });
        self.pools.imports.insert((pid, id), h);
        Ok(h)
    }

    /// A free of `dptr`, an allocation of a poisoned pool ([`Pool::poisoned`]), dooms the next
    /// synchronize (R580, in R580's behaviour).
    pub fn doom_if_poisoned(&mut self, dptr: u64) {
        let poisoned = self
            .memory
            .find(dptr)
            .and_then(|a| self.pools.by_buffer.get(&a.buffer_id))
            .and_then(|h| self.pools.get(*h))
            .is_some_and(|p| p.poisoned);
        if poisoned && r580() {
            self.pools.doomed = true;
        }
    }

    /// `cuMemPoolExportPointer`: the start of an allocation of a pool created with a handle
    /// type and exported; anything else is INVALID_VALUE (R580: an interior pointer, a pool
    /// without a handle type, a pool not exported yet, a default pool's memory, cuMemAlloc
    /// memory). The same data on every export (R580).
    pub fn pool_export_pointer(&mut self, ptr: u64) -> Outcome<[u8; 64]> {
        let a = self.memory.find(ptr).ok_or(INVALID_VALUE)?;
        let pool = self.pools.by_buffer.get(&a.buffer_id).copied();
        let refused = pool.and_then(|h| self.pools.get(h)).filter(|p| p.refused);
        if let (Some(p), true, true) = (refused, a.base == ptr, r580()) {
            // Measured (R580, no IMEX channel): a FABRIC-only pool's pointer export never
            // returns; a FABRIC and POSIX fd pool's is CUDA_ERROR_UNKNOWN.
            if p.handle_types & MEM_HANDLE_TYPE_POSIX_FD == 0 {
                // SAFETY: raising a signal in this thread has no memory-safety precondition.
                unsafe { libc::raise(libc::SIGSEGV) };
                return Err(INVALID_VALUE);
            }
            if let Some(p) = pool.and_then(|h| self.pools.pools.get_mut(&h)) {
                p.poisoned = true;
            }
            return Err(UNKNOWN);
        }
        let shared = pool
            .and_then(|h| self.pools.get(h))
            .is_some_and(|p| p.handle_types != 0 && p.shared);
        if a.kind != MemKind::Pool || a.base != ptr || !shared {
            return Err(INVALID_VALUE);
        }
        let (size, device) = (a.size, a.device);
        let fd = a
            .memfd
            .as_ref()
            .expect("pool memory has a memfd")
            .as_raw_fd();
        let export = match a.export {
            Some(e) => e,
            None => {
                let e = self.ipc.new_export();
                let name = export_file(KIND_MEMORY, std::process::id(), e.id);
                if !state_dir::write(&name, &format!("{} {fd}\n", e.nonce)) {
                    return Err(MAP_FAILED);
                }
                self.memory.find_mut(ptr).expect("found above").export = Some(e);
                e
            }
        };
        Ok(IpcHandle {
            kind: KIND_POOL_POINTER,
            pid: std::process::id(),
            export_id: export.id,
            nonce: export.nonce,
            offset: 0,
            size,
            device,
            pool: pool.map_or(0, pool::id_of),
        }
        .encode())
    }

    /// `cuMemPoolImportPointer`: into the import of the exporter's pool only (R580: the
    /// exporter's own pool is INVALID_VALUE); the same address for the same data, freed once
    /// (R580). Data of memory its exporter already freed imports too (R580: 0), the pool keeping
    /// the memory ([`Driver::retain_pool_export`]).
    pub fn pool_import_pointer(&mut self, handle: u64, data: &[u8; 64]) -> Outcome<u64> {
        let p = self.pools.get(handle).ok_or(INVALID_VALUE)?;
        let (pid, id) = p.source.ok_or(INVALID_VALUE)?;
        let h = IpcHandle::decode(data, KIND_POOL_POINTER).ok_or(INVALID_VALUE)?;
        if (h.pid, h.pool) != (pid, id) {
            return Err(INVALID_VALUE);
        }
        if let Some(&(ptr, _)) = self.pools.pointers.get(&(h.pid, h.export_id)) {
            return Ok(ptr);
        }
        let fd = h.published().ok_or(INVALID_VALUE)?;
        let path = format!("/proc/{}/fd/{fd}", h.pid);
        let base = self
            .memory
            .map_import(&path, h.size, h.device, Owner::MemPool(p.device))
            .ok_or(INVALID_VALUE)?;
        self.pools
            .pointers
            .insert((h.pid, h.export_id), (base, handle));
        Ok(base)
    }

    /// Before a free of pool memory this process exported a pointer of: its memory stays open
    /// and its export published, as a pool keeps freed memory (R580 imports it afterwards).
    pub fn retain_pool_export(&mut self, ptr: u64) {
        let Some(a) = self.memory.find_mut(ptr) else {
            return;
        };
        if a.kind != MemKind::Pool || a.base != ptr || a.export.is_none() {
            return;
        }
        a.export = None;
        if let Some(fd) = a.memfd.take() {
            self.pools.retained.push(fd);
        }
    }

    /// A free (`cuMemFree_v2`, `hipFree`) of `ptr`: an imported pool pointer ("The pointer may
    /// be freed with cuMemFree or cuMemFreeAsync", hipFree for HIP), else memory `accept` takes,
    /// a pool allocation's export kept published.
    pub fn free_pointer(&mut self, ptr: u64, accept: impl Fn(&Allocation) -> bool) -> Outcome {
        self.free_pool_import(ptr).unwrap_or_else(|| {
            self.retain_pool_export(ptr);
            self.free_memory(ptr, accept)
        })
    }

    /// A free of an imported pool pointer (`cuMemFree`, `cuMemFreeAsync`): `None` when `ptr`
    /// is no such pointer.
    pub fn free_pool_import(&mut self, ptr: u64) -> Option<Outcome> {
        let key = *self.pools.pointers.iter().find(|(_, &(p, _))| p == ptr)?.0;
        self.pools.pointers.remove(&key);
        Some(
            self.memory
                .remove_if(ptr, |a| a.kind == MemKind::IpcImport)
                .map(|_| ()),
        )
    }
}

/// Whether the simulator answers as R580 (not the documented behaviour): its crashes too.
fn r580() -> bool {
    crate::config::config().behaviour == crate::config::Behaviour::R580
}
