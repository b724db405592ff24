//! The driver-wide operations of the `peer` area (on [`Driver`], which holds every area).

#![allow(unused_imports)]

use super::{Driver, Owner};
use crate::config::{config, Behaviour};
use crate::context;
use crate::device;
use crate::peer::*;
use crate::types::{
    Outcome, INVALID_CONTEXT, INVALID_DEVICE, INVALID_VALUE, PEER_ACCESS_ALREADY_ENABLED,
    PEER_ACCESS_NOT_ENABLED, PEER_ACCESS_UNSUPPORTED, TOO_MANY_PEERS,
};
use std::collections::HashSet;

impl Driver {
    /// The ids and devices of the current context and of `peer`.
    fn peer_pair(&self, peer: u64) -> Outcome<((u64, i32), (u64, i32))> {
        let (current, device) = self.current_context()?;
        let current_id = self.contexts.id_of(current)?;
        let peer_id = self.contexts.id_of(context::required(peer)?)?;
        let peer_device = self.contexts.get(peer)?.device;
        Ok(((current_id, device), (peer_id, peer_device)))
    }

    /// `cuCtxEnablePeerAccess`; with `SHARECHECK_SIM_MAX_PEERS=N`, a context that already holds N
    /// grants gets CUDA_ERROR_TOO_MANY_PEERS once every other check has passed.
    pub fn enable_peer_context(&mut self, peer: u64, flags: u32) -> Outcome {
        let ((current, device), (peer_id, peer_device)) = self.peer_pair(peer)?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        if current == peer_id {
            // R580 answers 217; the documentation says "INVALID_CONTEXT if ... the current
            // context is peerContext".
            return Err(match config().behaviour {
                Behaviour::R580 => PEER_ACCESS_UNSUPPORTED,
                Behaviour::Documented => INVALID_CONTEXT,
            });
        }
        if !device::can_access_peer(device, peer_device) {
            return Err(PEER_ACCESS_UNSUPPORTED);
        }
        if self.peers.context_grant(current, peer_id) {
            return Err(PEER_ACCESS_ALREADY_ENABLED);
        }
        if let Some(max) = config().max_peers {
            if self.peers.context_grant_count(current) >= max as usize {
                return Err(TOO_MANY_PEERS);
            }
        }
        self.peers.contexts.insert((current, peer_id));
        Ok(())
    }

    /// `cuCtxDisablePeerAccess` (self is simply "not enabled", as on R580).
    pub fn disable_peer_context(&mut self, peer: u64) -> Outcome {
        let ((current, _), (peer_id, _)) = self.peer_pair(peer)?;
        if !self.peers.contexts.remove(&(current, peer_id)) {
            return Err(PEER_ACCESS_NOT_ENABLED);
        }
        Ok(())
    }

    /// `hipDeviceEnablePeerAccess`: as the CLR, a device that cannot access the peer (itself
    /// included) is hipErrorInvalidDevice, not PeerAccessUnsupported.
    pub fn enable_peer_device(&mut self, device: i32, peer: i32, flags: u32) -> Outcome {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        if !device::is_valid(peer) || !device::can_access_peer(device, peer) {
            return Err(INVALID_DEVICE);
        }
        if !self.peers.devices.insert((device, peer)) {
            return Err(PEER_ACCESS_ALREADY_ENABLED);
        }
        Ok(())
    }

    /// `hipDeviceDisablePeerAccess`.
    pub fn disable_peer_device(&mut self, device: i32, peer: i32) -> Outcome {
        if !device::is_valid(peer) || !device::can_access_peer(device, peer) {
            return Err(INVALID_DEVICE);
        }
        if !self.peers.devices.remove(&(device, peer)) {
            return Err(PEER_ACCESS_NOT_ENABLED);
        }
        Ok(())
    }
}
