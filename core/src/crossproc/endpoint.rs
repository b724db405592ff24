//! The logical endpoint family's report-phase checks: what a process left at its exit, and what
//! an importer did with an endpoint whose type only the exporter's trace tells (their rules:
//! `crate::rules::endpoint::report`).

use crate::crossproc::{AtExit, Call, ReportFinding, Timeline};
use crate::rules::endpoint::report::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Every logical endpoint call.
const READS: &[&str] = &["cuLogicalEndpoint"];

fn number(c: &Call, key: &str) -> Option<u64> {
    c.arg(key).and_then(Value::as_u64)
}

at_exit_check!(
    /// Endpoints created or imported and never destroyed before `exit`.
    NeverDestroyed,
    NEVER_DESTROYED,
    NEVER_DESTROYED_RULE,
    Held::default
);

/// A process's endpoints held: id -> its latest create or import.
#[derive(Default)]
pub struct Held(BTreeMap<u64, Call>);

impl AtExit for Held {
    fn call(&mut self, c: &Call) {
        match (c.func.as_str(), number(c, "leId")) {
            ("cuLogicalEndpointCreate" | "cuLogicalEndpointImport", Some(id)) => {
                self.0.insert(id, c.clone());
            }
            ("cuLogicalEndpointDestroy", Some(id)) => {
                self.0.remove(&id);
            }
            _ => {}
        }
    }

    fn exit(self, _t: &Timeline, _proc: usize, pid: i64, found: &mut Vec<(usize, ReportFinding)>) {
        for (k, (id, c)) in self.0.into_iter().enumerate() {
            let how = if c.func.ends_with("Import") {
                "imported"
            } else {
                "created"
            };
            found.push((
                k,
                ReportFinding::at(
                    &NEVER_DESTROYED_RULE,
                    &c,
                    format!(
                        "leId {id}, {how} here, was never destroyed before process {pid} \
                         exited"
                    ),
                ),
            ));
        }
    }
}

at_exit_check!(
    /// Reserved ids never released before `exit`.
    NeverReleased,
    NEVER_RELEASED,
    NEVER_RELEASED_RULE,
    Reserved::default
);

/// A process's reserves with ids still held: each reserve and the ranges `[start, end)` of its
/// ids not released (a reserve released whole is forgotten).
#[derive(Default)]
pub struct Reserved(Vec<(Call, Vec<(u64, u64)>)>);

impl AtExit for Reserved {
    fn call(&mut self, c: &Call) {
        let count = number(c, "count").unwrap_or(0);
        if c.func == "cuLogicalEndpointIdReserve" {
            if let Some(base) = c.out("baseLeId").and_then(Value::as_u64) {
                self.0.push((c.clone(), vec![(base, base + count)]));
            }
        } else if c.func == "cuLogicalEndpointIdRelease" {
            let Some(base) = number(c, "baseLeId") else {
                return;
            };
            let (lo, hi) = (base, base + count);
            for (_, ranges) in &mut self.0 {
                *ranges = ranges
                    .iter()
                    .flat_map(|&(s, e)| {
                        [(s, e.min(lo)), (s.max(hi), e)]
                            .into_iter()
                            .filter(|(a, b)| a < b)
                    })
                    .collect();
            }
            self.0.retain(|(_, ranges)| !ranges.is_empty());
        }
    }

    fn exit(self, _t: &Timeline, _proc: usize, pid: i64, found: &mut Vec<(usize, ReportFinding)>) {
        for (k, (c, ranges)) in self.0.into_iter().enumerate() {
            let held: u64 = ranges.iter().map(|(s, e)| e - s).sum();
            let list: Vec<String> = ranges.iter().map(|(s, e)| format!("[{s}, {e})")).collect();
            found.push((
                k,
                ReportFinding::at(
                    &NEVER_RELEASED_RULE,
                    &c,
                    format!(
                        "{held} id(s) of this reserve ({}) were never released before \
                         process {pid} exited",
                        list.join(", ")
                    ),
                ),
            ));
        }
    }
}

pass_check!(
    /// Binds of an endpoint imported from a unicast one.
    BindImportedUnicast,
    BIND_IMPORTED_UNICAST,
    BIND_IMPORTED_UNICAST_RULE,
    READS,
    BindImportedUnicastPass::default()
);

/// [`BindImportedUnicast`] as a pass. An export is unicast when the exporter's latest create of
/// its id said so; an import is bound until its process destroys that id; a bind of an imported
/// id is a finding for every unicast export of the import's handle (decided at the end: the
/// export may come after the bind).
#[derive(Default)]
struct BindImportedUnicastPass {
    /// (process, leId) -> the `prop` of its latest successful create.
    created: HashMap<(usize, u64), Option<Value>>,
    /// Fingerprint -> its unicast exports: (pid, position, leId exported, the owner's text).
    unicast: HashMap<String, Vec<(i64, usize, u64, String)>>,
    /// (process, leId) -> its imports not destroyed since: (fingerprint, position).
    imported: HashMap<(usize, u64), Vec<(String, usize)>>,
    /// Fingerprint -> the binds of its imports: (the import's position, the bind).
    binds: HashMap<String, Vec<(usize, Call)>>,
}

impl crate::crossproc::Pass for BindImportedUnicastPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        let Some(id) = number(c, "leId") else {
            return;
        };
        let at = (c.proc, id);
        let mut fps = c.fingerprints();
        fps.sort_unstable();
        fps.dedup();
        match c.func.as_str() {
            "cuLogicalEndpointCreate" if c.succeeded() => {
                self.created.insert(at, c.arg("prop").cloned());
            }
            "cuLogicalEndpointExport" if c.succeeded() => {
                let prop = self.created.get(&at).and_then(Option::as_ref);
                let unicast = prop.and_then(|p| p.get("type")).and_then(Value::as_str)
                    == Some("CU_LOGICAL_ENDPOINT_TYPE_UNICAST");
                if !unicast {
                    return;
                }
                let owner = prop
                    .and_then(|p| p.get("unicast.device"))
                    .map_or_else(String::new, |d| format!(", owner device {d}"));
                for fp in fps {
                    self.unicast.entry(fp.to_string()).or_default().push((
                        c.pid,
                        c.pos,
                        id,
                        owner.clone(),
                    ));
                }
            }
            "cuLogicalEndpointImport" if c.succeeded() => {
                let imports = self.imported.entry(at).or_default();
                imports.extend(fps.into_iter().map(|fp| (fp.to_string(), c.pos)));
            }
            "cuLogicalEndpointDestroy" => {
                self.imported.remove(&at);
            }
            func if func.starts_with("cuLogicalEndpointBind") => {
                for (fp, import) in self.imported.get(&at).into_iter().flatten() {
                    self.binds
                        .entry(fp.clone())
                        .or_default()
                        .push((*import, c.clone()));
                }
            }
            _ => {}
        }
    }

    fn end(self: Box<Self>, _t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        let mut found = Vec::new();
        for (fp, mut binds) in self.binds {
            let Some(exports) = self.unicast.get(&fp) else {
                continue;
            };
            binds.sort_by_key(|(import, bind)| (*import, bind.pos));
            for (pid, export, exported, owner) in exports {
                for (import, bind) in &binds {
                    let id = number(bind, "leId").unwrap_or_default();
                    found.push((
                        (fp.clone(), *export, *import),
                        ReportFinding::at(
                            &BIND_IMPORTED_UNICAST_RULE,
                            bind,
                            format!(
                                "leId {id} was imported from process {pid}'s unicast \
                                 endpoint (leId {exported}{owner}): an imported \
                                 unicast endpoint cannot be bound"
                            ),
                        ),
                    ));
                }
            }
        }
        found
    }
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
