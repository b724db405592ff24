//! The peer-access family: `cuDeviceCanAccessPeer`, `cuCtx{Enable,Disable}PeerAccess`,
//! `cuMemcpyPeer(Async)` in every spelling, and the HIP `hipDevice*PeerAccess` and
//! `hipMemcpyPeer(Async)` calls. Contracts: CUDA Driver API "Peer Context Memory Access" and HIP
//! "Peer to peer device memory access" (`shared/contracts/`).

use super::{cuda, hip, CheckInfo, Family, Kind, Rule, Severity};
pub(crate) const CUDA_PEER: &str = "Peer Context Memory Access";
pub(crate) const CUDA_MEMORY: &str = "Memory Management";
pub(crate) const HIP_PEER: &str = "Peer to peer device memory access";

use crate::codes::*;

const ENABLE_IMMEDIATELY_ACCESSIBLE: &str = "If both the current context and peerContext are on \
    devices which support unified addressing (as may be queried using \
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) and same major compute capability, then on success \
    all allocations from peerContext will immediately be accessible by the current context.";
const NOT_IMMEDIATELY_ACCESSIBLE_FIX: &str = "do not rely on peerContext pointers being usable in \
    the current context; copy with cuMemcpyPeer instead";
pub(crate) const ENABLE_INVALID_CONTEXT: &str =
    "Returns CUDA_ERROR_INVALID_CONTEXT if there is no current \
    context, peerContext is not a valid context, or if the current context is peerContext.";
const DISABLE_INVALID_CONTEXT: &str = "Returns CUDA_ERROR_INVALID_CONTEXT if there is no current \
    context, or if peerContext is not a valid context.";
pub(crate) const MEMCPY_PEER_PARAMS: &str =
    "dstDevice is the base device pointer of the destination memory \
    and dstContext is the destination context. srcDevice is the base device pointer of the source \
    memory and srcContext is the source pointer. ByteCount specifies the number of bytes to copy.";
const HIP_CANNOT_PEER_ITSELF: &str = "Returns \"0\" if deviceId == peerDeviceId, both are valid \
    devices, however, a device is not a peer of itself.";

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    pub static ENABLE_FLAGS_NOT_ZERO: Rule = Rule {
        id: "cuCtxEnablePeerAccess.flags-not-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Flags is reserved and must be 0.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: "Flags - Reserved for future use and must be set to 0. Returns \
            CUDA_ERROR_INVALID_VALUE if Flags is not 0.",
        documented_code: Some(INVALID_VALUE),
        fix: "pass 0 as Flags",
    };

    pub static ENABLE_NO_CURRENT_CONTEXT: Rule = Rule {
        id: "cuCtxEnablePeerAccess.no-current-context",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A context must be current: access is granted from the current context.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "make the accessing context current first (cuCtxSetCurrent, or cudaSetDevice in the \
            runtime)",
    };

    pub static ENABLE_INVALID_PEER_CONTEXT: Rule = Rule {
        id: "cuCtxEnablePeerAccess.invalid-peer-context",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "peerContext must be a valid (live, non-NULL) context.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "pass the context that owns the memory to be accessed, while it is alive",
    };

    pub static ENABLE_PEER_IS_CURRENT: Rule = Rule {
        id: "cuCtxEnablePeerAccess.peer-is-current",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "peerContext must not be the current context.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "a context always reaches its own memory; enable access only to other contexts",
    };

    pub static ENABLE_PEER_UNSUPPORTED: Rule = Rule {
        id: "cuCtxEnablePeerAccess.peer-unsupported",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The device of the current context must be able to access the device of \
            peerContext, as cuDeviceCanAccessPeer reports.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: "Returns CUDA_ERROR_PEER_ACCESS_UNSUPPORTED if cuDeviceCanAccessPeer() indicates \
            that the CUdevice of the current context cannot directly access memory from the \
            CUdevice of peerContext.",
        documented_code: Some(PEER_ACCESS_UNSUPPORTED),
        fix: "call cuDeviceCanAccessPeer(&can, dev, peerDev) first; when it says 0, copy with \
            cuMemcpyPeer (staged by the driver) instead of enabling access",
    };

    pub static ENABLE_ALREADY_ENABLED: Rule = Rule {
        id: "cuCtxEnablePeerAccess.already-enabled",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Access from the current context to peerContext was already enabled: the \
            call fails with CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED and changes nothing. \
            Harmless where the program takes that code as done, as CuPy does; through the \
            runtime, cudaGetLastError reports it until it is read.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: "Returns CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED if direct access of peerContext \
            from the current context has already been enabled.",
        documented_code: Some(PEER_ACCESS_ALREADY_ENABLED),
        fix: "enable each direction once per pair of contexts, or treat \
            CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED as done (through the runtime, read it with \
            cudaGetLastError so that a later check does not see it)",
    };

    pub static ENABLE_NO_UNIFIED_ADDRESSING: Rule = Rule {
        id: "cuCtxEnablePeerAccess.no-unified-addressing",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Allocations of peerContext become accessible immediately only if both \
            devices support unified addressing.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_IMMEDIATELY_ACCESSIBLE,
        documented_code: None,
        fix: NOT_IMMEDIATELY_ACCESSIBLE_FIX,
    };

    pub static ENABLE_COMPUTE_CAPABILITY_MISMATCH: Rule = Rule {
        id: "cuCtxEnablePeerAccess.compute-capability-mismatch",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Allocations of peerContext become accessible immediately only if both \
            devices have the same major compute capability.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_IMMEDIATELY_ACCESSIBLE,
        documented_code: None,
        fix: NOT_IMMEDIATELY_ACCESSIBLE_FIX,
    };

    pub static ENABLE_TOO_MANY_PEERS: Rule = Rule {
        id: "cuCtxEnablePeerAccess.too-many-peers",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Peer access needs hardware resources (peer mappings) of which a device has \
            a fixed number; when they are used up, no further peer can be enabled until one is \
            disabled.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: "Returns CUDA_ERROR_TOO_MANY_PEERS if direct peer access is not possible because \
            hardware resources required for peer access have been exhausted.",
        documented_code: Some(TOO_MANY_PEERS),
        fix: "disable access to peers that are no longer needed (cuCtxDisablePeerAccess) before \
            enabling another, or copy with cuMemcpyPeer, which needs no peer mapping",
    };

    pub static DISABLE_NOT_ENABLED: Rule = Rule {
        id: "cuCtxDisablePeerAccess.not-enabled",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Access from the current context to peerContext must have been enabled.",
        source: cuda(CUDA_PEER, "cuCtxDisablePeerAccess"),
        quote: "Returns CUDA_ERROR_PEER_ACCESS_NOT_ENABLED if direct peer access has not yet been \
            enabled from peerContext to the current context.",
        documented_code: Some(PEER_ACCESS_NOT_ENABLED),
        fix: "disable only what this context enabled, with the same context current that called \
            cuCtxEnablePeerAccess (access is per direction)",
    };

    pub static DISABLE_NO_CURRENT_CONTEXT: Rule = Rule {
        id: "cuCtxDisablePeerAccess.no-current-context",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "A context must be current: access is revoked from the current context.",
        source: cuda(CUDA_PEER, "cuCtxDisablePeerAccess"),
        quote: DISABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "make the context that enabled the access current first",
    };

    pub static DISABLE_INVALID_PEER_CONTEXT: Rule = Rule {
        id: "cuCtxDisablePeerAccess.invalid-peer-context",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "peerContext must be a valid (live, non-NULL) context.",
        source: cuda(CUDA_PEER, "cuCtxDisablePeerAccess"),
        quote: DISABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "pass the context access was enabled to, while it is alive (destroying a context \
            already ends access to it)",
    };

    pub static DISABLE_UNREGISTERS_ALLOCATIONS: Rule = Rule {
        id: "cuCtxDisablePeerAccess.unregisters-allocations",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Disabling access also unregisters peerContext's allocations from the \
            current context: peer copies still in flight on a stream lose the mapping they were \
            issued with.",
        source: cuda(CUDA_PEER, "cuCtxDisablePeerAccess"),
        quote: "Disables direct access to memory allocations in a peer context and unregisters \
            any registered allocations.",
        documented_code: None,
        fix: "synchronize the streams that used the peer mapping before disabling access",
    };

    pub static CAN_ACCESS_INVALID_DEVICE: Rule = Rule {
        id: "cuDeviceCanAccessPeer.invalid-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dev and peerDev must be device ordinals below cuDeviceGetCount.",
        source: cuda(CUDA_PEER, "cuDeviceCanAccessPeer"),
        quote: "dev - Device from which allocations on peerDev are to be directly accessed. \
            peerDev - Device on which the allocations to be directly accessed by dev reside.",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass ordinals in [0, cuDeviceGetCount())",
    };

    pub static CAN_ACCESS_SAME_DEVICE: Rule = Rule {
        id: "cuDeviceCanAccessPeer.same-device",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "A device is not its own peer: asking about dev == peerDev answers 0, which \
            says nothing about access to the device's own memory.",
        source: cuda(CUDA_PEER, "cuDeviceCanAccessPeer"),
        quote: "Returns in *canAccessPeer a value of 1 if contexts on dev are capable of directly \
            accessing memory from contexts on peerDev and 0 otherwise.",
        documented_code: None,
        fix: "skip the query (and the enable) when dev == peerDev",
    };

    pub static MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION: Rule = Rule {
        id: "cuMemcpyPeer.range-outside-allocation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "[dstDevice, dstDevice + ByteCount) and [srcDevice, srcDevice + ByteCount) \
            must lie inside device memory.",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
        quote: MEMCPY_PEER_PARAMS,
        documented_code: Some(INVALID_VALUE),
        fix: "copy at most the bytes left in the allocation after the pointer",
    };

    pub static MEMCPY_PEER_MEMORY_FREED: Rule = Rule {
        id: "cuMemcpyPeer.memory-freed",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dstDevice and srcDevice are live device memory: not memory this process \
            freed (cuMemFree) that the driver no longer knows. R580 refuses such a copy with \
            CUDA_ERROR_INVALID_VALUE (measured, LD_PRELOAD.md).",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
        quote: MEMCPY_PEER_PARAMS,
        documented_code: Some(INVALID_VALUE),
        fix: "copy before the free, or keep the memory until every copy of it is done",
    };

    pub static MEMCPY_PEER_POINTER_NOT_IN_CONTEXT: Rule = Rule {
        id: "cuMemcpyPeer.pointer-not-in-context",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dstDevice must be memory of dstContext's device and srcDevice memory of \
            srcContext's device.",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
        quote: MEMCPY_PEER_PARAMS,
        documented_code: None,
        fix: "pass each pointer with the context it was allocated in (the arguments may be \
            swapped)",
    };

    pub static MEMCPY_PEER_NULL_CONTEXT: Rule = Rule {
        id: "cuMemcpyPeer.null-context",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "dstContext and srcContext must be contexts; NULL is not one.",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
        quote: MEMCPY_PEER_PARAMS,
        documented_code: Some(INVALID_CONTEXT),
        fix: "pass the contexts the pointers belong to (or use cuMemcpy, which needs none under \
            unified addressing)",
    };

    pub static MEMCPY_PEER_ASYNC_INVALID_STREAM: Rule = Rule {
        id: "cuMemcpyPeerAsync.invalid-stream",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "hStream must be a live stream (or 0, CU_STREAM_LEGACY, \
            CU_STREAM_PER_THREAD).",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeerAsync"),
        quote: "hStream - Stream identifier. Returns CUDA_ERROR_INVALID_HANDLE.",
        documented_code: Some(INVALID_HANDLE),
        fix: "do not use a stream after cuStreamDestroy",
    };
}

/// Rules of the HIP runtime API.
pub mod hip {
    use super::*;

    pub static CAN_ACCESS_INVALID_DEVICE: Rule = Rule {
        id: "hipDeviceCanAccessPeer.invalid-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "deviceId and peerDeviceId must be valid device ids.",
        source: hip("hipDeviceCanAccessPeer"),
        quote: "Returns hipErrorInvalidDevice if deviceId or peerDeviceId are not valid devices",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass ids in [0, hipGetDeviceCount())",
    };

    pub static CAN_ACCESS_SAME_DEVICE: Rule = Rule {
        id: "hipDeviceCanAccessPeer.same-device",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "A device is not its own peer: asking about deviceId == peerDeviceId \
            answers 0, which says nothing about access to the device's own memory.",
        source: hip("hipDeviceCanAccessPeer"),
        quote: HIP_CANNOT_PEER_ITSELF,
        documented_code: None,
        fix: "skip the query (and the enable) when deviceId == peerDeviceId",
    };

    pub static ENABLE_INVALID_DEVICE: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.invalid-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "peerDeviceId must be a valid device id.",
        source: hip("hipDeviceEnablePeerAccess"),
        quote: "peerDeviceId[in] - Peer device to enable direct access to from the current \
            device. Returns: hipSuccess, hipErrorInvalidDevice, hipErrorInvalidValue,",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass an id in [0, hipGetDeviceCount())",
    };

    pub static ENABLE_SELF: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.self",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "peerDeviceId must not be the current device: a device is not a peer of \
            itself.",
        source: hip("hipDeviceCanAccessPeer"),
        quote: HIP_CANNOT_PEER_ITSELF,
        documented_code: Some(INVALID_DEVICE),
        fix: "a device always reaches its own memory; enable access only to other devices",
    };

    pub static ENABLE_FLAGS_NOT_ZERO: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.flags-not-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "flags is reserved and must be 0.",
        source: hip("hipDeviceEnablePeerAccess"),
        quote: "flags[in] - Reserved for future use, must be zero",
        documented_code: Some(INVALID_VALUE),
        fix: "pass 0 as flags",
    };

    pub static ENABLE_ALREADY_ENABLED: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.already-enabled",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Access from the current device to peerDeviceId was already enabled: the \
            call fails with hipErrorPeerAccessAlreadyEnabled and changes nothing. Harmless \
            where the program takes that code as done; hipGetLastError reports it until it is \
            read.",
        source: hip("hipDeviceEnablePeerAccess"),
        quote: "hipErrorPeerAccessAlreadyEnabled if peer access is already enabled for this \
            device.",
        documented_code: Some(PEER_ACCESS_ALREADY_ENABLED),
        fix: "enable each direction once, or treat hipErrorPeerAccessAlreadyEnabled as done \
            (and read it with hipGetLastError so that a later check does not see it)",
    };

    pub static ENABLE_PEER_UNSUPPORTED: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.peer-unsupported",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "The current device must be able to access peerDeviceId, as \
            hipDeviceCanAccessPeer reports.",
        source: hip("hipDeviceCanAccessPeer"),
        quote: "Returns \"0\" if the specified deviceId is not capable of directly accessing \
            memory physically located on peerDeviceId,",
        documented_code: Some(INVALID_DEVICE),
        fix: "call hipDeviceCanAccessPeer first; when it says 0, copy with hipMemcpyPeer instead",
    };

    pub static DISABLE_INVALID_DEVICE: Rule = Rule {
        id: "hipDeviceDisablePeerAccess.invalid-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "peerDeviceId must be a valid device id.",
        source: hip("hipDeviceDisablePeerAccess"),
        quote: "peerDeviceId[in] Peer device to disable direct access to",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass an id in [0, hipGetDeviceCount())",
    };

    pub static DISABLE_NOT_ENABLED: Rule = Rule {
        id: "hipDeviceDisablePeerAccess.not-enabled",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Access from the current device to peerDeviceId must have been enabled.",
        source: hip("hipDeviceDisablePeerAccess"),
        quote: "If direct access to memory allocations on peer device has not been enabled yet \
            from the current device, it returns hipErrorPeerAccessNotEnabled.",
        documented_code: Some(PEER_ACCESS_NOT_ENABLED),
        fix: "disable only what this device enabled, with the same device current \
            (hipSetDevice) that called hipDeviceEnablePeerAccess",
    };

    pub static MEMCPY_PEER_INVALID_DEVICE: Rule = Rule {
        id: "hipMemcpyPeer.invalid-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dstDeviceId and srcDeviceId must be valid device ids.",
        source: hip("hipMemcpyPeer"),
        quote: "dstDeviceId[in] - Destination device; srcDeviceId[in] - Source device. Returns: \
            hipSuccess, hipErrorInvalidValue, hipErrorInvalidDevice",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass ids in [0, hipGetDeviceCount())",
    };

    pub static MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION: Rule = Rule {
        id: "hipMemcpyPeer.range-outside-allocation",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "[dst, dst + sizeBytes) and [src, src + sizeBytes) must lie inside device \
            memory.",
        source: hip("hipMemcpyPeer"),
        quote: "dst[out] - Destination device pointer; src[in] - Source device pointer; \
            sizeBytes[in] - Size of memory copy in bytes",
        documented_code: Some(INVALID_VALUE),
        fix: "copy at most the bytes left in the allocation after the pointer",
    };

    pub static MEMCPY_PEER_POINTER_NOT_ON_DEVICE: Rule = Rule {
        id: "hipMemcpyPeer.pointer-not-on-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dst must be memory of dstDeviceId and src memory of srcDeviceId.",
        source: hip("hipMemcpyPeer"),
        quote: "dst[out] - Destination device pointer; dstDeviceId[in] - Destination device; \
            src[in] - Source device pointer; srcDeviceId[in] - Source device",
        documented_code: None,
        fix: "pass each pointer with the device it was allocated on (the arguments may be \
            swapped)",
    };

    pub static MEMCPY_PEER_ASYNC_INVALID_STREAM: Rule = Rule {
        id: "hipMemcpyPeerAsync.invalid-stream",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "stream must be a live stream (or 0, hipStreamLegacy, hipStreamPerThread).",
        source: hip("hipMemcpyPeerAsync"),
        quote: "stream[in] - Stream identifier",
        documented_code: None,
        fix: "do not use a stream after hipStreamDestroy",
    };
}

/// Rules that span both APIs.
pub static UNIDIRECTIONAL: Rule = Rule {
    id: "peer-access.unidirectional",
    severity: Severity::Info,
    kind: Kind::Misuse,
    requirement: "Peer access is one-way: enabling it from A to B lets A's kernels reach B's \
        memory, not B's reach A's. A peer copy issued in B between A and B, after access was \
        enabled only from A to B, does not need the access itself (R580 over NVLink copies \
        at full speed either way, measured), but B's kernels cannot dereference A's memory.",
    source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
    quote: "Note that access granted by this call is unidirectional and that in order to \
        access memory from the current context in peerContext, a separate symmetric call to \
        cuCtxEnablePeerAccess() is required.",
    documented_code: None,
    fix: "enable access from B to A as well if B's kernels are to read or write A's memory; \
        copies need neither direction",
};

/// The checks of this family: which rules each can report. `crate::table` says where they run.
pub mod checks {
    use super::*;

    pub static CAN_ACCESS_CUDA: CheckInfo = CheckInfo {
        name: "peer.can-access.cuda",
        rules: &[
            &cuda::CAN_ACCESS_INVALID_DEVICE,
            &cuda::CAN_ACCESS_SAME_DEVICE,
        ],
    };
    pub static ENABLE_CUDA: CheckInfo = CheckInfo {
        name: "peer.enable.cuda",
        rules: &[
            &cuda::ENABLE_FLAGS_NOT_ZERO,
            &cuda::ENABLE_NO_CURRENT_CONTEXT,
            &cuda::ENABLE_INVALID_PEER_CONTEXT,
            &cuda::ENABLE_PEER_IS_CURRENT,
            &cuda::ENABLE_PEER_UNSUPPORTED,
            &cuda::ENABLE_ALREADY_ENABLED,
            &cuda::ENABLE_NO_UNIFIED_ADDRESSING,
            &cuda::ENABLE_COMPUTE_CAPABILITY_MISMATCH,
            &cuda::ENABLE_TOO_MANY_PEERS,
        ],
    };
    pub static DISABLE_CUDA: CheckInfo = CheckInfo {
        name: "peer.disable.cuda",
        rules: &[
            &cuda::DISABLE_NOT_ENABLED,
            &cuda::DISABLE_NO_CURRENT_CONTEXT,
            &cuda::DISABLE_INVALID_PEER_CONTEXT,
            &cuda::DISABLE_UNREGISTERS_ALLOCATIONS,
        ],
    };
    pub static COPY_CUDA: CheckInfo = CheckInfo {
        name: "peer.copy.cuda",
        rules: &[
            &cuda::MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION,
            &cuda::MEMCPY_PEER_MEMORY_FREED,
            &cuda::MEMCPY_PEER_POINTER_NOT_IN_CONTEXT,
            &cuda::MEMCPY_PEER_NULL_CONTEXT,
            &UNIDIRECTIONAL,
        ],
    };
    pub static COPY_STREAM_CUDA: CheckInfo = CheckInfo {
        name: "peer.copy-stream.cuda",
        rules: &[&cuda::MEMCPY_PEER_ASYNC_INVALID_STREAM],
    };
    pub static CAN_ACCESS_HIP: CheckInfo = CheckInfo {
        name: "peer.can-access.hip",
        rules: &[
            &hip::CAN_ACCESS_INVALID_DEVICE,
            &hip::CAN_ACCESS_SAME_DEVICE,
        ],
    };
    pub static ENABLE_HIP: CheckInfo = CheckInfo {
        name: "peer.enable.hip",
        rules: &[
            &hip::ENABLE_INVALID_DEVICE,
            &hip::ENABLE_SELF,
            &hip::ENABLE_FLAGS_NOT_ZERO,
            &hip::ENABLE_ALREADY_ENABLED,
            &hip::ENABLE_PEER_UNSUPPORTED,
        ],
    };
    pub static DISABLE_HIP: CheckInfo = CheckInfo {
        name: "peer.disable.hip",
        rules: &[&hip::DISABLE_INVALID_DEVICE, &hip::DISABLE_NOT_ENABLED],
    };
    pub static COPY_HIP: CheckInfo = CheckInfo {
        name: "peer.copy.hip",
        rules: &[
            &hip::MEMCPY_PEER_INVALID_DEVICE,
            &hip::MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION,
            &hip::MEMCPY_PEER_POINTER_NOT_ON_DEVICE,
            &UNIDIRECTIONAL,
        ],
    };
    pub static COPY_STREAM_HIP: CheckInfo = CheckInfo {
        name: "peer.copy-stream.hip",
        rules: &[&hip::MEMCPY_PEER_ASYNC_INVALID_STREAM],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "peer",
    title: "Peer access",
    checks: &[
        &checks::CAN_ACCESS_CUDA,
        &checks::ENABLE_CUDA,
        &checks::DISABLE_CUDA,
        &checks::COPY_CUDA,
        &checks::COPY_STREAM_CUDA,
        &checks::CAN_ACCESS_HIP,
        &checks::ENABLE_HIP,
        &checks::DISABLE_HIP,
        &checks::COPY_HIP,
        &checks::COPY_STREAM_HIP,
    ],
    reported: &[],
    engine: &[],
    divergences: &[],
};
