//! Streams and events, and the stream-attach rules for managed memory.

use crate::handles::{self, Kind};
use crate::memory::Export;
use crate::types::Owner;
use crate::types::{Outcome, INVALID_HANDLE, STREAM_PER_THREAD};
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
    pub(crate) streams: HashMap<u64, Stream>,
    events: HashMap<u64, Event>,
    /// The contexts whose default stream (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD: one
    /// stream per context here) has work pending, as [`Stream::pending`].
    pub(crate) pending_default: HashSet<Owner>,
    next_id: u64,
}

/// Is `handle` one of the special streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)?
pub fn is_special(handle: u64) -> bool {
    handle <= STREAM_PER_THREAD
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
