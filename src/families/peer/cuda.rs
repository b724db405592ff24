//! CUDA driver peer access: cuDeviceCanAccessPeer, cuCtxEnablePeerAccess,
//! cuCtxDisablePeerAccess and cuMemcpyPeer(Async) in every ABI spelling.

use super::grants::ContextPair;
use super::PeerState;
use crate::engine::facts::{self, is_unknown_context};
use crate::engine::{hex, Check, Cx, LastClean, Remember};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::{CUcontext, CUstream};
use sharecheck_core::functions::args;
use sharecheck_core::rules::peer::cuda::*;
use sharecheck_core::rules::peer::UNIDIRECTIONAL;
use sharecheck_core::rules::Rule;
use std::ffi::c_int;

pub struct CanAccess;
pub struct Enable;
pub struct Disable;
pub struct Copy;
pub struct CopyStream;

impl Check<args::cuDeviceCanAccessPeer> for CanAccess {
    type Plan = ();
    #[inline]
    fn before(&self, a: &args::cuDeviceCanAccessPeer, cx: &mut Cx) {
        let (dev, peer) = (a.dev.0, a.peerDev.0);
        let Some(count) = cx.facts.device_count() else {
            return;
        };
        let valid = move |d: i32| (0..count).contains(&d);
        if !valid(dev) || !valid(peer) {
            let invalid: Vec<String> = [("dev", dev), ("peerDev", peer)]
                .into_iter()
                .filter(|&(_, d)| !valid(d))
                .map(|(name, d)| format!("{name} is {d}"))
                .collect();
            cx.flag(&CAN_ACCESS_INVALID_DEVICE, move || {
                format!(
                    "{}, but the driver has {count} device(s): ordinals 0..{}",
                    invalid.join(" and "),
                    count - 1
                )
            });
        } else if dev == peer {
            cx.flag(&CAN_ACCESS_SAME_DEVICE, move || {
                format!("dev and peerDev are both device {dev}; the answer will be 0")
            });
        }
    }
}

/// The current context and its device, when the driver can tell; `Err(())` when it says that no
/// context is current. The device is the context's, cached per context as `peerContext`'s is
/// (asked of the current context where the driver cannot be asked about a given one).
fn current(cx: &Cx) -> Option<Result<(CUcontext, Option<i32>), ()>> {
    match cx.facts.current_context()? {
        None => Some(Err(())),
        Some(ctx) => {
            let dev = cx.facts.context_device(ctx, false).and_then(Result::ok);
            Some(Ok((ctx, dev.or_else(|| cx.facts.current_device()))))
        }
    }
}

/// The device of `peerContext`, or a finding that it is not a context.
fn peer_device(cx: &mut Cx, rule: &'static Rule, peer: CUcontext) -> Option<i32> {
    if peer == CUcontext::NULL {
        cx.flag(rule, || "peerContext is NULL".into());
        return None;
    }
    if cx.facts.context_destroyed(peer) {
        // Tracked, not asked (the driver may crash when asked about a destroyed context); a
        // handle reused by a new context makes the call succeed, which drops this finding.
        cx.tracked(rule, || {
            format!(
                "peerContext {} was destroyed (cuCtxDestroy) earlier in this process",
                hex(peer.addr())
            )
        });
        return None;
    }
    match cx.facts.context_device(peer, false)? {
        Ok(dev) => Some(dev),
        Err(code) if is_unknown_context(code) => {
            cx.flag(rule, || {
                format!(
                    "peerContext {} is not a live context (the driver answers {code} when asked \
                     for its device): destroyed, or never created",
                    hex(peer.addr())
                )
            });
            None
        }
        Err(_) => None,
    }
}

/// What an enable needs after the call: the direction, when both devices are known.
pub struct EnablePlan(Option<(ContextPair, i32, i32)>);

impl Check<args::cuCtxEnablePeerAccess> for Enable {
    type Plan = EnablePlan;

    fn before(&self, a: &args::cuCtxEnablePeerAccess, cx: &mut Cx) -> EnablePlan {
        let peer = a.peerContext;
        if a.Flags.0 != 0 {
            cx.flag(&ENABLE_FLAGS_NOT_ZERO, || {
                format!("Flags is {:#x}; it must be 0", a.Flags.0)
            });
        }
        let current = current(cx);
        if let Some(Err(())) = current {
            cx.flag(&ENABLE_NO_CURRENT_CONTEXT, || {
                "no context is current on this thread".into()
            });
        }
        let current = current.and_then(Result::ok);
        if let Some((ctx, _)) = current {
            if ctx == peer {
                cx.flag(&ENABLE_PEER_IS_CURRENT, || {
                    format!("peerContext {} is the current context", hex(peer.addr()))
                });
                return EnablePlan(None);
            }
        }
        let peer_dev = peer_device(cx, &ENABLE_INVALID_PEER_CONTEXT, peer);
        let (Some((ctx, Some(dev))), Some(peer_dev)) = (current, peer_dev) else {
            return EnablePlan(None);
        };
        let pair = ContextPair {
            from: ctx.addr(),
            to: peer.addr(),
        };
        if dev == peer_dev {
            cx.flag(&ENABLE_PEER_UNSUPPORTED, || {
                format!(
                    "both contexts are on device {dev}, and a device is not its own peer \
                     (cuDeviceCanAccessPeer({dev}, {dev}) is 0)"
                )
            });
        } else if cx.facts.can_access_peer(dev, peer_dev) == Some(false) {
            cx.flag(&ENABLE_PEER_UNSUPPORTED, || {
                format!("cuDeviceCanAccessPeer({dev}, {peer_dev}) is 0")
            });
        } else {
            attribute_warnings(cx, dev, peer_dev);
            // Bad flags are refused first (R580: CUDA_ERROR_INVALID_VALUE, whatever is enabled):
            // an enable the driver never reaches is not also "already enabled".
            if a.Flags.0 == 0
                && cx
                    .states
                    .family::<PeerState>()
                    .read(cx.shard, |g| g.cuda(pair).is_some())
            {
                cx.tracked(&ENABLE_ALREADY_ENABLED, || {
                    format!(
                        "access from the current context {} (device {dev}) to {} (device \
                         {peer_dev}) was already enabled by an earlier call",
                        hex(pair.from),
                        hex(pair.to)
                    )
                });
            }
        }
        EnablePlan(Some((pair, dev, peer_dev)))
    }

    fn after(&self, a: &args::cuCtxEnablePeerAccess, plan: EnablePlan, ret: c_int, cx: &mut Cx) {
        if ret == CONTEXT_IS_DESTROYED {
            destroyed_context(cx);
        } else if ret == 0 {
            cx.facts.context_alive(a.peerContext);
        }
        let Some((pair, dev, peer_dev)) = plan.0 else {
            return;
        };
        match ret {
            0 => cx
                .states
                .family::<PeerState>()
                .write(|g| g.grant_cuda(pair, dev, peer_dev)),
            PEER_ACCESS_ALREADY_ENABLED => {
                cx.states
                    .family::<PeerState>()
                    .write(|g| g.grant_cuda(pair, dev, peer_dev));
                cx.shown(&ENABLE_ALREADY_ENABLED, || {
                    "the driver reports that access from the current context to peerContext is \
                     already enabled (possibly by a path sharecheck does not see, such as an IPC \
                     open with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)"
                        .into()
                });
            }
            PEER_ACCESS_UNSUPPORTED => cx.shown(&ENABLE_PEER_UNSUPPORTED, || {
                format!("the driver reports device {dev} cannot access device {peer_dev}")
            }),
            TOO_MANY_PEERS => {
                let enabled = cx
                    .states
                    .family::<PeerState>()
                    .read(cx.shard, |g| g.cuda_peers_of(pair.from));
                cx.shown(&ENABLE_TOO_MANY_PEERS, || {
                    format!(
                        "the driver ran out of the hardware resources peer access needs on device \
                         {dev}; this context already has access to {enabled} other context(s) \
                         that sharecheck saw enabled"
                    )
                });
            }
            _ => {}
        }
    }
}

/// The driver's own word that a context of the call is gone.
fn destroyed_context(cx: &mut Cx) {
    cx.shown(&ENABLE_INVALID_PEER_CONTEXT, || {
        "the driver reports a destroyed context (CUDA_ERROR_CONTEXT_IS_DESTROYED): peerContext \
         (or the current context) was destroyed"
            .into()
    });
}

/// The documented conditions for allocations to become accessible immediately.
fn attribute_warnings(cx: &mut Cx, dev: i32, peer_dev: i32) {
    let unified = |cx: &Cx, d| cx.facts.attribute(d, facts::ATTRIBUTE_UNIFIED_ADDRESSING);
    let without: Vec<String> = [dev, peer_dev]
        .into_iter()
        .filter(|&d| unified(cx, d) == Some(0))
        .map(|d| d.to_string())
        .collect();
    if !without.is_empty() {
        cx.flag(&ENABLE_NO_UNIFIED_ADDRESSING, || {
            format!(
                "device {} reports CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 0",
                without.join(" and ")
            )
        });
    }
    let major = |cx: &Cx, d| {
        cx.facts
            .attribute(d, facts::ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    };
    if let (Some(a), Some(b)) = (major(cx, dev), major(cx, peer_dev)) {
        if a != b {
            cx.flag(&ENABLE_COMPUTE_CAPABILITY_MISMATCH, || {
                format!("device {dev} has compute capability {a}.x and device {peer_dev} has {b}.x")
            });
        }
    }
}

/// What a disable needs after the call.
pub struct DisablePlan(Option<(ContextPair, Vec<u64>)>);

impl Check<args::cuCtxDisablePeerAccess> for Disable {
    type Plan = DisablePlan;

    fn before(&self, a: &args::cuCtxDisablePeerAccess, cx: &mut Cx) -> DisablePlan {
        let peer = a.peerContext;
        let current = current(cx);
        if let Some(Err(())) = current {
            cx.flag(&DISABLE_NO_CURRENT_CONTEXT, || {
                "no context is current on this thread".into()
            });
        }
        let peer_known = peer_device(cx, &DISABLE_INVALID_PEER_CONTEXT, peer).is_some();
        let Some(Ok((ctx, _))) = current else {
            return DisablePlan(None);
        };
        let pair = ContextPair {
            from: ctx.addr(),
            to: peer.addr(),
        };
        let mut busy = Vec::new();
        if peer_known {
            let (forward, backward, streams) =
                cx.states.family::<PeerState>().read(cx.shard, |g| {
                    let streams: Vec<u64> = g
                        .cuda(pair)
                        .map(|grant| grant.copy_streams.iter().copied().collect())
                        .unwrap_or_default();
                    (
                        g.cuda(pair).is_some(),
                        g.cuda(pair.reverse()).is_some(),
                        streams,
                    )
                });
            if !forward {
                let mut message = if ctx == peer {
                    "peerContext is the current context; access to itself is never enabled"
                        .to_string()
                } else {
                    format!(
                        "access from the current context {} to {} was never enabled (or is \
                         already disabled)",
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
                cx.tracked(&DISABLE_NOT_ENABLED, || message);
            }
            busy = streams
                .into_iter()
                .filter(|&s| cx.facts.stream_busy(s) == Some(true))
                .collect();
            busy.sort_unstable();
        }
        DisablePlan(Some((pair, busy)))
    }

    fn after(&self, _: &args::cuCtxDisablePeerAccess, plan: DisablePlan, ret: c_int, cx: &mut Cx) {
        let Some((pair, busy)) = plan.0 else {
            return;
        };
        match ret {
            0 => {
                cx.states
                    .family::<PeerState>()
                    .write(|g| g.revoke_cuda(pair));
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
                    cx.shown(&DISABLE_UNREGISTERS_ALLOCATIONS, || {
                        format!(
                            "peer copies between these contexts were issued on {} and are still \
                             in flight (cuStreamQuery answers CUDA_ERROR_NOT_READY) when access \
                             is disabled",
                            names.join(", ")
                        )
                    });
                }
            }
            PEER_ACCESS_NOT_ENABLED => {
                cx.states
                    .family::<PeerState>()
                    .write(|g| g.revoke_cuda(pair));
                cx.shown(&DISABLE_NOT_ENABLED, || {
                    "the driver reports that access from the current context to peerContext is \
                     not enabled"
                        .into()
                });
            }
            _ => {}
        }
    }
}

/// The arguments every cuMemcpyPeer spelling shares.
pub trait PeerCopy {
    fn dst(&self) -> (u64, CUcontext);
    fn src(&self) -> (u64, CUcontext);
    fn bytes(&self) -> u64;
    /// `None` for the synchronous forms.
    fn stream(&self) -> Option<CUstream>;
    /// The `_ptds`/`_ptsz` spelling: stream 0 is the per-thread default stream.
    const PER_THREAD: bool;
}

macro_rules! peer_copy {
    (@stream $a:ident) => { None };
    (@stream $a:ident $stream:ident) => { Some($a.$stream) };
    ($($sym:ident, per_thread: $per_thread:literal $(, $stream:ident)?;)*) => {
        $(
            impl PeerCopy for args::$sym {
                fn dst(&self) -> (u64, CUcontext) { (self.dstDevice.0, self.dstContext) }
                fn src(&self) -> (u64, CUcontext) { (self.srcDevice.0, self.srcContext) }
                fn bytes(&self) -> u64 { self.ByteCount.0 as u64 }
                fn stream(&self) -> Option<CUstream> { let a = self; let _ = a; peer_copy!(@stream a $($stream)?) }
                const PER_THREAD: bool = $per_thread;
            }
        )*
    };
}

peer_copy! {
    cuMemcpyPeer, per_thread: false;
    cuMemcpyPeer_ptds, per_thread: true;
    cuMemcpyPeerAsync, per_thread: false, hStream;
    cuMemcpyPeerAsync_ptsz, per_thread: true, hStream;
}

/// Stream handles that mean "the default stream of the current context".
fn is_default_stream(stream: CUstream) -> bool {
    stream.addr() <= 2
}

/// The context of an explicit stream, or `None` (unknown, or not a live stream: [`CopyStream`]
/// reports that).
fn explicit_stream_context(cx: &Cx, stream: CUstream) -> Option<CUcontext> {
    cx.facts.stream_context(stream, false)?.ok()
}

/// What is wrong with a copy's range `[ptr, ptr + bytes)`.
enum Past {
    /// It runs past its allocation: `(base, end, bytes past)`.
    Allocation((u64, u64, u64)),
    /// The driver does not know `ptr`, which a free of this process ended: `(base, size)`.
    Freed(u64, Option<u64>),
}

/// Whether `[ptr, ptr + bytes)` leaves the allocation `ptr` is in (asked again, uncached, before
/// it is reported). R580 refuses a range that runs from one `cuMemAlloc` allocation into the next
/// even where they are adjacent, but copies across VMM mappings side by side in one reservation
/// (measured on two H200s: LD_PRELOAD.md, "Peer copies at allocation edges"), so only VMM memory
/// continues into adjacent ranges.
fn range_past_allocation(cx: &Cx, ptr: u64, bytes: u64) -> Option<Past> {
    let facts = cx.facts;
    let past = |range: Option<(u64, u64)>| {
        let (base, size) = range?;
        let (end, wanted) = (base.checked_add(size)?, ptr.checked_add(bytes)?);
        (wanted > end).then(|| (base, end, wanted - end))
    };
    let Some(cached) = facts.allocation_range(ptr, false) else {
        // The driver was asked (ranges it does not know are never cached) and does not know
        // `ptr`: memory this process freed, if it was.
        let (base, size) = cx.states.frees.freed_at(ptr)?;
        return Some(Past::Freed(base, size));
    };
    // One cached lookup on the clean path; a range past it is confirmed uncached.
    past(Some(cached))?;
    let found = past(facts.allocation_range(ptr, true))?;
    if facts.memory_kind(ptr, true) == Some(facts::MemoryKind::Other) {
        // VMM (or memory opened from another process): adjacent mappings continue the range.
        return facts::uncovered_tail(ptr, bytes, |p| facts.allocation_range(p, true))
            .map(Past::Allocation);
    }
    Some(Past::Allocation(found))
}

/// A copy the checks found clean: its arguments and the context it was issued in.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CleanCopy {
    per_thread: bool,
    dst: (u64, u64),
    src: (u64, u64),
    bytes: u64,
    stream: Option<u64>,
    issuing: Option<u64>,
}

crate::fast_thread_local! {
    /// This thread's last clean copy: the same copy again, in the same generation, is clean
    /// again without its checks' work (the ranges, owners and devices of both pointers, the
    /// grants). A program's copy loop takes that path (issue 24: on R580 the checks' cache
    /// lines cost more than their instructions).
    static LAST_CLEAN: LastClean<CleanCopy> = LastClean::new(); "sharecheck_tls_peer_cuda_clean"
}

/// After the copy: the direction it used and a stream to remember it on, when that stream is
/// not yet known to have carried copies between the two contexts.
pub struct CopyPlan(Option<(ContextPair, u64)>);

impl<A: PeerCopy> Check<A> for Copy {
    type Plan = CopyPlan;

    fn before(&self, a: &A, cx: &mut Cx) -> CopyPlan {
        let facts = cx.facts;
        let ((dst, dst_ctx), (src, src_ctx), bytes) = (a.dst(), a.src(), a.bytes());
        // Read before any fact the verdict rests on.
        let generation = crate::engine::generation();
        // The context the copy is issued in: its stream's, or the current one.
        let explicit = a.stream().filter(|&s| !is_default_stream(s));
        let issuing = match explicit {
            Some(stream) => explicit_stream_context(cx, stream),
            None => facts.current_context().flatten(),
        };
        let this = CleanCopy {
            per_thread: A::PER_THREAD,
            dst: (dst, dst_ctx.addr()),
            src: (src, src_ctx.addr()),
            bytes,
            stream: a.stream().map(CUstream::addr),
            issuing: issuing.map(CUcontext::addr),
        };
        if LAST_CLEAN.recall(this, generation).is_some() {
            // This thread's last copy, found clean, and nothing it rested on has moved since.
            return CopyPlan(None);
        }
        let clean_before = cx.is_clean();
        if dst_ctx == CUcontext::NULL || src_ctx == CUcontext::NULL {
            let nulls: Vec<&str> = [("dstContext", dst_ctx), ("srcContext", src_ctx)]
                .into_iter()
                .filter(|(_, ctx)| *ctx == CUcontext::NULL)
                .map(|(name, _)| name)
                .collect();
            cx.flag(&MEMCPY_PEER_NULL_CONTEXT, || {
                format!("{} is NULL", nulls.join(" and "))
            });
        }
        // One finding per rule for the call, naming every argument at fault (dst and src).
        let (mut outside, mut freed, mut elsewhere) = (Vec::new(), Vec::new(), Vec::new());
        for (name, ptr, ctx, ctx_name) in [
            ("dstDevice", dst, dst_ctx, "dstContext"),
            ("srcDevice", src, src_ctx, "srcContext"),
        ] {
            if bytes > 0 {
                match range_past_allocation(cx, ptr, bytes) {
                    Some(Past::Allocation(found)) => outside.push(super::range_past_allocation(
                        name,
                        ptr,
                        "ByteCount",
                        bytes,
                        found,
                    )),
                    Some(Past::Freed(base, size)) => {
                        let extent = size.map_or(String::new(), |s| format!(", {s} bytes"));
                        freed.push(format!(
                            "{name} {} is memory this process freed (cuMemFree of {}{extent}); \
                             the driver no longer knows it",
                            hex(ptr),
                            hex(base)
                        ));
                    }
                    None => {}
                }
            }
            if ctx == CUcontext::NULL {
                continue;
            }
            let Some(ptr_dev) = facts.device_memory_owner(ptr, false) else {
                continue;
            };
            let ctx_dev = |fresh| facts.context_device(ctx, fresh).and_then(Result::ok);
            // Cached devices that disagree are asked again before it is reported.
            if ctx_dev(false).is_some_and(|d| d != ptr_dev) {
                let confirmed = facts.device_memory_owner(ptr, true).zip(ctx_dev(true));
                if let Some((ptr_dev, ctx_dev)) = confirmed.filter(|(p, c)| p != c) {
                    elsewhere.push(format!(
                        "{name} {} is memory of device {ptr_dev}, but {ctx_name} {} is a \
                         context of device {ctx_dev}",
                        hex(ptr),
                        hex(ctx.addr())
                    ));
                }
            }
        }
        if !outside.is_empty() {
            cx.flag(&MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION, || outside.join("; "));
        }
        if !freed.is_empty() {
            cx.tracked(&MEMCPY_PEER_MEMORY_FREED, || freed.join("; "));
        }
        if !elsewhere.is_empty() {
            cx.flag(&MEMCPY_PEER_POINTER_NOT_IN_CONTEXT, || elsewhere.join("; "));
        }
        let other = issuing.and_then(|e| {
            if dst_ctx == src_ctx || dst_ctx == CUcontext::NULL || src_ctx == CUcontext::NULL {
                None
            } else if e == dst_ctx {
                Some(src_ctx)
            } else if e == src_ctx {
                Some(dst_ctx)
            } else {
                None
            }
        });
        let direction = issuing.zip(other).map(|(e, o)| ContextPair {
            from: e.addr(),
            to: o.addr(),
        });
        // The stream whose completion cuStreamQuery can tell later: an explicit stream, or the
        // legacy stream (the per-thread stream belongs to the issuing thread only).
        let copy_stream = a.stream().and_then(|s| match s.addr() {
            0 if !A::PER_THREAD => Some(0),
            1 => Some(0),
            0 | 2 => None,
            a => Some(a),
        });
        let mut remember = None;
        if let Some(pair) = direction {
            let (needed, granted_other_way, stream_known) =
                cx.states.family::<PeerState>().read(cx.shard, |g| {
                    let grant = g.cuda(pair);
                    let stream_known = match (grant, copy_stream) {
                        (Some(grant), Some(s)) => grant.copy_streams.contains(&s),
                        _ => true,
                    };
                    let reverse = g.cuda(pair.reverse()).is_some();
                    (grant.is_some(), reverse, stream_known)
                });
            if !stream_known {
                remember = copy_stream.map(|s| (pair, s));
            }
            // The stream's context came from a cache: ask again before reporting.
            let confirmed = || match explicit {
                Some(stream) => matches!(
                    facts.stream_context(stream, true),
                    Some(Ok(ctx)) if ctx.addr() == pair.from
                ),
                None => true,
            };
            if granted_other_way && !needed && confirmed() {
                cx.flag(&UNIDIRECTIONAL, || {
                    format!(
                        "this copy is issued in context {} ({}), which was never granted access \
                         to context {}; access was enabled only the other way, from {} to {}",
                        hex(pair.from),
                        if explicit.is_some() {
                            "the context of hStream"
                        } else {
                            "the current context"
                        },
                        hex(pair.to),
                        hex(pair.to),
                        hex(pair.from)
                    )
                });
            }
        }
        if clean_before && cx.is_clean() && remember.is_none() {
            LAST_CLEAN.keep(this, generation, ());
        }
        CopyPlan(remember)
    }

    fn after(&self, _: &A, plan: CopyPlan, ret: c_int, cx: &mut Cx) {
        // Written only the first time a stream carries a copy between these contexts.
        if let (0, Some((pair, stream))) = (ret, plan.0) {
            cx.states.family::<PeerState>().write(|g| {
                if let Some(grant) = g.cuda_mut(pair) {
                    grant.copy_streams.insert(stream);
                }
            });
        }
    }
}

impl<A: PeerCopy> Check<A> for CopyStream {
    type Plan = Option<CUstream>;

    fn before(&self, a: &A, cx: &mut Cx) -> Option<CUstream> {
        let stream = a.stream().filter(|&s| !is_default_stream(s))?;
        if let Some(Err(code)) = cx.facts.stream_context(stream, false) {
            if is_unknown_context(code) {
                cx.flag(&MEMCPY_PEER_ASYNC_INVALID_STREAM, || {
                    format!(
                        "hStream {} is not a live stream (the driver answers {code} when asked \
                         for its context): destroyed, or never created",
                        hex(stream.addr())
                    )
                });
            }
        }
        Some(stream)
    }

    fn after(&self, _: &A, stream: Option<CUstream>, ret: c_int, cx: &mut Cx) {
        if let (INVALID_HANDLE, Some(stream)) = (ret, stream) {
            cx.shown(&MEMCPY_PEER_ASYNC_INVALID_STREAM, || {
                format!(
                    "the driver rejects hStream {} as an invalid handle",
                    hex(stream.addr())
                )
            });
        }
    }
}
