//! CUDA driver peer access: cuDeviceCanAccessPeer, cuCtxEnablePeerAccess,
//! cuCtxDisablePeerAccess and cuMemcpyPeer(Async) in every ABI spelling.

use super::state::ContextPair;
use super::{from_driver, hex, with_grants, Prediction};
use crate::facts;
use sharecheck_core::ffi::{CUcontext, CUstream};
use sharecheck_core::functions::args;
use sharecheck_core::rules::cuda::*;
use sharecheck_core::rules::peer::UNIDIRECTIONAL;

use sharecheck_core::rules::codes::*;

pub fn can_access_peer(a: &args::cuDeviceCanAccessPeer) -> Prediction {
    let mut p = Prediction::default();
    let (dev, peer) = (a.dev.0, a.peerDev.0);
    let Some(count) = facts::device_count() else {
        return p;
    };
    let invalid: Vec<String> = [("dev", dev), ("peerDev", peer)]
        .into_iter()
        .filter(|(_, d)| !(0..count).contains(d))
        .map(|(name, d)| format!("{name} is {d}"))
        .collect();
    if !invalid.is_empty() {
        p.flag(
            &CAN_ACCESS_INVALID_DEVICE,
            format!(
                "{}, but the driver has {count} device(s): ordinals 0..{}",
                invalid.join(" and "),
                count - 1
            ),
        );
    } else if dev == peer {
        p.flag(
            &CAN_ACCESS_SAME_DEVICE,
            format!("dev and peerDev are both device {dev}; the answer will be 0"),
        );
    }
    p
}

/// The current context and its device, when the driver can tell; `Err(())` when it says that no
/// context is current.
fn current() -> Option<Result<(CUcontext, Option<i32>), ()>> {
    match facts::current_context()? {
        None => Some(Err(())),
        Some(ctx) => Some(Ok((ctx, facts::current_device()))),
    }
}

/// The device of `peerContext`, or a finding that it is not a context.
fn peer_device(
    p: &mut Prediction,
    rule: &'static sharecheck_core::rules::Rule,
    peer: CUcontext,
) -> Option<i32> {
    if peer == CUcontext::NULL {
        p.flag(rule, "peerContext is NULL".into());
        return None;
    }
    match facts::context_device(peer)? {
        Ok(dev) => Some(dev),
        Err(code) if facts::is_unknown_context(code) => {
            p.flag(
                rule,
                format!(
                    "peerContext {} is not a live context (the driver answers {code} when asked \
                     for its device): destroyed, or never created",
                    hex(peer.addr())
                ),
            );
            None
        }
        Err(_) => None,
    }
}

pub fn enable(a: &args::cuCtxEnablePeerAccess) -> Prediction {
    let mut p = Prediction::default();
    let peer = a.peerContext;
    if a.Flags.0 != 0 {
        p.flag(
            &ENABLE_FLAGS_NOT_ZERO,
            format!("Flags is {:#x}; it must be 0", a.Flags.0),
        );
    }
    let current = current();
    if let Some(Err(())) = current {
        p.flag(
            &ENABLE_NO_CURRENT_CONTEXT,
            "no context is current on this thread".into(),
        );
    }
    let current = current.and_then(Result::ok);
    if let Some((ctx, _)) = current {
        if ctx == peer {
            p.flag(
                &ENABLE_PEER_IS_CURRENT,
                format!("peerContext {} is the current context", hex(peer.addr())),
            );
            return p;
        }
    }
    let peer_dev = peer_device(&mut p, &ENABLE_INVALID_PEER_CONTEXT, peer);
    let (Some((ctx, Some(dev))), Some(peer_dev)) = (current, peer_dev) else {
        p.then(|code| {
            (code == CONTEXT_IS_DESTROYED)
                .then(destroyed_context)
                .into_iter()
                .collect()
        });
        return p;
    };
    let pair = ContextPair {
        from: ctx.addr(),
        to: peer.addr(),
    };
    if dev == peer_dev {
        p.flag(
            &ENABLE_PEER_UNSUPPORTED,
            format!(
                "both contexts are on device {dev}, and a device is not its own peer \
                 (cuDeviceCanAccessPeer({dev}, {dev}) is 0)"
            ),
        );
    } else if facts::can_access_peer(dev, peer_dev) == Some(false) {
        p.flag(
            &ENABLE_PEER_UNSUPPORTED,
            format!("cuDeviceCanAccessPeer({dev}, {peer_dev}) is 0"),
        );
    } else {
        attribute_warnings(&mut p, dev, peer_dev);
        if with_grants(|g| g.cuda(pair).is_some()) {
            p.tracked(
                &ENABLE_ALREADY_ENABLED,
                format!(
                    "access from the current context {} (device {dev}) to {} (device {peer_dev}) \
                     was already enabled by an earlier call",
                    hex(pair.from),
                    hex(pair.to)
                ),
            );
        }
    }
    p.then(move |code| {
        let mut shown = Vec::new();
        match code {
            0 => with_grants(|g| g.grant_cuda(pair, dev, peer_dev)),
            PEER_ACCESS_ALREADY_ENABLED => {
                with_grants(|g| g.grant_cuda(pair, dev, peer_dev));
                shown.push(from_driver(
                    &ENABLE_ALREADY_ENABLED,
                    "the driver reports that access from the current context to peerContext is \
                     already enabled (possibly by a path sharecheck does not see, such as an IPC \
                     open with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)"
                        .into(),
                ));
            }
            CONTEXT_IS_DESTROYED => shown.push(destroyed_context()),
            PEER_ACCESS_UNSUPPORTED => shown.push(from_driver(
                &ENABLE_PEER_UNSUPPORTED,
                format!("the driver reports device {dev} cannot access device {peer_dev}"),
            )),
            TOO_MANY_PEERS => {
                let enabled = with_grants(|g| g.cuda_peers_of(pair.from));
                shown.push(from_driver(
                    &ENABLE_TOO_MANY_PEERS,
                    format!(
                        "the driver ran out of the hardware resources peer access needs on device \
                         {dev}; this context already has access to {enabled} other context(s) \
                         that sharecheck saw enabled"
                    ),
                ))
            }
            _ => {}
        }
        shown
    });
    p
}

/// The driver's own word that a context of the call is gone.
fn destroyed_context() -> super::Pending {
    from_driver(
        &ENABLE_INVALID_PEER_CONTEXT,
        "the driver reports a destroyed context (CUDA_ERROR_CONTEXT_IS_DESTROYED): peerContext \
         (or the current context) was destroyed"
            .into(),
    )
}

/// The documented conditions for allocations to become accessible immediately.
fn attribute_warnings(p: &mut Prediction, dev: i32, peer_dev: i32) {
    let unified = |d| facts::attribute(d, facts::ATTRIBUTE_UNIFIED_ADDRESSING);
    let without: Vec<String> = [dev, peer_dev]
        .into_iter()
        .filter(|&d| unified(d) == Some(0))
        .map(|d| d.to_string())
        .collect();
    if !without.is_empty() {
        p.flag(
            &ENABLE_NO_UNIFIED_ADDRESSING,
            format!(
                "device {} reports CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 0",
                without.join(" and ")
            ),
        );
    }
    let major = |d| facts::attribute(d, facts::ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    if let (Some(a), Some(b)) = (major(dev), major(peer_dev)) {
        if a != b {
            p.flag(
                &ENABLE_COMPUTE_CAPABILITY_MISMATCH,
                format!(
                    "device {dev} has compute capability {a}.x and device {peer_dev} has {b}.x"
                ),
            );
        }
    }
}

pub fn disable(a: &args::cuCtxDisablePeerAccess) -> Prediction {
    let mut p = Prediction::default();
    let peer = a.peerContext;
    let current = current();
    if let Some(Err(())) = current {
        p.flag(
            &DISABLE_NO_CURRENT_CONTEXT,
            "no context is current on this thread".into(),
        );
    }
    let peer_known = peer_device(&mut p, &DISABLE_INVALID_PEER_CONTEXT, peer).is_some();
    let Some(Ok((ctx, _))) = current else {
        return p;
    };
    let pair = ContextPair {
        from: ctx.addr(),
        to: peer.addr(),
    };
    let reverse = ContextPair {
        from: pair.to,
        to: pair.from,
    };
    let mut busy = Vec::new();
    if peer_known {
        let (forward, backward, streams) = with_grants(|g| {
            let streams: Vec<u64> = g
                .cuda(pair)
                .map(|grant| grant.copy_streams.iter().copied().collect())
                .unwrap_or_default();
            (g.cuda(pair).is_some(), g.cuda(reverse).is_some(), streams)
        });
        if !forward {
            let mut message = if ctx == peer {
                "peerContext is the current context; access to itself is never enabled".to_string()
            } else {
                format!(
                    "access from the current context {} to {} was never enabled (or is already \
                     disabled)",
                    hex(pair.from),
                    hex(pair.to)
                )
            };
            if backward {
                message.push_str(
                    "; it was enabled in the other direction, from peerContext to this \
                     context: peer access is one-way, so disable it with peerContext current",
                );
            }
            p.tracked(&DISABLE_NOT_ENABLED, message);
        }
        busy = streams
            .into_iter()
            .filter(|&s| facts::stream_busy(s) == Some(true))
            .collect();
        busy.sort_unstable();
    }
    p.then(move |code| {
        let mut shown = Vec::new();
        match code {
            0 => {
                with_grants(|g| g.revoke_cuda(pair));
                if !busy.is_empty() {
                    let names: Vec<String> = busy
                        .iter()
                        .map(|&s| {
                            if s == 0 {
                                "the legacy stream".into()
                            } else {
                                hex(s)
                            }
                        })
                        .collect();
                    shown.push(from_driver(
                        &DISABLE_UNREGISTERS_ALLOCATIONS,
                        format!(
                            "peer copies between these contexts were issued on {} and are still \
                             in flight (cuStreamQuery answers CUDA_ERROR_NOT_READY) when access \
                             is disabled",
                            names.join(", ")
                        ),
                    ));
                }
            }
            PEER_ACCESS_NOT_ENABLED => {
                with_grants(|g| g.revoke_cuda(pair));
                shown.push(from_driver(
                    &DISABLE_NOT_ENABLED,
                    "the driver reports that access from the current context to peerContext is \
                     not enabled"
                        .into(),
                ));
            }
            _ => {}
        }
        shown
    });
    p
}

/// The arguments every cuMemcpyPeer spelling shares.
struct PeerCopy {
    dst: u64,
    dst_ctx: CUcontext,
    src: u64,
    src_ctx: CUcontext,
    bytes: u64,
    /// `None` for the synchronous forms.
    stream: Option<CUstream>,
    /// The `_ptds`/`_ptsz` spelling: stream 0 is the per-thread default stream.
    per_thread: bool,
}

/// One entry point per spelling, all checked by `check_copy`.
macro_rules! peer_copy_entry {
    (@stream $a:ident) => { None };
    (@stream $a:ident $stream:ident) => { Some($a.$stream) };
    ($name:ident, $sym:ident, per_thread: $per_thread:literal $(, $stream:ident)?) => {
        pub fn $name(a: &args::$sym) -> Prediction {
            check_copy(PeerCopy {
                dst: a.dstDevice.0,
                dst_ctx: a.dstContext,
                src: a.srcDevice.0,
                src_ctx: a.srcContext,
                bytes: a.ByteCount.0 as u64,
                stream: peer_copy_entry!(@stream a $($stream)?),
                per_thread: $per_thread,
            })
        }
    };
}

peer_copy_entry!(memcpy_peer, cuMemcpyPeer, per_thread: false);
peer_copy_entry!(memcpy_peer_ptds, cuMemcpyPeer_ptds, per_thread: true);
peer_copy_entry!(memcpy_peer_async, cuMemcpyPeerAsync, per_thread: false, hStream);
peer_copy_entry!(memcpy_peer_async_ptsz, cuMemcpyPeerAsync_ptsz, per_thread: true, hStream);

/// Stream handles that mean "the default stream of the current context".
fn is_default_stream(stream: CUstream) -> bool {
    stream.addr() <= 2
}

fn check_copy(c: PeerCopy) -> Prediction {
    let mut p = Prediction::default();
    let nulls: Vec<&str> = [("dstContext", c.dst_ctx), ("srcContext", c.src_ctx)]
        .into_iter()
        .filter(|(_, ctx)| *ctx == CUcontext::NULL)
        .map(|(name, _)| name)
        .collect();
    if !nulls.is_empty() {
        p.flag(
            &MEMCPY_PEER_NULL_CONTEXT,
            format!("{} is NULL", nulls.join(" and ")),
        );
    }
    for (name, ptr, ctx, ctx_name) in [
        ("dstDevice", c.dst, c.dst_ctx, "dstContext"),
        ("srcDevice", c.src, c.src_ctx, "srcContext"),
    ] {
        if c.bytes > 0 {
            if let Some((base, end, missing)) =
                facts::uncovered_tail(ptr, c.bytes, facts::allocation_range)
            {
                p.flag(
                    &MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION,
                    format!(
                        "{name} {} + ByteCount {} runs {missing} byte(s) past the end of device \
                         memory (its allocation is [{}, {}))",
                        hex(ptr),
                        c.bytes,
                        hex(base),
                        hex(end)
                    ),
                );
            }
        }
        if ctx != CUcontext::NULL {
            let ctx_dev = facts::context_device(ctx).and_then(Result::ok);
            let ptr_dev = facts::device_memory_owner(ptr);
            if let (Some(ctx_dev), Some(ptr_dev)) = (ctx_dev, ptr_dev) {
                if ctx_dev != ptr_dev {
                    p.flag(
                        &MEMCPY_PEER_POINTER_NOT_IN_CONTEXT,
                        format!(
                            "{name} {} is memory of device {ptr_dev}, but {ctx_name} {} is a \
                             context of device {ctx_dev}",
                            hex(ptr),
                            hex(ctx.addr())
                        ),
                    );
                }
            }
        }
    }
    // The context the copy is issued in: its stream's, or the current one.
    let issuing = match c.stream {
        Some(stream) if !is_default_stream(stream) => match facts::stream_context(stream) {
            Some(Ok(ctx)) => Some(ctx),
            Some(Err(code)) if facts::is_unknown_context(code) => {
                p.flag(
                    &MEMCPY_PEER_ASYNC_INVALID_STREAM,
                    format!(
                        "hStream {} is not a live stream (the driver answers {code} when asked \
                         for its context): destroyed, or never created",
                        hex(stream.addr())
                    ),
                );
                None
            }
            _ => None,
        },
        _ => facts::current_context().flatten(),
    };
    let other = issuing.and_then(|e| {
        if c.dst_ctx == c.src_ctx || c.dst_ctx == CUcontext::NULL || c.src_ctx == CUcontext::NULL {
            None
        } else if e == c.dst_ctx {
            Some(c.src_ctx)
        } else if e == c.src_ctx {
            Some(c.dst_ctx)
        } else {
            None
        }
    });
    let direction = issuing.zip(other).map(|(e, o)| ContextPair {
        from: e.addr(),
        to: o.addr(),
    });
    if let Some(pair) = direction {
        let reverse = ContextPair {
            from: pair.to,
            to: pair.from,
        };
        let (needed, granted_other_way) =
            with_grants(|g| (g.cuda(pair).is_some(), g.cuda(reverse).is_some()));
        if granted_other_way && !needed {
            p.flag(
                &UNIDIRECTIONAL,
                format!(
                    "this copy is issued in context {} ({}), which was never granted access to \
                     context {}; access was enabled only the other way, from {} to {}",
                    hex(pair.from),
                    if c.stream.is_some_and(|s| !is_default_stream(s)) {
                        "the context of hStream"
                    } else {
                        "the current context"
                    },
                    hex(pair.to),
                    hex(pair.to),
                    hex(pair.from)
                ),
            );
        }
    }
    // The stream whose completion cuStreamQuery can tell later: an explicit stream, or the
    // legacy stream (the per-thread stream belongs to the issuing thread only).
    let copy_stream = c.stream.and_then(|s| match s.addr() {
        0 if !c.per_thread => Some(0),
        1 => Some(0),
        0 | 2 => None,
        a => Some(a),
    });
    let stream = c.stream;
    p.then(move |code| {
        let mut shown = Vec::new();
        if let (0, Some(pair), Some(s)) = (code, direction, copy_stream) {
            with_grants(|g| {
                if let Some(grant) = g.cuda_mut(pair) {
                    grant.copy_streams.insert(s);
                }
            });
        }
        if code == INVALID_HANDLE {
            if let Some(stream) = stream.filter(|s| !is_default_stream(*s)) {
                shown.push(from_driver(
                    &MEMCPY_PEER_ASYNC_INVALID_STREAM,
                    format!(
                        "the driver rejects hStream {} as an invalid handle",
                        hex(stream.addr())
                    ),
                ));
            }
        }
        shown
    });
    p
}
