//! Stream-ordered memory pools a program creates or imports, and their sharing across processes,
//! with R580's answers (`scripts/gpu/results/*-pool-probe.txt`).
//!
//! A pool is a handle of kind `MemPool` (ids from [`FIRST_POOL_ID`]; lower ids are the devices'
//! default pools). Its export is a memfd holding the exporter's pid and the pool's id: a real fd
//! that passes through `SCM_RIGHTS`, a new one per export. A pointer's export data is a 64-byte
//! [`crate::ipc::IpcHandle`] of kind [`KIND_POOL_POINTER`]: the allocation is published in the
//! state directory as legacy IPC memory is (its memfd number), and the importer maps
//! `/proc/<exporter>/fd/<memfd>`. Its allocations are made at once, as `cuMemAllocAsync`'s are.

use crate::handles::{self, Kind};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

/// Export data's kind (the legacy handles are 1 and 2).
pub const KIND_POOL_POINTER: u32 = 3;
/// The first id of a pool a program creates or imports.
pub const FIRST_POOL_ID: u64 = 0x1000;
const MAGIC: &str = "SCSIMPOOL";

#[derive(Clone, Copy, Debug)]
pub struct Pool {
    pub device: i32,
    /// The handle types of its create (those of the exporter's pool, for an import).
    pub handle_types: u32,
    /// An imported pool: the exporter's pid and pool id.
    pub source: Option<(u32, u64)>,
    /// Exported with `cuMemPoolExportToShareableHandle` at least once: only then do its
    /// pointers export (R580).
    pub shared: bool,
    /// A FABRIC pool whose export the driver refused (no IMEX channel): R580 then dies exporting
    /// a pointer of a FABRIC-only pool, and answers CUDA_ERROR_UNKNOWN for one that is also
    /// POSIX fd (which poisons it: [`Pools::doomed`]).
    pub refused: bool,
    /// Answered CUDA_ERROR_UNKNOWN to a pointer export after a refused export.
    pub poisoned: bool,
}

#[derive(Default)]
pub struct Pools {
    next: u64,
    pub pools: HashMap<u64, Pool>,
    /// The pool of each allocation made from a created pool, by the allocation's buffer id
    /// (never reused, so an entry of freed memory is harmless).
    pub by_buffer: HashMap<u64, u64>,
    /// Pools imported: (exporter pid, pool id) -> this process's handle (imported again, the
    /// same handle, as R580 answers).
    pub imports: HashMap<(u32, u64), u64>,
    /// Pointers imported: (exporter pid, export id) -> the address and the pool it was imported
    /// into (imported again, the same address, freed once, as R580 answers).
    pub pointers: HashMap<(u32, u64), (u64, u64)>,
    /// The memory of exported pool allocations the program freed, kept open as the pool keeps
    /// it: R580 lets an importer import such a pointer after its exporter freed it.
    pub retained: Vec<OwnedFd>,
    /// An allocation of a poisoned pool was freed: R580 dies of SIGSEGV in the next
    /// `cuStreamSynchronize` (`scripts/gpu/results/*-pool-probe-fabric.txt`).
    pub doomed: bool,
}

impl Pools {
    /// A new pool's handle.
    pub fn add(&mut self, pool: Pool) -> u64 {
        let id = FIRST_POOL_ID + self.next;
        self.next += 1;
        let handle = handles::encode(Kind::MemPool, id);
        self.pools.insert(handle, pool);
        handle
    }

    /// The pool a handle names (a default pool's handle names none here).
    pub fn get(&self, handle: u64) -> Option<Pool> {
        handles::decode(Kind::MemPool, handle)
            .filter(|&id| id >= FIRST_POOL_ID)
            .and_then(|_| self.pools.get(&handle).copied())
    }
}

/// A new fd describing pool `id` of this process (a memfd holding the magic, pid, id, device and
/// handle types).
pub fn export_fd(id: u64, device: i32, types: u32) -> Option<i32> {
    let name = c"sharecheck-sim-pool";
    // SAFETY: memfd_create with a valid name; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just created and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let text = format!("{MAGIC} {} {id} {device} {types}\n", std::process::id());
    // SAFETY: writes `text`'s bytes to the memfd this function owns.
    let written = unsafe { libc::write(fd.as_raw_fd(), text.as_ptr().cast(), text.len()) };
    (written == text.len() as isize).then(|| fd.into_raw_fd())
}

/// The exporter's pid, pool id, device and handle types an exported fd describes; `None` for
/// any other fd.
pub fn read_export(fd: i32) -> Option<(u32, u64, i32, u32)> {
    let mut buf = [0u8; 64];
    // SAFETY: reads at most 64 bytes into `buf`; a bad fd is an error return.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    let text = std::str::from_utf8(buf.get(..usize::try_from(n).ok()?)?).ok()?;
    let mut fields = text.split_whitespace();
    if fields.next()? != MAGIC {
        return None;
    }
    let mut next = || fields.next();
    Some((
        next()?.parse().ok()?,
        next()?.parse().ok()?,
        next()?.parse().ok()?,
        next()?.parse().ok()?,
    ))
}

/// The id of a pool handle.
pub fn id_of(handle: u64) -> u64 {
    handles::decode(Kind::MemPool, handle).unwrap_or(0)
}
