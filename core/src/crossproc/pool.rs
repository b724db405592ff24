//! The pool family's report-phase check: an exporter that freed a pool allocation another process
//! still held imported (its rule: `crate::rules::pool::report`). An export and its imports are
//! matched by the export data's keyed fingerprint (`*shareData_out` of `cuMemPoolExportPointer`,
//! `*shareData` of `cuMemPoolImportPointer`); what each process freed, by the pointer within that
//! process.

use crate::crossproc::{number, Call, ReportFinding, Timeline};
use crate::rules::pool::report::*;
use serde_json::Value;

/// The calls this check reads (besides those with fingerprints): the frees.
const READS: &[&str] = &[
    "cuMemFree",
    "cuMemPoolExportPointer",
    "cuMemPoolImportPointer",
    "hipFree",
    "hipMemPoolExportPointer",
    "hipMemPoolImportPointer",
];

/// One API's calls that share a pool pointer: its export (and the argument naming the
/// pointer), its import (and the out-argument it returned), its frees (a symbol prefix and the
/// argument naming the pointer), and the rule of the sentence in that API's document.
struct Pointers {
    export: &'static str,
    exported: &'static str,
    import: &'static str,
    imported: &'static str,
    free: &'static str,
    freed: &'static str,
    rule: &'static crate::rules::Rule,
}

/// `cuMemFree`, `cuMemFreeAsync`, their spellings (`cuMemFreeHost` takes no `dptr`).
const CUDA: Pointers = Pointers {
    export: "cuMemPoolExportPointer",
    exported: "ptr",
    import: "cuMemPoolImportPointer",
    imported: "ptr_out",
    free: "cuMemFree",
    freed: "dptr",
    rule: &FREED_WHILE_IMPORTED_RULE,
};

/// `hipFree` (the shim does not interpose `hipFreeAsync`).
const HIP: Pointers = Pointers {
    export: "hipMemPoolExportPointer",
    exported: "dev_ptr",
    import: "hipMemPoolImportPointer",
    imported: "dev_ptr",
    free: "hipFree",
    freed: "ptr",
    rule: &HIP_FREED_WHILE_IMPORTED_RULE,
};

impl Pointers {
    /// The first successful free of `ptr` (an argument's value) in `after`'s process after it.
    fn freed<'a>(&self, t: &'a Timeline, after: &Call, ptr: &Value) -> Option<&'a Call> {
        t.first_later(after, self.free, self.freed, ptr)
    }
}

timeline_check!(
    /// Pools exported as FABRIC handles, refused to an importer in another IMEX domain.
    FabricOtherDomain,
    FABRIC_OTHER_DOMAIN,
    FABRIC_OTHER_DOMAIN_RULE,
    fabric_other_domain
);

fn fabric_other_domain(t: &Timeline) -> Vec<ReportFinding> {
    crate::crossproc::vmm::imported_across_domains(
        t,
        ("cuMemPoolImportFromShareableHandle", "handle"),
        ("cuMemPoolExportToShareableHandle", "handle_out"),
        &FABRIC_OTHER_DOMAIN_RULE,
    )
}

timeline_check!(
    /// An exporter's free of a pool allocation an importer still held.
    FreedWhileImported,
    FREED_WHILE_IMPORTED,
    FREED_WHILE_IMPORTED_RULE,
    freed_while_imported
);

/// An import, the pointer it returned, and what ended its hold: when, and how ([`freed_while_imported`]).
type Import<'t> = (&'t Call, Value, Option<(u64, String)>);

timeline_check!(
    /// HIP's: an exporter's `hipFree` of a pool allocation an importer still held.
    HipFreedWhileImported,
    HIP_FREED_WHILE_IMPORTED,
    HIP_FREED_WHILE_IMPORTED_RULE,
    hip_freed_while_imported
);

fn freed_while_imported(t: &Timeline) -> Vec<ReportFinding> {
    freed_while_imported_by(t, &CUDA)
}

fn hip_freed_while_imported(t: &Timeline) -> Vec<ReportFinding> {
    freed_while_imported_by(t, &HIP)
}

fn freed_while_imported_by(t: &Timeline, api: &Pointers) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for fp in t.fingerprints() {
        let calls: Vec<&Call> = t.sharing(fp).filter(|c| c.succeeded()).collect();
        // Each import with what ended it: its own free, else its process's exit (`None`: neither
        // is known, so its hold is never decided). One sweep over the exporters' frees in time
        // order keeps the imports that began before and did not end by then (issue 27: walking
        // every import for every export was quadratic in a handle's history).
        let mut imports: Vec<Import> = Vec::new();
        for import in calls.iter().copied().filter(|c| c.func == api.import) {
            let Some(imported) = import.out(api.imported).filter(|v| number(v).is_some()) else {
                continue;
            };
            let end = match api.freed(t, import, imported) {
                Some(g) => Some((
                    g.ts_ns,
                    format!("freed it only later (call #{} of process {})", g.seq, g.pid),
                )),
                None => t
                    .exited(import.proc)
                    .map(|exit| (exit, "never freed it before exiting".to_string())),
            };
            imports.push((import, imported.clone(), end));
        }
        let mut frees: Vec<(&Call, &Call, u64)> = calls
            .iter()
            .copied()
            .filter(|c| c.func == api.export)
            .filter_map(|export| {
                let ptr = export.arg(api.exported).filter(|v| number(v).is_some())?;
                let free = api.freed(t, export, ptr)?;
                Some((export, free, number(ptr)?))
            })
            .collect();
        frees.sort_by_key(|(export, free, _)| ((free.ts_ns, free.pid), export.pos));
        // Imports begun (in time order) and those not ended yet, by when they end.
        let mut begun = 0;
        let mut held: std::collections::BTreeSet<(u64, usize)> = Default::default();
        let mut at_free: Vec<(usize, &Call, &Call, u64)> = Vec::new();
        for (export, free, ptr) in frees {
            while let Some((import, _, end)) = imports.get(begun) {
                if (import.ts_ns, import.pid) >= (free.ts_ns, free.pid) {
                    break;
                }
                if let Some((until, _)) = end {
                    held.insert((*until, begun));
                }
                begun += 1;
            }
            // Ended by the free (or at it): not held.
            while held.first().is_some_and(|&(until, _)| until <= free.ts_ns) {
                held.pop_first();
            }
            let mut holding: Vec<usize> = held
                .iter()
                .map(|&(_, k)| k)
                .filter(|&k| imports[k].0.proc != export.proc)
                .collect();
            holding.sort_unstable();
            for k in holding {
                at_free.push((k, export, free, ptr));
            }
        }
        // In the order the checks have always given: by export, then import, in time order.
        at_free.sort_by_key(|(k, export, _, _)| (export.pos, *k));
        for (k, export, free, ptr) in at_free {
            let (import, imported, end) = &imports[k];
            let imported = number(imported).unwrap_or(0);
            let held = end
                .as_ref()
                .map(|(_, how)| how.as_str())
                .unwrap_or_default();
            found.push(ReportFinding::at(
                api.rule,
                free,
                format!(
                    "{ptr:#x}, exported with {} (call #{}), was freed while process {} still \
                     held its import ({imported:#x}, {} call #{}); that process {held}",
                    api.export, export.seq, import.pid, api.import, import.seq
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
    use serde_json::{json, Map, Value};

    const FP: &str = "fp:00112233aabbccdd";

    fn export(ts: u64) -> Map<String, Value> {
        record(
            10,
            ts,
            "cuMemPoolExportPointer",
            json!({"*shareData_out": FP, "ptr": "0x1000"}),
            0,
        )
    }
    fn import(pid: i64, ts: u64) -> Map<String, Value> {
        record(
            pid,
            ts,
            "cuMemPoolImportPointer",
            json!({"*ptr_out": "0x9000", "pool": "0x5", "*shareData": FP}),
            0,
        )
    }
    fn free(pid: i64, ts: u64, ptr: &str) -> Map<String, Value> {
        record(
            pid,
            ts,
            "cuMemFreeAsync",
            json!({"dptr": ptr, "hStream": "0x0"}),
            0,
        )
    }

    #[test]
    fn an_exporter_s_free_before_an_importer_s_is_found_on_the_free() {
        let got = found(
            &FREED_WHILE_IMPORTED,
            &[
                export(1),
                import(20, 2),
                free(10, 3, "0x1000"),
                free(20, 4, "0x9000"),
            ],
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 3, "on the exporter's free");
        assert!(
            got[0]
                .1
                .contains("process 20 still held its import (0x9000"),
            "{got:?}"
        );
    }

    /// HIP's calls, with HIP's names, are HIP's rule's; CUDA's rule does not read them.
    #[test]
    fn a_hip_exporter_s_free_before_an_importer_s_is_found_by_hip_s_rule() {
        let hip = |pid: i64, ts: u64, func: &str, args: Value| record(pid, ts, func, args, 0);
        let records = [
            hip(
                10,
                1,
                "hipMemPoolExportPointer",
                json!({"*export_data": FP, "dev_ptr": "0x1000"}),
            ),
            hip(
                20,
                2,
                "hipMemPoolImportPointer",
                json!({"*dev_ptr": "0x9000", "mem_pool": "0x5", "*export_data": FP}),
            ),
            hip(10, 3, "hipFree", json!({"ptr": "0x1000"})),
            hip(20, 4, "hipFree", json!({"ptr": "0x9000"})),
        ];
        let got = found(&HIP_FREED_WHILE_IMPORTED, &records);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 3, "on the exporter's hipFree");
        assert!(
            got[0].1.contains("hipMemPoolImportPointer call #"),
            "{got:?}"
        );
        assert!(found(&FREED_WHILE_IMPORTED, &records).is_empty());
        // The importer freeing first: silent.
        let importer_first = [
            records[0].clone(),
            records[1].clone(),
            hip(20, 3, "hipFree", json!({"ptr": "0x9000"})),
            hip(10, 4, "hipFree", json!({"ptr": "0x1000"})),
        ];
        assert!(found(&HIP_FREED_WHILE_IMPORTED, &importer_first).is_empty());
    }

    #[test]
    fn the_importer_freeing_first_or_exiting_first_is_silent() {
        let importer_first = [
            export(1),
            import(20, 2),
            free(20, 3, "0x9000"),
            free(10, 4, "0x1000"),
        ];
        assert!(found(&FREED_WHILE_IMPORTED, &importer_first).is_empty());
        let importer_gone = [export(1), import(20, 2), exit(20, 3), free(10, 4, "0x1000")];
        assert!(found(&FREED_WHILE_IMPORTED, &importer_gone).is_empty());
        // An import made after the exporter's free (R580 answers 0) is not this rule's.
        let late_import = [
            export(1),
            free(10, 2, "0x1000"),
            import(20, 3),
            free(20, 4, "0x9000"),
        ];
        assert!(found(&FREED_WHILE_IMPORTED, &late_import).is_empty());
        // Another pointer freed: nothing.
        let other = [export(1), import(20, 2), free(10, 3, "0x2000"), exit(20, 4)];
        assert!(found(&FREED_WHILE_IMPORTED, &other).is_empty());
    }

    #[test]
    fn an_importer_that_never_freed_and_exited_after_the_free_held_it() {
        let got = found(
            &FREED_WHILE_IMPORTED,
            &[export(1), import(20, 2), free(10, 3, "0x1000"), exit(20, 4)],
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].1.contains("never freed it before exiting"),
            "{got:?}"
        );
        // Still running (no exit record, no free): not decided.
        let running = [export(1), import(20, 2), free(10, 3, "0x1000")];
        assert!(found(&FREED_WHILE_IMPORTED, &running).is_empty());
    }

    /// Thousands of rounds of one export's data (the same address each round): each exporter's
    /// free is decided against the imports held then. Round EARLY's importer frees after the
    /// exporter; the last round's importer exits without freeing, after the exporter's free.
    #[test]
    fn a_long_history_of_one_export_is_decided_round_by_round() {
        const ROUNDS: u64 = 3000;
        const EARLY: u64 = 1234;
        let mut records = Vec::new();
        for k in 0..ROUNDS {
            let at = 100 * (k + 1);
            records.push(export(at));
            records.push(import(20, at + 10));
            if k + 1 == ROUNDS {
                records.push(free(10, at + 20, "0x1000"));
                records.push(exit(20, at + 30));
            } else if k == EARLY {
                records.push(free(10, at + 20, "0x1000"));
                records.push(free(20, at + 30, "0x9000"));
            } else {
                records.push(free(20, at + 20, "0x9000"));
                records.push(free(10, at + 30, "0x1000"));
            }
        }
        let got = found(&FREED_WHILE_IMPORTED, &records);
        let at: Vec<u64> = got.iter().map(|(ts, _)| *ts).collect();
        assert_eq!(at, [100 * (EARLY + 1) + 20, 100 * ROUNDS + 20], "{got:?}");
        assert!(got[0].1.contains("freed it only later"), "{got:?}");
        assert!(
            got[1].1.contains("never freed it before exiting"),
            "{got:?}"
        );
    }

    /// A pool exported as a FABRIC handle on node-a, imported on node-b (`ret`), in the domains
    /// given.
    fn fabric_pool(exporter: &str, importer: &str, ret: i64) -> Vec<(u64, String)> {
        use crate::crossproc::test_records::{on, process};
        let pool = |pid, ts, func: &str, args: Value, ret| {
            on(
                if pid == 1 { "node-a" } else { "node-b" },
                record(pid, ts, func, args, ret),
            )
        };
        found(
            &FABRIC_OTHER_DOMAIN,
            &[
                process(1, "node-a", Some(exporter)),
                process(2, "node-b", Some(importer)),
                pool(
                    1,
                    1,
                    "cuMemPoolExportToShareableHandle",
                    json!({"*handle_out": FP, "pool": "0x5", "handleType": "CU_MEM_HANDLE_TYPE_FABRIC"}),
                    0,
                ),
                pool(
                    2,
                    2,
                    "cuMemPoolImportFromShareableHandle",
                    json!({"handle": "0x7ffc0010", "*handle": FP, "handleType": "CU_MEM_HANDLE_TYPE_FABRIC"}),
                    ret,
                ),
            ],
        )
    }

    #[test]
    fn a_fabric_pool_refused_in_another_imex_domain_is_found_on_its_import() {
        let got = fabric_pool("d1", "d2", 800);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 2);
        assert!(
            got[0]
                .1
                .contains("cuMemPoolExportToShareableHandle call #1"),
            "{got:?}"
        );
        assert!(
            got[0].1.contains("IMEX domain d1") && got[0].1.contains("IMEX domain d2"),
            "{got:?}"
        );
    }

    #[test]
    fn a_fabric_pool_imported_in_its_own_domain_is_silent() {
        assert!(fabric_pool("d1", "d1", 800).is_empty());
        assert!(fabric_pool("d1", "d2", 0).is_empty());
    }
}
