//! The pool family's report-phase check: an exporter that freed a pool allocation another process
//! still held imported (its rule: `crate::rules::pool::report`). An export and its imports are
//! matched by the export data's keyed fingerprint (`*shareData_out` of `cuMemPoolExportPointer`,
//! `*shareData` of `cuMemPoolImportPointer`); what each process freed, by the pointer within that
//! process.

use crate::crossproc::{number, Call, ReportFinding, Timeline};
use crate::rules::pool::report::*;

/// The calls this check reads (besides those with fingerprints): the frees.
const READS: &[&str] = &[
    "cuMemFree",
    "cuMemPoolExportPointer",
    "cuMemPoolImportPointer",
];

/// The first successful free of `ptr` in `after`'s process after it (`cuMemFree`,
/// `cuMemFreeAsync`, their spellings).
fn freed<'a>(t: &'a Timeline, after: &'a Call, ptr: u64) -> Option<&'a Call> {
    t.later_in_process(after).find(|c| {
        c.func.starts_with("cuMemFree")
            && c.func != "cuMemFreeHost"
            && c.succeeded()
            && c.arg("dptr").and_then(number) == Some(ptr)
    })
}

timeline_check!(
    /// An exporter's free of a pool allocation an importer still held.
    FreedWhileImported,
    FREED_WHILE_IMPORTED,
    FREED_WHILE_IMPORTED_RULE,
    freed_while_imported
);

fn freed_while_imported(t: &Timeline) -> Vec<ReportFinding> {
    let mut found = Vec::new();
    for fp in t.fingerprints() {
        let calls: Vec<&Call> = t.sharing(fp).filter(|c| c.succeeded()).collect();
        for export in calls.iter().filter(|c| c.func == "cuMemPoolExportPointer") {
            let Some(ptr) = export.arg("ptr").and_then(number) else {
                continue;
            };
            let Some(free) = freed(t, export, ptr) else {
                continue;
            };
            for import in calls.iter().filter(|c| {
                c.func == "cuMemPoolImportPointer"
                    && c.pid != export.pid
                    && (c.ts_ns, c.pid) < (free.ts_ns, free.pid)
            }) {
                let Some(imported) = import.out("ptr_out").and_then(number) else {
                    continue;
                };
                let held = match freed(t, import, imported) {
                    Some(g) => (g.ts_ns > free.ts_ns).then(|| {
                        format!("freed it only later (call #{} of process {})", g.seq, g.pid)
                    }),
                    None => match t.exited(import.pid) {
                        Some(exit) if exit > free.ts_ns => {
                            Some("never freed it before exiting".to_string())
                        }
                        // Ended before the free, or its end is unknown: not decided.
                        _ => None,
                    },
                };
                if let Some(held) = held {
                    found.push(ReportFinding::at(
                        &FREED_WHILE_IMPORTED_RULE,
                        free,
                        format!(
                            "{ptr:#x}, exported with cuMemPoolExportPointer (call #{}), was freed \
                             while process {} still held its import ({imported:#x}, \
                             cuMemPoolImportPointer call #{}); that process {held}",
                            export.seq, import.pid, import.seq
                        ),
                    ));
                }
            }
        }
    }
    found.sort_by_key(|f| (f.ts_ns, f.pid, f.seq));
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
}
