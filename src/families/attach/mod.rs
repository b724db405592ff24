//! The stream-attach family: checks for `cuStreamAttachMemAsync` (both exports) and
//! `hipStreamAttachMemAsync`. Catalogue: `sharecheck_core::rules::attach`.
//!
//! This first part decides from one call's arguments and the driver's facts: `SINGLE` on the NULL
//! stream (whose spelling depends on the export), flags that are not exactly one attach flag, and
//! for CUDA the memory: not managed (device or page-locked memory), a pointer inside a managed
//! allocation, a length that is neither 0 nor the allocation's size. Nothing is tracked yet.

#[cfg(test)]
mod tests;

use crate::engine::facts::MemoryKind;
use crate::engine::{hex, Check, Cx};
use sharecheck_core::functions::args;
use sharecheck_core::rules::attach::{cuda, hip};
use std::ffi::c_int;

pub struct AttachCuda;
pub struct AttachHip;

/// The family's checks, by the names the table uses.
pub mod checks {
    pub const ATTACH_CUDA: super::AttachCuda = super::AttachCuda;
    pub const ATTACH_HIP: super::AttachHip = super::AttachHip;
}

const ATTACH_GLOBAL: u32 = 0x1;
const ATTACH_HOST: u32 = 0x2;
const ATTACH_SINGLE: u32 = 0x4;
/// `CU_STREAM_LEGACY`.
const STREAM_LEGACY: u64 = 0x1;

/// Flags that are not exactly one attach flag.
fn flags_not_one(cx: &mut Cx, rule: &'static sharecheck_core::rules::Rule, flags: u32) {
    if ![ATTACH_GLOBAL, ATTACH_HOST, ATTACH_SINGLE].contains(&flags) {
        cx.flag(rule, || {
            format!(
                "flags is {flags:#x}; it must be exactly one of GLOBAL (0x1), HOST (0x2) and \
                 SINGLE (0x4)"
            )
        });
    }
}

/// The CUDA checks of one call; `ptsz`: through the `_ptsz` export, where stream 0 is the
/// calling thread's per-thread stream.
fn attach_cuda(cx: &mut Cx, stream: u64, dptr: u64, length: u64, flags: u32, ptsz: bool) {
    let null_stream = match stream {
        0 if !ptsz => Some("stream 0 through the legacy export is the NULL stream"),
        STREAM_LEGACY => Some("CU_STREAM_LEGACY is the NULL stream"),
        _ => None,
    };
    if let (ATTACH_SINGLE, Some(why)) = (flags, null_stream) {
        cx.flag(&cuda::SINGLE_ON_NULL_STREAM, || {
            format!("CU_MEM_ATTACH_SINGLE on the NULL stream: {why}, not a specific stream")
        });
    }
    flags_not_one(cx, &cuda::FLAGS_NOT_ONE, flags);
    memory(cx, dptr, length);
}

/// The memory of a CUDA attach: managed, at its allocation's start, with length 0 or its size
/// (decided from the driver's pointer attributes and the allocation's range, asked afresh).
/// Memory the driver does not know may be system-allocated pageable memory: nothing is decided.
fn memory(cx: &mut Cx, dptr: u64, length: u64) {
    let what = match cx.facts.memory_kind(dptr) {
        None => return,
        Some(MemoryKind::Managed) => None,
        Some(MemoryKind::Device) => Some("device memory (cuMemAlloc)"),
        Some(MemoryKind::Pool) => Some("stream-ordered pool memory (cuMemAllocAsync)"),
        Some(MemoryKind::Host) => Some("page-locked host memory"),
        Some(MemoryKind::Other) => Some("device memory (cuMemCreate, or an IPC mapping)"),
    };
    if let Some(what) = what {
        cx.flag(&cuda::MEMORY_NOT_MANAGED, || {
            format!(
                "dptr {} is {what}, not managed or pageable memory: it has no stream \
                 association to change",
                hex(dptr)
            )
        });
        return;
    }
    let Some((base, size)) = cx.facts.allocation_range(dptr, true) else {
        return;
    };
    if dptr != base {
        cx.flag(&cuda::NOT_ALLOCATION_START, || {
            format!(
                "dptr {} is {} byte(s) into the managed allocation at {} ({size} bytes): an \
                 attach covers a whole allocation, from its start",
                hex(dptr),
                dptr - base,
                hex(base)
            )
        });
    } else if length != 0 && length != size {
        cx.flag(&cuda::PARTIAL_LENGTH, || {
            format!(
                "length is {length}; the managed allocation at {} is {size} bytes: pass 0 or \
                 {size}",
                hex(base)
            )
        });
    }
}

macro_rules! attach_cuda_check {
    ($($function:ident: $ptsz:literal),*) => {$(
        impl Check<args::$function> for AttachCuda {
            type Plan = ();
            fn before(&self, a: &args::$function, cx: &mut Cx) {
                attach_cuda(
                    cx,
                    a.hStream.addr(),
                    a.dptr.0,
                    a.length.0 as u64,
                    a.flags.0,
                    $ptsz,
                );
            }
            fn after(&self, _: &args::$function, _: (), _: c_int, _: &mut Cx) {}
        }
    )*};
}

attach_cuda_check!(cuStreamAttachMemAsync: false, cuStreamAttachMemAsync_ptsz: true);

impl Check<args::hipStreamAttachMemAsync> for AttachHip {
    type Plan = ();
    fn before(&self, a: &args::hipStreamAttachMemAsync, cx: &mut Cx) {
        flags_not_one(cx, &hip::FLAGS_NOT_ONE, a.flags.0);
    }
    fn after(&self, _: &args::hipStreamAttachMemAsync, _: (), _: c_int, _: &mut Cx) {}
}
