//! [`OpenCounts`]: what the IPC checks keep of a handle's successful opens, as counts.

use super::{handles_of, is_open, key, Spelling};
use crate::crossproc::{Call, Timeline};
use rustc_hash::{FxHashMap, FxHasher};
use serde_json::Value;
use std::hash::{Hash, Hasher};

/// (fingerprint, process, pointer's text, context's text): a group of opens.
pub(super) type GroupKey = (String, usize, String, String);

/// A group's slot in [`OpenCounts::slots`].
type GroupId = usize;

/// Groups kept before the first sweep.
const SWEEP_FROM: usize = 4096;

/// What a pass keeps of a handle's successful opens, as counts: per group (opens that mapped one
/// thing: one process, the pointer the open returned and the context it was opened in, the
/// record's `"ctx"`), how many opens, and the closes and context destroys of that process seen
/// when its first open was ([`OpenCounts::count`] counts those after it). A group with nothing
/// open any more (closed, its context destroyed) is the same as none: the next open of the same
/// starts it anew, and it is let go then, at its process's exit, or at a sweep once the groups
/// have doubled, with the counts of closes and destroys only it needed. Memory: about what is
/// open, whatever the history's length and however many handles came and went (issue 27).
///
/// A group's key is held once, in its slot; the indexes hold its number. Lookups hash the
/// key's parts as borrowed (no copy of a string per open).
#[derive(Default)]
pub(super) struct OpenCounts {
    /// The groups by number; `None`: a slot let go, reused ([`OpenCounts::free`]).
    slots: Vec<Option<Group>>,
    free: Vec<GroupId>,
    /// Group key -> number, hashed by [`hash_key`] over the slots' keys.
    ids: hashbrown::HashTable<GroupId>,
    /// A fingerprint's groups, in no order (each group knows its place: [`Group::in_handle`]).
    by_handle: FxHashMap<String, Vec<GroupId>>,
    /// A process's groups, in no order ([`Group::in_process`]; [`OpenCounts::of_process`] sorts
    /// them).
    by_process: FxHashMap<usize, Vec<GroupId>>,
    /// (process, pointer's key; `None`: closes of no pointer, the exact function) -> its
    /// successful closes since a group first needed them, and how many groups count them.
    closes: FxHashMap<usize, FxHashMap<Option<String>, Ends>>,
    /// (process, context's key) -> its successful `cuCtxDestroy` calls since a group first
    /// needed them, and how many groups count them.
    destroys: FxHashMap<usize, FxHashMap<String, Ends>>,
    /// The groups let go or started anew since it was last taken, where a pass keeps more of
    /// each and asked for them ([`super::SecondContextPass`]; `None`: not kept).
    pub(super) gone: Option<Vec<GroupKey>>,
    /// How many groups there may be before the next [`OpenCounts::sweep`].
    sweep_at: usize,
    /// How many slots hold a group.
    live: usize,
}

/// Closes or destroys counted, and how many groups count them.
#[derive(Default)]
struct Ends {
    seen: usize,
    users: usize,
}

pub(super) struct Group {
    pub(super) key: GroupKey,
    pub(super) pid: i64,
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
    /// Its latest open (what [`super::NeverClosed`] names), and the position of its first.
    pub(super) last: Call,
    pub(super) first_pos: usize,
    /// Where it is in its handle's and its process's lists: a group starts anew in place, and
    /// is let go by swapping the last of each list into its place.
    in_handle: usize,
    in_process: usize,
}

impl Group {
    pub(super) fn proc(&self) -> usize {
        self.key.1
    }
}

/// The hash of a group's key from its parts.
fn hash_key(fp: &str, proc: usize, ptr: &str, ctx: &str) -> u64 {
    let mut h = FxHasher::default();
    (fp, proc, ptr, ctx).hash(&mut h);
    h.finish()
}

fn hash_of(k: &GroupKey) -> u64 {
    hash_key(&k.0, k.1, &k.2, &k.3)
}

/// Puts a group on the counts of `proc`'s `what` (closes of a pointer, destroys of a context):
/// how many there were so far.
fn need<K: Hash + Eq>(
    counts: &mut FxHashMap<usize, FxHashMap<K, Ends>>,
    proc: usize,
    what: K,
) -> usize {
    let ends = counts.entry(proc).or_default().entry(what).or_default();
    ends.users += 1;
    ends.seen
}

/// Takes a group off the counts of `proc`'s `what` (closes of a pointer, destroys of a
/// context), and lets them go when no group needs them.
fn forget<K: Hash + Eq>(counts: &mut FxHashMap<usize, FxHashMap<K, Ends>>, proc: usize, what: &K) {
    let Some(mine) = counts.get_mut(&proc) else {
        return;
    };
    if let Some(e) = mine.get_mut(what) {
        e.users -= 1;
        if e.users == 0 {
            mine.remove(what);
        }
    }
    if mine.is_empty() {
        counts.remove(&proc);
    }
}

/// How many of `proc`'s `what` (closes of a pointer, destroys of a context) were counted.
fn seen<K: Hash + Eq>(
    counts: &FxHashMap<usize, FxHashMap<K, Ends>>,
    proc: usize,
    what: &K,
) -> usize {
    counts
        .get(&proc)
        .and_then(|m| m.get(what))
        .map_or(0, |e| e.seen)
}

impl OpenCounts {
    /// Counts that tell which groups were let go or started anew ([`OpenCounts::gone`]).
    pub(super) fn telling_gone() -> Self {
        OpenCounts {
            gone: Some(Vec::new()),
            ..OpenCounts::default()
        }
    }

    /// Takes in the next call of the timeline: its opens grouped per handle.
    pub(super) fn call(&mut self, s: &Spelling, c: &Call) {
        self.call_as(s, c, &handles_of(c));
    }

    /// [`OpenCounts::call`] with the opens grouped under `fps` (one empty name: every handle's
    /// opens together).
    pub(super) fn call_as(&mut self, s: &Spelling, c: &Call, fps: &[&str]) {
        if !c.succeeded() {
            return;
        }
        if c.func.starts_with(s.close) {
            let ends = match c.arg(s.close_ptr) {
                Some(ptr) => Some(Some(key(ptr))),
                None if c.func == s.close => Some(None),
                None => None,
            };
            if let Some(e) = ends.and_then(|ptr| self.closes.get_mut(&c.proc)?.get_mut(&ptr)) {
                e.seen += 1;
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
            let id = match self.find(fp, c.proc, &ptr, &ctx) {
                // Nothing of it open any more (closed, its context destroyed): it starts anew,
                // as a group made now would.
                Some(id) => {
                    if self.count(self.group(id), c.ts_ns, false) == 0 {
                        self.restart(id, c);
                    }
                    id
                }
                None => {
                    self.sweep(c.ts_ns);
                    self.make(s, c, (fp.to_string(), c.proc, ptr.clone(), ctx.clone()))
                }
            };
            let Some(group) = self.slots[id].as_mut() else {
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

    fn find(&self, fp: &str, proc: usize, ptr: &str, ctx: &str) -> Option<GroupId> {
        let slots = &self.slots;
        self.ids
            .find(hash_key(fp, proc, ptr, ctx), |&id| {
                slots[id].as_ref().is_some_and(|g| {
                    let k = &g.key;
                    k.1 == proc && k.0 == fp && k.2 == ptr && k.3 == ctx
                })
            })
            .copied()
    }

    fn group(&self, id: GroupId) -> &Group {
        self.slots[id]
            .as_ref()
            .expect("a group's number names a live slot")
    }

    /// The group of these opens, if one is kept.
    pub(super) fn get(&self, fp: &str, proc: usize, ptr: &str, ctx: &str) -> Option<&Group> {
        self.find(fp, proc, ptr, ctx).map(|id| self.group(id))
    }

    /// Makes group `at` at its first open `c`, with no opens counted yet.
    fn make(&mut self, s: &Spelling, c: &Call, at: GroupKey) -> GroupId {
        let closed_by = c.out(s.open_out).map(key);
        let closes_before = need(&mut self.closes, c.proc, closed_by.clone());
        let ctx_key = c.place.ctx.as_ref().map(key);
        let destroys_before = match &ctx_key {
            Some(k) => need(&mut self.destroys, c.proc, k.clone()),
            None => 0,
        };
        let id = self.free.pop().unwrap_or(self.slots.len());
        if id == self.slots.len() {
            self.slots.push(None);
        }
        let slots = &self.slots;
        self.ids.insert_unique(hash_of(&at), id, |&other| {
            hash_of(&slots[other].as_ref().expect("a live group").key)
        });
        let of_handle = self.by_handle.entry(at.0.clone()).or_default();
        of_handle.push(id);
        let of_process = self.by_process.entry(c.proc).or_default();
        of_process.push(id);
        let (in_handle, in_process) = (of_handle.len() - 1, of_process.len() - 1);
        self.slots[id] = Some(Group {
            key: at,
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
            in_handle,
            in_process,
        });
        self.live += 1;
        id
    }

    /// Lets go of the groups with nothing open at `now`, once there are twice as many groups as
    /// after the last time (a group with nothing open is the same as none: its next open starts
    /// it anew).
    fn sweep(&mut self, now: u64) {
        if self.live < self.sweep_at.max(SWEEP_FROM) {
            return;
        }
        let dead: Vec<GroupId> = (0..self.slots.len())
            .filter(|&id| {
                self.slots[id]
                    .as_ref()
                    .is_some_and(|g| self.count(g, now, false) == 0)
            })
            .collect();
        dead.into_iter().for_each(|id| self.remove(id));
        self.sweep_at = 2 * self.live;
    }

    /// Starts group `id`, with nothing open, anew at open `c`: what removing it and making it at
    /// `c` would do, without letting go of its counts.
    fn restart(&mut self, id: GroupId, c: &Call) {
        let Some(group) = self.slots[id].as_ref() else {
            return;
        };
        let closes = seen(&self.closes, group.proc(), &group.closed_by);
        let destroys = group
            .ctx
            .as_ref()
            .map_or(0, |ctx| seen(&self.destroys, group.proc(), ctx));
        let Some(group) = self.slots[id].as_mut() else {
            return;
        };
        group.first_pos = c.pos;
        group.opens = 0;
        group.last_ts = c.ts_ns;
        group.at_last = 0;
        group.closes_before = closes;
        group.destroys_before = destroys;
        if let Some(gone) = &mut self.gone {
            gone.push(group.key.clone());
        }
    }

    /// Lets group `id` go, and the counts only it needed.
    fn remove(&mut self, id: GroupId) {
        let Some(group) = self.slots[id].take() else {
            return;
        };
        self.free.push(id);
        self.live -= 1;
        if let Ok(entry) = self
            .ids
            .find_entry(hash_of(&group.key), |&other| other == id)
        {
            entry.remove();
        }
        let (fp, proc) = (&group.key.0, group.key.1);
        if let Some(list) = self.by_handle.get_mut(fp) {
            list.swap_remove(group.in_handle);
            if let Some(&moved) = list.get(group.in_handle) {
                if let Some(g) = self.slots[moved].as_mut() {
                    g.in_handle = group.in_handle;
                }
            }
            if list.is_empty() {
                self.by_handle.remove(fp);
            }
        }
        if let Some(list) = self.by_process.get_mut(&proc) {
            list.swap_remove(group.in_process);
            if let Some(&moved) = list.get(group.in_process) {
                if let Some(g) = self.slots[moved].as_mut() {
                    g.in_process = group.in_process;
                }
            }
            if list.is_empty() {
                self.by_process.remove(&proc);
            }
        }
        forget(&mut self.closes, proc, &group.closed_by);
        if let Some(ctx) = &group.ctx {
            forget(&mut self.destroys, proc, ctx);
        }
        if let Some(gone) = &mut self.gone {
            gone.push(group.key);
        }
    }

    /// Process `proc`'s groups, in the order their first opens came (one open's in the order of
    /// their fingerprints).
    pub(super) fn of_process(&self, proc: usize) -> Vec<&Group> {
        let mut groups: Vec<&Group> = self
            .by_process
            .get(&proc)
            .into_iter()
            .flatten()
            .map(|&id| self.group(id))
            .collect();
        groups.sort_unstable_by(|a, b| (a.first_pos, &a.key.0).cmp(&(b.first_pos, &b.key.0)));
        groups
    }

    /// Process `proc` exited: what it had open is unmapped, its groups let go (asked after every
    /// question about its time).
    pub(super) fn exited(&mut self, proc: usize) {
        // Its list goes first: each group's removal then leaves it alone.
        for id in self.by_process.remove(&proc).into_iter().flatten() {
            self.remove(id);
        }
    }

    /// How often `group`'s mapping is still open at `until` (ns of the wall clock): its opens
    /// up to `until` (`before`: only those strictly before it), less the successful closes of
    /// its pointer in its process since the first of them, up to `until` (v2 counts opens of
    /// the same handle); none once that context was destroyed since. Asked once every call up
    /// to `until`, and none after it, was taken in.
    pub(super) fn count(&self, group: &Group, until: u64, before: bool) -> usize {
        let opened = if before && group.last_ts == until {
            group.opens - group.at_last
        } else {
            group.opens
        };
        if opened == 0 {
            return 0;
        }
        if let Some(ctx) = &group.ctx {
            if seen(&self.destroys, group.proc(), ctx) > group.destroys_before {
                return 0;
            }
        }
        let now = seen(&self.closes, group.proc(), &group.closed_by);
        opened.saturating_sub(now - group.closes_before)
    }

    /// The groups of handle `fp`, in no order.
    fn of<'a>(&'a self, fp: &str) -> impl Iterator<Item = &'a Group> + 'a {
        self.by_handle
            .get(fp)
            .into_iter()
            .flatten()
            .map(|&id| self.group(id))
    }

    /// The processes other than `proc` (the exporter's) that have what handle `fp` names open
    /// at `at` (ns of the wall clock), each named once: opened before, not closed since, its
    /// context not destroyed, and the process not exited (an exit unmaps what it had open;
    /// leaving it open is that process's own finding).
    pub(super) fn open_elsewhere(
        &self,
        t: &Timeline,
        fp: &str,
        proc: usize,
        at: u64,
    ) -> Vec<String> {
        let mut pids: Vec<i64> = self
            .of(fp)
            .filter(|g| {
                g.proc() != proc
                    && self.count(g, at, true) > 0
                    && t.exited(g.proc()).is_none_or(|gone| gone > at)
            })
            .map(|g| g.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.iter().map(i64::to_string).collect()
    }
}

#[cfg(test)]
impl OpenCounts {
    /// How many groups, pointers whose closes are counted and contexts whose destroys are.
    pub(super) fn held(&self) -> (usize, usize, usize) {
        (
            self.live,
            self.closes.values().map(FxHashMap::len).sum(),
            self.destroys.values().map(FxHashMap::len).sum(),
        )
    }

    /// How many slots were ever made.
    pub(super) fn slots(&self) -> usize {
        self.slots.len()
    }
}
