//! A driver without a function (the logical endpoints on a CUDA 13.0 driver), or no driver at all:
//! the documented "not supported" code and one clear log line, never a crash.

mod common;
use common::*;
use sharecheck_core::codes::NOT_SUPPORTED;
use sharecheck_core::names::cuda_result_name;
use sharecheck_core::schema::{env, libraries};

#[test]
fn a_function_the_driver_lacks_returns_not_supported_with_one_log_line() {
    let s = Scratch::new("driver_lacks_function");
    let stub = s.compile(
        "stub_cuda.c",
        libraries::CUDA.soname(),
        &["-shared", "-fPIC"],
    );
    // The program links the shim directly: its cu* symbols bind to the shim's exports.
    let exe = s.compile_linked_to_shim("endpoint_call.c", "endpoint_call", &[]);
    let mut cmd = s.linked_to_shim(&exe);
    cmd.env(env::CUDA_LIBRARY, &stub);
    let out = run_ok(&mut cmd);
    let printed = printed_calls(&out);
    assert_eq!(
        printed,
        vec![
            (
                "cuLogicalEndpointIdReserve".to_string(),
                i64::from(NOT_SUPPORTED)
            ),
            (
                "cuLogicalEndpointIdReserve".to_string(),
                i64::from(NOT_SUPPORTED)
            ),
            ("cuDeviceCanAccessPeer".to_string(), 0),
        ]
    );
    let not_supported = cuda_result_name(NOT_SUPPORTED).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("cuLogicalEndpointIdReserve"))
        .collect();
    assert_eq!(lines.len(), 1, "exactly one log line:\n{stderr}");
    assert!(
        lines[0].contains("CUDA 13.3") && lines[0].contains(not_supported),
        "{}",
        lines[0]
    );
    let records = s.records();
    let le = calls(&records)[0].clone();
    assert_eq!(le["fn"], "cuLogicalEndpointIdReserve");
    assert_eq!(le["r"], NOT_SUPPORTED);
    assert_eq!(le["forwarded"], false);
    // The out-parameter was not read (the driver never wrote it): the pointer, not `*baseLeId`.
    assert!(le["a"]["baseLeId"].is_string());
    assert!(le["a"].get("*baseLeId").is_none());
}

#[test]
fn no_driver_at_all_returns_not_supported_and_says_what_was_tried() {
    let s = Scratch::new("no_driver");
    let exe = s.compile_linked_to_shim("endpoint_call.c", "endpoint_call", &[]);
    let mut cmd = s.linked_to_shim(&exe);
    cmd.env_remove("LD_LIBRARY_PATH")
        .env(env::CUDA_LIBRARY, s.path("no-such-libcuda.so"));
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if soname_loads_here(libraries::CUDA.soname()) {
        // A machine with a real driver: the shim finds it by soname after the missing path,
        // says so once, and forwards to it.
        assert!(out.status.success(), "{stderr}");
        assert_eq!(
            stderr
                .matches("no-such-libcuda.so cannot be loaded (no such file); ignored")
                .count(),
            1,
            "{stderr}"
        );
        assert!(
            !stderr.contains("no CUDA driver library could be loaded"),
            "{stderr}"
        );
        assert!(printed_calls(&out)
            .iter()
            .all(|(_, rc)| *rc != i64::from(NOT_SUPPORTED)));
        return;
    }
    // The stub's cuDeviceCanAccessPeer is gone too: every call answers 801, nothing crashes.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed_calls(&out)
        .iter()
        .all(|(_, rc)| *rc == i64::from(NOT_SUPPORTED)));
    assert_eq!(
        stderr
            .matches("no CUDA driver library could be loaded")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("no-such-libcuda.so") && stderr.contains(libraries::CUDA.soname()),
        "{stderr}"
    );
}

#[test]
fn functions_the_program_never_calls_are_not_reported_missing() {
    let s = Scratch::new("missing_but_never_called");
    let stub = s.compile(
        "stub_cuda.c",
        libraries::CUDA.soname(),
        &["-shared", "-fPIC"],
    );
    let exe = s.compile_linked_to_shim("resolve_only.c", "resolve_only", &[]);
    let mut cmd = s.linked_to_shim(&exe);
    cmd.env(env::CUDA_LIBRARY, &stub);
    let out = run_ok(&mut cmd);
    assert_eq!(
        printed_calls(&out),
        vec![("cuDeviceCanAccessPeer".to_string(), 0)]
    );
    // Substitution looked at every covered function, the missing endpoints included: silently.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fn_ret(&s.records()), printed_calls(&out));
}

/// An empty driver path (to `dlopen`, the main program) or one naming the shim would make the
/// shim forward to itself forever: each is refused with one line, and the real driver is found
/// as usual, so the program runs exactly as without the setting.
#[test]
fn an_empty_or_self_pointing_driver_path_is_refused_and_the_driver_found_as_usual() {
    let s = Scratch::new("driver_path_self");
    let libs = s.sim_libs();
    let exe = s.compile(
        "direct_cuda.c",
        "direct_cuda",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    let reference = printed_calls(&run_ok(&mut s.under_shim(&exe)));
    let shim_path = shim().display().to_string();
    for (value, says) in [
        ("", "is empty"),
        (shim_path.as_str(), "names sharecheck itself"),
    ] {
        let mut cmd = s.under_shim(&exe);
        cmd.env(env::CUDA_LIBRARY, value);
        let out = run_with_timeout(cmd, 60);
        assert!(out.status.success(), "{value:?}: {out:?}");
        assert_eq!(
            printed_calls(&out),
            reference,
            "{value:?}: as without the setting"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(env::CUDA_LIBRARY))
            .collect();
        assert_eq!(lines.len(), 1, "{value:?}: one line:\n{stderr}");
        assert!(lines[0].contains(says), "{}", lines[0]);
    }
}

/// A program that looks for the 13.3 functions every way (dlsym of RTLD_DEFAULT and of the
/// driver's handle, cuGetProcAddress_v2 at 13000 and 13030) and falls back where they are
/// missing sees exactly the same answers under the shim as without it, on a driver that lacks
/// them. scripts/gpu-endpoint.sh runs the same program on R580.
#[test]
fn every_lookup_of_a_missing_function_answers_as_the_driver_does() {
    let s = Scratch::new("endpoint_probe");
    let stub = s.compile(
        "stub_cuda.c",
        libraries::CUDA.soname(),
        &["-shared", "-fPIC"],
    );
    let exe = s.compile("endpoint_probe.c", "endpoint_probe", &["-ldl"]);
    let plain = run_ok(
        std::process::Command::new(&exe)
            .env("LD_LIBRARY_PATH", &s.dir)
            .env_remove("LD_PRELOAD"),
    );
    let mut cmd = s.under_shim(&exe);
    cmd.env("LD_LIBRARY_PATH", &s.dir)
        .env(env::CUDA_LIBRARY, &stub);
    let shimmed = run_ok(&mut cmd);
    let (plain, shimmed) = (
        String::from_utf8_lossy(&plain.stdout).into_owned(),
        String::from_utf8_lossy(&shimmed.stdout).into_owned(),
    );
    assert!(plain.contains("PROBE fallback"), "{plain}");
    assert_eq!(
        plain.matches("DLSYM").count(),
        24,
        "every name, both ways:\n{plain}"
    );
    assert!(!plain.contains(" found"), "the stub has none:\n{plain}");
    assert_eq!(
        shimmed, plain,
        "under the shim (left) and without it (right)"
    );
}

/// Whether the dynamic linker finds a library by its soname here (as the shim would).
fn soname_loads_here(soname: &str) -> bool {
    let name = std::ffi::CString::new(soname).unwrap();
    // SAFETY: dlopen with a C string; a handle it returns is closed at once.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return false;
    }
    // SAFETY: the handle dlopen just returned.
    unsafe { libc::dlclose(handle) };
    true
}
