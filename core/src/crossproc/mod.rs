//! Report-phase checks: rules decided when `sharecheck report` reads the traces of every process
//! of a job together (an exporter that freed memory another process still had open, ...).
//!
//! The records carry what matching needs: every call record has its process (`pid`, from its
//! file's process record), its number in that process (`seq`, unique there and increasing along each thread's
//! records) and its start on the wall clock
//! (`ts_ns`: the file's `t0_wall_ns` plus the record's `t`, one clock for every process on a host;
//! the CLI's reader adds both); IPC and fabric handles appear only as keyed fingerprints (`"fp:..."`, equal for the same
//! handle in every process of one job, useless for mapping memory), so handles are matched by
//! fingerprint and never by their bytes. Frees, releases and unmaps are recorded (they are observed
//! calls), so a handle's memory can be followed to its end in the exporting process.
//!
//! A [`Timeline`] holds every call of every process in time order, indexed by fingerprint; a
//! [`ReportCheck`] reads it and returns [`ReportFinding`]s, which the report shows like any other
//! finding, attached to the call that decided them. Checks are listed in [`REPORT_CHECKS`].

/// A report check of one rule (`$rule`), reading the calls of `$reads` besides those that
/// carry a fingerprint, decided by the pass `$pass` makes (a fresh one per report).
macro_rules! pass_check {
    ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:expr, $reads:expr, $pass:expr) => {
        $(#[$doc])*
        pub struct $name;
        pub static $instance: $name = $name;

        impl $crate::crossproc::ReportCheck for $name {
            fn rules(&self) -> &'static [&'static $crate::rules::Rule] {
                static RULES: &[&$crate::rules::Rule] = &[&$rule];
                RULES
            }
            fn functions(&self) -> &'static [&'static str] {
                $reads
            }
            fn pass(&self) -> Box<dyn $crate::crossproc::Pass> {
                Box::new($pass)
            }
        }
    };
}

/// A report check of one rule decided per process at its exit: `$new` makes its [`AtExit`]
/// state for one process; it reads the calls of `READS` (in scope where it is used).
macro_rules! at_exit_check {
    ($(#[$doc:meta])* $name:ident, $instance:ident, $rule:ident, $new:expr) => {
        pass_check!($(#[$doc])* $name, $instance, $rule, READS,
            $crate::crossproc::AtExitPass::new($new));
    };
}

mod cold;
pub mod endpoint;
pub mod ipc;
pub mod pool;
mod store;
pub use store::SPILL_AT;
#[cfg(test)]
mod test_records;
pub mod vmm;

use crate::rules::Rule;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

/// A name shared by every kept call that has it (a function, an argument name, a machine, a
/// device's UUID): one copy per timeline (issue 27: a timeline of millions of kept calls).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(std::sync::Arc<str>);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

/// One call of one process, as its record tells it: what only it has (its time, number and
/// place in the timeline), and what the calls of a loop repeat (its [`Shape`]: process, thread,
/// function, arguments, place, answer and stack), one copy per timeline ([`Timeline::add`]). A
/// kept call is 32 bytes (issue 27: a handle's history of millions of steps is kept whole).
/// Reads of the shape's fields go through it (`call.func`, `call.args`).
#[derive(Debug, Clone)]
pub struct Call {
    shape: std::sync::Arc<Shape>,
    pub seq: u64,
    pub ts_ns: u64,
    /// Its place in the timeline's time order (set by [`Timeline::finish`]).
    pub pos: usize,
}

impl std::ops::Deref for Call {
    type Target = Shape;
    fn deref(&self) -> &Shape {
        &self.shape
    }
}

/// What a call shares with every other call of its process, thread, function, arguments, place,
/// answer and stack: one copy per timeline ([`Shared::shape`]).
#[derive(Debug, Clone)]
pub struct Shape {
    pub pid: i64,
    /// Its process among the timeline's: the pid on its machine (a pid names a process on one
    /// machine only; the reader gives each record its file's machine, `"machine"`). What the
    /// checks compare to tell processes apart.
    pub proc: usize,
    /// Where the call ran, as its record says: its machine, context and device (shared by every
    /// kept call made in the same place: [`Timeline::add`]).
    pub place: std::sync::Arc<Place>,
    /// The calling thread, where the record says.
    pub tid: Option<i64>,
    /// The exact symbol (`cuIpcOpenMemHandle_v2`, ...).
    pub func: Name,
    pub args: Args,
    /// `None` when the record has no numeric `ret`.
    pub ret: Option<i64>,
    /// Where in the program the call was made: the record's `"stack"` (kept for calls a
    /// report-phase rule may name), else the stack of a finding on the record. Shared by every
    /// call made from the same place ([`Timeline::add`] keeps one copy of each stack).
    pub stack: Option<std::sync::Arc<Value>>,
}

impl Shape {
    /// Whether two shapes are the same, their parts compared as the one copies they are.
    fn same(&self, other: &Shape) -> bool {
        use std::sync::Arc;
        self.pid == other.pid
            && self.proc == other.proc
            && self.tid == other.tid
            && self.ret == other.ret
            && Arc::ptr_eq(&self.place, &other.place)
            && Arc::ptr_eq(&self.func.0, &other.func.0)
            && Arc::ptr_eq(&self.args.0, &other.args.0)
            && match (&self.stack, &other.stack) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }

    fn key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (self.pid, self.proc, self.tid, self.ret).hash(&mut h);
        std::sync::Arc::as_ptr(&self.place).hash(&mut h);
        std::sync::Arc::as_ptr(&self.func.0)
            .cast::<u8>()
            .hash(&mut h);
        std::sync::Arc::as_ptr(&self.args.0)
            .cast::<u8>()
            .hash(&mut h);
        self.stack.as_ref().map(std::sync::Arc::as_ptr).hash(&mut h);
        h.finish()
    }
}

/// Where a call ran, as its record says. One copy is shared by every kept call made in the same
/// place (issue 27: memory).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Place {
    /// Its process's machine (`"machine"`).
    pub machine: Option<Name>,
    /// The context the call acted in, and its device (`"ctx"`, `"dev"`: an IPC open's, the
    /// context of the memory an IPC export exported).
    pub ctx: Option<Value>,
    pub dev: Option<i64>,
    /// That device's UUID, and the UUIDs of the devices it cannot access (`"uuid"`,
    /// `"unreachable"`).
    pub uuid: Option<Name>,
    pub unreachable: Vec<Name>,
}

/// A call's arguments as its record wrote them, in the record's order: one copy shared by every
/// kept call with the same arguments (a loop's calls), the names shared by every call.
#[derive(Debug, Clone)]
pub struct Args(std::sync::Arc<[(Name, Value)]>);

impl Default for Args {
    fn default() -> Self {
        Args(std::sync::Arc::new([]))
    }
}

impl Args {
    /// The value of argument `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| &**k == name).map(|(_, v)| v)
    }

    /// Every argument, in the record's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    /// As the record's `"a"` object.
    pub fn to_map(&self) -> Map<String, Value> {
        self.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
}

impl Call {
    pub fn succeeded(&self) -> bool {
        self.ret == Some(0)
    }

    /// An argument as written (`"0x..."`, a number, a name).
    pub fn arg(&self, name: &str) -> Option<&Value> {
        self.args.get(name)
    }

    /// The value an out-parameter received (`"*name": value`), when the driver wrote it.
    pub fn out(&self, name: &str) -> Option<&Value> {
        self.args
            .iter()
            .find(|(key, _)| key.strip_prefix('*') == Some(name))
            .map(|(_, value)| value)
    }

    /// Every handle fingerprint the call's arguments mention (in or out).
    pub fn fingerprints(&self) -> Vec<&str> {
        let mut found = Vec::new();
        for (_, value) in self.args.iter() {
            collect_fingerprints(value, &mut found);
        }
        found
    }
}

fn collect_fingerprints<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) if is_fingerprint(s) => out.push(s),
        Value::Object(map) => map.values().for_each(|v| collect_fingerprints(v, out)),
        Value::Array(items) => items.iter().for_each(|v| collect_fingerprints(v, out)),
        _ => {}
    }
}

/// Whether a record's arguments, as JSON text, may hold a handle fingerprint (a string that
/// starts with `fp:`): what a reader asks before parsing them.
pub fn mentions_fingerprint(args: Option<&str>) -> bool {
    args.is_some_and(|a| a.contains("\"fp:"))
}

/// A number as a record writes it: `"0x..."` (addresses, handles) or plain.
pub fn number(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => u64::from_str_radix(s.strip_prefix("0x")?, 16).ok(),
        other => other.as_u64(),
    }
}

/// `fp:` and 16 hex digits: the only form in which a handle is ever written.
pub fn is_fingerprint(text: &str) -> bool {
    text.strip_prefix("fp:")
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A handle's fingerprint as a key held inline: the 16 digits after `fp:` (issue 27: the
/// checks that relate a later open to an earlier export, and the IPC view, keep a key per
/// handle seen, not a string each).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Fp([u8; 16]);

impl Fp {
    /// The key of `fp`, a fingerprint ([`is_fingerprint`]: `fp:` and 16 hex digits, as every
    /// name [`Call::fingerprints`] gives is).
    pub fn of(fp: &str) -> Fp {
        let mut key = [0; 16];
        let digits = fp.as_bytes().get(3..).unwrap_or_default();
        let n = digits.len().min(16);
        key[..n].copy_from_slice(&digits[..n]);
        Fp(key)
    }
}

impl std::fmt::Display for Fp {
    /// As the trace writes it: `fp:` and its digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fp:")?;
        f.write_str(std::str::from_utf8(&self.0).unwrap_or("?"))
    }
}

/// The calls of every process that the checks read, in time order (ties: by process, then
/// sequence): those that mention a handle fingerprint, and those of the functions the checks name
/// ([`ReportCheck::functions`]). A trace of millions of other calls costs nothing here.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Symbol prefixes of the calls kept besides those with fingerprints.
    keep: Vec<&'static str>,
    /// The calls, in memory up to a bound, then in sorted runs on disk ([`store`]).
    store: store::Store,
    /// The handles an IPC export names (exported memory and events): the IPC view's.
    exported: rustc_hash::FxHashSet<Fp>,
    /// Process ([`Call::proc`]) -> when its `exit` record was written (a process that ended
    /// through `exit`).
    exits: BTreeMap<usize, u64>,
    /// Process ([`Call::proc`]) -> the descriptors its `exit` record says it exported and still
    /// held open (`exported_fds_open`).
    exported_open: BTreeMap<usize, Vec<i64>>,
    /// (machine, pid) -> its [`Call::proc`].
    procs: HashMap<(Option<String>, i64), usize>,
    /// Process ([`Call::proc`]) -> the IMEX domain its process record names (FABRIC handles are
    /// shared within one only).
    domains: BTreeMap<usize, String>,
    /// The one copy of each name, argument list, context, stack and device list of the kept
    /// calls.
    shared: Shared,
    sorted: bool,
}

/// The one copy of each name, argument list, stack and place that kept calls share (issue 27: the calls of a loop repeat them, and a timeline keeps millions of calls).
/// Argument lists and values are found by a hash of their content, with no allocation when
/// one is already held.
#[derive(Clone, Debug, Default)]
struct Shared {
    names: std::collections::HashSet<Name>,
    args: HashMap<u64, Vec<Args>>,
    values: HashMap<u64, Vec<std::sync::Arc<Value>>>,
    places: HashMap<u64, Vec<std::sync::Arc<Place>>>,
    /// The calls' shapes, found by the identity of their parts ([`Shape::key`]).
    shapes: HashMap<u64, Vec<std::sync::Arc<Shape>>>,
    /// Stacks given as written ([`Timeline::add_with_stack`]): text -> the one parsed copy.
    stack_texts: HashMap<Box<str>, std::sync::Arc<Value>>,
    /// What the argument lists and shapes held cost, estimated (bytes): what bounds them
    /// ([`store::SPILL_BYTES`]).
    bytes: usize,
}

/// About what a value costs in memory (bytes).
fn weight(v: &Value) -> usize {
    match v {
        Value::String(s) => 32 + s.len(),
        Value::Array(items) => 32 + items.iter().map(weight).sum::<usize>(),
        Value::Object(map) => {
            48 + map
                .iter()
                .map(|(k, v)| 32 + k.len() + weight(v))
                .sum::<usize>()
        }
        _ => 16,
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// Hashes a JSON value by its content (consistent with its `==`: equal values hash equal).
fn hash_value(v: &Value, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    std::mem::discriminant(v).hash(h);
    match v {
        Value::Null => {}
        Value::Bool(b) => b.hash(h),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.hash(h),
            (None, Some(i)) => i.hash(h),
            (None, None) => n.as_f64().map(f64::to_bits).hash(h),
        },
        Value::String(s) => s.hash(h),
        Value::Array(items) => {
            items.len().hash(h);
            items.iter().for_each(|item| hash_value(item, h));
        }
        Value::Object(map) => {
            map.len().hash(h);
            for (k, item) in map {
                k.hash(h);
                hash_value(item, h);
            }
        }
    }
}

impl Shared {
    /// The one copy of `text`.
    fn name(&mut self, text: &str) -> Name {
        if let Some(name) = self.names.get(text) {
            return name.clone();
        }
        let name = Name(text.into());
        self.names.insert(name.clone());
        name
    }

    /// The one copy of these arguments (names and values, in order).
    fn args(&mut self, args: &Map<String, Value>) -> Args {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        args.len().hash(&mut h);
        for (k, v) in args {
            k.hash(&mut h);
            hash_value(v, &mut h);
        }
        let key = h.finish();
        let same = |held: &&Args| {
            held.0.len() == args.len()
                && held
                    .0
                    .iter()
                    .zip(args)
                    .all(|((hk, hv), (k, v))| hk.as_str() == k && hv == v)
        };
        if let Some(held) = self.args.get(&key).and_then(|list| list.iter().find(same)) {
            return held.clone();
        }
        let fresh = Args(
            args.iter()
                .map(|(name, value)| (self.name(name), value.clone()))
                .collect(),
        );
        self.bytes += 64 + args.values().map(|v| 24 + weight(v)).sum::<usize>();
        self.args.entry(key).or_default().push(fresh.clone());
        fresh
    }

    /// The one copy of `value`.
    fn value(&mut self, value: &Value) -> std::sync::Arc<Value> {
        use std::hash::Hasher;
        let mut h = std::hash::DefaultHasher::new();
        hash_value(value, &mut h);
        let list = self.values.entry(h.finish()).or_default();
        if let Some(held) = list.iter().find(|held| ***held == *value) {
            return held.clone();
        }
        let fresh = std::sync::Arc::new(value.clone());
        list.push(fresh.clone());
        fresh
    }

    /// The one copy of the stack written as `text` (`None`: not JSON).
    fn stack_text(&mut self, text: &str) -> Option<std::sync::Arc<Value>> {
        if let Some(held) = self.stack_texts.get(text) {
            return Some(held.clone());
        }
        let parsed: Value = serde_json::from_str(text).ok()?;
        let shared = self.value(&parsed);
        self.stack_texts.insert(text.into(), shared.clone());
        Some(shared)
    }

    /// The one copy of `place`.
    fn place(&mut self, place: Place) -> std::sync::Arc<Place> {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        place.machine.hash(&mut h);
        place.ctx.is_some().hash(&mut h);
        if let Some(ctx) = &place.ctx {
            hash_value(ctx, &mut h);
        }
        place.dev.hash(&mut h);
        place.uuid.hash(&mut h);
        place.unreachable.hash(&mut h);
        let list = self.places.entry(h.finish()).or_default();
        if let Some(held) = list.iter().find(|held| ***held == place) {
            return held.clone();
        }
        let fresh = std::sync::Arc::new(place);
        list.push(fresh.clone());
        fresh
    }

    /// The one copy of `shape` (whose parts are this table's copies).
    fn shape(&mut self, shape: Shape) -> std::sync::Arc<Shape> {
        let list = self.shapes.entry(shape.key()).or_default();
        if let Some(held) = list.iter().find(|held| held.same(&shape)) {
            return held.clone();
        }
        let fresh = std::sync::Arc::new(shape);
        list.push(fresh.clone());
        self.bytes += 128;
        fresh
    }

    /// Takes in what another timeline's calls share (its calls keep their own copies; their
    /// shapes are made anew here, with their processes renumbered: [`Timeline::absorb`]).
    /// Lets go of the argument lists and shapes (the calls that share them were written out:
    /// [`store`]); names, places and stacks, which a program has few of, stay.
    fn let_go(&mut self) {
        self.args.clear();
        self.shapes.clear();
        self.bytes = 0;
    }

    fn absorb(&mut self, other: Shared) {
        self.bytes += other.bytes;
        self.names.extend(other.names);
        for (key, list) in other.args {
            self.args.entry(key).or_default().extend(list);
        }
        for (key, list) in other.values {
            self.values.entry(key).or_default().extend(list);
        }
        for (key, list) in other.places {
            self.places.entry(key).or_default().extend(list);
        }
        for (text, stack) in other.stack_texts {
            self.stack_texts.entry(text).or_insert(stack);
        }
    }
}

/// A value's key, as the passes match values: a number (an address or handle, `"0x..."` or plain)
/// as its lowercase hex, so that the keys of equal numbers are equal; any other string as it is,
/// anything else as its JSON text.
pub(crate) fn value_key(value: &Value) -> std::borrow::Cow<'_, str> {
    match (number(value), value) {
        (Some(n), _) => std::borrow::Cow::Owned(format!("{n:#x}")),
        (None, Value::String(s)) => std::borrow::Cow::Borrowed(s),
        (None, other) => std::borrow::Cow::Owned(other.to_string()),
    }
}

impl Timeline {
    /// A timeline for `checks`: it keeps the calls they read.
    pub fn for_checks(checks: &[&dyn ReportCheck]) -> Timeline {
        // Each prefix once, and none that a shorter one covers: every record is matched
        // against the list (issue 27: the checks name 233, 30 of them needed).
        let mut keep: Vec<&'static str> = checks
            .iter()
            .flat_map(|c| c.functions().iter().copied())
            .collect();
        keep.sort_unstable();
        keep.dedup_by(|longer, shorter| longer.starts_with(*shorter));
        Timeline {
            keep,
            ..Timeline::default()
        }
    }

    /// Whether [`Timeline::add`] would keep a record, from its function, event and arguments'
    /// JSON text alone (a reader then parses only the records it keeps): `exit` events, calls of
    /// the functions the checks read, and calls whose arguments hold a handle fingerprint.
    pub fn wants(&self, func: Option<&str>, event: Option<&str>, args: Option<&str>) -> bool {
        match func {
            None => matches!(event, Some("exit" | "process")),
            Some(func) => self.reads_function(func) || mentions_fingerprint(args),
        }
    }

    /// Whether the checks read every call of `func` (whatever its arguments).
    pub fn reads_function(&self, func: &str) -> bool {
        self.keep.iter().any(|prefix| func.starts_with(prefix))
    }

    /// Adds one trace record; event records (no `"fn"`) other than `exit` and `process` (its
    /// IMEX domain), records without a process or time, and calls no check reads are skipped.
    pub fn add(&mut self, record: &Map<String, Value>) {
        self.add_with_stack(record, None);
    }

    /// [`Timeline::add`] of a record whose `"stack"` is given apart, as written (`stack`: a
    /// reader that left it unparsed); a stack in `record` itself comes first. Calls made from
    /// one place share one parsed copy, found by its text.
    pub fn add_with_stack(&mut self, record: &Map<String, Value>, stack: Option<&str>) {
        if record.get("event").and_then(Value::as_str) == Some("process") {
            let pid = record.get("pid").and_then(Value::as_i64);
            let domain = record.get("imex_domain").and_then(Value::as_str);
            if let (Some(pid), Some(domain)) = (pid, domain) {
                let proc = self.proc_of(record, pid);
                self.domains.insert(proc, domain.to_string());
            }
            return;
        }
        if record.get("event").and_then(Value::as_str) == Some("exit") {
            let pid = record.get("pid").and_then(Value::as_i64);
            if let (Some(pid), Some(ts_ns)) = (pid, record.get("ts_ns").and_then(Value::as_u64)) {
                let proc = self.proc_of(record, pid);
                self.exits.insert(proc, ts_ns);
                if let Some(Value::Array(fds)) = record.get("exported_fds_open") {
                    let fds: Vec<i64> = fds.iter().filter_map(Value::as_i64).collect();
                    self.exported_open.insert(proc, fds);
                }
            }
            return;
        }
        let (Some(pid), Some(seq), Some(ts_ns), Some(func)) = (
            record.get("pid").and_then(Value::as_i64),
            record.get("seq").and_then(Value::as_u64),
            record.get("ts_ns").and_then(Value::as_u64),
            record.get("fn").and_then(Value::as_str),
        ) else {
            return;
        };
        let Some(Value::Object(args)) = record.get("a") else {
            return;
        };
        let wanted = self.keep.iter().any(|prefix| func.starts_with(prefix)) || {
            let mut fps = Vec::new();
            args.values()
                .for_each(|v| collect_fingerprints(v, &mut fps));
            !fps.is_empty()
        };
        if !wanted {
            return;
        }
        let args = self.shared.args(args);
        // One copy of each stack: a loop's calls share theirs (issue 27: memory).
        let stack = match (record.get("stack"), stack) {
            (Some(parsed), _) => Some(self.shared.value(parsed)),
            (None, Some(text)) => self.shared.stack_text(text),
            (None, None) => None,
        }
        .or_else(|| {
            record
                .get("findings")
                .and_then(Value::as_array)
                .and_then(|f| f.iter().find_map(|f| f.get("stack")))
                .map(|stack| self.shared.value(stack))
        });
        let proc = self.proc_of(record, pid);
        let text = |key: &str| record.get(key).and_then(Value::as_str);
        let shared = &mut self.shared;
        let place = Place {
            machine: text("machine").map(|m| shared.name(m)),
            ctx: record.get("ctx").cloned(),
            dev: record.get("dev").and_then(Value::as_i64),
            uuid: text("uuid").map(|u| shared.name(u)),
            unreachable: record
                .get("unreachable")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|u| shared.name(u))
                .collect(),
        };
        let place = shared.place(place);
        let func = shared.name(func);
        let shape = shared.shape(Shape {
            pid,
            proc,
            place,
            tid: record.get("tid").and_then(Value::as_i64),
            func,
            args,
            ret: record.get("r").and_then(Value::as_i64),
            stack,
        });
        if shape.func.contains("IpcGetMemHandle") || shape.func.contains("IpcGetEventHandle") {
            let mut fps = Vec::new();
            shape
                .args
                .iter()
                .for_each(|(_, v)| collect_fingerprints(v, &mut fps));
            self.exported.extend(fps.into_iter().map(Fp::of));
        }
        let spilled = self.store.push(
            Call {
                shape,
                seq,
                ts_ns,
                pos: 0,
            },
            self.shared.bytes,
        );
        if spilled {
            // What the spilled calls shared with the next ones: a loop's next calls share anew.
            self.shared.let_go();
        }
        self.sorted = false;
    }

    /// Takes in the calls and exits `other` kept from later files, as if added here after these.
    pub fn absorb(&mut self, other: Timeline) {
        // Its processes numbered anew in this timeline (a process may be in both: its lanes).
        // In the order it numbered them (first seen first), as reading its files here would.
        let mut renumbered = vec![0; other.procs.len()];
        let mut procs: Vec<_> = other.procs.into_iter().collect();
        procs.sort_unstable_by_key(|&(_, theirs)| theirs);
        for (key, theirs) in procs {
            let next = self.procs.len();
            renumbered[theirs] = *self.procs.entry(key).or_insert(next);
        }
        // Each of its shapes once, renumbered (its calls of one shape share the new one).
        let mut shapes: HashMap<*const Shape, std::sync::Arc<Shape>> = HashMap::new();
        let shared = &mut self.shared;
        let mut store = other.store;
        let buf: Vec<Call> = std::mem::take(&mut store.buf)
            .into_iter()
            .map(|mut c| {
                let theirs = std::sync::Arc::as_ptr(&c.shape);
                c.shape = shapes
                    .entry(theirs)
                    .or_insert_with(|| {
                        shared.shape(Shape {
                            proc: renumbered[c.proc],
                            ..(*c.shape).clone()
                        })
                    })
                    .clone();
                c
            })
            .collect();
        if self
            .store
            .absorb(store, buf, &renumbered, self.shared.bytes)
        {
            self.shared.let_go();
        }
        self.exported.extend(other.exported);
        self.exits.extend(
            other
                .exits
                .into_iter()
                .map(|(proc, ts)| (renumbered[proc], ts)),
        );
        self.domains.extend(
            other
                .domains
                .into_iter()
                .map(|(proc, domain)| (renumbered[proc], domain)),
        );
        self.exported_open.extend(
            other
                .exported_open
                .into_iter()
                .map(|(proc, fds)| (renumbered[proc], fds)),
        );
        self.shared.absorb(other.shared);
        self.sorted = false;
    }

    /// Orders the calls; called once every record is in.
    pub fn finish(&mut self) {
        if !self.sorted {
            self.store.finish();
            self.sorted = true;
        }
    }

    /// Writes the calls to temporary files past `calls` held in memory (0: never; default
    /// [`store::SPILL_AT`]): what bounds the report's memory (issue 27).
    pub fn spill_every(&mut self, calls: usize) {
        self.store.spill_every(calls);
    }

    /// How many entries per handle seen a check keeps in memory before the others go to
    /// temporary files ([`cold::ColdMap`]): a sixteenth of the calls kept in memory (`usize::MAX`:
    /// every one, where calls are never spilled).
    pub(crate) fn cold_bound(&self) -> usize {
        match self.store.spill_at() {
            0 => usize::MAX,
            calls => (calls / 16).max(1),
        }
    }

    /// Says why something a check keeps could not go to disk or come back (where nothing was
    /// said before: [`Timeline::store_error`]).
    pub(crate) fn note_error(&self, why: &str) {
        self.store.note_error(why);
    }

    /// The calls kept, and how many temporary files hold those not in memory.
    pub fn kept(&self) -> (usize, usize) {
        (self.store.len(), self.store.runs())
    }

    /// Why the calls could not all be spilled or read back, if that happened (the report says
    /// so: memory grew, or calls went unchecked).
    pub fn store_error(&self) -> Option<&str> {
        self.store.error()
    }

    /// Every kept call of a finished timeline, in time order (ties: by pid, then sequence, then
    /// the order they were added), each `pos` its place in that order. An IPC export recorded
    /// without its place takes that of its process's earlier export of the same handle
    /// ([`ExportHomes`]).
    pub fn walk(&self) -> Walk<'_> {
        Walk {
            merge: self.store.merge(),
            next_pos: 0,
            homes: ExportHomes::default(),
        }
    }

    /// When process `proc` ([`Call::proc`]) wrote its `exit` record: `None` if it did not
    /// (still running, or it ended by `_exit`, a signal or `kill -9`).
    pub fn exited(&self, proc: usize) -> Option<u64> {
        self.exits.get(&proc).copied()
    }

    /// The descriptors process `proc` ([`Call::proc`]) exported and still held open at its exit,
    /// as its `exit` record says (none when it wrote none).
    pub fn exported_fds_open(&self, proc: usize) -> &[i64] {
        self.exported_open.get(&proc).map_or(&[], Vec::as_slice)
    }

    /// The IMEX domain process `proc`'s record names, where it names one.
    pub fn imex_domain(&self, proc: usize) -> Option<&str> {
        self.domains.get(&proc).map(String::as_str)
    }

    /// The [`Call::proc`] of a record's process: its pid on its machine (`"machine"`, which the
    /// reader adds from the file's process record; none in older traces: one machine).
    fn proc_of(&mut self, record: &Map<String, Value>, pid: i64) -> usize {
        let machine = record
            .get("machine")
            .and_then(Value::as_str)
            .map(str::to_string);
        let next = self.procs.len();
        *self.procs.entry((machine, pid)).or_insert(next)
    }
}

/// A finished timeline's calls in time order ([`Timeline::walk`]).
pub struct Walk<'a> {
    merge: store::Merge<'a>,
    next_pos: usize,
    homes: ExportHomes,
}

impl Iterator for Walk<'_> {
    type Item = Call;

    fn next(&mut self) -> Option<Call> {
        let mut c = self.merge.next()?;
        c.pos = self.next_pos;
        self.next_pos += 1;
        self.homes.place(&mut c);
        Some(c)
    }
}

/// Gives an IPC export whose record has no place (`"ctx"`, `"dev"`, `"uuid"`) the place of the
/// same process's earlier export of the same handle: the shim leaves it out of an export of
/// memory the thread exported before with nothing freed since (issue 24), which is the same
/// memory in the same context. A place is kept until its process frees the exported pointer
/// (the next export after a free has its own).
#[derive(Default)]
struct ExportHomes {
    /// (process, handle) -> the place of its last export that had one.
    homes: HashMap<(usize, String), std::sync::Arc<Place>>,
    /// (process, pointer) -> the handles exported from it that have a place here.
    by_pointer: HashMap<(usize, String), Vec<String>>,
}

impl ExportHomes {
    fn place(&mut self, call: &mut Call) {
        if !call.succeeded() {
            return;
        }
        let func = call.func.as_str();
        if func.starts_with("cuMemFree") || func.starts_with("hipFree") {
            let Some(ptr) = ended_pointer(call) else {
                return;
            };
            if let Some(fps) = self
                .by_pointer
                .remove(&(call.proc, value_key(ptr).into_owned()))
            {
                for fp in fps {
                    self.homes.remove(&(call.proc, fp));
                }
            }
            return;
        }
        if !matches!(func, "cuIpcGetMemHandle" | "hipIpcGetMemHandle") {
            return;
        }
        let Some(fp) = call.fingerprints().first().map(ToString::to_string) else {
            return;
        };
        let here = &call.place;
        if here.ctx.is_some() || here.dev.is_some() || here.uuid.is_some() {
            if let Some(ptr) = exchange_pointer(call) {
                let fps = self
                    .by_pointer
                    .entry((call.proc, value_key(ptr).into_owned()))
                    .or_default();
                if !fps.contains(&fp) {
                    fps.push(fp.clone());
                }
            }
            self.homes.insert((call.proc, fp), here.clone());
        } else if let Some(home) = self.homes.get(&(call.proc, fp)) {
            let place = Place {
                ctx: home.ctx.clone(),
                dev: home.dev,
                uuid: home.uuid.clone(),
                ..(**here).clone()
            };
            call.shape = std::sync::Arc::new(Shape {
                place: std::sync::Arc::new(place),
                ..(*call.shape).clone()
            });
        }
    }
}

/// One IPC handle's story across processes: the calls that made, opened, closed and freed what
/// it names, in time order ([`Timeline::handles`]).
#[derive(Debug)]
pub struct HandleView {
    /// The handle's fingerprint.
    pub handle: String,
    pub steps: Vec<Call>,
}

/// The pointer (or event) a call of an IPC exchange names: what an export exported, what an
/// open returned.
fn exchange_pointer(c: &Call) -> Option<&Value> {
    if c.func.contains("IpcGetMemHandle") {
        c.arg("dptr").or_else(|| c.arg("devPtr"))
    } else if c.func.contains("IpcOpenMemHandle") {
        c.out("pdptr").or_else(|| c.out("devPtr"))
    } else if c.func.contains("IpcGetEventHandle") {
        c.arg("event")
    } else if c.func.contains("IpcOpenEventHandle") {
        c.out("phEvent").or_else(|| c.out("event"))
    } else {
        None
    }
}

/// The pointer (or event) `c` ends: what a close closes (an importer), a free frees (the
/// exporter), a destroy destroys.
fn ended_pointer(c: &Call) -> Option<&Value> {
    if c.func.contains("IpcCloseMemHandle") {
        c.arg("dptr").or_else(|| c.arg("devPtr"))
    } else if c.func.starts_with("cuMemFree") {
        c.arg("dptr")
    } else if c.func.starts_with("hipFree") {
        c.arg("ptr")
    } else if c.func.starts_with("cuEventDestroy") {
        c.arg("hEvent")
    } else if c.func.starts_with("hipEventDestroy") {
        c.arg("event")
    } else {
        None
    }
}

/// A pointer's key in the IPC view: its process, and the value as written (a string and a
/// number of the same digits differ).
type Written = (usize, bool, String);

fn written(proc: usize, value: &Value) -> Written {
    match value {
        Value::String(text) => (proc, true, text.clone()),
        other => (proc, false, other.to_string()),
    }
}

impl Timeline {
    /// Every memory or event handle that was exported, with its exchange: the export, every open
    /// of it (successful or not) in any process, and for each export and open the call that
    /// ended what it named: the first close, free or destroy of that pointer or event in its
    /// process afterwards that no earlier export or open of the same pointer there took (an
    /// address an importer's opens reuse belongs to each open in turn).
    ///
    /// Given as one walk over the calls: `step(view, handle, call)` for each step of each
    /// handle's view, in time order; views are numbered from 0 in the order of their first step.
    /// What is kept is a number per handle and the exports and opens whose end is still to come
    /// (issue 27: a handle's millions of steps are never held).
    pub fn handle_steps(&self, mut step: impl FnMut(usize, &Fp, &Call)) {
        let mut views: rustc_hash::FxHashMap<Fp, usize> = Default::default();
        let mut names: Vec<Fp> = Vec::new();
        // Each process's pointer -> the views whose export or open of it has no end yet, in
        // order: an end is the first one's.
        let mut waiting: HashMap<Written, std::collections::VecDeque<usize>> = HashMap::new();
        let mut mine: Vec<usize> = Vec::new();
        for c in self.walk() {
            mine.clear();
            let mut fps = c.fingerprints();
            fps.sort_unstable();
            fps.dedup();
            for fp in fps.into_iter().map(Fp::of) {
                if !self.exported.contains(&fp) {
                    continue;
                }
                let next = names.len();
                let view = *views.entry(fp).or_insert(next);
                if view == next {
                    names.push(fp);
                }
                mine.push(view);
            }
            if let Some(ptr) = exchange_pointer(&c) {
                if !mine.is_empty() {
                    waiting
                        .entry(written(c.proc, ptr))
                        .or_default()
                        .extend(mine.iter().copied());
                }
            } else if let Some(ptr) = ended_pointer(&c) {
                let key = written(c.proc, ptr);
                if let Some(queue) = waiting.get_mut(&key) {
                    if let Some(view) = queue.pop_front() {
                        if !mine.contains(&view) {
                            mine.push(view);
                        }
                    }
                    if queue.is_empty() {
                        waiting.remove(&key);
                    }
                }
            }
            for &view in &mine {
                step(view, &names[view], &c);
            }
        }
    }

    /// [`Timeline::handle_steps`] gathered: each handle's view, every step held (for a timeline
    /// known to be small).
    pub fn handles(&self) -> Vec<HandleView> {
        let mut views: Vec<HandleView> = Vec::new();
        self.handle_steps(|view, handle, c| {
            if view == views.len() {
                views.push(HandleView {
                    handle: handle.to_string(),
                    steps: Vec::new(),
                });
            }
            views[view].steps.push(c.clone());
        });
        views
    }
}

/// A finding a report-phase check decided, attached to the call that shows it.
#[derive(Debug, Clone)]
pub struct ReportFinding {
    pub rule: &'static Rule,
    pub pid: i64,
    /// The machine of the call's process, where its record says.
    pub machine: Option<String>,
    pub tid: Option<i64>,
    pub seq: u64,
    pub ts_ns: u64,
    pub func: String,
    pub message: String,
    /// The call's arguments as recorded (handles as keyed fingerprints).
    pub args: Map<String, Value>,
    /// The call's stack, where the trace kept one ([`Call::stack`]).
    pub stack: Option<Value>,
}

impl ReportFinding {
    pub fn at(rule: &'static Rule, call: &Call, message: String) -> Self {
        ReportFinding {
            rule,
            pid: call.pid,
            machine: call.place.machine.as_deref().map(str::to_string),
            tid: call.tid,
            seq: call.seq,
            ts_ns: call.ts_ns,
            func: call.func.to_string(),
            message,
            args: call.args.to_map(),
            stack: call.stack.as_deref().cloned(),
        }
    }
}

/// A check decided from every process's calls.
pub trait ReportCheck: Sync {
    /// The rules it can report.
    fn rules(&self) -> &'static [&'static Rule];
    /// Symbol prefixes of the calls it reads besides those that mention a handle fingerprint
    /// (e.g. `cuMemFree` for the exporter's frees).
    fn functions(&self) -> &'static [&'static str];
    /// A fresh pass over a timeline's calls in their order, with state bounded by what is alive
    /// (issue 27); [`decide`] drives every check's together.
    fn pass(&self) -> Box<dyn Pass>;
}

/// The order of a pass's findings that rest on calls of one process, time and number: a
/// handle's fingerprint, then two positions the pass gives (of the calls that anchor the
/// finding: an export, an open), as the check's walk over the timeline met them.
pub type Order = (String, usize, usize);

/// A report check run as one pass over a finished timeline's calls, in their order: it keeps
/// what is still alive and decides each finding when the calls that decide it have been seen.
/// What every process's record says (its exit, its IMEX domain) is read from the timeline.
pub trait Pass {
    /// The next call.
    fn call(&mut self, t: &Timeline, c: &Call);
    /// Every call at `ts_ns` has been given (what is decided "at" a time sees the calls at that
    /// time).
    fn settle(&mut self, _t: &Timeline, _ts_ns: u64) {}
    /// Process `proc` wrote its `exit` record at `ts_ns`: given once every call up to that time
    /// and none after it was.
    fn exit(&mut self, _t: &Timeline, _proc: usize, _ts_ns: u64) {}
    /// After the last call: the findings, each with its [`Order`].
    fn end(self: Box<Self>, t: &Timeline) -> Vec<(Order, ReportFinding)>;
}

/// Every report-phase check.
pub static REPORT_CHECKS: &[&dyn ReportCheck] = &[
    &ipc::FREED_WHILE_OPEN,
    &ipc::OPENED_AFTER_FREE,
    &ipc::NEVER_CLOSED,
    &ipc::HIP_FREED_WHILE_OPEN,
    &ipc::HIP_OPENED_AFTER_FREE,
    &ipc::HIP_NEVER_CLOSED,
    &ipc::EXPORTER_EXITED,
    &ipc::HIP_EXPORTER_EXITED,
    &ipc::CONTEXT_DESTROYED_WHILE_OPEN,
    &ipc::SECOND_CONTEXT,
    &ipc::UNREACHABLE,
    &ipc::HIP_UNREACHABLE,
    &ipc::EVENT_NEVER_DESTROYED,
    &ipc::HIP_EVENT_NEVER_DESTROYED,
    &ipc::EVENT_DESTROYED_WHILE_OPEN,
    &ipc::HIP_EVENT_DESTROYED_WHILE_OPEN,
    &endpoint::NEVER_DESTROYED,
    &endpoint::NEVER_RELEASED,
    &endpoint::BIND_IMPORTED_UNICAST,
    &vmm::NEVER_RELEASED,
    &vmm::NEVER_UNMAPPED,
    &vmm::NEVER_FREED,
    &vmm::FD_NEVER_CLOSED,
    &vmm::HIP_NEVER_RELEASED,
    &vmm::HIP_NEVER_UNMAPPED,
    &vmm::HIP_NEVER_FREED,
    &vmm::FABRIC_OTHER_DOMAIN,
    &pool::FREED_WHILE_IMPORTED,
    &pool::HIP_FREED_WHILE_IMPORTED,
    &pool::FABRIC_OTHER_DOMAIN,
];

/// A check decided for each process that ended through `exit`, from its successful calls up to
/// its exit, in its order ([`AtExitPass`]): the state it keeps of one process.
pub trait AtExit {
    /// The process's next successful call.
    fn call(&mut self, c: &Call);
    /// The process (`proc`, `pid`) wrote its exit record: the findings, each with a number that
    /// orders those resting on calls of one pid, time and number.
    fn exit(self, t: &Timeline, proc: usize, pid: i64, found: &mut Vec<(usize, ReportFinding)>);
}

/// An [`AtExit`] check as a [`Pass`]: one state per process that has an exit record (made by
/// `new`), kept until its exit and dropped then (calls of a process with no exit record are not
/// kept).
pub struct AtExitPass<S> {
    new: fn() -> S,
    states: HashMap<usize, (i64, S)>,
    gone: std::collections::HashSet<usize>,
    found: Vec<(Order, ReportFinding)>,
}

impl<S> AtExitPass<S> {
    pub fn new(new: fn() -> S) -> Self {
        AtExitPass {
            new,
            states: HashMap::new(),
            gone: Default::default(),
            found: Vec::new(),
        }
    }
}

impl<S: AtExit> Pass for AtExitPass<S> {
    fn call(&mut self, t: &Timeline, c: &Call) {
        if c.succeeded() && t.exited(c.proc).is_some() && !self.gone.contains(&c.proc) {
            let new = self.new;
            self.states
                .entry(c.proc)
                .or_insert_with(|| (c.pid, new()))
                .1
                .call(c);
        }
    }

    fn exit(&mut self, t: &Timeline, proc: usize, _ts_ns: u64) {
        self.gone.insert(proc);
        if let Some((pid, state)) = self.states.remove(&proc) {
            let mut found = Vec::new();
            state.exit(t, proc, pid, &mut found);
            self.found.extend(
                found
                    .into_iter()
                    .map(|(k, f)| ((String::new(), proc, k), f)),
            );
        }
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(Order, ReportFinding)> {
        self.found
    }
}

/// Runs `checks` over a finished timeline: their passes together, in one walk over its calls.
pub fn decide(timeline: &Timeline, checks: &[&dyn ReportCheck]) -> Vec<ReportFinding> {
    decide_on(timeline, checks, 1)
}

/// [`decide`] with the checks shared among up to `threads` threads, each walking the calls for
/// its own checks' passes: the same findings in the same order, whatever the number.
pub fn decide_on(
    timeline: &Timeline,
    checks: &[&dyn ReportCheck],
    threads: usize,
) -> Vec<ReportFinding> {
    let threads = threads.clamp(1, checks.len().max(1));
    // Each check's findings, in the order of the checks.
    let mut by_check: Vec<Vec<ReportFinding>> = if threads == 1 {
        walk_passes(timeline, checks)
    } else {
        // Dealt in turn (the checks of one family, which cost alike, are listed together).
        let groups: Vec<Vec<&dyn ReportCheck>> = (0..threads)
            .map(|k| checks.iter().skip(k).step_by(threads).copied().collect())
            .collect();
        let done: Vec<Vec<Vec<ReportFinding>>> = std::thread::scope(|scope| {
            let running: Vec<_> = groups
                .iter()
                .map(|group| scope.spawn(move || walk_passes(timeline, group)))
                .collect();
            running
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut by_check: Vec<Vec<ReportFinding>> = vec![Vec::new(); checks.len()];
        for (k, found) in done.into_iter().enumerate() {
            for (j, theirs) in found.into_iter().enumerate() {
                by_check[k + j * threads] = theirs;
            }
        }
        by_check
    };
    let mut found: Vec<ReportFinding> = by_check.drain(..).flatten().collect();
    found.sort_by_key(|f| (f.pid, f.ts_ns, f.seq));
    found
}

/// The passes of `checks` in one walk over the calls: each check's findings, in the order of
/// the calls they rest on (and of their [`Order`] among those of one call).
fn walk_passes(timeline: &Timeline, checks: &[&dyn ReportCheck]) -> Vec<Vec<ReportFinding>> {
    let mut passes: Vec<Box<dyn Pass>> = checks.iter().map(|c| c.pass()).collect();
    let mut exits: Vec<(u64, usize)> = timeline
        .exits
        .iter()
        .map(|(&proc, &ts)| (ts, proc))
        .collect();
    exits.sort_unstable();
    let mut exits = exits.into_iter().peekable();
    let mut calls = timeline.walk().peekable();
    while let Some(c) = calls.next() {
        while let Some((ts, proc)) = exits.next_if(|&(ts, _)| ts < c.ts_ns) {
            for pass in &mut passes {
                pass.exit(timeline, proc, ts);
            }
        }
        for pass in &mut passes {
            pass.call(timeline, &c);
        }
        if calls.peek().is_none_or(|next| next.ts_ns != c.ts_ns) {
            for pass in &mut passes {
                pass.settle(timeline, c.ts_ns);
            }
        }
    }
    for (ts, proc) in exits {
        for pass in &mut passes {
            pass.exit(timeline, proc, ts);
        }
    }
    passes
        .into_iter()
        .map(|pass| {
            let mut theirs = pass.end(timeline);
            theirs.sort_by(|(a, fa), (b, fb)| {
                (fa.pid, fa.ts_ns, fa.seq, a).cmp(&(fb.pid, fb.ts_ns, fb.seq, b))
            });
            theirs.into_iter().map(|(_, f)| f).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::{FreedWhileOpen, FREED_WHILE_OPEN, NEVER_CLOSED, OPENED_AFTER_FREE};

    /// What a reader may skip without parsing agrees with what `add` keeps.
    #[test]
    fn wants_says_which_records_add_would_keep() {
        let t = Timeline::for_checks(REPORT_CHECKS);
        assert!(t.wants(None, Some("exit"), None));
        assert!(!t.wants(None, Some("annotation"), None));
        assert!(t.wants(Some("cuMemFree_v2"), None, Some(r#"{"dptr":"0x1"}"#)));
        assert!(t.reads_function("cuMemFree_v2") && !t.reads_function("cuMemcpyPeer"));
        let fp = Some(r#"{"handle":"fp:00112233aabbccdd"}"#);
        assert!(t.wants(Some("somethingElse"), None, fp));
        assert!(!t.wants(Some("cuMemcpyPeer"), None, Some(r#"{"ByteCount":4}"#)));
        assert!(!mentions_fingerprint(None) && mentions_fingerprint(fp));
    }

    fn record(
        pid: i64,
        seq: u64,
        ts: u64,
        func: &str,
        args: Value,
        ret: i64,
    ) -> Map<String, Value> {
        // As the CLI's reader hands records over: `pid` and `ts_ns` added from the process record.
        let v = serde_json::json!({"seq":seq,"t":ts,"tid":pid,"fn":func,"a":args,"r":ret,
            "pid":pid,"ts_ns":ts});
        v.as_object().unwrap().clone()
    }

    const FP: &str = "fp:0123456789abcdef";

    /// Exporter 10 allocates, exports and frees at `free_at`; importer 20 opens at 200 and closes
    /// at `close_at`.
    fn job(free_at: u64, close_at: u64) -> Timeline {
        let mut t = Timeline::for_checks(&[&FreedWhileOpen]);
        for r in [
            record(10, 0, 0, "", Value::Null, 0), // an event record: skipped
            record(
                10,
                1,
                100,
                "cuIpcGetMemHandle",
                serde_json::json!({"*pHandle":FP,"dptr":"0x7000000"}),
                0,
            ),
            record(
                20,
                1,
                200,
                "cuIpcOpenMemHandle_v2",
                serde_json::json!({"*pdptr":"0x9000000","handle":FP,"Flags":"CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"}),
                0,
            ),
            record(
                20,
                2,
                close_at,
                "cuIpcCloseMemHandle",
                serde_json::json!({"dptr":"0x9000000"}),
                0,
            ),
            record(
                10,
                2,
                free_at,
                "cuMemFree_v2",
                serde_json::json!({"dptr":"0x7000000"}),
                0,
            ),
            // Another handle in the same job: never matched with this one.
            record(
                30,
                1,
                150,
                "cuIpcOpenMemHandle_v2",
                serde_json::json!({"*pdptr":"0x5","handle":"fp:ffffffffffffffff","Flags":0}),
                0,
            ),
            // A call no check reads: not kept.
            record(
                30,
                2,
                160,
                "cuDeviceCanAccessPeer",
                serde_json::json!({"*canAccessPeer":1,"dev":0,"peerDev":1}),
                0,
            ),
        ] {
            let mut r = r;
            if r["fn"] == "" {
                r.remove("fn");
                r.insert("event".into(), "exit".into());
            }
            t.add(&r);
        }
        t.finish();
        t
    }

    /// A timeline of `records` (`(pid, ts, func, args, ret)`; func `exit` is the process's exit
    /// record), for every report check.
    fn timeline(records: &[(i64, u64, &str, Value, i64)]) -> Timeline {
        let mut t = Timeline::for_checks(REPORT_CHECKS);
        for (seq, (pid, ts, func, args, ret)) in records.iter().enumerate() {
            let mut r = record(*pid, seq as u64 + 1, *ts, func, args.clone(), *ret);
            if *func == "exit" {
                r.remove("fn");
                r.insert("event".into(), "exit".into());
            }
            t.add(&r);
        }
        t.finish();
        t
    }

    fn export(ts: u64) -> (i64, u64, &'static str, Value, i64) {
        (
            10,
            ts,
            "cuIpcGetMemHandle",
            serde_json::json!({"*pHandle":FP,"dptr":"0x7000000"}),
            0,
        )
    }
    fn free(ts: u64) -> (i64, u64, &'static str, Value, i64) {
        (
            10,
            ts,
            "cuMemFree_v2",
            serde_json::json!({"dptr":"0x7000000"}),
            0,
        )
    }
    fn open(ts: u64, ret: i64) -> (i64, u64, &'static str, Value, i64) {
        let mapped = if ret == 0 { "0x9000000" } else { "0x0" };
        (
            20,
            ts,
            "cuIpcOpenMemHandle_v2",
            serde_json::json!({"*pdptr":mapped,"handle":FP,"Flags":1}),
            ret,
        )
    }
    fn close(ts: u64) -> (i64, u64, &'static str, Value, i64) {
        (
            20,
            ts,
            "cuIpcCloseMemHandle",
            serde_json::json!({"dptr":"0x9000000"}),
            0,
        )
    }
    fn exit(pid: i64, ts: u64) -> (i64, u64, &'static str, Value, i64) {
        (pid, ts, "exit", Value::Null, 0)
    }

    fn rules_found(t: &Timeline, check: &dyn ReportCheck) -> Vec<(&'static str, i64, u64)> {
        decide(t, &[check])
            .iter()
            .map(|f| (f.rule.id, f.pid, f.ts_ns))
            .collect()
    }

    /// What a pass decides at a time sees every call at that time, whichever process made it
    /// and wherever it falls among them: a close at the free's time has closed, and an open at
    /// the free's time is not open yet.
    #[test]
    fn a_decision_at_a_time_sees_every_call_at_that_time() {
        let check: &dyn ReportCheck = &FREED_WHILE_OPEN;
        let found =
            |records: &[(i64, u64, &str, Value, i64)]| rules_found(&timeline(records), check).len();
        assert_eq!(found(&[export(100), open(200, 0), free(300)]), 1);
        // The importer (pid 20) comes after the exporter (pid 10) among the calls of one time.
        assert_eq!(
            found(&[export(100), open(200, 0), free(300), close(300)]),
            0
        );
        // An importer that comes first among them (pid 5).
        let first = |mut r: (i64, u64, &'static str, Value, i64)| {
            r.0 = 5;
            r
        };
        assert_eq!(found(&[export(100), first(open(300, 0)), free(300)]), 0);
        assert_eq!(found(&[export(100), first(open(200, 0)), free(300)]), 1);
        assert_eq!(
            found(&[
                export(100),
                first(open(200, 0)),
                first(close(300)),
                free(300)
            ]),
            0
        );
        assert_eq!(
            found(&[
                export(100),
                first(open(200, 0)),
                first(close(301)),
                free(300)
            ]),
            1
        );
    }

    /// A mapping's count starts anew once nothing of it is open (issue 27: what a pass keeps is
    /// what is open, not every mapping seen): after its context was destroyed, an open of the
    /// same address in a context at the same address (a new one) is open until it is closed.
    #[test]
    fn a_mapping_opened_again_after_its_context_was_destroyed_is_counted_anew() {
        use serde_json::json;
        let id = NEVER_CLOSED.rules()[0].id;
        let open_at = |seq: u64, ts: u64| {
            let mut r = record(
                20,
                seq,
                ts,
                "cuIpcOpenMemHandle_v2",
                json!({"*pdptr": "0x9000000", "handle": FP, "Flags": 1}),
                0,
            );
            r.insert("ctx".into(), "0xc1".into());
            r
        };
        let destroy =
            |seq: u64, ts: u64| record(20, seq, ts, "cuCtxDestroy_v2", json!({"ctx": "0xc1"}), 0);
        let close = |seq: u64, ts: u64| {
            record(
                20,
                seq,
                ts,
                "cuIpcCloseMemHandle",
                json!({"dptr": "0x9000000"}),
                0,
            )
        };
        let exit = json!({"event": "exit", "pid": 20, "ts_ns": 600})
            .as_object()
            .unwrap()
            .clone();
        let found = |records: Vec<Map<String, Value>>| {
            let mut t = Timeline::for_checks(REPORT_CHECKS);
            for r in records.iter().chain([&exit]) {
                t.add(r);
            }
            t.finish();
            rules_found(&t, &NEVER_CLOSED)
        };
        assert_eq!(
            found(vec![open_at(1, 200), destroy(2, 300), open_at(3, 400)]),
            [(id, 20, 400)]
        );
        assert!(found(vec![
            open_at(1, 200),
            destroy(2, 300),
            open_at(3, 400),
            close(4, 500)
        ])
        .is_empty());
        assert!(found(vec![open_at(1, 200), destroy(2, 300)]).is_empty());
        assert!(found(vec![open_at(1, 200), close(2, 300)]).is_empty());
        assert_eq!(
            found(vec![open_at(1, 200), close(2, 300), open_at(3, 400)]),
            [(id, 20, 400)]
        );
    }

    /// A value's key: equal numbers have equal keys however written; other values are their
    /// text.
    #[test]
    fn values_are_keyed_by_their_number() {
        let key = |v: Value| value_key(&v).into_owned();
        for (written, expected) in [
            (Value::from("0x7000"), "0x7000"),
            (Value::from("0x07000"), "0x7000"),
            (Value::from("0x7F00"), "0x7f00"),
            (Value::from("0x0"), "0x0"),
            (Value::from("0x00"), "0x0"),
            (Value::from(28672), "0x7000"),
            (Value::from("0xffffffffffffffff"), "0xffffffffffffffff"),
            // Not a u64: the string as it is.
            (Value::from("0x10000000000000000"), "0x10000000000000000"),
            (Value::from("0x"), "0x"),
            (Value::from("0xzz"), "0xzz"),
            (Value::from("CU_IPC"), "CU_IPC"),
            (Value::Null, "null"),
        ] {
            assert_eq!(key(written.clone()), expected, "{written}");
        }
    }

    /// A job's records in four files: three processes, pid 20 on two machines, times that tie
    /// often, handles exported, opened, closed and freed in a pseudo-random order, arguments of
    /// every kind, stacks on some calls, exits.
    fn mixed_job() -> Vec<Vec<Map<String, Value>>> {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let fps = [
            "fp:00000000000000a1",
            "fp:00000000000000a2",
            "fp:00000000000000a3",
        ];
        let ptrs = ["0x7000", "0x7100", "0x7200"];
        let mut files = vec![Vec::new(); 4];
        for i in 0..600u64 {
            let (pid, machine) = [(10, "a"), (20, "a"), (20, "b"), (30, "a")][next(4) as usize];
            let fp = fps[next(3) as usize];
            let ptr = ptrs[next(3) as usize];
            let (func, args) = match next(6) {
                0 => (
                    "cuIpcGetMemHandle",
                    serde_json::json!({"*pHandle": fp, "dptr": ptr}),
                ),
                1 | 2 => (
                    "cuIpcOpenMemHandle_v2",
                    serde_json::json!({"*pdptr": ptr, "handle": fp, "Flags": next(2),
                        "extra": {"n": -1, "ok": true, "x": null, "f": 1.5}}),
                ),
                3 | 4 => ("cuIpcCloseMemHandle", serde_json::json!({"dptr": ptr})),
                _ => ("cuMemFree_v2", serde_json::json!({"dptr": ptr})),
            };
            let ts = 1_000 + i / 3 * 10;
            let mut r = record(pid, i, ts, func, args, [0, 0, 0, 1][next(4) as usize]);
            r.insert("machine".into(), machine.into());
            if next(3) == 0 {
                r.insert("ctx".into(), "0xc1".into());
                r.insert(
                    "stack".into(),
                    serde_json::json!([{"offset": format!("{:#x}", next(5))}]),
                );
            }
            files[next(4) as usize].push(r);
        }
        for (pid, machine, ts) in [(10, "a", 4_000), (20, "b", 2_500)] {
            let mut r = serde_json::json!({"event": "exit", "pid": pid, "ts_ns": ts});
            r["machine"] = machine.into();
            files[3].push(r.as_object().unwrap().clone());
        }
        files
    }

    /// A timeline of `files`, each read into a timeline of its own and taken in, in order (as
    /// `report --jobs` reads), every one spilling past `spill` calls (0: never).
    fn read_apart(files: &[Vec<Map<String, Value>>], spill: usize) -> Timeline {
        let mut t = Timeline::for_checks(REPORT_CHECKS);
        t.spill_every(spill);
        for file in files {
            let mut part = Timeline::for_checks(REPORT_CHECKS);
            part.spill_every(spill);
            for r in file {
                part.add(r);
            }
            t.absorb(part);
        }
        t.finish();
        t
    }

    /// Calls written to temporary files and merged back (issue 27: memory flat in the steps)
    /// are the calls kept in memory: the same calls in the same order, with the same arguments,
    /// places and stacks; the same findings (also with the checks shared among threads); the
    /// same IPC views. Many small runs make the merge
    /// of runs into one happen, and the files' processes are renumbered when taken in.
    #[test]
    fn a_timeline_spilled_to_disk_is_the_timeline_in_memory() {
        let files = mixed_job();
        let memory = read_apart(&files, 0);
        assert_eq!(memory.kept(), (600, 0));
        let described = |t: &Timeline| -> Vec<String> {
            t.walk()
                .map(|c| {
                    format!(
                        "{} {} {} {} {} {} {:?} {:?} {:?} {:?} {:?}",
                        c.ts_ns,
                        c.pid,
                        c.proc,
                        c.seq,
                        c.pos,
                        c.func,
                        c.args.to_map(),
                        c.ret,
                        c.tid,
                        c.place,
                        c.stack
                    )
                })
                .collect()
        };
        let decided_on = |t: &Timeline, threads: usize| -> Vec<String> {
            decide_on(t, REPORT_CHECKS, threads)
                .iter()
                .map(|f| {
                    format!(
                        "{} {} {} {} {}",
                        f.rule.id, f.pid, f.ts_ns, f.seq, f.message
                    )
                })
                .collect()
        };
        let decided = |t: &Timeline| decided_on(t, 1);
        let viewed = |t: &Timeline| -> Vec<String> {
            t.handles()
                .iter()
                .flat_map(|v| {
                    v.steps
                        .iter()
                        .map(|c| format!("{} {} {}", v.handle, c.pos, c.func))
                })
                .collect()
        };
        assert!(!decided(&memory).is_empty());
        assert!(!viewed(&memory).is_empty());
        for spill in [1, 2, 7, 64] {
            let disk = read_apart(&files, spill);
            let (calls, runs) = disk.kept();
            assert_eq!(calls, 600);
            assert!(runs > 0 && runs < store::SPILL_AT, "{runs} runs");
            if spill <= 2 {
                assert!(runs < 600 / spill / 4, "the runs were not merged: {runs}");
            }
            let same = |what: &str, a: Vec<String>, b: Vec<String>| {
                let first = a.iter().zip(&b).position(|(x, y)| x != y);
                assert!(
                    a.len() == b.len() && first.is_none(),
                    "{what}, spilling past {spill}: {} and {}, first differing: {:?}",
                    a.len(),
                    b.len(),
                    first.map(|i| (&a[i], &b[i]))
                );
            };
            same("calls", described(&disk), described(&memory));
            same("findings", decided(&disk), decided(&memory));
            // The checks shared among threads, each walking the calls: the same findings.
            for threads in [2, 5, 64] {
                same(
                    "findings by threads",
                    decided_on(&disk, threads),
                    decided(&memory),
                );
            }
            same("views", viewed(&disk), viewed(&memory));
            assert_eq!(disk.store_error(), None);
        }
        // A loop's calls read back share one shape again.
        let disk = read_apart(&[files.concat()], 1);
        let c: Vec<Call> = disk.walk().collect();
        assert!(c
            .windows(2)
            .any(|w| std::sync::Arc::ptr_eq(&w[0].shape, &w[1].shape)));
    }

    /// The calls of a loop keep one copy of what they repeat (issue 27: memory): equal
    /// arguments, places (machine, context, device, UUIDs) and names are one allocation;
    /// different ones are not merged, and a timeline taken in keeps its calls' values.
    #[test]
    fn a_loops_calls_share_one_copy_of_what_they_repeat() {
        let open = |seq: u64, ptr: &str| {
            let mut r = record(
                20,
                seq,
                100 * seq,
                "cuIpcOpenMemHandle_v2",
                serde_json::json!({"*pdptr":ptr,"handle":FP,"Flags":1}),
                0,
            );
            r.insert("ctx".into(), "0xc1".into());
            r.insert("unreachable".into(), serde_json::json!(["GPU-1"]));
            r
        };
        let mut t = Timeline::for_checks(REPORT_CHECKS);
        for (seq, ptr) in [(1, "0x9000"), (2, "0x9000"), (3, "0xa000")] {
            t.add(&open(seq, ptr));
        }
        // Another timeline (a later file) whose first process is another one: its processes
        // are numbered anew here.
        let mut other = Timeline::for_checks(REPORT_CHECKS);
        let mut stranger = open(9, "0x9000");
        stranger.insert("pid".into(), 30.into());
        stranger.insert("ts_ns".into(), 5_000.into());
        other.add(&stranger);
        other.add(&open(4, "0x9000"));
        t.absorb(other);
        t.finish();
        let c: Vec<Call> = t.walk().collect();
        // A loop's calls share one shape, and keep their own time and number; the absorbed
        // call of the same process takes this timeline's number for it.
        assert!(std::sync::Arc::ptr_eq(&c[0].shape, &c[1].shape));
        assert_eq!((c[1].seq, c[1].ts_ns), (2, 200));
        assert!(!std::sync::Arc::ptr_eq(&c[0].shape, &c[2].shape));
        assert_eq!((c[3].pid, c[3].seq, c[3].proc), (20, 4, c[0].proc));
        assert_eq!((c[4].pid, c[4].seq), (30, 9));
        assert_ne!(c[4].proc, c[0].proc);
        assert!(std::sync::Arc::ptr_eq(&c[0].args.0, &c[1].args.0));
        assert!(!std::sync::Arc::ptr_eq(&c[0].args.0, &c[2].args.0));
        assert_eq!(c[2].out("pdptr"), Some(&Value::from("0xa000")));
        assert_eq!(c[3].out("pdptr"), Some(&Value::from("0x9000")));
        // One place for the calls made in the same context, whatever their arguments; another
        // context is another place.
        assert!(std::sync::Arc::ptr_eq(&c[0].place, &c[2].place));
        let mut elsewhere = open(5, "0x9000");
        elsewhere.insert("ctx".into(), "0xc2".into());
        let mut t2 = Timeline::for_checks(REPORT_CHECKS);
        t2.add(&open(1, "0x9000"));
        t2.add(&elsewhere);
        t2.finish();
        let c2: Vec<Call> = t2.walk().collect();
        assert!(!std::sync::Arc::ptr_eq(&c2[0].place, &c2[1].place));
        assert_eq!(
            c2[1].place.ctx.as_ref().and_then(Value::as_str),
            Some("0xc2")
        );
        assert_eq!(
            c[0].place.ctx.as_ref().and_then(Value::as_str),
            Some("0xc1")
        );
        assert_eq!(
            c[0].place
                .unreachable
                .iter()
                .map(Name::as_str)
                .collect::<Vec<_>>(),
            ["GPU-1"]
        );
        assert!(std::sync::Arc::ptr_eq(&c[0].func.0, &c[2].func.0));
        assert_eq!(c[3].func, "cuIpcOpenMemHandle_v2");
        // Numbers of one kind hash alike; a number and its text do not make equal arguments.
        let mut t = Timeline::for_checks(REPORT_CHECKS);
        t.add(&record(
            20,
            1,
            1,
            "cuMemFree_v2",
            serde_json::json!({"dptr":16}),
            0,
        ));
        t.add(&record(
            20,
            2,
            2,
            "cuMemFree_v2",
            serde_json::json!({"dptr":"16"}),
            0,
        ));
        t.add(&record(
            20,
            3,
            3,
            "cuMemFree_v2",
            serde_json::json!({"dptr":16}),
            0,
        ));
        // The same call answered otherwise is another shape.
        t.add(&record(
            20,
            4,
            4,
            "cuMemFree_v2",
            serde_json::json!({"dptr":16}),
            1,
        ));
        t.finish();
        let c: Vec<Call> = t.walk().collect();
        assert!(!std::sync::Arc::ptr_eq(&c[0].args.0, &c[1].args.0));
        assert!(std::sync::Arc::ptr_eq(&c[0].args.0, &c[2].args.0));
        assert_eq!(c[1].arg("dptr"), Some(&Value::from("16")));
        assert!(std::sync::Arc::ptr_eq(&c[0].shape, &c[2].shape));
        assert!(!std::sync::Arc::ptr_eq(&c[0].shape, &c[3].shape));
        assert_eq!((c[2].ret, c[3].ret), (Some(0), Some(1)));
    }

    #[test]
    fn an_open_after_the_exporter_freed_is_found_unless_the_handle_was_exported_again() {
        let id = OPENED_AFTER_FREE.rules()[0].id;
        let found = |records: &[(i64, u64, &str, Value, i64)]| {
            rules_found(&timeline(records), &OPENED_AFTER_FREE)
        };
        // Opened (and closed) before the free: correct.
        assert!(found(&[export(100), open(200, 0), close(300), free(400)]).is_empty());
        // Opened after the free: the driver refused it (R580: 1), or mapped other memory.
        assert_eq!(
            found(&[export(100), free(200), open(300, 1)]),
            [(id, 20, 300)]
        );
        let t = timeline(&[export(100), free(200), open(300, 0)]);
        let f = decide(&t, &[&OPENED_AFTER_FREE]);
        assert!(
            f[0].message
                .contains("the memory mapped is not the memory exported"),
            "{f:?}"
        );
        // Exported again (new memory at the same address, the same handle on R580): the open is
        // the new memory's.
        assert!(found(&[export(100), free(200), export(250), open(300, 0)]).is_empty());
        // An open at the time of the new export is still the freed memory's.
        assert_eq!(
            found(&[export(100), free(150), export(300), open(300, 0)]),
            [(id, 20, 300)]
        );
        // The exporter's exit lets go of its exports, not of what an open after it names:
        // freed, then exited, then opened is found; exported again, or never freed, is not.
        assert_eq!(
            found(&[export(100), free(200), exit(10, 250), open(300, 0)]),
            [(id, 20, 300)]
        );
        assert!(found(&[
            export(100),
            free(200),
            export(210),
            exit(10, 250),
            open(300, 0)
        ])
        .is_empty());
        assert!(found(&[export(100), exit(10, 250), open(300, 0)]).is_empty());
    }

    /// An export with no place takes the place of the same process's earlier export of the same
    /// handle, until that process frees the memory; another handle's and another process's do not
    /// lend theirs.
    #[test]
    fn an_export_without_its_place_takes_the_first_export_of_its_handle_s() {
        let placed = |pid: i64, ts: u64, fp: &str| {
            let mut r = record(
                pid,
                ts,
                ts,
                "cuIpcGetMemHandle",
                serde_json::json!({"*pHandle": fp, "dptr": "0x7000000"}),
                0,
            );
            r.insert("ctx".into(), "0xc1".into());
            r.insert("dev".into(), 1.into());
            r.insert("uuid".into(), "GPU-aa".into());
            r
        };
        let bare = |pid: i64, ts: u64, fp: &str, ret: i64| {
            record(
                pid,
                ts,
                ts,
                "cuIpcGetMemHandle",
                serde_json::json!({"*pHandle": fp, "dptr": "0x7000000"}),
                ret,
            )
        };
        let other = "fp:00000000000000b2";
        let mut t = Timeline::for_checks(REPORT_CHECKS);
        for r in [
            bare(10, 1, FP, 0),
            placed(10, 2, FP),
            bare(10, 3, FP, 0),
            bare(10, 4, other, 0),
            bare(20, 5, FP, 0),
            placed(20, 6, other),
            bare(20, 7, other, 0),
            // The memory freed: a place is not lent past it (the shim records the place of the
            // first export after a free), and is let go.
            record(
                20,
                8,
                8,
                "cuMemFree_v2",
                serde_json::json!({"dptr": "0x7000000"}),
                0,
            ),
            bare(20, 9, other, 0),
        ] {
            t.add(&r);
        }
        t.finish();
        let places: Vec<(u64, Option<i64>, Option<String>)> = t
            .walk()
            .map(|c| {
                (
                    c.ts_ns,
                    c.place.dev,
                    c.place.uuid.as_deref().map(str::to_string),
                )
            })
            .collect();
        assert_eq!(
            places,
            [
                (1, None, None),
                (2, Some(1), Some("GPU-aa".into())),
                (3, Some(1), Some("GPU-aa".into())),
                (4, None, None),
                (5, None, None),
                (6, Some(1), Some("GPU-aa".into())),
                (7, Some(1), Some("GPU-aa".into())),
                (8, None, None),
                (9, None, None),
            ]
        );
        assert_eq!(
            t.walk().nth(2).unwrap().place.ctx,
            Some(Value::from("0xc1"))
        );
    }

    #[test]
    fn an_importer_that_exits_with_a_mapping_open_is_found() {
        let id = NEVER_CLOSED.rules()[0].id;
        let found = |records: &[(i64, u64, &str, Value, i64)]| {
            rules_found(&timeline(records), &NEVER_CLOSED)
        };
        assert_eq!(
            found(&[export(100), open(200, 0), exit(20, 500)]),
            [(id, 20, 200)]
        );
        // Closed before exit; or still running (no exit record: nothing to say yet); or the open
        // failed (nothing to close).
        assert!(found(&[export(100), open(200, 0), close(300), exit(20, 500)]).is_empty());
        assert!(found(&[export(100), open(200, 0)]).is_empty());
        assert!(found(&[export(100), open(200, 1), exit(20, 500)]).is_empty());
        // Opened twice (v2 counts), closed once: one finding, for the one open left.
        let t = timeline(&[
            export(100),
            open(200, 0),
            open(210, 0),
            close(300),
            exit(20, 500),
        ]);
        let f = decide(&t, &[&NEVER_CLOSED]);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].message.contains("(1 open(s) without a close)"),
            "{f:?}"
        );
        // On the last open of the mapping before the exit.
        assert_eq!(f[0].ts_ns, 210);
    }

    #[test]
    fn calls_of_every_process_are_matched_by_fingerprint_in_time_order() {
        let t = job(400, 300);
        assert_eq!(t.walk().count(), 5, "the event record is not a call");
        let shared: Vec<(i64, String)> = t
            .walk()
            .filter(|c| c.fingerprints().contains(&FP))
            .map(|c| (c.pid, c.func.to_string()))
            .collect();
        assert_eq!(
            shared,
            [
                (10, "cuIpcGetMemHandle".into()),
                (20, "cuIpcOpenMemHandle_v2".into())
            ]
        );
        assert!(is_fingerprint(FP) && !is_fingerprint("0x7000000") && !is_fingerprint("fp:xyz"));
    }

    #[test]
    fn a_report_check_decides_across_processes_and_is_silent_on_correct_order() {
        let checks: [&dyn ReportCheck; 1] = [&FreedWhileOpen];
        // The importer closed (300) before the exporter freed (400): correct.
        assert!(decide(&job(400, 300), &checks).is_empty());
        // The exporter freed (250) while the importer still had it open (until 300).
        let found = decide(&job(250, 300), &checks);
        assert_eq!(found.len(), 1);
        let f = &found[0];
        assert_eq!(
            (f.rule.id, f.pid, f.seq, f.func.as_str()),
            (FREED_WHILE_OPEN.rules()[0].id, 10, 2, "cuMemFree_v2")
        );
        assert_eq!(
            f.message,
            "cuMemFree_v2 0x7000000 was exported (cuIpcGetMemHandle) and is still open in process \
             20 (cuIpcOpenMemHandle, not yet closed)"
        );
        // Closed and freed at the same instant: not open any more.
        assert!(decide(&job(300, 300), &checks).is_empty());
        // Opened twice (v2 counts), closed once before the free and once after: still open.
        let mut t = job(400, 300);
        let twice = |seq, ts, func: &str, args: Value| record(20, seq, ts, func, args, 0);
        t.add(&twice(
            3,
            210,
            "cuIpcOpenMemHandle_v2",
            serde_json::json!({"*pdptr":"0x9000000","handle":FP,"Flags":"CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"}),
        ));
        t.add(&twice(
            4,
            500,
            "cuIpcCloseMemHandle",
            serde_json::json!({"dptr":"0x9000000"}),
        ));
        t.finish();
        let found = decide(&t, &checks);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0]
            .message
            .ends_with("still open in process 20 (cuIpcOpenMemHandle, not yet closed)"));
        assert!(REPORT_CHECKS.iter().all(|c| !c.rules().is_empty()));
    }

    /// An importer whose opens of three handles in turn all return one address (as a caching
    /// allocator's do): each handle's view holds its export, its open, the close that followed
    /// that open and the free that followed its export, and nothing of the others' (every close
    /// of the address used to be listed under every handle: 4,002 steps a handle instead of 3).
    #[test]
    fn each_close_belongs_to_the_open_that_returned_the_address_then() {
        let mut records = Vec::new();
        for k in 0..3u64 {
            let fp = format!("fp:{k:016x}");
            let at = 1000 * (k + 1);
            records.push((
                10,
                at,
                "cuIpcGetMemHandle",
                serde_json::json!({"*pHandle":fp,"dptr":"0x7000000"}),
                0,
            ));
            records.push((
                20,
                at + 100,
                "cuIpcOpenMemHandle_v2",
                serde_json::json!({"*pdptr":"0x9000000","handle":fp,"Flags":1}),
                0,
            ));
            records.push((
                20,
                at + 200,
                "cuIpcCloseMemHandle",
                serde_json::json!({"dptr":"0x9000000"}),
                0,
            ));
            records.push((
                10,
                at + 300,
                "cuMemFree_v2",
                serde_json::json!({"dptr":"0x7000000"}),
                0,
            ));
        }
        let t = timeline(&records);
        let views = t.handles();
        assert_eq!(views.len(), 3);
        for (k, view) in views.iter().enumerate() {
            let at = 1000 * (k as u64 + 1);
            let steps: Vec<(i64, u64, &str)> = view
                .steps
                .iter()
                .map(|c| (c.pid, c.ts_ns, c.func.as_str()))
                .collect();
            assert_eq!(
                steps,
                [
                    (10, at, "cuIpcGetMemHandle"),
                    (20, at + 100, "cuIpcOpenMemHandle_v2"),
                    (20, at + 200, "cuIpcCloseMemHandle"),
                    (10, at + 300, "cuMemFree_v2"),
                ],
                "{}",
                view.handle
            );
        }
    }

    /// A handle used for thousands of rounds (the allocator hands out the same address, R580 the
    /// same handle): each round is decided on its own. One round's free before its close is the
    /// one finding; the importer's exit with the last round's mapping open is the other.
    #[test]
    fn a_long_history_of_one_handle_is_decided_round_by_round() {
        const ROUNDS: u64 = 3000;
        const EARLY: u64 = 1234;
        let mut records = Vec::new();
        for k in 0..ROUNDS {
            let at = 1000 * (k + 1);
            let (close_at, free_at) = if k == EARLY {
                (at + 300, at + 200)
            } else {
                (at + 200, at + 300)
            };
            records.push(export(at));
            records.push(open(at + 100, 0));
            if k + 1 < ROUNDS {
                records.push(close(close_at));
            } else {
                // The importer exits with the last round's mapping open.
                records.push(exit(20, at + 150));
            }
            records.push(free(free_at));
        }
        let t = timeline(&records);
        let freed_early = 1000 * (EARLY + 1) + 200;
        assert_eq!(
            rules_found(&t, &FREED_WHILE_OPEN),
            [(FREED_WHILE_OPEN.rules()[0].id, 10, freed_early)]
        );
        let last_open = 1000 * ROUNDS + 100;
        assert_eq!(
            rules_found(&t, &NEVER_CLOSED),
            [(NEVER_CLOSED.rules()[0].id, 20, last_open)]
        );
        assert!(rules_found(&t, &OPENED_AFTER_FREE).is_empty());
        // The handle view attributes each round's steps to its round.
        let views = t.handles();
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].steps.len() as u64, 4 * ROUNDS - 1);
    }

    /// A pid names a process on one machine only: another machine's process with the importer's
    /// pid, which exited while the importer still had its mapping open, is not the importer
    /// (before, its exit was taken for the importer's: a false never-closed).
    #[test]
    fn processes_of_one_pid_on_two_machines_are_two_processes() {
        let on = |machine: &str, (pid, ts, func, args, ret): (i64, u64, &str, Value, i64)| {
            let mut r = record(pid, 0, ts, func, args, ret);
            r.insert("machine".into(), machine.into());
            if func == "exit" {
                r.remove("fn");
                r.insert("event".into(), "exit".into());
            }
            r
        };
        let mut t = Timeline::for_checks(REPORT_CHECKS);
        for (seq, mut r) in [
            on("a", export(100)),
            on("a", open(200, 0)),
            on("a", close(400)),
            on("a", free(500)),
            on("a", exit(20, 600)),
            on("b", exit(20, 300)),
        ]
        .into_iter()
        .enumerate()
        {
            r.insert("seq".into(), (seq as u64 + 1).into());
            t.add(&r);
        }
        t.finish();
        assert!(rules_found(&t, &NEVER_CLOSED).is_empty());
        assert!(rules_found(&t, &FREED_WHILE_OPEN).is_empty());
        // The same records without machines (an older trace): one process 20, as before.
        let mut old = Timeline::for_checks(REPORT_CHECKS);
        for r in [
            export(100),
            open(200, 0),
            close(400),
            free(500),
            exit(20, 600),
            exit(20, 300),
        ] {
            let mut r = on("", r);
            r.remove("machine");
            old.add(&r);
        }
        old.finish();
        assert_eq!(rules_found(&old, &NEVER_CLOSED).len(), 1);
    }
}
