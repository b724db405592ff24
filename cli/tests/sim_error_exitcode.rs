//! `sharecheck run --sim --error-exitcode` end to end: the real shim and the simulated driver
//! (both built by `cargo build --workspace`, found next to the `sharecheck` binary) and a C
//! program that breaks, or keeps, the Flags rule of cuCtxEnablePeerAccess.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{sharecheck, TempDir};
use sharecheck_core::schema::{self, libraries};

/// Enables peer access from device 0's primary context to device 1's, with Flags = argv[1].
/// Flags 1 breaks cuCtxEnablePeerAccess.flags-not-zero (severity error). Exits 0 whatever the
/// driver answers, so that only sharecheck can turn the status into error_exitcode.
const ENABLE_PEER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);

#define MUST(call) do { CUresult r_ = (call); \
    if (r_ != 0) { fprintf(stderr, "%s -> %d\n", #call, r_); return 2; } } while (0)

int main(int argc, char **argv) {
    unsigned flags = argc > 1 ? (unsigned)atoi(argv[1]) : 0;
    CUdevice dev0, dev1;
    CUcontext ctx0, ctx1;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev0, 0));
    MUST(cuDeviceGet(&dev1, 1));
    MUST(cuDevicePrimaryCtxRetain(&ctx0, dev0));
    MUST(cuDevicePrimaryCtxRetain(&ctx1, dev1));
    MUST(cuCtxSetCurrent(ctx0));
    printf("cuCtxEnablePeerAccess(ctx1, %u) -> %d\n", flags, cuCtxEnablePeerAccess(ctx1, flags));
    return 0;
}
"#;

/// The shim and the simulated driver next to the `sharecheck` binary, where `sharecheck run`
/// finds them.
fn built_libraries() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_sharecheck"))
        .parent()
        .unwrap()
        .to_path_buf();
    for lib in [libraries::SHIM, libraries::SIM, libraries::SIM_HIP] {
        assert!(
            dir.join(lib).is_file(),
            "{} is missing: run `cargo build --workspace` first",
            dir.join(lib).display()
        );
    }
    dir
}

/// Compiles ENABLE_PEER against the simulated driver (linked as libcuda.so, as a program
/// built with -lcuda is).
fn compile(dir: &TempDir, libs: &Path) -> PathBuf {
    let src = dir.write("enable_peer.c", ENABLE_PEER);
    let link = dir.mkdir("link");
    let cuda = libraries::CUDA;
    std::os::unix::fs::symlink(libs.join(libraries::SIM), link.join(cuda.link_name())).unwrap();
    let exe = dir.join("enable_peer");
    let out = Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg(format!("-L{}", link.display()))
        .arg(cuda.link_flag())
        .output()
        .expect("cc");
    assert!(out.status.success(), "cc failed: {out:?}");
    exe
}

/// `sharecheck run --sim [ARGS] -- enable_peer FLAGS`, tracing into `DIR/<tag>/`.
fn run(dir: &TempDir, exe: &Path, tag: &str, args: &[&str], flags: &str) -> Output {
    sharecheck(dir)
        .args(["run", "--sim", "--trace"])
        .arg(dir.join(tag).join(schema::DEFAULT_TRACE_FILE))
        .args(args)
        .arg("--")
        .arg(exe)
        .arg(flags)
        .output()
        .unwrap()
}

/// The findings in the traces under `DIR/<tag>/`, for failure messages.
fn findings(dir: &TempDir, tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir.join(tag)).into_iter().flatten() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            for f in record["findings"].as_array().into_iter().flatten() {
                found.push(format!("{} {}: {}", record["fn"], f["rule"], f["severity"]));
            }
        }
    }
    found
}

#[test]
fn error_exitcode_turns_an_error_finding_into_the_exit_status() {
    let libs = built_libraries();
    let dir = TempDir::new("sim-errexit");
    let exe = compile(&dir, &libs);

    // Flags = 1: an error finding. Without --error-exitcode, PROG's status.
    let out = run(&dir, &exe, "plain", &[], "1");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(&dir, &exe, "flags1", &["--error-exitcode", "9"], "1");
    assert_eq!(
        out.status.code(),
        Some(9),
        "Flags=1 should give an error finding (cuCtxEnablePeerAccess.flags-not-zero) and exit \
         9; findings in this run's traces: {:?}\n{out:?}",
        findings(&dir, "flags1")
    );

    // Flags = 0 is correct: PROG's status even with --error-exitcode.
    let out = run(&dir, &exe, "flags0", &["--error-exitcode", "9"], "0");
    assert_eq!(
        out.status.code(),
        Some(0),
        "findings: {:?}\n{out:?}",
        findings(&dir, "flags0")
    );
}
