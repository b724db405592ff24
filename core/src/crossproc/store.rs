//! Where a timeline keeps its calls (issue 27: memory flat in the steps seen). Calls come in the
//! order the files are read; the report walks them in time order. Up to a bound they stay in
//! memory; past it, each full buffer is sorted and written to an unnamed temporary file (a
//! *run*), and the walk merges the runs. A run holds whole calls (what a loop's calls share in
//! memory is written out with each), so what stays in memory while reading is one buffer, and
//! while walking one call per run, whatever the number of steps.
//!
//! A run is private to the report (an unnamed file, removed by the system when it is closed)
//! and holds what the trace holds: handles only as their fingerprints.

use super::{Args, Call, Name, Place, Shape};
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// Calls kept in memory before they are written to a run, unless the timeline is told otherwise
/// ([`super::Timeline::spill_every`]): 8 MiB of calls, plus what they share.
pub const SPILL_AT: usize = 1 << 18;

/// What the calls in memory may hold besides themselves (their distinct arguments and shapes,
/// estimated), before they are written to a run whatever their number: calls that share little
/// (a new handle each) cost ten times what a loop's do.
pub const SPILL_BYTES: usize = 32 << 20;

/// Runs merged into one once there are this many (the walk reads one buffer per run).
const MAX_RUNS: usize = 32;

/// The order the report walks calls in: time, pid, process (of one pid on two machines, the
/// first seen first), number, then the order they came in.
pub(crate) fn key(c: &Call) -> Key {
    (c.ts_ns, c.pid, c.proc, c.seq, c.pos)
}

pub(crate) type Key = (u64, i64, usize, u64, usize);

/// A timeline's calls: those in memory (`buf`, each `pos` its arrival) and its runs.
#[derive(Debug, Default, Clone)]
pub(crate) struct Store {
    pub(crate) buf: Vec<Call>,
    /// Calls pushed so far (the next one's arrival).
    arrived: usize,
    runs: Vec<Run>,
    /// `None`: [`SPILL_AT`]; `Some(0)`: never spill.
    spill_at: Option<usize>,
    /// Why calls stay in memory (a run could not be written), or why some could not be read
    /// back: the first such error.
    error: Arc<std::sync::OnceLock<String>>,
}

/// A sorted run of calls in an unnamed temporary file, with the tables its records index.
#[derive(Debug, Clone)]
struct Run {
    file: Arc<std::fs::File>,
    calls: usize,
    names: Arc<[Name]>,
    places: Arc<[Arc<Place>]>,
    stacks: Arc<[Arc<Value>]>,
    /// Its calls' process numbers in the timeline that holds it (`None`: as written).
    procs: Option<Arc<[usize]>>,
    /// Added to its calls' arrivals.
    pos_offset: usize,
}

impl Store {
    pub(crate) fn spill_every(&mut self, calls: usize) {
        self.spill_at = Some(calls);
    }

    pub(crate) fn spill_at(&self) -> usize {
        self.spill_at.unwrap_or(SPILL_AT)
    }

    pub(crate) fn note_error(&self, why: &str) {
        let _ = self.error.set(why.to_string());
    }

    /// Calls held in all (in memory and in runs).
    pub(crate) fn len(&self) -> usize {
        self.buf.len() + self.runs.iter().map(|r| r.calls).sum::<usize>()
    }

    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    pub(crate) fn error(&self) -> Option<&str> {
        self.error.get().map(String::as_str)
    }

    /// Keeps `c` (its `pos` becomes its arrival). True when the buffer was written to a run
    /// (what the buffer's calls shared may then be let go).
    /// `shared`: what the calls in memory hold besides themselves, estimated (bytes).
    pub(crate) fn push(&mut self, mut c: Call, shared: usize) -> bool {
        c.pos = self.arrived;
        self.arrived += 1;
        self.buf.push(c);
        self.spill_if_full(shared)
    }

    fn spill_if_full(&mut self, shared: usize) -> bool {
        let at = self.spill_at();
        if at == 0 || (self.buf.len() < at && shared < SPILL_BYTES) {
            return false;
        }
        self.buf.sort_unstable_by_key(key);
        let written = Encoder::new().and_then(|mut e| {
            for c in &self.buf {
                e.write(c)?;
            }
            e.finish()
        });
        match written {
            Ok(run) => {
                self.buf.clear();
                self.runs.push(run);
                self.compact();
                true
            }
            Err(e) => {
                // Kept in memory from now on: nothing is lost, memory grows.
                let _ = self.error.set(format!(
                    "could not write a temporary file (TMPDIR), so every call is kept in \
                     memory: {e}"
                ));
                self.spill_at = Some(0);
                false
            }
        }
    }

    /// Merges the newest half of the runs into one when there are [`MAX_RUNS`].
    fn compact(&mut self) {
        if self.runs.len() < MAX_RUNS {
            return;
        }
        let newest = self.runs.split_off(MAX_RUNS / 2);
        let merged = Encoder::new().and_then(|mut e| {
            let mut merge = Merge::new(&newest, &[], &self.error);
            for c in &mut merge {
                e.write(&c)?;
            }
            e.finish()
        });
        match merged {
            Ok(run) => self.runs.push(run),
            Err(e) => {
                let _ = self
                    .error
                    .set(format!("could not merge temporary files: {e}"));
                self.runs.extend(newest);
            }
        }
    }

    /// Takes in `other`'s calls as if pushed after these, their processes renumbered
    /// (`renumbered[theirs]`, already applied to the calls of `buf`).
    pub(crate) fn absorb(
        &mut self,
        other: Store,
        buf: Vec<Call>,
        renumbered: &[usize],
        shared: usize,
    ) -> bool {
        let offset = self.arrived;
        for mut run in other.runs {
            run.procs = Some(match &run.procs {
                None => renumbered.into(),
                Some(map) => map.iter().map(|&p| renumbered[p]).collect(),
            });
            run.pos_offset += offset;
            self.runs.push(run);
        }
        self.buf.extend(buf.into_iter().map(|mut c| {
            c.pos += offset;
            c
        }));
        self.arrived += other.arrived;
        if let Some(e) = other.error.get() {
            let _ = self.error.set(e.clone());
        }
        self.compact();
        self.spill_if_full(shared)
    }

    /// Sorts what is in memory (once every call is in).
    pub(crate) fn finish(&mut self) {
        self.buf.sort_unstable_by_key(key);
    }

    /// Every call in time order ([`key`]), each `pos` its arrival; `buf` must be sorted.
    pub(crate) fn merge(&self) -> Merge<'_> {
        Merge::new(&self.runs, &self.buf, &self.error)
    }
}

/// The calls of several runs and one sorted slice, merged in [`key`] order.
pub(crate) struct Merge<'a> {
    readers: Vec<Reader<'a>>,
    rest: std::slice::Iter<'a, Call>,
    /// This walk's own copy of each shape of the slice's calls, by the address of the shared
    /// one, up to [`RECENT`] (then it starts again): threads that walk the same calls at once
    /// each count the references of their own copies, instead of all counting one (issue 27:
    /// 16 threads walking a loop's calls spent more time passing that count's cache line
    /// around than checking).
    local: rustc_hash::FxHashMap<usize, Arc<Shape>>,
    /// The head of each source (the slice's is the last), ordered by key.
    heads: BinaryHeap<Reverse<(Key, usize)>>,
    held: Vec<Option<Call>>,
}

impl<'a> Merge<'a> {
    fn new(runs: &'a [Run], rest: &'a [Call], error: &'a std::sync::OnceLock<String>) -> Self {
        let mut merge = Merge {
            readers: runs.iter().map(|run| Reader::new(run, error)).collect(),
            rest: rest.iter(),
            local: Default::default(),
            heads: BinaryHeap::new(),
            held: Vec::new(),
        };
        if !merge.readers.is_empty() {
            merge.held = (0..=merge.readers.len()).map(|_| None).collect();
            for source in 0..=merge.readers.len() {
                merge.refill(source);
            }
        }
        merge
    }

    fn refill(&mut self, source: usize) {
        let next = match self.readers.get_mut(source) {
            Some(reader) => reader.next(),
            None => self.next_in_memory(),
        };
        if let Some(c) = next {
            self.heads.push(Reverse((key(&c), source)));
            self.held[source] = Some(c);
        }
    }
}

impl Merge<'_> {
    /// The slice's next call, with this walk's copy of its shape (the shared one is only read).
    fn next_in_memory(&mut self) -> Option<Call> {
        let c = self.rest.next()?;
        let at = Arc::as_ptr(&c.shape) as usize;
        let shape = match self.local.get(&at) {
            Some(shape) => shape.clone(),
            None => {
                if self.local.len() == RECENT {
                    self.local.clear();
                }
                let shape = Arc::new(Shape::clone(&c.shape));
                self.local.insert(at, shape.clone());
                shape
            }
        };
        Some(Call {
            shape,
            seq: c.seq,
            ts_ns: c.ts_ns,
            pos: c.pos,
        })
    }
}

impl Iterator for Merge<'_> {
    type Item = Call;

    fn next(&mut self) -> Option<Call> {
        // One source: no heap.
        if self.readers.is_empty() {
            return self.next_in_memory();
        }
        let Reverse((_, source)) = self.heads.pop()?;
        let c = self.held[source].take();
        self.refill(source);
        c
    }
}

/// A record's fields after its length: time, number, arrival, then its shape.
const FIXED: usize = 24;

/// Writes calls to a new run, building the tables its records index.
struct Encoder {
    out: std::io::BufWriter<std::fs::File>,
    calls: usize,
    rec: Vec<u8>,
    names: HashMap<*const u8, u32>,
    name_list: Vec<Name>,
    places: HashMap<*const Place, u32>,
    place_list: Vec<Arc<Place>>,
    stacks: HashMap<*const Value, u32>,
    stack_list: Vec<Arc<Value>>,
}

fn index<T: ?Sized, U: Clone>(
    map: &mut HashMap<*const T, u32>,
    list: &mut Vec<U>,
    ptr: *const T,
    item: &U,
) -> u32 {
    *map.entry(ptr).or_insert_with(|| {
        list.push(item.clone());
        (list.len() - 1) as u32
    })
}

impl Encoder {
    fn new() -> std::io::Result<Encoder> {
        Ok(Encoder {
            out: std::io::BufWriter::with_capacity(1 << 16, tempfile::tempfile()?),
            calls: 0,
            rec: Vec::with_capacity(256),
            names: HashMap::new(),
            name_list: Vec::new(),
            places: HashMap::new(),
            place_list: Vec::new(),
            stacks: HashMap::new(),
            stack_list: Vec::new(),
        })
    }

    fn name(&mut self, name: &Name) -> u32 {
        let ptr = Arc::as_ptr(&name.0).cast::<u8>();
        index(&mut self.names, &mut self.name_list, ptr, name)
    }

    fn write(&mut self, c: &Call) -> std::io::Result<()> {
        let mut rec = std::mem::take(&mut self.rec);
        rec.clear();
        rec.extend_from_slice(&c.ts_ns.to_le_bytes());
        rec.extend_from_slice(&c.seq.to_le_bytes());
        rec.extend_from_slice(&(c.pos as u64).to_le_bytes());
        rec.extend_from_slice(&c.pid.to_le_bytes());
        rec.extend_from_slice(&(c.proc as u32).to_le_bytes());
        let flags = u8::from(c.tid.is_some())
            | u8::from(c.ret.is_some()) << 1
            | u8::from(c.stack.is_some()) << 2;
        rec.push(flags);
        for v in [c.tid, c.ret].into_iter().flatten() {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        let func = self.name(&c.func);
        rec.extend_from_slice(&func.to_le_bytes());
        let place = index(
            &mut self.places,
            &mut self.place_list,
            Arc::as_ptr(&c.place),
            &c.place,
        );
        rec.extend_from_slice(&place.to_le_bytes());
        if let Some(stack) = &c.stack {
            let i = index(
                &mut self.stacks,
                &mut self.stack_list,
                Arc::as_ptr(stack),
                stack,
            );
            rec.extend_from_slice(&i.to_le_bytes());
        }
        rec.extend_from_slice(&(c.args.0.len() as u32).to_le_bytes());
        for (name, value) in c.args.0.iter() {
            let i = self.name(name);
            rec.extend_from_slice(&i.to_le_bytes());
            encode_value(value, &mut rec);
        }
        let written = self
            .out
            .write_all(&(rec.len() as u32).to_le_bytes())
            .and_then(|()| self.out.write_all(&rec));
        self.rec = rec;
        self.calls += 1;
        written
    }

    fn finish(self) -> std::io::Result<Run> {
        let file = self
            .out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        Ok(Run {
            file: Arc::new(file),
            calls: self.calls,
            names: self.name_list.into(),
            places: self.place_list.into(),
            stacks: self.stack_list.into(),
            procs: None,
            pos_offset: 0,
        })
    }
}

/// A value as a tag and its bytes: what arguments hold (strings, numbers) directly, anything
/// else as its JSON text.
fn encode_value(v: &Value, out: &mut Vec<u8>) {
    let text = |out: &mut Vec<u8>, tag: u8, s: &str| {
        out.push(tag);
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.push(1 + u8::from(*b)),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => {
                out.push(3);
                out.extend_from_slice(&u.to_le_bytes());
            }
            (None, Some(i)) => {
                out.push(4);
                out.extend_from_slice(&i.to_le_bytes());
            }
            _ => text(out, 6, &v.to_string()),
        },
        Value::String(s) => text(out, 5, s),
        other => text(out, 6, &other.to_string()),
    }
}

/// Reads a record's fields in order.
struct Fields<'b> {
    bytes: &'b [u8],
}

impl<'b> Fields<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn text(&mut self) -> Option<&'b str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
    fn value(&mut self) -> Option<Value> {
        Some(match self.u8()? {
            0 => Value::Null,
            1 => Value::Bool(false),
            2 => Value::Bool(true),
            3 => self.u64()?.into(),
            4 => self.i64()?.into(),
            5 => Value::String(self.text()?.to_string()),
            6 => serde_json::from_str(self.text()?).ok()?,
            _ => return None,
        })
    }
}

/// Shapes a reader made, by their bytes, up to this many (then it starts again): a loop's calls
/// share one again. Time order interleaves the loops of every process of a job (issue 27: 16
/// jobs of an open/close loop are 64 shapes in turn, which 8 recent ones missed every time).
const RECENT: usize = 512;

/// One run read in order, through a buffer of its own.
struct Reader<'a> {
    run: &'a Run,
    error: &'a std::sync::OnceLock<String>,
    offset: u64,
    buf: Vec<u8>,
    at: usize,
    left: usize,
    recent: rustc_hash::FxHashMap<Box<[u8]>, Arc<Shape>>,
    /// Calls of one time and pid, in [`key`] order: a run is sorted by the process numbers it
    /// was written with, which the timeline that took it in may have changed.
    group: std::collections::VecDeque<Call>,
    /// The call after the group.
    ahead: Option<Call>,
}

impl<'a> Reader<'a> {
    fn new(run: &'a Run, error: &'a std::sync::OnceLock<String>) -> Self {
        Reader {
            run,
            error,
            offset: 0,
            buf: Vec::new(),
            at: 0,
            left: run.calls,
            recent: Default::default(),
            group: Default::default(),
            ahead: None,
        }
    }

    /// The next `n` bytes of the file, from the buffer (refilled as needed).
    fn bytes(&mut self, n: usize) -> std::io::Result<&[u8]> {
        if self.buf.len() - self.at < n {
            let kept = self.buf.split_off(self.at);
            let want = n.max(1 << 16);
            self.buf = kept;
            let have = self.buf.len();
            self.buf.resize(have + want, 0);
            let mut filled = have;
            while filled < have + want {
                let got = self
                    .run
                    .file
                    .read_at(&mut self.buf[filled..], self.offset)?;
                if got == 0 {
                    break;
                }
                filled += got;
                self.offset += got as u64;
            }
            self.buf.truncate(filled);
            self.at = 0;
            if filled < n {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let start = self.at;
        self.at += n;
        Ok(&self.buf[start..start + n])
    }

    fn read(&mut self) -> Option<Call> {
        let len = u32::from_le_bytes(self.bytes(4).ok()?.try_into().ok()?) as usize;
        let rec = self.bytes(len).ok()?.to_vec();
        let mut f = Fields { bytes: &rec };
        let ts_ns = f.u64()?;
        let seq = f.u64()?;
        let pos = f.u64()? as usize + self.run.pos_offset;
        let shape_bytes = &rec[FIXED..];
        let shape = match self.recent.get(shape_bytes) {
            Some(shape) => shape.clone(),
            None => {
                let shape = Arc::new(self.shape(&mut f)?);
                if self.recent.len() == RECENT {
                    self.recent.clear();
                }
                self.recent.insert(shape_bytes.into(), shape.clone());
                shape
            }
        };
        Some(Call {
            shape,
            seq,
            ts_ns,
            pos,
        })
    }

    fn shape(&self, f: &mut Fields) -> Option<Shape> {
        let run = self.run;
        let pid = f.i64()?;
        let proc = f.u32()? as usize;
        let proc = match &run.procs {
            Some(map) => *map.get(proc)?,
            None => proc,
        };
        let flags = f.u8()?;
        let tid = if flags & 1 != 0 { Some(f.i64()?) } else { None };
        let ret = if flags & 2 != 0 { Some(f.i64()?) } else { None };
        let func = run.names.get(f.u32()? as usize)?.clone();
        let place = run.places.get(f.u32()? as usize)?.clone();
        let stack = if flags & 4 != 0 {
            Some(run.stacks.get(f.u32()? as usize)?.clone())
        } else {
            None
        };
        let n = f.u32()? as usize;
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let name = run.names.get(f.u32()? as usize)?.clone();
            args.push((name, f.value()?));
        }
        Some(Shape {
            pid,
            proc,
            place,
            tid,
            func,
            args: Args(args.into()),
            ret,
            stack,
        })
    }
}

impl Iterator for Reader<'_> {
    type Item = Call;

    fn next(&mut self) -> Option<Call> {
        if self.group.is_empty() {
            let first = self.ahead.take().or_else(|| self.next_written())?;
            let (ts, pid) = (first.ts_ns, first.pid);
            self.group.push_back(first);
            while let Some(c) = self.next_written() {
                if (c.ts_ns, c.pid) != (ts, pid) {
                    self.ahead = Some(c);
                    break;
                }
                self.group.push_back(c);
            }
            if self.group.len() > 1 {
                self.group.make_contiguous().sort_unstable_by_key(key);
            }
        }
        self.group.pop_front()
    }
}

impl Reader<'_> {
    /// The next call in the order written.
    fn next_written(&mut self) -> Option<Call> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let read = self.read();
        if read.is_none() {
            self.left = 0;
            let _ = self.error.set(
                "a temporary file of the report's calls could not be read back: the calls after \
                 that point in it were not checked"
                    .to_string(),
            );
        }
        read
    }
}
