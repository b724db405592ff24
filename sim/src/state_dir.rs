//! The per-run directory through which the processes of one run find each other's exports.
//!
//! An export writes a small file named after the exporting process and export id; an importer
//! checks that the file is still there (and carries the handle's nonce) before it maps anything,
//! so a handle of freed memory or of a process that left no export behind fails cleanly.

use crate::config::config;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::PathBuf;

/// The state directory, created 0700 on first use; `None` (after one line on stderr) if it
/// cannot be used.
fn directory() -> Option<PathBuf> {
    let dir = config().state_dir();
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
    {
        eprintln!("sharecheck-sim: state directory {}: {e}", dir.display());
        return None;
    }
    // Another user's directory could hold planted exports: refuse it.
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() && m.uid() == uid => Some(dir),
        _ => {
            eprintln!(
                "sharecheck-sim: state directory {} is not a directory owned by uid {uid}",
                dir.display()
            );
            None
        }
    }
}

/// Writes `contents` to the file `name` (atomically: a reader never sees half a file).
pub fn write(name: &str, contents: &str) -> bool {
    let Some(dir) = directory() else { return false };
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)));
    if let Err(e) = written {
        eprintln!(
            "sharecheck-sim: cannot write {}: {e}",
            dir.join(name).display()
        );
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    true
}

pub fn read(name: &str) -> Option<String> {
    std::fs::read_to_string(config().state_dir().join(name)).ok()
}

pub fn remove(name: &str) {
    let _ = std::fs::remove_file(config().state_dir().join(name));
}

/// A number that differs between exports of different processes and runs (not a secret: the
/// state directory is private to the user).
pub fn nonce(id: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x =
        now ^ (u64::from(std::process::id()) << 32) ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64 finalizer
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}
