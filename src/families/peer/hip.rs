//! HIP peer access: hipDeviceCanAccessPeer, hipDeviceEnablePeerAccess,
//! hipDeviceDisablePeerAccess, hipMemcpyPeer and hipMemcpyPeerAsync.

use super::PeerState;
use crate::engine::facts::{self, HipSession};
use crate::engine::{hex, Check, Cx, LastClean, Remember};
use sharecheck_core::codes::{
    CONTEXT_IS_DESTROYED, INVALID_HANDLE, PEER_ACCESS_ALREADY_ENABLED, PEER_ACCESS_NOT_ENABLED,
};
use sharecheck_core::functions::args;
use sharecheck_core::rules::peer::hip::*;
use sharecheck_core::rules::peer::UNIDIRECTIONAL;
use sharecheck_core::rules::Rule;
use std::ffi::{c_int, c_void};

pub struct CanAccess;
pub struct Enable;
pub struct Disable;
pub struct Copy;
pub struct CopyStream;

/// Flags every id in `ids` that is not a device; returns whether all are valid (`None`: the
/// runtime could not say how many devices there are).
fn check_ids(
    cx: &mut Cx,
    q: &mut HipSession,
    rule: &'static Rule,
    ids: &[(&str, i32)],
) -> Option<bool> {
    let count = q.device_count()?;
    if ids.iter().all(|(_, d)| (0..count).contains(d)) {
        return Some(true);
    }
    let invalid: Vec<String> = ids
        .iter()
        .filter(|(_, d)| !(0..count).contains(d))
        .map(|(name, d)| format!("{name} is {d}"))
        .collect();
    cx.flag(rule, || {
        format!(
            "{}, but the runtime has {count} device(s): ids 0..{}",
            invalid.join(" and "),
            count - 1
        )
    });
    Some(false)
}

/// The current device, once `peerDeviceId` is known to be a device (flagged with `rule` if not).
fn current_device_and_valid_peer(
    cx: &mut Cx,
    q: &mut HipSession,
    rule: &'static Rule,
    peer: i32,
) -> Option<i32> {
    if check_ids(cx, q, rule, &[("peerDeviceId", peer)]) != Some(true) {
        return None;
    }
    q.current_device()
}

impl Check<args::hipDeviceCanAccessPeer> for CanAccess {
    type Plan = ();
    fn before(&self, a: &args::hipDeviceCanAccessPeer, cx: &mut Cx) {
        let (dev, peer) = (a.deviceId.0, a.peerDeviceId.0);
        let mut q = HipSession::begin(cx.facts);
        let ids = [("deviceId", dev), ("peerDeviceId", peer)];
        if check_ids(cx, &mut q, &CAN_ACCESS_INVALID_DEVICE, &ids) == Some(true) && dev == peer {
            cx.flag(&CAN_ACCESS_SAME_DEVICE, || {
                format!("deviceId and peerDeviceId are both device {dev}; the answer will be 0")
            });
        }
    }
}

impl Check<args::hipDeviceEnablePeerAccess> for Enable {
    /// `(device, peer)` when the call may change the grants.
    type Plan = Option<(i32, i32)>;

    fn before(&self, a: &args::hipDeviceEnablePeerAccess, cx: &mut Cx) -> Option<(i32, i32)> {
        let peer = a.peerDeviceId.0;
        if a.flags.0 != 0 {
            cx.flag(&ENABLE_FLAGS_NOT_ZERO, || {
                format!("flags is {:#x}; it must be 0", a.flags.0)
            });
        }
        let facts = cx.facts;
        let mut q = HipSession::begin(facts);
        let dev = current_device_and_valid_peer(cx, &mut q, &ENABLE_INVALID_DEVICE, peer)?;
        if dev == peer {
            cx.flag(&ENABLE_SELF, || {
                format!("peerDeviceId {peer} is the current device")
            });
            return None;
        }
        if q.can_access_peer(dev, peer) == Some(false) {
            cx.flag(&ENABLE_PEER_UNSUPPORTED, || {
                format!("hipDeviceCanAccessPeer({dev}, {peer}) is 0")
            });
            return None;
        }
        // Bad flags are refused before anything else (ROCm's hipDeviceEnablePeerAccess checks
        // them first): an enable the runtime never reaches is not also "already enabled".
        if a.flags.0 == 0
            && cx
                .states
                .family::<PeerState>()
                .read(cx.shard, |g| g.hip(dev, peer))
        {
            cx.tracked(&ENABLE_ALREADY_ENABLED, || {
                format!(
                    "access from the current device {dev} to device {peer} was already enabled \
                     by an earlier call"
                )
            });
        }
        Some((dev, peer))
    }

    fn after(
        &self,
        _: &args::hipDeviceEnablePeerAccess,
        plan: Self::Plan,
        ret: c_int,
        cx: &mut Cx,
    ) {
        let Some((dev, peer)) = plan else {
            return;
        };
        match ret {
            0 => cx
                .states
                .family::<PeerState>()
                .write(|g| g.grant_hip(dev, peer)),
            PEER_ACCESS_ALREADY_ENABLED => {
                cx.states
                    .family::<PeerState>()
                    .write(|g| g.grant_hip(dev, peer));
                cx.shown(&ENABLE_ALREADY_ENABLED, || {
                    format!(
                        "the runtime reports that access from device {dev} to device {peer} is \
                         already enabled"
                    )
                });
            }
            _ => {}
        }
    }
}

impl Check<args::hipDeviceDisablePeerAccess> for Disable {
    type Plan = Option<(i32, i32)>;

    fn before(&self, a: &args::hipDeviceDisablePeerAccess, cx: &mut Cx) -> Option<(i32, i32)> {
        let peer = a.peerDeviceId.0;
        let facts = cx.facts;
        let mut q = HipSession::begin(facts);
        let dev = current_device_and_valid_peer(cx, &mut q, &DISABLE_INVALID_DEVICE, peer)?;
        let (forward, backward) = cx
            .states
            .family::<PeerState>()
            .read(cx.shard, |g| (g.hip(dev, peer), g.hip(peer, dev)));
        if !forward {
            let mut message = if dev == peer {
                format!(
                    "peerDeviceId {peer} is the current device; a device is not a peer of itself"
                )
            } else {
                format!(
                    "access from the current device {dev} to device {peer} was never enabled (or \
                     is already disabled)"
                )
            };
            if backward {
                message.push_str(&format!(
                    "; it was enabled in the other direction, from device {peer} to device {dev}: \
                     peer access is one-way, so disable it with device {peer} current"
                ));
            }
            cx.tracked(&DISABLE_NOT_ENABLED, || message);
        }
        Some((dev, peer))
    }

    fn after(
        &self,
        _: &args::hipDeviceDisablePeerAccess,
        plan: Self::Plan,
        ret: c_int,
        cx: &mut Cx,
    ) {
        let Some((dev, peer)) = plan else {
            return;
        };
        match ret {
            0 => {
                cx.states
                    .family::<PeerState>()
                    .write(|g| g.revoke_hip(dev, peer));
            }
            PEER_ACCESS_NOT_ENABLED => {
                cx.states
                    .family::<PeerState>()
                    .write(|g| g.revoke_hip(dev, peer));
                cx.shown(&DISABLE_NOT_ENABLED, || {
                    format!(
                        "the runtime reports that access from device {dev} to device {peer} is \
                         not enabled"
                    )
                });
            }
            _ => {}
        }
    }
}

/// What both hipMemcpyPeer spellings share.
pub trait HipPeerCopy {
    fn dst(&self) -> (u64, i32);
    fn src(&self) -> (u64, i32);
    fn bytes(&self) -> u64;
    fn stream(&self) -> Option<*mut c_void>;
    /// hipMemcpyPeerAsync calls its source id `srcDevice`.
    const SRC_NAME: &'static str;
}

impl HipPeerCopy for args::hipMemcpyPeer {
    fn dst(&self) -> (u64, i32) {
        (self.dst.addr(), self.dstDeviceId.0)
    }
    fn src(&self) -> (u64, i32) {
        (self.src.addr(), self.srcDeviceId.0)
    }
    fn bytes(&self) -> u64 {
        self.sizeBytes.0 as u64
    }
    fn stream(&self) -> Option<*mut c_void> {
        None
    }
    const SRC_NAME: &'static str = "srcDeviceId";
}

impl HipPeerCopy for args::hipMemcpyPeerAsync {
    fn dst(&self) -> (u64, i32) {
        (self.dst.addr(), self.dstDeviceId.0)
    }
    fn src(&self) -> (u64, i32) {
        (self.src.addr(), self.srcDevice.0)
    }
    fn bytes(&self) -> u64 {
        self.sizeBytes.0 as u64
    }
    fn stream(&self) -> Option<*mut c_void> {
        Some(self.stream.0)
    }
    const SRC_NAME: &'static str = "srcDevice";
}

/// Stream handles that mean "the default stream of the current device".
fn is_default_stream(stream: *mut c_void) -> bool {
    (stream as usize) <= 2
}

/// A HIP copy the checks found clean: its arguments and the device it was issued on.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CleanCopy {
    dst: (u64, i32),
    src: (u64, i32),
    bytes: u64,
    stream: Option<usize>,
    issuing: Option<i32>,
}

crate::fast_thread_local! {
    /// This thread's last clean HIP copy: the same copy again, issued on the same device in the
    /// same generation, is clean again without the runtime's pointer questions (issue 24: HIP's
    /// pointer facts are not cached, so a copy asked four of them).
    static LAST_CLEAN: LastClean<CleanCopy> = LastClean::new(); "sharecheck_tls_peer_hip_clean"
}

impl<A: HipPeerCopy> Check<A> for Copy {
    type Plan = ();

    fn before(&self, a: &A, cx: &mut Cx) {
        let ((dst, dst_dev), (src, src_dev), bytes) = (a.dst(), a.src(), a.bytes());
        let stream = a.stream();
        let facts = cx.facts;
        // Read before any fact the verdict rests on.
        let generation = crate::engine::generation();
        let mut q = HipSession::begin(facts);
        // The device the copy is issued on: its stream's, or the current one.
        let explicit = stream.filter(|&s| !is_default_stream(s));
        let issuing = match explicit {
            Some(s) => q.stream_device(s),
            None => q.current_device(),
        };
        let this = CleanCopy {
            dst: (dst, dst_dev),
            src: (src, src_dev),
            bytes,
            stream: stream.map(|s| s as usize),
            issuing,
        };
        if LAST_CLEAN.recall(this, generation).is_some() {
            return;
        }
        let clean_before = cx.is_clean();
        let ids = [("dstDeviceId", dst_dev), (A::SRC_NAME, src_dev)];
        let ids_valid = check_ids(cx, &mut q, &MEMCPY_PEER_INVALID_DEVICE, &ids) == Some(true);
        // One finding per rule for the call, naming every argument at fault (dst and src).
        let (mut outside, mut elsewhere) = (Vec::new(), Vec::new());
        for (name, ptr, id_name, id) in [
            ("dst", dst, "dstDeviceId", dst_dev),
            ("src", src, A::SRC_NAME, src_dev),
        ] {
            if ptr == 0 {
                continue;
            }
            if bytes > 0 {
                if let Some(found) = facts::uncovered_tail(ptr, bytes, |x| q.allocation_range(x)) {
                    outside.push(super::range_past_allocation(
                        name,
                        ptr,
                        "sizeBytes",
                        bytes,
                        found,
                    ));
                }
            }
            if ids_valid {
                if let Some(owner) = q.device_memory_owner(ptr) {
                    if owner != id {
                        elsewhere.push(format!(
                            "{name} {} is memory of device {owner}, but {id_name} is {id}",
                            hex(ptr)
                        ));
                    }
                }
            }
        }
        drop(q);
        if !outside.is_empty() {
            cx.flag(&MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION, || outside.join("; "));
        }
        if !elsewhere.is_empty() {
            cx.flag(&MEMCPY_PEER_POINTER_NOT_ON_DEVICE, || elsewhere.join("; "));
        }
        let remember = |cx: &Cx| {
            if clean_before && cx.is_clean() {
                LAST_CLEAN.keep(this, generation, ());
            }
        };
        if !ids_valid || dst_dev == src_dev {
            remember(cx);
            return;
        }
        let other = issuing.and_then(|e| {
            if e == dst_dev {
                Some(src_dev)
            } else if e == src_dev {
                Some(dst_dev)
            } else {
                None
            }
        });
        if let (Some(e), Some(o)) = (issuing, other) {
            let (needed, other_way) = cx
                .states
                .family::<PeerState>()
                .read(cx.shard, |g| (g.hip(e, o), g.hip(o, e)));
            if other_way && !needed {
                cx.flag(&UNIDIRECTIONAL, || {
                    format!(
                        "this copy is issued on device {e} ({}), which was never granted access \
                         to device {o}; access was enabled only the other way, from device {o} \
                         to device {e}",
                        if explicit.is_some() {
                            "the device of stream"
                        } else {
                            "the current device"
                        }
                    )
                });
            }
        }
        remember(cx);
    }
}

impl<A: HipPeerCopy> Check<A> for CopyStream {
    type Plan = Option<u64>;

    fn before(&self, a: &A, _: &mut Cx) -> Option<u64> {
        a.stream()
            .filter(|&s| !is_default_stream(s))
            .map(|s| s as usize as u64)
    }

    fn after(&self, _: &A, stream: Option<u64>, ret: c_int, cx: &mut Cx) {
        if let (CONTEXT_IS_DESTROYED | INVALID_HANDLE, Some(stream)) = (ret, stream) {
            cx.shown(&MEMCPY_PEER_ASYNC_INVALID_STREAM, || {
                format!(
                    "the runtime rejects stream {} ({ret}): it is not a live stream",
                    hex(stream)
                )
            });
        }
    }
}
