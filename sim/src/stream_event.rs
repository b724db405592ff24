//! Streams and events, and the stream-attach rules for managed memory.

use crate::handles::{self, Kind};
use crate::memory::{Export, MemKind};
use crate::state::{Driver, Owner};
use crate::types::{
    attribute, Outcome, CONTEXT_IS_DESTROYED, INVALID_HANDLE, INVALID_VALUE, MEM_ATTACH_GLOBAL,
    MEM_ATTACH_HOST, MEM_ATTACH_SINGLE, NOT_READY, STREAM_LEGACY, STREAM_PER_THREAD,
};
use std::collections::{HashMap, HashSet};

pub struct Stream {
    /// The CUDA context current at creation (`cuStreamGetCtx`), or the HIP device.
    pub owner: Owner,
    pub device: i32,
    pub flags: u32,
    /// Already clamped into the API's range (`cuStreamCreateWithPriority`,
    /// `hipStreamCreateWithPriority`); 0 is the default priority of both.
    pub priority: i32,
    /// Asynchronous work was issued to the stream and the program has not waited for it since
    /// (`cuStreamQuery` answers CUDA_ERROR_NOT_READY). The work itself is done at once.
    pub pending: bool,
}

pub struct Event {
    pub owner: Owner,
    pub device: i32,
    pub flags: u32,
    pub recorded: bool,
    /// The stream it was last recorded on while that stream had work pending: the event
    /// completes with that work, and a stream that waits for it has work pending until then.
    pub after: Option<u64>,
    /// Set once the event was exported for IPC (the same handle on every export).
    pub export: Option<Export>,
}

#[derive(Default)]
pub struct Streams {
    streams: HashMap<u64, Stream>,
    events: HashMap<u64, Event>,
    /// The contexts whose default stream (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD: one
    /// stream per context here) has work pending, as [`Stream::pending`].
    pending_default: HashSet<Owner>,
    next_id: u64,
}

/// Is `handle` one of the special streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)?
pub fn is_special(handle: u64) -> bool {
    handle <= STREAM_PER_THREAD
}

/// `cuStreamDestroy` / `hipStreamDestroy`: the special streams cannot be destroyed; memory
/// attached to the stream reverts to its default visibility.
pub fn destroy_stream(handle: u64) -> crate::types::Outcome {
    if is_special(handle) {
        return Err(crate::types::INVALID_HANDLE);
    }
    crate::state::with(|d| {
        d.streams.remove_stream(handle)?;
        d.detach_stream(handle);
        Ok(())
    })
}

impl Streams {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn create_stream(&mut self, owner: Owner, device: i32, flags: u32, priority: i32) -> u64 {
        let handle = handles::encode(Kind::Stream, self.next_id());
        self.streams.insert(
            handle,
            Stream {
                owner,
                device,
                flags,
                priority,
                pending: false,
            },
        );
        handle
    }

    /// A special stream or a live created one.
    pub fn is_valid_stream(&self, handle: u64) -> bool {
        is_special(handle) || self.streams.contains_key(&handle)
    }

    /// CUDA_ERROR_INVALID_HANDLE / hipErrorInvalidHandle for a destroyed or unknown stream.
    pub fn check_stream(&self, handle: u64) -> Outcome {
        if self.is_valid_stream(handle) {
            Ok(())
        } else {
            Err(INVALID_HANDLE)
        }
    }

    pub fn stream(&self, handle: u64) -> Option<&Stream> {
        self.streams.get(&handle)
    }

    pub fn remove_stream(&mut self, handle: u64) -> Outcome<Stream> {
        self.streams.remove(&handle).ok_or(INVALID_HANDLE)
    }

    pub fn create_event(&mut self, owner: Owner, device: i32, flags: u32) -> u64 {
        let handle = handles::encode(Kind::Event, self.next_id());
        self.events.insert(
            handle,
            Event {
                owner,
                device,
                flags,
                recorded: false,
                after: None,
                export: None,
            },
        );
        handle
    }

    pub fn event(&self, handle: u64) -> Option<&Event> {
        self.events.get(&handle)
    }

    pub fn event_mut(&mut self, handle: u64) -> Option<&mut Event> {
        self.events.get_mut(&handle)
    }

    pub fn remove_event(&mut self, handle: u64) -> Outcome<Event> {
        self.events.remove(&handle).ok_or(INVALID_HANDLE)
    }

    /// Clears the pending work of every stream of `owner` and of its default stream
    /// (`cuCtxSynchronize`).
    pub fn synchronize_owner(&mut self, owner: Owner) {
        self.pending_default.remove(&owner);
        for s in self.streams.values_mut().filter(|s| s.owner == owner) {
            s.pending = false;
        }
    }

    /// Removes the streams and events of `owner`; returns the removed stream handles.
    pub fn remove_owned(&mut self, owner: Owner) -> Vec<u64> {
        self.pending_default.remove(&owner);
        self.events.retain(|_, e| e.owner != owner);
        let gone: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| s.owner == owner)
            .map(|(h, _)| *h)
            .collect();
        for h in &gone {
            self.streams.remove(h);
        }
        gone
    }
}

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
