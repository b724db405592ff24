//! `sharecheck run`: runs a program with the shim preloaded, then summarizes the traces written.
//!
//! The order of work:
//! 1. [`prepare`] finds the shim (and, with `--sim`, the simulated driver), decides where traces
//!    go and builds the child's environment, `SHARECHECK_OPTIONS` included (checked here); any
//!    failure here is reported before PROG starts;
//! 2. [`TraceWatch::snapshot`] records which trace files already exist, so that the summary and
//!    `error_exitcode` count only files this run created or changed;
//! 3. [`execute`] spawns PROG, forwards SIGINT/SIGTERM sent to sharecheck, and waits;
//! 4. the summary line is printed and PROG's status returned (or `error_exitcode`).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::DirBuilder;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::SystemTime;

use sharecheck_core::options::Options;
use sharecheck_core::pattern::{self, Token};
use sharecheck_core::schema::{self, env, libraries};

use crate::args::{RunArgs, Severity, DEFAULT_KEEP_RUNS, EXIT_USAGE};
use crate::report::plural;
use crate::runs;
use crate::summary::{self, Summary};
use crate::trace::{self, io_reason, Diagnostics};

/// Exit statuses when PROG cannot be started, as in POSIX shells.
const EXIT_NOT_EXECUTABLE: i32 = 126;
const EXIT_NOT_FOUND: i32 = 127;

/// Runs `sharecheck run`; returns the exit status.
pub fn run(args: RunArgs) -> i32 {
    let plan = match prepare(&args) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("sharecheck: {message}");
            return EXIT_USAGE;
        }
    };
    for problem in &plan.option_problems {
        eprintln!("sharecheck: {}: {problem}", env::OPTIONS);
    }
    let before = plan.watch.snapshot();
    let manifest = plan.run_dir.as_ref().map(|(_, dir)| {
        let m = runs::Manifest {
            program: args.prog.clone(),
            args: args.prog_args.clone(),
            started: SystemTime::now(),
            options: plan.options_text.clone(),
        };
        if let Err(e) = m.write(dir, None) {
            eprintln!("sharecheck: {e}");
        }
        m
    });
    let status = match execute(&args, &plan.env) {
        Ok(status) => status,
        Err(status) => {
            // PROG never started: its run directory holds only the manifest, and kept, it would
            // become the newest run, which `report` reads by default, and count against --keep.
            if let Some((_, dir)) = &plan.run_dir {
                runs::remove_if_only_manifest(dir);
            }
            return status;
        }
    };
    if let (Some(m), Some((base, dir))) = (&manifest, &plan.run_dir) {
        if let Err(e) = m.write(dir, Some((SystemTime::now(), status))) {
            eprintln!("sharecheck: {e}");
        }
        if let Err(e) = runs::prune(base, args.keep.unwrap_or(DEFAULT_KEEP_RUNS)) {
            eprintln!("sharecheck: {e}");
        }
    }
    // The simulated driver's directory goes as soon as PROG is done with it.
    drop(plan.sim_dir);
    let files = plan.watch.written_since(&before);
    // Processes that ended with `_exit` (Python's and PyTorch's workers do) or crashed left
    // their rings (4 MB each): folded into their traces.
    trace::compact_all(&files, trace::Folder::Run);
    let error_exitcode = plan.options.error_exitcode.filter(|_| status == 0);
    if args.quiet && error_exitcode.is_none() {
        return status;
    }
    // The summary and error_exitcode read the same files, so they never disagree.
    let mut diagnostics = Diagnostics::default();
    let summary = summary::summarize(
        &files,
        &mut diagnostics,
        crate::findings::Gather::counting(),
    );
    if !args.quiet {
        print_summary(&plan.watch, &files, &summary, &diagnostics, &args.prog);
    }
    match error_exitcode {
        Some(code) if summary.count(Severity::Error) > 0 => code,
        _ => status,
    }
}

/// What `prepare` decided: the child's environment and where its traces will be.
struct Plan {
    env: Vec<(OsString, OsString)>,
    watch: TraceWatch,
    sim_dir: Option<SimDir>,
    /// The options PROG gets, as the shim will read them.
    options: Options,
    /// What is wrong with them, for stderr before PROG starts.
    option_problems: Vec<String>,
    /// The default trace layout: `(./sharecheck-trace, this run's directory in it)`.
    run_dir: Option<(PathBuf, PathBuf)>,
    /// `SHARECHECK_OPTIONS` as PROG gets it, for the manifest.
    options_text: Option<OsString>,
}

fn var(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

fn prepare(args: &RunArgs) -> Result<Plan, String> {
    let mut child_env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| child_env.push((k.into(), v));

    let shim = find_shim()?;
    set("LD_PRELOAD", prepend_preload(&shim, var("LD_PRELOAD")));

    let mut sim_dir = None;
    if args.sim {
        let sim_lib = find_sim_library(&shim)?;
        let dir = make_sim_dir(&sim_lib, &sim_hip_library(&sim_lib)?)?;
        let libdir = dir.path.as_os_str().to_owned();
        set(
            "LD_LIBRARY_PATH",
            prepend_path_list(&libdir, var("LD_LIBRARY_PATH")),
        );
        set(
            env::CUDA_LIBRARY,
            dir.path.join(libraries::CUDA.soname()).into(),
        );
        set(
            env::HIP_LIBRARY,
            dir.path.join(libraries::HIP.soname()).into(),
        );
        if var(env::SIM_STATE_DIR).is_none() {
            let state = dir.path.join("state");
            DirBuilder::new()
                .mode(0o700)
                .create(&state)
                .map_err(|e| format!("cannot create {}: {}", state.display(), io_reason(&e)))?;
            set(env::SIM_STATE_DIR, state.into());
        }
        sim_dir = Some(dir);
    }

    let cwd = std::env::current_dir().map_err(|e| {
        format!(
            "cannot read the current directory: {}; cd to an existing directory",
            io_reason(&e)
        )
    })?;
    let mut run_dir = None;
    let watch = if let Some(pattern) = &args.trace {
        let pattern = absolute_pattern(pattern, &cwd);
        let watch = TraceWatch::pattern(&pattern, "--trace")?;
        create_pattern_parent(&pattern)?;
        set(env::TRACE, pattern);
        watch
    } else if let Some(pattern) = var(env::TRACE) {
        // Left as the user set it; relative patterns are relative to where PROG writes.
        TraceWatch::pattern(&absolute_pattern(&pattern, &cwd), env::TRACE)?
    } else {
        // A directory of this run's own, beside the earlier runs' (runs.rs).
        let base = cwd.join(schema::DEFAULT_TRACE_DIR);
        let dir = runs::new_run_dir(&base, SystemTime::now())?;
        let mut pattern = escape_pattern(dir.as_os_str());
        pattern.push("/");
        pattern.push(schema::DEFAULT_TRACE_FILE);
        set(env::TRACE, pattern);
        run_dir = Some((base, dir.clone()));
        TraceWatch::Dir(dir)
    };

    let flag_pairs = args.shim.pairs();
    let options_text = if args.options.is_some() || !flag_pairs.is_empty() {
        let merged = merge_options(var(env::OPTIONS), args.options.as_deref(), &flag_pairs);
        set(env::OPTIONS, merged.clone());
        Some(merged)
    } else {
        // Inherited unchanged; still checked, since error_exitcode in it applies.
        var(env::OPTIONS)
    };
    let raw = options_text.clone().unwrap_or_default();
    let (options, mut option_problems) = Options::parse(&raw.to_string_lossy());
    if raw.to_str().is_none() {
        option_problems.insert(0, format!("not UTF-8; read as {:?}", raw.to_string_lossy()));
    }
    if !option_problems.is_empty() {
        // Printed here once, not again by the shim in every process.
        set(env::OPTIONS_REPORTED, raw);
    }
    if var(env::JOB_KEY).is_none() {
        set(env::JOB_KEY, job_key()?.into());
    }
    Ok(Plan {
        env: child_env,
        watch,
        sim_dir,
        options,
        option_problems,
        run_dir,
        options_text,
    })
}

/// `SHARECHECK_OPTIONS` for PROG: the inherited value, then `--options`, then the flags' pairs.
/// Later pairs override earlier ones in the parser (mute lists add up), so the most specific
/// setting wins; the text is passed on rather than normalized so that a newer shim still sees
/// keys this sharecheck does not know.
pub fn merge_options(
    inherited: Option<OsString>,
    given: Option<&OsStr>,
    flag_pairs: &[String],
) -> OsString {
    let parts = inherited
        .into_iter()
        .chain(given.map(OsStr::to_owned))
        .chain(flag_pairs.iter().map(OsString::from))
        .filter(|p| !p.is_empty());
    let mut out = OsString::new();
    for part in parts {
        if !out.is_empty() {
            out.push(":");
        }
        out.push(part);
    }
    out
}

/// `SHARECHECK_SHIM`, else `libsharecheck.so` next to this executable, else
/// `../lib/libsharecheck.so` relative to it.
fn find_shim() -> Result<PathBuf, String> {
    let (shim_env, shim_file) = (env::SHIM, libraries::SHIM);
    let shim = if let Some(path) = var(shim_env) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!(
                "{shim_env} is set to {}, which is not a file; point it at {shim_file} or unset it",
                path.display()
            ));
        }
        absolute(&path)?
    } else {
        let exe = std::env::current_exe().map_err(|e| {
            format!(
                "cannot find {shim_file}: the path of this executable is unknown ({}); \
                 set {shim_env} to the shim's path",
                io_reason(&e)
            )
        })?;
        let dir = exe.parent().unwrap_or(Path::new("/"));
        // Next to this executable, in ../lib (an install), then where the build that made it
        // put the shim: a `sharecheck` copied elsewhere still finds its shim while that build
        // exists.
        let mut candidates = vec![
            dir.join(shim_file),
            dir.join("..").join("lib").join(shim_file),
        ];
        if let Some(built) = option_env!("SHARECHECK_BUILD_DIR") {
            candidates.push(Path::new(built).join(shim_file));
        }
        match candidates.iter().find(|p| p.is_file()) {
            Some(found) => found.clone(),
            None => {
                let looked: Vec<String> =
                    candidates.iter().map(|p| p.display().to_string()).collect();
                return Err(format!(
                    "cannot find {shim_file}: looked for {}; build it (cargo build) or set \
                     {shim_env} to its path",
                    looked.join(", ")
                ));
            }
        }
    };
    if shim
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|&b| b == b' ' || b == b':')
    {
        return Err(format!(
            "the shim path {} contains a space or ':', which LD_PRELOAD cannot express; \
             move the shim or set {shim_env} to a path without them",
            shim.display()
        ));
    }
    Ok(shim)
}

/// `SHARECHECK_SIM_LIBRARY`, else `libsharecheck_sim.so` next to the shim.
fn find_sim_library(shim: &Path) -> Result<PathBuf, String> {
    let (sim_env, sim_file) = (env::SIM_LIBRARY, libraries::SIM);
    if let Some(path) = var(sim_env) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!(
                "{sim_env} is set to {}, which is not a file; point it at {sim_file} or unset it",
                path.display()
            ));
        }
        return absolute(&path);
    }
    let path = shim.parent().unwrap_or(Path::new("/")).join(sim_file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "--sim needs the simulated driver, but {} does not exist; build it \
             (cargo build -p sharecheck-sim) or set {sim_env} to its path",
            path.display()
        ))
    }
}

/// The simulated HIP runtime: `libsharecheck_sim_hip.so` beside the simulated CUDA driver.
fn sim_hip_library(sim_lib: &Path) -> Result<PathBuf, String> {
    let path = sim_lib
        .parent()
        .unwrap_or(Path::new("/"))
        .join(libraries::SIM_HIP);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "--sim needs the simulated HIP runtime beside the simulated driver, but {} does not \
             exist; build it (cargo build -p sharecheck-sim-hip) or copy it there",
            path.display()
        ))
    }
}

fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path)
        .map_err(|e| format!("cannot make {} absolute: {}", path.display(), io_reason(&e)))
}

/// Puts `shim` first in an LD_PRELOAD list (entries separated by spaces or colons, as ld.so
/// reads them), keeping every other entry and dropping an earlier copy of the shim.
pub fn prepend_preload(shim: &Path, existing: Option<OsString>) -> OsString {
    let shim = shim.as_os_str().as_bytes();
    let mut out = shim.to_vec();
    if let Some(existing) = existing {
        for entry in existing.as_bytes().split(|&b| b == b' ' || b == b':') {
            if !entry.is_empty() && entry != shim {
                out.push(b':');
                out.extend_from_slice(entry);
            }
        }
    }
    OsString::from_vec(out)
}

/// Puts `dir` first in a colon-separated path list.
fn prepend_path_list(dir: &OsStr, existing: Option<OsString>) -> OsString {
    let mut out = dir.to_owned();
    if let Some(existing) = existing {
        out.push(":");
        out.push(existing);
    }
    out
}

/// The simulated driver's directory: its path, removed with it when dropped (a directory that
/// cannot be removed is said so).
struct SimDir {
    path: PathBuf,
    dir: Option<tempfile::TempDir>,
}

impl Drop for SimDir {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.dir.take().map(tempfile::TempDir::close) {
            eprintln!(
                "sharecheck: warning: cannot remove the temporary directory {}: {}; remove it by hand",
                self.path.display(),
                io_reason(&e)
            );
        }
    }
}

/// Creates a private (0700) directory under $TMPDIR or /tmp whose driver sonames
/// (`libcuda.so.1`, `libamdhip64.so`, ...: [`libraries::DRIVERS`]) are symbolic links to the
/// simulated driver (`sim_lib`) and the simulated HIP runtime (`sim_hip`).
fn make_sim_dir(sim_lib: &Path, sim_hip: &Path) -> Result<SimDir, String> {
    let base = var("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp".into());
    let base = absolute(&base)?;
    // Private (0700), with a random name; removed when dropped.
    let made = tempfile::Builder::new()
        .prefix("sharecheck-sim.")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(&base)
        .map_err(|e| {
            format!(
                "cannot create a temporary directory in {}: {}; set TMPDIR to a writable directory",
                base.display(),
                io_reason(&e)
            )
        })?;
    let dir = SimDir {
        path: made.path().to_path_buf(),
        dir: Some(made),
    };
    if dir
        .path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|&b| b == b':' || b == b';')
    {
        return Err(format!(
            "the temporary directory {} contains ':' or ';', which LD_LIBRARY_PATH cannot express; \
             set TMPDIR to a directory without them",
            dir.path.display()
        ));
    }
    let links = libraries::DRIVERS.into_iter().flat_map(|d| {
        let target = match d.sim {
            libraries::SIM_HIP => sim_hip,
            _ => sim_lib,
        };
        d.names().map(move |name| (name, target))
    });
    for (name, target) in links {
        let link = dir.path.join(name);
        std::os::unix::fs::symlink(target, &link).map_err(|e| {
            format!(
                "cannot create the link {}: {}",
                link.display(),
                io_reason(&e)
            )
        })?;
    }
    Ok(dir)
}

/// Escapes `%` so that the shim's pattern expansion leaves a literal path alone.
fn escape_pattern(path: &OsStr) -> OsString {
    OsString::from_vec(pattern::escape(path.as_bytes()))
}

/// Makes a relative trace pattern absolute, so that a child that changes directory still writes
/// where the summary looks.
fn absolute_pattern(pattern: &OsStr, cwd: &Path) -> OsString {
    if pattern.as_bytes().starts_with(b"/") {
        return pattern.to_owned();
    }
    let mut out = escape_pattern(cwd.as_os_str());
    out.push("/");
    out.push(pattern);
    out
}

/// Creates the directory of a trace pattern when it is a plain path (no key but `%%` in it).
fn create_pattern_parent(pattern: &OsStr) -> Result<(), String> {
    let Ok(tokens) = pattern::tokenize(pattern.as_bytes()) else {
        return Ok(()); // checked by TraceWatch::pattern
    };
    let Some(parent) = pattern::split_dir(&tokens).and_then(|(dir, _)| pattern::literal_text(&dir))
    else {
        return Ok(());
    };
    let parent = PathBuf::from(OsString::from_vec(parent));
    if parent.is_dir() {
        return Ok(());
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&parent)
        .map_err(|e| {
            format!(
                "cannot create the trace directory {}: {}; pass a --trace pattern in a writable directory",
                parent.display(),
                io_reason(&e)
            )
        })
}

/// 16 random bytes, hex-encoded.
fn job_key() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    // SAFETY: writes at most 16 bytes into `bytes`.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| {
                format!(
                    "cannot generate {}: /dev/urandom: {}; set {} to 32 hex digits",
                    env::JOB_KEY,
                    io_reason(&e),
                    env::JOB_KEY
                )
            })?;
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

// ---------------------------------------------------------------------------------------------
// Finding the trace files a run wrote.

/// Where the traces of this run go.
enum TraceWatch {
    /// The default: every `*.jsonl` in this directory.
    Dir(PathBuf),
    /// A user pattern (absolute), and the glob it stands for ([`glob_pattern`]).
    Pattern {
        pattern: OsString,
        glob: Vec<GlobTok>,
    },
}

/// A file's identity at one moment, to tell whether the run wrote it.
type Snapshot = HashMap<PathBuf, (SystemTime, u64, u64)>;

impl TraceWatch {
    /// Watches an (absolute) pattern; an error, naming `source`, when the shim could not expand
    /// it.
    fn pattern(pattern: &OsStr, source: &str) -> Result<TraceWatch, String> {
        let tokens = pattern::tokenize(pattern.as_bytes()).map_err(|e| {
            format!(
                "{source} {}: {e}; no trace could be written",
                Path::new(pattern).display()
            )
        })?;
        Ok(TraceWatch::Pattern {
            pattern: pattern.to_owned(),
            glob: glob_pattern(&tokens),
        })
    }

    fn files(&self) -> Vec<PathBuf> {
        match self {
            TraceWatch::Dir(dir) => trace::jsonl_files_in(dir).unwrap_or_default(),
            TraceWatch::Pattern { glob: g, .. } => glob(g),
        }
    }

    fn snapshot(&self) -> Snapshot {
        self.files()
            .into_iter()
            .filter_map(|p| {
                let m = std::fs::metadata(&p).ok()?;
                Some((p, (m.modified().ok()?, m.len(), m.ino())))
            })
            .collect()
    }

    /// The trace files created or changed since `before` was taken.
    fn written_since(&self, before: &Snapshot) -> Vec<PathBuf> {
        let now = self.snapshot();
        let mut files: Vec<PathBuf> = now
            .into_iter()
            .filter(|(p, id)| before.get(p) != Some(id))
            .map(|(p, _)| p)
            .collect();
        files.sort();
        files
    }

    /// What the summary line names: the directory; for a pattern, the files the run wrote
    /// (a fixed name another process already had becomes NAME.PID), or the pattern and their
    /// number when there are many.
    fn describe_written(&self, files: &[PathBuf]) -> String {
        match self {
            TraceWatch::Dir(dir) => format!("{}/", dir.display()),
            TraceWatch::Pattern { pattern, .. } if files.len() > 4 => {
                format!("{} ({} files)", Path::new(pattern).display(), files.len())
            }
            TraceWatch::Pattern { .. } => files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// `--trace /dev/null`: no trace wanted (the shim writes none).
    fn is_dev_null(&self) -> bool {
        matches!(self, TraceWatch::Pattern { pattern, .. } if pattern == "/dev/null")
    }

    /// The glob searched, for "where we looked".
    fn searched(&self) -> String {
        match self {
            TraceWatch::Dir(dir) => format!("{}/*{}", dir.display(), schema::TRACE_SUFFIX),
            TraceWatch::Pattern { glob, .. } => {
                let text: Vec<u8> = glob
                    .iter()
                    .map(|t| match t {
                        GlobTok::Lit(b) => *b,
                        GlobTok::Star => b'*',
                    })
                    .collect();
                String::from_utf8_lossy(&text).into_owned()
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum GlobTok {
    Lit(u8),
    Star,
}

/// Turns a trace pattern's tokens into a glob: `%p` and `%h` become `*`, `%q{VAR}` becomes
/// VAR's value here (or `*` when unset), `%%` a literal `%`.
fn glob_pattern(tokens: &[Token]) -> Vec<GlobTok> {
    let lits = |bytes: &[u8]| bytes.iter().map(|&c| GlobTok::Lit(c)).collect::<Vec<_>>();
    let mut out = Vec::new();
    for token in tokens {
        match token {
            Token::Literal(bytes) => out.extend(lits(bytes)),
            Token::Percent => out.push(GlobTok::Lit(b'%')),
            Token::Pid | Token::Host => out.push(GlobTok::Star),
            Token::Var(name) => match std::env::var_os(OsStr::from_bytes(name)) {
                Some(v) => out.extend(lits(v.as_bytes())),
                None => out.push(GlobTok::Star),
            },
        }
    }
    // `**` matches what `*` does.
    out.dedup_by(|a, b| *a == GlobTok::Star && *b == GlobTok::Star);
    out
}

/// Regular files matching an absolute glob whose only wildcard is `*` (never matching `/`).
fn glob(pattern: &[GlobTok]) -> Vec<PathBuf> {
    let components: Vec<&[GlobTok]> = pattern
        .split(|t| *t == GlobTok::Lit(b'/'))
        .filter(|c| !c.is_empty())
        .collect();
    let mut current = vec![PathBuf::from("/")];
    for (i, comp) in components.iter().enumerate() {
        let last = i + 1 == components.len();
        let mut next = Vec::new();
        for dir in &current {
            if last {
                // Listed even when literal: the shim writes NAME.PID when NAME exists.
                if let Ok(entries) = std::fs::read_dir(dir) {
                    for entry in entries.flatten() {
                        let name = entry.file_name();
                        if wild_match(comp, trace::strip_pid_suffix(name.as_bytes()))
                            || wild_match(comp, name.as_bytes())
                        {
                            next.push(entry.path());
                        }
                    }
                }
            } else if comp.iter().all(|t| matches!(t, GlobTok::Lit(_))) {
                let name: Vec<u8> = comp
                    .iter()
                    .map(|t| match t {
                        GlobTok::Lit(c) => *c,
                        GlobTok::Star => b'*',
                    })
                    .collect();
                let path = dir.join(OsStr::from_bytes(&name));
                if path.exists() {
                    next.push(path);
                }
            } else if let Ok(entries) = std::fs::read_dir(dir) {
                for entry in entries.flatten() {
                    if wild_match(comp, entry.file_name().as_bytes()) {
                        next.push(entry.path());
                    }
                }
            }
            if last {
                next.retain(|p| p.is_file());
            }
        }
        current = next;
        if current.is_empty() {
            break;
        }
    }
    if components.is_empty() {
        return Vec::new();
    }
    current.sort();
    current
}

fn wild_match(pattern: &[GlobTok], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((GlobTok::Lit(c), rest)) => name.first() == Some(c) && wild_match(rest, &name[1..]),
        Some((GlobTok::Star, rest)) => (0..=name.len()).any(|k| wild_match(rest, &name[k..])),
    }
}

fn print_summary(
    watch: &TraceWatch,
    files: &[PathBuf],
    summary: &Summary,
    diagnostics: &Diagnostics,
    prog: &OsStr,
) {
    if watch.is_dev_null() {
        eprintln!("sharecheck: no trace was asked for (/dev/null)");
        return;
    }
    if files.is_empty() {
        eprintln!(
            "sharecheck: no trace was written (looked for {} written during the run); {} made \
             no CUDA/HIP call, the shim was not loaded (look for ld.so errors above), or it \
             could not write the trace (look for a `sharecheck: ... trace` line above)",
            watch.searched(),
            Path::new(prog).display()
        );
        return;
    }
    crate::report::print_diagnostics(diagnostics);
    eprintln!(
        "sharecheck: {} traced in {}, {}, {}, {}; traces: {}",
        plural(summary.calls, "call", "calls"),
        plural(summary.process_count() as u64, "process", "processes"),
        plural(summary.count(Severity::Error) as u64, "error", "errors"),
        plural(
            summary.count(Severity::Warning) as u64,
            "warning",
            "warnings"
        ),
        plural(summary.count(Severity::Info) as u64, "info", "infos"),
        watch.describe_written(files)
    );
}

// ---------------------------------------------------------------------------------------------
// Running PROG.

/// The pid of the running child, for the signal handler; 0 when none.
static CHILD: AtomicI32 = AtomicI32::new(0);
const FORWARDED: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

/// Forwards a signal sent to sharecheck by another process (kill, a job scheduler) to PROG.
/// Signals from the terminal (Ctrl-C: `si_code == SI_KERNEL`) already reach PROG, which is in the
/// same foreground process group; forwarding them would deliver them twice.
extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
        unsafe { (*info).si_code }
    };
    if code == libc::SI_KERNEL {
        return;
    }
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

fn set_mask(how: libc::c_int) {
    // SAFETY: plain signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Installs [`forward`] for the forwarded signals (or restores their default action), leaving
/// alone a signal that sharecheck was started with ignored (`nohup`, a background job of a
/// script): PROG inherits that and should keep it.
fn set_handlers(install: bool) {
    for sig in FORWARDED {
        // SAFETY: installs a handler that only performs async-signal-safe operations, or restores
        // the default action.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            if install {
                action.sa_sigaction = forward as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            } else {
                action.sa_sigaction = libc::SIG_DFL;
            }
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Spawns PROG with `child_env` added, forwards signals while it runs, and returns the exit
/// status sharecheck should exit with: `Err` when PROG could not be started.
fn execute(args: &RunArgs, child_env: &[(OsString, OsString)]) -> Result<i32, i32> {
    let mut cmd = Command::new(&args.prog);
    cmd.args(&args.prog_args);
    for (k, v) in child_env {
        cmd.env(k, v);
    }
    let prog = Path::new(&args.prog).display().to_string();

    // Signals that arrive between the spawn and the handler's installation stay pending and are
    // forwarded once it is in place. The child starts with an empty mask (std resets it).
    set_mask(libc::SIG_BLOCK);
    let spawned = cmd.spawn();
    if let Ok(child) = &spawned {
        CHILD.store(child.id() as i32, Ordering::SeqCst);
        set_handlers(true);
    }
    set_mask(libc::SIG_UNBLOCK);

    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let (status, hint) = match e.kind() {
                io::ErrorKind::NotFound if !prog.contains('/') => {
                    eprintln!(
                        "sharecheck: cannot run {prog}: not found in PATH; check the name or give its path"
                    );
                    return Err(EXIT_NOT_FOUND);
                }
                io::ErrorKind::NotFound => (EXIT_NOT_FOUND, "check the path".to_string()),
                io::ErrorKind::PermissionDenied => (
                    EXIT_NOT_EXECUTABLE,
                    "check that it is an executable file".to_string(),
                ),
                _ => (
                    EXIT_NOT_EXECUTABLE,
                    "check that it is a program this system runs".to_string(),
                ),
            };
            eprintln!("sharecheck: cannot run {prog}: {}; {hint}", io_reason(&e));
            return Err(status);
        }
    };
    let waited = child.wait();
    set_handlers(false);
    CHILD.store(0, Ordering::SeqCst);

    Ok(match waited {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => code,
            (None, Some(sig)) => {
                let core = if status.core_dumped() {
                    ", core dumped"
                } else {
                    ""
                };
                eprintln!(
                    "sharecheck: {prog} was killed by signal {sig} ({}){core}",
                    signal_name(sig)
                );
                128 + sig
            }
            (None, None) => EXIT_NOT_EXECUTABLE,
        },
        Err(e) => {
            eprintln!("sharecheck: cannot wait for {prog}: {}", io_reason(&e));
            EXIT_NOT_EXECUTABLE
        }
    })
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(s: &str) -> Vec<GlobTok> {
        s.bytes().map(GlobTok::Lit).collect()
    }

    #[test]
    fn preload_keeps_other_entries_and_dedups_the_shim() {
        let shim = Path::new("/x/libsharecheck.so");
        assert_eq!(prepend_preload(shim, None), "/x/libsharecheck.so");
        assert_eq!(
            prepend_preload(shim, Some("liba.so /x/libsharecheck.so:libb.so".into())),
            "/x/libsharecheck.so:liba.so:libb.so"
        );
    }

    /// The glob of a pattern, as `sharecheck run` watches it.
    fn glob_of(pattern: &str) -> Vec<GlobTok> {
        match TraceWatch::pattern(OsStr::new(pattern), "test").unwrap() {
            TraceWatch::Pattern { glob, .. } => glob,
            TraceWatch::Dir(_) => unreachable!(),
        }
    }

    #[test]
    fn patterns_become_globs() {
        let mut want = lits("/t/");
        want.push(GlobTok::Star);
        want.extend(lits(".jsonl%"));
        assert_eq!(glob_of("/t/%p.jsonl%%"), want);
        let mut want = lits("/t/");
        want.push(GlobTok::Star);
        assert_eq!(glob_of("/t/%h%p"), want);
        assert_eq!(
            glob_of("/t/%q{SHARECHECK_TEST_SURELY_UNSET}"),
            [lits("/t/"), vec![GlobTok::Star]].concat()
        );
        assert_eq!(
            glob_of("/t/%q{HOME}"),
            [lits("/t/"), lits(&std::env::var("HOME").unwrap())].concat()
        );
    }

    #[test]
    fn patterns_the_shim_cannot_expand_are_refused_before_the_run() {
        for (pattern, why) in [
            ("/t/%x", "unknown key %x"),
            ("/t/%", "lone %"),
            ("/t/%q{A", "%q must be followed by {VAR}"),
        ] {
            let Err(e) = TraceWatch::pattern(OsStr::new(pattern), "--trace") else {
                panic!("{pattern} accepted")
            };
            assert!(e.starts_with(&format!("--trace {pattern}: ")), "{e}");
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn a_plain_pattern_directory_is_created_with_escaped_percents() {
        let dir = std::env::temp_dir().join(format!("sharecheck-mkdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let base = escape_pattern(dir.as_os_str());
        let mut pattern = base.clone();
        pattern.push("/a%%b/%p.jsonl");
        create_pattern_parent(&pattern).unwrap();
        assert!(dir.join("a%b").is_dir());
        // A directory that varies (a key in it) is left to the shim.
        let mut pattern = base;
        pattern.push("/%h/%p.jsonl");
        create_pattern_parent(&pattern).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wildcards_match() {
        let pat = [lits("a"), vec![GlobTok::Star], lits(".jsonl")].concat();
        assert!(wild_match(&pat, b"a123.jsonl"));
        assert!(wild_match(&pat, b"a.jsonl"));
        assert!(!wild_match(&pat, b"b1.jsonl"));
        assert!(!wild_match(&pat, b"a1.json"));
    }

    #[test]
    fn relative_patterns_are_made_absolute_and_escaped() {
        assert_eq!(
            absolute_pattern(OsStr::new("t/%p"), Path::new("/home/a%b")),
            "/home/a%%b/t/%p"
        );
        assert_eq!(
            absolute_pattern(OsStr::new("/t/%p"), Path::new("/x")),
            "/t/%p"
        );
    }

    #[test]
    fn options_merge_inherited_then_given_then_flags() {
        let flags = ["mode=strict".to_string(), "mute=a".to_string()];
        assert_eq!(
            merge_options(
                Some("mute=b:".into()),
                Some(OsStr::new("mode=report")),
                &flags
            ),
            "mute=b::mode=report:mode=strict:mute=a"
        );
        assert_eq!(merge_options(None, None, &flags), "mode=strict:mute=a");
        assert_eq!(
            merge_options(Some("x=1".into()), Some(OsStr::new("")), &[]),
            "x=1"
        );
        assert_eq!(merge_options(None, None, &[]), "");
    }

    #[test]
    fn fallback_names_are_found_by_the_glob() {
        let dir = std::env::temp_dir().join(format!("sharecheck-glob-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "fixed.jsonl",
            "fixed.jsonl.42",
            "fixed.jsonl.bak",
            "7.jsonl.7",
        ] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let names = |pattern: &str| -> Vec<String> {
            let pattern = format!("{}/{pattern}", dir.display());
            glob(&glob_of(&pattern))
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names("fixed.jsonl"), ["fixed.jsonl", "fixed.jsonl.42"]);
        assert_eq!(
            names("%p.jsonl"),
            ["7.jsonl.7", "fixed.jsonl", "fixed.jsonl.42"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn job_keys_are_32_hex_digits() {
        let k = job_key().unwrap();
        assert_eq!(k.len(), 32);
        assert!(k.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(k, job_key().unwrap());
    }
}
