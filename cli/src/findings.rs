//! The findings of a report, gathered while the records stream by: filters and suppressions
//! apply as each finding arrives, and only what the output shows is kept. The text report keeps
//! per rule its count, its functions and the first `--limit` occurrences (a bounded heap by
//! process, time and `seq`); JSON and SARIF, which list every finding, spool them to an unnamed
//! temporary file in sorted runs and read them back merged, by process, time and `seq`. Memory
//! does not grow with the number of findings (except `--limit 0`, which asks for every one in
//! text).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::io::{BufWriter, Write};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::args::{Filter, Severity};
use crate::occurrence::Occurrence;
use crate::review::{self, Suppression};
use crate::symbolize::Symbols;

/// What a report gathers: which findings (filters, suppressions) and how many of each rule it
/// keeps to show.
#[derive(Clone, Debug, Default)]
pub struct Gather {
    pub filter: Filter,
    pub suppressions: Vec<Suppression>,
    /// Occurrences of each rule kept for the text report (0: all).
    pub limit: usize,
    /// Every finding is kept, in order (JSON, SARIF).
    pub keep_all: bool,
    /// Threads that read traces at once (`--jobs`; 0: one per CPU this process may run on).
    pub jobs: usize,
    /// Calls the timeline keeps in memory per reading thread (`--memory-calls`; 0: all).
    pub memory_calls: usize,
}

impl Gather {
    /// Counting only (what `sharecheck run`'s summary says): one occurrence a rule is kept.
    pub fn counting() -> Gather {
        Gather {
            limit: 1,
            memory_calls: sharecheck_core::crossproc::SPILL_AT,
            ..Gather::default()
        }
    }
}

/// An occurrence in a rule's heap: the greatest (last to show) on top.
struct Ranked {
    key: (Option<i64>, Option<u64>, Option<u64>),
    arrival: u64,
    occurrence: Occurrence,
}

impl Ranked {
    fn order(&self) -> impl Ord + '_ {
        (self.key, self.arrival)
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

/// One rule's findings: counted, with the first few kept.
pub struct Group {
    pub count: usize,
    pub worst: Option<Severity>,
    /// The first occurrence's finding members (severity, kind, doc, fix).
    pub first: Map<String, Value>,
    /// How many findings each function (or event) had.
    pub fns: BTreeMap<String, usize>,
    shown: BinaryHeap<Ranked>,
}

impl Group {
    /// The occurrences kept to show, by process, time and `seq` (then arrival).
    pub fn shown(&self) -> Vec<&Occurrence> {
        let mut kept: Vec<&Ranked> = self.shown.iter().collect();
        kept.sort();
        kept.into_iter().map(|r| &r.occurrence).collect()
    }
    pub fn first_field(&self, key: &str) -> Option<&str> {
        self.first.get(key).and_then(Value::as_str)
    }
}

/// Every finding of a report, as gathered.
pub struct Findings {
    gather: Gather,
    pub groups: BTreeMap<String, Group>,
    total: usize,
    /// Findings by severity: info, warning, error.
    severities: [usize; 3],
    /// Findings a suppression took out (counted, not shown).
    pub suppressed: usize,
    /// Findings by baseline key ([`review::key`]), counted.
    pub keys: BTreeMap<String, usize>,
    /// One suppression line per distinct finding ([`review::suppression_line`]).
    pub suppression_lines: BTreeSet<String>,
    spool: Option<Spool>,
    /// The spool could not be written: JSON and SARIF say so.
    pub spool_error: Option<String>,
    /// `call.failed` on calls a report-phase rule may explain: decided at [`Findings::finish`].
    pending: Vec<Occurrence>,
    arrivals: u64,
    /// Every rule ID the traces hold a finding of, before the filters (kept only while a
    /// `--rule` filter names rules: an ID neither the catalogue nor the traces know is a typo).
    pub seen_rules: BTreeSet<String>,
}

impl Default for Findings {
    fn default() -> Self {
        Findings::new(Gather::default())
    }
}

impl Findings {
    pub fn new(gather: Gather) -> Findings {
        Findings {
            gather,
            groups: BTreeMap::new(),
            total: 0,
            severities: [0; 3],
            suppressed: 0,
            keys: BTreeMap::new(),
            suppression_lines: BTreeSet::new(),
            spool: None,
            spool_error: None,
            pending: Vec::new(),
            arrivals: 0,
            seen_rules: BTreeSet::new(),
        }
    }

    /// What is gathered, and how.
    pub fn gather(&self) -> &Gather {
        &self.gather
    }

    /// Takes one finding in (`symbols`: the names of its frames' functions, for suppressions and
    /// baselines).
    pub fn add(&mut self, o: Occurrence, symbols: &Symbols) {
        let generic = o.rule() == sharecheck_core::rules::general::CALL_FAILED.id;
        let readable = o.func.as_deref().is_some_and(|f| {
            sharecheck_core::rules::REPORT_READS
                .iter()
                .any(|p| f.starts_with(p))
        });
        if generic && readable {
            self.pending.push(o);
        } else {
            self.accept(o, symbols);
        }
    }

    /// After the report-phase checks: the generic explanations of calls they explained
    /// (`(pid, seq)`) are dropped, the rest taken in.
    pub fn finish(&mut self, explained: &BTreeSet<(i64, u64)>, symbols: &Symbols) {
        for o in std::mem::take(&mut self.pending) {
            let key = o.pid.as_i64().zip(o.seq.as_u64());
            if !key.is_some_and(|k| explained.contains(&k)) {
                self.accept(o, symbols);
            }
        }
        if let Some(spool) = &mut self.spool {
            if let Err(e) = spool.end_run() {
                self.spool_error
                    .get_or_insert(format!("cannot write a temporary file: {e}"));
            }
        }
    }

    /// Takes in `other`, the findings of the traces read after this one's (a reader of other
    /// files, on another thread): the same as if this one had read them itself, in order.
    pub fn absorb(&mut self, other: Findings) {
        let counted_from = self.arrivals;
        self.arrivals += other.arrivals;
        self.total += other.total;
        for (mine, theirs) in self.severities.iter_mut().zip(other.severities) {
            *mine += theirs;
        }
        self.suppressed += other.suppressed;
        for (key, n) in other.keys {
            *self.keys.entry(key).or_default() += n;
        }
        self.suppression_lines.extend(other.suppression_lines);
        self.seen_rules.extend(other.seen_rules);
        self.pending.extend(other.pending);
        if self.spool_error.is_none() {
            self.spool_error = other.spool_error;
        }
        if let Some(theirs) = other.spool {
            let absorbed = match &mut self.spool {
                Some(mine) => mine.absorb(theirs, counted_from),
                None => {
                    // Its run being filled written out first: the arrivals in the file are its
                    // own, counted from `counted_from` by the reader.
                    let mut theirs = theirs;
                    let ended = theirs.end_run();
                    for run in &mut theirs.runs {
                        run.2 += counted_from;
                    }
                    self.spool = Some(theirs);
                    ended
                }
            };
            if let Err(e) = absorbed {
                self.spool_error
                    .get_or_insert(format!("cannot write a temporary file: {e}"));
            }
        }
        let limit = self.gather.limit;
        for (rule, theirs) in other.groups {
            let shifted = theirs.shown.into_iter().map(|mut r| {
                r.arrival += counted_from;
                r
            });
            match self.groups.get_mut(&rule) {
                None => {
                    let group = Group {
                        shown: shifted.collect(),
                        ..theirs
                    };
                    self.groups.insert(rule, group);
                }
                Some(mine) => {
                    mine.count += theirs.count;
                    mine.worst = mine.worst.max(theirs.worst);
                    for (name, n) in theirs.fns {
                        *mine.fns.entry(name).or_default() += n;
                    }
                    for ranked in shifted {
                        mine.shown.push(ranked);
                        if limit != 0 && mine.shown.len() > limit {
                            mine.shown.pop();
                        }
                    }
                }
            }
        }
    }

    fn accept(&mut self, o: Occurrence, symbols: &Symbols) {
        if !self.gather.filter.rules.is_empty() && !self.seen_rules.contains(o.rule()) {
            self.seen_rules.insert(o.rule().to_string());
        }
        if !o.matches(&self.gather.filter) {
            return;
        }
        if self
            .gather
            .suppressions
            .iter()
            .any(|s| s.matches(&o, symbols))
        {
            self.suppressed += 1;
            return;
        }
        self.total += 1;
        let severity = o.severity();
        if let Some(s) = severity {
            self.severities[s as usize] += 1;
        }
        let key = review::key(&o, symbols);
        match self.keys.get_mut(&key) {
            Some(n) => *n += 1,
            None => {
                self.keys.insert(key, 1);
            }
        }
        let line = review::suppression_line(&o, symbols);
        if !self.suppression_lines.contains(&line) {
            self.suppression_lines.insert(line);
        }
        let arrival = self.arrivals;
        self.arrivals += 1;
        if self.gather.keep_all {
            self.spool(&o, arrival);
        }
        let limit = self.gather.limit;
        if !self.groups.contains_key(o.rule()) {
            let group = Group {
                count: 0,
                worst: None,
                first: o.finding.clone(),
                fns: BTreeMap::new(),
                shown: BinaryHeap::new(),
            };
            self.groups.insert(o.rule().to_string(), group);
        }
        let group = self.groups.get_mut(o.rule()).expect("inserted above");
        group.count += 1;
        group.worst = group.worst.max(severity);
        let name = o.where_name();
        match group.fns.get_mut(&name) {
            Some(n) => *n += 1,
            None => {
                group.fns.insert(name, 1);
            }
        }
        let ranked = Ranked {
            key: o.sort_key(),
            arrival,
            occurrence: o,
        };
        if limit == 0 || group.shown.len() < limit {
            group.shown.push(ranked);
        } else if group.shown.peek().is_some_and(|top| ranked < *top) {
            group.shown.pop();
            group.shown.push(ranked);
        }
    }

    fn spool(&mut self, o: &Occurrence, arrival: u64) {
        if self.spool_error.is_some() {
            return;
        }
        if self.spool.is_none() {
            match tempfile::tempfile() {
                Ok(file) => self.spool = Some(Spool::new(file)),
                Err(e) => {
                    self.spool_error = Some(format!("cannot make a temporary file: {e}"));
                    return;
                }
            }
        }
        let spool = self.spool.as_mut().expect("made above");
        if let Err(e) = spool.push(o, arrival) {
            self.spool_error = Some(format!("cannot write a temporary file: {e}"));
        }
    }

    /// Every finding kept, by process, time and `seq` (then the order it was taken in); needs
    /// [`Gather::keep_all`] and [`Findings::finish`]. Each call reads them again.
    pub fn all(&self) -> impl Iterator<Item = Occurrence> + '_ {
        self.spool.iter().flat_map(Spool::merged)
    }

    pub fn len(&self) -> usize {
        self.total
    }
    pub fn count(&self, severity: Severity) -> usize {
        self.severities[severity as usize]
    }
    /// The worst severity among the findings.
    pub fn worst(&self) -> Option<Severity> {
        [Severity::Error, Severity::Warning, Severity::Info]
            .into_iter()
            .find(|&s| self.count(s) > 0)
    }
    /// The groups in report order: worst severity first, then the most frequent, then by rule.
    pub fn groups_in_order(&self) -> Vec<(&str, &Group)> {
        let mut groups: Vec<(&str, &Group)> =
            self.groups.iter().map(|(k, g)| (k.as_str(), g)).collect();
        groups.sort_by(|a, b| {
            b.1.worst
                .cmp(&a.1.worst)
                .then(b.1.count.cmp(&a.1.count))
                .then(a.0.cmp(b.0))
        });
        groups
    }
}

/// Findings kept for JSON and SARIF, in an unnamed temporary file: sorted runs of at most
/// [`RUN`] findings (each a JSON line), merged when read. Memory holds one run being filled and,
/// when reading, one finding per run.
struct Spool {
    file: std::fs::File,
    /// The run being filled: (sort key, arrival, finding as JSON).
    run: Vec<(SortKey, u64, String)>,
    /// Where each written run starts and ends in the file, and what its findings' arrivals are
    /// counted from (a run absorbed from another spool: [`Spool::absorb`]).
    runs: Vec<(u64, u64, u64)>,
    end: u64,
}

type SortKey = (Option<i64>, Option<u64>, Option<u64>);

/// Findings a run holds.
const RUN: usize = 4096;

/// A spooled finding: its place in the merge and the finding.
#[derive(Deserialize)]
struct Spooled {
    n: u64,
    o: Occurrence,
}

impl Spool {
    fn new(file: std::fs::File) -> Spool {
        Spool {
            file,
            run: Vec::new(),
            runs: Vec::new(),
            end: 0,
        }
    }

    fn push(&mut self, o: &Occurrence, arrival: u64) -> std::io::Result<()> {
        #[derive(Serialize)]
        struct Out<'a> {
            n: u64,
            o: &'a Occurrence,
        }
        let line = serde_json::to_string(&Out { n: arrival, o })?;
        self.run.push((o.sort_key(), arrival, line));
        if self.run.len() >= RUN {
            self.end_run()?;
        }
        Ok(())
    }

    /// Sorts the run being filled and writes it out.
    fn end_run(&mut self) -> std::io::Result<()> {
        if self.run.is_empty() {
            return Ok(());
        }
        self.run.sort_by_key(|r| (r.0, r.1));
        let start = self.end;
        let mut out = BufWriter::new(&self.file);
        for (_, _, line) in self.run.drain(..) {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            self.end += line.len() as u64 + 1;
        }
        out.flush()?;
        self.runs.push((start, self.end, 0));
        Ok(())
    }

    /// Appends `other`'s runs to this spool's file, their arrivals counted from `counted_from`
    /// more (the findings this spool took before them); `other`'s file is closed.
    fn absorb(&mut self, mut other: Spool, counted_from: u64) -> std::io::Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        other.end_run()?;
        self.end_run()?;
        let mut from = &other.file;
        from.seek(SeekFrom::Start(0))?;
        let mut to = &self.file;
        to.seek(SeekFrom::Start(self.end))?;
        let copied = std::io::copy(&mut Read::take(from, other.end), &mut to)?;
        if copied != other.end {
            return Err(std::io::Error::other("a spool's runs were cut short"));
        }
        for (start, end, n) in other.runs {
            self.runs
                .push((start + self.end, end + self.end, n + counted_from));
        }
        self.end += other.end;
        Ok(())
    }

    /// Every finding, merged from the runs in order.
    fn merged(&self) -> impl Iterator<Item = Occurrence> + '_ {
        let mut readers: Vec<RunReader> = self
            .runs
            .iter()
            .map(|&(start, end, counted_from)| RunReader {
                file: &self.file,
                at: start,
                end,
                counted_from,
                buf: Vec::new(),
                pos: 0,
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(s) = r.next() {
                heap.push(std::cmp::Reverse(Head(s, i)));
            }
        }
        std::iter::from_fn(move || {
            let std::cmp::Reverse(Head(s, i)) = heap.pop()?;
            if let Some(next) = readers[i].next() {
                heap.push(std::cmp::Reverse(Head(next, i)));
            }
            Some(s.o)
        })
    }
}

/// The next finding of one run, ordered for the merge.
struct Head(Spooled, usize);

impl Head {
    fn order(&self) -> (SortKey, u64) {
        (self.0.o.sort_key(), self.0.n)
    }
}
impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.order() == other.order()
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

/// Reads one run's lines with positioned reads (every run shares the file).
struct RunReader<'a> {
    file: &'a std::fs::File,
    at: u64,
    end: u64,
    counted_from: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl RunReader<'_> {
    fn next(&mut self) -> Option<Spooled> {
        use std::os::unix::fs::FileExt;
        loop {
            if let Some(nl) = self.buf[self.pos..].iter().position(|&b| b == b'\n') {
                let line = &self.buf[self.pos..self.pos + nl];
                self.pos += nl + 1;
                let mut spooled: Spooled = serde_json::from_slice(line).ok()?;
                spooled.n += self.counted_from;
                return Some(spooled);
            }
            if self.at >= self.end {
                return None;
            }
            self.buf.drain(..self.pos);
            self.pos = 0;
            let want = (self.end - self.at).min(16 << 10) as usize;
            let old = self.buf.len();
            self.buf.resize(old + want, 0);
            let n = self.file.read_at(&mut self.buf[old..], self.at).ok()?;
            if n == 0 {
                return None;
            }
            self.buf.truncate(old + n);
            self.at += n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(rule: &str, pid: i64, seq: u64, ts: u64, severity: &str) -> Occurrence {
        let mut finding = Map::new();
        finding.insert("rule".into(), rule.into());
        finding.insert("severity".into(), severity.into());
        Occurrence {
            finding,
            func: Some("cuMemcpyPeer".into()),
            pid: pid.into(),
            tid: pid.into(),
            seq: seq.into(),
            ts_ns: Some(ts),
            event: None,
            args: None,
        }
    }

    #[test]
    fn each_rule_keeps_its_first_occurrences_in_order_and_counts_the_rest() {
        let mut f = Findings::new(Gather {
            limit: 3,
            ..Gather::default()
        });
        // Arriving out of order (two files of one process, say): the first three by time stay.
        for (seq, ts) in [(5, 50), (1, 10), (9, 90), (3, 30), (2, 20), (7, 70)] {
            f.add(occ("r.a", 1, seq, ts, "error"), &Symbols::default());
        }
        f.add(occ("r.b", 2, 1, 5, "info"), &Symbols::default());
        f.finish(&BTreeSet::new(), &Symbols::default());
        let a = &f.groups["r.a"];
        assert_eq!(a.count, 6);
        let shown: Vec<u64> = a.shown().iter().map(|o| o.seq.as_u64().unwrap()).collect();
        assert_eq!(shown, [1, 2, 3]);
        assert_eq!(
            (f.len(), f.count(Severity::Error), f.count(Severity::Info)),
            (7, 6, 1)
        );
        assert_eq!(f.worst(), Some(Severity::Error));
        let order: Vec<&str> = f.groups_in_order().iter().map(|(r, _)| *r).collect();
        assert_eq!(order, ["r.a", "r.b"]);
    }

    #[test]
    fn filters_and_suppressions_apply_as_findings_arrive() {
        let mut f = Findings::new(Gather {
            filter: Filter {
                severity: Some(Severity::Warning),
                ..Filter::default()
            },
            suppressions: review::parse_suppressions("rule:r.x*", "test").unwrap(),
            limit: 10,
            keep_all: true,
            jobs: 1,
            memory_calls: 0,
        });
        f.add(occ("r.x1", 1, 1, 1, "error"), &Symbols::default());
        f.add(occ("r.y", 1, 2, 2, "error"), &Symbols::default());
        f.add(occ("r.y", 1, 3, 3, "info"), &Symbols::default());
        f.finish(&BTreeSet::new(), &Symbols::default());
        assert_eq!((f.len(), f.suppressed), (1, 1));
        let all: Vec<Occurrence> = f.all().collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].rule(), "r.y");
        assert_eq!(all[0].seq, 2);
    }

    #[test]
    fn a_generic_failure_a_report_phase_rule_explains_is_dropped() {
        let mut f = Findings::new(Gather {
            limit: 10,
            ..Gather::default()
        });
        let failed = |seq| {
            let mut o = occ("call.failed", 7, seq, seq, "info");
            o.func = Some("cuIpcOpenMemHandle_v2".into());
            o
        };
        f.add(failed(1), &Symbols::default());
        f.add(failed(2), &Symbols::default());
        f.finish(&BTreeSet::from([(7, 2)]), &Symbols::default());
        let shown: Vec<u64> = f.groups["call.failed"]
            .shown()
            .iter()
            .map(|o| o.seq.as_u64().unwrap())
            .collect();
        assert_eq!(shown, [1]);
    }

    #[test]
    fn every_finding_kept_comes_back_sorted_across_runs() {
        let mut f = Findings::new(Gather {
            limit: 1,
            keep_all: true,
            ..Gather::default()
        });
        // Three runs and a bit, in descending time: read back ascending.
        let n = 3 * RUN as u64 + 17;
        for i in 0..n {
            f.add(occ("r.a", 1, n - i, n - i, "info"), &Symbols::default());
        }
        f.add(occ("r.a", 0, 5, 5, "info"), &Symbols::default());
        f.finish(&BTreeSet::new(), &Symbols::default());
        let seqs: Vec<(i64, u64)> = f
            .all()
            .map(|o| (o.pid.as_i64().unwrap(), o.seq.as_u64().unwrap()))
            .collect();
        assert_eq!(seqs.len() as u64, n + 1);
        assert_eq!(seqs[0], (0, 5));
        assert!(
            seqs[1..].windows(2).all(|w| w[0].1 + 1 == w[1].1),
            "in order"
        );
        // Read twice: the same.
        assert_eq!(f.all().count() as u64, n + 1);
        assert_eq!(f.spool.as_ref().unwrap().runs.len(), 4);
    }

    #[test]
    fn memory_holds_only_what_is_shown() {
        let mut f = Findings::new(Gather {
            limit: 10,
            ..Gather::default()
        });
        for seq in 0..100_000 {
            f.add(occ("r.a", 1, seq, seq, "warning"), &Symbols::default());
        }
        f.finish(&BTreeSet::new(), &Symbols::default());
        assert_eq!(f.groups["r.a"].count, 100_000);
        assert_eq!(f.groups["r.a"].shown.len(), 10);
        assert_eq!(f.keys.len(), 1);
        assert_eq!(f.suppression_lines.len(), 1);
        assert!(f.spool.is_none());
    }
}
