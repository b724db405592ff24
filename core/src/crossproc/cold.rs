//! [`ColdMap`]: what a check keeps per handle seen, in memory while it is used and on disk once
//! it is not (issue 27: memory bounded by the handles alive, not by every handle a job made).
//!
//! The checks that relate a later open to an earlier export (an open of a freed handle, of one
//! exported on a device the opener cannot reach, the first exporter of a handle) must remember
//! each handle exported, however long ago: the open may come at any time. A job that shares a
//! new buffer each step makes millions. A `ColdMap` keeps the entries used lately in a hash map;
//! at each spill, the entries not used since the one before (and that can be written: see
//! [`Spill::spillable`]) go to a *run*, an unnamed temporary file sorted by key, with a sparse
//! index and a Bloom filter in memory (about 3 bytes per entry; past [`MAX_RUNS`] runs, the
//! newest half are merged, a buffer per run). An entry looked up again is read back and used in
//! memory (its copy on disk is then stale: lookups ask memory first, and the runs newest first).
//!
//! A run is private to the report, like the timeline's ([`super::store`]): an unnamed file,
//! holding fingerprints, never handle bytes.

use super::Timeline;
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::FileExt;

/// A key or a value a [`ColdMap`] can write to a run and read back.
pub(crate) trait Spill: Sized {
    fn write(&self, out: &mut Vec<u8>);
    /// Reads one written by [`Spill::write`] from the front of `bytes`, advancing it.
    fn read(bytes: &mut &[u8]) -> Option<Self>;
    /// Whether it can be written now (a value that shares state with what is alive cannot).
    fn spillable(&self) -> bool {
        true
    }
}

/// Runs merged into one once there are this many (a lookup that misses memory asks each run's
/// filter).
const MAX_RUNS: usize = 16;

/// Records per entry of a run's sparse index (a lookup reads at most one such block).
const BLOCK: usize = 32;

/// Bits of a run's Bloom filter per record, and its probes (about 1% false positives).
const BLOOM_BITS: usize = 10;
const PROBES: u64 = 7;

pub(crate) struct ColdMap<K, V> {
    /// Whether the bound was taken from the timeline ([`ColdMap::bounded_by`]).
    bounded: bool,
    hot: FxHashMap<K, Slot<V>>,
    runs: Vec<ColdRun>,
    /// Entries in memory before the next spill; `usize::MAX`: never spill.
    bound: usize,
    next_spill: usize,
    /// Spills so far: an entry used since the last one is hot.
    generation: u64,
    /// Why entries stay in memory (a run could not be written or read), the first such error.
    pub(crate) error: Option<String>,
    /// A key's bytes, written for a lookup on disk.
    scratch: Vec<u8>,
}

struct Slot<V> {
    value: V,
    used: u64,
}

/// Entries written out, sorted by their keys' bytes.
struct ColdRun {
    file: std::fs::File,
    len: u64,
    /// Records written.
    count: usize,
    /// Every [`BLOCK`]th key's bytes and where its record starts.
    index: Vec<(Box<[u8]>, u64)>,
    bloom: Vec<u64>,
    /// The filter's bits (what the probes are taken modulo).
    bits: u64,
}

impl<K: Spill + Hash + Eq + Clone, V: Spill + Default> ColdMap<K, V> {
    /// A map that keeps about `bound` entries in memory (`usize::MAX`: every one).
    pub(crate) fn new(bound: usize) -> Self {
        ColdMap {
            bounded: false,
            hot: FxHashMap::default(),
            runs: Vec::new(),
            bound: bound.max(1),
            next_spill: bound.max(1),
            generation: 0,
            error: None,
            scratch: Vec::new(),
        }
    }

    /// Takes its bound from the timeline walked, the first time ([`Timeline::cold_bound`]).
    pub(crate) fn bounded_by(&mut self, t: &Timeline) {
        if !self.bounded {
            self.bounded = true;
            self.bound = t.cold_bound();
            self.next_spill = self.bound;
        }
    }

    /// Passes on to the timeline why entries stayed in memory, if they did.
    pub(crate) fn tell(&self, t: &Timeline) {
        if let Some(why) = &self.error {
            t.note_error(why);
        }
    }

    /// The entry of `key`, from memory or read back from a run (then kept in memory).
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        if !self.hot.contains_key(key) {
            let value = self.read_back(key)?;
            self.insert_hot(key.clone(), value);
        }
        let slot = self.hot.get_mut(key)?;
        slot.used = self.generation;
        Some(&mut slot.value)
    }

    /// The entry of `key`, made with its default where there is none.
    pub(crate) fn entry(&mut self, key: K) -> &mut V {
        if !self.hot.contains_key(&key) {
            let value = self.read_back(&key).unwrap_or_default();
            self.insert_hot(key.clone(), value);
        }
        let generation = self.generation;
        let slot = self.hot.get_mut(&key).expect("an entry just made");
        slot.used = generation;
        &mut slot.value
    }

    fn insert_hot(&mut self, key: K, value: V) {
        if self.hot.len() >= self.next_spill {
            self.spill();
        }
        let used = self.generation;
        self.hot.insert(key, Slot { value, used });
    }

    /// The newest copy of `key` on disk, if any.
    fn read_back(&mut self, key: &K) -> Option<V> {
        if self.runs.is_empty() {
            return None;
        }
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        key.write(&mut bytes);
        let hash = hash_of(&bytes);
        let found = self.find(&bytes, hash);
        self.scratch = bytes;
        found
    }

    fn find(&mut self, bytes: &[u8], hash: u64) -> Option<V> {
        for k in (0..self.runs.len()).rev() {
            match self.runs[k].find(bytes, hash) {
                Ok(Some(found)) => return V::read(&mut found.as_slice()),
                Ok(None) => {}
                Err(e) => {
                    self.note(format!(
                        "could not read back a temporary file of what they keep per handle \
                         (the opens of the handles in it were checked without it): {e}"
                    ));
                    return None;
                }
            }
        }
        None
    }

    /// Writes the entries not used since the last spill to a run.
    fn spill(&mut self) {
        let generation = self.generation;
        self.generation += 1;
        let cold: Vec<K> = self
            .hot
            .iter()
            .filter(|(_, slot)| slot.used < generation && slot.value.spillable())
            .map(|(k, _)| k.clone())
            .collect();
        self.next_spill = (self.hot.len() - cold.len()).saturating_add(self.bound);
        if cold.is_empty() {
            return;
        }
        // Every record in one buffer: (start, end of its key, end).
        let mut bytes = Vec::new();
        let mut records: Vec<(usize, usize, usize)> = Vec::with_capacity(cold.len());
        for k in &cold {
            let Some(slot) = self.hot.get(k) else {
                continue;
            };
            let start = bytes.len();
            k.write(&mut bytes);
            let key_end = bytes.len();
            slot.value.write(&mut bytes);
            records.push((start, key_end, bytes.len()));
        }
        records.sort_unstable_by(|a, b| bytes[a.0..a.1].cmp(&bytes[b.0..b.1]));
        let sorted = records.iter().map(|r| (&bytes[r.0..r.1], &bytes[r.1..r.2]));
        match ColdRun::write(records.len(), sorted) {
            Ok(run) => {
                cold.iter().for_each(|k| {
                    self.hot.remove(k);
                });
                self.runs.push(run);
                self.compact();
            }
            Err(e) => self.note(format!(
                "could not write a temporary file (TMPDIR), so what they keep of every handle \
                 stays in memory: {e}"
            )),
        }
    }

    /// Merges the newest half of the runs into one when there are [`MAX_RUNS`] (a key in
    /// several keeps its newest copy; one in memory keeps none).
    fn compact(&mut self) {
        if self.runs.len() < MAX_RUNS {
            return;
        }
        let newest = self.runs.split_off(MAX_RUNS / 2);
        let hot = &self.hot;
        let merged = (|| -> std::io::Result<ColdRun> {
            // A k-way merge, a buffer per run: what it holds is not what the runs hold.
            let mut readers: Vec<RunReader> = newest.iter().map(RunReader::new).collect();
            let mut heads = std::collections::BinaryHeap::new();
            for (k, reader) in readers.iter_mut().enumerate() {
                if let Some(record) = reader.next()? {
                    heads.push(std::cmp::Reverse((record.0.clone(), k, record.1)));
                }
            }
            let n = newest.iter().map(|r| r.count).sum();
            let mut failed = Ok(());
            let merged = std::iter::from_fn(|| loop {
                let std::cmp::Reverse((key, k, value)) = heads.pop()?;
                // The newest copy of a key: the run written last.
                let (mut newest_k, mut value) = (k, value);
                let mut refill = vec![k];
                while heads
                    .peek()
                    .is_some_and(|std::cmp::Reverse((other, _, _))| *other == key)
                {
                    let std::cmp::Reverse((_, j, v)) = heads.pop()?;
                    refill.push(j);
                    if j > newest_k {
                        (newest_k, value) = (j, v);
                    }
                }
                for j in refill {
                    match readers[j].next() {
                        Ok(Some((key, value))) => heads.push(std::cmp::Reverse((key, j, value))),
                        Ok(None) => {}
                        Err(e) => {
                            failed = Err(e);
                            return None;
                        }
                    }
                }
                // One in memory keeps none: its copy there is the newest.
                if K::read(&mut key.as_slice()).is_none_or(|k| !hot.contains_key(&k)) {
                    return Some((key, value));
                }
            });
            let run = ColdRun::write(n, merged)?;
            failed.map(|()| run)
        })();
        match merged {
            Ok(run) => self.runs.push(run),
            Err(e) => {
                self.note(format!(
                    "could not merge temporary files of what they keep per handle, so it stays \
                     in memory from then on: {e}"
                ));
                self.runs.extend(newest);
            }
        }
    }

    /// Keeps every entry in memory from now on, and says why (the first error only).
    fn note(&mut self, why: String) {
        self.bound = usize::MAX;
        self.next_spill = usize::MAX;
        self.error.get_or_insert(why);
    }

    /// Entries in memory, and runs on disk.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.hot.len(), self.runs.len())
    }
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    bytes.hash(&mut h);
    h.finish()
}

/// The bits a key's hash sets in a filter of `bits` bits (double hashing).
fn probes(hash: u64, bits: u64) -> impl Iterator<Item = u64> {
    let (a, b) = (hash, hash.rotate_left(32) | 1);
    (0..PROBES).map(move |i| a.wrapping_add(i.wrapping_mul(b)) % bits)
}

impl ColdRun {
    /// A run of `records` (key bytes, value bytes), sorted by key, at most `n` of them.
    fn write<A: AsRef<[u8]>, B: AsRef<[u8]>>(
        n: usize,
        records: impl Iterator<Item = (A, B)>,
    ) -> std::io::Result<Self> {
        let bits = (n * BLOOM_BITS).max(64) as u64;
        let mut bloom = vec![0u64; bits.div_ceil(64) as usize];
        let mut index = Vec::with_capacity(n / BLOCK + 1);
        let mut out = std::io::BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
        let (mut at, mut count) = (0u64, 0);
        for (i, (key, value)) in records.enumerate() {
            let (key, value) = (key.as_ref(), value.as_ref());
            count += 1;
            for bit in probes(hash_of(key), bits) {
                bloom[(bit / 64) as usize] |= 1 << (bit % 64);
            }
            if i % BLOCK == 0 {
                index.push((Box::from(key), at));
            }
            let head = [
                (key.len() as u32).to_le_bytes(),
                (value.len() as u32).to_le_bytes(),
            ];
            out.write_all(head.as_flattened())?;
            out.write_all(key)?;
            out.write_all(value)?;
            at += 8 + (key.len() + value.len()) as u64;
        }
        let file = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        Ok(ColdRun {
            file,
            len: at,
            count,
            index,
            bloom,
            bits,
        })
    }

    /// The value bytes of `key` (its bytes, `hash` theirs), if this run holds it.
    fn find(&self, key: &[u8], hash: u64) -> std::io::Result<Option<Vec<u8>>> {
        if !probes(hash, self.bits)
            .all(|bit| self.bloom[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
        {
            return Ok(None);
        }
        // The block whose first key is the last at or before `key`.
        let block = self.index.partition_point(|(first, _)| &**first <= key);
        let Some(start) = block.checked_sub(1) else {
            return Ok(None);
        };
        let from = self.index[start].1;
        let to = self.index.get(block).map_or(self.len, |(_, at)| *at);
        let mut buf = vec![0; (to - from) as usize];
        self.file.read_exact_at(&mut buf, from)?;
        let mut rest = buf.as_slice();
        while let Some((k, v)) = next_record(&mut rest) {
            if k == key {
                return Ok(Some(v.to_vec()));
            }
        }
        Ok(None)
    }
}

/// A run's records read in order, through a buffer of its own.
struct RunReader<'a> {
    run: &'a ColdRun,
    offset: u64,
    buf: Vec<u8>,
    at: usize,
}

impl<'a> RunReader<'a> {
    fn new(run: &'a ColdRun) -> Self {
        RunReader {
            run,
            offset: 0,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// The next record (key, value), or `None` at the end.
    fn next(&mut self) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(head) = self.take(8)? else {
            return Ok(None);
        };
        let klen = u32::from_le_bytes(head[..4].try_into().unwrap_or_default()) as usize;
        let vlen = u32::from_le_bytes(head[4..].try_into().unwrap_or_default()) as usize;
        let broken = || std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        let key = self.take(klen)?.ok_or_else(broken)?;
        let value = self.take(vlen)?.ok_or_else(broken)?;
        Ok(Some((key, value)))
    }

    /// The next `n` bytes, or `None` at the end of the run.
    fn take(&mut self, n: usize) -> std::io::Result<Option<Vec<u8>>> {
        if self.buf.len() - self.at < n {
            let left = self.run.len - self.offset;
            if (self.buf.len() - self.at) as u64 + left < n as u64 {
                return Ok(None);
            }
            let want = (n.max(1 << 16) as u64).min(left) as usize;
            let mut more = vec![0; want];
            self.run.file.read_exact_at(&mut more, self.offset)?;
            self.offset += want as u64;
            self.buf.drain(..self.at);
            self.buf.extend_from_slice(&more);
            self.at = 0;
        }
        let taken = self.buf[self.at..self.at + n].to_vec();
        self.at += n;
        Ok(Some(taken))
    }
}

/// The record at the front of `bytes` (key, value), advancing it.
fn next_record<'a>(bytes: &mut &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
    let klen = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let vlen = u32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?) as usize;
    let key = bytes.get(8..8 + klen)?;
    let value = bytes.get(8 + klen..8 + klen + vlen)?;
    *bytes = &bytes[8 + klen + vlen..];
    Some((key, value))
}

/// Writing and reading the parts of keys and values.
pub(crate) mod parts {
    pub(crate) fn u64(out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn read_u64(bytes: &mut &[u8]) -> Option<u64> {
        let v = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
        *bytes = &bytes[8..];
        Some(v)
    }

    pub(crate) fn str(out: &mut Vec<u8>, s: &str) {
        u64(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn read_str(bytes: &mut &[u8]) -> Option<String> {
        let n = read_u64(bytes)? as usize;
        let s = std::str::from_utf8(bytes.get(..n)?).ok()?.to_string();
        *bytes = &bytes[n..];
        Some(s)
    }
}

impl Spill for u64 {
    fn write(&self, out: &mut Vec<u8>) {
        parts::u64(out, *self);
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        parts::read_u64(bytes)
    }
}

impl<T: Spill> Spill for Vec<T> {
    fn write(&self, out: &mut Vec<u8>) {
        parts::u64(out, self.len() as u64);
        self.iter().for_each(|t| t.write(out));
    }

    fn read(bytes: &mut &[u8]) -> Option<Self> {
        let n = parts::read_u64(bytes)? as usize;
        (0..n).map(|_| T::read(bytes)).collect()
    }

    fn spillable(&self) -> bool {
        self.iter().all(Spill::spillable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that are not always spillable: odd ones stay in memory.
    #[derive(Default, Clone, Debug, PartialEq)]
    struct Val(u64);

    impl Spill for Val {
        fn write(&self, out: &mut Vec<u8>) {
            parts::u64(out, self.0);
        }
        fn read(bytes: &mut &[u8]) -> Option<Self> {
            parts::read_u64(bytes).map(Val)
        }
        fn spillable(&self) -> bool {
            self.0 % 2 == 0
        }
    }

    /// A `ColdMap` of any bound answers as a hash map does, through spills, reads back and
    /// merges of its runs; and with a small bound, what it holds in memory stays small.
    #[test]
    fn a_cold_map_is_a_map_whatever_it_keeps_in_memory() {
        for bound in [1, 2, 7, 64, usize::MAX] {
            let mut cold: ColdMap<u64, Val> = ColdMap::new(bound);
            let mut model: std::collections::HashMap<u64, Val> = Default::default();
            // A deterministic walk: many keys seen once, a few used again and again.
            let mut x = 0x2545_f491_4f6c_dd1d_u64;
            for step in 0..20_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = if x % 4 == 0 { x % 8 } else { x % 5_000 };
                match x % 3 {
                    0 => {
                        let v = cold.entry(key);
                        v.0 += step;
                        *model.entry(key).or_default() = v.clone();
                    }
                    1 => assert_eq!(cold.get_mut(&key).cloned(), model.get(&key).cloned()),
                    _ => {
                        if let Some(v) = cold.get_mut(&key) {
                            v.0 += 2;
                            model.get_mut(&key).unwrap().0 += 2;
                        }
                    }
                }
            }
            for (k, v) in &model {
                assert_eq!(
                    cold.get_mut(k),
                    Some(&mut v.clone()),
                    "bound {bound}, key {k}"
                );
            }
            assert!(cold.error.is_none(), "{:?}", cold.error);
            let (hot, runs) = cold.held();
            if bound == 64 {
                assert!(hot < 3_000 && runs > 0, "{hot} in memory, {runs} runs");
                assert!(runs < MAX_RUNS, "{runs} runs");
            }
            if bound == usize::MAX {
                assert_eq!(runs, 0);
            }
        }
    }
}
