//! Where drivers answer other than their documentation: each known divergence is data (the rule
//! that reports it, the misuse rule whose documented code the driver does not return, the driver
//! and what it returns instead). Reported as `info`, once per process.

use super::attach;
use super::ipc;
use super::peer::{self, CUDA_MEMORY, CUDA_PEER, ENABLE_INVALID_CONTEXT, MEMCPY_PEER_PARAMS};
use super::{cuda, hip, Family, Kind, KnownDivergence, Rule, Severity, Source};
use crate::codes::*;
pub static ENABLE_SELF_UNSUPPORTED: Rule = Rule {
    id: "divergence.cuCtxEnablePeerAccess.self-unsupported",
    severity: Severity::Info,
    kind: Kind::Divergence,
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
    requirement: "A NULL context is not a context, and the documented errors include \
        CUDA_ERROR_INVALID_CONTEXT (201); driver R580 (580.159.04) copies by unified address \
        and returns CUDA_SUCCESS. Other drivers need not.",
    source: cuda(CUDA_MEMORY, "cuMemcpyPeer"),
    quote: MEMCPY_PEER_PARAMS,
    documented_code: Some(INVALID_CONTEXT),
    fix: "pass the real contexts so the call does not depend on this driver's leniency",
};

pub static IPC_GET_INTERIOR_POINTER_ACCEPTED: Rule = Rule {
    id: "divergence.cuIpcGetMemHandle.interior-pointer-accepted",
    severity: Severity::Info,
    kind: Kind::Divergence,
    requirement: "A pointer inside an allocation is not the base the documentation asks for, \
        and the documented errors include CUDA_ERROR_INVALID_VALUE (1); driver R580 \
        (580.159.04) returns CUDA_SUCCESS and the handle of the whole allocation, byte for byte \
        the base's: the importer maps the allocation from its start, not the pointer that was \
        exported.",
    source: cuda(CUDA_MEMORY, "cuIpcGetMemHandle"),
    quote: ipc::CUDA_GET_BASE,
    documented_code: Some(INVALID_VALUE),
    fix: "export the base and send the offset beside the handle",
};

pub static ATTACH_SINGLE_ON_LEGACY_STREAM_ACCEPTED: Rule = Rule {
    id: "divergence.cuStreamAttachMemAsync.single-on-legacy-stream-accepted",
    severity: Severity::Info,
    kind: Kind::Divergence,
    requirement: "CU_STREAM_LEGACY is the NULL stream, on which attaching singly is documented \
        to return an error (R580 answers 1 for stream 0); driver R580 (580.159.04) returns \
        CUDA_SUCCESS for CU_STREAM_LEGACY: the program is told nothing, and the memory is \
        associated with no specific stream.",
    source: cuda("Stream Management", "cuStreamAttachMemAsync"),
    quote: attach::CUDA_SINGLE_NULL,
    documented_code: Some(INVALID_VALUE),
    fix: "attach singly to a stream the program created",
};

pub static HIP_DISABLE_UNSUPPORTED_PAIR_INVALID_DEVICE: Rule = Rule {
    id: "divergence.hipDeviceDisablePeerAccess.unsupported-pair-invalid-device",
    severity: Severity::Info,
    kind: Kind::Divergence,
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
    requirement: "The driver returned a code its documentation does not give for this call \
        (not the code a misuse rule expected, or not among the codes the function's header \
        comment names), and the difference is not in sharecheck's list of known divergences. \
        (Where the documentation allows errors of earlier asynchronous launches to surface, \
        those codes count as named.)",
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

/// The divergences sharecheck knows, by the misuse they answer for.
pub static KNOWN: &[KnownDivergence] = &[
    KnownDivergence {
        rule: &ENABLE_SELF_UNSUPPORTED,
        misuse: &peer::cuda::ENABLE_PEER_IS_CURRENT,
        driver: "R580 (580.159.04)",
        returns: PEER_ACCESS_UNSUPPORTED,
    },
    KnownDivergence {
        rule: &ENABLE_DESTROYED_PEER_CONTEXT_IS_DESTROYED,
        misuse: &peer::cuda::ENABLE_INVALID_PEER_CONTEXT,
        driver: "R580 (580.159.04)",
        returns: CONTEXT_IS_DESTROYED,
    },
    KnownDivergence {
        rule: &MEMCPY_PEER_NULL_CONTEXT_ACCEPTED,
        misuse: &peer::cuda::MEMCPY_PEER_NULL_CONTEXT,
        driver: "R580 (580.159.04)",
        returns: SUCCESS,
    },
    KnownDivergence {
        rule: &IPC_GET_INTERIOR_POINTER_ACCEPTED,
        misuse: &ipc::cuda::GET_NOT_ALLOCATION_BASE,
        driver: "R580 (580.159.04)",
        returns: SUCCESS,
    },
    KnownDivergence {
        rule: &ATTACH_SINGLE_ON_LEGACY_STREAM_ACCEPTED,
        misuse: &attach::cuda::SINGLE_ON_NULL_STREAM,
        driver: "R580 (580.159.04)",
        returns: SUCCESS,
    },
    KnownDivergence {
        rule: &HIP_DISABLE_UNSUPPORTED_PAIR_INVALID_DEVICE,
        misuse: &peer::hip::DISABLE_NOT_ENABLED,
        driver: "CLR (HIP 5.2 to 6.x)",
        returns: INVALID_DEVICE,
    },
];

pub static FAMILY: Family = Family {
    name: "divergences",
    title: "Known driver divergences",
    checks: &[],
    reported: &[],
    engine: &[&UNLISTED],
    divergences: KNOWN,
};
