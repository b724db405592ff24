//! `sharecheck run` with a fake shim: the environment PROG sees, exit statuses, signals, --sim,
//! the summary line and usage errors.

mod common;

use std::os::fd::FromRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{sharecheck, sharecheck_at, TempDir};
use sharecheck_core::schema::{self, env, libraries};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `sharecheck run ARGS... -- sh -c SCRIPT` in `dir` with the fake shim.
fn run_sh(dir: &TempDir, shim: &Path, args: &[&str], script: &str) -> Command {
    let mut cmd = sharecheck(dir);
    cmd.env(env::SHIM, shim)
        .arg("run")
        .args(args)
        .args(["--", "/bin/sh", "-c", script]);
    cmd
}

/// A script printing `$LD_PRELOAD|$SHARECHECK_TRACE|$SHARECHECK_JOB_KEY`.
fn print_env() -> String {
    format!(r#"echo "$LD_PRELOAD|${}|${}""#, env::TRACE, env::JOB_KEY)
}

#[test]
fn child_sees_shim_trace_pattern_and_job_key() {
    let dir = TempDir::new("env");
    let shim = dir.fake_shim("lib");
    let out = run_sh(&dir, &shim, &["--quiet"], &print_env())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let line = stdout(&out);
    let parts: Vec<&str> = line.trim_end().split('|').collect();
    assert_eq!(parts[0], shim.to_str().unwrap());
    // A directory of this run's own: DIR/sharecheck-trace/run-DATE-TIME-PID/%p.jsonl.
    let prefix = format!("{}/{}/run-", dir.path.display(), schema::DEFAULT_TRACE_DIR);
    let suffix = format!("/{}", schema::DEFAULT_TRACE_FILE);
    assert!(
        parts[1].starts_with(&prefix) && parts[1].ends_with(&suffix),
        "{}",
        parts[1]
    );
    assert_eq!(parts[2].len(), 32, "{line}");
    assert!(parts[2].bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
    // The default trace directory exists and is private.
    let mode = std::fs::metadata(dir.join(schema::DEFAULT_TRACE_DIR))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    // Every run gets a fresh key.
    let again = run_sh(&dir, &shim, &["-q"], &print_env()).output().unwrap();
    assert_ne!(stdout(&again), line);
}

#[test]
fn existing_settings_are_kept_and_flags_override() {
    let dir = TempDir::new("keep");
    let shim = dir.fake_shim("lib");
    // An existing LD_PRELOAD (space-separated, holding the shim already) keeps its other
    // entries, after the shim.
    let other = dir.fake_shim("other");
    let out = run_sh(&dir, &shim, &["-q"], &print_env())
        .env(
            "LD_PRELOAD",
            format!("{} {}", other.display(), shim.display()),
        )
        .env(env::JOB_KEY, "00112233445566778899aabbccddeeff")
        .env(env::TRACE, "/somewhere/%p.jsonl")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stdout(&out).trim_end(),
        format!(
            "{}:{}|/somewhere/%p.jsonl|00112233445566778899aabbccddeeff",
            shim.display(),
            other.display()
        )
    );
    assert!(!dir.join(schema::DEFAULT_TRACE_DIR).exists());

    // --trace (made absolute) wins over the environment; --options is appended to
    // SHARECHECK_OPTIONS, so its pairs win (later pairs override earlier ones).
    let out = run_sh(
        &dir,
        &shim,
        &[
            "-q",
            "--trace",
            "tr/%p-%h.jsonl",
            "--options=duplicate_limit=3:halt_on_error=1",
        ],
        &format!(r#"echo "${}|${}""#, env::TRACE, env::OPTIONS),
    )
    .env(env::TRACE, "/somewhere/%p.jsonl")
    .env(env::OPTIONS, "mode=strict:duplicate_limit=5")
    .output()
    .unwrap();
    assert_eq!(
        stdout(&out).trim_end(),
        format!(
            "{}/tr/%p-%h.jsonl|mode=strict:duplicate_limit=5:duplicate_limit=3:halt_on_error=1",
            dir.path.display()
        )
    );
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    assert!(dir.join("tr").is_dir());
}

/// A script printing `$SHARECHECK_OPTIONS`.
fn print_options() -> String {
    format!(r#"echo "${}""#, env::OPTIONS)
}

#[test]
fn option_flags_come_last_in_the_childs_options() {
    let dir = TempDir::new("optflags");
    let shim = dir.fake_shim("lib");
    let out = run_sh(
        &dir,
        &shim,
        &[
            "-q",
            "--mute",
            "cuCtxEnablePeerAccess.flags-not-zero, peer-access.unidirectional",
            "--duplicate-limit=7",
            "--options",
            "mode=report:duplicate_limit=3",
            "--mode",
            "strict",
            "--halt-on-error",
            "--error-exitcode",
            "5",
            "--mute=divergence.unlisted",
        ],
        &print_options(),
    )
    .env(
        env::OPTIONS,
        "mute=cuMemcpyPeer.null-context:error_exitcode=0",
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    // Inherited, then --options, then the flags (in the order of the keys, whatever the order
    // on the command line; every --mute ID in one pair).
    assert_eq!(
        stdout(&out).trim_end(),
        "mute=cuMemcpyPeer.null-context:error_exitcode=0:mode=report:duplicate_limit=3:\
         mode=strict:halt_on_error=1:error_exitcode=5:\
         mute=cuCtxEnablePeerAccess.flags-not-zero,peer-access.unidirectional,divergence.unlisted:\
         duplicate_limit=7"
    );

    // Flags alone; and without any, the inherited value is passed on untouched.
    let out = run_sh(&dir, &shim, &["-q", "--mode=report"], &print_options())
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim_end(), "mode=report");
    let out = run_sh(&dir, &shim, &["-q"], &print_options())
        .env(env::OPTIONS, "mode=strict")
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim_end(), "mode=strict");
    let out = run_sh(&dir, &shim, &["-q"], &print_options())
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim_end(), "");
}

#[test]
fn bad_option_values_are_reported_by_key_and_the_program_still_runs() {
    let dir = TempDir::new("badopts");
    let shim = dir.fake_shim("lib");
    let out = run_sh(
        &dir,
        &shim,
        &[
            "-q",
            "--options",
            "mode=loud:duplicate_limit=many:colour=red:mute=no.such-rule",
            "--halt-on-error",
        ],
        &format!(r#"echo started >&2; echo "${}""#, env::OPTIONS),
    )
    .env(env::OPTIONS, "error_exitcode=300")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Passed on as given: the shim reads the same text.
    assert_eq!(
        stdout(&out).trim_end(),
        "error_exitcode=300:mode=loud:duplicate_limit=many:colour=red:mute=no.such-rule:\
         halt_on_error=1"
    );
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 6, "{err}");
    for (line, needle) in lines.iter().zip([
        "error_exitcode=\"300\"",
        "mode=\"loud\"",
        "duplicate_limit=\"many\"",
        "unknown key `colour`",
        "`no.such-rule` is not a rule ID",
    ]) {
        assert!(
            line.starts_with(&format!("sharecheck: {}: ", env::OPTIONS)) && line.contains(needle),
            "{line:?} lacks {needle:?}:\n{err}"
        );
    }
    // Reported before PROG starts.
    assert_eq!(lines[5], "started");
}

#[test]
fn exit_status_is_propagated() {
    let dir = TempDir::new("exit");
    let shim = dir.fake_shim("lib");
    let out = run_sh(&dir, &shim, &["-q"], "exit 7").output().unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert!(out.stdout.is_empty());
    let out = run_sh(&dir, &shim, &["-q"], "exit 0").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn signal_death_exits_128_plus_signal() {
    let dir = TempDir::new("signal");
    let shim = dir.fake_shim("lib");
    let out = run_sh(&dir, &shim, &["-q"], "kill -9 $$").output().unwrap();
    assert_eq!(out.status.code(), Some(128 + 9));
    let err = stderr(&out);
    assert!(
        err.contains("sharecheck: /bin/sh was killed by signal 9 (SIGKILL)"),
        "{err}"
    );
    assert_eq!(err.matches("killed by signal").count(), 1);
}

#[test]
fn sigterm_is_forwarded_to_the_program() {
    let dir = TempDir::new("forward");
    let shim = dir.fake_shim("lib");
    let ready = dir.join("ready");
    let script = format!(
        r#"trap 'kill $!; exit 3' TERM; sleep 30 & touch '{}'; wait"#,
        ready.display()
    );
    let mut child = run_sh(&dir, &shim, &["-q"], &script)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the program never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sends a signal to the sharecheck process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "the program's TERM trap did not run"
    );
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn sim_offers_the_simulated_driver_through_ld_library_path() {
    let dir = TempDir::new("sim");
    let shim = dir.fake_shim("lib");
    let sim = dir.write("simlib/dummy_sim.so", "not really a library");
    let sim_hip = dir.write(
        &format!("simlib/{}", libraries::SIM_HIP),
        "not really a library either",
    );
    let tmp = dir.mkdir("tmp");
    let sonames: Vec<&str> = libraries::driver_sonames().collect();
    let cuda_names: Vec<&str> = libraries::CUDA.names().collect();
    let script = format!(
        r#"
        libdir=${{LD_LIBRARY_PATH%%:*}}
        echo "$LD_LIBRARY_PATH|${cuda}|${hip}|${state}|$libdir"
        for l in {sonames}; do
            echo "$l -> $(readlink "$libdir/$l")"
        done
        test -d "${state}" && echo state-ok
        stat -c %a "$libdir"
    "#,
        cuda = env::CUDA_LIBRARY,
        hip = env::HIP_LIBRARY,
        state = env::SIM_STATE_DIR,
        sonames = sonames.join(" "),
    );
    let out = run_sh(&dir, &shim, &["--sim", "-q"], &script)
        .env(env::SIM_LIBRARY, &sim)
        .env("LD_LIBRARY_PATH", "/opt/keep")
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    let mut lines = text.lines();
    let vars: Vec<&str> = lines.next().unwrap().split('|').collect();
    let libdir = vars[4];
    assert!(
        libdir.starts_with(&format!("{}/sharecheck-sim.", tmp.display())),
        "{text}"
    );
    assert_eq!(vars[0], format!("{libdir}:/opt/keep"));
    assert_eq!(vars[1], format!("{libdir}/{}", libraries::CUDA.soname()));
    assert_eq!(vars[2], format!("{libdir}/{}", libraries::HIP.soname()));
    assert!(vars[3].starts_with(&format!("{libdir}/")), "{text}");
    assert_eq!(
        sonames.len(),
        6,
        "libcuda.so.1, libcuda.so, libamdhip64.so[.7,.6,.5]"
    );
    // The CUDA names lead to the simulated driver, the HIP names to the HIP runtime beside it.
    for name in sonames {
        let target = if cuda_names.contains(&name) {
            &sim
        } else {
            &sim_hip
        };
        assert_eq!(
            lines.next().unwrap(),
            format!("{name} -> {}", target.display())
        );
    }
    assert_eq!(lines.next(), Some("state-ok"));
    assert_eq!(lines.next(), Some("700"));
    // Removed after the program exits.
    assert!(!Path::new(libdir).exists(), "{libdir} was left behind");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);

    // A state directory set by the user is kept.
    let out = run_sh(
        &dir,
        &shim,
        &["--sim", "-q"],
        &format!(r#"echo "${}""#, env::SIM_STATE_DIR),
    )
    .env(env::SIM_LIBRARY, &sim)
    .env(env::SIM_STATE_DIR, "/my/state")
    .env("TMPDIR", &tmp)
    .output()
    .unwrap();
    assert_eq!(stdout(&out).trim_end(), "/my/state");
}

#[test]
fn sim_finds_the_library_next_to_the_shim_or_says_where_it_looked() {
    let dir = TempDir::new("simfind");
    let shim = dir.fake_shim("lib");
    let tmp = dir.mkdir("tmp");
    // The usage error (exit 2) of a run whose library `lib` is missing beside the shim.
    let missing = |lib: &str| {
        let out = run_sh(&dir, &shim, &["--sim", "-q"], "exit 0")
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{}/lib/{lib} does not exist", dir.path.display())),
            "{err}"
        );
        err
    };
    let err = missing(libraries::SIM);
    assert!(err.contains(env::SIM_LIBRARY), "{err}");
    dir.write("lib/libsharecheck_sim.so", "");
    // The HIP runtime is looked for beside it.
    missing(libraries::SIM_HIP);
    dir.write(&format!("lib/{}", libraries::SIM_HIP), "");
    let out = run_sh(
        &dir,
        &shim,
        &["--sim", "-q"],
        &format!(r#"readlink "${}""#, env::CUDA_LIBRARY),
    )
    .env("TMPDIR", &tmp)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stdout(&out).trim_end(),
        format!("{}/lib/libsharecheck_sim.so", dir.path.display())
    );
}

#[test]
fn shim_is_searched_next_to_the_executable_then_in_lib() {
    let dir = TempDir::new("search");
    let bin = dir.mkdir("bin");
    let exe = bin.join("sharecheck");
    std::fs::copy(env!("CARGO_BIN_EXE_sharecheck"), &exe).unwrap();
    let run = || {
        // A copy just written may still be open for writing in a child that another test's
        // thread forked meanwhile (ETXTBSY until that child execs): try again briefly.
        for _ in 0..50 {
            match sharecheck_at(&exe, &dir)
                .args(["run", "-q", "--", "/bin/sh", "-c", r#"echo "$LD_PRELOAD""#])
                .output()
            {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                result => return result.unwrap(),
            }
        }
        panic!("{} stayed busy (ETXTBSY)", exe.display());
    };
    // A copy with no shim beside it finds the shim of the build that made it.
    let out = run();
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_sharecheck"))
        .parent()
        .unwrap()
        .join("libsharecheck.so");
    if built.is_file() {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(stdout(&out).trim_end(), built.to_string_lossy());
    } else {
        // Only this package was built: every place is named.
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{}/../lib/libsharecheck.so", bin.display())),
            "{err}"
        );
        assert!(err.contains(&built.to_string_lossy().into_owned()), "{err}");
    }

    dir.fake_shim("lib");
    let out = run();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stdout(&out).trim_end(),
        format!("{}/../lib/libsharecheck.so", bin.display())
    );

    dir.fake_shim("bin");
    let out = run();
    assert_eq!(
        stdout(&out).trim_end(),
        format!("{}/libsharecheck.so", bin.display())
    );

    // SHARECHECK_SHIM naming a missing file is an error, not a fallback.
    let out = sharecheck_at(&exe, &dir)
        .env(env::SHIM, "nope/libsharecheck.so")
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&format!(
        "{} is set to nope/libsharecheck.so, which is not a file",
        env::SHIM
    )));
}

#[test]
fn program_not_found_or_not_executable() {
    let dir = TempDir::new("notfound");
    let shim = dir.fake_shim("lib");
    let out = sharecheck(&dir)
        .env(env::SHIM, &shim)
        .args(["run", "--", "sharecheck-no-such-program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(stderr(&out).contains("cannot run sharecheck-no-such-program: not found in PATH"));
    // A program that never started leaves no run directory: `report` still reads the newest
    // run that ran, and says which.
    let base = dir.join(schema::DEFAULT_TRACE_DIR);
    let runs = || {
        std::fs::read_dir(&base)
            .map(|d| d.filter_map(Result::ok).count())
            .unwrap_or(0)
    };
    assert_eq!(
        runs(),
        0,
        "a run directory was left for a program that never started"
    );
    let out = run_sh(&dir, &shim, &[], &write_trace()).output().unwrap();
    assert_eq!(runs(), 1, "{out:?}");
    let out = sharecheck(&dir)
        .env(env::SHIM, &shim)
        .args(["run", "--", "./sharecheck-no-such-program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(runs(), 1);
    let out = sharecheck(&dir).args(["report"]).output().unwrap();
    // It names the run it reads, and what ran there (issue 26: the report never says which).
    assert!(
        stderr(&out).contains("sharecheck: reading ")
            && stderr(&out).contains(": /bin/sh -c ")
            && stderr(&out).contains(", started ")
            && stderr(&out).contains("(the newest of 1 run in ./"),
        "{out:?}"
    );
    dir.write("script.txt", "echo hi\n");
    let out = sharecheck(&dir)
        .env(env::SHIM, &shim)
        .args(["run", "--", "./script.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
}

/// A program standing in for traced processes: writes one trace record per pid into the file the
/// shim would have written (`$SHARECHECK_TRACE` with `%p` replaced).
fn write_trace() -> String {
    r#"
    f=$(printf '%s' "$TRACE_VARIABLE" | sed "s/%p/$$/")
    printf '{"v":2,"seq":0,"t":0,"tid":%s,"event":"process","pid":%s}\n{"seq":1,"t":1,"tid":1,"fn":"cuMemcpyPeer","a":{},"r":1,"findings":[{"rule":"R1","severity":"error","kind":"misuse","message":"m","doc":"d"},{"rule":"R2","severity":"warning","kind":"divergence","message":"m","doc":"d"}]}\n{"seq":2,"t":2,"tid":1,"fn":"cuMemcpyPeer","a":{},"r":0}\n' $$ $$ > "$f"
"#
    .replace("TRACE_VARIABLE", env::TRACE)
}

#[test]
fn summary_counts_the_traces_of_this_run_only() {
    let dir = TempDir::new("summary");
    let shim = dir.fake_shim("lib");
    // A trace of an earlier run is not counted.
    dir.write(
        &format!("{}/1.jsonl", schema::DEFAULT_TRACE_DIR),
        "{\"v\":2,\"event\":\"process\",\"pid\":1}\n{\"seq\":1,\"tid\":1,\"fn\":\"x\",\"r\":0}\n",
    );
    std::thread::sleep(Duration::from_millis(20));
    let script = format!(
        "{}\n/bin/sh -c '{}'",
        write_trace(),
        write_trace().replace('\'', r"'\''")
    );
    let out = run_sh(&dir, &shim, &[], &script).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "sharecheck printed on stdout");
    let err = stderr(&out);
    let head = format!(
        "sharecheck: 4 calls traced in 2 processes, 2 errors, 2 warnings, 0 infos; traces: {}/{}/run-",
        dir.path.display(),
        schema::DEFAULT_TRACE_DIR
    );
    assert!(err.trim_end().starts_with(&head), "{err}");

    // A custom pattern is globbed with %p as `*`.
    let out = run_sh(
        &dir,
        &shim,
        &["--trace", "custom/run-%p.jsonl"],
        &write_trace(),
    )
    .output()
    .unwrap();
    // The summary names the file written.
    let err = stderr(&out);
    let head = format!(
        "sharecheck: 2 calls traced in 1 process, 1 error, 1 warning, 0 infos; traces: {}/custom/run-",
        dir.path.display()
    );
    assert!(
        err.trim_end().starts_with(&head) && err.trim_end().ends_with(".jsonl"),
        "{err}"
    );

    // Nothing written: the summary says where it looked.
    let out = run_sh(&dir, &shim, &["--trace", "none/%p.jsonl"], "true")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "no trace was written (looked for {}/none/*.jsonl",
            dir.path.display()
        )),
        "{err}"
    );

    // --quiet: no summary at all.
    let out = run_sh(&dir, &shim, &["--quiet"], &write_trace())
        .output()
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

/// A stand-in for one traced process: one call record with one finding of `severity`, written
/// where the shim would write it, including its fallback name NAME.PID when NAME exists.
fn write_finding(severity: &str) -> String {
    format!(
        r#"
    f=$(printf '%s' "${trace}" | sed "s/%p/$$/")
    test -e "$f" && f="$f.$$"
    printf '{{"v":2,"seq":0,"event":"process","pid":%s}}\n{{"seq":1,"tid":1,"fn":"cuCtxEnablePeerAccess","a":{{}},"r":1,"findings":[{{"rule":"R","severity":"{severity}","kind":"misuse","message":"m","doc":"d"}}]}}\n' $$ > "$f"
"#,
        trace = env::TRACE
    )
}

#[test]
fn error_exitcode_applies_when_this_runs_traces_hold_an_error() {
    let dir = TempDir::new("errexit");
    let shim = dir.fake_shim("lib");
    let errors = write_finding("error");
    let run = |args: &[&str], script: &str, env_options: Option<&str>| {
        let mut cmd = run_sh(&dir, &shim, args, script);
        if let Some(options) = env_options {
            cmd.env(env::OPTIONS, options);
        }
        cmd.output().unwrap()
    };

    // PROG exits 0, its trace holds an error: N, and the summary as usual.
    let out = run(&["--error-exitcode", "9"], &errors, None);
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    assert!(
        stderr(&out).contains(" 1 error, 0 warnings, 0 infos;"),
        "{out:?}"
    );
    // --quiet: the same status, nothing printed.
    let out = run(&["-q", "--error-exitcode=9"], &errors, None);
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    // PROG's own failure is what sharecheck exits with.
    let out = run(
        &["-q", "--error-exitcode", "9"],
        &format!("{errors}\nexit 3"),
        None,
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // Not asked for, or only warnings: PROG's status.
    let out = run(&["-q"], &errors, None);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(
        &["-q", "--error-exitcode", "9"],
        &write_finding("warning"),
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // Through --options or the environment too; a later setting wins, 0 turns it off.
    let out = run(&["-q", "--options", "error_exitcode=4"], &errors, None);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let out = run(&["-q"], &errors, Some("error_exitcode=5"));
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    let out = run(
        &["-q", "--options=error_exitcode=6"],
        &errors,
        Some("error_exitcode=5"),
    );
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let out = run(
        &["-q", "--error-exitcode", "0"],
        &errors,
        Some("error_exitcode=5"),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // A bad value keeps the default (off), and PROG still runs.
    let out = run(&["-q", "--options", "error_exitcode=x"], &errors, None);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stderr(&out).contains("error_exitcode=\"x\""), "{out:?}");
}

#[test]
fn error_exitcode_counts_only_traces_this_run_wrote() {
    let dir = TempDir::new("errexit-old");
    let shim = dir.fake_shim("lib");
    // Earlier runs' traces, with errors, in the default directory and at a fixed name.
    let old_error = "{\"v\":2,\"event\":\"process\",\"pid\":1}\n\
                     {\"seq\":1,\"tid\":1,\"fn\":\"x\",\"r\":1,\
                     \"findings\":[{\"rule\":\"R\",\"severity\":\"error\"}]}\n";
    let default_dir = schema::DEFAULT_TRACE_DIR;
    dir.write(&format!("{default_dir}/1.jsonl"), old_error);
    dir.write(&format!("{default_dir}/2.jsonl.2"), old_error);
    dir.write("fixed.jsonl", old_error);
    std::thread::sleep(Duration::from_millis(20));

    for script in ["true".to_string(), write_finding("warning")] {
        let out = run_sh(&dir, &shim, &["--error-exitcode", "9"], &script)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(!stderr(&out).contains("1 errors"), "{out:?}");
    }

    // The shim's fallback name (NAME.PID, NAME being taken) is found, for a fixed --trace name
    // and in the default directory.
    let out = run_sh(
        &dir,
        &shim,
        &["--error-exitcode", "9", "--trace", "fixed.jsonl"],
        &write_finding("error"),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    // The name the shim fell back to, NAME.PID, is the one the summary gives.
    let err = stderr(&out);
    let named = err
        .trim_end()
        .rsplit_once("; traces: ")
        .map(|(_, t)| t.to_string())
        .unwrap_or_default();
    let fixed = format!("{}/fixed.jsonl.", dir.path.display());
    assert!(
        named.starts_with(&fixed) && named[fixed.len()..].bytes().all(|b| b.is_ascii_digit()),
        "{err}"
    );
    assert_eq!(
        err.trim_end()
            .rsplit_once("; traces: ")
            .map(|(h, _)| h.to_string())
            .unwrap_or_default(),
        "sharecheck: 1 call traced in 1 process, 1 error, 0 warnings, 0 infos"
    );
    let out = run_sh(
        &dir,
        &shim,
        &["--error-exitcode", "9"],
        &write_finding("error").replace(r#"test -e "$f" && "#, ""),
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(9), "{out:?}");
    assert!(
        stderr(&out).contains(" 1 error, 0 warnings, 0 infos;"),
        "{out:?}"
    );
}

#[test]
fn run_usage_errors_exit_2() {
    let dir = TempDir::new("run-usage");
    let shim = dir.fake_shim("lib");
    for (args, why) in [
        (&["run"][..], "required arguments were not provided"),
        (&["run", "--sim"], "<PROG>"),
        (&["run", "--"], "<PROG>"),
        (&["run", "true"], "`true` must come after `--`"),
        (
            &["run", "--bogus", "--", "true"],
            "unexpected argument '--bogus' found",
        ),
        // A typo gets a suggestion.
        (
            &["run", "--qiet", "--", "true"],
            "a similar argument exists: '--quiet'",
        ),
        (
            &["run", "--trace"],
            "a value is required for '--trace <PATTERN>'",
        ),
        (
            &["run", "--quiet=yes", "--", "true"],
            "unexpected value 'yes' for '--quiet'",
        ),
        (
            &["run", "--mode", "loud", "--", "true"],
            "`--mode` needs `report` or `strict`, not `loud`",
        ),
        (
            &["run", "--error-exitcode", "abc", "--", "true"],
            "`--error-exitcode` needs an exit status from 1 to 255, or 0 for off, not `abc`",
        ),
        (&["run", "--error-exitcode=256", "--", "true"], "not `256`"),
        (
            &["run", "--duplicate-limit=-1", "--", "true"],
            "`--duplicate-limit` needs a count",
        ),
        (
            &["run", "--mute", "no.such-rule", "--", "true"],
            "`no.such-rule` given to `--mute` is not a rule ID",
        ),
        (
            &["run", "--mute", ",", "--", "true"],
            "at least one rule ID",
        ),
        (
            &["run", "--halt-on-error=1", "--", "true"],
            "unexpected value '1' for '--halt-on-error'",
        ),
        (
            &["run", "--mode"],
            "a value is required for '--mode <MODE>'",
        ),
        (&["frobnicate"], "unrecognized subcommand 'frobnicate'"),
        (&["--bogus"], "unexpected argument '--bogus' found"),
        (&[], "Usage: sharecheck <COMMAND>"),
    ] {
        let out = sharecheck(&dir)
            .env(env::SHIM, &shim)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(
            err.contains("Usage: sharecheck") || err.contains("try '--help'"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_trace_pattern_the_shim_cannot_expand_stops_the_run() {
    let dir = TempDir::new("badpattern");
    let shim = dir.fake_shim("lib");
    for (args, inherited, source) in [
        (&["--trace", "t/%x.jsonl"][..], None, "--trace"),
        (&[], Some("/t/%q{RANK.jsonl"), env::TRACE),
    ] {
        let mut cmd = run_sh(&dir, &shim, args, "echo started");
        if let Some(pattern) = inherited {
            cmd.env(env::TRACE, pattern);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty(), "PROG ran: {out:?}");
        let err = stderr(&out);
        assert!(err.starts_with(&format!("sharecheck: {source} ")), "{err}");
        assert!(
            err.contains("unknown key %x") || err.contains("%q must be followed by {VAR}"),
            "{err}"
        );
    }
    // `%%` in the directory part is a plain `%`: the directory is created.
    let out = run_sh(&dir, &shim, &["-q", "--trace", "a%%b/%p.jsonl"], "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(dir.join("a%b").is_dir());
}

#[test]
fn help_and_version() {
    let dir = TempDir::new("help");
    let out = sharecheck(&dir).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for s in [
        "Usage: sharecheck <COMMAND>",
        "\n  run ",
        "\n  report ",
        "\n  rules ",
        "\n  explain ",
        "\n  cat ",
        "\n  clean ",
        "\n  completions ",
        "sharecheck help COMMAND",
        "--version",
    ] {
        assert!(text.contains(s), "{s} missing from:\n{text}");
    }
    assert_eq!(
        sharecheck(&dir).arg("help").output().unwrap().stdout,
        out.stdout
    );
    let run_help = stdout(&sharecheck(&dir).args(["help", "run"]).output().unwrap());
    for s in [
        "--sim",
        "--trace <PATTERN>",
        "--options",
        "--mode <MODE>",
        "--halt-on-error",
        "--error-exitcode <N>",
        "--mute <ID[,ID...]>",
        "--duplicate-limit <N>",
        "--trace-level <LEVEL>",
        "--quiet",
        env::SHIM,
        "128+N",
        "error_exitcode=N",
    ] {
        assert!(run_help.contains(s), "{s} missing from:\n{run_help}");
    }
    assert_eq!(
        stdout(&sharecheck(&dir).args(["run", "--help"]).output().unwrap()),
        run_help
    );
    let report_help = stdout(
        &sharecheck(&dir)
            .args(["report", "--help"])
            .output()
            .unwrap(),
    );
    for s in [
        "--format <FORMAT>",
        "perfetto",
        "--fail-on",
        "*.jsonl",
        "--baseline",
    ] {
        assert!(report_help.contains(s), "{s} missing from:\n{report_help}");
    }
    // Shell completions, generated from the same command tree.
    let out = sharecheck(&dir)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let script = stdout(&out);
    assert!(script.contains("_sharecheck()"), "{script}");
    assert!(
        script.contains("--trace-limit"),
        "the table's flags complete too"
    );
    let out = sharecheck(&dir).arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out).trim_end(),
        format!("sharecheck {} (trace schema v2)", env!("CARGO_PKG_VERSION"))
    );
}

/// Each run writes into a directory of its own with a manifest; `report` without a TRACE reads
/// the newest run (`--all`: every run); `--keep` and `clean` remove old runs (only directories
/// with a manifest).
#[test]
fn runs_are_kept_apart_and_report_reads_the_newest() {
    let dir = TempDir::new("runs");
    let shim = dir.fake_shim("lib");
    let base = dir.join(schema::DEFAULT_TRACE_DIR);
    let run = |args: &[&str], script: &str| run_sh(&dir, &shim, args, script).output().unwrap();
    assert_eq!(run(&[], &write_trace()).status.code(), Some(0));
    std::thread::sleep(Duration::from_millis(1100));
    let second = run(&[], "exit 3");
    assert_eq!(second.status.code(), Some(3));
    let runs: Vec<std::path::PathBuf> = {
        let mut v: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    assert_eq!(runs.len(), 2, "{runs:?}");
    let manifest = |d: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap()
    };
    let (first, last) = (manifest(&runs[0]), manifest(&runs[1]));
    assert_eq!(first["exit_status"], 0);
    assert_eq!(last["exit_status"], 3);
    assert_eq!(first["program"], "/bin/sh", "{first}");
    assert_eq!(first["args"][0], "-c", "{first}");
    assert!(last["end_unix_ns"].as_u64() >= last["start_unix_ns"].as_u64());
    // report: the newest run (no trace there: nothing to report), or every run.
    let report = |args: &[&str]| {
        sharecheck(&dir)
            .arg("report")
            .args(args)
            .arg("--format=json")
            .output()
            .unwrap()
    };
    let newest = report(&[]);
    assert_eq!(
        newest.status.code(),
        Some(2),
        "the newest run wrote no trace: {newest:?}"
    );
    let all = report(&["--all"]);
    assert_eq!(all.status.code(), Some(0), "{all:?}");
    let v: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(v["calls"], 2);
    // Retention: --keep 1 leaves the newest; clean removes the rest, and nothing else.
    dir.write(&format!("{}/notes.txt", schema::DEFAULT_TRACE_DIR), "mine");
    assert_eq!(run(&["--keep", "1"], "true").status.code(), Some(0));
    let left = std::fs::read_dir(&base).unwrap().count();
    assert_eq!(left, 2, "one run and notes.txt");
    let clean = sharecheck(&dir).arg("clean").output().unwrap();
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");
    assert!(
        stderr(&clean).contains("removed 1 run directory"),
        "{clean:?}"
    );
    let names: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["notes.txt"]);
}

/// `--trace /dev/null` asks for no trace: the summary says so (no "nothing was written" hint).
#[test]
fn a_trace_to_dev_null_is_no_trace() {
    let dir = TempDir::new("devnull");
    let shim = dir.fake_shim("lib");
    let out = run_sh(&dir, &shim, &["--trace", "/dev/null"], "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stderr(&out).trim_end(),
        "sharecheck: no trace was asked for (/dev/null)"
    );
}

/// A reader that went away (`| head`) ends a command quietly: no panic, no message.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = TempDir::new("closed-stdout");
    dir.write(
        "t/1.jsonl",
        concat!(
            r#"{"v":2,"seq":0,"t":0,"tid":1,"event":"process","pid":1,"ppid":0,"exe":"/x","shim_version":"0","t0_wall_ns":1,"t0_mono_ns":1}"#,
            "\n",
            r#"{"seq":1,"t":1,"tid":1,"fn":"cuMemcpyPeer","a":{},"r":1,"findings":[{"rule":"r","severity":"error","message":"m"}]}"#,
            "\n"
        ),
    );
    for args in [
        &["completions", "bash"][..],
        &["rules"],
        &["report", "t"],
        &["report", "--format", "sarif", "t"],
        &["report", "--format", "perfetto", "t"],
        &["cat", "t"],
        &["--help"],
    ] {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a live local array of two descriptors pipe fills.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: closes the read end this test owns: every write to the other end fails.
        unsafe { libc::close(fds[0]) };
        // SAFETY: the write end is ours, and given to the child alone.
        let write_end = unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) };
        let out = sharecheck(&dir)
            .args(args)
            .stdout(Stdio::from(write_end))
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
    }
}
