//! Tolerant reading of trace files (schema v2, JSON Lines; docs/trace-format.md).
//!
//! Each record is handed to a callback as soon as it is parsed, so traces of any size are read in
//! constant memory. A file's first record, the process record (`"v":2,"event":"process"`), says
//! which process wrote the file and when its records' `"t"` starts; the reader gives every record
//! after it `"pid"` and `"ts_ns"` (wall clock, ns), so that consumers compare records of several
//! processes without knowing the file they came from. Nothing in a trace file makes the reader
//! fail: problems become [`Diagnostic`]s naming the file and line, and the line is skipped.
//! - a last line without its newline that does not parse is a *warning* (the process was killed
//!   while writing it);
//! - any other line that is not a JSON object, a record of another schema version, or a record
//!   before any process record is an *error*;
//! - a TRACE argument that cannot be opened, or a directory without `*.jsonl`, is an error that
//!   makes the input [`Inputs::unreadable`].

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sharecheck_core::ring;
use sharecheck_core::schema::{self, TRACE_SUFFIX};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warning,
    Error,
}

/// A problem found while reading traces, printed as
/// `sharecheck: warning: FILE:LINE: what; what was done about it`.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub level: Level,
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            Level::Warning => "warning",
            Level::Error => "error",
        };
        write!(f, "sharecheck: {level}: {}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Problems found while reading traces: the first [`Diagnostics::KEPT`] whole, the rest only
/// counted, so that a trace of millions of bad lines costs no more memory than one of twenty.
#[derive(Debug, Default)]
pub struct Diagnostics {
    kept: Vec<Diagnostic>,
    more: u64,
}

impl Diagnostics {
    /// Problems kept whole (the ones printed).
    pub const KEPT: usize = 20;

    /// Takes in the problems another reader found in later files, as if found here after these.
    pub fn absorb(&mut self, other: Diagnostics) {
        for d in other.kept {
            self.push(d);
        }
        self.more += other.more;
    }

    pub fn push(&mut self, d: Diagnostic) {
        if self.kept.len() < Self::KEPT {
            self.kept.push(d);
        } else {
            self.more += 1;
        }
    }

    /// The problems kept, in the order found.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.kept.iter()
    }

    /// Problems found, kept or not.
    pub fn len(&self) -> u64 {
        self.kept.len() as u64 + self.more
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

use crate::progress::Progress;
use crate::record::Head;
pub use crate::record::Record;

/// The trace files named by the TRACE arguments.
#[derive(Debug, Default)]
pub struct Inputs {
    pub files: Vec<PathBuf>,
    pub diagnostics: Diagnostics,
    /// Some TRACE argument could not be read at all.
    pub unreadable: bool,
}

impl Inputs {
    /// A TRACE argument that gave nothing to read: an error naming it.
    fn cannot_read(&mut self, path: &Path, message: String) {
        self.unreadable = true;
        self.diagnostics.push(Diagnostic {
            level: Level::Error,
            path: path.to_path_buf(),
            line: None,
            message,
        });
    }
}

/// Expands TRACE arguments: a file is itself, a directory is every `*.jsonl` in it (sorted by
/// name), or, where it holds none itself, every one in the directories under it (a tree of many
/// hosts' traces, one directory each: sorted by path; symbolic links to directories are not
/// followed). The same file named twice is read once.
pub fn collect_inputs(args: &[PathBuf]) -> Inputs {
    let mut inputs = Inputs::default();
    let mut seen = std::collections::HashSet::new();
    for arg in args {
        let meta = match std::fs::metadata(arg) {
            Ok(m) => m,
            Err(e) => {
                inputs.cannot_read(
                    arg,
                    format!("cannot read this trace: {}; check the path", io_reason(&e)),
                );
                continue;
            }
        };
        let mut files = Vec::new();
        if meta.is_dir() {
            match jsonl_files_in(arg).and_then(|found| match found.is_empty() {
                true => jsonl_files_under(arg),
                false => Ok(found),
            }) {
                Ok(found) if found.is_empty() => inputs.cannot_read(
                    arg,
                    format!(
                        "this directory holds no *{TRACE_SUFFIX} trace file, nor do the \
                         directories under it; was the program run with `sharecheck run`?"
                    ),
                ),
                Ok(found) => files = found,
                Err(e) => inputs.cannot_read(
                    arg,
                    format!("cannot list this directory: {}", io_reason(&e)),
                ),
            }
        } else {
            files.push(arg.clone());
        }
        for file in files {
            let key = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            if seen.insert(key) {
                inputs.files.push(file);
            }
        }
    }
    inputs
}

/// The trace files directly in `dir`: regular files named `*.jsonl`, or `*.jsonl.PID` (where the
/// shim writes when `*.jsonl` already exists, e.g. a pid reused since an earlier run), sorted by
/// name.
pub fn jsonl_files_in(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let is_trace = strip_pid_suffix(name.as_bytes()).ends_with(TRACE_SUFFIX.as_bytes());
        if is_trace && std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The trace files ([`jsonl_files_in`]) of every directory under `dir`, at any depth, sorted by
/// path; directories reached through symbolic links are not entered (no cycle).
pub fn jsonl_files_under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    for sub in dirs {
        files.extend(jsonl_files_in(&sub)?);
        files.extend(jsonl_files_under(&sub)?);
    }
    files.sort();
    Ok(files)
}

/// `NAME` for a file name `NAME.PID` (the shim's name when `NAME` exists); else the name itself.
pub fn strip_pid_suffix(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&b| b == b'.') {
        Some(dot) if dot + 1 < name.len() && name[dot + 1..].iter().all(u8::is_ascii_digit) => {
            &name[..dot]
        }
        _ => name,
    }
}

/// An `io::Error` as a short reason, without the "(os error N)" suffix.
pub fn io_reason(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// What reading a set of files produced, besides the records.
#[derive(Debug, Default)]
pub struct ReadStats {
    pub files_read: usize,
    pub records: u64,
    /// Some file could not be opened or read.
    pub unreadable: bool,
}

/// Reads every file, calling `on_record` for each valid record in file order, and pushing
/// problems to `diagnostics`.
pub fn read_files(
    files: &[PathBuf],
    diagnostics: &mut Diagnostics,
    on_record: impl FnMut(&Record<'_>),
) -> ReadStats {
    read_files_showing(files, diagnostics, Progress::hidden(), on_record)
}

/// [`read_files`], advancing `progress` as the bytes are read.
pub fn read_files_showing(
    files: &[PathBuf],
    diagnostics: &mut Diagnostics,
    mut progress: Progress,
    mut on_record: impl FnMut(&Record<'_>),
) -> ReadStats {
    let mut stats = ReadStats::default();
    for path in files {
        match read_file(path, diagnostics, &mut progress, &mut on_record) {
            Ok(n) => {
                stats.files_read += 1;
                stats.records += n;
            }
            Err(e) => {
                stats.unreadable = true;
                diagnostics.push(Diagnostic {
                    level: Level::Error,
                    path: path.clone(),
                    line: None,
                    message: format!(
                        "cannot read this trace: {}; check its permissions",
                        io_reason(&e)
                    ),
                });
            }
        }
    }
    stats
}

/// What `field` reads from a file's process record, read from its first line alone.
fn from_process_record<T>(path: &Path, field: impl FnOnce(&Head) -> Option<T>) -> Option<T> {
    let mut line = Vec::new();
    BufReader::new(File::open(path).ok()?)
        .take(1 << 20)
        .read_until(b'\n', &mut line)
        .ok()?;
    let head: Head = serde_json::from_slice(&line).ok()?;
    head.v.and_then(|_| field(&head))
}

/// The wall-clock instant a file's records count from (its process record's `t0_wall_ns`).
pub fn first_t0(path: &Path) -> Option<u64> {
    from_process_record(path, |head| head.t0_wall_ns)
}

/// The process record's `pid`, and whether the process ran in this boot of this machine
/// (`None`: the record does not say).
fn first_pid(path: &Path) -> Option<(i64, Option<bool>)> {
    from_process_record(path, process_of)
}

/// A process record's `pid`, and whether it ran in this boot of this machine.
fn process_of(head: &Head) -> Option<(i64, Option<bool>)> {
    head.v?;
    let here = head
        .boot_id
        .as_deref()
        .map(|b| Some(b) == sharecheck_core::ring::boot_id().as_deref());
    head.pid.map(|pid| (pid, here))
}

/// Who asks [`compact`] to fold a ring.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Folder {
    /// `sharecheck run`, for the files its own program's processes wrote (on this machine).
    Run,
    /// `sharecheck report`, for any traces: only those written under this boot of this machine
    /// (their pid is checked for life here), and a file it may not write is left as it is,
    /// silently (a report reads; it needs no write access).
    Report,
}

/// What [`compact`] did with the ring file a trace file's process left.
#[derive(Debug, PartialEq, Eq)]
pub enum Compacted {
    /// There is none.
    Nothing,
    /// Its records (this many) are in the trace file now, and the ring file is gone.
    Folded(u64),
    /// Its process (or a child that shares its ring) still runs, or may (another machine's,
    /// for `report`): left alone.
    Live,
    /// `report` may not write it: left alone.
    ReadOnly,
    /// Its process exited normally after tracing had stopped (the file size limit, a full
    /// disk): the ring stays, and tells its readers so.
    Stopped,
}

/// How much of a trace file's end is read for the `seq` of its last records (a process that
/// died between appending a segment and saying so in the ring leaves those records in both).
const DEDUP_WINDOW: u64 = 4 * ring::RING;

/// Folds the ring a process left (it ended without its exit handlers: `_exit`, `exec`, a crash
/// or `kill -9`) into its trace file, so that only the records' own bytes stay: the file is cut
/// back to what the ring says was appended (dropping the space the writer reserved ahead), the
/// ring's records are appended as the writer would have written them, and the ring file is
/// removed. Only when no process holds the ring's lock (the writer holds it while it lives) and
/// the file's process is not running here (for `report`, only a file whose process record says
/// it ran in this boot of this machine). A file that reached `trace_limit` keeps only its own
/// records (a reader never reads past the limit). On any failure the file is as it was and the
/// ring stays.
pub fn compact(path: &Path, folder: Folder) -> Result<Compacted, String> {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::fd::AsRawFd;
    let mut ring_path = path.as_os_str().to_owned();
    ring_path.push(ring::SUFFIX);
    let ring_path = PathBuf::from(ring_path);
    let read_only = |e: &io::Error| {
        folder == Folder::Report
            && matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS)
            )
    };
    let mut ring_file = match File::options().read(true).write(true).open(&ring_path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Compacted::Nothing),
        Err(e) if read_only(&e) => return Ok(Compacted::ReadOnly),
        Err(e) => return Err(io_reason(&e)),
    };
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(ring_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(Compacted::Live);
    }
    let mut file = match File::options().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if read_only(&e) => return Ok(Compacted::ReadOnly),
        Err(e) => return Err(io_reason(&e)),
    };
    let file_len = file.metadata().map_err(|e| io_reason(&e))?.len();
    let mut header = Vec::with_capacity(ring::HEADER as usize);
    (&mut ring_file)
        .take(ring::HEADER)
        .read_to_end(&mut header)
        .map_err(|e| io_reason(&e))?;
    let ring_len = ring_file.metadata().map_err(|e| io_reason(&e))?.len();
    ring::check_header(&header, ring_len, file_len)?;
    let stopped_then_exited = ring::EXITED | ring::STOPPED;
    if ring::state(&header) & stopped_then_exited == stopped_then_exited {
        return Ok(Compacted::Stopped);
    }
    let mut bytes = header;
    ring_file
        .read_to_end(&mut bytes)
        .map_err(|e| io_reason(&e))?;
    let tail = ring::recover(file_len, &bytes)?;
    // Who wrote it: the file's process record, or the ring's when the file is still empty.
    let (pid, here) = first_pid(path)
        .or_else(|| {
            let first = tail.split(|&b| b == b'\n').next()?;
            process_of(&serde_json::from_slice::<Head>(first).ok()?)
        })
        .unzip();
    if folder == Folder::Report && here.flatten() != Some(true) {
        return Ok(Compacted::Live);
    }
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|&p| p > 0) {
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if alive {
            return Ok(Compacted::Live);
        }
    }
    let appended_len =
        u64::from_le_bytes(bytes[ring::FILE_AT..ring::FILE_AT + 8].try_into().unwrap());
    // The end of what was appended: its last records' `seq`, and whether it reached the limit.
    let from = appended_len.saturating_sub(DEDUP_WINDOW);
    file.seek(SeekFrom::Start(from))
        .map_err(|e| io_reason(&e))?;
    let mut end = BufReader::new((&mut file).take(appended_len - from));
    let (mut seen, mut capped, mut buf) = (std::collections::HashSet::new(), false, Vec::new());
    let marker = format!("\"event\":\"{LIMIT_EVENT}\"");
    while read_line_capped(&mut end, &mut buf)
        .map_err(|e| io_reason(&e))?
        .0
        > 0
    {
        capped |= buf.windows(marker.len()).any(|w| w == marker.as_bytes());
        if let Ok(head) = serde_json::from_slice::<Head>(buf.trim_ascii_end()) {
            seen.extend(head.seq);
        }
        buf.clear();
    }
    let mut folded = 0u64;
    let mut out = Vec::with_capacity(tail.len());
    if !capped {
        for line in tail.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let seq = serde_json::from_slice::<Head>(line)
                .ok()
                .and_then(|h| h.seq);
            if seq.is_some_and(|seq| seen.contains(&seq)) {
                continue;
            }
            out.extend_from_slice(line);
            out.push(b'\n');
            folded += 1;
        }
    }
    let written = file
        .set_len(appended_len)
        .and_then(|()| file.seek(SeekFrom::Start(appended_len)))
        .and_then(|_| file.write_all(&out));
    if let Err(e) = written {
        // As it was: the records stay in the ring for a reader.
        let _ = file.set_len(file_len);
        return Err(io_reason(&e));
    }
    std::fs::remove_file(&ring_path).map_err(|e| io_reason(&e))?;
    Ok(Compacted::Folded(folded))
}

/// Folds the rings of `files` whose processes are gone into their traces ([`compact`]); says
/// on stderr what it did, in one line, and what it could not.
pub fn compact_all(files: &[PathBuf], folder: Folder) {
    let (mut rings, mut records) = (0u64, 0u64);
    for path in files {
        match compact(path, folder) {
            Ok(Compacted::Folded(n)) => {
                rings += 1;
                records += n;
            }
            Ok(_) => {}
            Err(why) => eprintln!(
                "sharecheck: warning: {}{}: {why}; the ring file stays (a reader still reads it)",
                path.display(),
                ring::SUFFIX
            ),
        }
    }
    if rings > 0 {
        eprintln!(
            "sharecheck: folded {rings} ring file(s) left by processes that ended without their \
             exit handlers into their traces ({records} record(s))"
        );
    }
}

/// The event line a trace file ends with when it reached `trace_limit`.
pub const LIMIT_EVENT: &str = "trace-limit";

/// The bytes a process left in its ring (`FILE.ring`) when it ended without exit handlers, to be
/// read after the file's own (see [`sharecheck_core::ring`]), and what the ring says of the
/// process's ending ([`ring::state`]); `None` when there is no ring.
fn recovered_tail(
    path: &Path,
    file_len: u64,
    diagnostics: &mut Diagnostics,
) -> Option<(Vec<u8>, u64)> {
    let mut ring_path = path.as_os_str().to_owned();
    ring_path.push(ring::SUFFIX);
    let ring_path = PathBuf::from(ring_path);
    let mut file = File::open(&ring_path).ok()?;
    let warn = |diagnostics: &mut Diagnostics, why: String| {
        diagnostics.push(Diagnostic {
            level: Level::Warning,
            path: ring_path.clone(),
            line: None,
            message: format!("{why}; its records are not read"),
        });
    };
    // The header first: a damaged or planted file is refused before its body is read.
    let mut header = Vec::with_capacity(ring::HEADER as usize);
    let checked = (&mut file)
        .take(ring::HEADER)
        .read_to_end(&mut header)
        .map_err(|e| io_reason(&e))
        .and_then(|_| {
            let len = file.metadata().map_err(|e| io_reason(&e))?.len();
            ring::check_header(&header, len, file_len)
        });
    if let Err(why) = checked {
        warn(diagnostics, why);
        return None;
    }
    let mut bytes = header;
    if let Err(e) = file.read_to_end(&mut bytes) {
        warn(diagnostics, io_reason(&e));
        return None;
    }
    match ring::recover(file_len, &bytes) {
        Ok(tail) => Some((tail, ring::state(&bytes))),
        Err(why) => {
            warn(diagnostics, why);
            None
        }
    }
}

/// The longest line a reader takes whole: the writer never writes a record longer than its ring
/// ([`ring::RING`]). A longer line is skipped with an error, and costs no more memory than this.
pub const MAX_LINE: usize = ring::RING as usize;

/// Reads one line (its newline included) into `buf`, at most [`MAX_LINE`] bytes of it; the rest of
/// a longer line is read past. Returns the bytes read past (0 at the end of the input) and
/// whether the line was longer.
/// The reader's buffer: lines within it are read in place; a line longer than it is copied.
const READ_BUFFER: usize = 256 << 10;

fn read_line_capped(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<(u64, bool)> {
    let (mut read, mut long) = (0u64, false);
    loop {
        let available = match reader.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((read, long));
        }
        let (take, ends) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let room = MAX_LINE.saturating_sub(buf.len());
        buf.extend_from_slice(&available[..take.min(room)]);
        long |= take > room;
        reader.consume(take);
        read += take as u64;
        if ends {
            return Ok((read, long));
        }
    }
}

/// The error for a line longer than [`MAX_LINE`].
fn long_line(path: &Path, line: usize) -> Diagnostic {
    Diagnostic {
        level: Level::Error,
        path: path.to_path_buf(),
        line: Some(line),
        message: format!(
            "this line is longer than {} MiB, longer than any record sharecheck writes; \
             skipped it",
            MAX_LINE >> 20
        ),
    }
}

/// Writes the records of the trace file `path` to `out`, one JSON line each, exactly as written:
/// the file's, then those its ring still holds (a record both hold is written once). Space never
/// filled and a record cut short (not a JSON object) are left out, with a warning. Returns the
/// records written. Streams: memory is one line (and, for a ring, the `seq` of each record).
pub fn cat_file(
    path: &Path,
    out: &mut impl io::Write,
    diagnostics: &mut Diagnostics,
) -> io::Result<u64> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let tail = recovered_tail(path, file_len, diagnostics).map(|(tail, _)| tail);
    let mut seen = tail.as_ref().map(|_| std::collections::HashSet::new());
    let mut written = 0u64;
    let mut cut = 0u64;
    // A file that reached `trace_limit` ends there: its ring's copy of later records is not read.
    // (Inside a JSON string every quote is escaped, so only the event's own line has these
    // bytes.)
    let marker = format!("\"event\":\"{LIMIT_EVENT}\"");
    let mut capped = false;
    let mut reader = BufReader::new(file.take(file_len));
    let mut ring = io::Cursor::new(tail.unwrap_or_default());
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    for from_ring in [false, true] {
        if from_ring && capped {
            break;
        }
        loop {
            buf.clear();
            let (read, long) = if from_ring {
                read_line_capped(&mut ring, &mut buf)?
            } else {
                read_line_capped(&mut reader, &mut buf)?
            };
            if read == 0 {
                break;
            }
            line_no += 1;
            if long {
                diagnostics.push(long_line(path, line_no));
                continue;
            }
            capped |= !from_ring && buf.windows(marker.len()).any(|w| w == marker.as_bytes());
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            for piece in line.split(|&b| b == 0) {
                if piece.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(piece) else {
                    cut += 1;
                    continue;
                };
                if let (Some(seen), Some(seq)) = (&mut seen, obj.get("seq").and_then(Value::as_u64))
                {
                    if !seen.insert(seq) && from_ring {
                        continue;
                    }
                }
                crate::safe_json::write_line(out, piece)?;
                out.write_all(b"\n")?;
                written += 1;
            }
        }
    }
    if cut > 0 {
        diagnostics.push(Diagnostic {
            level: Level::Warning,
            path: path.to_path_buf(),
            line: None,
            message: format!(
                "{cut} line(s) are not whole records (cut short when the process ended while \
                 writing them); left them out"
            ),
        });
    }
    Ok(written)
}

fn read_file(
    path: &Path,
    diagnostics: &mut Diagnostics,
    progress: &mut Progress,
    on_record: &mut impl FnMut(&Record<'_>),
) -> io::Result<u64> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let (tail, ring_state) = match recovered_tail(path, file_len, diagnostics) {
        Some((tail, state)) => (Some(tail), state),
        None => (None, 0),
    };
    // With a ring, the records of the file proper are remembered by `seq`, so that a record the
    // ring still holds and the file already has (the process died between the two) is read once.
    let mut seen = tail.as_ref().map(|_| std::collections::HashSet::new());
    let mut recovered = 0u64;
    // The last record's `seq` and `t`, and whether an exit record was read.
    let (mut last_seq, mut last_t, mut exit_read) = (0u64, 0u64, false);
    // The file as long as it was when opened: a process still running (a server a script left
    // behind) keeps appending, and a reader that chased its end would never finish.
    let mut reader = BufReader::with_capacity(
        READ_BUFFER,
        file.take(file_len)
            .chain(io::Cursor::new(tail.unwrap_or_default())),
    );
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    let mut records = 0u64;
    let mut process = Process::default();
    let mut offset = 0u64;
    // `trace_limit` the file reached, from its `trace-limit` line.
    let mut capped: Option<u64> = None;
    // One line (with its newline, if it has one) of `read` bytes; false: read no further.
    let mut take_line = |line: &[u8], read: u64, long: bool| -> bool {
        let from_ring = offset >= file_len;
        if from_ring && capped.is_some() {
            // The writer dropped what came after the limit: the ring's copy is not read either.
            return false;
        }
        offset += read;
        if !from_ring {
            progress.advance(read);
        }
        line_no += 1;
        if long {
            diagnostics.push(long_line(path, line_no));
            return true;
        }
        let complete = line.last() == Some(&b'\n');
        let text = if complete {
            &line[..line.len() - 1]
        } else {
            line
        };
        // NUL bytes are space the writer reserved but nothing filled: the unused end of a file
        // whose process ended without exit handlers (`_exit`, a fatal signal, `kill -9`), or a
        // record cut short when the process died while writing it. The record after such a gap
        // (if any) is whole.
        let had_gap = memchr::memchr(0, text).is_some();
        // Without a gap (nearly every line) the line is the one piece, not split byte by byte.
        let (whole, split) = if had_gap {
            (None, Some(text.split(|&b| b == 0)))
        } else {
            (Some(text), None)
        };
        let mut pieces = whole
            .into_iter()
            .chain(split.into_iter().flatten())
            .filter(|p| !p.is_empty())
            .peekable();
        while let Some(piece) = pieces.next() {
            let last = pieces.peek().is_none();
            if piece.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if had_gap && !(last && complete && !text.ends_with(&[0])) {
                diagnostics.push(Diagnostic {
                    level: Level::Warning,
                    path: path.to_path_buf(),
                    line: Some(line_no),
                    message: "a record was cut short (the process ended while writing it); \
                              ignored it"
                        .into(),
                });
                continue;
            }
            match parse_line(piece, &mut process) {
                Ok(record) => {
                    if let (Some(seen), Some(seq)) = (&mut seen, record.seq()) {
                        if !seen.insert(seq) && from_ring {
                            continue;
                        }
                    }
                    if record.event() == Some(LIMIT_EVENT) {
                        capped = Some(
                            record
                                .obj()
                                .get("limit")
                                .and_then(Value::as_u64)
                                .unwrap_or(0),
                        );
                    }
                    records += 1;
                    recovered += u64::from(from_ring);
                    last_seq = last_seq.max(record.seq().unwrap_or(0));
                    last_t = last_t.max(record.t().unwrap_or(0));
                    exit_read |= record.event() == Some("exit");
                    on_record(&record);
                }
                Err(_) if !complete => diagnostics.push(Diagnostic {
                    level: Level::Warning,
                    path: path.to_path_buf(),
                    line: Some(line_no),
                    message: "the last line is truncated (the process was probably killed while \
                              writing it); ignored it"
                        .into(),
                }),
                Err(why) => diagnostics.push(Diagnostic {
                    level: Level::Error,
                    path: path.to_path_buf(),
                    line: Some(line_no),
                    message: format!("{why}; skipped this line"),
                }),
            }
        }
        true
    };
    loop {
        // The common case: the whole line in the reader's buffer, read where it is (no copy).
        let in_place = {
            let available = loop {
                match reader.fill_buf() {
                    Ok(a) => break a,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if available.is_empty() {
                break;
            }
            memchr::memchr(b'\n', available).map(|i| i + 1)
        };
        let go_on = match in_place {
            Some(n) => {
                let go_on = take_line(&reader.buffer()[..n], n as u64, false);
                reader.consume(n);
                go_on
            }
            None => {
                buf.clear();
                let (read, long) = read_line_capped(&mut reader, &mut buf)?;
                if read == 0 {
                    break;
                }
                take_line(&buf, read, long)
            }
        };
        if !go_on {
            break;
        }
    }
    if let Some(limit) = capped {
        diagnostics.push(Diagnostic {
            level: Level::Warning,
            path: path.to_path_buf(),
            line: None,
            message: format!(
                "this trace file reached trace_limit ({limit} bytes): the process's later \
                 records were dropped; raise --trace-limit or use --trace-level findings"
            ),
        });
    }
    if seen.is_some() {
        let how = if ring_state & ring::EXITED == 0 {
            "the process ended without its exit handlers (_exit, exec, a fatal signal or kill -9)"
        } else if ring_state & ring::STOPPED != 0 {
            "tracing stopped before the process exited (the file size limit, a full disk or a \
             stuck append), and the process then exited normally"
        } else {
            "the process exited before its last records were appended"
        };
        diagnostics.push(Diagnostic {
            level: Level::Warning,
            path: path.to_path_buf(),
            line: None,
            message: format!(
                "{how}; {recovered} more record(s) read from its ring file, {}{}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                ring::SUFFIX
            ),
        });
    }
    if ring_state & ring::EXITED != 0 && !exit_read && records > 0 {
        // It exited, but its exit record could not be written (tracing had stopped): it is said
        // here, without the totals it would have held.
        let line = format!(
            "{{\"seq\":{},\"t\":{last_t},\"tid\":0,\"event\":\"exit\",\"tracing_stopped\":true}}",
            last_seq + 1
        );
        if let Ok(record) = parse_line(line.as_bytes(), &mut process) {
            records += 1;
            on_record(&record);
        }
    }
    Ok(records)
}

/// Parses one line of a file: a JSON object, of this schema version, after the file's process
/// record (which it may be).
fn parse_line<'a>(text: &'a [u8], process: &mut Process) -> Result<Record<'a>, String> {
    let object = text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let head: Head = match serde_json::from_slice(text) {
        Ok(head) if object => head,
        parsed => {
            return Err(match serde_json::from_slice::<Value>(text) {
                // Valid JSON the record type refuses: a member given twice.
                Ok(Value::Object(_)) => match parsed {
                    Err(e) => format!("not a trace record ({e})"),
                    Ok(_) => "not a trace record".into(),
                },
                Ok(_) => "not a trace record (expected a JSON object)".into(),
                Err(e) => format!("not a JSON trace record ({e})"),
            });
        }
    };
    if let Some(v) = head.v {
        if v.get() != schema::VERSION.to_string() {
            return Err(format!(
                "trace schema version {} is not supported (this sharecheck reads version {}); \
                 use the sharecheck that wrote the trace",
                v.get(),
                schema::VERSION
            ));
        }
    }
    let (pid, ts_ns) = process.complete(&head)?;
    Ok(Record::new(text, head, pid, ts_ns).on(process.machine.clone()))
}

/// What a file's process record says about the records after it.
#[derive(Default)]
struct Process {
    pid: Option<i64>,
    /// Wall-clock time (ns) at which the records' `"t"` is 0.
    t0_wall_ns: Option<u64>,
    /// The machine it ran on: its boot id, else its host name (`None`: the record names neither).
    machine: Option<std::rc::Rc<str>>,
}

impl Process {
    /// Takes a process record in, or gives a record its process's `pid`; either way, the
    /// record's `pid` and wall-clock `ts_ns`.
    fn complete(&mut self, head: &Head) -> Result<(Option<i64>, Option<u64>), String> {
        if head.v.is_some() {
            if head.event.as_deref() != Some("process") {
                return Err("not a trace record (only a process record carries \"v\")".into());
            }
            let Some(pid) = head.pid else {
                return Err("a process record without its \"pid\"".into());
            };
            self.pid = Some(pid);
            self.t0_wall_ns = head.t0_wall_ns;
            self.machine = head
                .boot_id
                .as_deref()
                .or(head.host.as_deref())
                .map(std::rc::Rc::from);
        } else if self.pid.is_none() {
            return Err("a record before any process record (\"v\":2) in this file".into());
        }
        let ts_ns = self
            .t0_wall_ns
            .zip(head.t)
            .map(|(t0, t)| t0.saturating_add(t));
        Ok((self.pid, ts_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace that a running process keeps appending to is read as far as it was when opened:
    /// the reader never chases its end (found as a `sharecheck run` that never finished while a
    /// traced background process kept calling).
    #[test]
    fn a_trace_still_growing_is_read_as_far_as_it_was_when_opened() {
        use std::io::Write;
        use std::sync::atomic::{AtomicBool, Ordering};
        const GROWING: u64 = 4 << 20;
        const CAP: u64 = 96 << 20;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.jsonl");
        let batch: String = (1..=1000)
            .map(|seq| {
                format!(
                    "{{\"seq\":{seq},\"t\":{seq},\"tid\":1,\"fn\":\"cuDeviceCanAccessPeer\",\
                     \"a\":{{\"canAccessPeer\":1,\"dev\":0,\"peerDev\":1}},\"r\":0}}\n"
                )
            })
            .collect();
        let lines_per_batch = 1000u64;
        std::fs::write(&path, "{\"v\":2,\"event\":\"process\",\"pid\":1}\n").unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        // Appends far faster than a reader parses, until the read is over (or CAP bytes).
        let line_bytes = batch.len() as u64 / lines_per_batch;
        let writer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
                let mut written = 0u64;
                let mut batches = 0u64;
                while !stop.load(Ordering::Relaxed) && written < CAP {
                    file.write_all(batch.as_bytes()).unwrap();
                    written += batch.len() as u64;
                    batches += 1;
                }
                batches * lines_per_batch
            })
        };
        while std::fs::metadata(&path).unwrap().len() < GROWING {
            std::thread::yield_now();
        }
        let mut diagnostics = Diagnostics::default();
        let stats = read_files(&[path], &mut diagnostics, |_| {});
        stop.store(true, Ordering::Relaxed);
        let appended = writer.join().unwrap();
        // At least what the file held when the reader opened it, and not what was appended
        // while it read.
        assert!(stats.records >= GROWING / line_bytes - lines_per_batch);
        assert!(
            stats.records < appended,
            "read {} records, every one appended ({appended}): the reader chased the end",
            stats.records
        );
    }

    fn parse(text: &str) -> Result<Record<'_>, String> {
        let mut p = Process {
            pid: Some(1),
            t0_wall_ns: None,
            machine: None,
        };
        parse_line(text.as_bytes(), &mut p)
    }

    #[test]
    fn parse_line_checks_version_and_shape() {
        assert!(parse(r#"{"v":2,"event":"process","pid":3}"#).is_ok());
        assert!(parse(r#"{"seq":1,"fn":"x"}"#).is_ok());
        assert!(parse(r#"{"v":1,"event":"process","pid":3}"#)
            .err()
            .unwrap()
            .contains("version 1"));
        assert!(parse(r#"{"v":"x"}"#)
            .err()
            .unwrap()
            .contains("version \"x\""));
        assert!(parse(r#"[1]"#).err().unwrap().contains("JSON object"));
        let twice = parse(r#"{"seq":1,"seq":2}"#).err().unwrap();
        assert!(twice.contains("duplicate field `seq`"), "{twice}");
        assert!(parse("garbage").err().unwrap().contains("not a JSON"));
    }

    #[test]
    fn records_get_their_process_pid_and_wall_clock() {
        let mut p = Process::default();
        let line = |p: &mut Process, text: &'static str| {
            parse_line(text.as_bytes(), p).map(|r| (r.pid(), r.ts_ns()))
        };
        let early = line(&mut p, r#"{"seq":1,"t":5,"fn":"x"}"#);
        assert!(early.unwrap_err().contains("before any process record"));
        let header = r#"{"v":2,"seq":0,"t":0,"event":"process","pid":42,"t0_wall_ns":1000}"#;
        assert_eq!(line(&mut p, header).unwrap(), (Some(42), Some(1000)));
        let call = parse_line(br#"{"seq":1,"t":5,"tid":43,"fn":"x"}"#, &mut p).unwrap();
        assert_eq!((call.pid(), call.ts_ns()), (Some(42), Some(1005)));
        assert_eq!(call.obj()["pid"], 42);
        assert_eq!(call.obj()["ts_ns"], 1005);
        assert!(line(&mut p, r#"{"v":2,"event":"exit"}"#)
            .unwrap_err()
            .contains("only a process record"));
        assert!(line(&mut p, r#"{"v":2,"event":"process"}"#)
            .unwrap_err()
            .contains("without its \"pid\""));
    }

    #[test]
    fn ret_names_come_from_the_function_api() {
        let name = |text: &str| parse(text).unwrap().ret_name();
        assert_eq!(
            name(r#"{"fn":"cuMemcpyPeer","r":1}"#),
            Some("CUDA_ERROR_INVALID_VALUE")
        );
        assert_eq!(
            name(r#"{"fn":"hipMemcpyPeer","r":1}"#),
            Some("hipErrorInvalidValue")
        );
        assert_eq!(name(r#"{"fn":"cuNotOurs","r":1}"#), None);
    }

    #[test]
    fn pid_suffixes_are_stripped() {
        assert_eq!(strip_pid_suffix(b"12.jsonl.345"), b"12.jsonl");
        assert_eq!(strip_pid_suffix(b"12.jsonl"), b"12.jsonl");
        assert_eq!(strip_pid_suffix(b"a.jsonl.bak"), b"a.jsonl.bak");
        assert_eq!(strip_pid_suffix(b"a.jsonl."), b"a.jsonl.");
    }
}
