//! The trace file: one JSON object per line, one line per call (schema in docs/trace-format.md).
//!
//! A plain call (no findings, nothing more to say) is recorded compact: its values in a few
//! dozen bytes, which the writer thread formats as its JSON line ([`sharecheck_core::ring`]).
//! Every other record is formatted here, into the thread's scratch buffer (no allocation once
//! warm). Either is appended whole by [`crate::writer`], which keeps every completed record
//! through any end of the process. Nothing is written, and no file is created, until the first
//! record: a process that never touches a GPU pays nothing.

use crate::clock;
use crate::findings::{self, Finding};
use crate::fingerprint::fingerprint;
use crate::guard::{Guard, Scratch};
use crate::hot::HOT;
use sharecheck_core::ffi::Outcome;
use sharecheck_core::functions::{CallArgs, FnInfo, MAX_ARGS};
use sharecheck_core::json::JsonOut;
use sharecheck_core::options::TraceLevel;
use sharecheck_core::pattern;
use sharecheck_core::ring::{self, FRAME};
use sharecheck_core::schema::{self, env};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const DISABLED: u8 = 1;
const ENABLED: u8 = 2;
// This module's flags that every traced call reads are on the hot block's second line
// (`crate::hot::HOT.trace`: `enabled`, `level`, `fork_generation`).

/// Whether records are written at all (`SHARECHECK_TRACE` set).
#[inline]
pub fn enabled() -> bool {
    match HOT.trace.enabled.load(Ordering::Relaxed) {
        ENABLED => true,
        DISABLED => false,
        _ => decide_enabled(),
    }
}

#[cold]
fn decide_enabled() -> bool {
    // `/dev/null` asks for no trace, as it would of any program's output.
    let on = std::env::var_os(env::TRACE).is_some_and(|p| !p.is_empty() && p != "/dev/null");
    HOT.trace
        .enabled
        .store(if on { ENABLED } else { DISABLED }, Ordering::Relaxed);
    on
}

// ---------------------------------------------------------------------------------------------
// Process and thread identity, kept right across fork.

static PID: AtomicU32 = AtomicU32::new(0);
/// Event records written (calls are every record number used that is not an event's).
static EVENTS: AtomicU64 = AtomicU64::new(0);

pub fn pid() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: getpid has no preconditions and cannot fail.
            let pid = unsafe { libc::getpid() } as u32;
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// This thread's kernel id.
pub fn tid() -> i32 {
    crate::guard::thread_id(HOT.trace.fork_generation.load(Ordering::Relaxed))
}

/// A call record's `seq` on the calling thread (`slot`: its claim, [`crate::guard::Guard::writer_slot`]):
/// unique in the process, increasing along the thread's records (schema in docs/trace-format.md). Held
/// until the record is written; 0 once the process is exiting (the call is not recorded).
/// `nested`: a call made while this thread was already in the shim (a signal handler's).
#[inline]
pub fn next_seq(slot: &crate::writer::ThreadSlot, nested: bool) -> crate::writer::Number {
    crate::writer::next_number(slot, nested)
}

/// A `seq` for a record made outside the guard, or on a path too rare to matter.
pub fn next_seq_shared() -> u64 {
    crate::writer::next_number_shared()
}

/// Reads the clock base and decides whether the TSC stands in for the clock (the constructor
/// calls this; anything earlier reads the base on first use): [`clock::init`].
pub fn init_clock() {
    clock::init();
}

/// A record's `"t"`: nanoseconds since the process's clock base (one vDSO clock read).
pub fn now() -> u64 {
    clock::since_base(clock::monotonic_ns())
}

/// A call record's `"t"` on the calling thread, inside the guard ([`crate::guard::Guard::clock`]):
/// the same clock, from the TSC where it can stand in ([`crate::clock`]).
#[inline]
pub fn now_on(thread: &clock::ThreadClock) -> u64 {
    clock::since_base(clock::now_ns(thread))
}

/// A record's `"t"` in two steps: [`clock::stamp`] where the time belongs, this where it is
/// written (the calling thread's clock, inside the guard, as [`now_on`]).
#[inline]
pub fn at_stamp(thread: &clock::ThreadClock, stamp: u64) -> u64 {
    clock::since_base(clock::ns_at(thread, stamp))
}

// ---------------------------------------------------------------------------------------------
// Records.

/// Everything a call record says besides its arguments.
pub struct CallRecord<'a> {
    pub info: &'static FnInfo,
    pub outcome: Outcome,
    pub ret: i32,
    pub seq: u64,
    /// When the call entered the shim ([`now`]).
    pub t: u64,
    /// The driver call's duration, when asked for (`durations=1`).
    pub dur_ns: Option<u64>,
    /// Where the checks say the call acted (`Cx::place`).
    pub place: Option<&'a Place>,
    /// The call's stack, where a report-phase rule may name the call (else empty).
    pub stack: &'a [crate::stack::Frame],
    pub findings: &'a [Finding],
}

/// Writes one call record (if tracing is on):
/// `{"seq":N,"t":NS,"tid":T,"fn":"name","a":{ARGS},"r":RET}`, then `"d"`, `"ctx"`, `"dev"`,
/// `"forwarded":false` and `"findings"` only when there is something to say (schema in docs/trace-format.md). `guard`: the
/// calling thread's, when it is inside the shim.
pub fn write_call<A: CallArgs>(guard: Option<&Guard>, args: &A, record: &CallRecord) {
    // seq 0: numbered after the process began to exit (its exit record is the trace's end).
    if !enabled()
        || record.seq == 0
        || (record.findings.is_empty() && !kept_without_findings(record.info))
    {
        return;
    }
    let generation = HOT.trace.fork_generation.load(Ordering::Relaxed);
    // Compact unless the appender falls behind (then it would hold this thread up). A place
    // travels in the compact record (the writer formats it too), unless it names many devices.
    if let (true, Some(guard), None, Outcome::Returned(_), [], []) = (
        A::COMPACT && ring::place_fits(record.place) && !crate::writer::behind(),
        guard,
        record.dur_ns,
        record.outcome,
        record.findings,
        record.stack,
    ) {
        let plain = (
            record.outcome,
            record.ret,
            record.seq,
            record.t,
            record.place,
        );
        return write_compact(guard, generation, args, plain);
    }
    let write = |s: Scratch| {
        s.buf.extend_from_slice(&[0; FRAME]);
        let mut w = JsonOut::with_fingerprint(s.buf, fingerprint);
        w.begin_call_record(record.seq, record.t, s.tid_member, record.info.record_head);
        args.encode(&mut w, record.outcome);
        w.end_object();
        w.kv_i64("r", i64::from(record.ret));
        if let Some(dur) = record.dur_ns {
            w.kv_u64("d", dur);
        }
        if let Some(place) = record.place {
            encode_place(&mut w, place);
        }
        if record.outcome == Outcome::NotCalled {
            w.key("forwarded");
            w.bool(false);
        }
        findings::encode_stack(&mut w, record.stack);
        findings::encode_list(&mut w, record.findings);
        w.end_record();
        append(frame_json(s.buf), s.slot);
    };
    match guard {
        Some(guard) => guard.with_scratch(generation, |s| {
            s.buf.clear();
            write(s);
        }),
        None => with_scratch(write),
    }
}

/// [`write_call`] of a plain call on the guard's thread: the driver called and returned `ret`, no
/// finding, no duration, no stack; `place` where the checks said one. The common traced record:
/// compact and copied into the thread's chunk by [`crate::writer::append_own`] where it can be,
/// without the general path's layers (issue 24: a traced call's instructions); `write_call`
/// otherwise. What it reads of the function is known at compile time ([`Facts`]), and of the
/// process is on the hot block's second line: no table row, no options.
#[inline(always)]
pub fn write_plain<A: CallArgs>(
    guard: &Guard,
    args: &A,
    ret: i32,
    seq: u64,
    t: u64,
    place: Option<&Place>,
) {
    if seq == 0 || !(A::READ_BY_REPORT || every_call_recorded()) {
        return;
    }
    let outcome = Outcome::Returned(ret);
    if A::COMPACT && ring::place_fits(place) && !crate::writer::behind() {
        let generation = HOT.trace.fork_generation.load(Ordering::Relaxed);
        write_compact(guard, generation, args, (outcome, ret, seq, t, place));
        return;
    }
    let record = CallRecord {
        info: A::ID.info(),
        outcome,
        ret,
        seq,
        t,
        dur_ns: None,
        place,
        stack: &[],
        findings: &[],
    };
    write_call(Some(guard), args, &record);
}

/// What a record needs of a function, as constants.
trait Facts: CallArgs {
    /// Read by `sharecheck report`'s cross-process checks: recorded at every `trace_level`.
    const READ_BY_REPORT: bool = sharecheck_core::rules::reads_by_report(Self::ID);
    const PARAMS: usize = Self::ID.param_count();
}

impl<A: CallArgs> Facts for A {}

/// Whether a call with no finding is recorded: always at `trace_level=calls`; at `findings`, only
/// the calls `sharecheck report`'s cross-process checks read.
#[inline]
fn kept_without_findings(info: &FnInfo) -> bool {
    every_call_recorded() || sharecheck_core::rules::read_by_report(info)
}

const LEVEL_CALLS: u8 = 1;
const LEVEL_FINDINGS: u8 = 2;

/// `trace_level=calls`: every call is recorded, with findings or not (the options' answer, kept
/// on the hot block's second line).
#[inline]
fn every_call_recorded() -> bool {
    match HOT.trace.level.load(Ordering::Relaxed) {
        LEVEL_CALLS => true,
        LEVEL_FINDINGS => false,
        _ => level_from_options(),
    }
}

#[cold]
fn level_from_options() -> bool {
    let calls = crate::config::options().trace_level == TraceLevel::Calls;
    let level = if calls { LEVEL_CALLS } else { LEVEL_FINDINGS };
    HOT.trace.level.store(level, Ordering::Relaxed);
    calls
}

/// A plain call's compact record ([`ring::CALL`]): its values (outcome, return value, number,
/// time, place), each argument's snapshot taken now (an out-parameter read, a capability
/// fingerprinted), written straight into the thread's chunk ([`crate::writer::append_own`]) or,
/// where that cannot be, through [`append`].
#[inline(always)]
fn write_compact<A: CallArgs>(
    guard: &Guard,
    generation: u32,
    args: &A,
    (outcome, ret, seq, t, place): (Outcome, i32, u64, u64, Option<&Place>),
) {
    let mut words = [0u64; MAX_ARGS];
    let mut tags = [0u8; MAX_ARGS];
    args.snap(outcome, fingerprint, &mut words, &mut tags);
    let n = A::PARAMS;
    let (tid, slot) = guard.record_identity(generation);
    let call = Compact(ring::Call {
        function: A::ID as u16,
        ret,
        seq,
        t,
        tid,
        words: &words[..n],
        tags: &tags[..n],
        place,
    });
    if !crate::writer::append_own(&call, slot) {
        append(&call, slot);
    }
}

/// A compact call record, made in its place in the ring.
struct Compact<'a>(ring::Call<'a>);

impl crate::writer::Record for Compact<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        ring::call_len(self.0.words.len()) + ring::place_len(self.0.place)
    }
    #[inline(always)]
    fn kind(&self) -> u8 {
        ring::CALL
    }
    #[inline(always)]
    fn write_to(&self, out: &mut [u8]) {
        ring::put_call(out, &self.0);
    }
}

/// A JSON record made in `buf` after [`FRAME`] bytes left for it: framed ([`ring::JSON`]).
fn frame_json(buf: &mut [u8]) -> &[u8] {
    let len = buf.len() as u32;
    buf[0] = ring::JSON;
    buf[1..FRAME].copy_from_slice(&len.to_le_bytes());
    buf
}

use sharecheck_core::place::encode_place;
pub use sharecheck_core::place::Place;

/// Writes an event record (`"event"` in place of `"fn"`): findings not tied to one call,
/// annotations, exit.
pub fn write_event(event: &str, findings: &[Finding], extra: impl FnOnce(&mut JsonOut)) {
    write_event_of(None, event, findings, extra);
}

/// [`write_event`] about thread `tid` (`None`: the calling thread), written by another: the
/// multicast watchdog's finding is about the thread blocked in the driver.
pub fn write_event_of(
    tid: Option<i32>,
    event: &str,
    findings: &[Finding],
    extra: impl FnOnce(&mut JsonOut),
) {
    if !enabled() {
        return;
    }
    let seq = next_seq_shared();
    EVENTS.fetch_add(1, Ordering::Relaxed);
    with_scratch(|s| {
        s.buf.extend_from_slice(&[0; FRAME]);
        let mut w = JsonOut::with_fingerprint(s.buf, fingerprint);
        w.begin_record(seq, now(), i64::from(tid.unwrap_or(s.tid)));
        w.kv_str("event", event);
        extra(&mut w);
        findings::encode_list(&mut w, findings);
        w.end_record();
        append(frame_json(s.buf), s.slot);
    });
}

/// Runs `f` with this thread's [`Scratch`], its buffer empty. The buffer lives in the thread's
/// shim state (no thread-local destructor, whose registration takes the loader lock) and is freed
/// by a pthread key destructor when the thread exits.
#[inline]
fn with_scratch(f: impl FnOnce(Scratch)) {
    crate::guard::with_scratch(HOT.trace.fork_generation.load(Ordering::Relaxed), |s| {
        s.buf.clear();
        f(s);
    });
}

fn append<R: crate::writer::Record + ?Sized>(record: &R, slot: &crate::writer::ThreadSlot) {
    crate::writer::append(record, slot, || {
        let (fd, path) = open_trace_file()?;
        let mut header = Vec::new();
        process_record(&mut header);
        Ok((crate::writer::Opened { fd, path }, header))
    });
}

/// This machine's name (`gethostname`), when it has one.
fn host_name() -> Option<String> {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `name.len()` bytes into the live local array.
    if unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } != 0 {
        return None;
    }
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let host = String::from_utf8_lossy(&name[..len]).into_owned();
    (!host.is_empty()).then_some(host)
}

// ---------------------------------------------------------------------------------------------
// The file.

/// The first record of every file: who wrote it, and what its records' `"t"` counts from
/// (framed: [`frame_json`]).
fn process_record(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[0; FRAME]);
    let mut w = JsonOut::new(buf);
    w.begin_object();
    w.kv_u64("v", schema::VERSION);
    // seq 0: it describes the process, before any call (whose records may already be queued).
    w.kv_u64("seq", 0);
    w.kv_u64("t", now());
    w.kv_i64("tid", i64::from(tid()));
    w.kv_str("event", "process");
    w.kv_u64("pid", u64::from(pid()));
    // SAFETY: getppid has no preconditions and cannot fail.
    w.kv_u64("ppid", unsafe { libc::getppid() } as u64);
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    w.kv_str("exe", &exe);
    w.kv_str("shim_version", env!("CARGO_PKG_VERSION"));
    // This boot of this machine: a reader that finds the process's ring tells by it whether
    // the pid it checks for life is this process's (a trace on a shared file system may come
    // from another machine).
    if let Some(boot) = sharecheck_core::ring::boot_id() {
        w.kv_str("boot_id", &boot);
    }
    // The machine by name, for readers of many hosts' traces (issue 27: a pid names a process
    // on one host only).
    if let Some(host) = host_name() {
        w.kv_str("host", &host);
    }
    // Its IMEX domain, where known: FABRIC handles are shared within one only.
    if let Some(domain) = sharecheck_core::imex::domain() {
        w.kv_str("imex_domain", &domain.id);
        if let Some(nodes) = domain.nodes {
            w.kv_u64("imex_nodes", nodes as u64);
        }
    }
    let (t0_mono, t0_wall) = clock::base();
    w.kv_u64("t0_wall_ns", t0_wall);
    w.kv_u64("t0_mono_ns", t0_mono);
    // What the file holds, where it is less than every call.
    let options = crate::config::options();
    if options.trace_level != TraceLevel::Calls {
        w.kv_str("trace_level", options.trace_level.as_str());
    }
    if options.trace_limit != 0 {
        w.kv_u64("trace_limit", options.trace_limit);
    }
    w.end_object();
    buf.push(b'\n');
    frame_json(buf);
}

fn open_trace_file() -> Result<(libc::c_int, String), String> {
    let pattern = std::env::var(env::TRACE).unwrap_or_default();
    let path = expand_pattern(&pattern, pid(), &hostname(), |name| {
        std::env::var(name).ok()
    })?;
    // Missing directories are made (private), as `mkdir -p` would.
    if let Some(parent) = std::path::Path::new(&path)
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| {
                format!(
                    "cannot create the trace directory {}: {e}",
                    parent.display()
                )
            })?;
    }
    match create_exclusive(&path) {
        Ok(fd) => Ok((fd, path)),
        // Another process of the job (a forked child, or a pattern without %p) has this name.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let fallback = format!("{path}.{}", pid());
            create_exclusive(&fallback)
                .map(|fd| (fd, fallback.clone()))
                .map_err(|e| format!("cannot create trace file {fallback}: {e}"))
        }
        Err(e) => Err(format!("cannot create trace file {path}: {e}")),
    }
}

fn create_exclusive(path: &str) -> std::io::Result<libc::c_int> {
    let c_path =
        CString::new(path).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    crate::writer::create_exclusive(&c_path).map_err(std::io::Error::from_raw_os_error)
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: writes at most `buf.len()` bytes into `buf`, a live local array.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Expands `%p` (pid), `%h` (host), `%q{VAR}` (environment variable, empty if unset), `%%`:
/// the tokenizer of [`sharecheck_core::pattern`], which `sharecheck run` globs with too.
pub fn expand_pattern(
    pattern: &str,
    pid: u32,
    host: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let expanded = pattern::expand(pattern.as_bytes(), pid, host.as_bytes(), |name| {
        // A name is cut from `pattern` at ASCII bytes, so it is UTF-8.
        std::str::from_utf8(name)
            .ok()
            .and_then(&var)
            .map(String::into_bytes)
    })
    .map_err(|e| format!("{} {pattern:?}: {e}", env::TRACE))?;
    if expanded.is_empty() {
        return Err(format!("{} is empty", env::TRACE));
    }
    // Every piece came from a `str`.
    Ok(String::from_utf8_lossy(&expanded).into_owned())
}

/// Whether the trace file is open (the C API's `sharecheck_flush`: records are on disk as soon
/// as they are written, so there is nothing to flush).
pub fn flush() -> bool {
    crate::writer::is_open()
}

/// At exit: calls are no longer numbered, those in flight get a bounded time to record
/// themselves, then an `exit` record with this process's totals: `calls`, every call numbered
/// (recorded, or still being recorded: `calls_unfinished`, present when some are, whose records
/// may follow in the file or the ring, or be lost), and the descriptors it exported and still
/// holds open (`exported_fds_open`, present when some are; asked for only when the record is
/// written), then the rest of the ring appended to the file.
pub fn finish(exported_fds_open: impl FnOnce() -> Vec<i32>) {
    // `exit` called by a signal handler that interrupted this thread's shim work: what that
    // work holds cannot move while the exit waits.
    let interrupted = crate::guard::Guard::is_inside();
    let frozen = crate::guard::writer_slot(|cell| crate::writer::Frozen::of(cell, interrupted));
    if !interrupted {
        // Its own calls kept from signal handlers during its last covered call: checked now.
        drop(crate::guard::Guard::enter_outside());
    }
    let unfinished = crate::writer::close_numbers(frozen, crate::deferred::parked);
    if crate::writer::is_open() {
        let calls = crate::writer::numbers_used().saturating_sub(EVENTS.load(Ordering::Relaxed));
        let reported = findings::count();
        write_event("exit", &[], |w| {
            w.kv_u64("calls", calls);
            if unfinished > 0 {
                w.kv_u64("calls_unfinished", unfinished);
            }
            let unchecked = crate::deferred::unchecked();
            if unchecked > 0 {
                w.kv_u64("calls_unchecked", unchecked);
            }
            w.kv_u64("findings_reported", reported);
            // The descriptors the process exported and still holds open (by number: a trace
            // cannot say what was closed), for the report's at-exit rule.
            let open = exported_fds_open();
            if !open.is_empty() {
                w.key("exported_fds_open");
                w.begin_array();
                for fd in open {
                    w.i64(i64::from(fd));
                }
                w.end_array();
            }
        });
    }
    crate::writer::finish(frozen);
}

/// In a forked child: its own identity, numbering and file.
pub fn after_fork_in_child() {
    crate::writer::after_fork_in_child();
    crate::deferred::after_fork_in_child();
    PID.store(0, Ordering::Relaxed);
    HOT.trace.fork_generation.fetch_add(1, Ordering::Relaxed);
    EVENTS.store(0, Ordering::Relaxed);
    findings::reset_after_fork();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(p: &str) -> Result<String, String> {
        expand_pattern(p, 42, "node7", |name| {
            (name == "RANK").then(|| "3".to_string())
        })
    }

    #[test]
    fn pattern_keys_expand() {
        assert_eq!(expand("/t/%h-%p.jsonl").unwrap(), "/t/node7-42.jsonl");
        assert_eq!(expand("r%q{RANK}-%q{UNSET}.%%").unwrap(), "r3-.%");
    }

    #[test]
    fn bad_patterns_name_the_problem() {
        assert!(expand("a%x").unwrap_err().contains("unknown key %x"));
        assert!(expand("a%").unwrap_err().contains("lone %"));
        assert!(expand("%q{RANK")
            .unwrap_err()
            .contains("%q must be followed"));
        assert!(expand("%q{}").unwrap_err().contains("%q must be followed"));
        assert!(expand("").unwrap_err().contains("empty"));
    }
}
