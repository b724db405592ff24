//! Findings a reviewer can act on (issue 26): frames named from the symbol table without `-g`,
//! file:line and inlined functions with it, baselines and suppressions by function name, so that
//! a rebuild that moves the code moves nothing in the review.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `tests/c/triage.c` as `name` with `flags` (after the harness's `-g`).
fn triage(s: &Scratch, name: &str, flags: &[&str]) -> PathBuf {
    let libs = s.sim_libs();
    let link = format!("-L{}", libs.display());
    let mut extra = vec![link.as_str(), "-lcuda"];
    extra.extend_from_slice(flags);
    s.compile("triage.c", name, &extra)
}

/// Runs `exe` under the shim into `traces/<run>` and returns that directory.
fn traced(s: &Scratch, exe: &Path, run: &str) -> PathBuf {
    let dir = s.path(run);
    let out = s
        .under_shim(exe)
        .env(
            sharecheck_core::schema::env::TRACE,
            dir.join("%p.jsonl").to_str().unwrap(),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dir
}

fn report(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(cli())
        .arg("report")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Without `-g` the symbol table still names the helper and `main`; with it, file:line too.
#[test]
fn frames_are_named_with_and_without_debug_information() {
    let s = Scratch::new("triage_names");
    let plain = triage(&s, "triage_nog", &["-g0"]);
    let (_, text) = report(&[traced(&s, &plain, "nog").as_os_str()]);
    assert!(text.contains("flags-not-zero"), "{text}");
    let program = plain.to_string_lossy().into_owned();
    assert!(
        text.contains(&format!("#0 {program}+0x")) && text.contains(" enable_with_flags\n"),
        "the symbol table's name, no line: {text}"
    );
    assert!(text.contains(" main\n"), "{text}");

    // Live, on stderr: the symbol table's names too (read only because there is a finding).
    let live = s.under_shim(&plain).output().unwrap();
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert!(
        stderr.contains(&format!("#0 {program}+0x"))
            && stderr.contains(" (enable_with_flags+0x")
            && stderr.contains(" (main+0x"),
        "{stderr}"
    );

    let debug = triage(&s, "triage_g", &["-O0"]);
    let (_, text) = report(&[traced(&s, &debug, "g").as_os_str()]);
    assert!(
        text.contains(" enable_with_flags at ") && text.contains("triage.c:24"),
        "{text}"
    );
    assert!(text.contains(" main at "), "{text}");
}

/// A program started by a name found on `PATH` that is not its file's (a link: `python3` for
/// `python3.12`) has its frames named by its file: the loader names the main program by
/// `argv[0]`, which names no file in the working directory.
#[test]
fn a_program_started_through_a_link_on_path_is_named_by_its_file() {
    let s = Scratch::new("triage_link");
    let plain = triage(&s, "triage_linked", &["-g0"]);
    let bin = s.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&plain, bin.join("triage-link")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let live = s
        .under_shim(Path::new("triage-link"))
        .env("PATH", path)
        .env_remove(sharecheck_core::schema::env::TRACE)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&live.stderr);
    let program = plain.to_string_lossy().into_owned();
    assert!(
        stderr.contains("flags-not-zero")
            && stderr.contains(&format!("#0 {program}+0x"))
            && stderr.contains(" (enable_with_flags+0x")
            && !stderr.contains("triage-link"),
        "{stderr}"
    );
}

/// A helper inlined into `main` is a frame of its own: its name and line, then the function it
/// was inlined into.
#[test]
fn an_inlined_function_is_shown_inside_its_caller() {
    let s = Scratch::new("triage_inlined");
    let exe = triage(&s, "triage_inlined", &["-O2", "-DINLINED"]);
    let (_, text) = report(&[traced(&s, &exe, "inlined").as_os_str()]);
    let frame = text
        .lines()
        .position(|l| l.contains(" enable_with_flags at ") && l.contains("triage.c:24"))
        .unwrap_or_else(|| panic!("no inlined frame: {text}"));
    let next = text.lines().nth(frame + 1).unwrap_or("");
    assert!(
        next.contains("(inlined into main at ") && next.contains("triage.c:"),
        "{text}"
    );
}

/// A function inserted above the bad call moves its offset; the baseline, keyed by the function
/// the call is in, does not move: nothing new, nothing gone, exit 0. The call moved to another
/// function is new.
#[test]
fn a_baseline_survives_a_rebuild_that_moves_the_code() {
    let s = Scratch::new("triage_baseline");
    let before = traced(&s, &triage(&s, "triage_a", &["-g0"]), "before");
    let after = traced(&s, &triage(&s, "triage_b", &["-g0", "-DEXTRA"]), "after");
    let (code, text) = report(&["--baseline".as_ref(), before.as_os_str(), after.as_os_str()]);
    assert!(
        text.contains("BASELINE") && text.contains(": 0 findings new, 0 gone"),
        "{text}"
    );
    assert_eq!(code, 0, "nothing new: {text}");
    // Rebuilt in place, as CI does: the earlier run's offsets now lie elsewhere in the file; the
    // names the shim recorded at the call still key it.
    let path = triage(&s, "triage_same", &["-g0"]);
    let first = traced(&s, &path, "same-before");
    triage(&s, "triage_same", &["-g0", "-DEXTRA"]);
    let second = traced(&s, &path, "same-after");
    let (code, text) = report(&["--baseline".as_ref(), first.as_os_str(), second.as_os_str()]);
    assert!(text.contains(": 0 findings new, 0 gone"), "{text}");
    assert_eq!(code, 0, "{text}");
    // The same program with -g keys the same way (the name, not how it was found).
    let with_g = traced(&s, &triage(&s, "triage_c", &["-O0"]), "with-g");
    let (code, text) = report(&[
        "--baseline".as_ref(),
        before.as_os_str(),
        with_g.as_os_str(),
    ]);
    assert_eq!(code, 0, "{text}");
    // The bad call moved to another function is another finding: new, and the old one gone.
    let renamed = traced(
        &s,
        &triage(
            &s,
            "triage_d",
            &["-g0", "-Denable_with_flags=enable_elsewhere"],
        ),
        "renamed",
    );
    let (code, text) = report(&[
        "--baseline".as_ref(),
        before.as_os_str(),
        renamed.as_os_str(),
    ]);
    assert!(
        text.contains(": 1 finding new, 1 gone")
            && text.contains(
                "new:  cuCtxEnablePeerAccess.flags-not-zero in cuCtxEnablePeerAccess at enable_elsewhere"
            ),
        "{text}"
    );
    assert_eq!(code, 1, "{text}");
}

/// `fun:` names a function of the program whole; `--gen-suppressions` writes the innermost one
/// of the program's own code, and that line suppresses the finding in a rebuilt program too.
#[test]
fn suppressions_name_the_programs_functions() {
    let s = Scratch::new("triage_supp");
    let a = traced(&s, &triage(&s, "triage_a", &["-g0"]), "a");
    let b = traced(&s, &triage(&s, "triage_b", &["-g0", "-DEXTRA"]), "b");
    let (code, generated) = report(&["--gen-suppressions".as_ref(), a.as_os_str()]);
    assert_eq!(code, 0, "{generated}");
    assert!(
        generated.contains(
            "rule:cuCtxEnablePeerAccess.flags-not-zero fn:cuCtxEnablePeerAccess ... fun:enable_with_flags"
        ),
        "{generated}"
    );
    let file = s.path("gen.supp");
    std::fs::write(&file, &generated).unwrap();
    let (_, text) = report(&["--suppressions".as_ref(), file.as_os_str(), b.as_os_str()]);
    assert!(
        text.contains("SUMMARY: 0 errors") && text.contains("(1 suppressed)"),
        "{text}"
    );
    let check = |line: &str| {
        std::fs::write(&file, line).unwrap();
        report(&["--suppressions".as_ref(), file.as_os_str(), b.as_os_str()]).1
    };
    // A part of a name matches nothing; `main` is main, not __libc_start_main.
    assert!(check("... fun:enable\n").contains("SUMMARY: 1 error,"));
    assert!(check("... fun:main\n").contains("(1 suppressed)"));
    assert!(
        check("fun:main\n").contains("SUMMARY: 1 error,"),
        "anchored at the innermost frame"
    );
    assert!(check("... fun:enable_with_flags fun:main\n").contains("(1 suppressed)"));
    assert!(check("... fun:main fun:enable_with_flags\n").contains("SUMMARY: 1 error,"));
}
