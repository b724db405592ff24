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
            let freed = export
                .arg(s.export_ptr)
                .and_then(|exported| t.first_later(export, s.free, s.free_ptr, exported));
            (*export, freed)
        })
        .collect()
}

/// Successful opens grouped by what they mapped: a process, the pointer the open returned and
/// the context it was opened in (the record's `"ctx"`), each group in time order. Built once per
/// handle (or per check), so that how often a mapping is open is a lookup ([`open_count`]), not
/// a walk over every open of the handle (issue 27: that walk made the review cubic in a handle's
/// history).
struct Opens<'t> {
    groups: std::collections::HashMap<(usize, String, String), Vec<&'t Call>>,
}

impl<'t> Opens<'t> {
    fn of(s: &Spelling, opens: impl IntoIterator<Item = &'t Call>) -> Opens<'t> {
        let mut groups: std::collections::HashMap<_, Vec<&Call>> = Default::default();
        for open in opens {
            groups.entry(Self::key(s, open)).or_default().push(open);
        }
        Opens { groups }
    }

    fn key(s: &Spelling, open: &Call) -> (usize, String, String) {
        let text = |v: Option<&Value>| v.map_or_else(String::new, Value::to_string);
        (
            open.proc,
            text(open.out(s.open_out)),
            text(open.place.ctx.as_ref()),
        )
    }

    /// The opens that mapped what `open` mapped (itself included when it is one of them).
    fn group(&self, s: &Spelling, open: &Call) -> &[&'t Call] {
        self.groups
            .get(&Self::key(s, open))
            .map_or(&[][..], Vec::as_slice)
    }

    /// Each group, in no particular order.
    fn each(&self) -> impl Iterator<Item = &[&'t Call]> + '_ {
        self.groups.values().map(Vec::as_slice)
    }
}

/// How often the mapping of `group` (opens of one process, pointer and context: [`Opens`]) is
/// still open at `until` (in ns of the wall clock): its opens up to `until` (`before`: only
/// those strictly before it), less the successful closes of the pointer in that process since the
/// first of them, up to `until` (v2 counts opens of the same handle); none once that context was
/// destroyed.
fn open_count(t: &Timeline, s: &Spelling, group: &[&Call], until: u64, before: bool) -> usize {
    let opened = group.partition_point(|o| o.ts_ns < until || (!before && o.ts_ns == until));
    let Some(first) = group.first().filter(|_| opened > 0) else {
        return 0;
    };
    // The context the mapping was opened in, destroyed since: the mapping went with it.
    if let Some(ctx) = first.place.ctx.as_ref() {
        if t.count_later(first, "cuCtxDestroy", "ctx", ctx, until) > 0 {
            return 0;
        }
    }
    let closed = match first.out(s.open_out) {
        Some(mapped) => t.count_later(first, s.close, s.close_ptr, mapped, until),
        None => t
            .later_in_process(first)
            .filter(|c| {
                c.func == s.close
                    && c.succeeded()
                    && c.arg(s.close_ptr).is_none()
                    && c.ts_ns <= until
            })
            .count(),
    };
    opened.saturating_sub(closed)
}

/// The processes other than the exporter's that have what `export` exported open at
/// `at` (ns of the wall clock), each named once: opened before, not closed since, its
/// context not destroyed, and the process not exited (an exit unmaps what it had open;
/// leaving it open is that process's own finding). `opens`: the handle's successful opens.
fn open_elsewhere(
    t: &Timeline,
    s: &Spelling,
    opens: &Opens,
    export: &Call,
    at: u64,
) -> Vec<String> {
    let mut pids: Vec<i64> = opens
        .each()
        .filter_map(|group| {
            let first = group.first()?;
            (first.proc != export.proc
                && open_count(t, s, group, at, true) > 0
                && t.exited(first.proc).is_none_or(|gone| gone > at))
            .then_some(first.pid)
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids.iter().map(i64::to_string).collect()
}

/// The successful opens among `calls`, grouped ([`Opens`]).
fn opens_of<'t>(s: &Spelling, calls: &[&'t Call]) -> Opens<'t> {
    Opens::of(s, calls.iter().copied().filter(|c| is_open(s, c)))
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
    let opens = opens_of(s, calls);
    for (export, free) in exports(t, s, calls) {
        let Some(free) = free else { continue };
        let pids = open_elsewhere(t, s, &opens, export, free.ts_ns);
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
        let before = exports.partition_point(|(e, _)| e.ts_ns < open.ts_ns);
        let Some((export, Some(free))) = exports[..before]
            .iter()
            .rev()
            .find(|(e, _)| e.proc != open.proc)
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
    let opens = opens_of(s, calls);
    for (export, free) in exports(t, s, calls) {
        let Some(ctx) = export.place.ctx.as_ref() else {
            continue;
        };
        let Some(destroy) = t.first_later(export, "cuCtxDestroy", "ctx", ctx) else {
            continue;
        };
        // A free before the destroy is the free's finding.
        if free.is_some_and(|f| f.ts_ns < destroy.ts_ns) {
            continue;
        }
        let pids = open_elsewhere(t, s, &opens, export, destroy.ts_ns);
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

/// The held mappings of one process and device, by context (its JSON text), each in time order.
type ByContext<'t> = Vec<(String, Vec<&'t Call>)>;

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
        let exporter = |open: &Call| -> Option<(usize, i64)> {
            let fps = open.fingerprints();
            let fp = fps.first()?;
            t.sharing(fp)
                .find(|c| {
                    c.func == s.export
                        && c.succeeded()
                        && c.proc != open.proc
                        && c.ts_ns < open.ts_ns
                })
                .map(|c| (c.proc, c.pid))
        };
        let opens: Vec<&Call> = t
            .calls()
            .iter()
            .filter(|c| {
                c.func.starts_with(s.open) && c.place.ctx.is_some() && c.place.dev.is_some()
            })
            .collect();
        let held = Opens::of(s, opens.iter().copied().filter(|c| c.succeeded()));
        // The held mappings of each process and device, by context, each in time order: an
        // open looks only at the other contexts' (issue 27).
        let mut by_device: std::collections::HashMap<(usize, Option<i64>), ByContext> =
            Default::default();
        for h in opens.iter().copied().filter(|c| c.succeeded()) {
            let contexts = by_device.entry((h.proc, h.place.dev)).or_default();
            let ctx = h
                .place
                .ctx
                .as_ref()
                .map_or_else(String::new, Value::to_string);
            match contexts.iter_mut().find(|(c, _)| *c == ctx) {
                Some((_, list)) => list.push(h),
                None => contexts.push((ctx, vec![h])),
            }
        }
        let mut found = Vec::new();
        for open in &opens {
            let Some(from) = exporter(open) else {
                continue;
            };
            let ctx = open
                .place
                .ctx
                .as_ref()
                .map_or_else(String::new, Value::to_string);
            let first = by_device
                .get(&(open.proc, open.place.dev))
                .into_iter()
                .flatten()
                .filter(|(c, _)| *c != ctx)
                .filter_map(|(_, list)| {
                    let before = list.partition_point(|h| h.ts_ns < open.ts_ns);
                    list[..before].iter().copied().find(|h| {
                        h.fingerprints() != open.fingerprints()
                            && exporter(h) == Some(from)
                            && open_count(t, s, held.group(s, h), open.ts_ns, false) > 0
                    })
                })
                .min_by_key(|h| h.pos);
            let Some(first) = first else {
                continue;
            };
            let ctx = |c: &Call| c.place.ctx.as_ref().map(shown).unwrap_or_default();
            let answer = match open.ret {
                Some(0) => "the driver opened it anyway".to_string(),
                Some(code) => format!("the driver answered {code}"),
                None => "the driver's answer is not recorded".to_string(),
            };
            found.push(ReportFinding::at(
                &SECOND_CONTEXT_RULE,
                open,
                format!(
                    "context {} of device {} has a handle of process {} open \
                     (another allocation's, opened at {}); this open is in context {} \
                     of the same device: {answer}",
                    ctx(first),
                    open.place.dev.unwrap_or(-1),
                    from.1,
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
    // The exports by the UUID of their memory's device, each list in time order; an open is
    // matched against those of the devices it cannot access only (issue 27).
    let mut by_device: std::collections::HashMap<&str, Vec<&Call>> = Default::default();
    for (export, _) in exports(t, s, calls) {
        if let Some(there) = export.place.uuid.as_deref() {
            by_device.entry(there).or_default().push(export);
        }
    }
    for open in calls
        .iter()
        .filter(|c| c.func.starts_with(s.open) && !c.place.unreachable.is_empty())
    {
        let mut from: Vec<(&Call, &str)> = Vec::new();
        for there in &open.place.unreachable {
            if open.place.uuid.as_ref() == Some(there) {
                continue;
            }
            let list = by_device.get(there.as_str()).map_or(&[][..], Vec::as_slice);
            let before = list.partition_point(|e| e.ts_ns < open.ts_ns);
            from.extend(
                list[..before]
                    .iter()
                    .filter(|e| e.proc != open.proc)
                    .map(|e| (*e, there.as_str())),
            );
        }
        from.sort_by_key(|(e, _)| e.pos);
        from.dedup_by_key(|(e, _)| e.pos);
        for (export, there) in from {
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
                    open.place.dev.unwrap_or(-1),
                    open.place.uuid.as_deref().unwrap_or("?"),
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
    let opens = opens_of(s, calls);
    for (export, free) in exports(t, s, calls) {
        // A free before the exit is the free's finding ([`freed_while_open`]).
        let (None, Some(exit)) = (free, t.exited(export.proc)) else {
            continue;
        };
        // So is a destroy of the memory's context ([`context_destroyed_while_open`]).
        let destroyed = export
            .place
            .ctx
            .as_ref()
            .is_some_and(|ctx| t.first_later(export, "cuCtxDestroy", "ctx", ctx).is_some());
        if destroyed {
            continue;
        }
        let pids = open_elsewhere(t, s, &opens, export, exit);
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
    t.first_later(after, s.destroy, s.destroy_event, event?)
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
        let Some(exit) = t.exited(open.proc) else {
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
                open.proc != export.proc
                    && open.func == s.open
                    && open.succeeded()
                    && open.ts_ns < gone.ts_ns
                    && destroyed(t, s, open, open.out(s.open_out))
                        .is_none_or(|d| d.ts_ns > gone.ts_ns)
                    && t.exited(open.proc).is_none_or(|e| e > gone.ts_ns)
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
    /// An importer that ended through `exit` with an opened mapping it never closed: reported
    /// once per process and pointer, on the last open of it before the exit.
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
    let groups = opens_of(s, calls);
    let mut reported: std::collections::HashSet<(usize, Option<String>)> = Default::default();
    for open in calls.iter().filter(|c| is_open(s, c)) {
        let Some(exit) = t.exited(open.proc) else {
            continue;
        };
        let key = (open.proc, open.out(s.open_out).map(Value::to_string));
        if reported.contains(&key) {
            continue;
        }
        let group = groups.group(s, open);
        let left = open_count(t, s, group, exit, false);
        if left == 0 {
            continue;
        }
        reported.insert(key);
        // Reported on the mapping's last open before the exit, one the exit left open (the
        // first may have been closed long before, in a loop that opens the same address again).
        let before = group.partition_point(|o| o.ts_ns <= exit);
        let open = group[..before].last().copied().unwrap_or(open);
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
