//! The driver-wide operations of the `stream_event` area (on [`Driver`], which holds every area).

#![allow(unused_imports)]

use super::{Driver, Owner};
use crate::handles::{self, Kind};
use crate::memory::{Export, MemKind};
use crate::stream_event::*;
use crate::types::{
    attribute, Outcome, CONTEXT_IS_DESTROYED, INVALID_HANDLE, INVALID_VALUE, MEM_ATTACH_GLOBAL,
    MEM_ATTACH_HOST, MEM_ATTACH_SINGLE, NOT_READY, STREAM_LEGACY, STREAM_PER_THREAD,
};
use std::collections::{HashMap, HashSet};

impl Driver {
    /// The device whose memory pool a stream-ordered allocation on `stream` comes from
    /// (`cuMemAllocAsync[_ptsz]`): a created stream's device; for the special handles (NULL,
    /// legacy, per-thread) the current context's, INVALID_CONTEXT without one ("default stream
    /// specified with no current context"). A destroyed or unknown stream is INVALID_HANDLE.
    pub fn stream_device(&self, stream: u64) -> Outcome<i32> {
        if is_special(stream) {
            return Ok(self.current_context()?.1);
        }
        self.streams
            .stream(stream)
            .map(|s| s.device)
            .ok_or(INVALID_HANDLE)
    }

    /// Records that asynchronous work was issued to `stream` (a live or special one); a special
    /// handle means the current context's default stream, and nothing without a current context.
    pub fn mark_pending(&mut self, stream: u64) {
        if is_special(stream) {
            if let Ok((owner, _)) = self.current_owner() {
                self.streams.pending_default.insert(owner);
            }
        } else if let Some(s) = self.streams.streams.get_mut(&stream) {
            s.pending = true;
        }
    }

    /// `cuStreamQuery[_ptsz]`: NOT_READY while work is pending; INVALID_HANDLE for a destroyed
    /// or unknown stream; INVALID_CONTEXT for a special handle without a current context.
    pub fn query_stream(&self, stream: u64) -> Outcome {
        let pending = if is_special(stream) {
            let (owner, _) = self.current_owner()?;
            self.streams.pending_default.contains(&owner)
        } else {
            self.streams.stream(stream).ok_or(INVALID_HANDLE)?.pending
        };
        if pending {
            Err(NOT_READY)
        } else {
            Ok(())
        }
    }

    /// `cuStreamSynchronize[_ptsz]`: the stream's pending work is done. A special handle without
    /// a current context has nothing to wait for.
    pub fn synchronize_stream(&mut self, stream: u64) -> Outcome {
        self.streams.check_stream(stream)?;
        if self.pools.doomed {
            // Measured (R580): after a poisoned pool's allocation was freed, the next
            // synchronize dies ([`crate::pool::Pools::doomed`]).
            // SAFETY: raising a signal in this thread has no memory-safety precondition.
            unsafe { libc::raise(libc::SIGSEGV) };
        }
        if is_special(stream) {
            if let Ok((owner, _)) = self.current_owner() {
                self.streams.pending_default.remove(&owner);
            }
        } else if let Some(s) = self.streams.streams.get_mut(&stream) {
            s.pending = false;
        }
        Ok(())
    }

    /// A destroyed stream's attachments revert to the allocation's default (documented).
    pub fn detach_stream(&mut self, stream: u64) {
        for a in self.memory.allocations_mut() {
            if let (MemKind::Managed { flags }, (_, s)) = (a.kind, a.attachment) {
                if s == stream {
                    a.attachment = (flags, 0);
                }
            }
        }
    }

    /// `cuStreamAttachMemAsync[_ptsz]` (`ptsz`: the `_ptsz` export, where 0 is the per-thread
    /// stream), with the results R580 gave (LD_PRELOAD.md, "cuStreamAttachMemAsync on R580,
    /// measured"): length 0 or the whole size at the allocation's start attaches; a partial
    /// length, an interior pointer, flags other than exactly GLOBAL/HOST/SINGLE, and memory that
    /// is neither managed nor pageable (with the attribute) are INVALID_VALUE. SINGLE is refused
    /// on stream 0 of the legacy export only: R580 accepts it on CU_STREAM_LEGACY, which the
    /// documentation calls the NULL stream too (`documented` behaviour refuses both), and on the
    /// per-thread stream, a specific stream in either spelling.
    pub fn attach_cuda(
        &mut self,
        stream: u64,
        dptr: u64,
        length: u64,
        flags: u32,
        ptsz: bool,
    ) -> Outcome {
        self.streams.check_stream(stream)?;
        if ![MEM_ATTACH_GLOBAL, MEM_ATTACH_HOST, MEM_ATTACH_SINGLE].contains(&flags) {
            return Err(INVALID_VALUE);
        }
        // "illegal to attach singly to the NULL stream".
        let null_stream = (stream == 0 && !ptsz)
            || (stream == STREAM_LEGACY
                && crate::config::config().behaviour == crate::config::Behaviour::Documented);
        if flags == MEM_ATTACH_SINGLE && null_stream {
            return Err(INVALID_VALUE);
        }
        let device = match self.streams.stream(stream) {
            Some(s) => s.device,
            None => self.current_context()?.1,
        };
        self.attach_common(stream, dptr, length, flags, device)
    }

    /// `hipStreamAttachMemAsync`, in the order of the CLR checks (api-facts §5.2).
    pub fn attach_hip(
        &mut self,
        stream: u64,
        dptr: u64,
        length: u64,
        flags: u32,
        device: i32,
    ) -> Outcome {
        if dptr == 0 {
            return Err(INVALID_VALUE);
        }
        if !self.streams.is_valid_stream(stream) {
            return Err(CONTEXT_IS_DESTROYED);
        }
        if ![MEM_ATTACH_GLOBAL, MEM_ATTACH_HOST, MEM_ATTACH_SINGLE].contains(&flags) {
            return Err(INVALID_VALUE);
        }
        if flags == MEM_ATTACH_SINGLE && stream == 0 {
            return Err(INVALID_VALUE);
        }
        let device = self.streams.stream(stream).map_or(device, |s| s.device);
        match self.memory.find_mut(dptr) {
            None => {
                // System-allocated memory: needs pageable access and a length.
                if length == 0 || !crate::device::flag(device, attribute::PAGEABLE_MEMORY_ACCESS) {
                    return Err(INVALID_VALUE);
                }
                Ok(())
            }
            Some(a) => {
                if let MemKind::Managed { .. } = a.kind {
                    if length != 0 && length != a.size {
                        return Err(INVALID_VALUE);
                    }
                }
                // The CLR validates and returns success without associating anything ("Unclear
                // what should be done for this interface in AMD HMM", hip_memory.cpp): the
                // memory keeps its attachment.
                Ok(())
            }
        }
    }

    fn attach_common(
        &mut self,
        stream: u64,
        dptr: u64,
        length: u64,
        flags: u32,
        device: i32,
    ) -> Outcome {
        match self.memory.find_mut(dptr) {
            Some(a) => match a.kind {
                MemKind::Managed { .. } => {
                    // R580 refuses an interior pointer whatever the length.
                    let whole = (length == 0 || length == a.size) && dptr == a.base;
                    if !whole {
                        return Err(INVALID_VALUE);
                    }
                    a.attachment = (flags, stream);
                    Ok(())
                }
                _ => Err(INVALID_VALUE),
            },
            None => {
                let pageable = crate::device::flag(device, attribute::PAGEABLE_MEMORY_ACCESS);
                if pageable
                    && length != 0
                    && dptr != 0
                    && self.memory.region(dptr, length).is_none()
                {
                    Ok(())
                } else {
                    Err(INVALID_VALUE)
                }
            }
        }
    }
}

/// `cuStreamDestroy` / `hipStreamDestroy`: the special streams cannot be destroyed; memory
/// attached to the stream reverts to its default visibility.
pub fn destroy_stream(handle: u64) -> crate::types::Outcome {
    if crate::stream_event::is_special(handle) {
        return Err(crate::types::INVALID_HANDLE);
    }
    super::with(|d| {
        d.streams.remove_stream(handle)?;
        d.detach_stream(handle);
        Ok(())
    })
}
