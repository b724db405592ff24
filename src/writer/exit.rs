//! The exit: numbering stops, the calls in flight and the records being copied get a bounded time,
//! the rest of the ring is appended.

use super::*;

/// How long an exiting process waits for other threads: for the calls being recorded (numbered
/// once the driver returned, so never one blocked in the driver: each only needs a CPU, or the
/// writer thread's appends when the ring is full) while they or the appends make progress, half
/// of [`EXIT_HARD_NS`] without any at most, [`EXIT_HARD_NS`] in all (a thread that waits 1 s for a
/// CPU was seen with 200 busy threads on 2 CPUs); then
/// for records being copied and the writer thread's append, as long as they make progress,
/// [`EXIT_IDLE_NS`] without any at most, and [`EXIT_WAIT_NS`] in all. With many more busy threads
/// than CPUs a thread may wait a second for a CPU (measured with 64 threads on 2 CPUs); a thread
/// stopped (in a debugger, say) while it records is not waited for longer, and its record, if it
/// comes, is not counted.
pub(super) const EXIT_IDLE_NS: u64 = 1_000_000_000;
/// The same, for an exit from a signal handler that interrupted its thread's own recording: a
/// wait without progress may then be for that thread's frozen work (a chunk it took and had not
/// published yet), which never moves. Records a wait this short leaves out stay in the ring.
pub(super) const EXIT_IDLE_FROZEN_NS: u64 = 200_000_000;
pub(super) const EXIT_WAIT_NS: u64 = 3_000_000_000;
/// The most an exit waits for the calls being recorded, while they or the appends move.
pub(super) const EXIT_HARD_NS: u64 = 10_000_000_000;

/// Waits (yielding) until `check` says done, as long as what it measures moves: at most `idle`
/// without a change, and until the monotonic clock passes `deadline`. Whether it is done.
pub(super) fn wait_while_moving(
    deadline: u64,
    idle: u64,
    mut check: impl FnMut() -> (bool, u64),
) -> bool {
    let (mut last, mut since) = (None, monotonic_ns());
    loop {
        let (done, mark) = check();
        if done {
            return true;
        }
        let now = monotonic_ns();
        if last != Some(mark) {
            (last, since) = (Some(mark), now);
        }
        if now >= since + idle || now >= deadline {
            return false;
        }
        std::thread::yield_now();
    }
}

/// The slot of a thread whose own record work is frozen: the exiting thread, when `exit` was
/// called by a signal handler that interrupted the shim's work on it. What that slot holds (a
/// number in flight, a chunk being copied) cannot move while the exit waits, so it waits for
/// the others only.
#[derive(Clone, Copy)]
pub struct Frozen(pub(super) Option<usize>);

impl Frozen {
    /// `cell`'s slot, when `interrupted` (this thread's shim work was interrupted).
    pub fn of(cell: &ThreadSlot, interrupted: bool) -> Frozen {
        let cached = cell.get();
        let index = cached as u32 & 0xff_ffff;
        let ours = cached >> 32 == u64::from(HOT.trace.epoch.load(Relaxed)) && index != 0;
        Frozen((interrupted && ours).then(|| index as usize - 1))
    }

    fn is(self, index: usize) -> bool {
        self.0 == Some(index)
    }

    /// The calls this slot holds in flight.
    fn in_flight(self) -> u64 {
        self.0
            .map_or(0, |i| u64::from(SLOT_TABLE[i].in_flight.load(Relaxed)))
    }
}

/// At exit, before the exit record: no call is numbered any more, and the calls numbered
/// already get a bounded time to write their records: not those of a `frozen` slot, nor the
/// `parked` ones (numbered calls kept until their thread next leaves the shim, which may be
/// never: signal handlers' calls, `deferred`). Returns how many are still in flight after it
/// (their records may follow, or not come).
pub fn close_numbers(frozen: Frozen, parked: impl Fn() -> u64) -> u64 {
    // A sequentially consistent store and a barrier on every thread, then loads: a thread that
    // read CLOSING unset is seen in flight here ([`lift`]).
    HOT.trace.closing.store(true, SeqCst);
    asymmetric_fence();
    let in_flight = || -> u64 {
        let seen = SLOTS_SEEN.load(SeqCst).min(SLOTS);
        let own: u64 = SLOT_TABLE[..seen]
            .iter()
            .map(|slot| u64::from(slot.in_flight.load(SeqCst)))
            .sum();
        let shared = if seen > SHARED {
            0
        } else {
            u64::from(SLOT_TABLE[SHARED].in_flight.load(SeqCst))
        };
        own + shared
    };
    // A thread holding a number is in the shim's own work: it needs a CPU, and (when the ring
    // is full) the writer thread's appends. Waited for while either moves.
    let stuck = frozen.in_flight();
    wait_while_moving(monotonic_ns() + EXIT_HARD_NS, EXIT_HARD_NS / 2, || {
        let left = in_flight();
        let appended: u64 = LANES.iter().map(|w| w.appended.load(Relaxed)).sum();
        (
            left <= stuck + parked(),
            left.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ appended,
        )
    });
    in_flight()
}

/// At exit: no more records; waits (as long as they make progress, at most [`EXIT_WAIT_NS`] in
/// all) for records being copied and for another thread's append, appends the rest of each lane's ring to its trace file and
/// removes the ring file. What it cannot append whole in that time (a record still being copied,
/// an append that does not finish: the thread doing it may be stopped) stays in the ring file for
/// a reader to recover, as it does when tracing had stopped (a full disk, the file size limit).
pub fn finish(frozen: Frozen) {
    if HOT.trace.held.load(Acquire) != 0 {
        append_held();
    }
    HOT.trace.stopped.store(true, Release);
    let was: Vec<u8> = LANES
        .iter()
        .map(|w| w.state.swap(STOPPED, AcqRel))
        .collect();
    let deadline = monotonic_ns() + EXIT_WAIT_NS;
    for (w, was) in LANES.iter().zip(was) {
        if was != CLOSED && !w.map.load(Acquire).is_null() {
            // Said first: a ring that stays (tracing had stopped, or its rest could not be
            // appended) tells its reader the process exited normally.
            mark_ring(w, ring::EXITED);
            finish_lane(w, was == OPEN, deadline, frozen);
        }
    }
}

pub(super) fn finish_lane(w: &Lane, was_open: bool, deadline: u64, frozen: Frozen) {
    // Every chunk of the lane's threads: closed (an owner may be copying one last record; the
    // frozen slot's copy never ends, and its chunk stays open).
    let lane = lane_number(w);
    let seen = SLOTS_SEEN.load(Acquire).min(SLOTS);
    let mut stuck = false;
    let idle = if frozen.0.is_some() {
        EXIT_IDLE_FROZEN_NS
    } else {
        EXIT_IDLE_NS
    };
    for (index, slot) in SLOT_TABLE[..seen].iter().enumerate() {
        let word = slot.word.load(Acquire);
        if frozen.is(index) && word & BUSY != 0 && word != NO_CHUNK {
            stuck |= chunk_of(word).0 == lane;
            continue;
        }
        wait_while_moving(deadline, idle, || {
            let word = slot.word.load(Acquire);
            let done = word == NO_CHUNK
                || chunk_of(word).0 != lane
                || (word & BUSY == 0 && close_chunk(slot, word));
            (done, word)
        });
    }
    let end = w.next.load(Acquire);
    // Records being copied by other threads: their bytes counted, or the time is up (at once
    // when this thread's own copy was interrupted: the lane is never whole then).
    let whole = !stuck
        && wait_while_moving(deadline, idle, || {
            let copied: u64 = w.done.iter().map(|d| d.load(Acquire)).sum();
            (copied_up_to(w, end), copied)
        });
    // The appender's flag: its holder, if any, is between two segments (unless it is this
    // thread, interrupted while appending).
    // SAFETY: gettid has no preconditions and cannot fail.
    let me = unsafe { libc::gettid() };
    let held = !(frozen.0.is_some() && w.append_holder.load(Relaxed) == me)
        && wait_while_moving(deadline, idle, || {
            let taken = w
                .appending
                .compare_exchange(false, true, AcqRel, Acquire)
                .is_ok();
            (taken, w.appended.load(Acquire))
        });
    let mut ok = held && was_open;
    // Whole segments only, unless every record is in: a chunk still being copied (or reserved
    // and never counted) holds bytes the trace must not get; the ring keeps them for a reader.
    let upto = if whole {
        end
    } else {
        let mut full = w.appended.load(Acquire);
        while full < end && segment_is_full(w, full) {
            full += SEGMENT;
        }
        full.min(end)
    };
    while ok && w.appended.load(Acquire) < upto {
        let len = (upto - w.appended.load(Acquire)).min(SEGMENT);
        ok = append_bytes(w, len).is_ok();
    }
    if held {
        give_back_reserve(w);
    }
    let ring_path = w.ring_path.load(Acquire);
    if ok && whole && !ring_path.is_null() {
        // Everything is in the trace: the ring is no longer needed.
        // SAFETY: a NUL-terminated path this module leaked.
        unsafe { libc::unlink(ring_path) };
    }
}

/// Whether every byte reserved before `end` has been copied in (counted in its segment).
pub(super) fn copied_up_to(w: &Lane, end: u64) -> bool {
    let first = w.appended.load(Acquire) / SEGMENT;
    let last = end.div_ceil(SEGMENT);
    (first..last).all(|segment| {
        let lap_start = (segment / SEGMENTS) * SEGMENT;
        let want = lap_start + (end.min((segment + 1) * SEGMENT) - segment * SEGMENT);
        w.done[(segment % SEGMENTS) as usize].load(Acquire) >= want
    })
}
