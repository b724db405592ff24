//! The driver-wide operations of the `ipc` area (on [`Driver`], which holds every area).

#![allow(unused_imports)]

use super::{Driver, Owner};
use crate::config::{config, Behaviour};
use crate::ipc::*;
use crate::memory::{Export, MemKind};
use crate::state_dir;
use crate::types::{
    Code, Outcome, ALREADY_MAPPED, EVENT_DISABLE_TIMING, EVENT_INTERPROCESS, INVALID_CONTEXT,
    INVALID_VALUE, MAP_FAILED,
};
use std::collections::HashMap;
use std::os::fd::AsRawFd;

impl Driver {
    /// `cuIpcGetMemHandle` / `hipIpcGetMemHandle`.
    ///
    /// Only `cuMemAlloc`/`cuMemAllocPitch`/`hipMalloc` memory can be exported. R580 answered
    /// INVALID_VALUE for pool (`cuMemAllocAsync`), managed and `cuMemHostAlloc` memory
    /// (api-facts.md §5.1 [observed]); the simulator answers the same for `cuMemAllocHost`
    /// memory, for memory imported from another process, and for `cuMemCreate` memory mapped
    /// with `cuMemMap` (which is shared through `cuMemExportToShareableHandle`, not legacy IPC;
    /// it is in no allocation of the table, so `find` misses it).
    pub fn export_memory(&mut self, ptr: u64, api: Api) -> Outcome<[u8; 64]> {
        let allocation = self.memory.find(ptr).ok_or(INVALID_VALUE)?;
        match allocation.kind {
            MemKind::Device => {}
            MemKind::Pool | MemKind::Managed { .. } | MemKind::Host { .. } | MemKind::IpcImport => {
                return Err(INVALID_VALUE)
            }
        }
        let offset = match api {
            // R580 accepts an interior pointer and hands out the base's handle; the documentation
            // asks for "a pointer to the base".
            Api::Cuda if ptr != allocation.base && config().behaviour == Behaviour::Documented => {
                return Err(INVALID_VALUE)
            }
            Api::Cuda => 0,
            // The CLR records the offset of an interior pointer in the handle.
            Api::Hip => ptr - allocation.base,
        };
        let base = allocation.base;
        let export = match allocation.export {
            Some(e) => e,
            None => {
                let export = match config().behaviour {
                    Behaviour::R580 => self.ipc.export_at(base),
                    Behaviour::Documented => self.ipc.new_export(),
                };
                let fd = allocation
                    .memfd
                    .as_ref()
                    .expect("device memory has a memfd")
                    .as_raw_fd();
                let name = export_file(KIND_MEMORY, std::process::id(), export.id);
                if !state_dir::write(&name, &format!("{} {fd}\n", export.nonce)) {
                    return Err(MAP_FAILED);
                }
                self.memory.find_mut(base).expect("found above").export = Some(export);
                export
            }
        };
        let allocation = self.memory.find(base).expect("found above");
        Ok(IpcHandle {
            kind: KIND_MEMORY,
            pid: std::process::id(),
            export_id: export.id,
            nonce: export.nonce,
            offset,
            size: allocation.size,
            device: allocation.device,
            pool: 0,
        }
        .encode())
    }

    /// `cuIpcOpenMemHandle[_v2]` / `hipIpcOpenMemHandle` into `owner` on `device`; the flags
    /// were checked by the caller. `codes` says what each API answers where they differ.
    pub fn open_memory(
        &mut self,
        bytes: &[u8; 64],
        owner: Owner,
        device: i32,
        mode: OpenMode,
        codes: OpenCodes,
    ) -> Outcome<u64> {
        let handle = IpcHandle::decode(bytes, KIND_MEMORY).ok_or(INVALID_VALUE)?;
        if handle.pid == std::process::id() {
            return Err(INVALID_CONTEXT);
        }
        let key = ImportKey {
            owner,
            pid: handle.pid,
            export_id: handle.export_id,
            offset: handle.offset,
        };
        if let Some(import) = self.ipc.imports.get_mut(&key) {
            if mode == OpenMode::Legacy {
                return Err(ALREADY_MAPPED);
            }
            import.refcount += 1;
            return Ok(import.pointer);
        }
        if handle.exporter_exited() {
            return Err(codes.exporter_exited);
        }
        // "may only be opened by one context per device per other process": R580 refuses a
        // second context of the device any handle of that exporter (measured with the first
        // context's import still open).
        let other_context_same_device = self
            .ipc
            .imports
            .iter()
            .any(|(k, i)| k.pid == handle.pid && k.owner != owner && i.device == device);
        if other_context_same_device {
            return Err(codes.other_context);
        }
        let fd = handle.published().ok_or(codes.stale)?;
        let reachable = handle.device == device
            || crate::device::is_valid(handle.device)
                && crate::device::can_access_peer(device, handle.device);
        if !reachable {
            return Err(codes.unreachable);
        }
        let path = format!("/proc/{}/fd/{fd}", handle.pid);
        let base = self
            .memory
            .map_import(&path, handle.size, handle.device, owner)
            .ok_or(codes.unreachable)?;
        let pointer = base + handle.offset;
        self.ipc.imports.insert(
            key,
            Import {
                base,
                pointer,
                device,
                refcount: 1,
            },
        );
        Ok(pointer)
    }

    /// `cuIpcCloseMemHandle` / `hipIpcCloseMemHandle`.
    pub fn close_memory(&mut self, pointer: u64) -> Outcome {
        let key = self
            .ipc
            .imports
            .iter()
            .find(|(_, i)| i.pointer == pointer)
            .map(|(k, _)| *k)
            .ok_or(INVALID_VALUE)?;
        let import = self.ipc.imports.get_mut(&key).expect("found above");
        import.refcount -= 1;
        if import.refcount == 0 {
            let base = import.base;
            self.ipc.imports.remove(&key);
            // Unmapped when dropped.
            self.memory
                .remove_if(base, |a| a.kind == MemKind::IpcImport)?;
        }
        Ok(())
    }

    /// `cuIpcGetEventHandle` / `hipIpcGetEventHandle`.
    pub fn export_event(
        &mut self,
        event: u64,
        unknown: Code,
        not_interprocess: Code,
    ) -> Outcome<[u8; 64]> {
        let e = self.streams.event(event).ok_or(unknown)?;
        let needed = EVENT_INTERPROCESS | EVENT_DISABLE_TIMING;
        if e.flags & needed != needed {
            return Err(not_interprocess);
        }
        let (device, export) = (e.device, e.export);
        let export = match export {
            Some(x) => x,
            None => {
                let x = self.ipc.new_export();
                let name = export_file(KIND_EVENT, std::process::id(), x.id);
                if !state_dir::write(&name, &format!("{}\n", x.nonce)) {
                    return Err(MAP_FAILED);
                }
                self.streams.event_mut(event).expect("found above").export = Some(x);
                x
            }
        };
        Ok(IpcHandle {
            kind: KIND_EVENT,
            pid: std::process::id(),
            export_id: export.id,
            nonce: export.nonce,
            offset: 0,
            size: 0,
            device,
            pool: 0,
        }
        .encode())
    }

    /// `cuIpcOpenEventHandle` / `hipIpcOpenEventHandle`: a new local event that behaves like one
    /// created with DISABLE_TIMING (and INTERPROCESS).
    pub fn open_event(
        &mut self,
        bytes: &[u8; 64],
        owner: Owner,
        device: i32,
        gone: Code,
    ) -> Outcome<u64> {
        let handle = IpcHandle::decode(bytes, KIND_EVENT).ok_or(INVALID_VALUE)?;
        if handle.pid == std::process::id() {
            return Err(INVALID_CONTEXT);
        }
        if handle.published().is_none() {
            return Err(gone);
        }
        Ok(self
            .streams
            .create_event(owner, device, EVENT_INTERPROCESS | EVENT_DISABLE_TIMING))
    }
}
