//! Helpers shared by the integration tests: a self-removing temporary directory and a
//! `sharecheck` command with a clean environment.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use sharecheck_core::schema::{env, libraries};

/// Environment variables that must not leak from the test runner into a test: every variable of
/// sharecheck, and the loader's and temporary directory's.
pub fn isolated_vars() -> impl Iterator<Item = &'static str> {
    env::ALL
        .iter()
        .copied()
        .chain(["LD_PRELOAD", "LD_LIBRARY_PATH", "TMPDIR"])
}

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
        let shim = dir.join(libraries::SHIM);
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
    for var in isolated_vars() {
        cmd.env_remove(var);
    }
    cmd
}
