//! The IPC family's report-phase checks: what one process's trace cannot tell, decided over the
//! traces of every process of a job (their rules: `crate::rules::ipc::report`).

use crate::crossproc::{Call, ReportFinding, Timeline};
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

/// What a pass keeps of a handle's successful opens, as counts: per group (opens that mapped one
/// thing: one process, the pointer the open returned and the context it was opened in, the
/// record's `"ctx"`), how many opens, and the closes and context destroys of that process seen
/// when its first open was ([`OpenCounts::count`] counts those after it). A group with nothing
/// open any more (closed, its context destroyed) is the same as none: the next open of the same
/// starts it anew, and it is let go then, at its process's exit, or at a sweep once the groups
/// have doubled, with the counts of closes and destroys only it needed. Memory: about what is
/// open, whatever the history's length and however many handles came and went (issue 27).
#[derive(Default)]
struct OpenCounts {
    groups: std::collections::HashMap<GroupKey, Group>,
    /// A fingerprint's groups, by the position of their first opens.
    by_handle: std::collections::HashMap<
        String,
        std::collections::BTreeMap<usize, (usize, String, String)>,
    >,
    /// A process's groups (fingerprint, pointer, context), by the position of their first opens.
    by_process: std::collections::HashMap<usize, ProcessGroups>,
    /// (process, pointer's key; `None`: closes of no pointer, the exact function) -> its
    /// successful closes since a group first needed them, and the groups they end.
    closes: std::collections::HashMap<usize, std::collections::HashMap<Option<String>, Ends>>,
    /// (process, context's key) -> its successful `cuCtxDestroy` calls since a group first
    /// needed them, and the groups they end.
    destroys: std::collections::HashMap<usize, std::collections::HashMap<String, Ends>>,
    /// The groups let go since it was last taken, where a pass keeps more of each and asked for
    /// them ([`SecondContextPass`]; `None`: not kept).
    gone: Option<Vec<GroupKey>>,
    /// How many groups there may be before the next [`OpenCounts::sweep`].
    sweep_at: usize,
}

/// Groups kept before the first sweep.
const SWEEP_FROM: usize = 4096;

/// A process's groups: (first open's position, fingerprint) -> (pointer, context).
type ProcessGroups = std::collections::BTreeMap<(usize, String), (String, String)>;

/// (fingerprint, process, pointer's text, context's text): a group of opens.
type GroupKey = (String, usize, String, String);

/// Puts group `g` on the counts of `proc`'s `what` (closes of a pointer, destroys of a
/// context): how many there were so far.
fn need<K: std::hash::Hash + Eq>(
    counts: &mut std::collections::HashMap<usize, std::collections::HashMap<K, Ends>>,
    proc: usize,
    what: K,
    g: &GroupKey,
) -> usize {
    let ends = counts.entry(proc).or_default().entry(what).or_default();
    ends.groups.insert(g.clone());
    ends.seen
}

/// Takes group `g` off the counts of `proc`'s `what` (closes of a pointer, destroys of a
/// context), and lets them go when no group needs them.
fn forget<K: std::hash::Hash + Eq>(
    counts: &mut std::collections::HashMap<usize, std::collections::HashMap<K, Ends>>,
    proc: usize,
    what: &K,
    g: &GroupKey,
) {
    let Some(mine) = counts.get_mut(&proc) else {
        return;
    };
    if let Some(e) = mine.get_mut(what) {
        e.groups.remove(g);
        if e.groups.is_empty() {
            mine.remove(what);
        }
    }
    if mine.is_empty() {
        counts.remove(&proc);
    }
}

/// Closes or destroys counted, and the groups that count them.
#[derive(Default)]
struct Ends {
    seen: usize,
    groups: std::collections::HashSet<GroupKey>,
}

struct Group {
    proc: usize,
    pid: i64,
    opens: usize,
    /// The time of the latest open, and how many opens came at it.
    last_ts: u64,
    at_last: usize,
    /// The key of the closes that end it ([`OpenCounts::closes`]), `None`: closes of no
    /// pointer; and their count at its first open.
    closed_by: Option<String>,
    closes_before: usize,
    /// The key of its context's destroys, and their count at its first open.
    ctx: Option<String>,
    destroys_before: usize,
    /// Its latest open (what [`NeverClosed`] names), and the position of its first.
    last: Call,
    first_pos: usize,
}

impl OpenCounts {
    /// Takes in the next call of the timeline: its opens grouped per handle.
    fn call(&mut self, s: &Spelling, c: &Call) {
        self.call_as(s, c, &handles_of(c));
    }

    /// [`OpenCounts::call`] with the opens grouped under `fps` (one empty name: every handle's
    /// opens together).
    fn call_as(&mut self, s: &Spelling, c: &Call, fps: &[&str]) {
        if !c.succeeded() {
            return;
        }
        if c.func.starts_with(s.close) {
            let ends = match c.arg(s.close_ptr) {
                Some(ptr) => Some((c.proc, Some(key(ptr)))),
                None if c.func == s.close => Some((c.proc, None)),
                None => None,
            };
            if let Some(ends) = ends {
                self.ended(ends);
            }
        }
        if c.func.starts_with("cuCtxDestroy") {
            if let Some(ctx) = c.arg("ctx") {
                let ctx = key(ctx);
                if let Some(e) = self.destroys.get_mut(&c.proc).and_then(|m| m.get_mut(&ctx)) {
                    e.seen += 1;
                }
            }
        }
        if !is_open(s, c) {
            return;
        }
        let text = |v: Option<&Value>| v.map_or_else(String::new, Value::to_string);
        let (ptr, ctx) = (text(c.out(s.open_out)), text(c.place.ctx.as_ref()));
        for &fp in fps {
            let at = (fp.to_string(), c.proc, ptr.clone(), ctx.clone());
            // Nothing of it open any more (closed, its context destroyed): it starts anew, as
            // a group made now would.
            if self
                .groups
                .get(&at)
                .is_some_and(|g| self.count(g, c.ts_ns, false) == 0)
            {
                self.restart(&at, c);
            }
            if !self.groups.contains_key(&at) {
                self.sweep(c.ts_ns);
                let closed_by = c.out(s.open_out).map(key);
                let closes_before = need(&mut self.closes, c.proc, closed_by.clone(), &at);
                let ctx_key = c.place.ctx.as_ref().map(key);
                let destroys_before = match &ctx_key {
                    Some(k) => need(&mut self.destroys, c.proc, k.clone(), &at),
                    None => 0,
                };
                self.by_handle
                    .entry(fp.to_string())
                    .or_default()
                    .insert(c.pos, (c.proc, ptr.clone(), ctx.clone()));
                self.by_process
                    .entry(c.proc)
                    .or_default()
                    .insert((c.pos, fp.to_string()), (ptr.clone(), ctx.clone()));
                self.groups.insert(
                    at.clone(),
                    Group {
                        proc: c.proc,
                        pid: c.pid,
                        opens: 0,
                        last_ts: c.ts_ns,
                        at_last: 0,
                        closed_by,
                        closes_before,
                        ctx: ctx_key,
                        destroys_before,
                        last: c.clone(),
                        first_pos: c.pos,
                    },
                );
            }
            let Some(group) = self.groups.get_mut(&at) else {
                continue;
            };
            group.opens += 1;
            if group.last_ts != c.ts_ns {
                group.last_ts = c.ts_ns;
                group.at_last = 0;
            }
            group.at_last += 1;
            group.last = c.clone();
        }
    }

    /// A successful close counted under `ends` (where a group needs it).
    fn ended(&mut self, (proc, ptr): (usize, Option<String>)) {
        if let Some(e) = self.closes.get_mut(&proc).and_then(|m| m.get_mut(&ptr)) {
            e.seen += 1;
        }
    }

    /// Lets go of the groups with nothing open at `now`, once there are twice as many groups as
    /// after the last time (a group with nothing open is the same as none: its next open starts
    /// it anew).
    fn sweep(&mut self, now: u64) {
        if self.groups.len() < self.sweep_at.max(SWEEP_FROM) {
            return;
        }
        let dead: Vec<GroupKey> = self
            .groups
            .iter()
            .filter(|(_, g)| self.count(g, now, false) == 0)
            .map(|(k, _)| k.clone())
            .collect();
        dead.iter().for_each(|g| self.remove(g));
        self.sweep_at = 2 * self.groups.len();
    }

    /// Starts group `g`, with nothing open, anew at open `c`: what removing it and making it at
    /// `c` would do, without letting go of its counts.
    fn restart(&mut self, g: &GroupKey, c: &Call) {
        let closes = self
            .closes
            .get(&g.1)
            .and_then(|m| m.get(&self.groups.get(g)?.closed_by))
            .map_or(0, |e| e.seen);
        let destroys = self.groups.get(g).and_then(|group| {
            let ctx = group.ctx.as_ref()?;
            self.destroys.get(&g.1)?.get(ctx).map(|e| e.seen)
        });
        let Some(group) = self.groups.get_mut(g) else {
            return;
        };
        let was = std::mem::replace(&mut group.first_pos, c.pos);
        group.opens = 0;
        group.last_ts = c.ts_ns;
        group.at_last = 0;
        group.closes_before = closes;
        group.destroys_before = destroys.unwrap_or(0);
        if let Some(list) = self.by_handle.get_mut(&g.0) {
            if let Some(entry) = list.remove(&was) {
                list.insert(c.pos, entry);
            }
        }
        if let Some(list) = self.by_process.get_mut(&g.1) {
            if let Some(entry) = list.remove(&(was, g.0.clone())) {
                list.insert((c.pos, g.0.clone()), entry);
            }
        }
        if let Some(gone) = &mut self.gone {
            gone.push(g.clone());
        }
    }

    /// Lets group `g` go, and the counts only it needed.
    fn remove(&mut self, g: &GroupKey) {
        let Some(group) = self.groups.remove(g) else {
            return;
        };
        if let Some(gone) = &mut self.gone {
            gone.push(g.clone());
        }
        let (fp, proc) = (&g.0, g.1);
        if let Some(list) = self.by_handle.get_mut(fp) {
            list.remove(&group.first_pos);
            if list.is_empty() {
                self.by_handle.remove(fp);
            }
        }
        if let Some(list) = self.by_process.get_mut(&proc) {
            list.remove(&(group.first_pos, fp.clone()));
            if list.is_empty() {
                self.by_process.remove(&proc);
            }
        }
        forget(&mut self.closes, proc, &group.closed_by, g);
        if let Some(ctx) = &group.ctx {
            forget(&mut self.destroys, proc, ctx, g);
        }
    }

    /// Process `proc` exited: what it had open is unmapped, its groups let go (asked after every
    /// question about its time).
    fn exited(&mut self, proc: usize) {
        let gone: Vec<GroupKey> = self
            .by_process
            .get(&proc)
            .into_iter()
            .flatten()
            .map(|((_, fp), (ptr, ctx))| (fp.clone(), proc, ptr.clone(), ctx.clone()))
            .collect();
        gone.iter().for_each(|g| self.remove(g));
    }

    /// How often `group`'s mapping is still open at `until` (ns of the wall clock): its opens
    /// up to `until` (`before`: only those strictly before it), less the successful closes of
    /// its pointer in its process since the first of them, up to `until` (v2 counts opens of
    /// the same handle); none once that context was destroyed since. Asked once every call up
    /// to `until`, and none after it, was taken in.
    fn count(&self, group: &Group, until: u64, before: bool) -> usize {
        let opened = if before && group.last_ts == until {
            group.opens - group.at_last
        } else {
            group.opens
        };
        if opened == 0 {
            return 0;
        }
        if let Some(ctx) = &group.ctx {
            let now = self
                .destroys
                .get(&group.proc)
                .and_then(|m| m.get(ctx))
                .map_or(0, |e| e.seen);
            if now > group.destroys_before {
                return 0;
            }
        }
        let now = self
            .closes
            .get(&group.proc)
            .and_then(|m| m.get(&group.closed_by))
            .map_or(0, |e| e.seen);
        opened.saturating_sub(now - group.closes_before)
    }

    /// The groups of handle `fp`, in the order their first opens came.
    fn of<'a>(&'a self, fp: &'a str) -> impl Iterator<Item = &'a Group> + 'a {
        self.by_handle
            .get(fp)
            .into_iter()
            .flat_map(|list| list.values())
            .filter_map(move |(proc, ptr, ctx)| {
                self.groups
                    .get(&(fp.to_string(), *proc, ptr.clone(), ctx.clone()))
            })
    }

    /// The processes other than `proc` (the exporter's) that have what handle `fp` names open
    /// at `at` (ns of the wall clock), each named once: opened before, not closed since, its
    /// context not destroyed, and the process not exited (an exit unmaps what it had open;
    /// leaving it open is that process's own finding).
    fn open_elsewhere(&self, t: &Timeline, fp: &str, proc: usize, at: u64) -> Vec<String> {
        let mut pids: Vec<i64> = self
            .of(fp)
            .filter(|g| {
                g.proc != proc
                    && self.count(g, at, true) > 0
                    && t.exited(g.proc).is_none_or(|gone| gone > at)
            })
            .map(|g| g.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.iter().map(i64::to_string).collect()
    }
}

/// A value's key, as the timeline's indexes match values ([`crate::crossproc::value_key`]).
fn key(v: &Value) -> String {
    crate::crossproc::value_key(v).into_owned()
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
    /// by the exports alive, issue 27).
    fn settle(&mut self) {
        for e in std::mem::take(&mut self.freed_now) {
            let at = {
                let e = e.borrow();
                e.call.place.ctx.as_ref().map(|ctx| (e.call.proc, key(ctx)))
            };
            let Some(at) = at else { continue };
            if let Some(list) = self.in_context.get_mut(&at) {
                list.retain(|other| !std::rc::Rc::ptr_eq(other, &e));
                if list.is_empty() {
                    self.in_context.remove(&at);
                }
            }
        }
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
            .by_process
            .get(&proc)
            .into_iter()
            .flatten()
            .filter_map(|((_, fp), (ptr, ctx))| {
                self.opens
                    .groups
                    .get(&(fp.clone(), proc, ptr.clone(), ctx.clone()))
                    .map(|g| (fp.as_str(), ptr.as_str(), g))
            })
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

/// A process's latest export of a handle, and its latest export of an earlier time.
type Latest = (Shared<Followed>, Option<Shared<Followed>>);

/// [`OpenedAfterFree`] as a pass: per handle and exporting process, its latest exports (the
/// latest, and the latest of an earlier time, for an open at the latest's time).
struct OpenedAfterFreePass {
    s: &'static Spelling,
    rule: &'static Rule,
    exports: Exports,
    /// Fingerprint -> process -> (its latest export, the latest export of an earlier time).
    latest: std::collections::HashMap<String, std::collections::HashMap<usize, Latest>>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl OpenedAfterFreePass {
    fn new(s: &'static Spelling, rule: &'static Rule) -> Self {
        OpenedAfterFreePass {
            s,
            rule,
            exports: Exports::default(),
            latest: Default::default(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for OpenedAfterFreePass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        let s = self.s;
        for followed in self.exports.call(s, c).followed {
            let fp = followed.borrow().fp.clone();
            match self.latest.entry(fp).or_default().entry(c.proc) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert((followed, None));
                }
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let (last, earlier) = e.get_mut();
                    if last.borrow().call.ts_ns < c.ts_ns {
                        *earlier = Some(last.clone());
                    }
                    *last = followed;
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
                .get(fp)
                .into_iter()
                .flatten()
                .filter(|(proc, _)| **proc != c.proc)
                .filter_map(|(_, (last, earlier))| {
                    if last.borrow().call.ts_ns < c.ts_ns {
                        Some(last)
                    } else {
                        earlier.as_ref()
                    }
                })
                .max_by_key(|e| e.borrow().call.pos);
            let Some(export) = export else { continue };
            let export = export.borrow();
            let Some((freed_at, free_fn)) = &export.freed else {
                continue;
            };
            if *freed_at >= c.ts_ns {
                continue;
            }
            let exported = export.call.arg(s.export_ptr).map(shown).unwrap_or_default();
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
                        "process {} exported {exported} ({}) and freed it ({}) before this \
                         open; {answer}",
                        export.call.pid, s.export, free_fn
                    ),
                ),
            ));
        }
    }

    fn settle(&mut self, _t: &Timeline, _ts_ns: u64) {
        self.exports.settle();
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        self.found
    }
}

/// One exporting process's exports of a handle on one device, in a row: what an open on a
/// device that cannot access that one is told, once per export.
struct Run {
    proc: usize,
    pid: i64,
    first_pos: usize,
    count: usize,
    last_ts: u64,
    at_last: usize,
}

/// [`Unreachable`] as a pass: per handle and device (UUID), its exports as runs of one process.
struct UnreachablePass {
    s: &'static Spelling,
    rule: &'static Rule,
    by_device: std::collections::HashMap<(String, crate::crossproc::Name), Vec<Run>>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl UnreachablePass {
    fn new(s: &'static Spelling, rule: &'static Rule) -> Self {
        UnreachablePass {
            s,
            rule,
            by_device: Default::default(),
            found: Vec::new(),
        }
    }
}

impl crate::crossproc::Pass for UnreachablePass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        let s = self.s;
        if c.func == s.export && c.succeeded() {
            if let Some(there) = &c.place.uuid {
                for fp in handles_of(c) {
                    let runs = self
                        .by_device
                        .entry((fp.to_string(), there.clone()))
                        .or_default();
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
            let mut from: Vec<(&Run, usize, &crate::crossproc::Name)> = Vec::new();
            for &there in &theres {
                let runs = self.by_device.get(&(fp.to_string(), there.clone()));
                for run in runs.into_iter().flatten() {
                    let before = if run.last_ts == c.ts_ns {
                        run.count - run.at_last
                    } else {
                        run.count
                    };
                    if run.proc != c.proc && before > 0 {
                        from.push((run, before, there));
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

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
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

/// [`SecondContext`] as a pass. It keeps, per handle, each process's first export; per
/// process, device and context, the earliest open of each mapping (pointer) per handles named
/// and exporter; and every process's held mappings, counted across handles.
struct SecondContextPass {
    /// Fingerprint -> each exporting process's first successful export: (process, pid, time).
    exporters: std::collections::HashMap<String, Vec<(usize, i64, u64)>>,
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
            exporters: Default::default(),
            held: OpenCounts {
                gone: Some(Vec::new()),
                ..OpenCounts::default()
            },
            earliest: Default::default(),
            devices: Default::default(),
            due: Vec::new(),
            found: Vec::new(),
        }
    }

    /// The process whose export shares `open`'s (first) handle: the first successful export of
    /// it by another process, before the open.
    fn exporter(&self, open: &Call) -> Option<Exporter> {
        let fps = open.fingerprints();
        let fp = fps.first()?;
        self.exporters
            .get(*fp)?
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
    fn call(&mut self, _t: &Timeline, c: &Call) {
        let s = &CUDA;
        if c.func == s.export && c.succeeded() {
            for fp in c.fingerprints() {
                let list = self.exporters.entry(fp.to_string()).or_default();
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
            let fps: Vec<String> = c.fingerprints().iter().map(ToString::to_string).collect();
            let list = self
                .earliest
                .entry((c.proc, c.place.dev))
                .or_default()
                .entry(text(c.place.ctx.as_ref()))
                .or_default()
                .entry(text(c.out(s.open_out)))
                .or_default();
            if !list.iter().any(|(f, e, _)| *f == fps && *e == from) {
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
                    let Some(group) = self.held.groups.get(&(
                        String::new(),
                        open.proc,
                        ptr.clone(),
                        other.clone(),
                    )) else {
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

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
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
