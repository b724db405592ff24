//! The VMM family's report-phase checks: what a process left at its exit (their rules:
//! `crate::rules::vmm::report`). Handles are matched by their value within one process (a
//! generic allocation handle means nothing in another), addresses by range.

use crate::crossproc::{number, AtExit, Call, ReportFinding, Timeline};
use crate::rules::vmm::report::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// The VMM calls these checks read.
const READS: &[&str] = &[
    "cuMemCreate",
    "cuMemRelease",
    "cuMemRetainAllocationHandle",
    "cuMemImportFromShareableHandle",
    "cuMulticastCreate",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemExportToShareableHandle",
    "hipMemCreate",
    "hipMemRelease",
    "hipMemRetainAllocationHandle",
    "hipMemImportFromShareableHandle",
    "hipMemAddressReserve",
    "hipMemAddressFree",
    "hipMemMap",
    "hipMemUnmap",
];

/// One API's VMM calls, as the at-exit checks read them: the calls that take a reference (with
/// the out-argument naming the handle, and how the message says it was taken), the release, the
/// reservation and its free (with the argument naming the address), the map and unmap, and the
/// rules of that API's document.
struct Api {
    taken: &'static [(&'static str, &'static str, &'static str)],
    release: &'static str,
    reserve: &'static str,
    address_free: &'static str,
    /// The argument of `address_free` naming the reservation's start.
    freed: &'static str,
    map: &'static str,
    unmap: &'static str,
    never_released: &'static crate::rules::Rule,
    never_unmapped: &'static crate::rules::Rule,
    never_freed: &'static crate::rules::Rule,
}

const CUDA: Api = Api {
    taken: &[
        ("cuMemCreate", "handle", "created"),
        ("cuMemImportFromShareableHandle", "handle", "imported"),
        ("cuMemRetainAllocationHandle", "handle", "retained"),
        (
            "cuMulticastCreate",
            "mcHandle",
            "created (a multicast object)",
        ),
    ],
    release: "cuMemRelease",
    reserve: "cuMemAddressReserve",
    address_free: "cuMemAddressFree",
    freed: "ptr",
    map: "cuMemMap",
    unmap: "cuMemUnmap",
    never_released: &NEVER_RELEASED_RULE,
    never_unmapped: &NEVER_UNMAPPED_RULE,
    never_freed: &NEVER_FREED_RULE,
};

const HIP: Api = Api {
    taken: &[
        ("hipMemCreate", "handle", "created"),
        ("hipMemImportFromShareableHandle", "handle", "imported"),
        ("hipMemRetainAllocationHandle", "handle", "retained"),
    ],
    release: "hipMemRelease",
    reserve: "hipMemAddressReserve",
    address_free: "hipMemAddressFree",
    freed: "devPtr",
    map: "hipMemMap",
    unmap: "hipMemUnmap",
    never_released: &HIP_NEVER_RELEASED_RULE,
    never_unmapped: &HIP_NEVER_UNMAPPED_RULE,
    never_freed: &HIP_NEVER_FREED_RULE,
};

pass_check!(
    /// FABRIC handles refused to an importer in another IMEX domain than the exporter's.
    FabricOtherDomain,
    FABRIC_OTHER_DOMAIN,
    FABRIC_OTHER_DOMAIN_RULE,
    READS,
    AcrossDomains::new(
        ("cuMemImportFromShareableHandle", "osHandle"),
        ("cuMemExportToShareableHandle", "shareableHandle"),
        &FABRIC_OTHER_DOMAIN_RULE,
    )
);

/// The failed FABRIC imports (`import`: the function and its handle argument) whose handle a
/// process of another IMEX domain exported (`export`), each matched by the handle's keyed
/// fingerprint (`"*name":"fp:..."`, in either direction of time: the hosts' clocks are not one),
/// as a pass: the failed imports of processes whose record names their domain, and each
/// handle's first export, matched at the end. Only where both process records name their domain.
pub(crate) struct AcrossDomains {
    import: (&'static str, &'static str),
    export: (&'static str, &'static str),
    rule: &'static crate::rules::Rule,
    failed: Vec<(String, Call)>,
    first_export: HashMap<String, Call>,
}

impl AcrossDomains {
    pub(crate) fn new(
        import: (&'static str, &'static str),
        export: (&'static str, &'static str),
        rule: &'static crate::rules::Rule,
    ) -> Self {
        AcrossDomains {
            import,
            export,
            rule,
            failed: Vec::new(),
            first_export: HashMap::new(),
        }
    }
}

impl crate::crossproc::Pass for AcrossDomains {
    fn call(&mut self, t: &Timeline, c: &Call) {
        if c.func == self.export.0 && c.succeeded() && c.out(self.export.1).is_some() {
            for fp in c.fingerprints() {
                self.first_export
                    .entry(fp.to_string())
                    .or_insert_with(|| c.clone());
            }
        }
        if c.func == self.import.0 && !c.succeeded() && t.imex_domain(c.proc).is_some() {
            if let Some(fp) = c.out(self.import.1).and_then(Value::as_str) {
                self.failed.push((fp.to_string(), c.clone()));
            }
        }
    }

    fn end(self: Box<Self>, t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        let mut found = Vec::new();
        for (fp, c) in &self.failed {
            let Some(here) = t.imex_domain(c.proc) else {
                continue;
            };
            let Some(e) = self.first_export.get(fp) else {
                continue;
            };
            let Some(there) = t.imex_domain(e.proc).filter(|&d| d != here) else {
                continue;
            };
            let on = e
                .place
                .machine
                .as_deref()
                .filter(|m| c.place.machine.as_deref() != Some(*m))
                .map(|m| format!(" on machine {m}"))
                .unwrap_or_default();
            let ret = c.ret.map_or_else(|| "?".to_string(), |r| r.to_string());
            found.push((
                (String::new(), c.pos, 0),
                ReportFinding::at(
                    self.rule,
                    c,
                    format!(
                        "the FABRIC handle {fp} was exported by process {}{on} ({} call #{}) in \
                         IMEX domain {there}; this process is in IMEX domain {here}, whose IMEX \
                         channels do not reach the exporter's, and the import answered {ret}",
                        e.pid, e.func, e.seq
                    ),
                ),
            ));
        }
        found
    }
}

at_exit_check!(
    /// References to allocation handles never released before `exit`.
    NeverReleased,
    NEVER_RELEASED,
    NEVER_RELEASED_RULE,
    || References::new(&CUDA)
);

at_exit_check!(
    /// HIP's: references to allocation handles never released before `exit`.
    HipNeverReleased,
    HIP_NEVER_RELEASED,
    HIP_NEVER_RELEASED_RULE,
    || References::new(&HIP)
);

/// A process's references to allocation handles still held: per handle, the calls that took
/// one (a release gives back the latest), with how each took it.
pub struct References {
    api: &'static Api,
    held: HashMap<u64, Vec<(Call, &'static str)>>,
}

impl References {
    fn new(api: &'static Api) -> Self {
        References {
            api,
            held: HashMap::new(),
        }
    }
}

impl AtExit for References {
    fn call(&mut self, c: &Call) {
        let api = self.api;
        if let Some(&(_, out, how)) = api.taken.iter().find(|(f, _, _)| c.func == *f) {
            if let Some(h) = c.out(out).and_then(number) {
                self.held.entry(h).or_default().push((c.clone(), how));
            }
        } else if c.func == api.release {
            if let Some(h) = c.arg("handle").and_then(number) {
                if let std::collections::hash_map::Entry::Occupied(mut e) = self.held.entry(h) {
                    e.get_mut().pop();
                    if e.get().is_empty() {
                        e.remove();
                    }
                }
            }
        }
    }

    fn exit(self, _t: &Timeline, _proc: usize, pid: i64, found: &mut Vec<(usize, ReportFinding)>) {
        let api = self.api;
        let mut left: Vec<(u64, Call, &str)> = self
            .held
            .into_iter()
            .flat_map(|(h, calls)| calls.into_iter().map(move |(c, how)| (h, c, how)))
            .collect();
        left.sort_by_key(|(_, c, _)| (c.ts_ns, c.seq));
        for (k, (h, c, how)) in left.into_iter().enumerate() {
            found.push((
                k,
                ReportFinding::at(
                    api.never_released,
                    &c,
                    format!(
                        "the reference to handle {h:#x} {how} here was never released \
                         ({}) before process {pid} exited",
                        api.release
                    ),
                ),
            ));
        }
    }
}

/// `(start, size)` of a call's range: `ptr` (or the out-parameter `*ptr`) and `size`.
fn range(c: &Call, ptr: Option<&Value>) -> Option<(u64, u64)> {
    Some((number(ptr?)?, number(c.arg("size")?)?))
}

at_exit_check!(
    /// Mappings never unmapped before `exit`.
    NeverUnmapped,
    NEVER_UNMAPPED,
    NEVER_UNMAPPED_RULE,
    || Mappings::new(&CUDA)
);

at_exit_check!(
    /// HIP's: mappings never unmapped before `exit`.
    HipNeverUnmapped,
    HIP_NEVER_UNMAPPED,
    HIP_NEVER_UNMAPPED_RULE,
    || Mappings::new(&HIP)
);

/// A process's mappings still mapped, by start, and per handle its first map whose record kept
/// a stack: the shim keeps a handle's first map's stack only (a stack per map would cost every
/// traced map a walk), so a mapping made by a later map is shown where its handle was first
/// mapped.
pub struct Mappings {
    api: &'static Api,
    maps: BTreeMap<u64, (u64, Call)>,
    first_mapped: HashMap<u64, Call>,
}

impl Mappings {
    fn new(api: &'static Api) -> Self {
        Mappings {
            api,
            maps: BTreeMap::new(),
            first_mapped: HashMap::new(),
        }
    }
}

impl AtExit for Mappings {
    fn call(&mut self, c: &Call) {
        let api = self.api;
        let ptr = if c.func == api.address_free {
            c.arg(api.freed)
        } else {
            c.arg("ptr")
        };
        let Some((start, size)) = range(c, ptr) else {
            return;
        };
        let end = start.saturating_add(size);
        if c.func == api.map {
            if let (Some(_), Some(h)) = (&c.stack, c.arg("handle").and_then(number)) {
                self.first_mapped.entry(h).or_insert_with(|| c.clone());
            }
            self.maps.insert(start, (size, c.clone()));
        } else if c.func == api.unmap || c.func == api.address_free {
            // Whole mappings inside the range go (as the driver unmaps them).
            let gone: Vec<u64> = self
                .maps
                .range(start..end)
                .filter(|(&s, (len, _))| s.saturating_add(*len) <= end)
                .map(|(&s, _)| s)
                .collect();
            for s in gone {
                self.maps.remove(&s);
            }
        }
    }

    fn exit(self, _t: &Timeline, _proc: usize, pid: i64, found: &mut Vec<(usize, ReportFinding)>) {
        let api = self.api;
        for (k, (start, (size, c))) in self.maps.into_iter().enumerate() {
            let mut finding = ReportFinding::at(
                api.never_unmapped,
                &c,
                format!(
                    "the mapping [{start:#x}, {:#x}) made here was never unmapped ({}) \
                     before process {pid} exited",
                    start.saturating_add(size),
                    api.unmap
                ),
            );
            let first = c
                .arg("handle")
                .and_then(number)
                .and_then(|h| self.first_mapped.get(&h));
            if let (None, Some(first)) = (&finding.stack, first) {
                finding.stack = first.stack.as_deref().cloned();
                finding.message.push_str(&format!(
                    " (the stack shown is where its handle was first mapped, {} call #{})",
                    first.func, first.seq
                ));
            }
            found.push((k, finding));
        }
    }
}

at_exit_check!(
    /// Reservations never freed before `exit`.
    NeverFreed,
    NEVER_FREED,
    NEVER_FREED_RULE,
    || Reservations::new(&CUDA)
);

at_exit_check!(
    /// HIP's: reservations never freed before `exit`.
    HipNeverFreed,
    HIP_NEVER_FREED,
    HIP_NEVER_FREED_RULE,
    || Reservations::new(&HIP)
);

/// A process's reservations not freed, by start.
pub struct Reservations {
    api: &'static Api,
    reserved: BTreeMap<u64, (u64, Call)>,
}

impl Reservations {
    fn new(api: &'static Api) -> Self {
        Reservations {
            api,
            reserved: BTreeMap::new(),
        }
    }
}

impl AtExit for Reservations {
    fn call(&mut self, c: &Call) {
        let api = self.api;
        if c.func == api.reserve {
            if let Some((start, size)) = range(c, c.out("ptr")) {
                self.reserved.insert(start, (size, c.clone()));
            }
        } else if c.func == api.address_free {
            if let Some(start) = c.arg(api.freed).and_then(number) {
                self.reserved.remove(&start);
            }
        }
    }

    fn exit(self, _t: &Timeline, _proc: usize, pid: i64, found: &mut Vec<(usize, ReportFinding)>) {
        let api = self.api;
        for (k, (start, (size, c))) in self.reserved.into_iter().enumerate() {
            found.push((
                k,
                ReportFinding::at(
                    api.never_freed,
                    &c,
                    format!(
                        "the reservation [{start:#x}, {:#x}) made here was never freed \
                         ({}) before process {pid} exited",
                        start.saturating_add(size),
                        api.address_free
                    ),
                ),
            ));
        }
    }
}

at_exit_check!(
    /// POSIX fds exported and still open when the exporter exited: each descriptor a process's
    /// `exit` record says it exported and still held open, found on the process's last export
    /// that gave that number before its exit (a number given again was closed first). A number
    /// no export of the trace gave is not judged.
    FdNeverClosed,
    FD_NEVER_CLOSED,
    FD_NEVER_CLOSED_RULE,
    ExportedFds::default
);

/// A process's POSIX fd exports: each number's latest.
#[derive(Default)]
pub struct ExportedFds(HashMap<i64, Call>);

impl AtExit for ExportedFds {
    fn call(&mut self, c: &Call) {
        if c.func == "cuMemExportToShareableHandle" {
            if let Some(fd) = c.out("shareableHandle").and_then(Value::as_i64) {
                self.0.insert(fd, c.clone());
            }
        }
    }

    fn exit(self, t: &Timeline, proc: usize, _pid: i64, found: &mut Vec<(usize, ReportFinding)>) {
        for (k, &fd) in t.exported_fds_open(proc).iter().enumerate() {
            let Some(c) = self.0.get(&fd) else {
                continue;
            };
            let handle = c.arg("handle").and_then(number).unwrap_or_default();
            found.push((
                k,
                ReportFinding::at(
                    &FD_NEVER_CLOSED_RULE,
                    c,
                    format!(
                        "the POSIX fd {fd} exported here from handle {handle:#x} was still open \
                         when process {} exited (never closed): while a process holds it, the \
                         allocation stays allocated",
                        c.pid
                    ),
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crossproc::test_records::{exit, found, record};
    use serde_json::{json, Map};

    fn create(ts: u64, h: &str) -> Map<String, Value> {
        record(
            10,
            ts,
            "cuMemCreate",
            json!({"*handle": h, "size": 2097152}),
            0,
        )
    }
    fn on_handle(ts: u64, func: &str, h: &str) -> Map<String, Value> {
        let key = if func == "cuMemRelease" {
            "handle"
        } else {
            "*handle"
        };
        record(10, ts, func, json!({ key: h }), 0)
    }
    fn ranged(ts: u64, func: &str, ptr: &str, size: u64) -> Map<String, Value> {
        let key = if func == "cuMemAddressReserve" {
            "*ptr"
        } else {
            "ptr"
        };
        record(10, ts, func, json!({ key: ptr, "size": size }), 0)
    }

    #[test]
    fn references_left_at_exit_are_found_on_the_calls_that_took_them() {
        let got = found(
            &NEVER_RELEASED,
            &[
                create(1, "0xa1"),
                on_handle(2, "cuMemRetainAllocationHandle", "0xa1"),
                on_handle(3, "cuMemRelease", "0xa1"),
                create(4, "0xa2"),
                on_handle(5, "cuMemRelease", "0xa2"),
                on_handle(6, "cuMemImportFromShareableHandle", "0xb1"),
                exit(10, 9),
            ],
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            got[0].0, 1,
            "the create's reference is left: the release gave back the retain's"
        );
        assert!(got[0].1.contains("handle 0xa1 created here"), "{got:?}");
        assert!(got[1].1.contains("handle 0xb1 imported here"), "{got:?}");
        // Still running (no exit record): nothing to say yet.
        assert!(found(&NEVER_RELEASED, &[create(1, "0xa1")]).is_empty());
        // A create that failed took nothing.
        let failed = record(10, 1, "cuMemCreate", json!({"size": 5}), 1);
        assert!(found(&NEVER_RELEASED, &[failed, exit(10, 9)]).is_empty());
    }

    #[test]
    fn mappings_and_reservations_left_at_exit_are_found_on_their_map_and_reserve() {
        let records = [
            ranged(1, "cuMemAddressReserve", "0x1000000", 0x800000),
            ranged(2, "cuMemMap", "0x1000000", 0x200000),
            ranged(3, "cuMemMap", "0x1200000", 0x200000),
            ranged(4, "cuMemUnmap", "0x1000000", 0x200000),
            ranged(5, "cuMemAddressReserve", "0x9000000", 0x200000),
            ranged(6, "cuMemAddressFree", "0x9000000", 0x200000),
            exit(10, 9),
        ];
        let maps = found(&NEVER_UNMAPPED, &records);
        assert_eq!(maps.len(), 1, "{maps:?}");
        assert_eq!(maps[0].0, 3);
        assert!(maps[0].1.contains("[0x1200000, 0x1400000)"), "{maps:?}");
        let reserves = found(&NEVER_FREED, &records);
        assert_eq!(reserves.len(), 1, "{reserves:?}");
        assert_eq!(reserves[0].0, 1);
        assert!(
            reserves[0].1.contains("[0x1000000, 0x1800000)"),
            "{reserves:?}"
        );
        // An unmap of a range that only covers part of a mapping leaves it (R580 refuses it).
        let part = [
            ranged(1, "cuMemMap", "0x1000000", 0x400000),
            ranged(2, "cuMemUnmap", "0x1000000", 0x200000),
            exit(10, 9),
        ];
        assert_eq!(found(&NEVER_UNMAPPED, &part).len(), 1);
    }

    /// HIP's calls, by HIP's rules: what a HIP process left at exit, and CUDA's rules do not
    /// read them (nor HIP's CUDA's).
    #[test]
    fn what_a_hip_process_left_at_exit_is_found_by_hip_s_rules_only() {
        let hip = |ts: u64, func: &str, args: Value| record(10, ts, func, args, 0);
        let records = [
            hip(
                1,
                "hipMemCreate",
                json!({"*handle": "0xa1", "size": 2097152}),
            ),
            hip(
                2,
                "hipMemRetainAllocationHandle",
                json!({"*handle": "0xa1"}),
            ),
            hip(3, "hipMemRelease", json!({"handle": "0xa1"})),
            hip(
                4,
                "hipMemImportFromShareableHandle",
                json!({"*handle": "0xb1"}),
            ),
            hip(5, "hipMemRelease", json!({"handle": "0xb1"})),
            hip(
                6,
                "hipMemAddressReserve",
                json!({"*ptr": "0x1000000", "size": 0x800000}),
            ),
            hip(
                7,
                "hipMemMap",
                json!({"ptr": "0x1000000", "size": 0x200000}),
            ),
            hip(
                8,
                "hipMemMap",
                json!({"ptr": "0x1200000", "size": 0x200000}),
            ),
            hip(
                9,
                "hipMemUnmap",
                json!({"ptr": "0x1000000", "size": 0x200000}),
            ),
            hip(
                10,
                "hipMemAddressReserve",
                json!({"*ptr": "0x9000000", "size": 0x400000}),
            ),
            hip(
                11,
                "hipMemMap",
                json!({"ptr": "0x9000000", "size": 0x200000}),
            ),
            // Freeing the reservation takes its mappings with it, as for CUDA.
            hip(
                12,
                "hipMemAddressFree",
                json!({"devPtr": "0x9000000", "size": 0x400000}),
            ),
            exit(10, 20),
        ];
        let released = found(&HIP_NEVER_RELEASED, &records);
        assert_eq!(released.len(), 1, "{released:?}");
        assert_eq!(
            released[0].0, 1,
            "the create's reference: the release gave back the retain's"
        );
        assert!(
            released[0]
                .1
                .contains("handle 0xa1 created here was never released (hipMemRelease)"),
            "{released:?}"
        );
        let maps = found(&HIP_NEVER_UNMAPPED, &records);
        assert_eq!(maps.len(), 1, "{maps:?}");
        assert_eq!(maps[0].0, 8);
        assert!(maps[0].1.contains("[0x1200000, 0x1400000)"), "{maps:?}");
        assert!(maps[0].1.contains("(hipMemUnmap)"), "{maps:?}");
        let reserves = found(&HIP_NEVER_FREED, &records);
        assert_eq!(reserves.len(), 1, "{reserves:?}");
        assert_eq!(reserves[0].0, 6);
        assert!(
            reserves[0].1.contains("(hipMemAddressFree)"),
            "{reserves:?}"
        );
        for cuda in [
            &NEVER_RELEASED as &dyn crate::crossproc::ReportCheck,
            &NEVER_UNMAPPED,
            &NEVER_FREED,
        ] {
            assert!(
                found(cuda, &records).is_empty(),
                "CUDA's rule read HIP's calls"
            );
        }
        let cuda_records = [
            record(
                10,
                1,
                "cuMemCreate",
                json!({"*handle": "0xa1", "size": 2097152}),
                0,
            ),
            exit(10, 9),
        ];
        assert!(found(&HIP_NEVER_RELEASED, &cuda_records).is_empty());
        // A process that gave everything back leaves nothing.
        let clean = [
            hip(
                1,
                "hipMemCreate",
                json!({"*handle": "0xa1", "size": 2097152}),
            ),
            hip(
                2,
                "hipMemAddressReserve",
                json!({"*ptr": "0x1000000", "size": 0x200000}),
            ),
            hip(
                3,
                "hipMemMap",
                json!({"ptr": "0x1000000", "size": 0x200000}),
            ),
            hip(
                4,
                "hipMemUnmap",
                json!({"ptr": "0x1000000", "size": 0x200000}),
            ),
            hip(
                5,
                "hipMemAddressFree",
                json!({"devPtr": "0x1000000", "size": 0x200000}),
            ),
            hip(6, "hipMemRelease", json!({"handle": "0xa1"})),
            exit(10, 9),
        ];
        for check in [
            &HIP_NEVER_RELEASED as &dyn crate::crossproc::ReportCheck,
            &HIP_NEVER_UNMAPPED,
            &HIP_NEVER_FREED,
        ] {
            assert!(found(check, &clean).is_empty());
        }
    }

    /// The descriptors an exit record says are still open are found on the last export that
    /// gave each number; a number given again was closed before, one no export gave is not
    /// judged, and a process still running (or with none open) says nothing.
    #[test]
    fn exported_fds_still_open_at_exit_are_found_on_their_last_export() {
        let export = |ts: u64, fd: i64, h: &str, ret: i64| {
            record(
                10,
                ts,
                "cuMemExportToShareableHandle",
                json!({"*shareableHandle": fd, "handle": h,
                    "handleType": "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"}),
                ret,
            )
        };
        let exit_open = |fds: Value| {
            let mut r = exit(10, 20);
            r.insert("exported_fds_open".into(), fds);
            r
        };
        let records = [
            export(1, 7, "0xa1", 0),
            // The number given again: the first export of 7 was closed.
            export(2, 7, "0xa2", 0),
            export(3, 8, "0xa3", 0),
            export(4, 9, "0xa4", 0),
            // A refused export gave no descriptor.
            export(5, 11, "0xa5", 1),
            exit_open(json!([7, 9, 11, 12])),
        ];
        let got = found(&FD_NEVER_CLOSED, &records);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, 2, "the latest export of 7: {got:?}");
        assert!(
            got[0]
                .1
                .contains("POSIX fd 7 exported here from handle 0xa2"),
            "{got:?}"
        );
        assert_eq!(got[1].0, 4, "{got:?}");
        // Every export closed: nothing open in the exit record.
        let closed = [export(1, 7, "0xa1", 0), exit(10, 20)];
        assert!(found(&FD_NEVER_CLOSED, &closed).is_empty());
        // Still running: no exit record.
        assert!(found(&FD_NEVER_CLOSED, &[export(1, 7, "0xa1", 0)]).is_empty());
    }

    /// The report reads each file into a timeline of its own and takes the later ones into the
    /// first: the exit record's descriptors come along (they were lost with every file after the
    /// first, and the finding with them).
    #[test]
    fn an_exported_fd_left_open_is_found_whichever_file_its_process_is_in() {
        let export = record(
            10,
            1,
            "cuMemExportToShareableHandle",
            json!({"*shareableHandle": 7, "handle": "0xa1",
                "handleType": "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"}),
            0,
        );
        let mut exited = exit(10, 20);
        exited.insert("exported_fds_open".into(), json!([7]));
        let mut first = Timeline::for_checks(&[&FD_NEVER_CLOSED]);
        first.add(&record(20, 1, "cuMemCreate", json!({"*handle": "0x1"}), 0));
        let mut second = Timeline::for_checks(&[&FD_NEVER_CLOSED]);
        second.add(&export);
        second.add(&exited);
        first.absorb(second);
        first.finish();
        let got = crate::crossproc::decide(&first, &[&FD_NEVER_CLOSED]);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].pid, got[0].seq), (10, 1));
    }

    /// A FABRIC export on one machine and imports of its handle on others: what the two
    /// processes' IMEX domains make of a failed import.
    fn fabric(domains: [Option<&str>; 3], import_ret: i64) -> Vec<(u64, String)> {
        use crate::crossproc::test_records::{on, process};
        let export = on(
            "node-a",
            record(
                10,
                1,
                "cuMemExportToShareableHandle",
                json!({"*shareableHandle": "fp:00000000000000f1", "handle": "0xa1",
                    "handleType": "CU_MEM_HANDLE_TYPE_FABRIC"}),
                0,
            ),
        );
        let import = |pid: i64, machine: &str, ts: u64, ret: i64| {
            on(
                machine,
                record(
                    pid,
                    ts,
                    "cuMemImportFromShareableHandle",
                    json!({"osHandle": "0x7ffc0010", "*osHandle": "fp:00000000000000f1",
                        "shHandleType": "CU_MEM_HANDLE_TYPE_FABRIC"}),
                    ret,
                ),
            )
        };
        found(
            &FABRIC_OTHER_DOMAIN,
            &[
                process(10, "node-a", domains[0]),
                process(20, "node-b", domains[1]),
                process(30, "node-c", domains[2]),
                export,
                import(20, "node-b", 5, import_ret),
                // Before the export by this host's clock: matched all the same.
                import(30, "node-c", 0, import_ret),
            ],
        )
    }

    #[test]
    fn a_fabric_import_refused_in_another_imex_domain_names_both_domains() {
        let got = fabric([Some("d1"), Some("d2"), Some("d1")], 800);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            got[0].0, 5,
            "the import on node-b, not node-c's of the same domain"
        );
        for part in [
            "fp:00000000000000f1",
            "process 10 on machine node-a",
            "cuMemExportToShareableHandle call #1",
            "IMEX domain d1",
            "this process is in IMEX domain d2",
            "answered 800",
        ] {
            assert!(got[0].1.contains(part), "{part}: {got:?}");
        }
    }

    #[test]
    fn a_fabric_import_in_the_same_domain_or_an_unknown_one_or_that_succeeded_is_silent() {
        // Correct use: every import in the exporter's domain, refused or not for other reasons.
        assert!(fabric([Some("d1"), Some("d1"), Some("d1")], 800).is_empty());
        // A domain not known on either side: nothing to decide.
        assert!(fabric([None, Some("d2"), Some("d2")], 800).is_empty());
        assert!(fabric([Some("d1"), None, None], 800).is_empty());
        // An import that worked was not refused, whatever the records say of domains.
        assert!(fabric([Some("d1"), Some("d2"), Some("d2")], 0).is_empty());
    }
}
