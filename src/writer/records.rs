//! Records into the ring: a thread's record goes into its chunk (or a reservation of its own), a
//! signal handler's is kept when it cannot wait.

use super::*;

/// Appends one whole framed record (`sharecheck_core::ring`: its kind byte first) to the lane of
/// the calling thread. The process's
/// first record opens lane 0 with `open`, which creates the trace file and gives the first record
/// (who wrote the file); the names of the other lanes' files are made then too, so that a
/// thread's first record in another lane only creates files (no allocation). `slot` is the
/// calling thread's claim on a chunk. Returns whether the record is in.
pub fn append<R: Record + ?Sized>(
    record: &R,
    slot: &ThreadSlot,
    open: impl FnOnce() -> Result<(Opened, Vec<u8>), String>,
) -> bool {
    if HOT.trace.stopped.load(Relaxed) {
        return false;
    }
    let index = own_slot(slot);
    let interrupting = crate::guard::is_interrupting();
    if interrupting && opening_here(&LANES[0]) {
        return with_bytes(record, |bytes| keep_early(0, bytes));
    }
    if !ensure_open(&LANES[0], index, open) {
        return false;
    }
    let k = thread_lane(slot, index);
    let w = &LANES[k];
    if interrupting && ((k != 0 && opening_here(w)) || !room_without_waiting(w)) {
        return with_bytes(record, |bytes| keep_early(k, bytes));
    }
    if !interrupting && HOT.trace.held.load(Relaxed) != 0 {
        append_held();
    }
    (k == 0 || ensure_lane_open(w, k, index)) && append_record(w, index, record)
}

/// [`append`]'s common case, for a record made inside the guard (never a signal handler's that
/// interrupted the shim: those have no guard): the thread's slot and lane known from an earlier
/// record of this epoch, its lane open, nothing kept for later, and room in its chunk. Returns
/// false, having written nothing, anywhere else: the caller then takes [`append`]. One look at
/// each fact, from the thread's cached claim, instead of the general path's layers (issue 24:
/// a traced call's instructions).
#[inline(always)]
pub fn append_own<R: Record + ?Sized>(record: &R, cell: &ThreadSlot) -> bool {
    let cached = cell.get();
    let (lane, index) = ((cached >> 24) as u8, cached as u32 & 0xff_ffff);
    if cached >> 32 != u64::from(HOT.trace.epoch.load(Relaxed))
        || lane == 0
        || index == 0
        || index as usize > SHARED
        || HOT.trace.stopped.load(Relaxed)
        || HOT.trace.held.load(Relaxed) != 0
    {
        return false;
    }
    let (k, slot) = (usize::from(lane) - 1, &SLOT_TABLE[index as usize - 1]);
    let w = &LANES[k];
    let len = record.len() as u64;
    let word = slot.word.load(Acquire);
    // `NO_CHUNK` has the `BUSY` bit too.
    if word & BUSY != 0 || w.state.load(Acquire) != OPEN {
        return false;
    }
    let (in_lane, _, used) = chunk_of(word);
    if in_lane != k
        || used + len > CHUNK
        || slot
            .word
            .compare_exchange(word, word | BUSY, Acquire, Relaxed)
            .is_err()
    {
        return false;
    }
    copy_into_chunk(w, slot, word, record);
    true
}

/// Whether this thread is opening lane `w`: a record made now is a signal handler's, which
/// interrupted the opening.
pub(super) fn opening_here(w: &Lane) -> bool {
    // SAFETY: gettid has no preconditions and cannot fail.
    w.state.load(Acquire) == OPENING && w.opener.load(Acquire) == unsafe { libc::gettid() }
}

/// Ring space a signal handler's record wants free beyond its own (other threads may reserve
/// chunks between the look and its reservation): 128 chunks.
pub(super) const HANDLER_SLACK: u64 = 8 * SEGMENT;

/// Whether a signal handler's record fits in lane `w` with room to spare: the work it
/// interrupted may be what frees ring space (an append in progress, a chunk being copied), so it
/// never waits for any.
pub(super) fn room_without_waiting(w: &Lane) -> bool {
    w.state.load(Acquire) == OPEN
        && w.next.load(Acquire) + HANDLER_SLACK <= w.appended.load(Acquire) + RING - SEGMENT
}

/// Records a signal handler made while its thread was opening their lane, or when the lane's
/// ring had no room to spare, kept until the lane is open or the next record of a thread not in
/// a handler ([`append_early`], [`append_held`]): `EARLY_RECORDS` of at most `EARLY_BYTES` bytes
/// (a handler's call record is one; beyond them a record is not written).
pub(super) const EARLY_RECORDS: usize = 256;
pub(super) const EARLY_BYTES: usize = 512;
pub(super) const FREE: u8 = 0;
pub(super) const FILLING: u8 = 1;
pub(super) const READY: u8 = 2;

pub(super) struct Early {
    pub(super) state: AtomicU8,
    pub(super) lane: AtomicU8,
    pub(super) len: AtomicUsize,
    pub(super) bytes: std::cell::UnsafeCell<[u8; EARLY_BYTES]>,
}

// SAFETY: `bytes` is written only by the thread that moved `state` from FREE to FILLING, and
// read only by the one that moved it from READY to FILLING.
unsafe impl Sync for Early {}

pub(super) static EARLY: [Early; EARLY_RECORDS] = [const {
    Early {
        state: AtomicU8::new(FREE),
        lane: AtomicU8::new(0),
        len: AtomicUsize::new(0),
        bytes: std::cell::UnsafeCell::new([0; EARLY_BYTES]),
    }
}; EARLY_RECORDS];

pub(super) fn keep_early(lane: usize, bytes: &[u8]) -> bool {
    if bytes.len() > EARLY_BYTES {
        return false;
    }
    for e in &EARLY {
        if e.state
            .compare_exchange(FREE, FILLING, AcqRel, Acquire)
            .is_ok()
        {
            // SAFETY: FILLING is this thread's, see `Early`.
            unsafe { (&mut *e.bytes.get())[..bytes.len()].copy_from_slice(bytes) };
            e.len.store(bytes.len(), Relaxed);
            e.lane.store(lane as u8, Relaxed);
            e.state.store(READY, Release);
            HOT.trace.held.fetch_add(1, Release);
            return true;
        }
    }
    false
}

/// Appends the records kept for lane `w` (its opener, once it is open; a thread not in a
/// handler, before its own record).
pub(super) fn append_early(w: &Lane) {
    let lane = lane_number(w) as u8;
    for e in &EARLY {
        if e.state.load(Acquire) == READY
            && e.lane.load(Relaxed) == lane
            && e.state
                .compare_exchange(READY, FILLING, AcqRel, Acquire)
                .is_ok()
        {
            // SAFETY: READY -> FILLING makes the bytes this thread's, see `Early`.
            let bytes = unsafe { &(&*e.bytes.get())[..e.len.load(Relaxed)] };
            // A reservation of its own: no chunk is left open in a slot of another thread's.
            reserve_and_copy(w, bytes);
            e.state.store(FREE, Release);
            HOT.trace.held.fetch_sub(1, Release);
        }
    }
}

// This module's flags that every traced call reads are on the hot block's second line
// (`crate::hot::HOT.trace`: `held`).

/// Appends every record kept for a lane that is open (by a thread not in a signal handler's
/// record, before its own record; and at exit).
pub(super) fn append_held() {
    for w in &LANES {
        if w.state.load(Acquire) == OPEN {
            append_early(w);
        }
    }
}

/// The lane of the thread whose slot is `index`, kept in its claim (bits 24 to 31, 0 until
/// known) once the lane count is decided, so that a record does not divide.
pub(super) fn thread_lane(cell: &ThreadSlot, index: usize) -> usize {
    let cached = cell.get();
    match (cached >> 24) as u8 {
        0 => {
            let (k, _) = lane_of(index);
            cell.set(cached | ((k as u64 + 1) << 24));
            k
        }
        lane => usize::from(lane) - 1,
    }
}

/// A framed record ([`sharecheck_core::ring`]) to copy into the ring: whole bytes, or made in
/// place (a compact call record, written straight into its chunk).
pub trait Record {
    /// Its length, frame included.
    fn len(&self) -> usize;
    /// Its bytes, where it is whole bytes already (its kind byte first): what a reservation of
    /// its own copies whatever its length.
    fn whole(&self) -> Option<&[u8]> {
        None
    }
    /// Its kind (the frame's first byte).
    fn kind(&self) -> u8;
    /// Writes it into `out` (exactly `len` bytes), its first byte 0: the kind byte is written
    /// last, by the writer.
    fn write_to(&self, out: &mut [u8]);
}

impl Record for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn whole(&self) -> Option<&[u8]> {
        Some(self)
    }
    fn kind(&self) -> u8 {
        self.first().copied().unwrap_or(0)
    }
    fn write_to(&self, out: &mut [u8]) {
        out[0] = 0;
        out[1..].copy_from_slice(&self[1..]);
    }
}

pub(super) fn append_record<R: Record + ?Sized>(w: &Lane, index: usize, record: &R) -> bool {
    let len = record.len() as u64;
    if len > 0 && len < CHUNK {
        append_in_chunk(w, &SLOT_TABLE[index], record)
    } else {
        // A record too long for a chunk: its own reservation.
        with_bytes(record, |bytes| reserve_and_copy(w, bytes))
    }
}

/// A record's bytes: itself where it is whole bytes (of any length: a record with a long stack
/// or message runs past a chunk), or made on the stack (records made in place are short).
pub(super) fn with_bytes<R: Record + ?Sized>(record: &R, f: impl FnOnce(&[u8]) -> bool) -> bool {
    if let Some(bytes) = record.whole() {
        return f(bytes);
    }
    let mut made = [0u8; 512];
    match made.get_mut(..record.len()) {
        Some(out) => {
            record.write_to(out);
            out[0] = record.kind();
            f(out)
        }
        // Longer than any record made in place (a compact call's arguments): none is.
        None => false,
    }
}

pub(super) fn append_in_chunk<R: Record + ?Sized>(w: &Lane, slot: &Slot, record: &R) -> bool {
    let len = record.len() as u64;
    let shared = std::ptr::eq(slot, &SLOT_TABLE[SHARED]);
    let mut busy_seen = 0u32;
    loop {
        let word = slot.word.load(Acquire);
        if word & BUSY != 0 && word != NO_CHUNK {
            // Another thread copying into the shared slot: its copy takes nanoseconds. Or a
            // signal handler on this thread, interrupting its copy (or that of the thread it
            // shares the slot with): a reservation of its own.
            busy_seen += 1;
            if shared && busy_seen < 1000 {
                std::hint::spin_loop();
                continue;
            }
            return with_bytes(record, |bytes| reserve_and_copy(w, bytes));
        }
        if word == NO_CHUNK {
            super::appender::start_deferred_appender();
            let start = w.next.fetch_add(CHUNK, AcqRel);
            if !free_for(w, start / SEGMENT) {
                return false;
            }
            zero_chunks(w, start, CHUNK);
            let chunk = (lane_number(w) as u64) << LANE_SHIFT | start;
            if slot
                .word
                .compare_exchange(NO_CHUNK, chunk, AcqRel, Acquire)
                .is_err()
            {
                // Another chunk came first (a signal handler on this thread, or a thread sharing
                // the slot): this one stays empty.
                commit(w, start, CHUNK);
            }
            continue;
        }
        let (lane, _, used) = chunk_of(word);
        if used + len > CHUNK || lane != lane_number(w) {
            // Full, or in another lane (a thread that opened a lane other than its own writes
            // that lane's first record): closed, and a new chunk taken in this lane.
            close_chunk(slot, word);
            continue;
        }
        if slot
            .word
            .compare_exchange(word, word | BUSY, Acquire, Relaxed)
            .is_err()
        {
            continue; // closed by another thread meanwhile
        }
        copy_into_chunk(w, slot, word, record);
        return true;
    }
}

/// Copies `record` into the chunk `word` names, whose slot the caller marked busy (`word |
/// BUSY`) and which has room for it; the chunk is then released, or closed when full.
#[inline(always)]
fn copy_into_chunk<R: Record + ?Sized>(w: &Lane, slot: &Slot, word: u64, record: &R) {
    let len = record.len() as u64;
    let (_, start, used) = chunk_of(word);
    write_record(w, start + used, record);
    if used + len + 128 <= CHUNK {
        // The next record's lines, fetched for writing while the program and the driver run:
        // the ring is larger than a core's cache, so a record's first store to a line would
        // otherwise wait for it (and the next call's locked add for that store).
        prefetch_for_write(ring_at(w, start + used + len));
        prefetch_for_write(ring_at(w, start + used + len + 64));
    }
    if used + len == CHUNK {
        slot.word.store(NO_CHUNK, Release);
        commit(w, start, CHUNK);
    } else {
        slot.word.store(word + len, Release);
    }
}

/// Asks the CPU to fetch the cache line of `p` for writing (x86-64 `prefetchw`; a no-op
/// elsewhere). A hint: it never faults, whatever `p` is.
#[inline(always)]
fn prefetch_for_write(p: *const u8) {
    // `prefetchw` itself (the intrinsic's hint becomes `prefetcht0` without the `prfchw` target
    // feature); CPUs without it execute it as a no-op.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults.
    unsafe {
        std::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The ring's byte for trace offset `at`, which must be reserved by the caller and free.
pub(super) fn ring_at(w: &Lane, at: u64) -> *mut u8 {
    // SAFETY: the mapping holds HEADER + RING bytes while the writer is open, and
    // `at % RING < RING`.
    unsafe { w.map.load(Acquire).add((HEADER + at % RING) as usize) }
}

/// Zeroes `len` bytes of the ring from trace offset `at` (whole chunks in one segment, just
/// reserved and free) when they hold a previous lap's records: space a chunk's records do not
/// fill must read as zero, to the appender and to a reader after a crash. The taker does it, so
/// the chunk's cache lines are its own when its records are copied in (zeroed by the appender
/// on another CPU, each line moved between the CPUs at every record). Chunks not taken yet hold
/// the previous lap's records, which the trace already has: a reader of the ring after a crash
/// drops them by `seq` ([`sharecheck_core::ring`]).
pub(super) fn zero_chunks(w: &Lane, at: u64, len: u64) {
    if at >= RING {
        // SAFETY: the caller's reservation, within one segment (contiguous in the ring).
        unsafe { std::ptr::write_bytes(ring_at(w, at), 0, len as usize) };
    }
}

/// Copies `bytes` to the ring at trace offset `at` (within one segment).
pub(super) fn write_ring(w: &Lane, at: u64, bytes: &[u8]) {
    // SAFETY: the caller reserved `bytes.len()` bytes at `at`, within one segment (so contiguous
    // in the ring), whose slot the previous lap appended: no other thread writes them.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ring_at(w, at), bytes.len()) };
}

/// Writes a record (within one segment) to the ring at trace offset `at`: the kind byte last, so
/// that a reader after a crash finds kind 0 (nothing) where a copy was cut short.
#[inline(always)]
pub(super) fn write_record<R: Record + ?Sized>(w: &Lane, at: u64, record: &R) {
    // SAFETY: the caller reserved `record.len()` bytes at `at`, within one segment (so contiguous
    // in the ring), whose slot the previous lap appended: no other thread writes them.
    let out = unsafe { std::slice::from_raw_parts_mut(ring_at(w, at), record.len()) };
    record.write_to(out);
    std::sync::atomic::compiler_fence(Release);
    // SAFETY: as above: the byte at `at` is the caller's.
    unsafe { ring_at(w, at).write_volatile(record.kind()) };
}

/// Counts `len` bytes from `start` (in one segment) as done; the thread that completes a segment
/// has it appended.
pub(super) fn commit(w: &Lane, start: u64, len: u64) {
    let segment = start / SEGMENT;
    let done = w.done[(segment % SEGMENTS) as usize].fetch_add(len, AcqRel) + len;
    if done == (segment / SEGMENTS + 1) * SEGMENT {
        segment_filled(w, segment);
    }
}

pub(super) fn segment_filled(w: &Lane, segment: u64) {
    let pending = (segment + 1).saturating_sub(w.appended.load(Acquire) / SEGMENT);
    if APPENDER.load(Acquire) != RUNNING || pending >= 2 * WAKE_BATCH {
        // No writer thread, or it does not keep up (all CPUs are busy): the thread that fills
        // a segment appends, as a record's cost, before the ring runs full.
        append_full_segments(w);
        super::appender::start_deferred_appender();
    } else if pending >= WAKE_BATCH {
        // The writer thread is woken for a batch of segments: fewer wake-ups.
        wake_appender();
    }
}

/// Wakes the writer thread if it sleeps (a system call only then).
pub(super) fn wake_appender() {
    WAKE.fetch_add(1, SeqCst);
    if SLEEPING.load(SeqCst) {
        futex_wake(&WAKE, 1);
    }
}

/// A record of its own reservation (a whole number of chunks, padded), for records longer than
/// a chunk, threads without a slot and signal handlers interrupting their thread's copy.
pub(super) fn reserve_and_copy(w: &Lane, record: &[u8]) -> bool {
    let len = record.len() as u64;
    if len == 0 || len > RING - SEGMENT {
        if len > 0 {
            crate::log::warn_once(
                "trace-record-too-long",
                format_args!(
                    "a trace record of {len} bytes is longer than the trace's ring can hold \
                     ({} bytes); it is not written",
                    RING - SEGMENT
                ),
            );
        }
        return len == 0;
    }
    let total = len.div_ceil(CHUNK) * CHUNK;
    let start = w.next.fetch_add(total, AcqRel);
    let mut whole = true;
    let mut at = start;
    while at < start + total {
        let segment = at / SEGMENT;
        let end = ((segment + 1) * SEGMENT).min(start + total);
        // Still committed when the copy is skipped, so that the segment fills and is appended
        // (a reader ends the record's line where its bytes stop).
        if whole && free_for(w, segment) {
            zero_chunks(w, at, end - at);
            let (from, to) = (at - start, end - start);
            let piece = &record[from.min(len) as usize..to.min(len) as usize];
            match from {
                0 => write_record(w, at, piece),
                _ if !piece.is_empty() => write_ring(w, at, piece),
                _ => {}
            }
        } else {
            whole = false;
        }
        commit(w, at, end - at);
        at = end;
    }
    whole
}

/// Whether segment `segment`'s slot is free (the previous lap appended), helping to append while
/// it is not; false once tracing stopped or after waiting too long.
pub(super) fn free_for(w: &Lane, segment: u64) -> bool {
    let needed = (segment + 1).saturating_sub(SEGMENTS) * SEGMENT;
    if w.appended.load(Acquire) >= needed {
        return true;
    }
    HOT.trace.behind.store(true, Relaxed);
    // The wait is bounded while nothing moves: two seconds without a segment appended.
    let mut since = (monotonic_ns(), w.appended.load(Acquire));
    let mut spins = 0u32;
    loop {
        if w.state.load(Acquire) == STOPPED || w.map.load(Acquire).is_null() {
            return false;
        }
        // The segment in the way may wait on chunks of threads that are idle or not running;
        // then help append (unless another thread is appending).
        close_open_chunks_before(w, (w.appended.load(Acquire) / SEGMENT + 1) * SEGMENT);
        append_full_segments(w);
        if w.appended.load(Acquire) >= needed {
            return true;
        }
        spins += 1;
        if spins.is_multiple_of(64) {
            let (now, appended) = (monotonic_ns(), w.appended.load(Acquire));
            if appended != since.1 {
                since = (now, appended); // slow, not stuck
            } else if now.saturating_sub(since.0) > WAIT_NS {
                let oldest = appended / SEGMENT;
                let done = w.done[(oldest % SEGMENTS) as usize].load(Acquire);
                stop(&format!(
                    "a trace record waited 2 s for other threads to finish writing theirs \
                     (lane {}: {} bytes appended, {} reserved, {} of the oldest segment's {} \
                     bytes written); no more records are written",
                    lane_number(w),
                    appended,
                    w.next.load(Acquire),
                    done - (oldest / SEGMENTS) * SEGMENT,
                    SEGMENT
                ));
                return false;
            }
        }
        // Yield, not sleep: measured with 16 threads on 2 CPUs, a thread that stays runnable
        // lets the appending thread and the owners of open chunks run sooner (half the cost per
        // record of sleeping on a futex until a segment is appended).
        std::thread::yield_now();
    }
}
