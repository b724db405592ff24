//! The human-readable log on stderr: the shim's own messages and its findings, filtered by
//! `SHARECHECK_LOG` and written to fd 2.
//!
//! `SHARECHECK_LOG` is a comma-separated list of `LEVEL` or `TARGET=LEVEL` items. Levels: `off`,
//! `error`, `warn` (or `warning`), `info`, `debug`, `trace`. A bare level (or `sharecheck=LEVEL`)
//! is the level of the shim's own messages (default `warn`). `finding=LEVEL` (or
//! `sharecheck::finding=LEVEL`) selects the findings printed by severity (default: all); `off`
//! without a `finding=` item silences findings too. An item that is none of these is named in
//! one warning line and ignored.
//!
//! Printing must be safe in any thread of any program, also in the child of a `fork` taken while
//! another thread was printing: no lock is taken (std's stderr is never used; each message or
//! finding block is written to fd 2 by one `write(2)`), nothing panics, and nothing allocates
//! unless something is printed.
//!
//! Why not `tracing` (which this log used to be built on): the shim makes no spans and has one
//! subscriber of its own, so `tracing` only stood between a message and its `write(2)` (callsite
//! interest caches, a field visitor copying every field into a buffer); and installing its global
//! dispatcher takes the registry's write lock (`tracing_core::callsite::register_dispatch`), so
//! the install needed a bounded wait of its own for a child forked while another thread was in
//! it. Direct rendering needs neither.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// How much a message matters (a finding's level follows its rule's severity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// Target of the shim's own messages.
pub const TARGET: &str = "sharecheck";
/// Target of finding events: rendered as the finding's block.
pub const FINDING_TARGET: &str = "sharecheck::finding";
const LOG_VAR: &std::ffi::CStr = c"SHARECHECK_LOG";

// ---- the filter -------------------------------------------------------------------------------

/// Verbosity ranks: 0 off, 1 error, 2 warn, 3 info, 4 debug, 5 trace.
const OFF: u8 = 0;
const WARN: u8 = 2;
const TRACE: u8 = 5;

fn rank(level: &Level) -> u8 {
    match level {
        Level::Error => 1,
        Level::Warn => 2,
        Level::Info => 3,
        Level::Debug => 4,
    }
}

fn parse_level(text: &[u8]) -> Option<u8> {
    const NAMES: [(&str, u8); 7] = [
        ("off", OFF),
        ("error", 1),
        ("warn", WARN),
        ("warning", WARN),
        ("info", 3),
        ("debug", 4),
        ("trace", TRACE),
    ];
    NAMES
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(text))
        .map(|&(_, rank)| rank)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Filter {
    /// Most verbose level of the shim's own messages.
    shim: u8,
    /// Most verbose finding severity printed (error 1, warning 2, info 3 and above).
    findings: u8,
    /// The setting has items that were ignored.
    bad: bool,
}

impl Filter {
    const DEFAULT: Filter = Filter {
        shim: WARN,
        findings: TRACE,
        bad: false,
    };

    /// Parses `SHARECHECK_LOG`; `on_bad` sees each item that is ignored. Never allocates.
    fn parse(text: &[u8], mut on_bad: impl FnMut(&[u8])) -> Filter {
        let mut shim = None;
        let mut findings = None;
        let mut bad = false;
        for item in text.split(|&b| b == b',') {
            let item = item.trim_ascii();
            if item.is_empty() {
                continue;
            }
            let (target, level) = match item.iter().position(|&b| b == b'=') {
                Some(eq) => (&item[..eq], &item[eq + 1..]),
                None => (&b"sharecheck"[..], item),
            };
            let slot = match target.trim_ascii() {
                b"sharecheck" => &mut shim,
                b"finding" | b"sharecheck::finding" => &mut findings,
                _ => {
                    bad = true;
                    on_bad(item);
                    continue;
                }
            };
            match parse_level(level.trim_ascii()) {
                Some(rank) => *slot = Some(rank),
                None => {
                    bad = true;
                    on_bad(item);
                }
            }
        }
        let shim = shim.unwrap_or(Filter::DEFAULT.shim);
        let findings = findings.unwrap_or(if shim == OFF { OFF } else { TRACE });
        Filter {
            shim,
            findings,
            bad,
        }
    }

    fn pack(self) -> u32 {
        0x1_0000 | u32::from(self.bad) << 8 | u32::from(self.shim) << 4 | u32::from(self.findings)
    }

    fn unpack(v: u32) -> Filter {
        Filter {
            shim: (v >> 4 & 0xf) as u8,
            findings: (v & 0xf) as u8,
            bad: v >> 8 & 1 == 1,
        }
    }

    fn enabled(self, target: &str, level: &Level) -> bool {
        let max = if target == FINDING_TARGET {
            self.findings
        } else {
            self.shim
        };
        rank(level) <= max
    }
}

/// Runs `f` on the value of `SHARECHECK_LOG` (empty when unset), read without std's environment
/// lock (a child forked while another thread held it could never take it).
fn with_log_setting<T>(f: impl FnOnce(&[u8]) -> T) -> T {
    // SAFETY: `getenv` returns NULL or a NUL-terminated string in the environment, which stays
    // valid while `f` reads it unless the program calls `setenv` concurrently, as for any C
    // reader of the environment.
    let value = unsafe { libc::getenv(LOG_VAR.as_ptr()) };
    if value.is_null() {
        f(&[])
    } else {
        // SAFETY: as above.
        f(unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes())
    }
}

/// The filter, packed; 0 until `SHARECHECK_LOG` was read. Every thread that reads it gets the
/// same answer, so a race only reads it twice.
static FILTER: AtomicU32 = AtomicU32::new(0);

fn filter() -> Filter {
    match FILTER.load(Ordering::Relaxed) {
        0 => {
            let filter = with_log_setting(|text| Filter::parse(text, |_| {}));
            if FILTER.swap(filter.pack(), Ordering::Relaxed) == 0
                && filter.bad
                && filter.shim >= WARN
            {
                warn_bad_items();
            }
            filter
        }
        packed => Filter::unpack(packed),
    }
}

fn enabled(target: &str, level: &Level) -> bool {
    filter().enabled(target, level)
}

/// One warning line for each item of `SHARECHECK_LOG` that is not a level (once per process,
/// when the setting is first read).
fn warn_bad_items() {
    with_log_setting(|text| {
        Filter::parse(text, |item| {
            message(
                Level::Warn,
                format_args!(
                    "SHARECHECK_LOG: {:?} is not LEVEL or TARGET=LEVEL (levels: off, error, warn, \
                     info, debug, trace; targets: sharecheck, finding); ignored",
                    String::from_utf8_lossy(item)
                ),
            );
        })
    });
}

/// Writes `sharecheck: LEVEL: message` (the filter already asked).
fn message(level: Level, text: fmt::Arguments) {
    let mut out = Buf::default();
    out.push_str("sharecheck: ");
    out.push_str(level.name());
    out.push_str(": ");
    let _ = out.write_fmt(text);
    out.push_str("\n");
    write_stderr(out.bytes());
}

// ---- what the shim calls ----------------------------------------------------------------------

/// Keys of the warnings already printed (hashes; 0 is a free slot). Lock-free, so that a child
/// forked while another thread warned can still warn.
static WARNED: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// Whether `key` is seen for the first time in this process. A full table says yes: a repeated
/// warning is better than a lost one.
fn first_time(key: &str) -> bool {
    // FNV-1a; the low bit is set so that no key hashes to the free-slot value.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    let mut slot = (hash as usize) % WARNED.len();
    for _ in 0..WARNED.len() {
        let Some(cell) = WARNED.get(slot) else {
            return true;
        };
        match cell.compare_exchange(0, hash, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(seen) if seen == hash => return false,
            Err(_) => slot = (slot + 1) % WARNED.len(),
        }
    }
    true
}

/// A warning printed once per `key` per process.
pub fn warn_once(key: &str, text: fmt::Arguments) {
    if enabled(TARGET, &Level::Warn) && first_time(key) {
        message(Level::Warn, text);
    }
}

pub fn debug(text: fmt::Arguments) {
    if enabled(TARGET, &Level::Debug) {
        message(Level::Debug, text);
    }
}

pub fn error(text: fmt::Arguments) {
    if enabled(TARGET, &Level::Error) {
        message(Level::Error, text);
    }
}

/// The `seq` of a finding about a call that has not returned from the driver (it has no number
/// yet): printed as such. (0 is a finding at exit.)
pub const IN_THE_DRIVER: u64 = u64::MAX;

/// One finding, as the fields of its event.
pub struct FindingEvent<'a> {
    /// Error, Warn or Info, from the rule's severity.
    pub level: Level,
    /// The severity's name: `error`, `warning` or `info`.
    pub severity: &'a str,
    pub rule: &'a str,
    /// The call with its arguments, `fn(name=value, ...)`.
    pub call: &'a str,
    pub message: &'a str,
    pub documented: &'a str,
    pub fix: &'a str,
    pub pid: u32,
    pub tid: i32,
    /// The call's sequence number in this process.
    pub seq: u64,
    /// The duplicate limit, when this is the last report of the rule on stderr.
    pub last_of: Option<u32>,
    /// The host call stack, one indented line a frame (empty: none).
    pub stack: &'a str,
}

/// Whether findings of this level are printed (so that their text need not be built).
pub fn finding_enabled(level: Level) -> bool {
    enabled(FINDING_TARGET, &level)
}

/// Prints a finding as its block.
pub fn finding(f: &FindingEvent) {
    if !finding_enabled(f.level) {
        return;
    }
    let mut out = Buf::default();
    render_finding(f, &mut out);
    write_stderr(out.bytes());
}

/// Writes `bytes` to fd 2: one `write(2)`, more only if the kernel took part of it.
fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = bytes.get(n as usize..).unwrap_or_default();
        } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            return;
        }
    }
}

/// `sharecheck: SEVERITY[RULE] CALL: MESSAGE`, `  documented: ...`, `  at: ...; fix: ...`, the
/// stack, and the duplicate-limit note on the last report of a rule.
fn render_finding(f: &FindingEvent, out: &mut Buf) {
    let _ = write!(
        out,
        "sharecheck: {}[{}] {}: {}\n  documented: {}\n  at: pid {} tid {} ",
        f.severity, f.rule, f.call, f.message, f.documented, f.pid, f.tid
    );
    // Seq 0: no call of its own (what a process left at its exit, decided then).
    let _ = match f.seq {
        0 => writeln!(out, "at exit; fix: {}", f.fix),
        IN_THE_DRIVER => {
            writeln!(out, "a call still in the driver; fix: {}", f.fix)
        }
        seq => writeln!(out, "call #{seq}; fix: {}", f.fix),
    };
    if !f.stack.is_empty() {
        out.push_str("  stack:\n");
        out.push_str(f.stack);
    }
    if let Some(limit) = f.last_of {
        let _ = writeln!(
            out,
            "  note: {} has now been reported {limit} times (duplicate_limit={limit}); this is \
             the last report of it on stderr (the trace keeps them all)",
            f.rule
        );
    }
}

/// Bytes on the stack, moved to the heap only when they outgrow it. Never panics; what does not
/// fit in memory is dropped.
struct Buf {
    inline: [u8; 1024],
    len: usize,
    heap: Vec<u8>,
    spilled: bool,
}

impl Default for Buf {
    fn default() -> Buf {
        Buf {
            inline: [0; 1024],
            len: 0,
            heap: Vec::new(),
            spilled: false,
        }
    }
}

impl Buf {
    fn push(&mut self, bytes: &[u8]) {
        if !self.spilled {
            if let Some(dst) = self.inline.get_mut(self.len..self.len + bytes.len()) {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
                return;
            }
            if self.heap.try_reserve(self.len + bytes.len()).is_err() {
                return;
            }
            self.heap
                .extend_from_slice(self.inline.get(..self.len).unwrap_or_default());
            self.spilled = true;
        }
        if self.heap.try_reserve(bytes.len()).is_ok() {
            self.heap.extend_from_slice(bytes);
        }
    }

    fn push_str(&mut self, s: &str) {
        self.push(s.as_bytes());
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        if self.spilled {
            self.heap.len()
        } else {
            self.len
        }
    }

    fn bytes(&self) -> &[u8] {
        if self.spilled {
            &self.heap
        } else {
            self.inline.get(..self.len).unwrap_or_default()
        }
    }
}

impl fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Filter, Vec<String>) {
        let mut bad = Vec::new();
        let f = Filter::parse(text.as_bytes(), |item| {
            bad.push(String::from_utf8_lossy(item).into_owned());
        });
        (f, bad)
    }

    fn levels(text: &str) -> (u8, u8) {
        let (f, _) = parse(text);
        (f.shim, f.findings)
    }

    #[test]
    fn the_variable_is_the_documented_one() {
        assert_eq!(LOG_VAR.to_str(), Ok(sharecheck_core::schema::env::LOG));
    }

    #[test]
    fn the_setting_is_a_level_or_a_list_of_target_levels() {
        assert_eq!(levels(""), (WARN, TRACE));
        assert_eq!(levels("debug"), (4, TRACE));
        assert_eq!(levels("ERROR"), (1, TRACE));
        assert_eq!(levels("warning"), (WARN, TRACE));
        assert_eq!(levels("off"), (OFF, OFF));
        assert_eq!(levels("off,finding=error"), (OFF, 1));
        assert_eq!(levels(" info , sharecheck::finding=off "), (3, OFF));
        assert_eq!(levels("sharecheck=trace"), (TRACE, TRACE));
        assert_eq!(levels("finding=warn"), (WARN, WARN));
    }

    #[test]
    fn bad_items_are_named_and_the_rest_applies() {
        let (f, bad) = parse("verbose,debug,other=info,finding=loud");
        assert_eq!((f.shim, f.findings, f.bad), (4, TRACE, true));
        assert_eq!(bad, ["verbose", "other=info", "finding=loud"]);
        assert!(!parse("info").0.bad);
    }

    #[test]
    fn the_filter_survives_packing() {
        for text in ["", "off", "debug,finding=error", "bogus"] {
            let (f, _) = parse(text);
            assert_eq!(Filter::unpack(f.pack()), f);
            assert_ne!(f.pack(), 0);
        }
    }

    #[test]
    fn findings_are_filtered_by_severity_and_messages_by_level() {
        let (f, _) = parse("error,finding=warn");
        assert!(f.enabled(FINDING_TARGET, &Level::Warn));
        assert!(!f.enabled(FINDING_TARGET, &Level::Info));
        assert!(f.enabled(TARGET, &Level::Error));
        assert!(!f.enabled(TARGET, &Level::Warn));
    }

    #[test]
    fn warn_once_keys_are_seen_once() {
        assert!(first_time("log-test-a"));
        assert!(!first_time("log-test-a"));
        assert!(first_time("log-test-b"));
    }

    #[test]
    fn a_finding_renders_as_its_block() {
        let f = FindingEvent {
            level: Level::Error,
            severity: "error",
            rule: "r.id",
            call: "cuX(a=1)",
            message: "a is 1",
            documented: "Doc, Section, cuX",
            fix: "pass 0",
            pid: 10,
            tid: 11,
            seq: 3,
            last_of: None,
            stack: "",
        };
        let mut out = Buf::default();
        render_finding(&f, &mut out);
        assert_eq!(
            String::from_utf8_lossy(out.bytes()),
            "sharecheck: error[r.id] cuX(a=1): a is 1\n  documented: Doc, Section, cuX\n  \
             at: pid 10 tid 11 call #3; fix: pass 0\n"
        );
        let mut out = Buf::default();
        render_finding(
            &FindingEvent {
                last_of: Some(2),
                stack: "    #0 app+0x10\n",
                ..f
            },
            &mut out,
        );
        assert!(String::from_utf8_lossy(out.bytes()).ends_with(
            "fix: pass 0\n  stack:\n    #0 app+0x10\n  note: r.id has now been reported 2 times \
             (duplicate_limit=2); this is the last report of it on stderr (the trace keeps them \
             all)\n"
        ));
    }

    #[test]
    fn a_long_text_moves_to_the_heap_intact() {
        let mut b = Buf::default();
        let long = "x".repeat(3000);
        b.push_str("head:");
        b.push_str(&long);
        b.push_str(":tail");
        assert_eq!(b.len(), 3010);
        assert!(b.bytes().starts_with(b"head:x") && b.bytes().ends_with(b"x:tail"));
    }
}
