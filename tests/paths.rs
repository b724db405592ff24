//! Every way a program reaches the driver, each run under the shim on the simulated driver: the
//! shim must see each covered call, forward it unchanged (the program sees the driver's own
//! result) and write exactly one record for it.

mod common;
use common::*;
use sharecheck_core::schema::libraries;

/// The calls the program printed are exactly the calls the trace holds, with the same results.
fn assert_trace_matches_program(scratch: &Scratch, out: &std::process::Output) {
    let printed = printed_calls(out);
    assert!(!printed.is_empty(), "program printed no CALL lines");
    let traced = fn_ret(&scratch.records());
    assert_eq!(
        traced, printed,
        "trace (left) differs from what the program saw (right)"
    );
}

#[test]
fn direct_link_records_every_call_with_the_drivers_result() {
    let s = Scratch::new("direct_link");
    let libs = s.sim_libs();
    let exe = s.compile(
        "direct_cuda.c",
        "direct_cuda",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    let out = run_ok(&mut s.under_shim(&exe));
    assert_trace_matches_program(&s, &out);
    let traced = fn_ret(&s.records());
    // The documented codes came through: 704 for the second enable, 705 for the second disable.
    assert!(
        traced.contains(&("cuCtxEnablePeerAccess".into(), 704)),
        "{traced:?}"
    );
    assert!(
        traced.contains(&("cuCtxDisablePeerAccess".into(), 705)),
        "{traced:?}"
    );
    assert!(
        traced.contains(&("cuIpcOpenMemHandle_v2".into(), 201)),
        "{traced:?}"
    );
    assert_eq!(printed(&out, "CAN"), "1");
}

#[test]
fn per_thread_default_stream_build_records_ptds_and_ptsz_symbols() {
    let s = Scratch::new("direct_link_ptds");
    let libs = s.sim_libs();
    let exe = s.compile(
        "direct_cuda.c",
        "direct_cuda_ptds",
        &[
            "-DCUDA_API_PER_THREAD_DEFAULT_STREAM",
            &format!("-L{}", libs.display()),
            "-lcuda",
        ],
    );
    let out = run_ok(&mut s.under_shim(&exe));
    assert_trace_matches_program(&s, &out);
    let names: Vec<String> = fn_ret(&s.records()).into_iter().map(|(f, _)| f).collect();
    for expected in [
        "cuMemcpyPeer_ptds",
        "cuMemcpyPeerAsync_ptsz",
        "cuStreamAttachMemAsync_ptsz",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
}

#[test]
fn direct_link_of_hip_records_every_call() {
    let s = Scratch::new("direct_hip");
    let libs = s.sim_libs();
    let exe = s.compile(
        "direct_hip.c",
        "direct_hip",
        &[&format!("-L{}", libs.display()), "-lamdhip64"],
    );
    let out = run_ok(&mut s.under_shim(&exe));
    assert_trace_matches_program(&s, &out);
    let records = s.records();
    assert!(calls(&records)
        .iter()
        .all(|r| r["fn"].as_str().unwrap().starts_with("hip")));
    assert!(fn_ret(&records).contains(&("hipDeviceEnablePeerAccess".into(), 704)));
}

#[test]
fn dlopen_and_dlsym_get_the_shims_wrappers_for_covered_names_only() {
    let s = Scratch::new("dlsym_path");
    let exe = s.compile("dlsym_path.c", "dlsym_path", &["-ldl"]);
    let out = run_ok(&mut s.under_shim(&exe));
    assert_eq!(
        printed(&out, "OBJECT cuDeviceCanAccessPeer"),
        libraries::SHIM
    );
    assert_eq!(
        printed(&out, "OBJECT cuCtxEnablePeerAccess"),
        libraries::SHIM
    );
    // Not covered: the driver's own pointer, identical (same object, same symbol, same address).
    assert_eq!(
        printed(&out, "OBJECT cuMemAlloc_v2"),
        libraries::CUDA.soname()
    );
    assert_eq!(printed(&out, "EXACT cuMemAlloc_v2"), "1");
    // RTLD_DEFAULT as without the shim: nothing while the driver is RTLD_LOCAL ...
    assert_eq!(printed(&out, "OBJECT local-default:cuMemcpyPeer"), "?");
    assert_eq!(printed(&out, "OBJECT local-default:cuMemAlloc_v2"), "?");
    // ... the wrapper of a covered name once the driver is global.
    assert_eq!(
        printed(&out, "OBJECT default:cuMemcpyPeer"),
        libraries::SHIM
    );
    // Observed functions: wrapped while a check runs on them (a free), else the driver's own.
    assert_eq!(printed(&out, "OBJECT cuMemFree_v2"), libraries::SHIM);
    assert_eq!(
        printed(&out, "OBJECT default:cuMemAlloc_v2"),
        libraries::CUDA.soname()
    );
    assert_eq!(printed(&out, "SAME default:cuMemAlloc_v2"), "1");
    assert_trace_matches_program(&s, &out);
}

#[test]
fn runtime_style_resolution_substitutes_by_the_real_symbol_returned() {
    let s = Scratch::new("runtime_style");
    let exe = s.compile("runtime_style.c", "runtime_style", &["-ldl"]);
    let out = run_ok(&mut s.under_shim(&exe));
    assert_eq!(printed(&out, "OBJECT cuGetProcAddress_v2"), libraries::SHIM);
    // The runtime's probe passes through untouched.
    assert_eq!(printed(&out, "PROBE"), "0 null");
    // Its self-lookups return the shim's resolvers (v2 and the 4-argument v1).
    assert_eq!(printed(&out, "SAME resolver_v2"), "1");
    assert_eq!(printed(&out, "OBJECT resolver_v1"), libraries::SHIM);
    // Functions the shim does not cover: the driver's own pointer.
    assert_eq!(printed(&out, "OBJECT cuMemAlloc"), libraries::CUDA.soname());
    assert_eq!(printed(&out, "SAME cuMemAlloc"), "1");
    // Observed functions a check runs on: the shim's.
    assert_eq!(printed(&out, "OBJECT cuMemFree"), libraries::SHIM);
    assert_eq!(printed(&out, "OBJECT cuMemFreeAsync/ptsz"), libraries::SHIM);
    // Results and statuses the shim must not touch (the R580 table).
    assert_eq!(printed(&out, "RESOLVE cuMemcpyPeer@4000/2"), "0 2 null");
    assert_eq!(
        printed(&out, "RESOLVE cuLogicalEndpointCreate@99990/0"),
        "1 -1 null"
    );
    assert_eq!(
        printed(&out, "RESOLVE cuNoSuchFunction@12000/0"),
        "0 1 null"
    );
    assert_eq!(printed(&out, "RESOLVE_V1"), "0 ptr");
    assert_trace_matches_program(&s, &out);
    let names: Vec<String> = fn_ret(&s.records()).into_iter().map(|(f, _)| f).collect();
    for expected in [
        "cuMemcpyPeer",
        "cuMemcpyPeer_ptds",
        "cuStreamAttachMemAsync",
        "cuStreamAttachMemAsync_ptsz",
        "cuIpcOpenMemHandle",
        "cuIpcOpenMemHandle_v2",
        "cuMemcpyPeerAsync_ptsz",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
}

#[test]
fn hip_get_proc_address_substitutes_covered_functions() {
    let s = Scratch::new("hip_procaddress");
    let exe = s.compile("hip_procaddress.c", "hip_procaddress", &["-ldl"]);
    let out = run_ok(&mut s.under_shim(&exe));
    assert_eq!(printed(&out, "OBJECT hipGetProcAddress"), libraries::SHIM);
    assert_eq!(
        printed(&out, "OBJECT hipDeviceCanAccessPeer"),
        libraries::SHIM
    );
    assert_eq!(printed(&out, "OBJECT hipMalloc"), libraries::HIP.soname());
    assert_eq!(printed(&out, "SAME hipMalloc"), "1");
    // HIP answers a missing symbol with hipErrorInvalidValue and SYMBOL_NOT_FOUND: unchanged.
    assert_eq!(printed(&out, "MISSING"), "1 1");
    assert_trace_matches_program(&s, &out);
}

#[test]
fn real_hip_runtime_without_gpu_is_traced_with_its_own_codes() {
    // Debian's libamdhip64 (libamdhip64-dev) runs without a GPU and answers hipErrorNoDevice.
    let s = Scratch::new("real_hip");
    let exe = s.compile(
        "direct_hip.c",
        "direct_hip_real",
        &["-L/usr/lib/x86_64-linux-gnu", "-lamdhip64"],
    );
    let mut cmd = s.under_shim(&exe);
    cmd.env_remove("LD_LIBRARY_PATH");
    let out = run_ok(&mut cmd);
    assert_eq!(
        printed(&out, "COUNT"),
        "100 0",
        "expected the real runtime's hipErrorNoDevice"
    );
    assert_trace_matches_program(&s, &out);
    let records = s.records();
    let process = records
        .iter()
        .find(|r| r["event"] == "process")
        .expect("process record");
    assert!(process["exe"]
        .as_str()
        .unwrap()
        .ends_with("direct_hip_real"));
}

#[test]
fn rtld_next_from_another_library_keeps_its_meaning() {
    let s = Scratch::new("layered");
    let first = s.compile(
        "layered_first.c",
        "liblayered_first.so",
        &["-shared", "-fPIC", "-ldl"],
    );
    let second = s.compile(
        "layered_second.c",
        "liblayered_second.so",
        &["-shared", "-fPIC"],
    );
    let _ = (first, second);
    let dir = s.dir.display().to_string();
    let exe = s.compile(
        "layered_main.c",
        "layered_main",
        &[
            "-Wl,--no-as-needed",
            &format!("-L{dir}"),
            "-llayered_first",
            "-llayered_second",
            &format!("-Wl,-rpath,{dir}"),
        ],
    );
    let plain = run_ok(&mut std::process::Command::new(&exe));
    assert_eq!(printed(&plain, "LAYERED"), "102");
    let shimmed = run_ok(&mut s.under_shim(&exe));
    assert_eq!(
        printed(&shimmed, "LAYERED"),
        "102",
        "RTLD_NEXT became relative to the shim"
    );
}

#[test]
fn rtld_next_of_a_covered_name_from_an_interposer_before_the_shim_reaches_the_shim() {
    let s = Scratch::new("other_interposer");
    let libs = s.sim_libs();
    let other = s.compile(
        "other_interposer.c",
        "libother_interposer.so",
        &["-shared", "-fPIC", "-ldl"],
    );
    let exe = s.compile(
        "resolve_free_call.c",
        "resolve_free_call",
        &[&format!("-L{}", libs.display()), "-lcuda"],
    );
    let mut cmd = s.under_shim(&exe);
    cmd.env(
        "LD_PRELOAD",
        format!("{} {}", other.display(), shim().display()),
    );
    let out = run_ok(&mut cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("NEXT ") && stderr.contains(libraries::SHIM),
        "{stderr}"
    );
    assert_eq!(
        printed_calls(&out),
        vec![("cuDeviceCanAccessPeer".to_string(), 0)]
    );
    assert_eq!(fn_ret(&s.records()), printed_calls(&out));
}

/// A second copy of the shim (preloaded, and another copy dlopen'ed from another path) stands
/// aside: calls through it reach the driver untouched, and the process has one trace.
#[test]
fn a_second_copy_of_the_shim_stays_passive_and_forwards() {
    let s = Scratch::new("second_copy");
    let libs = s.sim_libs();
    let exe = s.compile(
        "second_copy.c",
        "second_copy",
        &[&format!("-L{}", libs.display()), "-lcuda", "-ldl"],
    );
    let copy = s.path("copy/libsharecheck.so");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(shim(), &copy).unwrap();
    let out = run_ok(s.under_shim(&exe).arg(&copy));
    assert_eq!(printed(&out, "CAN"), "1");
    assert_eq!(
        printed(&out, "SECOND"),
        "0 1",
        "the driver's answer through the second copy"
    );
    let files = std::fs::read_dir(s.traces()).unwrap().count();
    assert_eq!(files, 1, "one trace for one process");
    assert_trace_matches_program(&s, &out);
}

/// A library's constructor (run by `dlopen`, under the loader lock) starts a thread that makes a
/// covered call and joins it: the shim must not take the loader lock on that thread's first call
/// (it deadlocked: the driver was looked up with dlopen/dlsym and the shim's own object with
/// dladdr, all of which wait for the lock the constructor's thread holds).
#[test]
fn a_covered_call_from_a_thread_a_library_constructor_joins_does_not_deadlock() {
    let s = Scratch::new("ctor_thread");
    let libs = s.sim_libs();
    let lib = s.compile(
        "ctor_thread_lib.c",
        "libctor_thread.so",
        &[
            "-shared",
            "-fPIC",
            &format!("-L{}", libs.display()),
            "-lcuda",
            "-pthread",
        ],
    );
    let exe = s.compile("ctor_thread_main.c", "ctor_thread_main", &["-ldl"]);
    let mut cmd = s.under_shim(&exe);
    cmd.arg(&lib);
    let out = run_with_timeout(cmd, 30);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(printed(&out, "RESULT"), "0 1");
    let traced = fn_ret(&s.records());
    assert_eq!(traced, [("cuDeviceCanAccessPeer".to_string(), 0)]);
}

/// A program that unloads the driver after looking functions up through the shim: the shim keeps
/// the driver's function addresses, so the driver it read stays loaded and the call still works.
#[test]
fn a_driver_the_shim_forwards_to_stays_loaded_after_the_program_unloads_it() {
    let s = Scratch::new("dlclose_driver");
    let exe = s.compile("dlclose_driver.c", "dlclose_driver", &["-ldl"]);
    let out = run_ok(&mut s.under_shim(&exe));
    assert_eq!(printed(&out, "STILL_LOADED"), "1");
    assert_eq!(printed(&out, "AGAIN"), "0 1");
}
