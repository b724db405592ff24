//! The pool family's report-phase check: an exporter that freed a pool allocation another process
//! still held imported (its rule: `crate::rules::pool::report`). An export and its imports are
//! matched by the export data's keyed fingerprint (`*shareData_out` of `cuMemPoolExportPointer`,
//! `*shareData` of `cuMemPoolImportPointer`); what each process freed, by the pointer within that
//! process.

use crate::crossproc::{number, Call, ReportFinding, Timeline};
use crate::rules::pool::report::*;
use serde_json::Value;
use std::collections::HashMap;

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

pass_check!(
    /// Pools exported as FABRIC handles, refused to an importer in another IMEX domain.
    FabricOtherDomain,
    FABRIC_OTHER_DOMAIN,
    FABRIC_OTHER_DOMAIN_RULE,
    READS,
    crate::crossproc::vmm::AcrossDomains::new(
        ("cuMemPoolImportFromShareableHandle", "handle"),
        ("cuMemPoolExportToShareableHandle", "handle_out"),
        &FABRIC_OTHER_DOMAIN_RULE,
    )
);

pass_check!(
    /// An exporter's free of a pool allocation an importer still held.
    FreedWhileImported,
    FREED_WHILE_IMPORTED,
    FREED_WHILE_IMPORTED_RULE,
    READS,
    FreedWhileImportedPass::new(&CUDA)
);

pass_check!(
    /// HIP's: an exporter's `hipFree` of a pool allocation an importer still held.
    HipFreedWhileImported,
    HIP_FREED_WHILE_IMPORTED,
    HIP_FREED_WHILE_IMPORTED_RULE,
    READS,
    FreedWhileImportedPass::new(&HIP)
);

/// A value's key, as the passes match values.
fn key(v: &Value) -> String {
    crate::crossproc::value_key(v).into_owned()
}

/// An exporter's free that may have freed what an importer held: decided when the import's end is
/// known.
struct Held {
    export: Call,
    free: Call,
    ptr: u64,
}

/// An import not freed yet, and the exporters' frees made while it was held.
struct Import {
    fp: String,
    call: Call,
    imported: u64,
    frees: Vec<Held>,
}

type Shared<T> = std::rc::Rc<std::cell::RefCell<T>>;

/// [`FreedWhileImported`] as a pass. An import is held from its call until its end: the
/// importer's first free of the imported pointer after it, else its process's exit (an import
/// with neither is never judged). At the end of the time of an exporter's free, the imports of
/// the exported handle that other processes began before it (by time, then pid) and had not
/// ended are noted on them; each becomes a finding when the import's end is known (the message
/// says what it was).
struct FreedWhileImportedPass {
    api: &'static Pointers,
    /// (process, pointer's key) -> its exports not freed yet, one per handle.
    exports: HashMap<(usize, String), Vec<(String, Call)>>,
    /// (process, pointer's key) -> its imports not freed yet.
    imports: HashMap<(usize, String), Vec<Shared<Import>>>,
    /// Fingerprint -> its imports not freed yet, in time order.
    by_handle: HashMap<String, Vec<Shared<Import>>>,
    /// Exports whose free was just seen, with the free: decided at its time's end.
    due: Vec<(String, Call, Call)>,
    found: Vec<(crate::crossproc::Order, ReportFinding)>,
}

impl FreedWhileImportedPass {
    fn new(api: &'static Pointers) -> Self {
        FreedWhileImportedPass {
            api,
            exports: HashMap::new(),
            imports: HashMap::new(),
            by_handle: HashMap::new(),
            due: Vec::new(),
            found: Vec::new(),
        }
    }

    /// `import` ended (`how`): its frees noted are findings.
    fn ended(&mut self, import: &Import, how: &str) {
        let api = self.api;
        for held in &import.frees {
            self.found.push((
                (import.fp.clone(), held.export.pos, import.call.pos),
                ReportFinding::at(
                    api.rule,
                    &held.free,
                    format!(
                        "{:#x}, exported with {} (call #{}), was freed while process {} still \
                         held its import ({:#x}, {} call #{}); that process {how}",
                        held.ptr,
                        api.export,
                        held.export.seq,
                        import.call.pid,
                        import.imported,
                        api.import,
                        import.call.seq
                    ),
                ),
            ));
        }
    }
}

impl crate::crossproc::Pass for FreedWhileImportedPass {
    fn call(&mut self, _t: &Timeline, c: &Call) {
        let api = self.api;
        if !c.succeeded() {
            return;
        }
        let mut fps = c.fingerprints();
        fps.sort_unstable();
        fps.dedup();
        if c.func == api.export {
            if let Some(ptr) = c.arg(api.exported).filter(|v| number(v).is_some()) {
                let list = self.exports.entry((c.proc, key(ptr))).or_default();
                list.extend(fps.iter().map(|fp| (fp.to_string(), c.clone())));
            }
        } else if c.func == api.import {
            if let Some(imported) = c.out(api.imported).filter(|v| number(v).is_some()) {
                for fp in &fps {
                    let import = std::rc::Rc::new(std::cell::RefCell::new(Import {
                        fp: fp.to_string(),
                        call: c.clone(),
                        imported: number(imported).unwrap_or(0),
                        frees: Vec::new(),
                    }));
                    self.imports
                        .entry((c.proc, key(imported)))
                        .or_default()
                        .push(import.clone());
                    self.by_handle
                        .entry(fp.to_string())
                        .or_default()
                        .push(import);
                }
            }
        } else if c.func.starts_with(api.free) {
            let Some(ptr) = c.arg(api.freed) else {
                return;
            };
            let at = (c.proc, key(ptr));
            for (fp, export) in self.exports.remove(&at).into_iter().flatten() {
                self.due.push((fp, export, c.clone()));
            }
            let how = format!("freed it only later (call #{} of process {})", c.seq, c.pid);
            for import in self.imports.remove(&at).into_iter().flatten() {
                let fp = import.borrow().fp.clone();
                if let Some(list) = self.by_handle.get_mut(&fp) {
                    list.retain(|other| !std::rc::Rc::ptr_eq(other, &import));
                    if list.is_empty() {
                        self.by_handle.remove(&fp);
                    }
                }
                self.ended(&import.borrow(), &how);
            }
        }
    }

    fn settle(&mut self, t: &Timeline, ts_ns: u64) {
        for (fp, export, free) in std::mem::take(&mut self.due) {
            let Some(ptr) = export.arg(self.api.exported).and_then(number) else {
                continue;
            };
            for import in self.by_handle.get(&fp).into_iter().flatten() {
                let mut import = import.borrow_mut();
                let c = &import.call;
                let begun = (c.ts_ns, c.pid) < (free.ts_ns, free.pid);
                // Its process gone by the free: its hold ended then.
                let gone = t.exited(c.proc).is_some_and(|exit| exit <= ts_ns);
                if begun && !gone && c.proc != export.proc {
                    import.frees.push(Held {
                        export: export.clone(),
                        free: free.clone(),
                        ptr,
                    });
                }
            }
        }
    }

    fn end(mut self: Box<Self>, t: &Timeline) -> Vec<(crate::crossproc::Order, ReportFinding)> {
        // The imports never freed: ended by their process's exit, where it wrote one.
        let left: Vec<Shared<Import>> = self.by_handle.values().flatten().cloned().collect();
        for import in left {
            let import = import.borrow();
            if t.exited(import.call.proc).is_some() {
                self.ended(&import, "never freed it before exiting");
            }
        }
        self.found
    }
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
