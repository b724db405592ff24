//! What checks may ask about the driver: one interface ([`Facts`]), answered by the real driver
//! ([`super::driver_facts::DriverFacts`]) in the shim and by a table ([`super::fake::FakeFacts`])
//! in unit tests.
//!
//! Every answer is `None` when it cannot be had (driver not initialised, function missing in this
//! driver version, ...): a check then says nothing. Queries have no effect the program could see.

use sharecheck_core::ffi::{CUcontext, CUlogicalEndpointProp, CUstream};
use std::ffi::{c_int, c_void};

/// CUDA device attributes the checks read (cuda.h).
pub const ATTRIBUTE_UNIFIED_ADDRESSING: c_int = 41;
pub const ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
/// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS`.
pub const ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: c_int = 88;
/// `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`.
pub const ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: c_int = 89;

/// What kind of memory a pointer is: only [`MemoryKind::Device`] memory can be exported with
/// `cuIpcGetMemHandle` (the driver's `CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// `cuMemAlloc` (or `cuMemAllocPitch`) memory: exportable.
    Device,
    /// `cuMemAllocManaged` memory.
    Managed,
    /// Stream-ordered memory of a memory pool (`cuMemAllocAsync`, `cuMemAllocFromPoolAsync`).
    Pool,
    /// Page-locked host memory (`cuMemAllocHost`, `cuMemHostAlloc`, `cuMemHostRegister`).
    Host,
    /// Device memory the driver says legacy IPC cannot export: `cuMemCreate` memory mapped with
    /// `cuMemMap`, or a mapping opened from another process's handle.
    Other,
}

/// Which granularity [`Facts::granularity`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GranularityOf {
    /// `cuMemGetAllocationGranularity` of a `CUmemAllocationProp`.
    Allocation,
    /// `cuMulticastGetGranularity` of a `CUmulticastObjectProp`.
    Multicast,
}

/// Driver facts. CUDA queries answer directly; HIP queries go through a [`HipSession`], which
/// keeps the thread's last error as the program left it.
pub trait Facts {
    // CUDA driver.
    /// The current context of this thread: `Some(None)` when none is current.
    fn current_context(&self) -> Option<Option<CUcontext>>;
    /// The device of the current context.
    fn current_device(&self) -> Option<i32>;
    /// The device of a non-NULL context, or the driver's error code for it (a code for which
    /// [`is_unknown_context`] holds means the driver does not know the context). May be cached:
    /// a check confirms with `fresh: true` before a finding rests on it.
    fn context_device(&self, ctx: CUcontext, fresh: bool) -> Option<Result<i32, c_int>>;
    fn device_count(&self) -> Option<i32>;
    fn attribute(&self, dev: i32, attribute: c_int) -> Option<i32>;
    fn can_access_peer(&self, dev: i32, peer: i32) -> Option<bool>;
    /// `(base, size)` of the allocation (or mapping) containing `ptr`. May be cached (until
    /// memory is freed): confirm with `fresh: true` before a finding rests on it.
    fn allocation_range(&self, ptr: u64, fresh: bool) -> Option<(u64, u64)>;
    /// What a cache holds of `ptr`'s allocation range, without asking the driver.
    fn cached_range(&self, ptr: u64) -> Option<(u64, u64)>;
    /// The device whose memory `ptr` is, for plain device memory only (managed and host memory
    /// are reachable from every device). May be cached, as `allocation_range`.
    fn device_memory_owner(&self, ptr: u64, fresh: bool) -> Option<i32>;
    /// What kind of memory `ptr` is, as legacy IPC sees it; `None` when the driver cannot say or
    /// does not know the pointer (never cached). May be cached, as `allocation_range`.
    fn memory_kind(&self, ptr: u64, fresh: bool) -> Option<MemoryKind>;
    /// [`Facts::memory_kind`] from the cache when `fine` accepts it, asked afresh otherwise
    /// (before a finding rests on it).
    fn memory_kind_confirmed(
        &self,
        ptr: u64,
        fine: fn(Option<MemoryKind>) -> bool,
    ) -> Option<MemoryKind> {
        let cached = self.memory_kind(ptr, false);
        if fine(cached) {
            cached
        } else {
            self.memory_kind(ptr, true)
        }
    }
    /// The context `ptr`'s memory was allocated in (`CU_POINTER_ATTRIBUTE_CONTEXT`). Cached until
    /// memory is freed: an allocation keeps its context for its life.
    fn allocation_context(&self, ptr: u64) -> Option<u64>;
    /// A device's UUID (`cuDeviceGetUuid`), which names it alike in every process.
    fn device_uuid(&self, dev: i32) -> Option<[u8; 16]>;
    /// The context of a stream that is not a special handle, or the driver's error code.
    fn stream_context(&self, stream: CUstream, fresh: bool) -> Option<Result<CUcontext, c_int>>;
    /// Whether work on a stream (0: the current context's legacy stream) is still in flight.
    fn stream_busy(&self, stream: u64) -> Option<bool>;
    fn primary_context_active(&self, dev: i32) -> Option<bool>;
    /// `(bindAlignment, maxSize)` of the driver's own `cuLogicalEndpointGetLimits` for `prop`;
    /// `None` where the driver lacks it or refuses the properties.
    fn endpoint_limits(&self, prop: &CUlogicalEndpointProp) -> Option<(u64, u64)>;
    /// The driver's own minimum granularity (`cuMemGetAllocationGranularity` or
    /// `cuMulticastGetGranularity`, option MINIMUM, as `of` says) for a copy of a program's
    /// properties (`CUmemAllocationProp` or `CUmulticastObjectProp`: 32 bytes each); `None` where
    /// the driver refuses the properties.
    fn granularity(&self, of: GranularityOf, prop: &[u64; 4]) -> Option<u64>;
    /// What the host has for FABRIC handles ([`Imex`]): read from the filesystem, as the driver
    /// does, only when a FABRIC create was refused.
    fn imex(&self) -> Imex;

    // HIP runtime: raw answers, `None` when the function is missing, else the hipError_t code and
    // the value. Call through [`HipSession`].
    /// Whether the thread's last error is hipSuccess (`hipPeekAtLastError`, which changes nothing)
    /// and the runtime can clear it again (`hipGetLastError` exists).
    fn hip_last_error_clear(&self) -> bool;
    /// `hipGetLastError`: clears the thread's last error.
    fn hip_clear_last_error(&self);
    fn hip_current_device(&self) -> Option<(c_int, i32)>;
    fn hip_device_count(&self) -> Option<(c_int, i32)>;
    /// `hipRuntimeGetVersion` (HIP_VERSION: major * 10^7 + minor * 10^5 + patch).
    fn hip_runtime_version(&self) -> Option<(c_int, i32)>;
    fn hip_can_access_peer(&self, dev: i32, peer: i32) -> Option<(c_int, bool)>;
    fn hip_device_uuid(&self, dev: i32) -> Option<(c_int, [u8; 16])>;
    fn hip_allocation_range(&self, ptr: u64) -> Option<(c_int, (u64, u64))>;
    fn hip_device_memory_owner(&self, ptr: u64) -> Option<(c_int, Option<i32>)>;
    fn hip_stream_device(&self, stream: *mut c_void) -> Option<(c_int, i32)>;

    /// Something ended: drop what a cache holds about it.
    fn forget(&self, _gone: super::state::Lifetime) {}

    /// Memory was freed, released or unmapped: [`Facts::forget`] of
    /// [`super::state::Lifetime::MemoryFreed`], on a free's short path, and the checks'
    /// generation moved on ([`super::moved_on`]). Returns the end's number, unique in the process
    /// (the one locked add that moved the generation returned it).
    fn memory_freed(&self) -> u64 {
        self.forget(super::state::Lifetime::MemoryFreed);
        super::moved_on()
    }

    /// Whether the program destroyed this context (`cuCtxDestroy`) and no call since showed it
    /// alive. Such a context is never asked about: on two H200s with R580, asking
    /// `cuCtxGetDevice_v2` for a destroyed context's device answered from freed memory once and
    /// crashed the process (SIGSEGV) another time.
    fn context_destroyed(&self, _ctx: CUcontext) -> bool {
        false
    }

    /// The driver accepted `ctx` as a live context (a handle reused after a destroy).
    fn context_alive(&self, _ctx: CUcontext) {}
}

/// Whether a context-query error says the context is not a live context.
/// The host's IMEX devices, as `cuMemCreate`'s document asks for FABRIC handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Imex {
    /// `nvidia-caps-imex-channels` is listed in /proc/devices.
    pub listed: bool,
    /// A channel file in /dev/nvidia-caps-imex-channels the process can open for reading.
    pub channel: bool,
}

impl Imex {
    /// What the host lacks for FABRIC sharing, in words; `None` when it has both.
    pub fn missing(&self) -> Option<&'static str> {
        match (self.listed, self.channel) {
            (true, true) => None,
            (true, false) => Some(
                "the driver lists nvidia-caps-imex-channels in /proc/devices, but no channel \
                 file in /dev/nvidia-caps-imex-channels can be opened by this user",
            ),
            (false, _) => Some(
                "/proc/devices does not list nvidia-caps-imex-channels: the driver created no \
                 IMEX channel device",
            ),
        }
    }
}

/// The host's [`Imex`], read without touching the caller's errno.
pub fn host_imex() -> Imex {
    crate::guard::keeping_errno(read_host_imex)
}

fn read_host_imex() -> Imex {
    let listed = std::fs::read_to_string("/proc/devices").is_ok_and(|d| {
        d.lines()
            .any(|l| l.split_whitespace().nth(1) == Some("nvidia-caps-imex-channels"))
    });
    let channel = std::fs::read_dir("/dev/nvidia-caps-imex-channels").is_ok_and(|dir| {
        dir.flatten().any(|e| {
            let Ok(path) = std::ffi::CString::new(e.path().into_os_string().into_encoded_bytes())
            else {
                return false;
            };
            // SAFETY: a NUL-terminated path; access only asks the kernel.
            unsafe { libc::access(path.as_ptr(), libc::R_OK) == 0 }
        })
    });
    Imex { listed, channel }
}

pub fn is_unknown_context(code: c_int) -> bool {
    use sharecheck_core::codes::{CONTEXT_IS_DESTROYED, INVALID_CONTEXT, INVALID_HANDLE};
    matches!(
        code,
        INVALID_CONTEXT | INVALID_HANDLE | CONTEXT_IS_DESTROYED
    )
}

/// HIP queries for one call. HIP keeps a per-thread "last error" that failing calls set and
/// `hipGetLastError` returns; the shim must not change it. So queries run only while it is
/// hipSuccess, and if one of them failed, the last error is cleared again when the session ends.
/// Runtimes where every call sets it (ROCm 5) are covered too: the queries run before the
/// program's own call, which sets it again.
pub struct HipSession<'a> {
    facts: &'a dyn Facts,
    usable: bool,
    failed: bool,
}

impl<'a> HipSession<'a> {
    pub fn begin(facts: &'a dyn Facts) -> HipSession<'a> {
        HipSession {
            facts,
            usable: facts.hip_last_error_clear(),
            failed: false,
        }
    }

    fn run<T>(&mut self, query: impl FnOnce(&dyn Facts) -> Option<(c_int, T)>) -> Option<T> {
        if !self.usable {
            return None;
        }
        let (code, value) = query(self.facts)?;
        if code != sharecheck_core::codes::SUCCESS {
            self.failed = true;
            return None;
        }
        Some(value)
    }

    pub fn current_device(&mut self) -> Option<i32> {
        self.run(|f| f.hip_current_device())
    }
    pub fn device_count(&mut self) -> Option<i32> {
        self.run(|f| f.hip_device_count())
    }
    pub fn runtime_version(&mut self) -> Option<i32> {
        self.run(|f| f.hip_runtime_version())
    }
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Option<bool> {
        self.run(|f| f.hip_can_access_peer(dev, peer))
    }
    pub fn device_uuid(&mut self, dev: i32) -> Option<[u8; 16]> {
        self.run(|f| f.hip_device_uuid(dev))
    }
    pub fn allocation_range(&mut self, ptr: u64) -> Option<(u64, u64)> {
        self.run(|f| f.hip_allocation_range(ptr))
    }
    pub fn device_memory_owner(&mut self, ptr: u64) -> Option<i32> {
        self.run(|f| f.hip_device_memory_owner(ptr)).flatten()
    }
    /// Whether the runtime knows `ptr` as plain device memory (`Some(false)`: managed or host
    /// memory; `None`: it cannot say, or does not know the pointer).
    pub fn is_plain_device_memory(&mut self, ptr: u64) -> Option<bool> {
        self.run(|f| f.hip_device_memory_owner(ptr))
            .map(|owner| owner.is_some())
    }
    pub fn stream_device(&mut self, stream: *mut c_void) -> Option<i32> {
        self.run(|f| f.hip_stream_device(stream))
    }
}

impl Drop for HipSession<'_> {
    fn drop(&mut self) {
        if self.failed {
            self.facts.hip_clear_last_error();
        }
    }
}

/// Half-open byte ranges of `[ptr, ptr + len)` that no allocation covers, found with `range_of`
/// (the driver's address-range query): `(base, end of ptr's allocation, bytes uncovered)`. `None`
/// when `ptr` itself is not in device memory known to the driver (nothing to decide) or the walk
/// is too long to be cheap. Adjacent allocations (VMM mappings side by side) count as covered.
pub fn uncovered_tail(
    ptr: u64,
    len: u64,
    mut range_of: impl FnMut(u64) -> Option<(u64, u64)>,
) -> Option<(u64, u64, u64)> {
    const MAX_STEPS: usize = 64;
    let end = ptr.checked_add(len)?;
    let (base, size) = range_of(ptr)?;
    let mut covered = base.checked_add(size)?;
    let first_end = covered;
    for _ in 0..MAX_STEPS {
        if covered >= end {
            return None;
        }
        match range_of(covered) {
            Some((next_base, next_size)) if next_base == covered && next_size > 0 => {
                covered = next_base + next_size;
            }
            _ => return Some((base, first_end, end - covered)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::uncovered_tail;

    /// Two adjacent allocations [0x1000, 0x2000) and [0x2000, 0x3000), then a gap.
    fn ranges(ptr: u64) -> Option<(u64, u64)> {
        match ptr {
            0x1000..=0x1fff => Some((0x1000, 0x1000)),
            0x2000..=0x2fff => Some((0x2000, 0x1000)),
            _ => None,
        }
    }

    #[test]
    fn inside_one_or_adjacent_allocations_is_covered() {
        assert_eq!(uncovered_tail(0x1000, 0x1000, ranges), None);
        assert_eq!(uncovered_tail(0x1800, 0x1000, ranges), None);
        assert_eq!(uncovered_tail(0x1000, 0x2000, ranges), None);
    }

    #[test]
    fn a_tail_past_the_last_allocation_is_reported_with_its_length() {
        assert_eq!(
            uncovered_tail(0x1800, 0x800 + 0x1000 + 0x10, ranges),
            Some((0x1000, 0x2000, 0x10))
        );
        assert_eq!(
            uncovered_tail(0x2f00, 0x200, ranges),
            Some((0x2000, 0x3000, 0x100))
        );
    }

    #[test]
    fn unknown_start_or_overflow_decides_nothing() {
        assert_eq!(uncovered_tail(0x5000, 0x10, ranges), None);
        assert_eq!(uncovered_tail(0x1000, u64::MAX, ranges), None);
    }
}
