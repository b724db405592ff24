//! Shared helpers of the integration tests: built artifacts, C programs, runs under the shim,
//! and reading traces back.

#![allow(dead_code)]

pub mod scenarios;

use serde_json::Value;
use sharecheck_core::schema::{env, libraries};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const FETCH_HINT: &str = "run scripts/fetch-deps.sh, then cargo build --workspace";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`: the test executable lives in its `deps/`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf()
}

fn artifact(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(p.exists(), "{} is missing: {FETCH_HINT}", p.display());
    p
}

pub fn shim() -> PathBuf {
    artifact(libraries::SHIM)
}

pub fn cli() -> PathBuf {
    artifact("sharecheck")
}

pub fn cuda_include() -> PathBuf {
    let p = std::env::var_os(env::dev::CUDA_INCLUDE)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".deps/cuda/nvidia/cu13/include"));
    assert!(
        p.join("cuda.h").exists(),
        "{} has no cuda.h: {FETCH_HINT}",
        p.display()
    );
    p
}

/// A scratch directory for one test, under target/ (kept on failure for inspection).
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = target_dir().join("itest").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A directory of symlinks that makes the simulated driver `libcuda` and the simulated HIP
    /// runtime `libamdhip64`.
    pub fn sim_libs(&self) -> PathBuf {
        let dir = self.path("simlib");
        std::fs::create_dir_all(&dir).unwrap();
        for driver in libraries::DRIVERS {
            for name in driver.names() {
                let link = dir.join(name);
                if !link.exists() {
                    std::os::unix::fs::symlink(artifact(driver.sim), &link).unwrap();
                }
            }
        }
        dir
    }

    pub fn traces(&self) -> PathBuf {
        let dir = self.path("traces");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Compiles `tests/c/<source>` (C, or C++ for `.cc`) into this directory.
    pub fn compile(&self, source: &str, out: &str, extra: &[&str]) -> PathBuf {
        let src = root().join("tests/c").join(source);
        let exe = self.path(out);
        let cxx = source.ends_with(".cc");
        let mut cmd = Command::new(if cxx { "c++" } else { "cc" });
        cmd.arg(if cxx { "-std=c++17" } else { "-std=gnu11" })
            .args(["-Wall", "-Wextra", "-Werror", "-g", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg(format!("-I{}", cuda_include().display()))
            .arg(format!("-I{}", root().join("include").display()))
            .args(extra);
        let output = cmd.output().expect("run the C compiler");
        assert!(
            output.status.success(),
            "compiling {source} failed ({cmd:?}):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        exe
    }

    /// Compiles a program that links `libsharecheck.so` itself (no preload): its cu*/hip*
    /// symbols bind to the shim's exports. Run it with [`Scratch::linked_to_shim`].
    pub fn compile_linked_to_shim(&self, source: &str, out: &str, extra: &[&str]) -> PathBuf {
        let target = target_dir().display().to_string();
        let mut args = vec![
            format!("-L{target}"),
            "-lsharecheck".to_string(),
            format!("-Wl,-rpath,{target}"),
        ];
        args.extend(extra.iter().map(std::string::ToString::to_string));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.compile(source, out, &args)
    }

    /// Like [`Scratch::under_shim`], for a program that links the shim instead of preloading it.
    pub fn linked_to_shim(&self, program: &Path) -> Command {
        let mut cmd = self.under_shim(program);
        cmd.env_remove("LD_PRELOAD");
        cmd
    }

    /// A command that runs under the shim (LD_PRELOAD) on the simulated driver, tracing into
    /// `traces/`.
    pub fn under_shim(&self, program: &Path) -> Command {
        let libs = self.sim_libs();
        let mut cmd = Command::new(program);
        cmd.env("LD_PRELOAD", shim())
            .env("LD_LIBRARY_PATH", &libs)
            .env(env::TRACE, self.traces().join("%p.jsonl"))
            .env(env::SIM_STATE_DIR, self.path("simstate"))
            .env(env::JOB_KEY, "00112233445566778899aabbccddeeff")
            .env_remove(env::LOG)
            .env_remove(env::OPTIONS)
            .env_remove(env::CUDA_LIBRARY)
            .env_remove(env::HIP_LIBRARY);
        cmd
    }

    /// What `program scenario` wrote on stderr under the shim with no trace (it must succeed).
    pub fn untraced_stderr(&self, program: &Path, scenario: &str) -> String {
        let mut cmd = self.under_shim(program);
        cmd.arg(scenario).env_remove(env::TRACE);
        String::from_utf8_lossy(&run_ok(&mut cmd).stderr).into_owned()
    }

    /// Every record of every trace file, each file's records in order.
    pub fn records(&self) -> Vec<Value> {
        read_records(&self.traces())
    }
}

pub fn read_records(dir: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    let rings: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.to_string_lossy().ends_with(sharecheck_core::ring::SUFFIX))
        .collect();
    assert!(
        rings.is_empty(),
        "a process that exited cleanly removes its ring file: {rings:?}"
    );
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.ends_with('\n'),
            "{} ends with a cut record",
            file.display()
        );
        // As the CLI reads them: the first record is the process record (`"v":2`), whose pid
        // every record after it gets, with its wall-clock time (`ts_ns`: `t0_wall_ns` + `t`).
        let mut pid = None;
        let mut t0_wall_ns = 0;
        // Whitespace-only lines are padding (a thread's chunk closed before its first record).
        for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let mut v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}): {line}", file.display(), i + 1));
            if i == 0 {
                assert_eq!(
                    v["v"],
                    2,
                    "{}: the first record is not the process record",
                    file.display()
                );
                assert_eq!(v["event"], "process", "{}", file.display());
                pid = Some(v["pid"].clone());
                t0_wall_ns = v["t0_wall_ns"].as_u64().unwrap();
            } else {
                assert!(v.get("pid").is_none() && v.get("v").is_none(), "{line}");
                v["pid"] = pid.clone().unwrap();
            }
            v["ts_ns"] = (t0_wall_ns + v["t"].as_u64().unwrap()).into();
            out.push(v);
        }
    }
    out
}

/// Call records (not events), in order per process: by time, then by `seq` (which increases
/// along each thread's records).
pub fn calls(records: &[Value]) -> Vec<&Value> {
    let mut calls: Vec<&Value> = records.iter().filter(|r| !r["fn"].is_null()).collect();
    calls.sort_by_key(|r| (r["pid"].as_u64(), r["t"].as_u64(), r["seq"].as_u64()));
    calls
}

/// The functions of the successful calls whose names start with one of `prefixes`, in order.
pub fn succeeded(records: &[Value], prefixes: &[&str]) -> Vec<String> {
    calls(records)
        .iter()
        .filter(|c| c["r"] == 0)
        .filter_map(|c| c["fn"].as_str())
        .filter(|f| prefixes.iter().any(|p| f.starts_with(p)))
        .map(str::to_owned)
        .collect()
}

/// `(fn, ret)` of every call record, in order.
pub fn fn_ret(records: &[Value]) -> Vec<(String, i64)> {
    calls(records)
        .iter()
        .map(|r| {
            (
                r["fn"].as_str().unwrap().to_string(),
                r["r"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Runs and asserts success; returns the output.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed with {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `CALL <symbol> <ret>` lines a test program printed.
pub fn printed_calls(out: &Output) -> Vec<(String, i64)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("CALL "))
        .map(|l| {
            let (name, ret) = l.rsplit_once(' ').expect("CALL name ret");
            (name.to_string(), ret.parse().expect("ret"))
        })
        .collect()
}

/// The `KEY value` line a test program printed.
pub fn printed(out: &Output, key: &str) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")).map(str::to_string))
        .unwrap_or_else(|| {
            panic!(
                "program printed no {key} line:\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
}

/// Runs a command to its end, failing the test if it takes longer than `seconds` (a hang is a
/// failure, never a skip).
pub fn run_with_timeout(mut cmd: Command, seconds: u64) -> Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the program");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= seconds {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the program hung (killed after {seconds} s): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
