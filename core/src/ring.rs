//! The trace's staging ring: its layout and record format, shared by the shim's writer and every
//! reader.
//!
//! Records are not copied straight into the trace file. A process copies them into a ring of
//! `RING` bytes mapped from a file next to its trace (`TRACE` + [`SUFFIX`]), and each full segment
//! of `SEGMENT` bytes is converted to JSON Lines and appended to the trace, in order, by a writer
//! thread. The ring's pages are reused, so the kernel provides a page once per ring instead of
//! once per 4 KiB of trace (measured: 4.2 us a new page of a shared file mapping against 1 us a
//! page for `pwrite`, on this project's VM). At a clean exit the rest of the ring is appended and
//! the ring file removed.
//!
//! **Records in the ring** are framed: a kind byte, the record's length in bytes (u32, little
//! endian, the frame included), then its body. The kind byte is written last, so a record whose
//! copy was cut short (the process died during it) has kind 0. Two kinds:
//! - [`JSON`]: the body is the record's JSON line, newline included (records with findings,
//!   events, the process record: whatever is not a plain call).
//! - [`CALL`]: a plain call, compact: the function, its return value, `seq`, `t`, `tid` and one
//!   snapshot per argument ([`crate::ffi::ArgValue::snap`]: a word and a tag). The writer thread
//!   writes its JSON line ([`Converter`]), byte for byte the line the JSON kind would hold, so the
//!   calling thread does not spend its time formatting.
//!
//! Threads take the ring `CHUNK` bytes at a time and pack records into their chunk; the unused
//! end of a chunk stays zero. A reader at a zero kind byte goes on at the next chunk.
//!
//! The ring file's pages belong to the kernel's page cache, so a process that ends without exit
//! handlers (`_exit`, `exec`, a fatal signal, `kill -9`) leaves its last records there. A reader
//! then [`recover`]s them: the ring's records from the header's `appended` position on, in
//! order, converted as the writer would have. A chunk taken in the current lap was zeroed by the
//! thread that took it, so after its records it reads as zero; a chunk not taken yet still holds
//! the previous lap's records, which the trace already has. A reader drops a recovered record
//! whose `seq` the trace already holds: those, and the records of a segment the process appended
//! just before it died, before recording that it did.
//!
//! File layout: a header page (`HEADER` bytes: [`MAGIC`], then little-endian u64 fields: the ring
//! size at 8, the ring bytes appended so far at 16, the trace file's length then at 24, the state
//! of a JSON record cut by the last segment's end at 32 ([`Converter`]) and the function table
//! the compact records refer to at 40 ([`table_id`]), and how the process ended at 48
//! ([`STATE_AT`])), then the ring.

use crate::functions::{encode_snapped, FUNCTIONS};
use crate::json::JsonOut;
use crate::place::{encode_place, Place};

/// How a ring file's name ends: `TRACE.ring`.
pub const SUFFIX: &str = ".ring";
/// The first 8 bytes of a ring file.
pub const MAGIC: &[u8; 8] = b"SCRING02";
/// Bytes before the ring.
pub const HEADER: u64 = 4096;
/// Bytes appended to the trace at once.
pub const SEGMENT: u64 = 64 << 10;
/// Segments in the ring.
pub const SEGMENTS: u64 = 64;
/// The ring's size.
pub const RING: u64 = SEGMENT * SEGMENTS;
/// Bytes a thread reserves at once. Every reservation is a multiple of it, so a chunk never
/// crosses a segment.
pub const CHUNK: u64 = 4096;
const _: () = assert!(SEGMENT % CHUNK == 0 && CHUNK.is_power_of_two());
/// Offsets of the header's fields.
pub const RING_SIZE_AT: usize = 8;
pub const APPENDED_AT: usize = 16;
pub const FILE_AT: usize = 24;
pub const CARRY_AT: usize = 32;
pub const TABLE_AT: usize = 40;
/// What the process said of its ending ([`STOPPED`], [`EXITED`]), for a reader of a ring left
/// beside its trace.
pub const STATE_AT: usize = 48;
/// Tracing stopped (the file size limit, a full disk, a stuck append): the ring keeps what the
/// trace could not take.
pub const STOPPED: u64 = 1;
/// The process ran its exit handlers: it exited normally, though its exit record may be missing
/// (tracing had stopped) or in the ring.
pub const EXITED: u64 = 2;

/// The [`STATE_AT`] word of a ring file's header (0 if it is too short).
pub fn state(header: &[u8]) -> u64 {
    if header.len() >= STATE_AT + 8 {
        u64_at(header, STATE_AT)
    } else {
        0
    }
}

/// Record kinds (the frame's first byte).
pub const JSON: u8 = 1;
pub const CALL: u8 = 2;
/// The frame: kind and length.
pub const FRAME: usize = 5;
/// A compact call record: the frame, then the function (u16), the return value (i32), `seq`
/// and `t` (u64), `tid` (i32), then a word (u64) per argument and a tag (u8) per argument.
pub const CALL_HEAD: usize = FRAME + 2 + 4 + 8 + 8 + 4;

/// A compact call record's length with `args` arguments (and no place).
pub const fn call_len(args: usize) -> usize {
    CALL_HEAD + 9 * args
}

/// A compact call record may end with where the call acted ([`Place`]), after its tags: a byte
/// saying which of context (1), device (2) and UUID (4) are known, the context (u64), the device
/// (i32), the UUID (16 bytes), then how many devices it cannot reach (u8) and their UUIDs (16
/// bytes each). A place naming more unreachable devices than [`PLACE_UNREACHABLE_MAX`] is
/// written in a JSON record instead.
pub const PLACE_HEAD: usize = 1 + 8 + 4 + 16 + 1;
/// The most unreachable devices a compact record's place names.
pub const PLACE_UNREACHABLE_MAX: usize = 8;

/// The bytes a place adds to a compact call record.
#[inline]
pub fn place_len(place: Option<&Place>) -> usize {
    place.map_or(0, |p| PLACE_HEAD + 16 * p.unreachable.len())
}

/// Whether a compact call record can carry `place`.
#[inline]
pub fn place_fits(place: Option<&Place>) -> bool {
    place.is_none_or(|p| p.unreachable.len() <= PLACE_UNREACHABLE_MAX)
}

/// The JSON line of a compact call record is at most this long (checked by a test on every
/// function; a writer leaves this much room before converting one).
pub const CALL_JSON_MAX: usize = 2048;

/// A compact call record, to be written into `out` (at least [`call_len`] bytes) by [`put_call`].
pub struct Call<'a> {
    pub function: u16,
    pub ret: i32,
    pub seq: u64,
    pub t: u64,
    pub tid: i32,
    pub words: &'a [u64],
    pub tags: &'a [u8],
    /// Where the call acted ([`place_fits`] it).
    pub place: Option<&'a Place>,
}

/// Writes `call` framed into `out[..call_len]` with its kind byte 0 (the writer sets it last),
/// and returns the length.
#[inline(always)]
pub fn put_call(out: &mut [u8], call: &Call) -> usize {
    let n = call
        .words
        .len()
        .min(call.tags.len())
        .min(crate::functions::MAX_ARGS);
    let len = call_len(n) + place_len(call.place);
    let out = &mut out[..len];
    if let Some(place) = call.place {
        put_place(&mut out[call_len(n)..], place);
    }
    let p = out.as_mut_ptr();
    // SAFETY: `out` holds `len` bytes: the head (`CALL_HEAD`), `n` words and `n` tags, each
    // store within it (unaligned stores of plain integers).
    unsafe {
        p.write(0);
        p.add(1).cast::<u32>().write_unaligned((len as u32).to_le());
        p.add(5)
            .cast::<u16>()
            .write_unaligned(call.function.to_le());
        p.add(7).cast::<i32>().write_unaligned(call.ret.to_le());
        p.add(11).cast::<u64>().write_unaligned(call.seq.to_le());
        p.add(19).cast::<u64>().write_unaligned(call.t.to_le());
        p.add(27).cast::<i32>().write_unaligned(call.tid.to_le());
        for k in 0..n {
            p.add(CALL_HEAD + 8 * k)
                .cast::<u64>()
                .write_unaligned(call.words[k].to_le());
            p.add(CALL_HEAD + 8 * n + k).write(call.tags[k]);
        }
    }
    len
}

/// Writes a place's bytes (see [`PLACE_HEAD`]) into `out`, exactly [`place_len`] of it.
fn put_place(out: &mut [u8], place: &Place) {
    let known = u8::from(place.context.is_some())
        | u8::from(place.device.is_some()) << 1
        | u8::from(place.uuid.is_some()) << 2;
    out[0] = known;
    out[1..9].copy_from_slice(&place.context.unwrap_or(0).to_le_bytes());
    out[9..13].copy_from_slice(&place.device.unwrap_or(0).to_le_bytes());
    out[13..29].copy_from_slice(&place.uuid.unwrap_or([0; 16]));
    let count = place.unreachable.len().min(PLACE_UNREACHABLE_MAX);
    out[29] = count as u8;
    for (k, uuid) in place.unreachable.iter().take(count).enumerate() {
        out[PLACE_HEAD + 16 * k..PLACE_HEAD + 16 * (k + 1)].copy_from_slice(uuid);
    }
}

/// Reads a place's bytes, all of `bytes`; `None` when they are not one ([`put_place`]).
fn place_of(bytes: &[u8]) -> Option<Place> {
    if bytes.len() < PLACE_HEAD {
        return None;
    }
    let count = usize::from(bytes[29]);
    if count > PLACE_UNREACHABLE_MAX || bytes.len() != PLACE_HEAD + 16 * count || bytes[0] > 7 {
        return None;
    }
    let uuid = |at: usize| -> [u8; 16] { bytes[at..at + 16].try_into().unwrap_or_default() };
    let known = bytes[0];
    Some(Place {
        context: (known & 1 != 0).then(|| u64_at(bytes, 1)),
        device: (known & 2 != 0).then(|| u32_at(bytes, 9) as i32),
        uuid: (known & 4 != 0).then(|| uuid(13)),
        unreachable: (0..count).map(|k| uuid(PLACE_HEAD + 16 * k)).collect(),
    })
}

/// Identifies the function table compact records refer to (the order of functions and their
/// parameters): a reader of another table does not decode them.
pub fn table_id() -> u64 {
    // FNV-1a over every symbol and parameter name, in order.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes.iter().chain(std::iter::once(&0u8)) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for f in FUNCTIONS {
        eat(f.symbol.as_bytes());
        for p in f.params {
            eat(p.name.as_bytes());
        }
    }
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// Where JSON Lines go as the ring is converted: room for `n` more bytes in a buffer (the writer
/// writes the buffer out when it is short of room; a reader's buffer grows).
pub trait Sink {
    fn room(&mut self, n: usize) -> Result<&mut Vec<u8>, String>;
}

impl Sink for Vec<u8> {
    fn room(&mut self, _: usize) -> Result<&mut Vec<u8>, String> {
        Ok(self)
    }
}

/// Converts the ring's records to JSON Lines, segment after segment, in order. Its state is that
/// of a JSON record cut by a segment's end: the bytes of it still to pass (or, high bit set, to
/// skip: the record was found damaged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Converter {
    pub carry: u64,
}

const SKIP: u64 = 1 << 63;

impl Converter {
    /// Converts `bytes`, ring bytes that start at a chunk boundary and continue where the last
    /// call left off, into `sink`. Damaged bytes (a record cut short by a crash, zero space) are
    /// skipped to the next chunk; a JSON record found damaged ends its line where it breaks, for
    /// readers to skip as a cut record.
    pub fn convert(&mut self, bytes: &[u8], sink: &mut impl Sink) -> Result<(), String> {
        let mut i = 0usize;
        if self.carry != 0 {
            // The rest of a JSON record the last bytes cut.
            let broken = self.carry & SKIP != 0;
            let left = (self.carry & !SKIP) as usize;
            let take = left.min(bytes.len());
            let broken = broken || !pass(&bytes[..take], true, sink)?;
            let rest = (left - take) as u64;
            self.carry = match (rest, broken) {
                (0, _) => 0,
                (rest, true) => SKIP | rest,
                (rest, false) => rest,
            };
            i = take;
        }
        while i < bytes.len() {
            let chunk_end = ((i / CHUNK as usize) + 1) * CHUNK as usize;
            let kind = bytes[i];
            if kind == 0 || i + FRAME > bytes.len() {
                i = chunk_end;
                continue;
            }
            let len = u32_at(bytes, i + 1) as usize;
            match kind {
                JSON if len > FRAME => {
                    let end = i + len;
                    let body = &bytes[i + FRAME..end.min(bytes.len())];
                    // A record within its chunk is whole once its kind byte is there (written
                    // last); only a longer one's later pieces may be missing.
                    let whole = if len <= CHUNK as usize {
                        for piece in body.chunks(SEGMENT as usize) {
                            sink.room(piece.len())?.extend_from_slice(piece);
                        }
                        true
                    } else {
                        pass(body, false, sink)?
                    };
                    if end > bytes.len() {
                        let left = (end - bytes.len()) as u64;
                        self.carry = if whole { left } else { SKIP | left };
                        return Ok(());
                    }
                    i = end;
                }
                CALL if len >= CALL_HEAD && i + len <= chunk_end.min(bytes.len()) => {
                    if call_line(&bytes[i..i + len], sink)? {
                        i += len;
                    } else {
                        i = chunk_end;
                    }
                }
                _ => i = chunk_end,
            }
        }
        Ok(())
    }
}

/// Passes a JSON record's bytes through (`started`: the record's first bytes were passed
/// before); at a zero byte (bytes never copied) the line is ended there and false returned.
fn pass(body: &[u8], started: bool, sink: &mut impl Sink) -> Result<bool, String> {
    let (good, whole) = match body.iter().position(|&b| b == 0) {
        Some(at) => (&body[..at], false),
        None => (body, true),
    };
    for piece in good.chunks(SEGMENT as usize) {
        sink.room(piece.len())?.extend_from_slice(piece);
    }
    if !whole && (started || !good.is_empty()) {
        sink.room(1)?.push(b'\n');
    }
    Ok(whole)
}

/// Writes a compact call record's JSON line; false (nothing written) for one that is not a valid
/// record of this table.
fn call_line(rec: &[u8], sink: &mut impl Sink) -> Result<bool, String> {
    let function = u16::from_le_bytes([rec[5], rec[6]]) as usize;
    let Some(info) = FUNCTIONS.get(function) else {
        return Ok(false);
    };
    let n = info.params.len();
    let place = match rec.len().cmp(&call_len(n)) {
        std::cmp::Ordering::Less => return Ok(false),
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => match place_of(&rec[call_len(n)..]) {
            Some(place) => Some(place),
            None => return Ok(false),
        },
    };
    let ret = u32_at(rec, 7) as i32;
    let seq = u64_at(rec, 11);
    let t = u64_at(rec, 19);
    let tid = u32_at(rec, 27) as i32;
    let mut words = [0u64; crate::functions::MAX_ARGS];
    for (k, word) in words.iter_mut().enumerate().take(n) {
        *word = u64_at(rec, CALL_HEAD + 8 * k);
    }
    let tags = &rec[CALL_HEAD + 8 * n..call_len(n)];
    let buf = sink.room(CALL_JSON_MAX)?;
    let mark = buf.len();
    let mut w = JsonOut::new(buf);
    w.begin_call_record_of(seq, t, i64::from(tid), info.record_head);
    if !encode_snapped(info.id, &words[..n], tags, &mut w) {
        buf.truncate(mark);
        return Ok(false);
    }
    w.end_object();
    w.kv_i64("r", i64::from(ret));
    if let Some(place) = &place {
        encode_place(&mut w, place);
    }
    w.end_record();
    Ok(true)
}

/// The largest ring a reader accepts: the writer's is [`RING`]; a header that says more (a
/// damaged or planted file) is refused before the ring is read.
pub const MAX_RING: u64 = 16 * RING;

/// Checks a ring file's header (its first [`HEADER`] bytes, or fewer if the file is shorter)
/// against the file's length and the trace's, before anything else of it is read.
pub fn check_header(header: &[u8], file_len: u64, trace_len: u64) -> Result<(), String> {
    if header.len() < HEADER as usize || header[..6] != MAGIC[..6] {
        return Err("not a sharecheck ring file (no header)".into());
    }
    if &header[..8] != MAGIC {
        return Err(format!(
            "a ring file of another format ({}), written by another version of the shim",
            String::from_utf8_lossy(&header[..8])
        ));
    }
    let ring = u64_at(header, RING_SIZE_AT);
    let file = u64_at(header, FILE_AT);
    if ring == 0 || ring % SEGMENT != 0 || ring > MAX_RING || file_len != HEADER + ring {
        return Err(format!(
            "a ring file of {file_len} bytes says its ring is {ring} bytes"
        ));
    }
    if trace_len < file {
        return Err(format!(
            "the trace holds {trace_len} bytes but its ring says {file} were written"
        ));
    }
    if u64_at(header, TABLE_AT) != table_id() {
        return Err(
            "the ring's records were written by a shim with other functions than this \
             sharecheck knows (another version)"
                .into(),
        );
    }
    Ok(())
}

/// The records the trace file (of `trace_len` bytes) lacks, from the ring file's bytes, as JSON
/// Lines: in order, continuing the trace where its appended part ends. An error names what is
/// wrong with the ring file.
pub fn recover(trace_len: u64, ring_file: &[u8]) -> Result<Vec<u8>, String> {
    check_header(
        ring_file.get(..HEADER as usize).unwrap_or(ring_file),
        ring_file.len() as u64,
        trace_len,
    )?;
    let ring = u64_at(ring_file, RING_SIZE_AT);
    let appended = u64_at(ring_file, APPENDED_AT);
    let data = &ring_file[HEADER as usize..];
    // From the appended position on, one ring's worth (the ring cannot hold more).
    let start = (appended % ring) as usize;
    let mut stream = Vec::with_capacity(ring as usize);
    stream.extend_from_slice(&data[start..]);
    stream.extend_from_slice(&data[..start]);
    let mut out = Vec::new();
    let mut converter = Converter {
        carry: u64_at(ring_file, CARRY_AT),
    };
    converter.convert(&stream, &mut out)?;
    Ok(out)
}

/// This boot of this machine (`/proc/sys/kernel/random/boot_id`), which the shim writes in each
/// process record: a reader that finds a ring left behind checks whether its process still runs
/// only when the trace was written under the same boot (a pid names a process of one machine's
/// boot; a trace on a shared file system may come from another machine).
pub fn boot_id() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim();
    (id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::*;
    use crate::functions::{args, CallArgs, MAX_ARGS};
    use std::ffi::c_void;

    fn fp(bytes: &[u8]) -> u64 {
        bytes
            .iter()
            .fold(7u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
    }

    /// The JSON line `write_call` formats for a plain call.
    fn json_line<A: CallArgs>(a: &A, outcome: Outcome, seq: u64, t: u64, tid: i32) -> Vec<u8> {
        line_and_record(a, outcome, (seq, t, tid), None).0
    }

    /// The JSON line `write_call` formats for a plain call with a place, and the compact record
    /// the writer would convert to it.
    fn line_and_record<A: CallArgs>(
        a: &A,
        outcome: Outcome,
        (seq, t, tid): (u64, u64, i32),
        place: Option<&Place>,
    ) -> (Vec<u8>, Vec<u8>) {
        let Outcome::Returned(ret) = outcome else {
            unreachable!()
        };
        let mut buf = Vec::new();
        let mut w = JsonOut::with_fingerprint(&mut buf, fp);
        let member = format!(",\"tid\":{tid}");
        w.begin_call_record(seq, t, member.as_bytes(), A::ID.info().record_head);
        a.encode(&mut w, outcome);
        w.end_object();
        w.kv_i64("r", i64::from(ret));
        if let Some(place) = place {
            encode_place(&mut w, place);
        }
        w.end_record();
        (buf, compact_at(a, ret, (seq, t, tid), place))
    }

    /// The same call's compact record, framed and finished as the writer copies it.
    fn compact<A: CallArgs>(a: &A, outcome: Outcome, seq: u64, t: u64, tid: i32) -> Vec<u8> {
        line_and_record(a, outcome, (seq, t, tid), None).1
    }

    /// [`compact`] of a call that returned `ret`, with a place.
    fn compact_at<A: CallArgs>(
        a: &A,
        ret: i32,
        at: (u64, u64, i32),
        place: Option<&Place>,
    ) -> Vec<u8> {
        let (seq, t, tid) = at;
        let outcome = Outcome::Returned(ret);
        let (mut words, mut tags) = ([0u64; MAX_ARGS], [0u8; MAX_ARGS]);
        a.snap(outcome, fp, &mut words, &mut tags);
        let n = A::ID.info().params.len();
        let mut out = vec![0u8; call_len(MAX_ARGS) + place_len(place)];
        let len = put_call(
            &mut out,
            &Call {
                function: A::ID as u16,
                ret,
                seq,
                t,
                tid,
                words: &words[..n],
                tags: &tags[..n],
                place,
            },
        );
        out.truncate(len);
        out[0] = CALL;
        out
    }

    fn converted(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Converter::default().convert(bytes, &mut out).unwrap();
        out
    }

    fn json_record(line: &[u8]) -> Vec<u8> {
        let mut r = vec![JSON];
        r.extend_from_slice(&((FRAME + line.len()) as u32).to_le_bytes());
        r.extend_from_slice(line);
        r
    }

    /// Every kind of argument the compact record holds: the writer's line is the one the calling
    /// thread would have formatted, byte for byte.
    #[test]
    fn a_compact_call_converts_to_the_line_json_formatting_writes() {
        let mut can = Int(1);
        let mut handle = CUipcMemHandle {
            reserved: [0x41; 64],
        };
        let mut event = CUevent(0x7f00_1234 as *mut c_void);
        let null: *mut Int = std::ptr::null_mut();
        let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
            {
                let a = args::cuDeviceCanAccessPeer {
                    canAccessPeer: Out(&mut can),
                    dev: CUdevice(0),
                    peerDev: CUdevice(1),
                };
                let o = Outcome::Returned(0);
                (json_line(&a, o, 1, 2, 3), compact(&a, o, 1, 2, 3))
            },
            {
                // Failed: the out-parameter is the pointer, not read.
                let a = args::cuDeviceCanAccessPeer {
                    canAccessPeer: Out(&mut can),
                    dev: CUdevice(-7),
                    peerDev: CUdevice(i32::MAX),
                };
                let o = Outcome::Returned(101);
                (json_line(&a, o, 9, 0, -1), compact(&a, o, 9, 0, -1))
            },
            {
                let a = args::cuDeviceCanAccessPeer {
                    canAccessPeer: Out(null),
                    dev: CUdevice(0),
                    peerDev: CUdevice(0),
                };
                let o = Outcome::Returned(0);
                (
                    json_line(&a, o, u64::MAX, u64::MAX, i32::MIN),
                    compact(&a, o, u64::MAX, u64::MAX, i32::MIN),
                )
            },
            {
                let a = args::cuMemcpyPeerAsync {
                    dstDevice: CUdeviceptr(0x7f00_0000_0000),
                    dstContext: CUcontext(0x55 as *mut c_void),
                    srcDevice: CUdeviceptr(u64::MAX),
                    srcContext: CUcontext(std::ptr::null_mut()),
                    ByteCount: Size(usize::MAX),
                    hStream: CUstream(1 as *mut c_void),
                };
                let o = Outcome::Returned(0);
                (json_line(&a, o, 5, 6, 7), compact(&a, o, 5, 6, 7))
            },
            {
                let a = args::cuIpcGetMemHandle {
                    pHandle: Out(&mut handle),
                    dptr: CUdeviceptr(0x1000),
                };
                let o = Outcome::Returned(0);
                (json_line(&a, o, 5, 6, 7), compact(&a, o, 5, 6, 7))
            },
            {
                let a = args::cuIpcOpenMemHandle_v2 {
                    pdptr: Out(std::ptr::null_mut()),
                    handle: CUipcMemHandle {
                        reserved: [0x42; 64],
                    },
                    Flags: IpcMemFlags(1),
                };
                let o = Outcome::Returned(1);
                (json_line(&a, o, 5, 6, 7), compact(&a, o, 5, 6, 7))
            },
            {
                let a = args::cuIpcOpenEventHandle {
                    phEvent: Out(&mut event),
                    handle: CUipcEventHandle { reserved: [0; 64] },
                };
                let o = Outcome::Returned(0);
                (json_line(&a, o, 5, 6, 7), compact(&a, o, 5, 6, 7))
            },
            {
                let a = args::cuStreamAttachMemAsync {
                    hStream: CUstream(2 as *mut c_void),
                    dptr: CUdeviceptr(0x2000),
                    length: Size(0),
                    flags: AttachFlags(0x4 | 0x10),
                };
                let o = Outcome::Returned(0);
                (json_line(&a, o, 5, 6, 7), compact(&a, o, 5, 6, 7))
            },
        ];
        // With a place: an export's context, device and UUID; an open's devices it cannot
        // reach, as many as a compact record holds; parts unknown.
        let uuid = |b: u8| [b; 16];
        let places = [
            Place {
                context: Some(0x5555_0000_1234),
                device: Some(1),
                uuid: Some(uuid(0xab)),
                unreachable: vec![],
            },
            Place {
                context: None,
                device: Some(-1),
                uuid: None,
                unreachable: (0..PLACE_UNREACHABLE_MAX as u8).map(uuid).collect(),
            },
            Place {
                context: Some(u64::MAX),
                ..Place::default()
            },
            Place::default(),
        ];
        let a = args::cuIpcGetMemHandle {
            pHandle: Out(&mut handle),
            dptr: CUdeviceptr(0x1000),
        };
        let o = Outcome::Returned(0);
        let cases = cases.into_iter().chain(places.iter().map(|p| {
            let at = (5, 6, 7);
            line_and_record(&a, o, at, Some(p))
        }));
        for (line, record) in cases {
            let line = String::from_utf8(line).unwrap();
            assert_eq!(String::from_utf8(converted(&record)).unwrap(), line);
            assert!(
                record.len() <= 512,
                "a record made on the stack is at most 512 bytes"
            );
            assert!(
                !line.contains("4141"),
                "a capability's bytes are never written"
            );
        }
    }

    /// A shareable handle argument is what the call's handle type makes it: an export's fd
    /// (`"*shareableHandle":7`), an import's fd (`"osHandle":7`, the number itself), a FABRIC
    /// handle's fingerprint (`"*...":"fp:..."`, never its bytes), or the address (a failed
    /// export, an unknown type), in the JSON line and the compact record alike.
    #[test]
    fn shareable_handles_are_written_by_their_handle_type() {
        let mut fd: std::ffi::c_int = 7;
        let mut fabric = [0x41u8; 64];
        let fd_at = (&mut fd as *mut std::ffi::c_int).cast::<c_void>();
        let fabric_at = fabric.as_mut_ptr().cast::<c_void>();
        let export = |shared: *mut c_void, kind: u32| args::cuMemExportToShareableHandle {
            shareableHandle: ShareableHandleOut(shared),
            handle: CUmemGenericAllocationHandle(0xa1),
            handleType: MemHandleTypes(kind),
            flags: ReservedFlags64(0),
        };
        let import = |shared: *mut c_void, kind: u32| args::cuMemImportFromShareableHandle {
            handle: Out(std::ptr::null_mut()),
            osHandle: ShareableHandleIn(shared),
            shHandleType: MemHandleTypes(kind),
        };
        let pool_import =
            |shared: *mut c_void, kind: u32| args::cuMemPoolImportFromShareableHandle {
                pool_out: Out(std::ptr::null_mut()),
                handle: ShareableHandleIn(shared),
                handleType: MemHandleTypes(kind),
                flags: ReservedFlags64(0),
            };
        let ok = Outcome::Returned(0);
        let refused = Outcome::Returned(800);
        fn both<A: CallArgs>(a: &A, o: Outcome) -> (Vec<u8>, Vec<u8>) {
            (json_line(a, o, 1, 2, 3), compact(a, o, 1, 2, 3))
        }
        let cases = [
            (both(&export(fd_at, 1), ok), r#""*shareableHandle":7,"#),
            (
                both(&export(fabric_at, 8), ok),
                r#""*shareableHandle":"fp:"#,
            ),
            (
                both(&export(fd_at, 1), Outcome::Returned(1)),
                r#""shareableHandle":"0x"#,
            ),
            (both(&export(fd_at, 2), ok), r#""shareableHandle":"0x"#),
            (
                both(&import(7 as *mut c_void, 1), Outcome::Returned(1)),
                r#""osHandle":7,"#,
            ),
            (both(&import(fabric_at, 8), ok), r#""*osHandle":"fp:"#),
            // A refused import's bytes are read only through the shim's reader (none here).
            (both(&import(fabric_at, 8), refused), r#""osHandle":"0x"#),
            (both(&pool_import(fabric_at, 8), ok), r#""*handle":"fp:"#),
        ];
        for ((line, record), member) in cases {
            let line = String::from_utf8(line).unwrap();
            assert!(line.contains(member), "{member}: {line}");
            assert!(
                !line.contains("4141"),
                "a FABRIC handle's bytes are never written: {line}"
            );
            assert_eq!(String::from_utf8(converted(&record)).unwrap(), line);
        }
    }

    /// A place's bytes that are not one (a count past the bound, a length that disagrees,
    /// unknown bits) make the record unreadable, skipped to its chunk's end, never misread.
    #[test]
    fn a_damaged_place_is_never_read_as_one() {
        let mut handle = CUipcMemHandle { reserved: [1; 64] };
        let a = args::cuIpcGetMemHandle {
            pHandle: Out(&mut handle),
            dptr: CUdeviceptr(0x1000),
        };
        let place = Place {
            context: Some(1),
            unreachable: vec![[2; 16]],
            ..Place::default()
        };
        let good = compact_at(&a, 0, (1, 2, 3), Some(&place));
        assert!(!converted(&good).is_empty());
        let n = <args::cuIpcGetMemHandle as CallArgs>::ID
            .info()
            .params
            .len();
        let at = call_len(n);
        type Damage<'a> = &'a dyn Fn(&mut Vec<u8>);
        let damage: [Damage; 4] = [
            &|r| r[at] = 8,                                      // unknown bits
            &|r| r[at + 29] = (PLACE_UNREACHABLE_MAX + 1) as u8, // past the bound
            &|r| r[at + 29] = 2,                                 // the length says 1
            &|r| {
                r.truncate(at + PLACE_HEAD - 1); // too short for a place
                let len = (r.len() as u32).to_le_bytes();
                r[1..5].copy_from_slice(&len);
            },
        ];
        for (k, damage) in damage.iter().enumerate() {
            let mut record = good.clone();
            damage(&mut record);
            assert!(converted(&record).is_empty(), "damage {k}");
        }
    }

    #[test]
    fn every_compact_function_has_a_snapshot_per_argument_and_a_bounded_line() {
        for f in FUNCTIONS {
            assert!(f.params.len() <= MAX_ARGS, "{}", f.symbol);
            // The longest values every argument can have: the line stays within the bound.
            let words = vec![u64::MAX; f.params.len()];
            let mut out = Vec::new();
            let mut w = JsonOut::new(&mut out);
            for tag in [0u8, 1] {
                let tags = vec![tag; f.params.len()];
                w.begin_call_record_of(u64::MAX, u64::MAX, i64::from(i32::MIN), f.record_head);
                if encode_snapped(f.id, &words, &tags, &mut w) {
                    w.end_object();
                    w.kv_i64("r", i64::from(i32::MIN));
                    // The longest place a compact record holds.
                    encode_place(
                        &mut w,
                        &Place {
                            context: Some(u64::MAX),
                            device: Some(i32::MIN),
                            uuid: Some([0xff; 16]),
                            unreachable: vec![[0xff; 16]; PLACE_UNREACHABLE_MAX],
                        },
                    );
                    w.end_record();
                }
            }
            for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                assert!(
                    line.len() < CALL_JSON_MAX,
                    "{}: {} bytes",
                    f.symbol,
                    line.len()
                );
            }
        }
        // A structure read through a pointer is not compact: such calls are formatted at once.
        const { assert!(!<args::cuLogicalEndpointCreate as CallArgs>::COMPACT) };
        const { assert!(<args::cuDeviceCanAccessPeer as CallArgs>::COMPACT) };
    }

    #[test]
    fn records_in_chunks_zero_space_and_a_cut_copy_are_read_as_the_writer_left_them() {
        let mut can = Int(1);
        let a = args::cuDeviceCanAccessPeer {
            canAccessPeer: Out(&mut can),
            dev: CUdevice(0),
            peerDev: CUdevice(1),
        };
        let o = Outcome::Returned(0);
        let mut ring = vec![0u8; 3 * CHUNK as usize];
        // Chunk 0: a call, a JSON event, then zeros.
        let call = compact(&a, o, 1, 10, 5);
        let event = json_record(b"{\"seq\":2,\"event\":\"x\"}\n");
        ring[..call.len()].copy_from_slice(&call);
        ring[call.len()..call.len() + event.len()].copy_from_slice(&event);
        // Chunk 1: a call whose kind byte was never written (the copy was cut), then a call the
        // same thread never wrote after it.
        let cut = compact(&a, o, 3, 30, 5);
        let c1 = CHUNK as usize;
        ring[c1 + 1..c1 + cut.len()].copy_from_slice(&cut[1..]);
        // Chunk 2: a call.
        let last = compact(&a, o, 4, 40, 6);
        let c2 = 2 * CHUNK as usize;
        ring[c2..c2 + last.len()].copy_from_slice(&last);
        let text = String::from_utf8(converted(&ring)).unwrap();
        let seqs: Vec<&str> = text.lines().map(|l| l.split(',').next().unwrap()).collect();
        assert_eq!(seqs, ["{\"seq\":1", "{\"seq\":2", "{\"seq\":4"], "{text}");
        assert!(text.ends_with("\"r\":0}\n"));
    }

    #[test]
    fn a_json_record_across_segments_is_carried_and_a_damaged_one_ends_its_line() {
        let line = format!(
            "{{\"seq\":1,\"pad\":\"{}\"}}\n",
            "x".repeat(3 * CHUNK as usize)
        );
        let record = json_record(line.as_bytes());
        let mut ring = vec![0u8; 2 * SEGMENT as usize];
        let at = SEGMENT as usize - CHUNK as usize;
        ring[at..at + record.len()].copy_from_slice(&record);
        let mut c = Converter::default();
        let mut out = Vec::new();
        c.convert(&ring[..SEGMENT as usize], &mut out).unwrap();
        assert!(c.carry > 0 && c.carry & SKIP == 0);
        c.convert(&ring[SEGMENT as usize..], &mut out).unwrap();
        assert_eq!(c, Converter::default());
        assert_eq!(String::from_utf8(out).unwrap(), line);

        // Its second piece never copied (tracing stopped): the line ends where the bytes stop,
        // and nothing of the rest is read as records.
        ring[SEGMENT as usize..].fill(0);
        let mut c = Converter::default();
        let mut out = Vec::new();
        c.convert(&ring[..SEGMENT as usize], &mut out).unwrap();
        c.convert(&ring[SEGMENT as usize..], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert!(text.ends_with("xx\n") && !text.ends_with("}\n"));
    }

    #[test]
    fn garbage_never_panics_the_converter() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut ring = vec![0u8; 4 * CHUNK as usize];
        for round in 0..200 {
            for b in &mut ring {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly small bytes, so kinds and short lengths come up often.
                *b = if round % 2 == 0 {
                    (x % 4) as u8
                } else {
                    x as u8
                };
            }
            let mut c = Converter::default();
            let mut out = Vec::new();
            c.convert(&ring, &mut out).unwrap();
            c.convert(&ring, &mut out).unwrap();
        }
    }

    fn ring_file(appended: u64, file: u64, fill: impl Fn(&mut [u8])) -> Vec<u8> {
        let mut f = vec![0u8; (HEADER + RING) as usize];
        f[..8].copy_from_slice(MAGIC);
        f[RING_SIZE_AT..RING_SIZE_AT + 8].copy_from_slice(&RING.to_le_bytes());
        f[APPENDED_AT..APPENDED_AT + 8].copy_from_slice(&appended.to_le_bytes());
        f[FILE_AT..FILE_AT + 8].copy_from_slice(&file.to_le_bytes());
        f[TABLE_AT..TABLE_AT + 8].copy_from_slice(&table_id().to_le_bytes());
        fill(&mut f[HEADER as usize..]);
        f
    }

    #[test]
    fn the_unappended_records_continue_the_trace_across_the_ring_end() {
        // Laps ago the ring wrapped: 2 rings and 15 segments appended, so the rest starts at the
        // last segment of the ring and wraps to its start.
        let appended = 2 * RING + RING - SEGMENT;
        let f = ring_file(appended, 1000, |d| {
            let start = (RING - SEGMENT) as usize;
            let a = json_record(b"{\"seq\":7}\n");
            d[start..start + a.len()].copy_from_slice(&a);
            let b = json_record(b"{\"seq\":8}\n");
            d[..b.len()].copy_from_slice(&b);
        });
        let got = recover(1000, &f).unwrap();
        assert_eq!(got, b"{\"seq\":7}\n{\"seq\":8}\n");
        // A longer trace (the process died after writing, before recording it): read the same.
        assert_eq!(recover(5000, &f).unwrap(), got);
    }

    #[test]
    fn an_empty_ring_recovers_nothing_and_bad_files_are_named() {
        assert!(recover(0, &ring_file(0, 0, |_| {})).unwrap().is_empty());
        assert!(recover(0, b"short")
            .unwrap_err()
            .contains("not a sharecheck ring"));
        let mut f = ring_file(0, 0, |_| {});
        f.truncate(f.len() - 1);
        assert!(recover(0, &f).unwrap_err().contains("says its ring is"));
        assert!(recover(5, &ring_file(SEGMENT, 9, |_| {}))
            .unwrap_err()
            .contains("were written"));
        let mut old = ring_file(0, 0, |_| {});
        old[..8].copy_from_slice(b"SCRING01");
        assert!(recover(0, &old).unwrap_err().contains("another format"));
        let mut other = ring_file(0, 0, |_| {});
        other[TABLE_AT] ^= 1;
        assert!(recover(0, &other).unwrap_err().contains("other functions"));
    }
}
