//! Runs kept apart: each `sharecheck run` without `--trace` writes into a directory of its own,
//! `./sharecheck-trace/run-YYYYMMDD-HHMMSS-PID/`, with a `manifest.json` that says what ran
//! (program, arguments, start and end, exit status, options, version). `report` without a TRACE
//! reads the newest run, `--all` every run; `--keep N` and `sharecheck clean` remove old ones.
//! Only directories that hold a manifest are ever removed.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::trace::io_reason;

pub const MANIFEST: &str = "manifest.json";
const PREFIX: &str = "run-";

/// `YYYYMMDD-HHMMSS` in UTC.
pub fn utc_stamp(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

fn unix_ns(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Creates this run's directory under `base` (made if missing, private).
pub fn new_run_dir(base: &Path, started: SystemTime) -> Result<PathBuf, String> {
    let make = |dir: &Path, recursive: bool| {
        DirBuilder::new()
            .recursive(recursive)
            .mode(0o700)
            .create(dir)
            .map_err(|e| {
                format!(
                    "cannot create the trace directory {}: {}; run from a writable directory or \
                     pass --trace",
                    dir.display(),
                    io_reason(&e)
                )
            })
    };
    make(base, true)?;
    let dir = base.join(format!(
        "{PREFIX}{}-{}",
        utc_stamp(started),
        std::process::id()
    ));
    make(&dir, false)?;
    Ok(dir)
}

/// What a run's manifest says at its start.
pub struct Manifest {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub started: SystemTime,
    pub options: Option<OsString>,
}

/// `manifest.json`, as written (and read back by tests and tools).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ManifestRecord {
    pub program: String,
    pub args: Vec<String>,
    pub start_unix_ns: u64,
    pub start_utc: String,
    pub options: Option<String>,
    pub sharecheck_version: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub end_unix_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_status: Option<i32>,
}

impl Manifest {
    fn record(&self, end: Option<(SystemTime, i32)>) -> ManifestRecord {
        let text = |s: &OsString| s.to_string_lossy().into_owned();
        ManifestRecord {
            program: text(&self.program),
            args: self.args.iter().map(text).collect(),
            start_unix_ns: unix_ns(self.started),
            start_utc: utc_stamp(self.started),
            options: self.options.as_ref().map(text),
            sharecheck_version: env!("CARGO_PKG_VERSION").to_string(),
            end_unix_ns: end.map(|(ended, _)| unix_ns(ended)),
            exit_status: end.map(|(_, status)| status),
        }
    }

    /// Writes the manifest (again): without an end while PROG runs, with it after.
    pub fn write(&self, dir: &Path, end: Option<(SystemTime, i32)>) -> Result<(), String> {
        let mut text = serde_json::to_string_pretty(&self.record(end)).unwrap_or_default();
        text.push('\n');
        let path = dir.join(MANIFEST);
        let tmp = dir.join(format!(".{MANIFEST}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {}", path.display(), io_reason(&e)))
    }
}

/// The run directories under `base` (those with a manifest), oldest first.
pub fn run_dirs(base: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    dirs.sort();
    dirs
}

/// What ran in a run directory, from its manifest: `PROGRAM ARGS, started UTC` (`None` without a
/// readable manifest).
pub fn describe(dir: &Path) -> Option<String> {
    let record: ManifestRecord =
        serde_json::from_slice(&std::fs::read(dir.join(MANIFEST)).ok()?).ok()?;
    let mut command = record.program;
    for arg in &record.args {
        command.push(' ');
        command.push_str(arg);
    }
    Some(format!("{command}, started {}", record.start_utc))
}

/// Removes a run directory that holds nothing but its manifest (its program never started).
pub fn remove_if_only_manifest(dir: &Path) {
    let only_manifest = std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .all(|e| e.file_name() == MANIFEST)
    });
    if only_manifest {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes the oldest run directories beyond the newest `keep` (0: none removed); returns how
/// many went.
pub fn prune(base: &Path, keep: usize) -> Result<usize, String> {
    if keep == 0 {
        return Ok(0);
    }
    remove_oldest(base, keep)
}

/// Removes every run directory but the newest `keep` (0: all).
pub fn remove_oldest(base: &Path, keep: usize) -> Result<usize, String> {
    let dirs = run_dirs(base);
    let extra = dirs.len().saturating_sub(keep);
    for dir in &dirs[..extra] {
        std::fs::remove_dir_all(dir)
            .map_err(|e| format!("cannot remove {}: {}", dir.display(), io_reason(&e)))?;
    }
    Ok(extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_manifest_is_written_and_read_as_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let m = Manifest {
            program: "prog".into(),
            args: vec!["-x".into()],
            started: UNIX_EPOCH + Duration::from_secs(5),
            options: None,
        };
        m.write(dir.path(), None).unwrap();
        let read = |d: &Path| -> ManifestRecord {
            serde_json::from_slice(&std::fs::read(d.join(MANIFEST)).unwrap()).unwrap()
        };
        let first = read(dir.path());
        assert_eq!((first.end_unix_ns, first.exit_status), (None, None));
        assert_eq!(first.start_unix_ns, 5_000_000_000);
        let text = std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap();
        assert!(!text.contains("exit_status"), "{text}");
        m.write(dir.path(), Some((UNIX_EPOCH + Duration::from_secs(6), 3)))
            .unwrap();
        let done = read(dir.path());
        assert_eq!(done.exit_status, Some(3));
        assert_eq!(
            done,
            ManifestRecord {
                end_unix_ns: Some(6_000_000_000),
                exit_status: Some(3),
                ..first
            }
        );
    }

    #[test]
    fn stamps_are_utc_calendar_time() {
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(utc_stamp(at(0)), "19700101-000000");
        assert_eq!(utc_stamp(at(951_782_400)), "20000229-000000");
        assert_eq!(utc_stamp(at(1_795_651_200 + 3_723)), "20261126-010203");
    }
}
