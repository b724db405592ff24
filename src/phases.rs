//! Where a wrapped call's time goes, in a measurement build (issue 24): with the cargo feature
//! `phase-times`, every wrapped call reads the TSC at the boundaries of its phases and adds the
//! cycles to per-function sums; the process's exit writes them to the file named by
//! `SHARECHECK_PHASES_OUT` (one line per function: calls, then mean ns per phase; then the
//! constructor's and the exit's time, [`Outside`]). Without the
//! feature every mark is an empty inline function. Made for the GPU hosts, which have no
//! profiler: `scripts/gpu/phases.sh` builds nothing, it runs a build made with
//! `cargo build --release --features phase-times`.

use sharecheck_core::functions::FnId;

/// The phases, in the order a call goes through them; a mark ends the phase it names.
#[derive(Clone, Copy)]
#[allow(dead_code)]
pub enum Phase {
    /// From the export's entry: the guard, the call count, the real function's slot.
    Enter = 0,
    /// The check context (driver, states, options, shard).
    Context,
    /// The before-steps of the checks, up to the driver call.
    Before,
    /// The driver's own call.
    Driver,
    /// The after-steps of the checks.
    After,
    /// A traced call's time and record number, once the driver returned.
    Number,
    /// Settling findings and recording, to the return.
    Settle,
}

#[cfg(feature = "phase-times")]
mod imp {
    use super::Phase;
    use sharecheck_core::functions::{FnId, FUNCTIONS};
    use std::cell::Cell;
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};

    const PHASES: usize = 7;
    const NAMES: [&str; PHASES] = [
        "enter", "context", "before", "driver", "after", "number", "settle",
    ];

    static SUMS: [[AtomicU64; PHASES]; FUNCTIONS.len()] =
        [const { [const { AtomicU64::new(0) }; PHASES] }; FUNCTIONS.len()];
    static CALLS: [AtomicU64; FUNCTIONS.len()] = [const { AtomicU64::new(0) }; FUNCTIONS.len()];
    /// The TSC and the monotonic clock at the first mark, to convert cycles to ns at the end.
    static FIRST: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

    thread_local! {
        static LAST: Cell<u64> = const { Cell::new(0) };
    }

    use crate::clock::{monotonic_ns as mono_ns, read_tsc as tsc};

    pub fn start(id: FnId) {
        if FIRST[0].load(Ordering::Relaxed) == 0 {
            FIRST[1].store(mono_ns(), Ordering::Relaxed);
            FIRST[0].store(tsc(), Ordering::Relaxed);
        }
        CALLS[id as usize].fetch_add(1, Ordering::Relaxed);
        LAST.with(|l| l.set(tsc()));
    }

    pub fn mark(id: FnId, phase: Phase) {
        let now = tsc();
        let before = LAST.with(|l| l.replace(now));
        SUMS[id as usize][phase as usize].fetch_add(now.wrapping_sub(before), Ordering::Relaxed);
    }

    /// The shim's work outside the calls ([`super::Outside`]), ns.
    static OUTSIDE: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
    const OUTSIDE_NAMES: [&str; 2] = ["(constructor)", "(exit)"];

    pub fn outside(what: super::Outside, ns: u64) {
        OUTSIDE[what as usize].fetch_add(ns, Ordering::Relaxed);
    }

    /// Parts of the calls' time ([`super::Part`]): count and ns.
    static PARTS: [[AtomicU64; 2]; 5] = [const { [const { AtomicU64::new(0) }; 2] }; 5];
    const PART_NAMES: [&str; 5] = [
        "[stack]",
        "[unwind]",
        "[objects read]",
        "[frame named]",
        "[symbol table read]",
    ];

    pub fn part(what: super::Part, ns: u64) {
        PARTS[what as usize][0].fetch_add(1, Ordering::Relaxed);
        PARTS[what as usize][1].fetch_add(ns, Ordering::Relaxed);
    }

    pub fn dump() {
        let Some(path) = std::env::var_os("SHARECHECK_PHASES_OUT") else {
            return;
        };
        let (t0, n0) = (
            FIRST[0].load(Ordering::Relaxed),
            FIRST[1].load(Ordering::Relaxed),
        );
        let (t1, n1) = (tsc(), mono_ns());
        let ns_per_cycle = if t1 > t0 {
            (n1 - n0) as f64 / (t1 - t0) as f64
        } else {
            0.0
        };
        let mut out = String::new();
        for f in FUNCTIONS {
            let calls = CALLS[f.id as usize].load(Ordering::Relaxed);
            if calls == 0 {
                continue;
            }
            out.push_str(&format!("{} calls={calls}", f.symbol));
            for (p, name) in NAMES.iter().enumerate() {
                let cycles = SUMS[f.id as usize][p].load(Ordering::Relaxed);
                out.push_str(&format!(
                    " {name}={:.1}",
                    cycles as f64 * ns_per_cycle / calls as f64
                ));
            }
            out.push('\n');
        }
        for (sum, name) in OUTSIDE.iter().zip(OUTSIDE_NAMES) {
            let ns = sum.load(Ordering::Relaxed);
            if ns != 0 {
                out.push_str(&format!("{name} calls=1 settle={ns}\n"));
            }
        }
        for (part, name) in PARTS.iter().zip(PART_NAMES) {
            let (n, ns) = (
                part[0].load(Ordering::Relaxed),
                part[1].load(Ordering::Relaxed),
            );
            if n != 0 {
                out.push_str(&format!(
                    "{name} calls={n} settle={:.1}\n",
                    ns as f64 / n as f64
                ));
            }
        }
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = file.write_all(out.as_bytes());
        }
    }
}

/// The shim's own work outside the calls, which a short program pays once: the constructor, the
/// exit's work (the exit record, the rest of the ring appended). Written after the functions'
/// lines as `(constructor) calls=1 settle=NS` and `(exit) calls=1 settle=NS`.
#[derive(Clone, Copy)]
pub enum Outside {
    Constructor = 0,
    Exit,
}

/// Runs `f`, timed as `_what` in a measurement build.
#[inline(always)]
pub fn outside<R>(_what: Outside, f: impl FnOnce() -> R) -> R {
    timed(
        |_ns| {
            #[cfg(feature = "phase-times")]
            imp::outside(_what, _ns);
        },
        f,
    )
}

/// Runs `f`; in a measurement build, gives `_add` the ns it took.
#[inline(always)]
fn timed<R>(_add: impl FnOnce(u64), f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "phase-times")]
    {
        let t0 = crate::clock::monotonic_ns();
        let r = f();
        _add(crate::clock::monotonic_ns().saturating_sub(t0));
        r
    }
    #[cfg(not(feature = "phase-times"))]
    f()
}

/// Parts of the calls' own time, timed apart in a measurement build and written after the other
/// lines as `[name] calls=N settle=MEAN_NS` (already counted in their calls' phases: readers
/// leave them out of the sums).
#[derive(Clone, Copy)]
pub enum Part {
    /// A stack taken ([`crate::stack::capture`]).
    Stack = 0,
    /// Its walk up the stack.
    Unwind,
    /// The loaded objects listed again (what is loaded changed).
    ObjectsRead,
    /// A frame named that no cache knew.
    FrameNamed,
    /// A module's symbol table read (its functions indexed).
    TableRead,
}

/// Runs `f`, timed as part `_what` in a measurement build.
#[inline(always)]
pub fn part<R>(_what: Part, f: impl FnOnce() -> R) -> R {
    timed(
        |_ns| {
            #[cfg(feature = "phase-times")]
            imp::part(_what, _ns);
        },
        f,
    )
}

/// Writes the times to `SHARECHECK_PHASES_OUT` (a measurement build; called by the shim's
/// destructor, after the exit's work).
#[inline(always)]
pub fn dump() {
    #[cfg(feature = "phase-times")]
    imp::dump();
}

/// A wrapped call begins.
#[inline(always)]
pub fn start(_id: FnId) {
    #[cfg(feature = "phase-times")]
    imp::start(_id);
}

/// A wrapped call ends `phase`.
#[inline(always)]
pub fn mark(_id: FnId, _phase: Phase) {
    #[cfg(feature = "phase-times")]
    imp::mark(_id, _phase);
}
