//! The rule catalogue: one entry per documented requirement the shim checks.
//!
//! Each rule has a stable ID (its meaning never changes once released; a changed requirement gets
//! a new ID), a severity, a kind, the functions it applies to, the requirement in our words, the
//! documented sentence it rests on and where that sentence is written, and a fix hint. The shim
//! refers to rules by their constants ([`cuda`], [`hip`], [`divergence`]); `sharecheck rules`
//! prints [`RULES`], and RULES.md is that output, kept equal by a test.

use crate::json::JsonOut;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// A note: what a call did, or a known driver divergence.
    Info,
    /// Undefined by the documents, or silently not what the program meant.
    Warning,
    /// The program broke a documented requirement, whether or not the driver noticed.
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
    pub fn parse(s: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Error]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Whose fault a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The program broke a documented requirement.
    Misuse,
    /// The driver answered other than its documentation says.
    Divergence,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Misuse => "misuse",
            Kind::Divergence => "divergence",
        }
    }
}

/// Where the requirement is written.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// `CUDA Driver API` or `HIP Runtime API`.
    pub document: &'static str,
    /// The section of that document.
    pub section: &'static str,
    /// The function whose documentation holds the sentence.
    pub function: &'static str,
}

impl Source {
    /// `CUDA Driver API, Peer Context Memory Access, cuCtxEnablePeerAccess`.
    pub fn cite(&self) -> String {
        format!("{}, {}, {}", self.document, self.section, self.function)
    }
}

/// One checked requirement.
#[derive(Debug)]
pub struct Rule {
    /// Stable ID: `<function>.<condition>`, `peer-access.<condition>` or `divergence.<...>`.
    pub id: &'static str,
    pub severity: Severity,
    pub kind: Kind,
    /// Exported symbols the rule is checked on.
    pub functions: &'static [&'static str],
    /// The requirement, in this project's words.
    pub requirement: &'static str,
    pub source: Source,
    /// The documented sentence(s) the rule rests on, verbatim.
    pub quote: &'static str,
    /// What the documentation says the call returns when the requirement is broken: the code
    /// `mode=strict` returns instead of calling the driver. `None` where it names none.
    pub documented_code: Option<i32>,
    pub fix: &'static str,
}

impl Rule {
    /// The catalogue entry as JSON, with the field names of a finding in a trace record.
    pub fn encode(&self, w: &mut JsonOut) {
        w.begin_object();
        w.kv_str("rule", self.id);
        w.kv_str("severity", self.severity.as_str());
        w.kv_str("kind", self.kind.as_str());
        w.key("functions");
        w.begin_array();
        for f in self.functions {
            w.str(f);
        }
        w.end_array();
        w.kv_str("requirement", self.requirement);
        w.kv_str("doc", &self.source.cite());
        w.kv_str("quote", self.quote);
        w.key("documented_code");
        match self.documented_code {
            Some(code) => w.i64(code.into()),
            None => w.null(),
        }
        w.kv_str("fix", self.fix);
        w.end_object();
    }
}

const CUDA_PEER: &str = "Peer Context Memory Access";
const CUDA_MEMORY: &str = "Memory Management";
const HIP_PEER: &str = "Peer to peer device memory access";

const fn cuda(section: &'static str, function: &'static str) -> Source {
    Source {
        document: "CUDA Driver API",
        section,
        function,
    }
}

const fn hip(function: &'static str) -> Source {
    Source {
        document: "HIP Runtime API",
        section: HIP_PEER,
        function,
    }
}

const CU_MEMCPY_PEER_ALL: &[&str] = &[
    "cuMemcpyPeer",
    "cuMemcpyPeer_ptds",
    "cuMemcpyPeerAsync",
    "cuMemcpyPeerAsync_ptsz",
];
const CU_MEMCPY_PEER_ASYNC: &[&str] = &["cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz"];
const HIP_MEMCPY_PEER_ALL: &[&str] = &["hipMemcpyPeer", "hipMemcpyPeerAsync"];

pub use crate::codes;
use codes::*;

const ENABLE_IMMEDIATELY_ACCESSIBLE: &str = "If both the current context and peerContext are on \
    devices which support unified addressing (as may be queried using \
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) and same major compute capability, then on success \
    all allocations from peerContext will immediately be accessible by the current context.";
const NOT_IMMEDIATELY_ACCESSIBLE_FIX: &str = "do not rely on peerContext pointers being usable in \
    the current context; copy with cuMemcpyPeer instead";
const ENABLE_INVALID_CONTEXT: &str = "Returns CUDA_ERROR_INVALID_CONTEXT if there is no current \
    context, peerContext is not a valid context, or if the current context is peerContext.";
const DISABLE_INVALID_CONTEXT: &str = "Returns CUDA_ERROR_INVALID_CONTEXT if there is no current \
    context, or if peerContext is not a valid context.";
const MEMCPY_PEER_PARAMS: &str = "dstDevice is the base device pointer of the destination memory \
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
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxEnablePeerAccess"],
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
        severity: Severity::Warning,
        kind: Kind::Misuse,
        functions: &["cuCtxEnablePeerAccess"],
        requirement: "Access from the current context to peerContext must not already be enabled.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: "Returns CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED if direct access of peerContext \
            from the current context has already been enabled.",
        documented_code: Some(PEER_ACCESS_ALREADY_ENABLED),
        fix: "enable each direction once per pair of contexts (remember it, or treat \
            CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED as done and clear it)",
    };

    pub static ENABLE_NO_UNIFIED_ADDRESSING: Rule = Rule {
        id: "cuCtxEnablePeerAccess.no-unified-addressing",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxEnablePeerAccess"],
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
        functions: &["cuCtxDisablePeerAccess"],
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
        functions: &["cuCtxDisablePeerAccess"],
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
        functions: &["cuCtxDisablePeerAccess"],
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
        functions: &["cuCtxDisablePeerAccess"],
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
        functions: &["cuDeviceCanAccessPeer"],
        requirement: "dev and peerDev must be device ordinals below cuDeviceGetCount.",
        source: cuda(CUDA_PEER, "cuDeviceCanAccessPeer"),
        quote: "dev - Device from which allocations on peerDev are to be directly accessed. \
            peerDev - Device on which the allocations to be directly accessed by dev reside.",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass ordinals in [0, cuDeviceGetCount())",
    };

    pub static CAN_ACCESS_SAME_DEVICE: Rule = Rule {
        id: "cuDeviceCanAccessPeer.same-device",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        functions: &["cuDeviceCanAccessPeer"],
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
        functions: CU_MEMCPY_PEER_ALL,
        requirement: "[dstDevice, dstDevice + ByteCount) and [srcDevice, srcDevice + ByteCount) \
            must lie inside device memory.",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
        quote: MEMCPY_PEER_PARAMS,
        documented_code: Some(INVALID_VALUE),
        fix: "copy at most the bytes left in the allocation after the pointer",
    };

    pub static MEMCPY_PEER_POINTER_NOT_IN_CONTEXT: Rule = Rule {
        id: "cuMemcpyPeer.pointer-not-in-context",
        severity: Severity::Error,
        kind: Kind::Misuse,
        functions: CU_MEMCPY_PEER_ALL,
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
        functions: CU_MEMCPY_PEER_ALL,
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
        functions: CU_MEMCPY_PEER_ASYNC,
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
        functions: &["hipDeviceCanAccessPeer"],
        requirement: "deviceId and peerDeviceId must be valid device ids.",
        source: hip("hipDeviceCanAccessPeer"),
        quote: "Returns hipErrorInvalidDevice if deviceId or peerDeviceId are not valid devices",
        documented_code: Some(INVALID_DEVICE),
        fix: "pass ids in [0, hipGetDeviceCount())",
    };

    pub static CAN_ACCESS_SAME_DEVICE: Rule = Rule {
        id: "hipDeviceCanAccessPeer.same-device",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        functions: &["hipDeviceCanAccessPeer"],
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
        functions: &["hipDeviceEnablePeerAccess"],
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
        functions: &["hipDeviceEnablePeerAccess"],
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
        functions: &["hipDeviceEnablePeerAccess"],
        requirement: "flags is reserved and must be 0.",
        source: hip("hipDeviceEnablePeerAccess"),
        quote: "flags[in] - Reserved for future use, must be zero",
        documented_code: Some(INVALID_VALUE),
        fix: "pass 0 as flags",
    };

    pub static ENABLE_ALREADY_ENABLED: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.already-enabled",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        functions: &["hipDeviceEnablePeerAccess"],
        requirement: "Access from the current device to peerDeviceId must not already be enabled.",
        source: hip("hipDeviceEnablePeerAccess"),
        quote: "hipErrorPeerAccessAlreadyEnabled if peer access is already enabled for this \
            device.",
        documented_code: Some(PEER_ACCESS_ALREADY_ENABLED),
        fix: "enable each direction once (remember it, or treat \
            hipErrorPeerAccessAlreadyEnabled as done and clear it with hipGetLastError)",
    };

    pub static ENABLE_PEER_UNSUPPORTED: Rule = Rule {
        id: "hipDeviceEnablePeerAccess.peer-unsupported",
        severity: Severity::Error,
        kind: Kind::Misuse,
        functions: &["hipDeviceEnablePeerAccess"],
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
        functions: &["hipDeviceDisablePeerAccess"],
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
        functions: &["hipDeviceDisablePeerAccess"],
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
        functions: HIP_MEMCPY_PEER_ALL,
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
        functions: HIP_MEMCPY_PEER_ALL,
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
        functions: HIP_MEMCPY_PEER_ALL,
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
        functions: &["hipMemcpyPeerAsync"],
        requirement: "stream must be a live stream (or 0, hipStreamLegacy, hipStreamPerThread).",
        source: hip("hipMemcpyPeerAsync"),
        quote: "stream[in] - Stream identifier",
        documented_code: None,
        fix: "do not use a stream after hipStreamDestroy",
    };
}

/// Rules that span both APIs.
pub mod peer {
    use super::*;

    pub static UNIDIRECTIONAL: Rule = Rule {
        id: "peer-access.unidirectional",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        functions: &[
            "cuMemcpyPeer",
            "cuMemcpyPeer_ptds",
            "cuMemcpyPeerAsync",
            "cuMemcpyPeerAsync_ptsz",
            "hipMemcpyPeer",
            "hipMemcpyPeerAsync",
        ],
        requirement: "Peer access is one-way: enabling it from A to B lets A reach B's memory, \
            not B reach A's. A peer copy issued in B between A and B, after access was enabled \
            only from A to B, does not have the access it needs.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: "Note that access granted by this call is unidirectional and that in order to \
            access memory from the current context in peerContext, a separate symmetric call to \
            cuCtxEnablePeerAccess() is required.",
        documented_code: None,
        fix: "enable access in both directions (once from each side), or issue the copy in the \
            context/device that was granted access",
    };
}

/// Where drivers answer other than their documentation. Reported as `info`, once per process.
pub mod divergence {
    use super::*;

    pub static ENABLE_SELF_UNSUPPORTED: Rule = Rule {
        id: "divergence.cuCtxEnablePeerAccess.self-unsupported",
        severity: Severity::Info,
        kind: Kind::Divergence,
        functions: &["cuCtxEnablePeerAccess"],
        requirement: "Enabling access from a context to itself is documented to return \
            CUDA_ERROR_INVALID_CONTEXT (201); driver R580 (580.159.04) returns \
            CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217). Code that tests for 201 misses it.",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "treat any error of this call as failure rather than testing for one code",
    };

    pub static ENABLE_DESTROYED_PEER_CONTEXT_IS_DESTROYED: Rule = Rule {
        id: "divergence.cuCtxEnablePeerAccess.destroyed-peer-context-is-destroyed",
        severity: Severity::Info,
        kind: Kind::Divergence,
        functions: &["cuCtxEnablePeerAccess"],
        requirement: "Enabling access to a destroyed context is documented to return \
            CUDA_ERROR_INVALID_CONTEXT (201) (\"peerContext is not a valid context\"); driver R580 \
            (580.159.04) returns CUDA_ERROR_CONTEXT_IS_DESTROYED (709).",
        source: cuda(CUDA_PEER, "cuCtxEnablePeerAccess"),
        quote: ENABLE_INVALID_CONTEXT,
        documented_code: Some(INVALID_CONTEXT),
        fix: "treat any error of this call as failure rather than testing for one code",
    };

    pub static MEMCPY_PEER_NULL_CONTEXT_ACCEPTED: Rule = Rule {
        id: "divergence.cuMemcpyPeer.null-context-accepted",
        severity: Severity::Info,
        kind: Kind::Divergence,
        functions: CU_MEMCPY_PEER_ALL,
        requirement: "A NULL context is not a context, and the documented errors include \
            CUDA_ERROR_INVALID_CONTEXT (201); driver R580 (580.159.04) copies by unified address \
            and returns CUDA_SUCCESS. Other drivers need not.",
        source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
        quote: MEMCPY_PEER_PARAMS,
        documented_code: Some(INVALID_CONTEXT),
        fix: "pass the real contexts so the call does not depend on this driver's leniency",
    };

    pub static HIP_DISABLE_UNSUPPORTED_PAIR_INVALID_DEVICE: Rule = Rule {
        id: "divergence.hipDeviceDisablePeerAccess.unsupported-pair-invalid-device",
        severity: Severity::Info,
        kind: Kind::Divergence,
        functions: &["hipDeviceDisablePeerAccess"],
        requirement: "Disabling access that was never enabled is documented to return \
            hipErrorPeerAccessNotEnabled (705); the CLR runtime returns hipErrorInvalidDevice \
            (101) when the device cannot access the peer at all (itself included).",
        source: hip("hipDeviceDisablePeerAccess"),
        quote: "If direct access to memory allocations on peer device has not been enabled yet \
            from the current device, it returns hipErrorPeerAccessNotEnabled.",
        documented_code: Some(PEER_ACCESS_NOT_ENABLED),
        fix: "treat any error of this call as failure rather than testing for one code",
    };

    pub static UNLISTED: Rule = Rule {
        id: "divergence.unlisted",
        severity: Severity::Info,
        kind: Kind::Divergence,
        functions: &[],
        requirement: "The driver returned a code other than the one its documentation gives for \
            this call, and the difference is not in sharecheck's list of known divergences. (The \
            documents also allow errors of earlier asynchronous launches to surface here.)",
        source: Source {
            document: "sharecheck",
            section: "known divergences",
            function: "divergence.*",
        },
        quote: "Note that this function may also return error codes from previous, asynchronous \
            launches.",
        documented_code: None,
        fix: "report the driver version and the call to the sharecheck maintainers so the list \
            can say whether this driver always answers so",
    };
}

/// Every rule, in catalogue order.
pub static RULES: &[&Rule] = &[
    &cuda::CAN_ACCESS_INVALID_DEVICE,
    &cuda::CAN_ACCESS_SAME_DEVICE,
    &cuda::ENABLE_FLAGS_NOT_ZERO,
    &cuda::ENABLE_NO_CURRENT_CONTEXT,
    &cuda::ENABLE_INVALID_PEER_CONTEXT,
    &cuda::ENABLE_PEER_IS_CURRENT,
    &cuda::ENABLE_PEER_UNSUPPORTED,
    &cuda::ENABLE_ALREADY_ENABLED,
    &cuda::ENABLE_NO_UNIFIED_ADDRESSING,
    &cuda::ENABLE_COMPUTE_CAPABILITY_MISMATCH,
    &cuda::ENABLE_TOO_MANY_PEERS,
    &cuda::DISABLE_NOT_ENABLED,
    &cuda::DISABLE_NO_CURRENT_CONTEXT,
    &cuda::DISABLE_INVALID_PEER_CONTEXT,
    &cuda::DISABLE_UNREGISTERS_ALLOCATIONS,
    &cuda::MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION,
    &cuda::MEMCPY_PEER_POINTER_NOT_IN_CONTEXT,
    &cuda::MEMCPY_PEER_NULL_CONTEXT,
    &cuda::MEMCPY_PEER_ASYNC_INVALID_STREAM,
    &hip::CAN_ACCESS_INVALID_DEVICE,
    &hip::CAN_ACCESS_SAME_DEVICE,
    &hip::ENABLE_INVALID_DEVICE,
    &hip::ENABLE_SELF,
    &hip::ENABLE_FLAGS_NOT_ZERO,
    &hip::ENABLE_ALREADY_ENABLED,
    &hip::ENABLE_PEER_UNSUPPORTED,
    &hip::DISABLE_INVALID_DEVICE,
    &hip::DISABLE_NOT_ENABLED,
    &hip::MEMCPY_PEER_INVALID_DEVICE,
    &hip::MEMCPY_PEER_RANGE_OUTSIDE_ALLOCATION,
    &hip::MEMCPY_PEER_POINTER_NOT_ON_DEVICE,
    &hip::MEMCPY_PEER_ASYNC_INVALID_STREAM,
    &peer::UNIDIRECTIONAL,
    &divergence::ENABLE_SELF_UNSUPPORTED,
    &divergence::ENABLE_DESTROYED_PEER_CONTEXT_IS_DESTROYED,
    &divergence::MEMCPY_PEER_NULL_CONTEXT_ACCEPTED,
    &divergence::HIP_DISABLE_UNSUPPORTED_PAIR_INVALID_DEVICE,
    &divergence::UNLISTED,
];

/// Looks a rule up by ID.
pub fn by_id(id: &str) -> Option<&'static Rule> {
    RULES.iter().copied().find(|r| r.id == id)
}

/// The catalogue as text (Markdown, so RULES.md is this output verbatim).
pub fn catalogue_text() -> String {
    let mut out = String::from(
        "# sharecheck rules\n\n\
         Every check sharecheck makes, one per documented requirement. IDs are stable: a rule's \
         meaning never changes once released. Mute one with `SHARECHECK_OPTIONS=mute=ID,ID`.\n\n\
         - severity: `error` (a documented requirement is broken, whether or not the driver \
         noticed), `warning` (undefined, or silently not what the program meant), `info` (a note)\n\
         - kind: `misuse` (the program's fault) or `divergence` (the driver answered other than \
         its documentation says; reported once per process)\n\
         - strict code: what `mode=strict` returns instead of calling the driver\n\n\
         This file is the output of `sharecheck rules`; a test keeps them equal.\n",
    );
    for rule in RULES {
        out.push_str(&format!(
            "\n## {}\n\n{} · {} · {}\n\n{}\n\nDocumented ({}):\n> {}\n\n",
            rule.id,
            rule.severity.as_str(),
            rule.kind.as_str(),
            if rule.functions.is_empty() {
                "any function".to_string()
            } else {
                rule.functions.join(", ")
            },
            rule.requirement,
            rule.source.cite(),
            rule.quote,
        ));
        if let Some(code) = rule.documented_code {
            out.push_str(&format!("Strict code: {code}\n\n"));
        }
        out.push_str(&format!("Fix: {}\n", rule.fix));
    }
    out
}

/// The catalogue as one JSON array.
pub fn catalogue_json() -> String {
    let mut buf = Vec::new();
    let mut w = JsonOut::new(&mut buf);
    w.begin_array();
    for rule in RULES {
        rule.encode(&mut w);
    }
    w.end_array();
    buf.push(b'\n');
    String::from_utf8(buf).expect("JSON writer emits UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::lookup_symbol;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for rule in RULES {
            assert!(seen.insert(rule.id), "duplicate rule id {}", rule.id);
            assert!(
                rule.id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{}",
                rule.id
            );
            assert_eq!(
                rule.kind == Kind::Divergence,
                rule.id.starts_with("divergence."),
                "{}",
                rule.id
            );
            assert!(!rule.quote.is_empty() && !rule.fix.is_empty() && !rule.requirement.is_empty());
        }
    }

    #[test]
    fn every_function_named_is_interposed_and_ids_name_their_function() {
        for rule in RULES {
            for f in rule.functions {
                assert!(lookup_symbol(f.as_bytes()).is_some(), "{}: {f}", rule.id);
            }
            let head = rule.id.trim_start_matches("divergence.").split('.').next();
            let head = head.unwrap_or_default();
            if head.starts_with("cu") || head.starts_with("hip") {
                assert!(
                    rule.functions.iter().any(|f| f.starts_with(head)),
                    "{} does not apply to {head}",
                    rule.id
                );
            }
        }
    }

    #[test]
    fn divergences_are_info_and_by_id_finds_every_rule() {
        for rule in RULES {
            if rule.kind == Kind::Divergence {
                assert_eq!(rule.severity, Severity::Info, "{}", rule.id);
            }
            assert!(std::ptr::eq(by_id(rule.id).unwrap(), *rule));
        }
        assert!(by_id("no.such-rule").is_none());
    }

    #[test]
    fn catalogue_lists_every_rule_in_both_formats() {
        let text = catalogue_text();
        let json = catalogue_json();
        for rule in RULES {
            assert!(text.contains(&format!("\n## {}\n", rule.id)), "{}", rule.id);
            assert!(
                json.contains(&format!("\"rule\":\"{}\"", rule.id)),
                "{}",
                rule.id
            );
        }
    }
}
