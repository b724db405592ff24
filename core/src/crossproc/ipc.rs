//! The IPC family's report-phase checks: what one process's trace cannot tell, decided over the
//! traces of every process of a job (their rules: `crate::rules::ipc::report`).

use crate::crossproc::{Call, ReportCheck, ReportFinding, Timeline};
use crate::rules::ipc::report::*;
use crate::rules::Rule;
use serde_json::Value;

/// What the checks read besides the calls that carry a fingerprint.
const READS: &[&str] = &[
    "cuMemFree",
    "cuIpcCloseMemHandle",
    "cuCtxDestroy",
    "hipFree",
    "hipIpcCloseMemHandle",
];

/// How one API spells the calls of an exchange, and their pointer arguments.
struct Spelling {
    export: &'static str,
    export_ptr: &'static str,
    /// A prefix (`cuMemFree_v2`, `hipFree`).
    free: &'static str,
    free_ptr: &'static str,
    /// A prefix (both exports of `cuIpcOpenMemHandle`).
    open: &'static str,
    open_out: &'static str,
    close: &'static str,
    close_ptr: &'static str,
}

const CUDA: Spelling = Spelling {
    export: "cuIpcGetMemHandle",
    export_ptr: "dptr",
    free: "cuMemFree",
    free_ptr: "dptr",
    open: "cuIpcOpenMemHandle",
    open_out: "pdptr",
    close: "cuIpcCloseMemHandle",
    close_ptr: "dptr",
};

const HIP: Spelling = Spelling {
    export: "hipIpcGetMemHandle",
    export_ptr: "devPtr",
    free: "hipFree",
    free_ptr: "ptr",
    open: "hipIpcOpenMemHandle",
    open_out: "devPtr",
    close: "hipIpcCloseMemHandle",
    close_ptr: "devPtr",
};

/// A report check of one rule and one API's spelling, which decides over the calls of
/// each handle (those sharing one fingerprint) with `$decide`, reading the calls of
/// `$reads` besides (`READS` when not named).
macro_rules! report_check {
    ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $decide:ident) => {
        report_check!($(#[$doc])* $name, $instance, $rule, $spelling, $decide, READS);
    };
    ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $decide:ident, $reads:ident) => {
        $(#[$doc])*
        pub struct $name;
        pub static $instance: $name = $name;

        impl ReportCheck for $name {
            fn rules(&self) -> &'static [&'static Rule] {
                static RULES: &[&Rule] = &[&$rule];
                RULES
            }
            fn functions(&self) -> &'static [&'static str] {
                $reads
            }
            fn decide(&self, t: &Timeline) -> Vec<ReportFinding> {
                let mut found = Vec::new();
                for fp in t.fingerprints() {
                    let calls: Vec<&Call> = t.sharing(fp).collect();
                    $decide(t, &calls, &$spelling, &$rule, &mut found);
                }
                found
            }
        }
    };
}

fn is_open(s: &Spelling, c: &Call) -> bool {
    c.func.starts_with(s.open) && c.succeeded()
}

/// A pointer argument as the trace writes it (`"0x..."`), for messages.
fn shown(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// An export of the handle `calls` share, and the exporter's first later successful free
/// of the exported pointer (`None`: never freed in its trace).
fn exports<'t>(
    t: &'t Timeline,
    s: &Spelling,
    calls: &[&'t Call],
) -> Vec<(&'t Call, Option<&'t Call>)> {
    calls
        .iter()
        .filter(|c| c.func == s.export && c.succeeded())
        .map(|export| {
            let freed = export.arg(s.export_ptr).and_then(|exported| {
                t.later_in_process(export).find(|c| {
                    c.func.starts_with(s.free)
                        && c.succeeded()
                        && c.arg(s.free_ptr) == Some(exported)
                })
            });
            (*export, freed)
        })
        .collect()
}

/// How often the mapping `open` returned is still open at `until` (in ns of the wall
/// clock): the successful opens of its process and context (the record's `"ctx"`) that
/// returned the same pointer, less the successful closes of it, up to `until` (v2 counts
/// opens of the same handle); none once that context was destroyed.
fn still_open(t: &Timeline, s: &Spelling, opens: &[&Call], open: &Call, until: u64) -> usize {
    let mapped = open.out(s.open_out);
    let same: Vec<&&Call> = opens
        .iter()
        .filter(|o| {
            o.pid == open.pid
                && o.out(s.open_out) == mapped
                && o.ctx == open.ctx
                && o.ts_ns <= until
        })
        .collect();
    let Some(first) = same.first() else {
        return 0;
    };
    // The context the mapping was opened in, destroyed since: the mapping went with it.
    let context_gone = open.ctx.as_ref().is_some_and(|ctx| {
        t.later_in_process(first).any(|c| {
            c.func.starts_with("cuCtxDestroy")
                && c.succeeded()
                && c.arg("ctx") == Some(ctx)
                && c.ts_ns <= until
        })
    });
    if context_gone {
        return 0;
    }
    let closed = t
        .later_in_process(first)
        .filter(|c| {
            c.func == s.close && c.succeeded() && c.arg(s.close_ptr) == mapped && c.ts_ns <= until
        })
        .count();
    same.len().saturating_sub(closed)
}

/// The processes other than the exporter's that have what `export` exported open at
/// `at` (ns of the wall clock), each named once: opened before, not closed since, its
/// context not destroyed, and the process not exited (an exit unmaps what it had open;
/// leaving it open is that process's own finding).
fn open_elsewhere(
    t: &Timeline,
    s: &Spelling,
    calls: &[&Call],
    export: &Call,
    at: u64,
) -> Vec<String> {
    let opens: Vec<&Call> = calls
        .iter()
        .copied()
        .filter(|c| c.pid != export.pid && is_open(s, c) && c.ts_ns < at)
        .collect();
    let mut pids: Vec<i64> = opens
        .iter()
        .filter(|open| {
            still_open(t, s, &opens, open, at) > 0
                && t.exited(open.pid).is_none_or(|gone| gone > at)
        })
        .map(|open| open.pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids.iter().map(i64::to_string).collect()
}

report_check!(
    /// The exporter's free of memory an importer still had open: exports and opens
    /// are matched by the handle's fingerprint, the free by the exported pointer, the
    /// close by the pointer the open returned; time is each record's wall clock
    /// (`ts_ns`), one clock for every process of a host. An importer that never closed
    /// counts as open until its trace ends.
    FreedWhileOpen,
    FREED_WHILE_OPEN,
    FREED_WHILE_OPEN_RULE,
    CUDA,
    freed_while_open
);
report_check!(
    /// [`FreedWhileOpen`] in HIP.
    HipFreedWhileOpen,
    HIP_FREED_WHILE_OPEN,
    HIP_FREED_WHILE_OPEN_RULE,
    HIP,
    freed_while_open
);

fn freed_while_open(
    t: &Timeline,
    calls: &[&Call],
    s: &Spelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    for (export, free) in exports(t, s, calls) {
        let Some(free) = free else { continue };
        let pids = open_elsewhere(t, s, calls, export, free.ts_ns);
        if pids.is_empty() {
            continue;
        }
        let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
        found.push(ReportFinding::at(
            rule,
            free,
            format!(
                "{} {exported} was exported ({}) and is still open in process {} ({}, \
                 not yet closed)",
                free.func,
                s.export,
                pids.join(", "),
                s.open
            ),
        ));
    }
}

report_check!(
    /// An importer's open of a handle whose allocation the exporter had freed by then
    /// (and exported no more since: R580 hands the same handle out for new memory at the
    /// same address, and an open after such a new export is the new memory's).
    OpenedAfterFree,
    OPENED_AFTER_FREE,
    OPENED_AFTER_FREE_RULE,
    CUDA,
    opened_after_free
);
report_check!(
    /// [`OpenedAfterFree`] in HIP.
    HipOpenedAfterFree,
    HIP_OPENED_AFTER_FREE,
    HIP_OPENED_AFTER_FREE_RULE,
    HIP,
    opened_after_free
);

fn opened_after_free(
    t: &Timeline,
    calls: &[&Call],
    s: &Spelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    let exports = exports(t, s, calls);
    for open in calls.iter().filter(|c| c.func.starts_with(s.open)) {
        // The last export of this handle before the open, by another process.
        let Some((export, Some(free))) = exports
            .iter()
            .rev()
            .find(|(e, _)| e.pid != open.pid && e.ts_ns < open.ts_ns)
        else {
            continue;
        };
        if free.ts_ns >= open.ts_ns {
            continue;
        }
        let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
        let answer = match open.ret {
            Some(0) => "the driver opened it anyway: the memory mapped is not \
                    the memory exported"
                .to_string(),
            Some(code) => format!("the driver answered {code}"),
            None => "the driver's answer is not recorded".to_string(),
        };
        found.push(ReportFinding::at(
            rule,
            open,
            format!(
                "process {} exported {exported} ({}) and freed it ({}) before this open; \
                 {answer}",
                export.pid, s.export, free.func
            ),
        ));
    }
}

report_check!(
    /// The exporter's exit (its `exit` record) while an importer still had what it
    /// exported open, and had not freed it before: reported on the export.
    ExporterExited,
    EXPORTER_EXITED,
    EXPORTER_EXITED_RULE,
    CUDA,
    exporter_exited
);
report_check!(
    /// [`ExporterExited`] in HIP.
    HipExporterExited,
    HIP_EXPORTER_EXITED,
    HIP_EXPORTER_EXITED_RULE,
    HIP,
    exporter_exited
);

report_check!(
    /// The exporter's destroy of the context its exported memory was allocated in (the
    /// export's record names it) while an importer still had the memory open, and had
    /// not freed it before.
    ContextDestroyedWhileOpen,
    CONTEXT_DESTROYED_WHILE_OPEN,
    CONTEXT_DESTROYED_WHILE_OPEN_RULE,
    CUDA,
    context_destroyed_while_open
);

fn context_destroyed_while_open(
    t: &Timeline,
    calls: &[&Call],
    s: &Spelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    for (export, free) in exports(t, s, calls) {
        let Some(ctx) = export.ctx.as_ref() else {
            continue;
        };
        let Some(destroy) = t.later_in_process(export).find(|c| {
            c.func.starts_with("cuCtxDestroy") && c.succeeded() && c.arg("ctx") == Some(ctx)
        }) else {
            continue;
        };
        // A free before the destroy is the free's finding.
        if free.is_some_and(|f| f.ts_ns < destroy.ts_ns) {
            continue;
        }
        let pids = open_elsewhere(t, s, calls, export, destroy.ts_ns);
        if pids.is_empty() {
            continue;
        }
        let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
        found.push(ReportFinding::at(
            rule,
            destroy,
            format!(
                "this context held {exported}, exported ({}) and still open in process \
                 {} ({}, not yet closed): the destroy freed it",
                s.export,
                pids.join(", "),
                s.open
            ),
        ));
    }
}

/// An open in a context of a device while another context of that device of the same
/// process has a handle of the same exporter (another allocation's) open: the opens'
/// records name their context and device, the exporter is the process whose export
/// shares the handle's fingerprint.
pub struct SecondContext;
pub static SECOND_CONTEXT: SecondContext = SecondContext;

impl ReportCheck for SecondContext {
    fn rules(&self) -> &'static [&'static Rule] {
        static RULES: &[&Rule] = &[&SECOND_CONTEXT_RULE];
        RULES
    }
    fn functions(&self) -> &'static [&'static str] {
        READS
    }
    fn decide(&self, t: &Timeline) -> Vec<ReportFinding> {
        let s = &CUDA;
        let exporter = |open: &Call| -> Option<i64> {
            let fps = open.fingerprints();
            let fp = fps.first()?;
            t.sharing(fp)
                .find(|c| {
                    c.func == s.export && c.succeeded() && c.pid != open.pid && c.ts_ns < open.ts_ns
                })
                .map(|c| c.pid)
        };
        let opens: Vec<&Call> = t
            .calls()
            .iter()
            .filter(|c| c.func.starts_with(s.open) && c.ctx.is_some() && c.dev.is_some())
            .collect();
        let held: Vec<&Call> = opens.iter().copied().filter(|c| c.succeeded()).collect();
        let mut found = Vec::new();
        for open in &opens {
            let Some(from) = exporter(open) else {
                continue;
            };
            let first = held.iter().find(|h| {
                h.pid == open.pid
                    && h.ts_ns < open.ts_ns
                    && h.dev == open.dev
                    && h.ctx != open.ctx
                    && h.fingerprints() != open.fingerprints()
                    && exporter(h) == Some(from)
                    && still_open(t, s, &held, h, open.ts_ns) > 0
            });
            let Some(first) = first else {
                continue;
            };
            let ctx = |c: &Call| c.ctx.as_ref().map(shown).unwrap_or_default();
            let answer = match open.ret {
                Some(0) => "the driver opened it anyway".to_string(),
                Some(code) => format!("the driver answered {code}"),
                None => "the driver's answer is not recorded".to_string(),
            };
            found.push(ReportFinding::at(
                &SECOND_CONTEXT_RULE,
                open,
                format!(
                    "context {} of device {} has a handle of process {from} open \
                     (another allocation's, opened at {}); this open is in context {} \
                     of the same device: {answer}",
                    ctx(first),
                    open.dev.unwrap_or(-1),
                    first.out(s.open_out).map(shown).unwrap_or_default(),
                    ctx(open)
                ),
            ));
        }
        found
    }
}

report_check!(
    /// An open in a device that cannot access the exported memory's device: the export's
    /// record names the memory's device by UUID, the open's the UUIDs its device cannot
    /// access.
    Unreachable,
    UNREACHABLE,
    UNREACHABLE_RULE,
    CUDA,
    unreachable
);

report_check!(
    /// [`Unreachable`] in HIP.
    HipUnreachable,
    HIP_UNREACHABLE,
    HIP_UNREACHABLE_RULE,
    HIP,
    unreachable
);

fn unreachable(
    t: &Timeline,
    calls: &[&Call],
    s: &Spelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    for (export, _) in exports(t, s, calls) {
        let Some(there) = export.uuid.as_ref() else {
            continue;
        };
        for open in calls.iter().filter(|c| {
            c.pid != export.pid
                && c.func.starts_with(s.open)
                && c.ts_ns > export.ts_ns
                && c.uuid.as_ref() != Some(there)
                && c.unreachable.contains(there)
        }) {
            let answer = match open.ret {
                Some(0) => "the driver opened it anyway".to_string(),
                Some(code) => format!("the driver answered {code}"),
                None => "the driver's answer is not recorded".to_string(),
            };
            found.push(ReportFinding::at(
                rule,
                open,
                format!(
                    "device {} ({}) of this process cannot access device {there}, where \
                     process {} exported the memory (the peer query says 0): {answer}",
                    open.dev.unwrap_or(-1),
                    open.uuid.as_deref().unwrap_or("?"),
                    export.pid
                ),
            ));
        }
    }
}

fn exporter_exited(
    t: &Timeline,
    calls: &[&Call],
    s: &Spelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    for (export, free) in exports(t, s, calls) {
        // A free before the exit is the free's finding ([`freed_while_open`]).
        let (None, Some(exit)) = (free, t.exited(export.pid)) else {
            continue;
        };
        // So is a destroy of the memory's context ([`context_destroyed_while_open`]).
        let destroyed = export.ctx.as_ref().is_some_and(|ctx| {
            t.later_in_process(export).any(|c| {
                c.func.starts_with("cuCtxDestroy") && c.succeeded() && c.arg("ctx") == Some(ctx)
            })
        });
        if destroyed {
            continue;
        }
        let pids = open_elsewhere(t, s, calls, export, exit);
        if pids.is_empty() {
            continue;
        }
        let exported = export.arg(s.export_ptr).map(shown).unwrap_or_default();
        found.push(ReportFinding::at(
            rule,
            export,
            format!(
                "process {} exited (its memory freed with it) while {exported}, \
                 exported here, was still open in process {} ({}, not yet closed)",
                export.pid,
                pids.join(", "),
                s.open
            ),
        ));
    }
}

/// How one API spells the calls of an event handle's exchange.
struct EventSpelling {
    export: &'static str,
    export_event: &'static str,
    open: &'static str,
    open_out: &'static str,
    /// A prefix (`cuEventDestroy_v2`, `hipEventDestroy`).
    destroy: &'static str,
    destroy_event: &'static str,
}

const CUDA_EVENT: EventSpelling = EventSpelling {
    export: "cuIpcGetEventHandle",
    export_event: "event",
    open: "cuIpcOpenEventHandle",
    open_out: "phEvent",
    destroy: "cuEventDestroy",
    destroy_event: "hEvent",
};

const HIP_EVENT: EventSpelling = EventSpelling {
    export: "hipIpcGetEventHandle",
    export_event: "event",
    open: "hipIpcOpenEventHandle",
    open_out: "event",
    destroy: "hipEventDestroy",
    destroy_event: "event",
};

/// What the event checks read besides the calls that carry a fingerprint.
const EVENT_READS: &[&str] = &["cuEventDestroy", "hipEventDestroy"];

/// The first successful destroy of `event` in the process of `after`, after it.
fn destroyed<'t>(
    t: &'t Timeline,
    s: &EventSpelling,
    after: &'t Call,
    event: Option<&Value>,
) -> Option<&'t Call> {
    let event = event?;
    t.later_in_process(after).find(|c| {
        c.func.starts_with(s.destroy) && c.succeeded() && c.arg(s.destroy_event) == Some(event)
    })
}

report_check!(
    /// An importer that ended through `exit` holding an event it opened and never
    /// destroyed.
    EventNeverDestroyed,
    EVENT_NEVER_DESTROYED,
    EVENT_NEVER_DESTROYED_RULE,
    CUDA_EVENT,
    event_never_destroyed,
    EVENT_READS
);
report_check!(
    /// [`EventNeverDestroyed`] in HIP.
    HipEventNeverDestroyed,
    HIP_EVENT_NEVER_DESTROYED,
    HIP_EVENT_NEVER_DESTROYED_RULE,
    HIP_EVENT,
    event_never_destroyed,
    EVENT_READS
);

fn event_never_destroyed(
    t: &Timeline,
    calls: &[&Call],
    s: &EventSpelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    for open in calls.iter().filter(|c| c.func == s.open && c.succeeded()) {
        let Some(exit) = t.exited(open.pid) else {
            continue;
        };
        let event = open.out(s.open_out);
        if destroyed(t, s, open, event).is_some_and(|d| d.ts_ns <= exit) {
            continue;
        }
        let event = event.map(shown).unwrap_or_default();
        found.push(ReportFinding::at(
            rule,
            open,
            format!(
                "event {event}, opened here, was never destroyed before process {} \
                 exited",
                open.pid
            ),
        ));
    }
}

report_check!(
    /// The exporter's destroy of an event another process still held its copy of.
    EventDestroyedWhileOpen,
    EVENT_DESTROYED_WHILE_OPEN,
    EVENT_DESTROYED_WHILE_OPEN_RULE,
    CUDA_EVENT,
    event_destroyed_while_open,
    EVENT_READS
);
report_check!(
    /// [`EventDestroyedWhileOpen`] in HIP.
    HipEventDestroyedWhileOpen,
    HIP_EVENT_DESTROYED_WHILE_OPEN,
    HIP_EVENT_DESTROYED_WHILE_OPEN_RULE,
    HIP_EVENT,
    event_destroyed_while_open,
    EVENT_READS
);

fn event_destroyed_while_open(
    t: &Timeline,
    calls: &[&Call],
    s: &EventSpelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    for export in calls.iter().filter(|c| c.func == s.export && c.succeeded()) {
        let Some(gone) = destroyed(t, s, export, export.arg(s.export_event)) else {
            continue;
        };
        let mut pids: Vec<i64> = calls
            .iter()
            .filter(|open| {
                open.pid != export.pid
                    && open.func == s.open
                    && open.succeeded()
                    && open.ts_ns < gone.ts_ns
                    && destroyed(t, s, open, open.out(s.open_out))
                        .is_none_or(|d| d.ts_ns > gone.ts_ns)
                    && t.exited(open.pid).is_none_or(|e| e > gone.ts_ns)
            })
            .map(|open| open.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        if pids.is_empty() {
            continue;
        }
        let pids: Vec<String> = pids.iter().map(i64::to_string).collect();
        found.push(ReportFinding::at(
            rule,
            gone,
            format!(
                "the event was exported ({}) and process {} still holds its copy ({}, \
                 not yet destroyed): any operation on that copy from now on is undefined",
                s.export,
                pids.join(", "),
                s.open
            ),
        ));
    }
}

report_check!(
    /// An importer that ended through `exit` with an opened mapping it never closed.
    NeverClosed,
    NEVER_CLOSED,
    NEVER_CLOSED_RULE,
    CUDA,
    never_closed
);
report_check!(
    /// [`NeverClosed`] in HIP.
    HipNeverClosed,
    HIP_NEVER_CLOSED,
    HIP_NEVER_CLOSED_RULE,
    HIP,
    never_closed
);

fn never_closed(
    t: &Timeline,
    calls: &[&Call],
    s: &Spelling,
    rule: &'static Rule,
    found: &mut Vec<ReportFinding>,
) {
    let opens: Vec<&Call> = calls.iter().copied().filter(|c| is_open(s, c)).collect();
    let mut reported: Vec<(i64, Option<&Value>)> = Vec::new();
    for open in &opens {
        let Some(exit) = t.exited(open.pid) else {
            continue;
        };
        let key = (open.pid, open.out(s.open_out));
        if reported.contains(&key) {
            continue;
        }
        let left = still_open(t, s, &opens, open, exit);
        if left == 0 {
            continue;
        }
        reported.push(key);
        let mapped = open.out(s.open_out).map(shown).unwrap_or_default();
        found.push(ReportFinding::at(
            rule,
            open,
            format!(
                "{mapped} was still open ({left} open(s) without a close) when \
                     process {} exited",
                open.pid
            ),
        ));
    }
}
