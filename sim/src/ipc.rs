//! IPC memory and event handles across processes.
//!
//! A 64-byte handle carries a magic, what it is, the exporter's pid, an export id, a nonce, the
//! offset into the allocation, its size and device. The export itself is a file in the state
//! directory, holding the nonce and the allocation's memfd number; the importer maps
//! `/proc/<exporter pid>/fd/<memfd>`, so both processes see the same bytes.
//!
//! As R580 does (measured, LD_PRELOAD.md "CUDA IPC on R580, measured"): memory freed and
//! allocated again at the same address is exported with the very same handle (its export id is
//! the address, its nonce the process's), so an old handle opens the new memory; a handle of
//! freed memory is INVALID_VALUE; a handle whose exporter exited is INVALID_HANDLE; a second
//! context of a device that opens any handle of an exporter another context of that device
//! already imports from is INVALID_HANDLE. With `behaviour=documented`, a re-allocation gets a new
//! handle ("a unique handle for the new memory").

use crate::memory::Export;
use crate::state_dir;
use crate::types::Code;
use crate::types::Owner;
use std::collections::HashMap;

const MAGIC: &[u8; 8] = b"SCSIMIPC";
pub(crate) const KIND_MEMORY: u32 = 1;
pub(crate) const KIND_EVENT: u32 = 2;

/// The fields of a simulated IPC handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpcHandle {
    pub kind: u32,
    pub pid: u32,
    pub export_id: u64,
    pub nonce: u64,
    pub offset: u64,
    pub size: u64,
    pub device: i32,
    /// The pool of a pool pointer's export data (0 for the legacy handles).
    pub pool: u64,
}

impl IpcHandle {
    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.kind.to_le_bytes());
        b[12..16].copy_from_slice(&self.pid.to_le_bytes());
        b[16..24].copy_from_slice(&self.export_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.nonce.to_le_bytes());
        b[32..40].copy_from_slice(&self.offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.size.to_le_bytes());
        b[48..52].copy_from_slice(&self.device.to_le_bytes());
        b[52..60].copy_from_slice(&self.pool.to_le_bytes());
        b
    }

    /// Parses a handle of `kind`; `None` for anything else (garbage, zeroes, the other kind).
    pub fn decode(b: &[u8; 64], kind: u32) -> Option<IpcHandle> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let h = IpcHandle {
            kind: u32_at(8),
            pid: u32_at(12),
            export_id: u64_at(16),
            nonce: u64_at(24),
            offset: u64_at(32),
            size: u64_at(40),
            device: u32_at(48) as i32,
            pool: u64_at(52),
        };
        if &b[0..8] != MAGIC || h.kind != kind {
            return None;
        }
        if kind != KIND_EVENT && (h.size == 0 || h.offset >= h.size) {
            return None;
        }
        Some(h)
    }

    fn file_name(&self) -> String {
        export_file(self.kind, self.pid, self.export_id)
    }

    /// The export's published record, `(nonce, memfd number)`, if it is still there with this
    /// handle's nonce.
    pub(crate) fn published(&self) -> Option<i32> {
        let record = state_dir::read(&self.file_name())?;
        let mut fields = record.split_whitespace();
        let nonce: u64 = fields.next()?.parse().ok()?;
        let fd = fields.next().map_or(Some(-1), |f| f.parse().ok())?;
        (nonce == self.nonce).then_some(fd)
    }

    /// Whether the exporting process is gone (no process has its pid).
    pub(crate) fn exporter_exited(&self) -> bool {
        // SAFETY: signal 0 only checks that the process exists; nothing is sent.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, 0) };
        rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

/// The state directory's record of an export (pool pointers are memory too: a free withdraws
/// them alike).
pub(crate) fn export_file(kind: u32, pid: u32, id: u64) -> String {
    let what = if kind == KIND_EVENT { "event" } else { "mem" };
    format!("{what}-{pid}-{id}")
}

/// Whether `bytes` is a memory handle this process exported.
pub fn exported_here(bytes: &[u8; 64]) -> bool {
    IpcHandle::decode(bytes, KIND_MEMORY).is_some_and(|h| h.pid == std::process::id())
}

/// Removes the published export of freed memory.
pub fn withdraw_memory_export(export: Export) {
    state_dir::remove(&export_file(KIND_MEMORY, std::process::id(), export.id));
}

/// Removes the published export of a destroyed event.
pub fn withdraw_event_export(export: Export) {
    state_dir::remove(&export_file(KIND_EVENT, std::process::id(), export.id));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ImportKey {
    pub(crate) owner: Owner,
    pub(crate) pid: u32,
    pub(crate) export_id: u64,
    pub(crate) offset: u64,
}

pub(crate) struct Import {
    /// Where the mapping starts (the key of the memory table).
    pub(crate) base: u64,
    /// What the application got back: base + the handle's offset.
    pub(crate) pointer: u64,
    pub(crate) device: i32,
    pub(crate) refcount: u32,
}

#[derive(Default)]
pub struct Ipc {
    pub(crate) imports: HashMap<ImportKey, Import>,
    next_export: u64,
}

impl Ipc {
    pub(crate) fn new_export(&mut self) -> Export {
        self.next_export += 1;
        Export {
            id: self.next_export,
            nonce: state_dir::nonce(self.next_export),
        }
    }

    /// The export of the memory at `base`, as R580 makes it: the same for every allocation at
    /// that address in this process.
    pub(crate) fn export_at(&self, base: u64) -> Export {
        Export {
            id: base,
            nonce: process_nonce(),
        }
    }

    /// Forgets the imports of a mapping that was released with its owner.
    pub fn forget_import(&mut self, base: u64) {
        self.imports.retain(|_, i| i.base != base);
    }
}

/// This process's nonce (one per process, for R580's address-keyed memory handles).
fn process_nonce() -> u64 {
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| state_dir::nonce(0))
}

/// What an open answers where the APIs differ.
#[derive(Clone, Copy, Debug)]
pub struct OpenCodes {
    /// The handle's memory was freed (R580: INVALID_VALUE).
    pub stale: Code,
    /// The exporting process exited (R580: INVALID_HANDLE).
    pub exporter_exited: Code,
    /// Another context of the device imports from the same exporter (R580: INVALID_HANDLE).
    pub other_context: Code,
    /// The handle's device cannot be reached from the importing one, or mapping failed.
    pub unreachable: Code,
}

/// Which API is asking: the rules differ in places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Cuda,
    Hip,
}

/// How an open is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// `cuIpcOpenMemHandle_v2` and HIP: opening again returns the same pointer, refcounted.
    Refcounted,
    /// The legacy `cuIpcOpenMemHandle` (v1): a handle already open in the context is 208.
    Legacy,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trip_and_rejection() {
        let h = IpcHandle {
            kind: KIND_MEMORY,
            pid: 42,
            export_id: 7,
            nonce: 99,
            offset: 256,
            size: 4096,
            device: 1,
            pool: 0,
        };
        let bytes = h.encode();
        assert_eq!(IpcHandle::decode(&bytes, KIND_MEMORY), Some(h));
        assert_eq!(IpcHandle::decode(&bytes, KIND_EVENT), None);
        assert_eq!(IpcHandle::decode(&[0; 64], KIND_MEMORY), None);
        assert_eq!(IpcHandle::decode(&[0xFF; 64], KIND_MEMORY), None);
    }
}
