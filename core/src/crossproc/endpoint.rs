//! The logical endpoint family's report-phase checks: what a process left at its exit, and what
//! an importer did with an endpoint whose type only the exporter's trace tells (their rules:
//! `crate::rules::endpoint::report`).

use crate::crossproc::{exited_calls, Call, ReportFinding, Timeline};
use crate::rules::endpoint::report::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// Every logical endpoint call.
const READS: &[&str] = &["cuLogicalEndpoint"];

fn number(c: &Call, key: &str) -> Option<u64> {
    c.arg(key).and_then(Value::as_u64)
}

timeline_check!(
    /// Endpoints created or imported and never destroyed before `exit`.
    NeverDestroyed,
    NEVER_DESTROYED,
    NEVER_DESTROYED_RULE,
    never_destroyed
);

fn never_destroyed(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for (pid, calls) in exited_calls(t) {
        let mut held: BTreeMap<u64, &Call> = BTreeMap::new();
        for c in calls {
            let id = number(c, "leId");
            match (c.func.as_str(), id) {
                ("cuLogicalEndpointCreate" | "cuLogicalEndpointImport", Some(id)) => {
                    held.insert(id, c);
                }
                ("cuLogicalEndpointDestroy", Some(id)) => {
                    held.remove(&id);
                }
                _ => {}
            }
        }
        for (id, c) in held {
            let how = if c.func.ends_with("Import") {
                "imported"
            } else {
                "created"
            };
            found.push(ReportFinding::at(
                &NEVER_DESTROYED_RULE,
                c,
                format!(
                    "leId {id}, {how} here, was never destroyed before process {pid} \
                     exited"
                ),
            ));
        }
    }
    found
}

timeline_check!(
    /// Reserved ids never released before `exit`.
    NeverReleased,
    NEVER_RELEASED,
    NEVER_RELEASED_RULE,
    never_released
);

fn never_released(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for (pid, calls) in exited_calls(t) {
        // Per reserve: the ranges `[start, end)` of its ids still held.
        let mut reserves: Vec<(&Call, Vec<(u64, u64)>)> = Vec::new();
        for c in calls {
            let count = number(c, "count").unwrap_or(0);
            if c.func == "cuLogicalEndpointIdReserve" {
                if let Some(base) = c.out("baseLeId").and_then(Value::as_u64) {
                    reserves.push((c, vec![(base, base + count)]));
                }
            } else if c.func == "cuLogicalEndpointIdRelease" {
                let Some(base) = number(c, "baseLeId") else {
                    continue;
                };
                let (lo, hi) = (base, base + count);
                for (_, ranges) in &mut reserves {
                    *ranges = ranges
                        .iter()
                        .flat_map(|&(s, e)| {
                            [(s, e.min(lo)), (s.max(hi), e)]
                                .into_iter()
                                .filter(|(a, b)| a < b)
                        })
                        .collect();
                }
            }
        }
        for (c, ranges) in reserves.into_iter().filter(|(_, r)| !r.is_empty()) {
            let held: u64 = ranges.iter().map(|(s, e)| e - s).sum();
            let list: Vec<String> = ranges.iter().map(|(s, e)| format!("[{s}, {e})")).collect();
            found.push(ReportFinding::at(
                &NEVER_RELEASED_RULE,
                c,
                format!(
                    "{held} id(s) of this reserve ({}) were never released before \
                     process {pid} exited",
                    list.join(", ")
                ),
            ));
        }
    }
    found
}

timeline_check!(
    /// Binds of an endpoint imported from a unicast one.
    BindImportedUnicast,
    BIND_IMPORTED_UNICAST,
    BIND_IMPORTED_UNICAST_RULE,
    bind_imported_unicast
);

fn bind_imported_unicast(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for fp in t.fingerprints() {
        let calls: Vec<&Call> = t.sharing(fp).collect();
        for export in calls
            .iter()
            .filter(|c| c.func == "cuLogicalEndpointExport" && c.succeeded())
        {
            let Some(exported) = number(export, "leId") else {
                continue;
            };
            // The exporter's create of that id, the last before the export.
            let create = t.earlier_in_process(export).find(|c| {
                c.func == "cuLogicalEndpointCreate"
                    && c.succeeded()
                    && number(c, "leId") == Some(exported)
            });
            let prop = create.and_then(|c| c.arg("prop"));
            let unicast = prop.and_then(|p| p.get("type")).and_then(Value::as_str)
                == Some("CU_LOGICAL_ENDPOINT_TYPE_UNICAST");
            if !unicast {
                continue;
            }
            let owner = prop
                .and_then(|p| p.get("unicast.device"))
                .map_or_else(String::new, |d| format!(", owner device {d}"));
            for import in calls
                .iter()
                .filter(|c| c.func == "cuLogicalEndpointImport" && c.succeeded())
            {
                let Some(id) = number(import, "leId") else {
                    continue;
                };
                for later in t.later_in_process(import) {
                    let same = number(later, "leId") == Some(id);
                    if same && later.func == "cuLogicalEndpointDestroy" {
                        break;
                    }
                    if same && later.func.starts_with("cuLogicalEndpointBind") {
                        found.push(ReportFinding::at(
                            &BIND_IMPORTED_UNICAST_RULE,
                            later,
                            format!(
                                "leId {id} was imported from process {}'s unicast \
                                 endpoint (leId {exported}{owner}): an imported \
                                 unicast endpoint cannot be bound",
                                export.pid
                            ),
                        ));
                    }
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crossproc::test_records::{exit, found, record};
    use serde_json::{json, Map};

    fn reserve(ts: u64, base: u64, count: u64) -> Map<String, Value> {
        record(
            10,
            ts,
            "cuLogicalEndpointIdReserve",
            json!({"*baseLeId": base, "count": count}),
            0,
        )
    }
    fn release(ts: u64, base: u64, count: u64) -> Map<String, Value> {
        record(
            10,
            ts,
            "cuLogicalEndpointIdRelease",
            json!({"baseLeId": base, "count": count}),
            0,
        )
    }
    fn on_id(pid: i64, ts: u64, func: &str, id: u64, ret: i64) -> Map<String, Value> {
        record(pid, ts, func, json!({"leId": id}), ret)
    }

    #[test]
    fn endpoints_left_at_exit_are_found_on_their_create_or_import() {
        let create = |ts, id| on_id(10, ts, "cuLogicalEndpointCreate", id, 0);
        let destroy = |ts, id| on_id(10, ts, "cuLogicalEndpointDestroy", id, 0);
        let got = found(
            &NEVER_DESTROYED,
            &[create(1, 5), create(2, 6), destroy(3, 5), exit(10, 9)],
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 2);
        assert!(got[0].1.contains("leId 6, created here"), "{got:?}");
        let import = on_id(10, 4, "cuLogicalEndpointImport", 7, 0);
        let got = found(&NEVER_DESTROYED, &[import, exit(10, 9)]);
        assert!(got[0].1.contains("imported"), "{got:?}");
        // Destroyed; still running (no exit record); or the create failed.
        assert!(found(
            &NEVER_DESTROYED,
            &[create(1, 5), destroy(2, 5), exit(10, 9)]
        )
        .is_empty());
        assert!(found(&NEVER_DESTROYED, &[create(1, 5)]).is_empty());
        let failed = on_id(10, 1, "cuLogicalEndpointCreate", 5, 1);
        assert!(found(&NEVER_DESTROYED, &[failed, exit(10, 9)]).is_empty());
    }

    #[test]
    fn reserved_ids_left_at_exit_are_found_on_their_reserve() {
        let got = found(
            &NEVER_RELEASED,
            &[
                reserve(1, 10, 8),
                release(2, 12, 2),
                reserve(3, 30, 2),
                release(4, 30, 2),
                exit(10, 9),
            ],
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 1);
        assert!(
            got[0]
                .1
                .contains("6 id(s) of this reserve ([10, 12), [14, 18))"),
            "{got:?}"
        );
        assert!(found(
            &NEVER_RELEASED,
            &[reserve(1, 10, 8), release(2, 10, 8), exit(10, 9)]
        )
        .is_empty());
        assert!(found(&NEVER_RELEASED, &[reserve(1, 10, 8)]).is_empty());
    }

    #[test]
    fn a_bind_of_an_endpoint_imported_from_a_unicast_one_is_found() {
        const FP: &str = "fp:00112233445566ff";
        let create = |kind: &str| {
            record(
                10,
                1,
                "cuLogicalEndpointCreate",
                json!({"leId": 5, "prop": {"type": kind, "unicast.device": 0}}),
                0,
            )
        };
        let export = record(
            10,
            2,
            "cuLogicalEndpointExport",
            json!({"*handle": FP, "leId": 5}),
            0,
        );
        let import = record(
            20,
            3,
            "cuLogicalEndpointImport",
            json!({"leId": 9, "*handle": FP}),
            0,
        );
        let bind = on_id(20, 4, "cuLogicalEndpointBindMem", 9, 1);
        let other = on_id(20, 5, "cuLogicalEndpointBindAddr", 8, 0);
        let unicast = create("CU_LOGICAL_ENDPOINT_TYPE_UNICAST");
        let got = found(
            &BIND_IMPORTED_UNICAST,
            &[
                unicast.clone(),
                export.clone(),
                import.clone(),
                bind.clone(),
                other,
            ],
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 4);
        assert!(
            got[0]
                .1
                .contains("process 10's unicast endpoint (leId 5, owner device 0)"),
            "{got:?}"
        );
        // A multicast export, or a bind after the import was destroyed: nothing.
        let multicast = create("CU_LOGICAL_ENDPOINT_TYPE_MULTICAST");
        assert!(found(
            &BIND_IMPORTED_UNICAST,
            &[multicast, export.clone(), import.clone(), bind.clone()]
        )
        .is_empty());
        let destroyed = on_id(20, 3, "cuLogicalEndpointDestroy", 9, 0);
        let mut later_bind = bind.clone();
        later_bind.insert("ts_ns".into(), json!(6));
        later_bind.insert("seq".into(), json!(6));
        let mut destroy_first = destroyed;
        destroy_first.insert("ts_ns".into(), json!(4));
        destroy_first.insert("seq".into(), json!(4));
        assert!(found(
            &BIND_IMPORTED_UNICAST,
            &[unicast, export, import, destroy_first, later_bind]
        )
        .is_empty());
    }
}
