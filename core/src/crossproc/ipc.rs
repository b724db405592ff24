//! The IPC family's report-phase checks: what one process's trace cannot tell, decided over the
//! traces of every process of a job (their rules: `crate::rules::ipc::report`).

use crate::crossproc::cold::{parts, ColdMap, Spill};
use crate::crossproc::{Call, Fp, ReportFinding, Timeline};
use crate::rules::ipc::report::*;
use crate::rules::Rule;
use opens::{Group, OpenCounts};
use serde_json::Value;

mod opens;

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

/// A report check of one rule and one API's spelling, decided by one pass over the timeline's
/// calls (`$pass`, made for the spelling and the rule), reading the calls of `$reads` besides
/// those that carry a fingerprint (`READS` when not named).
macro_rules! report_check {
    ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $pass:ident) => {
        report_check!($(#[$doc])* $name, $instance, $rule, $spelling, $pass, READS);
    };
    ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $spelling:ident, $pass:ident, $reads:ident) => {
        pass_check!($(#[$doc])* $name, $instance, $rule, $reads, $pass::new(&$spelling, &$rule));
    };
}

fn is_open(s: &Spelling, c: &Call) -> bool {
    c.func.starts_with(s.open) && c.succeeded()
}

/// What the driver answered an open, for messages: `opened` where it succeeded.
fn answer(open: &Call, opened: &str) -> String {
    match open.ret {
        Some(0) => opened.to_string(),
        Some(code) => format!("the driver answered {code}"),
        None => "the driver's answer is not recorded".to_string(),
    }
}

/// A pointer argument as the trace writes it (`"0x..."`), for messages.
fn shown(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// A value's key, as the timeline's indexes match values ([`crate::crossproc::value_key`]).
fn key(v: &Value) -> String {
    crate::crossproc::value_key(v).into_owned()
}

impl Spill for Fp {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        let key = bytes.get(..16)?.try_into().ok()?;
        *bytes = &bytes[16..];
        Some(Fp(key))
    }
}

/// The handles a call names, each once, in the order of their fingerprints.
fn handles_of(c: &Call) -> Vec<&str> {
    let mut fps = c.fingerprints();
    fps.sort_unstable();
    fps.dedup();
    fps
}

/// An export a pass follows to its end, shared by the lists that name it.
struct Followed {
    fp: String,
    call: Call,
    /// The exporter's first free of the exported pointer after it: its time and function.
    freed: Option<(u64, crate::crossproc::Name)>,
    /// Whether the exporter destroyed the memory's context after it.
    destroyed: bool,
}

type Shared<T> = std::rc::Rc<std::cell::RefCell<T>>;

/// What one call did to the exports followed: the exports it made (one per handle), and those
/// it freed or whose context it destroyed.
#[derive(Default)]
struct Taken {
    followed: Vec<Shared<Followed>>,
    ended: Vec<Shared<Followed>>,
}

/// The exports of one spelling that a pass follows: by the pointer they wait to see freed, and
/// by the context they wait to see destroyed.
#[derive(Default)]
struct Exports {
    /// (process, pointer's key) -> its exports not freed yet.
    unfreed: std::collections::HashMap<(usize, String), Vec<Shared<Followed>>>,
    /// (process, context's key) -> its exports whose context was not destroyed yet.
    in_context: std::collections::HashMap<(usize, String), Vec<Shared<Followed>>>,
    /// Process -> its exports of no pointer (never freed).
    unnamed: std::collections::HashMap<usize, Vec<Shared<Followed>>>,
    /// Exports freed at the time being: their context no longer matters once it ends (a
    /// destroy after the free is not the destroy's finding), so they are forgotten then.
    freed_now: Vec<Shared<Followed>>,
}

impl Exports {
    /// Takes in the next call: an export to follow (one per handle it names), a free or a
    /// context destroy that ends some.
    fn call(&mut self, s: &Spelling, c: &Call) -> Taken {
        let mut taken = Taken::default();
        if !c.succeeded() {
            return taken;
        }
        if c.func == s.export {
            for fp in handles_of(c) {
                let followed = std::rc::Rc::new(std::cell::RefCell::new(Followed {
                    fp: fp.to_string(),
                    call: c.clone(),
                    freed: None,
                    destroyed: false,
                }));
                match c.arg(s.export_ptr) {
                    Some(ptr) => self
                        .unfreed
                        .entry((c.proc, key(ptr)))
                        .or_default()
                        .push(followed.clone()),
                    None => self
                        .unnamed
                        .entry(c.proc)
                        .or_default()
                        .push(followed.clone()),
                }
                if let Some(ctx) = c.place.ctx.as_ref() {
                    self.in_context
                        .entry((c.proc, key(ctx)))
                        .or_default()
                        .push(followed.clone());
                }
                taken.followed.push(followed);
            }
        } else if c.func.starts_with(s.free) {
            if let Some(ptr) = c.arg(s.free_ptr) {
                for e in self
                    .unfreed
                    .remove(&(c.proc, key(ptr)))
                    .into_iter()
                    .flatten()
                {
                    e.borrow_mut().freed = Some((c.ts_ns, c.func.clone()));
                    self.freed_now.push(e.clone());
                    taken.ended.push(e);
                }
            }
        }
        if c.func.starts_with("cuCtxDestroy") {
            if let Some(ctx) = c.arg("ctx") {
                for e in self
                    .in_context
                    .remove(&(c.proc, key(ctx)))
                    .into_iter()
                    .flatten()
                {
                    e.borrow_mut().destroyed = true;
                    taken.ended.push(e);
                }
            }
        }
        taken
    }

    /// Every call at the time being was given: forgets the exports freed at it (memory bounded
    /// by the exports alive, issue 27), and hands them back.
    fn settle(&mut self) -> Vec<Shared<Followed>> {
        let freed = std::mem::take(&mut self.freed_now);
        for e in &freed {
            let at = {
                let e = e.borrow();
                e.call.place.ctx.as_ref().map(|ctx| (e.call.proc, key(ctx)))
            };
            let Some(at) = at else { continue };
            if let Some(list) = self.in_context.get_mut(&at) {
                list.retain(|other| !std::rc::Rc::ptr_eq(other, e));
                if list.is_empty() {
                    self.in_context.remove(&at);
                }
            }
        }
        freed
    }

    /// Process `proc` exited (asked after every question about its time): its memory went with
    /// it, so none of its exports is followed any more (issue 27: memory bounded by the exports
    /// alive, not by those of every process that came and went).
    fn exited(&mut self, proc: usize) {
        self.unfreed.retain(|(p, _), _| *p != proc);
        self.in_context.retain(|(p, _), _| *p != proc);
        self.unnamed.remove(&proc);
    }

    /// Process `proc`'s exports not freed, in the order they came.
    fn unfreed_of(&self, proc: usize) -> Vec<Shared<Followed>> {
        let mut found: Vec<Shared<Followed>> = self
            .unfreed
            .iter()
            .filter(|((p, _), _)| *p == proc)
            .flat_map(|(_, list)| list.iter().cloned())
            .chain(self.unnamed.get(&proc).into_iter().flatten().cloned())
            .collect();
        found.sort_by_key(|e| e.borrow().call.pos);
        found
    }
}

/// [`ExporterExited`] as a pass: at the exporter's exit, its exports neither freed nor their
/// context destroyed, with what other processes still had open.
struct ExporterExitedPass {
    s: &'static Spelling,
    rule: &'static Rule,
    opens: OpenCounts,
    exports: Exports,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl ExporterExitedPass {
    fn new(s: &'static Spelling, rule: &'static Rule) -> Self {
        ExporterExitedPass {
            s,
            rule,
            opens: OpenCounts::default(),
            exports: Exports::default(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for ExporterExitedPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        self.opens.call(self.s, c);
        self.exports.call(self.s, c);
    }

    fn settle(&mut self, _t: &Timeline, _ts_ns: u64) {
        self.exports.settle();
    }

    fn exit(&mut self, t: &Timeline, proc: usize, ts_ns: u64) {
        let s = self.s;
        for e in self.exports.unfreed_of(proc) {
            let e = e.borrow();
            if e.destroyed {
                continue;
            }
            let pids = self.opens.open_elsewhere(t, &e.fp, proc, ts_ns);
            if pids.is_empty() {
                continue;
            }
            let exported = e.call.arg(s.export_ptr).map(shown).unwrap_or_default();
            self.found.push((
                (e.fp.clone(), e.call.pos, 0),
                ReportFinding::at(
                    self.rule,
                    &e.call,
                    format!(
                        "process {} exited (its memory freed with it) while {exported}, \
                         exported here, was still open in process {} ({}, not yet closed)",
                        e.call.pid,
                        pids.join(", "),
                        s.open
                    ),
                ),
            ));
        }
        self.opens.exited(proc);
        self.exports.exited(proc);
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.found
    }
}

/// What ends an export's memory in a check of what was still open elsewhere then.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// The exporter's free of the exported pointer ([`FreedWhileOpen`]).
    Free,
    /// The exporter's destroy of the memory's context, unless it freed the memory before
    /// ([`ContextDestroyedWhileOpen`]).
    ContextDestroy,
}

/// [`FreedWhileOpen`] and [`ContextDestroyedWhileOpen`] as a pass: each export waits for the
/// call that ends its memory (`ending`), decided once every call at that call's time was seen:
/// the processes that still had it open then.
struct EndedWhileOpenPass {
    s: &'static Spelling,
    rule: &'static Rule,
    ending: Ending,
    opens: OpenCounts,
    exports: Exports,
    /// Exports whose memory the last calls ended, with the call: decided at its time's end.
    due: Vec<(Shared<Followed>, Call)>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl EndedWhileOpenPass {
    fn new(s: &'static Spelling, rule: &'static Rule, ending: Ending) -> Self {
        EndedWhileOpenPass {
            s,
            rule,
            ending,
            opens: OpenCounts::default(),
            exports: Exports::default(),
            due: Vec::new(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for EndedWhileOpenPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        self.opens.call(self.s, c);
        let ended = self.exports.call(self.s, c).ended;
        let due = match self.ending {
            // A call that destroys a context frees nothing here.
            Ending::Free => c.func.starts_with(self.s.free),
            Ending::ContextDestroy => c.func.starts_with("cuCtxDestroy"),
        };
        for e in ended.into_iter().filter(|_| due) {
            // A free before the destroy is the free's finding.
            let freed_before = matches!(e.borrow().freed, Some((ts, _)) if ts < c.ts_ns);
            if self.ending == Ending::Free || (e.borrow().destroyed && !freed_before) {
                self.due.push((e, c.clone()));
            }
        }
    }

    fn settle(&mut self, t: &Timeline, _ts_ns: u64) {
        let s = self.s;
        self.exports.settle();
        for (export, end) in std::mem::take(&mut self.due) {
            let export = export.borrow();
            let pids = self
                .opens
                .open_elsewhere(t, &export.fp, export.call.proc, end.ts_ns);
            if pids.is_empty() {
                continue;
            }
            let exported = export.call.arg(s.export_ptr).map(shown).unwrap_or_default();
            let (open, pids) = (s.open, pids.join(", "));
            let message = match self.ending {
                Ending::Free => format!(
                    "{} {exported} was exported ({}) and is still open in process {pids} \
                     ({open}, not yet closed)",
                    end.func, s.export
                ),
                Ending::ContextDestroy => format!(
                    "this context held {exported}, exported ({}) and still open in process \
                     {pids} ({open}, not yet closed): the destroy freed it",
                    s.export
                ),
            };
            self.found.push((
                (export.fp.clone(), export.call.pos, 0),
                ReportFinding::at(self.rule, &end, message),
            ));
        }
    }

    fn exit(&mut self, _t: &Timeline, proc: usize, _ts_ns: u64) {
        self.opens.exited(proc);
        self.exports.exited(proc);
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.found
    }
}

/// [`NeverClosed`] as a pass: at an importer's exit, its mappings still open.
struct NeverClosedPass {
    s: &'static Spelling,
    rule: &'static Rule,
    opens: OpenCounts,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl NeverClosedPass {
    fn new(s: &'static Spelling, rule: &'static Rule) -> Self {
        NeverClosedPass {
            s,
            rule,
            opens: OpenCounts::default(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for NeverClosedPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        self.opens.call(self.s, c);
    }

    fn exit(&mut self, _t: &Timeline, proc: usize, ts_ns: u64) {
        // Once per handle, process and pointer: the first of its groups (by first open) left open.
        let mut reported: std::collections::HashSet<(&str, &str)> = Default::default();
        let groups: Vec<(&str, &str, &Group)> = self
            .opens
            .of_process(proc)
            .into_iter()
            .map(|g| (g.key.0.as_str(), g.key.2.as_str(), g))
            .collect();
        let mut found = Vec::new();
        for (fp, ptr, group) in groups {
            if reported.contains(&(fp, ptr)) {
                continue;
            }
            let left = self.opens.count(group, ts_ns, false);
            if left == 0 {
                continue;
            }
            reported.insert((fp, ptr));
            let open = &group.last;
            let mapped = open.out(self.s.open_out).map(shown).unwrap_or_default();
            found.push((
                (fp.to_string(), group.first_pos, 0),
                ReportFinding::at(
                    self.rule,
                    open,
                    format!(
                        "{mapped} was still open ({left} open(s) without a close) when \
                         process {} exited",
                        open.pid
                    ),
                ),
            ));
        }
        self.found.extend(found);
        self.opens.exited(proc);
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.found
    }
}

/// An export as [`OpenedAfterFree`] remembers it: followed while alive, and once freed or its
/// process exited, only what an open after it names (issue 27: a handle seen costs about 100
/// bytes, not its call).
#[derive(Clone)]
enum Known {
    Alive(Shared<Followed>),
    Spent(std::rc::Rc<Spent>),
}

/// What [`Known::Spent`] keeps of an export.
struct Spent {
    ts_ns: u64,
    pos: usize,
    pid: i64,
    /// The pointer exported, as the trace writes it (empty: none).
    exported: Box<str>,
    freed: Option<(u64, crate::crossproc::Name)>,
}

impl Known {
    fn spent(&self, s: &Spelling) -> Spent {
        match self {
            Known::Spent(spent) => Spent {
                exported: spent.exported.clone(),
                freed: spent.freed.clone(),
                ..**spent
            },
            Known::Alive(e) => {
                let e = e.borrow();
                Spent {
                    ts_ns: e.call.ts_ns,
                    pos: e.call.pos,
                    pid: e.call.pid,
                    exported: e
                        .call
                        .arg(s.export_ptr)
                        .map(shown)
                        .unwrap_or_default()
                        .into(),
                    freed: e.freed.clone(),
                }
            }
        }
    }

    /// Its time and its place in the timeline.
    fn at(&self) -> (u64, usize) {
        match self {
            Known::Alive(e) => {
                let e = e.borrow();
                (e.call.ts_ns, e.call.pos)
            }
            Known::Spent(spent) => (spent.ts_ns, spent.pos),
        }
    }

    /// Whether it is export `e`, followed.
    fn is(&self, e: &Shared<Followed>) -> bool {
        matches!(self, Known::Alive(mine) if std::rc::Rc::ptr_eq(mine, e))
    }
}

/// A process's latest export of a handle, and its latest export of an earlier time.
struct Latest {
    proc: usize,
    last: Known,
    earlier: Option<Known>,
}

impl Spill for Spent {
    fn write(&self, out: &mut Vec<u8>) {
        parts::u64(out, self.ts_ns);
        parts::u64(out, self.pos as u64);
        parts::u64(out, self.pid as u64);
        parts::str(out, &self.exported);
        match &self.freed {
            Some((ts, f)) => {
                parts::u64(out, 1);
                parts::u64(out, *ts);
                parts::str(out, f);
            }
            None => parts::u64(out, 0),
        }
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        Some(Spent {
            ts_ns: parts::read_u64(bytes)?,
            pos: parts::read_u64(bytes)? as usize,
            pid: parts::read_u64(bytes)? as i64,
            exported: parts::read_str(bytes)?.into(),
            freed: match parts::read_u64(bytes)? {
                0 => None,
                _ => Some((
                    parts::read_u64(bytes)?,
                    crate::crossproc::Name(parts::read_str(bytes)?.into()),
                )),
            },
        })
    }
}

impl Spill for Latest {
    /// Written only once spent ([`Spill::spillable`]): an export alive is shared with the
    /// exports followed.
    fn write(&self, out: &mut Vec<u8>) {
        let spent = |k: &Known, out: &mut Vec<u8>| {
            if let Known::Spent(spent) = k {
                spent.write(out);
            }
        };
        parts::u64(out, self.proc as u64);
        spent(&self.last, out);
        parts::u64(out, u64::from(self.earlier.is_some()));
        if let Some(earlier) = &self.earlier {
            spent(earlier, out);
        }
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        let spent = |bytes: &mut &[u8]| Some(Known::Spent(std::rc::Rc::new(Spent::read(bytes)?)));
        let proc = parts::read_u64(bytes)? as usize;
        let last = spent(bytes)?;
        let earlier = match parts::read_u64(bytes)? {
            0 => None,
            _ => Some(spent(bytes)?),
        };
        Some(Latest {
            proc,
            last,
            earlier,
        })
    }

    fn spillable(&self) -> bool {
        let spent = |k: &Known| matches!(k, Known::Spent(_));
        spent(&self.last) && self.earlier.as_ref().is_none_or(spent)
    }
}

/// [`OpenedAfterFree`] as a pass: per handle and exporting process, its latest exports (the
/// latest, and the latest of an earlier time, for an open at the latest's time).
struct OpenedAfterFreePass {
    s: &'static Spelling,
    rule: &'static Rule,
    exports: Exports,
    /// Fingerprint -> each exporting process's latest exports.
    latest: ColdMap<Fp, Vec<Latest>>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl OpenedAfterFreePass {
    fn new(s: &'static Spelling, rule: &'static Rule) -> Self {
        OpenedAfterFreePass {
            s,
            rule,
            exports: Exports::default(),
            latest: ColdMap::new(usize::MAX),
            found: Vec::new(),
        }
    }

    /// Keeps only what an open names of export `e`, followed until now (freed, or its process
    /// exited).
    fn spend(&mut self, e: &Shared<Followed>) {
        let (fp, proc) = {
            let e = e.borrow();
            (Fp::of(&e.fp), e.call.proc)
        };
        let Some(list) = self.latest.get_mut(&fp) else {
            return;
        };
        for mine in list.iter_mut().filter(|l| l.proc == proc) {
            for known in std::iter::once(&mut mine.last).chain(mine.earlier.as_mut()) {
                if known.is(e) {
                    *known = Known::Spent(std::rc::Rc::new(known.spent(self.s)));
                }
            }
        }
    }
}

impl crate::crossproc::Pass for OpenedAfterFreePass {
    fn call(&mut self, t: &Timeline, c: &Call) {
        let s = self.s;
        self.latest.bounded_by(t);
        for followed in self.exports.call(s, c).followed {
            let fp = Fp::of(&followed.borrow().fp);
            let list = self.latest.entry(fp);
            match list.iter_mut().find(|l| l.proc == c.proc) {
                None => list.push(Latest {
                    proc: c.proc,
                    last: Known::Alive(followed),
                    earlier: None,
                }),
                Some(mine) => {
                    if mine.last.at().0 < c.ts_ns {
                        mine.earlier = Some(mine.last.clone());
                    }
                    mine.last = Known::Alive(followed);
                }
            }
        }
        if !c.func.starts_with(s.open) {
            return;
        }
        for fp in handles_of(c) {
            // The last export of this handle before the open (an earlier time), by another
            // process.
            let export = self
                .latest
                .get_mut(&Fp::of(fp))
                .map(|list| &*list)
                .into_iter()
                .flatten()
                .filter(|l| l.proc != c.proc)
                .filter_map(|l| {
                    if l.last.at().0 < c.ts_ns {
                        Some(&l.last)
                    } else {
                        l.earlier.as_ref()
                    }
                })
                .max_by_key(|e| e.at().1);
            let Some(export) = export.map(|e| e.spent(s)) else {
                continue;
            };
            let Some((freed_at, free_fn)) = &export.freed else {
                continue;
            };
            if *freed_at >= c.ts_ns {
                continue;
            }
            let answer = answer(
                c,
                "the driver opened it anyway: the memory mapped is not the memory exported",
            );
            self.found.push((
                (fp.to_string(), c.pos, 0),
                ReportFinding::at(
                    self.rule,
                    c,
                    format!(
                        "process {} exported {} ({}) and freed it ({}) before this open; {answer}",
                        export.pid, export.exported, s.export, free_fn
                    ),
                ),
            ));
        }
    }

    fn settle(&mut self, _t: &Timeline, _ts_ns: u64) {
        for e in self.exports.settle() {
            self.spend(&e);
        }
    }

    fn exit(&mut self, _t: &Timeline, proc: usize, _ts_ns: u64) {
        for e in self.exports.unfreed_of(proc) {
            self.spend(&e);
        }
        self.exports.exited(proc);
    }

    fn end(self: Box<Self>, t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.latest.tell(t);
        self.found
    }
}

/// One exporting process's exports of a handle on one device, in a row: what an open on a
/// device that cannot access that one is told, once per export.
#[derive(Clone)]
struct Run {
    proc: usize,
    pid: i64,
    first_pos: usize,
    count: usize,
    last_ts: u64,
    at_last: usize,
}

impl Spill for Run {
    fn write(&self, out: &mut Vec<u8>) {
        for v in [self.proc as u64, self.pid as u64, self.first_pos as u64] {
            parts::u64(out, v);
        }
        for v in [self.count as u64, self.last_ts, self.at_last as u64] {
            parts::u64(out, v);
        }
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        Some(Run {
            proc: parts::read_u64(bytes)? as usize,
            pid: parts::read_u64(bytes)? as i64,
            first_pos: parts::read_u64(bytes)? as usize,
            count: parts::read_u64(bytes)? as usize,
            last_ts: parts::read_u64(bytes)?,
            at_last: parts::read_u64(bytes)? as usize,
        })
    }
}

impl Spill for (Fp, crate::crossproc::Name) {
    fn write(&self, out: &mut Vec<u8>) {
        self.0.write(out);
        parts::str(out, &self.1);
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        let fp = Fp::read(bytes)?;
        Some((fp, crate::crossproc::Name(parts::read_str(bytes)?.into())))
    }
}

/// [`Unreachable`] as a pass: per handle and device (UUID), its exports as runs of one process.
struct UnreachablePass {
    s: &'static Spelling,
    rule: &'static Rule,
    by_device: ColdMap<(Fp, crate::crossproc::Name), Vec<Run>>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl UnreachablePass {
    fn new(s: &'static Spelling, rule: &'static Rule) -> Self {
        UnreachablePass {
            s,
            rule,
            by_device: ColdMap::new(usize::MAX),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for UnreachablePass {
    fn call(&mut self, t: &Timeline, c: &Call) {
        let s = self.s;
        self.by_device.bounded_by(t);
        if c.func == s.export && c.succeeded() {
            if let Some(there) = &c.place.uuid {
                for fp in handles_of(c) {
                    let runs = self.by_device.entry((Fp::of(fp), there.clone()));
                    match runs.last_mut() {
                        Some(run) if run.proc == c.proc => {
                            run.count += 1;
                            if run.last_ts != c.ts_ns {
                                run.last_ts = c.ts_ns;
                                run.at_last = 0;
                            }
                            run.at_last += 1;
                        }
                        _ => runs.push(Run {
                            proc: c.proc,
                            pid: c.pid,
                            first_pos: c.pos,
                            count: 1,
                            last_ts: c.ts_ns,
                            at_last: 1,
                        }),
                    }
                }
            }
        }
        if !c.func.starts_with(s.open) || c.place.unreachable.is_empty() {
            return;
        }
        let mut theres: Vec<&crate::crossproc::Name> = Vec::new();
        for there in &c.place.unreachable {
            if c.place.uuid.as_ref() != Some(there) && !theres.contains(&there) {
                theres.push(there);
            }
        }
        for fp in handles_of(c) {
            let mut from: Vec<(Run, usize, &crate::crossproc::Name)> = Vec::new();
            for &there in &theres {
                let runs = self.by_device.get_mut(&(Fp::of(fp), there.clone()));
                for run in runs.into_iter().flatten() {
                    let before = if run.last_ts == c.ts_ns {
                        run.count - run.at_last
                    } else {
                        run.count
                    };
                    if run.proc != c.proc && before > 0 {
                        from.push((run.clone(), before, there));
                    }
                }
            }
            from.sort_by_key(|(run, _, _)| run.first_pos);
            for (run, n, there) in from {
                let answer = answer(c, "the driver opened it anyway");
                let finding = ReportFinding::at(
                    self.rule,
                    c,
                    format!(
                        "device {} ({}) of this process cannot access device {there}, where \
                         process {} exported the memory (the peer query says 0): {answer}",
                        c.place.dev.unwrap_or(-1),
                        c.place.uuid.as_deref().unwrap_or("?"),
                        run.pid
                    ),
                );
                for _ in 0..n {
                    self.found
                        .push(((fp.to_string(), c.pos, run.first_pos), finding.clone()));
                }
            }
        }
    }

    fn end(self: Box<Self>, t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.by_device.tell(t);
        self.found
    }
}

/// An open a pass keeps until its event is destroyed.
struct LiveEvent {
    fp: String,
    call: Call,
}

/// The opens of imported events not destroyed yet: (process, event's key, or none) -> opens.
type LiveEvents = std::collections::HashMap<(usize, Option<String>), Vec<LiveEvent>>;

/// Takes in an event check's next call: a successful open of an event to keep, a successful
/// destroy that ends every open of its event in its process. Returns the destroy's event key.
fn live_events(s: &EventSpelling, live: &mut LiveEvents, c: &Call) -> Option<(usize, String)> {
    if !c.succeeded() {
        return None;
    }
    if c.func == s.open {
        let at = (c.proc, c.out(s.open_out).map(key));
        for fp in handles_of(c) {
            live.entry(at.clone()).or_default().push(LiveEvent {
                fp: fp.to_string(),
                call: c.clone(),
            });
        }
    }
    if c.func.starts_with(s.destroy) {
        if let Some(event) = c.arg(s.destroy_event) {
            let at = (c.proc, key(event));
            live.remove(&(at.0, Some(at.1.clone())));
            return Some(at);
        }
    }
    None
}

/// [`EventNeverDestroyed`] as a pass: at an importer's exit, the events it opened and never
/// destroyed.
struct EventNeverDestroyedPass {
    s: &'static EventSpelling,
    rule: &'static Rule,
    live: LiveEvents,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl EventNeverDestroyedPass {
    fn new(s: &'static EventSpelling, rule: &'static Rule) -> Self {
        EventNeverDestroyedPass {
            s,
            rule,
            live: Default::default(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for EventNeverDestroyedPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        live_events(self.s, &mut self.live, c);
    }

    fn exit(&mut self, _t: &Timeline, proc: usize, _ts_ns: u64) {
        let mine: Vec<(usize, Option<String>)> = self
            .live
            .keys()
            .filter(|(p, _)| *p == proc)
            .cloned()
            .collect();
        for at in mine {
            for open in self.live.remove(&at).into_iter().flatten() {
                let event = open
                    .call
                    .out(self.s.open_out)
                    .map(shown)
                    .unwrap_or_default();
                self.found.push((
                    (open.fp, open.call.pos, 0),
                    ReportFinding::at(
                        self.rule,
                        &open.call,
                        format!(
                            "event {event}, opened here, was never destroyed before process {} \
                             exited",
                            open.call.pid
                        ),
                    ),
                ));
            }
        }
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.found
    }
}

/// [`EventDestroyedWhileOpen`] as a pass: each export waits for the exporter's destroy of
/// its event, decided once every call at the destroy's time was seen.
struct EventDestroyedWhileOpenPass {
    s: &'static EventSpelling,
    rule: &'static Rule,
    live: LiveEvents,
    /// (process, event's key) -> its exports (one per handle) not destroyed yet.
    waiting: std::collections::HashMap<(usize, String), Vec<LiveEvent>>,
    due: Vec<(LiveEvent, Call)>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl EventDestroyedWhileOpenPass {
    fn new(s: &'static EventSpelling, rule: &'static Rule) -> Self {
        EventDestroyedWhileOpenPass {
            s,
            rule,
            live: Default::default(),
            waiting: Default::default(),
            due: Vec::new(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for EventDestroyedWhileOpenPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        let s = self.s;
        if c.func == s.export && c.succeeded() {
            if let Some(event) = c.arg(s.export_event) {
                let waiting = self.waiting.entry((c.proc, key(event))).or_default();
                for fp in handles_of(c) {
                    waiting.push(LiveEvent {
                        fp: fp.to_string(),
                        call: c.clone(),
                    });
                }
            }
        }
        if let Some(at) = live_events(s, &mut self.live, c) {
            for export in self.waiting.remove(&at).into_iter().flatten() {
                self.due.push((export, c.clone()));
            }
        }
    }

    fn settle(&mut self, t: &Timeline, _ts_ns: u64) {
        let s = self.s;
        for (export, gone) in std::mem::take(&mut self.due) {
            let mut pids: Vec<i64> = self
                .live
                .values()
                .flatten()
                .filter(|open| {
                    open.fp == export.fp
                        && open.call.proc != export.call.proc
                        && open.call.ts_ns < gone.ts_ns
                        && t.exited(open.call.proc).is_none_or(|e| e > gone.ts_ns)
                })
                .map(|open| open.call.pid)
                .collect();
            pids.sort_unstable();
            pids.dedup();
            if pids.is_empty() {
                continue;
            }
            let pids: Vec<String> = pids.iter().map(i64::to_string).collect();
            self.found.push((
                (export.fp, export.call.pos, 0),
                ReportFinding::at(
                    self.rule,
                    &gone,
                    format!(
                        "the event was exported ({}) and process {} still holds its copy ({}, \
                         not yet destroyed): any operation on that copy from now on is undefined",
                        s.export,
                        pids.join(", "),
                        s.open
                    ),
                ),
            ));
        }
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.found
    }
}

/// A process that exported a handle: its process and pid, and when it first did.
type Exporter = (usize, i64);

impl Spill for (usize, i64, u64) {
    fn write(&self, out: &mut Vec<u8>) {
        parts::u64(out, self.0 as u64);
        parts::u64(out, self.1 as u64);
        parts::u64(out, self.2);
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        let proc = parts::read_u64(bytes)? as usize;
        let pid = parts::read_u64(bytes)? as i64;
        Some((proc, pid, parts::read_u64(bytes)?))
    }
}

/// [`SecondContext`] as a pass. It keeps, per handle, each process's first export; per
/// process, device and context, the earliest open of each mapping (pointer) per handles named
/// and exporter; and every process's held mappings, counted across handles.
struct SecondContextPass {
    /// Fingerprint -> each exporting process's first successful export: (process, pid, time).
    exporters: ColdMap<Fp, Vec<(usize, i64, u64)>>,
    held: OpenCounts,
    /// (process, device) -> context's text -> pointer's text -> (handles named, exporter) ->
    /// the earliest such open.
    earliest: std::collections::HashMap<
        (usize, Option<i64>),
        std::collections::BTreeMap<String, Earliest>,
    >,
    /// Process -> the devices of its [`SecondContextPass::earliest`] entries.
    devices: std::collections::HashMap<usize, std::collections::BTreeSet<Option<i64>>>,
    /// Opens waiting for their time's end, with their exporter.
    due: Vec<(Call, Exporter)>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

/// A context's earliest opens: pointer's text -> (handles named, exporter) -> the open.
type Earliest = std::collections::HashMap<String, Vec<(Vec<String>, Option<Exporter>, Call)>>;

impl SecondContextPass {
    fn new() -> Self {
        SecondContextPass {
            exporters: ColdMap::new(usize::MAX),
            held: OpenCounts::telling_gone(),
            earliest: Default::default(),
            devices: Default::default(),
            due: Vec::new(),
            found: Vec::new(),
        }
    }

    /// The process whose export shares `open`'s (first) handle: the first successful export of
    /// it by another process, before the open.
    fn exporter(&mut self, open: &Call) -> Option<Exporter> {
        let fps = open.fingerprints();
        let fp = fps.first()?;
        self.exporters
            .get_mut(&Fp::of(fp))?
            .iter()
            .filter(|(proc, _, ts)| *proc != open.proc && *ts < open.ts_ns)
            .min_by_key(|(_, _, ts)| *ts)
            .map(|(proc, pid, _)| (*proc, *pid))
    }

    /// Lets go of the earliest opens of the mappings no longer held (closed, their context
    /// destroyed, their process exited): a mapping opened again starts anew.
    fn let_go(&mut self) {
        let gone = self.held.gone.as_mut().map(std::mem::take);
        for (_, proc, ptr, ctx) in gone.into_iter().flatten() {
            let Some(devices) = self.devices.get_mut(&proc) else {
                continue;
            };
            devices.retain(|dev| {
                let Some(contexts) = self.earliest.get_mut(&(proc, *dev)) else {
                    return false;
                };
                if let Some(mappings) = contexts.get_mut(&ctx) {
                    mappings.remove(&ptr);
                    if mappings.is_empty() {
                        contexts.remove(&ctx);
                    }
                }
                if contexts.is_empty() {
                    self.earliest.remove(&(proc, *dev));
                    return false;
                }
                true
            });
            if devices.is_empty() {
                self.devices.remove(&proc);
            }
        }
    }
}

impl crate::crossproc::Pass for SecondContextPass {
    fn call(&mut self, t: &Timeline, c: &Call) {
        let s = &CUDA;
        self.exporters.bounded_by(t);
        if c.func == s.export && c.succeeded() {
            for fp in c.fingerprints() {
                let list = self.exporters.entry(Fp::of(fp));
                if !list.iter().any(|(proc, _, _)| *proc == c.proc) {
                    list.push((c.proc, c.pid, c.ts_ns));
                }
            }
        }
        // Every close and destroy counts; only the opens this check reads are held.
        let read = c.func.starts_with(s.open) && c.place.ctx.is_some() && c.place.dev.is_some();
        self.held.call_as(s, c, if read { &[""] } else { &[] });
        self.let_go();
        if !read {
            return;
        }
        let from = self.exporter(c);
        if c.succeeded() {
            let text = |v: Option<&Value>| v.map_or_else(String::new, Value::to_string);
            let fps = c.fingerprints();
            let list = self
                .earliest
                .entry((c.proc, c.place.dev))
                .or_default()
                .entry(text(c.place.ctx.as_ref()))
                .or_default()
                .entry(text(c.out(s.open_out)))
                .or_default();
            let same = |f: &Vec<String>| f.iter().map(String::as_str).eq(fps.iter().copied());
            if !list.iter().any(|(f, e, _)| *e == from && same(f)) {
                let fps = fps.iter().map(ToString::to_string).collect();
                list.push((fps, from, c.clone()));
            }
            self.devices.entry(c.proc).or_default().insert(c.place.dev);
        }
        if let Some(from) = from {
            self.due.push((c.clone(), from));
        }
    }

    fn settle(&mut self, _t: &Timeline, _ts_ns: u64) {
        let s = &CUDA;
        let text = |v: Option<&Value>| v.map_or_else(String::new, Value::to_string);
        for (open, from) in std::mem::take(&mut self.due) {
            let ctx = text(open.place.ctx.as_ref());
            let fps = open.fingerprints();
            let mut first: Option<&Call> = None;
            let contexts = self.earliest.get(&(open.proc, open.place.dev));
            for (other, mappings) in contexts.into_iter().flatten() {
                if *other == ctx {
                    continue;
                }
                for (ptr, list) in mappings {
                    let Some(group) = self.held.get("", open.proc, ptr, other) else {
                        continue;
                    };
                    if self.held.count(group, open.ts_ns, false) == 0 {
                        continue;
                    }
                    for (f, e, h) in list {
                        if h.ts_ns < open.ts_ns
                            && f.iter().map(String::as_str).ne(fps.iter().copied())
                            && *e == Some(from)
                            && first.is_none_or(|best| h.pos < best.pos)
                        {
                            first = Some(h);
                        }
                    }
                }
            }
            let Some(first) = first else { continue };
            let ctx = |c: &Call| c.place.ctx.as_ref().map(shown).unwrap_or_default();
            let answer = answer(&open, "the driver opened it anyway");
            let finding = ReportFinding::at(
                &SECOND_CONTEXT_RULE,
                &open,
                format!(
                    "context {} of device {} has a handle of process {} open \
                     (another allocation's, opened at {}); this open is in context {} \
                     of the same device: {answer}",
                    ctx(first),
                    open.place.dev.unwrap_or(-1),
                    from.1,
                    first.out(s.open_out).map(shown).unwrap_or_default(),
                    ctx(&open)
                ),
            );
            self.found.push(((String::new(), open.pos, 0), finding));
        }
    }

    fn exit(&mut self, _t: &Timeline, proc: usize, _ts_ns: u64) {
        self.held.exited(proc);
        self.let_go();
    }

    fn end(self: Box<Self>, t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.exporters.tell(t);
        self.found
    }
}

pass_check!(
    /// The exporter's free of memory an importer still had open: exports and opens
    /// are matched by the handle's fingerprint, the free by the exported pointer, the
    /// close by the pointer the open returned; time is each record's wall clock
    /// (`ts_ns`), one clock for every process of a host. An importer that never closed
    /// counts as open until its trace ends.
    FreedWhileOpen,
    FREED_WHILE_OPEN,
    FREED_WHILE_OPEN_RULE,
    READS,
    EndedWhileOpenPass::new(&CUDA, &FREED_WHILE_OPEN_RULE, Ending::Free)
);
pass_check!(
    /// [`FreedWhileOpen`] in HIP.
    HipFreedWhileOpen,
    HIP_FREED_WHILE_OPEN,
    HIP_FREED_WHILE_OPEN_RULE,
    READS,
    EndedWhileOpenPass::new(&HIP, &HIP_FREED_WHILE_OPEN_RULE, Ending::Free)
);

report_check!(
    /// An importer's open of a handle whose allocation the exporter had freed by then
    /// (and exported no more since: R580 hands the same handle out for new memory at the
    /// same address, and an open after such a new export is the new memory's).
    OpenedAfterFree,
    OPENED_AFTER_FREE,
    OPENED_AFTER_FREE_RULE,
    CUDA,
    OpenedAfterFreePass
);
report_check!(
    /// [`OpenedAfterFree`] in HIP.
    HipOpenedAfterFree,
    HIP_OPENED_AFTER_FREE,
    HIP_OPENED_AFTER_FREE_RULE,
    HIP,
    OpenedAfterFreePass
);

report_check!(
    /// The exporter's exit (its `exit` record) while an importer still had what it
    /// exported open, and had not freed it before: reported on the export.
    ExporterExited,
    EXPORTER_EXITED,
    EXPORTER_EXITED_RULE,
    CUDA,
    ExporterExitedPass
);
report_check!(
    /// [`ExporterExited`] in HIP.
    HipExporterExited,
    HIP_EXPORTER_EXITED,
    HIP_EXPORTER_EXITED_RULE,
    HIP,
    ExporterExitedPass
);

pass_check!(
    /// The exporter's destroy of the context its exported memory was allocated in (the
    /// export's record names it) while an importer still had the memory open, and had
    /// not freed it before.
    ContextDestroyedWhileOpen,
    CONTEXT_DESTROYED_WHILE_OPEN,
    CONTEXT_DESTROYED_WHILE_OPEN_RULE,
    READS,
    EndedWhileOpenPass::new(&CUDA, &CONTEXT_DESTROYED_WHILE_OPEN_RULE, Ending::ContextDestroy)
);

pass_check!(
    /// An open in a context of a device while another context of that device of the same
    /// process has a handle of the same exporter (another allocation's) open: the opens'
    /// records name their context and device, the exporter is the process whose export
    /// shares the handle's fingerprint.
    SecondContext,
    SECOND_CONTEXT,
    SECOND_CONTEXT_RULE,
    READS,
    SecondContextPass::new()
);

report_check!(
    /// An open in a device that cannot access the exported memory's device: the export's
    /// record names the memory's device by UUID, the open's the UUIDs its device cannot
    /// access.
    Unreachable,
    UNREACHABLE,
    UNREACHABLE_RULE,
    CUDA,
    UnreachablePass
);

report_check!(
    /// [`Unreachable`] in HIP.
    HipUnreachable,
    HIP_UNREACHABLE,
    HIP_UNREACHABLE_RULE,
    HIP,
    UnreachablePass
);

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

report_check!(
    /// An importer that ended through `exit` holding an event it opened and never
    /// destroyed.
    EventNeverDestroyed,
    EVENT_NEVER_DESTROYED,
    EVENT_NEVER_DESTROYED_RULE,
    CUDA_EVENT,
    EventNeverDestroyedPass,
    EVENT_READS
);
report_check!(
    /// [`EventNeverDestroyed`] in HIP.
    HipEventNeverDestroyed,
    HIP_EVENT_NEVER_DESTROYED,
    HIP_EVENT_NEVER_DESTROYED_RULE,
    HIP_EVENT,
    EventNeverDestroyedPass,
    EVENT_READS
);

report_check!(
    /// The exporter's destroy of an event another process still held its copy of.
    EventDestroyedWhileOpen,
    EVENT_DESTROYED_WHILE_OPEN,
    EVENT_DESTROYED_WHILE_OPEN_RULE,
    CUDA_EVENT,
    EventDestroyedWhileOpenPass,
    EVENT_READS
);
report_check!(
    /// [`EventDestroyedWhileOpen`] in HIP.
    HipEventDestroyedWhileOpen,
    HIP_EVENT_DESTROYED_WHILE_OPEN,
    HIP_EVENT_DESTROYED_WHILE_OPEN_RULE,
    HIP_EVENT,
    EventDestroyedWhileOpenPass,
    EVENT_READS
);

report_check!(
    /// An importer that ended through `exit` with an opened mapping it never closed: reported
    /// once per process and pointer, on the last open of it before the exit.
    NeverClosed,
    NEVER_CLOSED,
    NEVER_CLOSED_RULE,
    CUDA,
    NeverClosedPass
);
report_check!(
    /// [`NeverClosed`] in HIP.
    HipNeverClosed,
    HIP_NEVER_CLOSED,
    HIP_NEVER_CLOSED_RULE,
    HIP,
    NeverClosedPass
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crossproc::test_records::{exit, record};
    use crate::crossproc::Pass;
    use serde_json::json;

    const FP: &str = "fp:0123456789abcdef";

    /// Every pass below given `records`, in time order, as `walk_passes` gives them.
    fn walk(t: &Timeline, pass: &mut dyn Pass) {
        let mut exits: Vec<(u64, usize)> = t.exits.iter().map(|(&p, &ts)| (ts, p)).collect();
        exits.sort_unstable();
        let mut exits = exits.into_iter().peekable();
        for c in t.walk() {
            while let Some((ts, proc)) = exits.next_if(|&(ts, _)| ts < c.ts_ns) {
                pass.exit(t, proc, ts);
            }
            pass.call(t, &c);
            pass.settle(t, c.ts_ns);
        }
        exits.for_each(|(ts, proc)| pass.exit(t, proc, ts));
    }

    fn timeline(records: &[serde_json::Map<String, Value>]) -> Timeline {
        let mut t = Timeline::for_checks(crate::crossproc::REPORT_CHECKS);
        records.iter().for_each(|r| t.add(r));
        t.finish();
        t
    }

    /// Handle `n`'s export by process 10 (pointer `0x7000000 + n`), at time `ts`.
    fn export(n: u64, ts: u64) -> serde_json::Map<String, Value> {
        let fp = format!("fp:{n:016x}");
        let ptr = format!("{:#x}", 0x700_0000 + n);
        record(
            10,
            ts,
            "cuIpcGetMemHandle",
            json!({"*pHandle": fp, "dptr": ptr}),
            0,
        )
    }

    fn free(n: u64, ts: u64) -> serde_json::Map<String, Value> {
        let ptr = format!("{:#x}", 0x700_0000 + n);
        record(10, ts, "cuMemFree_v2", json!({"dptr": ptr}), 0)
    }

    /// Issue 27: an export freed, or whose process exited, keeps only what an open after it
    /// names (not its call); the exports followed are let go at their process's exit.
    #[test]
    fn an_export_spent_keeps_only_what_an_open_names() {
        let t = timeline(&[
            export(1, 100),
            export(2, 110),
            free(1, 200),
            export(3, 210),
            exit(10, 300),
        ]);
        let mut pass = OpenedAfterFreePass::new(&CUDA, &OPENED_AFTER_FREE_RULE);
        let (mut before_exit, mut exporter) = (0, None);
        for c in t.walk() {
            pass.call(&t, &c);
            pass.settle(&t, c.ts_ns);
            before_exit = pass.exports.unfreed.len();
            exporter = Some(c.proc);
        }
        assert_eq!(
            before_exit, 2,
            "handles 2 and 3 are followed until the exit"
        );
        let spent = |pass: &mut OpenedAfterFreePass, n: u64| {
            let list = pass
                .latest
                .get_mut(&Fp::of(&format!("fp:{n:016x}")))
                .unwrap();
            matches!(list[0].last, Known::Spent(_))
        };
        assert!(spent(&mut pass, 1) && !spent(&mut pass, 2) && !spent(&mut pass, 3));
        pass.exit(&t, exporter.unwrap(), 300);
        assert!(spent(&mut pass, 2) && spent(&mut pass, 3));
        assert!(pass.exports.unfreed.is_empty() && pass.exports.in_context.is_empty());
        // What was spent still names the export and its free.
        let Known::Spent(one) =
            &pass.latest.get_mut(&Fp::of("fp:0000000000000001")).unwrap()[0].last
        else {
            unreachable!()
        };
        assert_eq!((one.ts_ns, one.pid, &*one.exported), (100, 10, "0x7000001"));
        assert_eq!(
            one.freed.as_ref().map(|(ts, f)| (*ts, f.as_str())),
            Some((200, "cuMemFree_v2"))
        );
    }

    /// Issue 27: what the checks keep of a handle seen goes to disk once it is not used (a small
    /// `--memory-calls` makes it go at once), and comes back for an open long after: a freed
    /// handle opened after hundreds of others were exported and freed is found, with the same
    /// message as when everything stays in memory.
    #[test]
    fn an_export_gone_cold_is_read_back_for_a_late_open() {
        let open = |n: u64, ts: u64| {
            let fp = format!("fp:{n:016x}");
            record(
                20,
                ts,
                "cuIpcOpenMemHandle_v2",
                json!({"*pdptr": "0x9000000", "handle": fp, "Flags": 1}),
                0,
            )
        };
        let mut records = vec![export(1, 100), free(1, 110)];
        for n in 2..300 {
            records.push(export(n, 100 * n));
            records.push(free(n, 100 * n + 10));
        }
        records.push(open(1, 100_000));
        let findings = |spill: usize| {
            let mut t = Timeline::for_checks(crate::crossproc::REPORT_CHECKS);
            t.spill_every(spill);
            records.iter().for_each(|r| t.add(r));
            t.finish();
            let mut pass = OpenedAfterFreePass::new(&CUDA, &OPENED_AFTER_FREE_RULE);
            walk(&t, &mut pass);
            let (hot, runs) = pass.latest.held();
            let found: Vec<String> = Box::new(pass)
                .end(&t)
                .into_iter()
                .map(|(_, f)| format!("{} {} {}", f.pid, f.ts_ns, f.message))
                .collect();
            (found, hot, runs)
        };
        let (in_memory, hot, runs) = findings(0);
        assert_eq!((hot, runs), (299, 0));
        assert_eq!(in_memory.len(), 1, "{in_memory:?}");
        assert!(in_memory[0].contains("exported 0x7000001"), "{in_memory:?}");
        let (cold, hot, runs) = findings(4);
        assert_eq!(cold, in_memory);
        assert!(hot < 10 && runs > 0, "{hot} in memory, {runs} runs");
    }

    /// The open counts hold what is open: a process's exit lets its groups go, and the counts of
    /// closes and destroys only they needed; a group's number is used again.
    #[test]
    fn open_counts_let_go_of_what_is_no_longer_open() {
        let open = |ts: u64, n: u64| {
            let mut r = record(
                20,
                ts,
                "cuIpcOpenMemHandle_v2",
                json!({"*pdptr": format!("{:#x}", 0x900_0000 + n), "handle": FP, "Flags": 1}),
                0,
            );
            r.insert("ctx".into(), "0xc1".into());
            r
        };
        let t = timeline(&[open(100, 1), open(110, 2), exit(20, 200), open(300, 3)]);
        let mut counts = OpenCounts::default();
        let calls: Vec<Call> = t.walk().collect();
        counts.call(&CUDA, &calls[0]);
        counts.call(&CUDA, &calls[1]);
        let proc = calls[0].proc;
        assert_eq!(counts.of_process(proc).len(), 2);
        let g = counts.get(FP, proc, "\"0x9000001\"", "\"0xc1\"").unwrap();
        assert_eq!(counts.count(g, 110, false), 1);
        counts.exited(proc);
        assert_eq!(counts.of_process(proc).len(), 0);
        assert!(counts.get(FP, proc, "\"0x9000001\"", "\"0xc1\"").is_none());
        assert_eq!(counts.held(), (0, 0, 0));
        counts.call(&CUDA, &calls[2]);
        assert_eq!(
            counts.held(),
            (1, 1, 1),
            "one group, its closes and its destroys"
        );
        assert_eq!(counts.slots(), 2, "the first slot let go is used again");
        // The whole pass, as the report walks it: nothing is left open at the end.
        let mut pass = NeverClosedPass::new(&CUDA, &NEVER_CLOSED_RULE);
        walk(&t, &mut pass);
        assert_eq!(
            pass.opens.held(),
            (1, 1, 1),
            "the open at 300 after the exit"
        );
    }
}
