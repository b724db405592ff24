//! The built library as a C program sees it: linked as `libcuda.so` through a directory of
//! symlinks, across processes (IPC export in a parent, import in a fork+exec'ed child), and under
//! an LD_PRELOADed library that exports the same names as the driver.
//!
//! Needs `cc` and the built `libsharecheck_sim.so` (`cargo build -p sharecheck-sim`; `cargo test`
//! builds it too), found in the target directory beside this test executable.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sharecheck_core::schema::{env, libraries};

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "sharecheck-sim-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create scratch directory");
        Scratch(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `cargo build -p sharecheck-sim -p sharecheck-sim-hip` into the target directory and profile
/// of this test: `cargo test` builds the unit-test harness of a cdylib crate, not the cdylib
/// itself.
fn build_library(profile_dir: &Path) -> Result<(), String> {
    let target_dir = profile_dir.parent().ok_or("no target directory")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "sharecheck-sim",
        "-p",
        "sharecheck-sim-hip",
        "--target-dir",
    ])
    .arg(target_dir);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
        None => return Err("unknown profile directory".into()),
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = cmd
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `target/<profile>/libsharecheck_sim.so` (the test runs from `target/<profile>/deps/`), brought
/// up to date first with `libsharecheck_sim_hip.so` beside it: cargo itself decides whether
/// anything needs rebuilding.
fn built_library() -> PathBuf {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .ok_or("no target/<profile>")?;
        let lib = profile_dir.join(libraries::SIM);
        let build = build_library(profile_dir);
        match (build, lib.is_file()) {
            (Ok(()), true) => Ok(lib),
            (Ok(()), false) => Err(format!("{} is missing after the build", lib.display())),
            // Without a working cargo (the test binary run by hand), use what is there.
            (Err(why), true) => {
                eprintln!(
                    "cannot rebuild the library ({why}); testing {}",
                    lib.display()
                );
                Ok(lib)
            }
            (Err(why), false) => Err(format!(
                "{} is missing and cannot be built: {why}",
                lib.display()
            )),
        }
    });
    match built {
        Ok(lib) => lib.clone(),
        Err(why) => panic!(
            "the simulated driver library is not available: {why}\n\
             build it with `cargo build -p sharecheck-sim` (same profile as the tests)"
        ),
    }
}

fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

fn run_checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The built library standing in for `driver`: the simulated CUDA driver, or the simulated HIP
/// runtime beside it.
fn library_for(driver: &libraries::Driver) -> PathBuf {
    let lib = built_library();
    lib.with_file_name(driver.sim)
}

/// Links each of `names` (driver sonames) in `dir` to the built library that stands in for it.
fn link_drivers(dir: &Path, names: impl Fn(&libraries::Driver) -> Vec<&'static str>) {
    for driver in &libraries::DRIVERS {
        for name in names(driver) {
            std::os::unix::fs::symlink(library_for(driver), dir.join(name)).expect("symlink");
        }
    }
}

/// A directory with every driver soname (`libcuda.so.1`, `libcuda.so`, `libamdhip64.so`, ...)
/// pointing at the built libraries, and the smoke program linked against them.
struct Fixture {
    dir: Scratch,
    smoke: PathBuf,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = Scratch::new(tag);
        link_drivers(dir.path(), |d| d.names().collect());
        let smoke = dir.path().join("smoke");
        run_checked(
            Command::new("cc")
                .arg("-o")
                .arg(&smoke)
                .arg(c_source("smoke.c"))
                .arg("-L")
                .arg(dir.path())
                .args(["-lcuda", "-lamdhip64", "-ldl"]),
            "cc smoke.c",
        );
        Fixture { dir, smoke }
    }

    /// The smoke program in `mode`, with the simulator's directory on LD_LIBRARY_PATH and a
    /// private state directory.
    fn smoke(&self, mode: &str) -> Command {
        let mut cmd = self.program(&self.smoke);
        cmd.arg(mode);
        cmd
    }

    /// `exe` with the simulator's directory on LD_LIBRARY_PATH, a private state directory and
    /// the simulator's defaults (two devices, peers, R580's behaviour).
    fn program(&self, exe: &Path) -> Command {
        let mut cmd = Command::new(exe);
        cmd.env("LD_LIBRARY_PATH", self.dir.path())
            .env(env::SIM_STATE_DIR, self.dir.path().join("state"))
            .env_remove("LD_PRELOAD")
            .env_remove(env::SIM_DEVICES)
            .env_remove(env::SIM_PEERS)
            .env_remove(env::SIM_BEHAVIOUR)
            .env_remove(env::SIM_DRIVER_VERSION)
            .env_remove(env::SIM_ATTRS)
            .env_remove(env::SIM_MAX_PEERS)
            .env_remove(env::SIM_CALL_LOG);
        cmd
    }
}

/// The CUDA IPC probe of the GPU scripts (`scripts/gpu/ipc_probe.c`: two processes, what the
/// documentation leaves open or calls undefined) measures on the simulated driver exactly what it
/// measured on R580 with two H100s (its results file), fact for fact. The two processes' lines
/// interleave, so they are compared sorted.
#[test]
fn the_ipc_probe_finds_on_the_simulator_what_it_found_on_r580() {
    let fx = Fixture::new("ipc-probe");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let include = root.join(".deps/cuda/nvidia/cu13/include");
    assert!(
        include.join("cuda.h").is_file(),
        "{} has no cuda.h: run scripts/fetch-deps.sh",
        include.display()
    );
    let probe = fx.dir.path().join("ipc_probe");
    run_checked(
        Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&probe)
            .arg(root.join("scripts/gpu/ipc_probe.c"))
            .arg("-I")
            .arg(&include)
            .arg("-L")
            .arg(fx.dir.path())
            .args(["-lcuda", "-ldl"]),
        "cc ipc_probe.c",
    );
    let out = run_checked(&mut fx.program(&probe), "ipc_probe");
    let measured = std::fs::read_to_string(
        root.join("scripts/gpu/results/2026-11-25-2xH100-R580-ipc-probe.txt"),
    )
    .expect("the R580 results");
    let facts = |text: &str| {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("FACT "))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    let on_r580 = facts(&measured);
    assert!(on_r580.len() > 30, "{measured}");
    assert_eq!(facts(&String::from_utf8_lossy(&out.stdout)), on_r580);
}

/// The stream-attach probe (`scripts/gpu/attach_probe.c`) measures on the simulated driver what
/// it measured on R580 with an H200 (its results file), fact for fact: the driver version aside,
/// and flags 0 included (the probe's own child dies of SIGSEGV inside the call on both).
#[test]
fn the_attach_probe_finds_on_the_simulator_what_it_found_on_r580() {
    let fx = Fixture::new("attach-probe");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let include = root.join(".deps/cuda/nvidia/cu13/include");
    let probe = fx.dir.path().join("attach_probe");
    run_checked(
        Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&probe)
            .arg(root.join("scripts/gpu/attach_probe.c"))
            .arg("-I")
            .arg(&include)
            .arg("-L")
            .arg(fx.dir.path())
            .args(["-lcuda", "-ldl"]),
        "cc attach_probe.c",
    );
    let out = run_checked(&mut fx.program(&probe), "attach_probe");
    let measured = std::fs::read_to_string(
        root.join("scripts/gpu/results/2026-11-26-H200-R580-attach-probe.txt"),
    )
    .expect("the R580 results");
    let facts = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("FACT "))
            // The driver version differs by design (the simulator answers 13.3).
            .map(|l| match l.find(" driver=") {
                Some(at) if l.starts_with("FACT device ") => l[..at].to_string(),
                _ => l.to_string(),
            })
            .collect()
    };
    let on_r580 = facts(&measured);
    assert!(on_r580.len() > 15, "{measured}");
    assert_eq!(facts(&String::from_utf8_lossy(&out.stdout)), on_r580);
}

#[test]
fn library_is_linked_symbolic() {
    let lib = built_library();
    match Command::new("readelf").arg("-d").arg(&lib).output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains("SYMBOLIC"),
                "no DT_SYMBOLIC / DF_SYMBOLIC:\n{text}"
            );
        }
        Err(e) => eprintln!("readelf not available ({e}); the procaddr test covers the binding"),
    }
}

#[test]
fn basics_through_the_c_abi() {
    let fx = Fixture::new("basics");
    let out = run_checked(&mut fx.smoke("basics"), "smoke basics");
    assert!(String::from_utf8_lossy(&out.stdout).contains("devices=2"));
    // A bad setting is reported once on stderr, naming the variable, and the default is used.
    let out = run_checked(
        fx.smoke("basics").env(env::SIM_DEVICES, "lots"),
        "smoke basics with a bad device count",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches(env::SIM_DEVICES).count(), 1, "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("devices=2"));
    let out = run_checked(
        fx.smoke("basics").env(env::SIM_DEVICES, "3"),
        "smoke basics with 3 devices",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("devices=3"));
}

#[test]
fn ipc_export_in_parent_import_in_exec_child() {
    let fx = Fixture::new("ipc");
    let log = fx.dir.path().join("calls.log");
    let out = run_checked(
        fx.smoke("ipc-parent").env(env::SIM_CALL_LOG, &log),
        "smoke ipc-parent",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ipc-child: ok"), "{stdout}");
    assert!(stdout.contains("ipc-parent: ok"), "{stdout}");
    // Both processes appended to the call log, one exported name per line.
    let calls = std::fs::read_to_string(&log).expect("call log");
    let lines: Vec<&str> = calls.lines().collect();
    for name in [
        "cuIpcGetMemHandle",
        "cuIpcOpenMemHandle_v2",
        "cuIpcOpenMemHandle",
        "cuIpcOpenEventHandle",
        "cuLogicalEndpointImport",
    ] {
        assert!(
            lines.contains(&name),
            "{name} not in the call log:\n{calls}"
        );
    }
    assert_eq!(
        lines
            .iter()
            .filter(|l| **l == "cuIpcCloseMemHandle")
            .count(),
        3
    );
    assert!(lines.iter().all(|l| l.starts_with("cu")), "{calls}");
}

#[test]
fn hip_ipc_of_an_interior_pointer_across_processes() {
    let fx = Fixture::new("hip-ipc");
    let out = run_checked(&mut fx.smoke("hip-ipc-parent"), "smoke hip-ipc-parent");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("hip-ipc-child: ok"), "{stdout}");
    assert!(stdout.contains("hip-ipc-parent: ok"), "{stdout}");
}

#[test]
fn get_proc_address_hands_out_own_definitions_under_ld_preload() {
    let fx = Fixture::new("procaddr");
    let out = run_checked(&mut fx.smoke("procaddr"), "smoke procaddr");
    assert!(String::from_utf8_lossy(&out.stdout).contains("preloaded=0"));

    let fake = fx.dir.path().join("libfake_peer.so");
    run_checked(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&fake)
            .arg(c_source("fake_peer.c")),
        "cc fake_peer.c",
    );
    let out = run_checked(
        fx.smoke("procaddr").env("LD_PRELOAD", &fake),
        "smoke procaddr under LD_PRELOAD",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("preloaded=1"),
        "the preload was not in effect:\n{stdout}"
    );
    assert!(stdout.contains("procaddr: ok"), "{stdout}");
}

#[test]
fn max_peers_from_the_environment_and_query_functions() {
    let fx = Fixture::new("queries");
    // LIMIT (the argument): how many peer grants the program expects to fit in one context.
    let queries = |limit: &str| {
        let mut cmd = fx.smoke("queries");
        cmd.arg(limit).env(env::SIM_DEVICES, "3");
        cmd
    };
    let out = run_checked(
        queries("1").env(env::SIM_MAX_PEERS, "1"),
        "smoke queries with one peer grant per context",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("queries: ok"));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A bad value: one line on stderr naming the variable from each library that reads it (the
    // program calls both the CUDA driver and the HIP runtime), and no limit.
    let out = run_checked(
        queries("2").env(env::SIM_MAX_PEERS, "one"),
        "smoke queries with a bad SHARECHECK_SIM_MAX_PEERS",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0], lines[1], "{stderr}");
    assert!(stderr.contains(env::SIM_MAX_PEERS), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("queries: ok"));
    // Unset: no limit.
    run_checked(&mut queries("2"), "smoke queries without a limit");
}

/// Each library carries the soname of the vendor library it stands in for (`libcuda.so.1`,
/// `libamdhip64.so.5`) and exports that API's functions only: a program linked against the
/// unversioned names (as `cc -lcuda -lamdhip64` links) runs where only the vendor's sonames
/// exist, and each API comes from its own library. Before, the library had no soname, so such a
/// program needed `libcuda.so` and `libamdhip64.so` at run time (the development links a GPU
/// machine may lack).
#[test]
fn a_program_linked_against_the_simulator_needs_the_vendor_sonames() {
    let linked = Scratch::new("soname-link");
    link_drivers(linked.path(), |d| vec![d.link_name()]);
    let exe = linked.path().join("smoke");
    run_checked(
        Command::new("cc")
            .arg("-o")
            .arg(&exe)
            .arg(c_source("smoke.c"))
            .arg("-L")
            .arg(linked.path())
            .args(["-lcuda", "-lamdhip64", "-ldl"]),
        "cc smoke.c",
    );
    // Run where only the versioned sonames exist.
    let fx = Fixture::new("soname-run");
    let only = Scratch::new("soname-only");
    link_drivers(only.path(), |d| {
        if d.sim == libraries::SIM {
            vec!["libcuda.so.1"]
        } else {
            vec!["libamdhip64.so.5"]
        }
    });
    for mode in ["basics", "hip-ipc-parent"] {
        let mut cmd = fx.program(&exe);
        cmd.env("LD_LIBRARY_PATH", only.path()).arg(mode);
        run_checked(
            &mut cmd,
            &format!("smoke {mode} with only the vendor sonames"),
        );
    }
    // Each library exports its own API: the program's HIP calls come from the HIP library.
    let libs = |d: &libraries::Driver| {
        let out = Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(library_for(d))
            .output()
            .expect("nm (binutils)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (cuda, hip) = (libs(&libraries::CUDA), libs(&libraries::HIP));
    assert!(
        cuda.contains(" T cuInit\n") && !cuda.contains(" T hip"),
        "{cuda}"
    );
    assert!(
        hip.contains(" T hipInit\n") && !hip.contains(" T cu"),
        "{hip}"
    );
}
