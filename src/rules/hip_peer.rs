//! HIP peer access: hipDeviceCanAccessPeer, hipDeviceEnablePeerAccess,
//! hipDeviceDisablePeerAccess, hipMemcpyPeer and hipMemcpyPeerAsync.

use super::{from_driver, hex, with_grants, Prediction};
use crate::facts::{self, HipQueries};
use sharecheck_core::functions::args;
use sharecheck_core::rules::hip::*;
use sharecheck_core::rules::peer::UNIDIRECTIONAL;
use sharecheck_core::rules::Rule;
use std::ffi::c_void;

use sharecheck_core::rules::codes::{
    CONTEXT_IS_DESTROYED, INVALID_HANDLE, PEER_ACCESS_ALREADY_ENABLED, PEER_ACCESS_NOT_ENABLED,
};

/// Flags every id in `ids` that is not a device; returns whether all are valid (`None`: the
/// runtime could not say how many devices there are).
fn check_ids(
    p: &mut Prediction,
    q: &mut HipQueries,
    rule: &'static Rule,
    ids: &[(&str, i32)],
) -> Option<bool> {
    let count = q.device_count()?;
    let invalid: Vec<String> = ids
        .iter()
        .filter(|(_, d)| !(0..count).contains(d))
        .map(|(name, d)| format!("{name} is {d}"))
        .collect();
    if invalid.is_empty() {
        return Some(true);
    }
    p.flag(
        rule,
        format!(
            "{}, but the runtime has {count} device(s): ids 0..{}",
            invalid.join(" and "),
            count - 1
        ),
    );
    Some(false)
}

/// The current device, once `peerDeviceId` is known to be a device (flagged with `rule` if not).
fn current_device_and_valid_peer(
    p: &mut Prediction,
    q: &mut HipQueries,
    rule: &'static Rule,
    peer: i32,
) -> Option<i32> {
    if check_ids(p, q, rule, &[("peerDeviceId", peer)]) != Some(true) {
        return None;
    }
    q.current_device()
}

pub fn can_access_peer(a: &args::hipDeviceCanAccessPeer) -> Prediction {
    let mut p = Prediction::default();
    let (dev, peer) = (a.deviceId.0, a.peerDeviceId.0);
    let mut q = HipQueries::begin();
    let ids = [("deviceId", dev), ("peerDeviceId", peer)];
    if check_ids(&mut p, &mut q, &CAN_ACCESS_INVALID_DEVICE, &ids) == Some(true) && dev == peer {
        p.flag(
            &CAN_ACCESS_SAME_DEVICE,
            format!("deviceId and peerDeviceId are both device {dev}; the answer will be 0"),
        );
    }
    p
}

pub fn enable(a: &args::hipDeviceEnablePeerAccess) -> Prediction {
    let mut p = Prediction::default();
    let peer = a.peerDeviceId.0;
    if a.flags.0 != 0 {
        p.flag(
            &ENABLE_FLAGS_NOT_ZERO,
            format!("flags is {:#x}; it must be 0", a.flags.0),
        );
    }
    let mut q = HipQueries::begin();
    let Some(dev) = current_device_and_valid_peer(&mut p, &mut q, &ENABLE_INVALID_DEVICE, peer)
    else {
        return p;
    };
    if dev == peer {
        p.flag(
            &ENABLE_SELF,
            format!("peerDeviceId {peer} is the current device"),
        );
        return p;
    }
    if q.can_access_peer(dev, peer) == Some(false) {
        p.flag(
            &ENABLE_PEER_UNSUPPORTED,
            format!("hipDeviceCanAccessPeer({dev}, {peer}) is 0"),
        );
        return p;
    }
    if with_grants(|g| g.hip(dev, peer)) {
        p.tracked(
            &ENABLE_ALREADY_ENABLED,
            format!(
                "access from the current device {dev} to device {peer} was already enabled by an \
                 earlier call"
            ),
        );
    }
    p.then(move |code| {
        let mut shown = Vec::new();
        match code {
            0 => with_grants(|g| g.grant_hip(dev, peer)),
            PEER_ACCESS_ALREADY_ENABLED => {
                with_grants(|g| g.grant_hip(dev, peer));
                shown.push(from_driver(
                    &ENABLE_ALREADY_ENABLED,
                    format!(
                        "the runtime reports that access from device {dev} to device {peer} is \
                         already enabled"
                    ),
                ));
            }
            _ => {}
        }
        shown
    });
    p
}

pub fn disable(a: &args::hipDeviceDisablePeerAccess) -> Prediction {
    let mut p = Prediction::default();
    let peer = a.peerDeviceId.0;
    let mut q = HipQueries::begin();
    let Some(dev) = current_device_and_valid_peer(&mut p, &mut q, &DISABLE_INVALID_DEVICE, peer)
    else {
        return p;
    };
    let (forward, backward) = with_grants(|g| (g.hip(dev, peer), g.hip(peer, dev)));
    if !forward {
        let mut message = if dev == peer {
            format!("peerDeviceId {peer} is the current device; a device is not a peer of itself")
        } else {
            format!(
                "access from the current device {dev} to device {peer} was never enabled (or is \
                 already disabled)"
            )
        };
        if backward {
            message.push_str(&format!(
                "; it was enabled in the other direction, from device {peer} to device {dev}: \
                 peer access is one-way, so disable it with device {peer} current"
            ));
        }
        p.tracked(&DISABLE_NOT_ENABLED, message);
    }
    p.then(move |code| {
        let mut shown = Vec::new();
        match code {
            0 => {
                with_grants(|g| g.revoke_hip(dev, peer));
            }
            PEER_ACCESS_NOT_ENABLED => {
                with_grants(|g| g.revoke_hip(dev, peer));
                shown.push(from_driver(
                    &DISABLE_NOT_ENABLED,
                    format!(
                        "the runtime reports that access from device {dev} to device {peer} is \
                         not enabled"
                    ),
                ));
            }
            _ => {}
        }
        shown
    });
    p
}

pub fn memcpy_peer(a: &args::hipMemcpyPeer) -> Prediction {
    check_copy(
        (a.dst.addr(), a.dstDeviceId.0),
        (a.src.addr(), a.srcDeviceId.0),
        a.sizeBytes.0 as u64,
        None,
    )
}

pub fn memcpy_peer_async(a: &args::hipMemcpyPeerAsync) -> Prediction {
    check_copy(
        (a.dst.addr(), a.dstDeviceId.0),
        (a.src.addr(), a.srcDevice.0),
        a.sizeBytes.0 as u64,
        Some(a.stream.0),
    )
}

/// Stream handles that mean "the default stream of the current device".
fn is_default_stream(stream: *mut c_void) -> bool {
    (stream as usize) <= 2
}

fn check_copy(
    (dst, dst_dev): (u64, i32),
    (src, src_dev): (u64, i32),
    bytes: u64,
    stream: Option<*mut c_void>,
) -> Prediction {
    let mut p = Prediction::default();
    let mut q = HipQueries::begin();
    // hipMemcpyPeerAsync calls its source id `srcDevice`.
    let src_name = if stream.is_some() {
        "srcDevice"
    } else {
        "srcDeviceId"
    };
    let ids = [("dstDeviceId", dst_dev), (src_name, src_dev)];
    let ids_valid = check_ids(&mut p, &mut q, &MEMCPY_PEER_INVALID_DEVICE, &ids) == Some(true);
    for (name, ptr, id_name, id) in [
        ("dst", dst, "dstDeviceId", dst_dev),
        ("src", src, src_name, src_dev),
    ] {
        if ptr == 0 {
            continue;
        }
        if bytes > 0 {
            if let Some((base, end, missing)) =
                facts::uncovered_tail(ptr, bytes, |x| q.allocation_range(x))
            {
                p.flag(
                    &MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION,
                    format!(
                        "{name} {} + sizeBytes {bytes} runs {missing} byte(s) past the end of \
                         device memory (its allocation is [{}, {}))",
                        hex(ptr),
                        hex(base),
                        hex(end)
                    ),
                );
            }
        }
        if ids_valid {
            if let Some(owner) = q.device_memory_owner(ptr) {
                if owner != id {
                    p.flag(
                        &MEMCPY_PEER_POINTER_NOT_ON_DEVICE,
                        format!(
                            "{name} {} is memory of device {owner}, but {id_name} is {id}",
                            hex(ptr)
                        ),
                    );
                }
            }
        }
    }
    // The device the copy is issued on: its stream's, or the current one.
    let issuing = match stream {
        Some(s) if !is_default_stream(s) => q.stream_device(s),
        _ => q.current_device(),
    };
    drop(q);
    if ids_valid && dst_dev != src_dev {
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
            let (needed, other_way) = with_grants(|g| (g.hip(e, o), g.hip(o, e)));
            if other_way && !needed {
                p.flag(
                    &UNIDIRECTIONAL,
                    format!(
                        "this copy is issued on device {e} ({}), which was never granted access \
                         to device {o}; access was enabled only the other way, from device {o} \
                         to device {e}",
                        if stream.is_some_and(|s| !is_default_stream(s)) {
                            "the device of stream"
                        } else {
                            "the current device"
                        }
                    ),
                );
            }
        }
    }
    if let Some(s) = stream.filter(|s| !is_default_stream(*s)) {
        let stream_addr = s as usize as u64;
        p.then(move |code| match code {
            CONTEXT_IS_DESTROYED | INVALID_HANDLE => vec![from_driver(
                &MEMCPY_PEER_ASYNC_INVALID_STREAM,
                format!(
                    "the runtime rejects stream {} ({code}): it is not a live stream",
                    hex(stream_addr)
                ),
            )],
            _ => Vec::new(),
        });
    }
    p
}
