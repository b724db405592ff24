//! The line every wrapped call reads first, and reads again after the driver's call (issue 24: on
//! R580 the driver's work evicts the shim's lines, and each line and each page a call touches
//! costs then, about 2 and 2.4 ns, `scripts/gpu/line_cost.c`).
//!
//! What would otherwise be a line (and a page) each is here: whether calls take the untraced
//! path and whether this copy stands aside (set by `process` at load), where the shim's static
//! TLS block lies (`tls`'s, otherwise read from the GOT for each thread-local), and the process's
//! tracked state and options (`engine`'s). Each field is written by the layer that owns its meaning, which reads it through
//! its own functions; this layer is below them all, so the tracked state's type is erased here.
//!
//! A traced call reads more: the trace's flags, the writer's, the clock's rate. They are the
//! second line ([`TraceLine`]), in the same 128-byte block (the CPU's adjacent-line prefetch
//! fetches the pair) and page; before, they were eight lines on five pages (callgrind with
//! `SHARECHECK_SIM_EVICT_KB`, a traced `cuDeviceCanAccessPeer`).

use sharecheck_core::options::Options;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicPtr, AtomicU32, AtomicU64, AtomicU8};

#[repr(C, align(128))]
pub struct Hot {
    /// Whether calls take the untraced path (`process::untraced`).
    pub untraced: AtomicBool,
    /// Whether this copy stands aside (`process::passive`).
    pub passive: AtomicBool,
    /// The offset from the thread pointer of this object's block of static TLS (0 until a
    /// thread-local's first use): `crate::tls::block`.
    pub tls_block: AtomicIsize,
    /// `engine::state::States`, made on first use (`engine::states`).
    pub states: AtomicPtr<()>,
    /// The process's options, once read (`engine::options`).
    pub options: AtomicPtr<Options>,
    /// What a traced call reads besides, on the next line.
    pub trace: TraceLine,
}

/// The second line: what a traced call reads, each field owned (written and read) by the layer
/// named.
#[repr(C, align(64))]
pub struct TraceLine {
    /// Whether records are written (`trace::enabled`; 0 until decided).
    pub enabled: AtomicU8,
    /// Whether a call without a finding is recorded: `trace_level` (`trace`'s; 0 until read).
    pub level: AtomicU8,
    /// How the clock is read (`clock`'s mode).
    pub clock_mode: AtomicU8,
    /// Set when tracing stopped (a full disk, the size limit, a stuck append): no lane opens or
    /// writes any more.
    pub stopped: AtomicBool,
    /// Set while the appender falls behind: more than half a lane's ring waits to be appended (or a
    /// record waited for space), until less than a quarter does. Threads then format their records
    /// themselves rather than leave it to the appender (`writer::behind`).
    pub behind: AtomicBool,
    /// Set when the process starts to exit (`writer`'s `close_numbers`): calls get no record number from
    /// then on (they are forwarded and checked, not recorded), so that the exit record counts
    /// exactly the calls numbered before it.
    pub closing: AtomicBool,
    /// Whether this process is registered for `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (the registration
    /// belongs to the address space: a forked child registers again from its own writer thread).
    pub asymmetric: AtomicBool,
    /// Bumped in each forked child (`trace`'s).
    pub fork_generation: AtomicU32,
    /// Bumped in a forked child: a thread's cached slot of another epoch is not its own.
    pub epoch: AtomicU32,
    /// Records kept (`writer`'s `keep_early`) and not appended yet.
    pub held: AtomicU32,
    /// Nanoseconds per TSC tick, 32.32 fixed point (`clock`'s).
    pub scale: AtomicU64,
    /// `clock`'s `RESYNC_NS` in ticks.
    pub resync_ticks: AtomicU64,
    /// The instant records' `"t"` counts from, on both clocks (`CLOCK_MONOTONIC`, `CLOCK_REALTIME`),
    /// read together once per process tree (a forked child keeps its parent's, so their times
    /// compare) and written in each file's process record.
    pub t0_mono: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Hot>() == 128);
const _: () = assert!(std::mem::offset_of!(Hot, trace) == 64);

pub static HOT: Hot = Hot {
    untraced: AtomicBool::new(false),
    passive: AtomicBool::new(false),
    tls_block: AtomicIsize::new(0),
    states: AtomicPtr::new(std::ptr::null_mut()),
    options: AtomicPtr::new(std::ptr::null_mut()),
    trace: TraceLine {
        enabled: AtomicU8::new(0),
        level: AtomicU8::new(0),
        clock_mode: AtomicU8::new(0),
        stopped: AtomicBool::new(false),
        behind: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        asymmetric: AtomicBool::new(false),
        fork_generation: AtomicU32::new(0),
        epoch: AtomicU32::new(0),
        held: AtomicU32::new(0),
        scale: AtomicU64::new(0),
        resync_ticks: AtomicU64::new(0),
        t0_mono: AtomicU64::new(0),
    },
};
