//! The stream-attach family: `cuStreamAttachMemAsync` in both exports (`_ptsz`: stream 0 is the
//! calling thread's per-thread stream there) and `hipStreamAttachMemAsync`. Contract: CUDA Driver
//! API "Stream Management" (`shared/contracts/cuda-stream-attach-mem-async.txt`); HIP's carries
//! the same sentences. What R580 answers is in LD_PRELOAD.md, "cuStreamAttachMemAsync on R580,
//! measured".
//!
//! The rules one call decides from its arguments and the driver's facts (the stream, the flags,
//! the kind and extent of the memory); what a destroyed stream does to its attachments; and, on
//! devices without concurrent managed access, stream work (asynchronous copies and memsets, which
//! the shim observes) on memory an attach promised to another stream or to the host.

use super::{cuda, CheckInfo, Family, Kind, Rule, Severity};
use crate::codes::*;

const CUDA_STREAM: &str = "Stream Management";

pub(crate) const CUDA_SINGLE_NULL: &str = "It is illegal to attach singly to the NULL stream, \
    because the NULL stream is a virtual global stream and not a specific stream. An error will \
    be returned in this case.";
const CUDA_FLAGS: &str = "The stream association is specified using flags which must be one of \
    ::CUmemAttach_flags.";
const CUDA_LENGTH: &str = "For managed allocations, length must be either zero or the entire \
    allocation's size. Both indicate that the entire allocation's stream association is being \
    changed. Currently, it is not possible to change stream association for a portion of a \
    managed allocation.";
const CUDA_PAGEABLE_ACCESS: &str = "a valid host-accessible region of system-allocated pageable \
    memory. This type of memory may only be specified if the device associated with the stream \
    reports a non-zero value for the device attribute \
    ::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS.";
const CUDA_SINGLE_GUARANTEE: &str = "If the ::CU_MEM_ATTACH_SINGLE flag is specified and hStream \
    is associated with a device that has a zero value for the device attribute \
    ::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, the program makes a guarantee that it will \
    only access the memory on the device from hStream.";
const CUDA_HOST_GUARANTEE: &str = "If the ::CU_MEM_ATTACH_HOST flag is specified, the program \
    makes a guarantee that it won't access the memory on the device from any stream on a device \
    that has a zero value for the device attribute ::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS.";
const CUDA_ORDER: &str = "It is a program's responsibility to order calls to \
    ::cuStreamAttachMemAsync via events, synchronization or other means to ensure legal access to \
    memory at all times.";
const CUDA_MEMORY: &str = "dptr must point to one of the following types of memories: managed \
    memory declared using the __managed__ keyword or allocated with ::cuMemAllocManaged; a valid \
    host-accessible region of system-allocated pageable memory.";

/// HIP's section of `hipStreamAttachMemAsync` (`hip_runtime_api.h`, "Managed Memory").
const fn hip_managed(function: &'static str) -> super::Source {
    super::Source {
        document: "HIP Runtime API",
        section: "Managed Memory",
        function,
    }
}

/// Rules of the CUDA driver API.
pub mod cuda {
    use super::*;

    pub static SINGLE_ON_NULL_STREAM: Rule = Rule {
        id: "cuStreamAttachMemAsync.single-on-null-stream",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "CU_MEM_ATTACH_SINGLE needs a specific stream: not the NULL stream, which is \
            0 through the legacy export and CU_STREAM_LEGACY through either (0 through the _ptsz \
            export, and CU_STREAM_PER_THREAD, are the thread's own stream: allowed).",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_SINGLE_NULL,
        documented_code: Some(INVALID_VALUE),
        fix: "attach singly to a stream the program created (or to the per-thread stream), or \
            attach with CU_MEM_ATTACH_GLOBAL",
    };

    pub static ATTACHES_NOT_ORDERED: Rule = Rule {
        id: "cuStreamAttachMemAsync.attaches-not-ordered",
        severity: Severity::Warning,
        kind: Kind::Misuse,
        requirement: "Two attaches of one allocation to different streams are ordered by the \
            program. Decided only where nothing can order them: the second goes to a \
            non-blocking stream with no work pending (no event wait either), while the first \
            attach's stream still has work pending, so the first attach may take effect after \
            the second and undo it.",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_ORDER,
        documented_code: None,
        fix: "record an event on the first stream after its work and make the second stream wait \
            for it (cuStreamWaitEvent), or synchronize the first stream, before attaching again",
    };

    pub static SINGLE_ACCESSED_FROM_ANOTHER_STREAM: Rule = Rule {
        id: "attach.single-memory-used-by-another-stream",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Managed memory attached CU_MEM_ATTACH_SINGLE to a stream of a device \
            without concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 0) \
            is used on the device by that stream alone: a copy or memset on another stream \
            breaks the program's guarantee (undefined results; nothing checks it).",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_SINGLE_GUARANTEE,
        documented_code: None,
        fix: "enqueue the work on the stream the memory is attached to, or attach it to this \
            stream (or GLOBAL) first, ordered after the other stream's work",
    };

    pub static HOST_ACCESSED_ON_DEVICE: Rule = Rule {
        id: "attach.host-memory-used-on-device",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "Managed memory attached CU_MEM_ATTACH_HOST is not used on a device without \
            concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 0), from any \
            stream: a copy or memset on such a device breaks the program's guarantee.",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_HOST_GUARANTEE,
        documented_code: None,
        fix: "attach the memory to the stream (SINGLE) or GLOBAL before the device uses it, \
            ordered before the work",
    };

    pub static FLAGS_NOT_ONE: Rule = Rule {
        id: "cuStreamAttachMemAsync.flags-not-one-attach-flag",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "flags is exactly one of CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST and \
            CU_MEM_ATTACH_SINGLE: not a combination, not 0 (R580 answers 1 to combinations and \
            unknown bits, and kills the process with SIGSEGV on 0).",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_FLAGS,
        documented_code: Some(INVALID_VALUE),
        fix: "pass exactly one of CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST, CU_MEM_ATTACH_SINGLE",
    };

    pub static PARTIAL_LENGTH: Rule = Rule {
        id: "cuStreamAttachMemAsync.partial-length",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "For managed memory, length is 0 or the whole allocation's size: the \
            association of a part of an allocation cannot be changed (R580: 1).",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_LENGTH,
        documented_code: Some(INVALID_VALUE),
        fix: "pass 0 (or the allocation's size); to give parts of the data their own streams, \
            allocate them separately",
    };

    pub static NOT_ALLOCATION_START: Rule = Rule {
        id: "cuStreamAttachMemAsync.not-allocation-start",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "For managed memory, dptr is the allocation's start: an attach covers the \
            whole allocation, so a pointer inside it asks to change a portion, which cannot be \
            done (R580 answers 1 whatever the length).",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_LENGTH,
        documented_code: Some(INVALID_VALUE),
        fix: "pass the allocation's start (cuMemGetAddressRange gives it) with length 0",
    };

    pub static PAGEABLE_LENGTH_ZERO: Rule = Rule {
        id: "cuStreamAttachMemAsync.pageable-length-zero",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "For system-allocated pageable memory, length is not 0: the region is \
            named by dptr and length (R580: 1).",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: "For pageable host allocations, length must be non-zero.",
        documented_code: Some(INVALID_VALUE),
        fix: "pass the length of the region to attach",
    };

    pub static PAGEABLE_WITHOUT_ACCESS: Rule = Rule {
        id: "cuStreamAttachMemAsync.pageable-without-access",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "System-allocated pageable memory is attached only on a stream whose device \
            reports CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS (R580 on an H200 without it: 1). \
            Decided for memory the driver does not know that is mapped in the process.",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_PAGEABLE_ACCESS,
        documented_code: Some(INVALID_VALUE),
        fix: "allocate the data with cuMemAllocManaged on devices without pageable memory access",
    };

    pub static MEMORY_NOT_MANAGED: Rule = Rule {
        id: "cuStreamAttachMemAsync.memory-not-managed",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dptr is managed memory or system-allocated pageable memory: not device \
            memory (cuMemAlloc, pool, cuMemCreate) and not page-locked host memory (R580: 1). \
            Decided from the driver's pointer attributes.",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: CUDA_MEMORY,
        documented_code: Some(INVALID_VALUE),
        fix: "attach only managed memory (cuMemAllocManaged, __managed__); other memory has no \
            stream association to change",
    };
}

/// Rules of the CUDA driver API decided on other calls than the attach.
pub mod lifetime {
    use super::*;

    pub static STREAM_DESTROYED_WITH_ATTACHED_MEMORY: Rule = Rule {
        id: "cuStreamDestroy.attached-memory-reverts",
        severity: Severity::Info,
        kind: Kind::Misuse,
        requirement: "Memory attached singly to a stream that is destroyed loses that \
            association: once the stream's work completed, it reverts to its allocation's \
            default (as cuMemAllocManaged was given). Said where the shim saw the attach.",
        source: cuda(CUDA_STREAM, "cuStreamAttachMemAsync"),
        quote: "If hStream is destroyed while data is associated with it, the association is \
            removed and the association reverts to the default visibility of the allocation as \
            specified at ::cuMemAllocManaged.",
        documented_code: None,
        fix: "attach the memory to another stream (or GLOBAL) before destroying the stream, if \
            the program relies on its association",
    };
}

/// Rules of the HIP runtime API.
pub mod hip {
    use super::*;

    pub static FLAGS_NOT_ONE: Rule = Rule {
        id: "hipStreamAttachMemAsync.flags-not-one-attach-flag",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "flags is exactly one of hipMemAttachGlobal, hipMemAttachHost and \
            hipMemAttachSingle.",
        source: hip_managed("hipStreamAttachMemAsync"),
        quote: "flags - must be one of hipMemAttachGlobal, hipMemAttachHost or \
            hipMemAttachSingle",
        documented_code: Some(INVALID_VALUE),
        fix: "pass exactly one of hipMemAttachGlobal, hipMemAttachHost, hipMemAttachSingle",
    };

    pub static MEMORY_NOT_MANAGED: Rule = Rule {
        id: "hipStreamAttachMemAsync.memory-not-managed",
        severity: Severity::Error,
        kind: Kind::Misuse,
        requirement: "dev_ptr is managed memory or system-allocated host memory, not device \
            memory from hipMalloc (decided from hipPointerGetAttributes).",
        source: hip_managed("hipStreamAttachMemAsync"),
        quote: "dev_ptr - pointer to memory (must be a pointer to managed memory or to a valid \
            host-accessible region of system-allocated memory)",
        // The header names no code for it, and the CLR accepts device memory (and ignores it).
        documented_code: None,
        fix: "attach memory from hipMallocManaged (device memory has no stream association to \
            change)",
    };

    /// The CLR (libamdhip64, every version read: `hip_memory.cpp`) validates the arguments and
    /// returns hipSuccess without associating anything ("Unclear what should be done for this
    /// interface in AMD HMM, since it's generic SVM alloc"); HIP 5.x's header lists the call as
    /// a nop. A divergence of its own kind, said once per process on the first attach accepted.
    pub static ATTACH_IGNORED: Rule = Rule {
        id: "divergence.hipStreamAttachMemAsync.accepted-and-ignored",
        severity: Severity::Info,
        kind: Kind::Divergence,
        requirement: "An attach changes the memory's stream association; HIP's AMD runtime (the \
            CLR, libamdhip64) checks the arguments and returns hipSuccess without changing \
            anything: SINGLE and HOST promise nothing there, and every stream and the host keep \
            the access they had.",
        source: hip_managed("hipStreamAttachMemAsync"),
        // ROCm 6's reference (HIP 5.x's header: "hipStreamAttachMemAsync is a nop").
        quote: "This API is under development. Currently it is a no-operation (NOP) function on \
            AMD GPUs and returns hipSuccess.",
        documented_code: None,
        fix: "on AMD GPUs order access to managed memory with stream synchronization or events; \
            do not rely on an attach to keep other streams or the host away",
    };
}

/// The family's checks, by the names the table uses.
pub mod checks {
    use super::*;

    pub static ATTACH_CUDA: CheckInfo = CheckInfo {
        name: "attach.cuda",
        rules: &[
            &cuda::SINGLE_ON_NULL_STREAM,
            &cuda::FLAGS_NOT_ONE,
            &cuda::MEMORY_NOT_MANAGED,
            &cuda::NOT_ALLOCATION_START,
            &cuda::PARTIAL_LENGTH,
            &cuda::PAGEABLE_LENGTH_ZERO,
            &cuda::PAGEABLE_WITHOUT_ACCESS,
            &cuda::ATTACHES_NOT_ORDERED,
        ],
    };
    /// A stream's creation flags (whether it is non-blocking) decide what can order work on it.
    pub static STREAM_CREATED: CheckInfo = CheckInfo {
        name: "attach.stream-created",
        rules: &[],
    };
    /// Stream work on memory (asynchronous copies and memsets): what attaches promised.
    pub static ACCESS_CUDA: CheckInfo = CheckInfo {
        name: "attach.access.cuda",
        rules: &[
            &cuda::SINGLE_ACCESSED_FROM_ANOTHER_STREAM,
            &cuda::HOST_ACCESSED_ON_DEVICE,
        ],
    };
    pub static STREAM_DESTROYED: CheckInfo = CheckInfo {
        name: "attach.stream-destroyed",
        rules: &[&lifetime::STREAM_DESTROYED_WITH_ATTACHED_MEMORY],
    };
    /// A free ends what the family tracks of the memory.
    pub static MEMORY_FREED: CheckInfo = CheckInfo {
        name: "attach.memory-freed",
        rules: &[],
    };
    pub static ATTACH_HIP: CheckInfo = CheckInfo {
        name: "attach.hip",
        rules: &[
            &hip::FLAGS_NOT_ONE,
            &hip::MEMORY_NOT_MANAGED,
            &hip::ATTACH_IGNORED,
        ],
    };
}

/// The family: every rule it defines, in catalogue order.
pub static FAMILY: Family = Family {
    name: "attach",
    title: "Stream attach of managed memory",
    checks: &[
        &checks::ATTACH_CUDA,
        &checks::STREAM_CREATED,
        &checks::ACCESS_CUDA,
        &checks::STREAM_DESTROYED,
        &checks::MEMORY_FREED,
        &checks::ATTACH_HIP,
    ],
    reported: &[],
    engine: &[],
    divergences: &[],
};
