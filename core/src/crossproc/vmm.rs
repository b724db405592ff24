//! The VMM family's report-phase checks: what a process left at its exit (their rules:
//! `crate::rules::vmm::report`). Handles are matched by their value within one process (a
//! generic allocation handle means nothing in another), addresses by range.

use crate::crossproc::{exited_calls, number, Call, ReportFinding, Timeline};
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
];

timeline_check!(
    /// FABRIC handles refused to an importer in another IMEX domain than the exporter's.
    FabricOtherDomain,
    FABRIC_OTHER_DOMAIN,
    FABRIC_OTHER_DOMAIN_RULE,
    fabric_other_domain
);

fn fabric_other_domain(t: &Timeline) -> Vec<ReportFinding> {
    imported_across_domains(
        t,
        ("cuMemImportFromShareableHandle", "osHandle"),
        ("cuMemExportToShareableHandle", "shareableHandle"),
        &FABRIC_OTHER_DOMAIN_RULE,
    )
}

/// The failed FABRIC imports (`import`: the function and its handle argument) whose handle a
/// process of another IMEX domain exported (`export`), each matched by the handle's keyed
/// fingerprint (`"*name":"fp:..."`, in either direction of time: the hosts' clocks are not one).
/// Only where both process records name their domain.
pub(crate) fn imported_across_domains(
    t: &Timeline,
    import: (&str, &str),
    export: (&str, &str),
    rule: &'static crate::rules::Rule,
) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for c in t
        .calls()
        .iter()
        .filter(|c| c.func == import.0 && !c.succeeded())
    {
        let Some(fp) = c.out(import.1).and_then(Value::as_str) else {
            continue;
        };
        let Some(here) = t.imex_domain(c.proc) else {
            continue;
        };
        let Some(e) = t
            .sharing(fp)
            .find(|e| e.func == export.0 && e.succeeded() && e.out(export.1).is_some())
        else {
            continue;
        };
        let Some(there) = t.imex_domain(e.proc).filter(|&d| d != here) else {
            continue;
        };
        let on = e
            .machine
            .as_deref()
            .filter(|m| c.machine.as_deref() != Some(*m))
            .map(|m| format!(" on machine {m}"))
            .unwrap_or_default();
        let ret = c.ret.map_or_else(|| "?".to_string(), |r| r.to_string());
        found.push(ReportFinding::at(
            rule,
            c,
            format!(
                "the FABRIC handle {fp} was exported by process {}{on} ({} call #{}) in IMEX \
                 domain {there}; this process is in IMEX domain {here}, whose IMEX channels do \
                 not reach the exporter's, and the import answered {ret}",
                e.pid, e.func, e.seq
            ),
        ));
    }
    found
}

timeline_check!(
    /// References to allocation handles never released before `exit`.
    NeverReleased,
    NEVER_RELEASED,
    NEVER_RELEASED_RULE,
    never_released
);

fn never_released(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for (pid, calls) in exited_calls(t) {
        // Per handle, the calls that took a reference still held (a release gives back the
        // latest).
        let mut held: HashMap<u64, Vec<&Call>> = HashMap::new();
        for c in calls {
            match c.func.as_str() {
                "cuMemCreate"
                | "cuMemImportFromShareableHandle"
                | "cuMemRetainAllocationHandle"
                | "cuMulticastCreate" => {
                    let out = if c.func == "cuMulticastCreate" {
                        "mcHandle"
                    } else {
                        "handle"
                    };
                    if let Some(h) = c.out(out).and_then(number) {
                        held.entry(h).or_default().push(c);
                    }
                }
                "cuMemRelease" => {
                    if let Some(h) = c.arg("handle").and_then(number) {
                        held.entry(h).or_default().pop();
                    }
                }
                _ => {}
            }
        }
        let mut left: Vec<(u64, &Call)> = held
            .into_iter()
            .flat_map(|(h, calls)| calls.into_iter().map(move |c| (h, c)))
            .collect();
        left.sort_by_key(|(_, c)| (c.ts_ns, c.seq));
        for (h, c) in left {
            let how = match c.func.as_str() {
                "cuMemCreate" => "created",
                "cuMemImportFromShareableHandle" => "imported",
                "cuMulticastCreate" => "created (a multicast object)",
                _ => "retained",
            };
            found.push(ReportFinding::at(
                &NEVER_RELEASED_RULE,
                c,
                format!(
                    "the reference to handle {h:#x} {how} here was never released \
                     (cuMemRelease) before process {pid} exited"
                ),
            ));
        }
    }
    found
}

/// `(start, size)` of a call's range: `ptr` (or the out-parameter `*ptr`) and `size`.
fn range(c: &Call, ptr: Option<&Value>) -> Option<(u64, u64)> {
    Some((number(ptr?)?, number(c.arg("size")?)?))
}

timeline_check!(
    /// Mappings never unmapped before `exit`.
    NeverUnmapped,
    NEVER_UNMAPPED,
    NEVER_UNMAPPED_RULE,
    never_unmapped
);

fn never_unmapped(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for (pid, calls) in exited_calls(t) {
        let mut maps: BTreeMap<u64, (u64, &Call)> = BTreeMap::new();
        for c in calls {
            let Some((start, size)) = range(c, c.arg("ptr")) else {
                continue;
            };
            let end = start.saturating_add(size);
            match c.func.as_str() {
                "cuMemMap" => {
                    maps.insert(start, (size, c));
                }
                // Whole mappings inside the range go (as the driver unmaps them).
                "cuMemUnmap" | "cuMemAddressFree" => {
                    let gone: Vec<u64> = maps
                        .range(start..end)
                        .filter(|(&s, (len, _))| s.saturating_add(*len) <= end)
                        .map(|(&s, _)| s)
                        .collect();
                    for s in gone {
                        maps.remove(&s);
                    }
                }
                _ => {}
            }
        }
        for (start, (size, c)) in maps {
            found.push(ReportFinding::at(
                &NEVER_UNMAPPED_RULE,
                c,
                format!(
                    "the mapping [{start:#x}, {:#x}) made here was never unmapped (cuMemUnmap) \
                     before process {pid} exited",
                    start.saturating_add(size)
                ),
            ));
        }
    }
    found
}

timeline_check!(
    /// Reservations never freed before `exit`.
    NeverFreed,
    NEVER_FREED,
    NEVER_FREED_RULE,
    never_freed
);

fn never_freed(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for (pid, calls) in exited_calls(t) {
        let mut reserved: BTreeMap<u64, (u64, &Call)> = BTreeMap::new();
        for c in calls {
            match c.func.as_str() {
                "cuMemAddressReserve" => {
                    if let Some((start, size)) = range(c, c.out("ptr")) {
                        reserved.insert(start, (size, c));
                    }
                }
                "cuMemAddressFree" => {
                    if let Some(start) = c.arg("ptr").and_then(number) {
                        reserved.remove(&start);
                    }
                }
                _ => {}
            }
        }
        for (start, (size, c)) in reserved {
            found.push(ReportFinding::at(
                &NEVER_FREED_RULE,
                c,
                format!(
                    "the reservation [{start:#x}, {:#x}) made here was never freed \
                     (cuMemAddressFree) before process {pid} exited",
                    start.saturating_add(size)
                ),
            ));
        }
    }
    found
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
