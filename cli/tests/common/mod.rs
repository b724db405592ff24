//! Helpers shared by the integration tests: a self-removing temporary directory and a
//! `sharecheck` command with a clean environment.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Environment variables of sharecheck that must not leak from the test runner into a test.
pub const SHARECHECK_VARS: [&str; 12] = [
    "LD_PRELOAD",
    "SHARECHECK_TRACE",
    "SHARECHECK_OPTIONS",
    "SHARECHECK_JOB_KEY",
    "SHARECHECK_SHIM",
    "SHARECHECK_SIM_LIBRARY",
    "SHARECHECK_SIM_STATE_DIR",
    "SHARECHECK_CUDA_LIBRARY",
    "SHARECHECK_HIP_LIBRARY",
    "SHARECHECK_LOG",
    "LD_LIBRARY_PATH",
    "TMPDIR",
];

pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let base = std::env::temp_dir().canonicalize().unwrap();
        let path = base.join(format!(
            "sharecheck-cli-test-{}-{tag}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Writes `content` at `rel`, creating parent directories.
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.path.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let path = self.path.join(rel);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// A loadable shared object named `libsharecheck.so` (built with `cc -shared` from an empty
    /// source), so that ld.so preloads it silently. Falls back to an empty file, which ld.so
    /// complains about on stderr but which does not stop the program.
    pub fn fake_shim(&self, rel_dir: &str) -> PathBuf {
        let dir = self.mkdir(rel_dir);
        let shim = dir.join("libsharecheck.so");
        let src = self.write("shim.c", "int sharecheck_fake_shim;\n");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&shim)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            std::fs::write(&shim, b"").unwrap();
        }
        shim
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `sharecheck` run in `dir`, with none of sharecheck's variables inherited.
pub fn sharecheck(dir: &TempDir) -> Command {
    sharecheck_at(Path::new(env!("CARGO_BIN_EXE_sharecheck")), dir)
}

/// Like [`sharecheck`], with the binary at `exe` (a copy placed elsewhere).
pub fn sharecheck_at(exe: &Path, dir: &TempDir) -> Command {
    let mut cmd = Command::new(exe);
    cmd.current_dir(&dir.path);
    for var in SHARECHECK_VARS {
        cmd.env_remove(var);
    }
    cmd
}
