//! `CLOCK_MONOTONIC` for trace records, at a fraction of its cost where the kernel's own clock is
//! the TSC.
//!
//! A record's `t` is one clock read, and `clock_gettime` is the dearest single step of a traced
//! call: 30 ns on this project's VM (AMD EPYC), 47 ns on the H100 host, where reading the TSC
//! costs 12 ns and less. Where the kernel keeps time with the TSC itself (clocksource `tsc`: it
//! found the counter invariant and in step on every CPU), a thread's time is the TSC's ticks since
//! the thread last read `CLOCK_MONOTONIC`, scaled by the ticks' rate, which is measured against
//! `CLOCK_MONOTONIC` over the first 20 ms of the process. A thread reads the real clock again at
//! least once a millisecond, and its times never go back. So a time is the real clock's within
//! the rate's error over at most a millisecond: nanoseconds, and at most 0.5 us while NTP slews
//! the clock at its fastest (500 ppm). Anywhere else (another clocksource, another architecture,
//! a process that made the TSC trap with `PR_SET_TSC`), every time is a `clock_gettime`.

use crate::hot::HOT;
use std::cell::Cell;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Not decided yet (the constructor decides): every read is the real clock.
const UNDECIDED: u8 = 0;
/// The TSC cannot stand in: every read is the real clock.
const REAL: u8 = 1;
/// The TSC's rate is being measured (the first [`CALIBRATE_NS`]).
const CALIBRATING: u8 = 2;
/// Times come from the TSC.
const TSC: u8 = 3;
// This module's flags that every traced call reads are on the hot block's second line
// (`crate::hot::HOT.trace`: `clock_mode`, `scale`, `resync_ticks`, `t0_mono`).

/// How long the TSC's rate is measured before it is used.
const CALIBRATE_NS: u64 = 20_000_000;
/// A thread reads the real clock at least this often.
const RESYNC_NS: u64 = 1_000_000;

/// The TSC and the clock, read together when calibrating began.
static CAL_TSC: AtomicU64 = AtomicU64::new(0);
static CAL_NS: AtomicU64 = AtomicU64::new(0);

/// A thread's anchor: the TSC and the clock when it last read the real clock, and the last time
/// it was given (times never go back).
pub struct ThreadClock {
    anchor_tsc: Cell<u64>,
    anchor_ns: Cell<u64>,
    last: Cell<u64>,
}

impl ThreadClock {
    pub const fn new() -> Self {
        ThreadClock {
            anchor_tsc: Cell::new(0),
            anchor_ns: Cell::new(0),
            last: Cell::new(0),
        }
    }
}

/// `CLOCK_MONOTONIC`, read from the kernel (one vDSO call). Async-signal-safe.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME`, read from the kernel.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one `timespec` to `ts`, a live local; `clock` is one of the two clocks
    // Linux always has (REALTIME, MONOTONIC).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` on the calling thread, whose anchor is `clock` (which only this thread
/// uses, and not re-entrantly: the caller is inside the shim's guard).
#[inline]
pub fn now_ns(clock: &ThreadClock) -> u64 {
    ns_at(clock, stamp())
}

/// The TSC now, where it stands in for the clock (0 elsewhere): a time taken in two steps, this
/// one where the time belongs and [`ns_at`] where it is needed. Reading the TSC costs its
/// latency only when its value is used at once (about 30 ns measured on this project's VM, where
/// a loop of reads takes 12 ns each); converted later, after other work, it overlaps that work.
#[inline(always)]
pub fn stamp() -> u64 {
    if HOT.trace.clock_mode.load(Relaxed) == TSC {
        read_tsc()
    } else {
        0
    }
}

/// `CLOCK_MONOTONIC` at `stamp` ([`stamp`] on this thread, a moment ago) on the calling thread,
/// whose anchor is `clock` (as [`now_ns`]). A stamp too far from the anchor (or none) is replaced
/// by the real clock, now.
#[inline]
pub fn ns_at(clock: &ThreadClock, stamp: u64) -> u64 {
    if stamp != 0 {
        let ticks = stamp.wrapping_sub(clock.anchor_tsc.get());
        if ticks < HOT.trace.resync_ticks.load(Relaxed) {
            let ns = clock.anchor_ns.get() + scaled(ticks, HOT.trace.scale.load(Relaxed));
            let ns = ns.max(clock.last.get());
            clock.last.set(ns);
            return ns;
        }
    }
    resync(clock)
}

/// `ticks` in nanoseconds at `scale` (32.32 fixed point).
#[inline]
fn scaled(ticks: u64, scale: u64) -> u64 {
    ((u128::from(ticks) * u128::from(scale)) >> 32) as u64
}

/// The real clock, as the thread's new anchor; measures the TSC's rate once enough time passed.
#[cold]
#[inline(never)]
fn resync(clock: &ThreadClock) -> u64 {
    let mode = HOT.trace.clock_mode.load(Acquire);
    let ns = if mode >= CALIBRATING {
        let (tsc, ns) = paired_read();
        if mode == CALIBRATING {
            calibrate(tsc, ns);
        }
        clock.anchor_tsc.set(tsc);
        clock.anchor_ns.set(ns);
        ns
    } else {
        monotonic_ns()
    };
    let ns = ns.max(clock.last.get());
    clock.last.set(ns);
    ns
}

/// The TSC and the clock read together: the clock between two TSC reads, the TSC taken as their
/// midpoint, and of a few tries the one whose TSC reads are closest. A thread preempted between
/// two reads would otherwise pair a clock with a TSC milliseconds apart, and skew the rate
/// measured (or this thread's anchor) by as much.
fn paired_read() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..4 {
        let before = read_tsc();
        let ns = monotonic_ns();
        let after = read_tsc();
        let width = after.wrapping_sub(before);
        if width < best.0 {
            best = (width, before.wrapping_add(width / 2), ns);
        }
    }
    (best.1, best.2)
}

/// Ends calibration once [`CALIBRATE_NS`] passed since it began: the rate over that span.
fn calibrate(tsc: u64, ns: u64) {
    let (tsc0, ns0) = (CAL_TSC.load(Acquire), CAL_NS.load(Acquire));
    let (ticks, elapsed) = (tsc.wrapping_sub(tsc0), ns.saturating_sub(ns0));
    if elapsed < CALIBRATE_NS || ticks == 0 || ticks > elapsed.saturating_mul(1 << 10) {
        // Not long enough yet (or a counter that does not count forward at a sane rate).
        return;
    }
    let scale = ((u128::from(elapsed) << 32) / u128::from(ticks)) as u64;
    if scale == 0 || scale >= 1 << 40 {
        HOT.trace.clock_mode.store(REAL, Release);
        return;
    }
    HOT.trace.scale.store(scale, Relaxed);
    HOT.trace.resync_ticks.store(
        ((u128::from(RESYNC_NS) << 32) / u128::from(scale)) as u64,
        Relaxed,
    );
    HOT.trace.clock_mode.store(TSC, Release);
}

/// Decides, once, whether the TSC can stand in for the clock (the constructor calls this;
/// anything earlier reads the real clock). Reads one small file of `/sys` with plain system
/// calls, no allocation.
pub fn decide() {
    if HOT.trace.clock_mode.load(Acquire) != UNDECIDED {
        return;
    }
    let usable = tsc_is_the_kernels_clock() && tsc_readable();
    if usable {
        let (tsc, ns) = paired_read();
        CAL_TSC.store(tsc, Release);
        CAL_NS.store(ns, Release);
    }
    HOT.trace
        .clock_mode
        .store(if usable { CALIBRATING } else { REAL }, Release);
}

/// Whether the kernel's clocksource is `tsc`: it then trusts the counter to be invariant and in
/// step across CPUs (and falls back to another clocksource, which this does not follow, only if
/// it finds otherwise: the per-millisecond resync bounds what that could cost).
fn tsc_is_the_kernels_clock() -> bool {
    const PATH: &[u8] = b"/sys/devices/system/clocksource/clocksource0/current_clocksource\0";
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(PATH.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 16];
    // SAFETY: reads at most `buf.len()` bytes into a live local array.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: our own descriptor, opened above.
    unsafe { libc::close(fd) };
    n >= 3 && &buf[..n as usize] == b"tsc\n"
}

/// Whether this process may read the TSC (a process can make it trap with `PR_SET_TSC`).
fn tsc_readable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let mut state: libc::c_int = 0;
    // SAFETY: PR_GET_TSC writes one int to the address given, a live local.
    let rc = unsafe { libc::prctl(libc::PR_GET_TSC, &mut state as *mut libc::c_int) };
    rc == 0 && state == libc::PR_TSC_ENABLE
}

/// The TSC (0 where there is none). Also the phase clock of a measurement build (`phases`).
#[inline(always)]
pub fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions; it is only reached in modes `decide` chose after
        // checking that this process may execute it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

static T0_WALL: AtomicU64 = AtomicU64::new(0);

/// Reads the clock base and decides whether the TSC stands in for the clock ([`decide`]). Clock
/// reads and a small file read: async-signal-safe.
pub fn init() {
    decide();
    if HOT.trace.t0_mono.load(Relaxed) == 0 {
        let wall = realtime_ns();
        let mono = monotonic_ns();
        if HOT
            .trace
            .t0_mono
            .compare_exchange(0, mono, std::sync::atomic::Ordering::AcqRel, Acquire)
            .is_ok()
        {
            T0_WALL.store(wall, Release);
        }
    }
}

/// The clock base: `(CLOCK_MONOTONIC, CLOCK_REALTIME)` at the same instant, in ns.
pub fn base() -> (u64, u64) {
    (HOT.trace.t0_mono.load(Acquire), T0_WALL.load(Acquire))
}

/// A `CLOCK_MONOTONIC` time as a record's `"t"`: ns since the base (read now if not yet).
#[inline]
pub fn since_base(mono: u64) -> u64 {
    match HOT.trace.t0_mono.load(Relaxed) {
        0 => {
            init();
            mono.saturating_sub(HOT.trace.t0_mono.load(Acquire))
        }
        t0 => mono.saturating_sub(t0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Times from the TSC stay with the real clock read around them, and never go back.
    #[test]
    fn tsc_times_follow_the_real_clock_and_never_go_back() {
        decide();
        let clock = ThreadClock::new();
        // Past calibration: calls until it ended (a call after CALIBRATE_NS ends it; a thread
        // preempted at the wrong moment may need more than one), within a generous deadline.
        let start = monotonic_ns();
        while HOT.trace.clock_mode.load(Acquire) == CALIBRATING
            && monotonic_ns() - start < 2_000_000_000
        {
            now_ns(&clock);
        }
        if HOT.trace.clock_mode.load(Acquire) != TSC {
            // Not a machine whose clock is the TSC: every time is the real clock's, which is
            // what the rest of the test checks anyway.
            assert_eq!(HOT.trace.clock_mode.load(Acquire), REAL);
        }
        let mut last = 0;
        let mut worst = 0u64;
        for _ in 0..2_000_000 {
            let before = monotonic_ns();
            let t = now_ns(&clock);
            let after = monotonic_ns();
            assert!(t >= last, "went back: {last} then {t}");
            last = t;
            // Within the bracket, give or take 2 us (a real clock's and a scaled rate's error,
            // and the clamp that keeps times from going back).
            let off = if t < before {
                before - t
            } else {
                t.saturating_sub(after)
            };
            worst = worst.max(off);
        }
        assert!(
            worst < 2_000,
            "a time {worst} ns outside the real clock's bracket"
        );
    }

    #[test]
    fn ticks_scale_to_nanoseconds() {
        // 2.5 GHz: 0.4 ns a tick.
        let scale = (4u64 << 32) / 10;
        assert_eq!(scaled(2_500_000_000, scale), 999_999_999);
        assert_eq!(scaled(0, scale), 0);
    }
}
