//! The trace's staging ring: its layout, shared by the shim's writer and every reader.
//!
//! Records are not copied straight into the trace file. A process copies them into a ring of
//! `RING` bytes mapped from a file next to its trace (`TRACE` + [`SUFFIX`]), and each full segment
//! of `SEGMENT` bytes is appended to the trace with one `pwrite`, in order. The ring's pages are
//! reused, so the kernel provides a page once per ring instead of once per 4 KiB of trace
//! (measured: 4.2 us a new page of a shared file mapping against 1 us a page for `pwrite`, on this
//! project's VM). At a clean exit the rest of the ring is appended and the ring file removed.
//!
//! The ring file's pages belong to the kernel's page cache, so a process that ends without exit
//! handlers (`_exit`, `exec`, a fatal signal, `kill -9`) leaves its last records there. A reader
//! then [`recover`]s them: the bytes of the ring from the trace file's length on, in order. Every
//! byte of the ring at or past the trace's length is either of the current lap or zero (a segment
//! is cleared after it is appended, and reused only after), so the recovered bytes continue the
//! trace exactly; zero bytes (space never filled) and a record cut short are skipped as in any
//! trace. A reader drops a recovered record whose `seq` the trace already holds, which can only
//! happen when the process died between appending a segment and clearing it.
//!
//! File layout: a header page (`HEADER` bytes: [`MAGIC`], then the ring size and the trace bytes
//! appended so far as little-endian u64 at 8 and 16), then the ring.

/// How a ring file's name ends: `TRACE.ring`.
pub const SUFFIX: &str = ".ring";
/// The first 8 bytes of a ring file.
pub const MAGIC: &[u8; 8] = b"SCRING01";
/// Bytes before the ring.
pub const HEADER: u64 = 4096;
/// Bytes appended to the trace at once.
pub const SEGMENT: u64 = 64 << 10;
/// Segments in the ring.
pub const SEGMENTS: u64 = 16;
/// The ring's size.
pub const RING: u64 = SEGMENT * SEGMENTS;
/// Offsets in the header of the ring size and of the trace bytes appended.
pub const RING_SIZE_AT: usize = 8;
pub const APPENDED_AT: usize = 16;

/// The bytes of records the trace file (of `trace_len` bytes) lacks, from the ring file's bytes:
/// in order, continuing the trace exactly where it ends (possibly in the middle of a record).
/// Zero bytes are left in (readers skip them). An error names what is wrong with the ring file.
pub fn recover(trace_len: u64, ring_file: &[u8]) -> Result<Vec<u8>, String> {
    if ring_file.len() < HEADER as usize || &ring_file[..8] != MAGIC {
        return Err("not a sharecheck ring file (no header)".into());
    }
    let field = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&ring_file[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let ring = field(RING_SIZE_AT);
    let appended = field(APPENDED_AT);
    if ring == 0 || ring % SEGMENT != 0 || ring_file.len() as u64 != HEADER + ring {
        return Err(format!(
            "a ring file of {} bytes says its ring is {ring} bytes",
            ring_file.len()
        ));
    }
    if trace_len < appended {
        return Err(format!(
            "the trace holds {trace_len} bytes but its ring says {appended} were appended"
        ));
    }
    let data = &ring_file[HEADER as usize..];
    let mut out = Vec::with_capacity(ring as usize);
    // From the trace's end on, one ring's worth (the ring cannot hold more).
    let start = trace_len % ring;
    out.extend_from_slice(&data[start as usize..]);
    out.extend_from_slice(&data[..start as usize]);
    // Trailing space never filled.
    let used = out.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    out.truncate(used);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring_file(appended: u64, fill: impl Fn(&mut [u8])) -> Vec<u8> {
        let mut f = vec![0u8; (HEADER + RING) as usize];
        f[..8].copy_from_slice(MAGIC);
        f[RING_SIZE_AT..RING_SIZE_AT + 8].copy_from_slice(&RING.to_le_bytes());
        f[APPENDED_AT..APPENDED_AT + 8].copy_from_slice(&appended.to_le_bytes());
        fill(&mut f[HEADER as usize..]);
        f
    }

    #[test]
    fn the_unappended_tail_continues_the_trace_across_the_ring_end() {
        // Two segments appended (laps ago the ring wrapped): the trace is 2 rings + 1 segment
        // long, and its continuation starts at the second segment of the ring and wraps.
        let trace_len = 2 * RING + SEGMENT;
        let f = ring_file(trace_len, |d| {
            d[SEGMENT as usize..SEGMENT as usize + 3].copy_from_slice(b"abc");
            d[(RING - 2) as usize..].copy_from_slice(b"de");
            d[..2].copy_from_slice(b"fg");
        });
        let got = recover(trace_len, &f).unwrap();
        assert!(got.starts_with(b"abc"));
        assert!(got.ends_with(b"defg"), "wraps around, trailing zeros cut");
        assert_eq!(got.len() as u64, RING - SEGMENT + 2);
    }

    #[test]
    fn an_empty_ring_recovers_nothing_and_bad_files_are_named() {
        assert!(recover(0, &ring_file(0, |_| {})).unwrap().is_empty());
        assert!(recover(0, b"short")
            .unwrap_err()
            .contains("not a sharecheck ring"));
        let mut f = ring_file(0, |_| {});
        f.truncate(f.len() - 1);
        assert!(recover(0, &f).unwrap_err().contains("says its ring is"));
        assert!(recover(5, &ring_file(SEGMENT, |_| {}))
            .unwrap_err()
            .contains("were appended"));
    }
}
