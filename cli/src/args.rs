//! Command-line parsing with clap (generated help, typo suggestions, shell completions): one
//! [`clap::Command`] tree, built by [`command`], whose `run` flags for the shim's options are
//! made from the options table ([`sharecheck_core::options::TABLE`]), and [`parse`], which turns
//! the matches into a [`Command`]. Usage errors exit 2, help and version 0, as clap does.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{NonEmptyStringValueParser, PossibleValuesParser, TypedValueParser};
use clap::{value_parser, Arg, ArgAction, ArgMatches};
use sharecheck_core::options::{self, FlagError, Flags, OptionInfo};
use sharecheck_core::schema::{self, env, libraries};

/// Exit status of a usage error (bad flags, missing program): the convention of most Unix tools
/// and clap's.
pub const EXIT_USAGE: i32 = 2;

/// Run directories `sharecheck run` keeps by default.
pub const DEFAULT_KEEP_RUNS: usize = 10;

/// Occurrences of a rule shown in text by default.
pub const DEFAULT_LIMIT: usize = 10;

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(RunArgs),
    Report(ReportArgs),
    Rules(RulesArgs),
    /// `sharecheck cat TRACE...`.
    Cat(Vec<PathBuf>),
    /// `sharecheck clean [--keep N]`: the run directories kept.
    Clean(usize),
    /// `sharecheck completions SHELL`: the completion script on stdout.
    Completions(clap_complete::Shell),
}

#[derive(Debug, PartialEq, Eq, Default)]
pub struct RunArgs {
    pub sim: bool,
    pub trace: Option<OsString>,
    pub options: Option<OsString>,
    /// The flags that stand for `SHARECHECK_OPTIONS` keys (one per row of the options table),
    /// validated here so that a typo on the command line stops the run instead of being ignored
    /// by the shim; see [`Flags::pairs`].
    pub shim: Flags,
    pub quiet: bool,
    /// Run directories kept (`--keep`; `None`: the default).
    pub keep: Option<usize>,
    pub prog: OsString,
    pub prog_args: Vec<OsString>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct RulesArgs {
    pub format: Format,
    /// The rules named (every rule when empty).
    pub ids: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// SARIF 2.1.0 (`report` only).
    Sarif,
    /// A Perfetto-loadable timeline: Chrome trace-event JSON (`report` only).
    Perfetto,
}

impl Format {
    fn parse(text: &str) -> Format {
        match text {
            "json" => Format::Json,
            "sarif" => Format::Sarif,
            "perfetto" => Format::Perfetto,
            _ => Format::Text,
        }
    }
}

/// Finding severities, ordered from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "error" => Some(Severity::Error),
            "warning" => Some(Severity::Warning),
            "info" => Some(Severity::Info),
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct ReportArgs {
    pub format: Format,
    pub fail_on: Option<Severity>,
    pub traces: Vec<PathBuf>,
    pub filter: Filter,
    /// Occurrences shown per rule in text (0: all).
    pub limit: usize,
    /// Without a TRACE: every run, not just the newest.
    pub all: bool,
    /// Suppression files (`--suppressions`).
    pub suppressions: Vec<PathBuf>,
    /// Print suppressions for the findings instead of the report.
    pub gen_suppressions: bool,
    /// An earlier run's traces to compare with (`--baseline`).
    pub baseline: Option<PathBuf>,
    /// Threads that read the traces (`--jobs`; 0: one per CPU).
    pub jobs: usize,
    /// Calls the cross-process checks keep in memory per reading thread before they spill to
    /// temporary files (`--memory-calls`; 0: never).
    pub memory_calls: usize,
    /// Write a partial result there instead of a report (`--partial DIR`).
    pub partial: Option<PathBuf>,
}

/// Which findings a report shows: all of one kind of condition must hold (an empty list allows
/// any).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub rules: Vec<String>,
    pub severity: Option<Severity>,
    pub pids: Vec<i64>,
    pub fns: Vec<String>,
}

const SEVERITY_HELP: &str = "\
SEVERITY:
  error    a documented requirement is broken: the call fails or its result is not what the
           program meant
  warning  undefined or silently different behaviour
  info     harmless or explanatory (a query with no effect on later calls, a note on what a call
           did, a failure explained)";

/// `error`, `warning` or `info`.
fn severity_arg(name: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name("SEVERITY")
        .value_parser(PossibleValuesParser::new(["error", "warning", "info"]))
}

/// The trace files or directories a command reads.
fn traces_arg(help: String) -> Arg {
    Arg::new("traces")
        .value_name("TRACE")
        .num_args(0..)
        .value_parser(value_parser!(PathBuf))
        .help(help)
}

fn traces_help(default: &str) -> String {
    format!(
        "A trace file, or a directory (every *{s} in it, and *{s}.PID: where the shim writes \
         when *{s} exists). Default: {default}. A name that starts with `-` goes after `--`.",
        s = schema::TRACE_SUFFIX
    )
}

/// A `run` flag for one row of the options table: a switch, or a flag with a value checked as
/// the shim would (a wrong value is a usage error, not a warning in PROG's output).
fn option_arg(o: &'static OptionInfo) -> Arg {
    let long = o.flag_name().trim_start_matches("--");
    let default = match ((o.default_text)(), o.switch) {
        (Some(d), None) => format!(" Default: {d}."),
        _ => String::new(),
    };
    let repeat = if o.adds_up { " Repeatable." } else { "" };
    let arg = Arg::new(o.key)
        .long(long)
        .help(format!("{}{repeat}{default}", o.help))
        .help_heading("Shim options (SHARECHECK_OPTIONS keys)");
    if o.switch.is_some() {
        return arg.action(ArgAction::SetTrue);
    }
    let flag = o.flag_name();
    arg.value_name(o.flag_value().unwrap_or("VALUE"))
        .action(ArgAction::Append)
        .value_parser(
            NonEmptyStringValueParser::new().try_map(move |value: String| {
                Flags::default()
                    .set(o.key, &value)
                    .map(|()| value.clone())
                    .map_err(|e| flag_error(flag, &value, e))
            }),
        )
}

/// The message for a value [`Flags::set`] refused.
fn flag_error(flag: &str, value: &str, error: FlagError) -> String {
    match error {
        FlagError::Invalid { expected } => format!("`{flag}` needs {expected}, not `{value}`"),
        FlagError::Rejected(r) => format!("`{}` given to `{flag}` {}", r.item, r.why),
        FlagError::UnknownKey => format!("`{flag}` names no option key"),
    }
}

fn run_command() -> clap::Command {
    let t = options::TABLE;
    let adds_up: Vec<&str> = t.iter().filter(|o| o.adds_up).map(|o| o.key).collect();
    let adds_up = match adds_up.as_slice() {
        [] => String::new(),
        keys => format!(", and {} lists add up", keys.join(" and ")),
    };
    let after = format!(
        "The shim options set the {opts} keys of the same name ({keys}). PROG gets ${opts}, \
         then --options, then these flags, joined with `:`; a later pair wins over an earlier \
         one{adds_up}. sharecheck checks the result before PROG starts and prints each \
         problem: a bad pair keeps that key's default and PROG still runs. A malformed flag \
         value is a usage error. In strict mode a call the documentation says must fail \
         returns its documented code (`sharecheck rules`: Strict code) without reaching the \
         driver.\n\n\
         ENVIRONMENT:\n  {shim_var}  Path of {shim} (default: next to this executable, or \
         ../lib/{shim} relative to it).\n  {sim_var}  Path of {sim} for --sim ({sim_hip} is looked for beside it).\n  \
         {key_var}  Key of the IPC handle fingerprints; generated when unset so every process \
         of the job uses the same one.\n\n\
         EXIT STATUS:\n  PROG's exit status; 128+N if PROG was killed by signal N; 126/127 if \
         PROG could not be started (not executable / not found); 2 on a usage error or if the \
         shim cannot be found. With error_exitcode=N (--error-exitcode N): N if PROG exited 0 \
         and a trace file this run created or changed holds a finding of severity error.",
        opts = env::OPTIONS,
        keys = options::KEYS.join(", "),
        shim_var = env::SHIM,
        shim = libraries::SHIM,
        sim_var = env::SIM_LIBRARY,
        sim = libraries::SIM,
        sim_hip = libraries::SIM_HIP,
        key_var = env::JOB_KEY,
    );
    clap::Command::new("run")
        .about(
            "Run a program (and every process it starts) under the shim, then summarize its traces",
        )
        .long_about(
            "Run PROG under the sharecheck shim. PROG is searched in PATH as a shell would. It \
             and every process it starts inherit the shim through LD_PRELOAD; each process \
             writes its own JSON Lines trace. A one-line summary follows PROG's end.",
        )
        .override_usage("sharecheck run [OPTIONS] -- PROG [ARGS...]")
        .arg(
            Arg::new("sim")
                .long("sim")
                .action(ArgAction::SetTrue)
                .help(format!(
                    "Use the simulated CUDA driver / HIP runtime instead of the real ones (no \
                     GPU needed). Found next to the shim, or at ${}.",
                    env::SIM_LIBRARY
                )),
        )
        .arg(
            Arg::new("trace")
                .long("trace")
                .value_name("PATTERN")
                .value_parser(
                    clap::builder::OsStringValueParser::new().try_map(|v: OsString| {
                        if v.is_empty() {
                            Err("a file pattern such as traces/%p.jsonl".to_string())
                        } else {
                            Ok(v)
                        }
                    }),
                )
                .help(format!(
                    "Where each process writes its trace (sets {trace}). The shim expands %p \
                     (pid), %h (host), %q{{VAR}} (environment variable, with / made _ so that it \
                     names one piece of a path), %%; makes missing directories; writes NAME.PID \
                     where NAME is taken (the summary names the files written); /dev/null: no \
                     trace. Default: ${trace} if set, else a directory of this run's own, \
                     ./{dir}/run-DATE-TIME-PID/{file}, with a manifest.json (program, \
                     arguments, start and end, exit status, options, version).",
                    trace = env::TRACE,
                    dir = schema::DEFAULT_TRACE_DIR,
                    file = schema::DEFAULT_TRACE_FILE
                )),
        )
        .arg(
            Arg::new("keep")
                .long("keep")
                .value_name("N")
                .value_parser(value_parser!(usize))
                .help(format!(
                    "Keep the newest N run directories of ./{} (this one included); older ones \
                     are removed after the run. Default {DEFAULT_KEEP_RUNS}; 0 keeps all.",
                    schema::DEFAULT_TRACE_DIR
                )),
        )
        .arg(
            Arg::new("options")
                .long("options")
                .value_name("OPTS")
                .value_parser(value_parser!(OsString))
                .help(format!(
                    "key=value:key=value options of the shim ({}; the shim options below).",
                    env::OPTIONS
                )),
        )
        .arg(
            Arg::new("quiet")
                .short('q')
                .long("quiet")
                .action(ArgAction::SetTrue)
                .help("Do not print the summary line after PROG exits."),
        )
        .args(t.iter().map(option_arg))
        .arg(
            Arg::new("prog")
                .value_name("PROG")
                .required(true)
                .last(true)
                .num_args(1..)
                .allow_hyphen_values(true)
                .value_parser(value_parser!(OsString))
                .help("The program to run and its arguments, after `--`."),
        )
        .after_long_help(after)
}

fn report_command() -> clap::Command {
    clap::Command::new("report")
        .about("Merge the trace files of one or more runs and print the findings")
        .arg(
            Arg::new("format")
                .long("format")
                .value_name("FORMAT")
                .value_parser(PossibleValuesParser::new(["text", "json", "sarif", "perfetto"]))
                .default_value("text")
                .help(
                    "text: findings grouped by rule, calls per function, each exported IPC \
                     handle's exchange (IPC HANDLES) and a SUMMARY line. json: one object \
                     {\"calls\",\"processes\",\"findings\"} with the findings of every process \
                     sorted by (pid, time, seq), and \"ipc\": [{\"handle\",\"steps\"}] when a \
                     memory handle was exported. sarif: SARIF 2.1.0 for code-scanning services \
                     and IDEs (the rule catalogue as the tool's rules; each finding with its \
                     stack, file and line where resolved). perfetto: a timeline (Chrome \
                     trace-event JSON) for ui.perfetto.dev or chrome://tracing: a track per \
                     process and thread, each call a slice with its arguments and result, each \
                     finding an instant event, each IPC or endpoint handle's export -> import a \
                     flow arrow.",
                ),
        )
        .arg(
            severity_arg("fail-on")
                .help("Exit 1 if a finding of SEVERITY or worse exists. Useful in CI."),
        )
        .arg(
            Arg::new("rule")
                .long("rule")
                .value_name("ID")
                .action(ArgAction::Append)
                .value_delimiter(',')
                .help(
                    "Only the findings of these rules (comma-separated, repeatable). An ID that \
                     neither the rule catalogue nor the traces know is a usage error naming the \
                     IDs that contain it.",
                )
                .help_heading("Filters"),
        )
        .arg(
            severity_arg("severity")
                .help("Only findings of SEVERITY or worse.")
                .help_heading("Filters"),
        )
        .arg(
            Arg::new("pid")
                .long("pid")
                .value_name("PID")
                .action(ArgAction::Append)
                .value_delimiter(',')
                .value_parser(value_parser!(i64))
                .help("Only the findings of these processes (comma-separated, repeatable).")
                .help_heading("Filters"),
        )
        .arg(
            Arg::new("fn")
                .long("fn")
                .value_name("NAME")
                .action(ArgAction::Append)
                .value_delimiter(',')
                .help(
                    "Only the findings on calls of these functions (exact symbols, such as \
                     cuMemcpyPeerAsync_ptsz; comma-separated, repeatable).",
                )
                .help_heading("Filters"),
        )
        .arg(
            Arg::new("limit")
                .long("limit")
                .value_name("N")
                .value_parser(value_parser!(usize))
                .default_value(DEFAULT_LIMIT.to_string())
                .help("Show at most N occurrences of each rule in text, and the first N handles of IPC HANDLES (0: all); every occurrence and handle is counted."),
        )
        .arg(
            Arg::new("jobs")
                .long("jobs")
                .short('j')
                .value_name("N")
                .value_parser(value_parser!(usize))
                .default_value("0")
                .help(
                    "Read the traces with N threads, one file per thread at a time (0: one per \
                     CPU). The report is the same whatever N.",
                ),
        )
        .arg(
            Arg::new("memory-calls")
                .long("memory-calls")
                .value_name("N")
                .value_parser(value_parser!(usize))
                .default_value(sharecheck_core::crossproc::SPILL_AT.to_string())
                .help(
                    "Keep at most N of the calls the cross-process checks read in memory per \
                     reading thread (about 60 bytes each, and at most about 32 MiB of the \
                     distinct arguments they hold); past that, they go to unnamed temporary \
                     files in TMPDIR, sorted, and are merged back; so do, past N/16, the \
                     records the checks keep per handle seen, least lately used first (0: keep \
                     every one in memory). The report is the same whatever N.",
                ),
        )
        .arg(
            Arg::new("partial")
                .long("partial")
                .value_name("DIR")
                .value_parser(value_parser!(PathBuf))
                .help(
                    "Write a partial result to DIR instead of a report: for each trace file, a \
                     file of the same name holding its process and exit records, the calls with \
                     findings, the calls the cross-process checks read and the counts of the \
                     others. `sharecheck report` of many partial results (a directory of them, \
                     one per host) is the report of all their traces read together: one \
                     `--partial` step per node (a Slurm job array), then one report.",
                ),
        )
        .arg(
            Arg::new("all")
                .long("all")
                .action(ArgAction::SetTrue)
                .help(format!(
                    "Without a TRACE: every run directory of ./{}, not only the newest.",
                    schema::DEFAULT_TRACE_DIR
                )),
        )
        .arg(
            Arg::new("suppressions")
                .long("suppressions")
                .value_name("FILE")
                .action(ArgAction::Append)
                .value_parser(value_parser!(PathBuf))
                .help(
                    "Leave out the findings a suppression of FILE matches (repeatable); they \
                     are counted (\"suppressed\" in JSON), not shown. A line is one \
                     suppression: conditions rule:GLOB, fn:GLOB (the function called) and \
                     frames as valgrind writes them, fun:GLOB (a function's whole name) and \
                     obj:GLOB (a module's path) in order from the innermost frame, ... for any \
                     frames; frame:GLOB matches any frame's module+0xOFFSET (symbol) text. All \
                     must hold; # starts a comment.",
                )
                .help_heading("Review"),
        )
        .arg(
            Arg::new("gen-suppressions")
                .long("gen-suppressions")
                .action(ArgAction::SetTrue)
                .help(
                    "Print suppressions for the findings shown, instead of the report: each \
                     names the innermost function of the program's own code (... fun:NAME).",
                )
                .help_heading("Review"),
        )
        .arg(
            Arg::new("baseline")
                .long("baseline")
                .value_name("TRACE")
                .value_parser(value_parser!(PathBuf))
                .help(
                    "Compare with an earlier run (a run directory or trace files): list the \
                     findings that are new and those that are gone (by rule, function and the \
                     innermost frame), and exit 1 if any is new.",
                )
                .help_heading("Review"),
        )
        .arg(traces_arg(traces_help(&format!(
            "the newest run directory of ./{d} (what the last `sharecheck run` wrote), or ./{d} \
             itself where it holds none",
            d = schema::DEFAULT_TRACE_DIR
        ))))
        .after_help(
            "The filters apply to everything the report shows and counts, --fail-on included.\n\n\
             EXIT STATUS:\n  0 success; 1 findings at or above --fail-on, or new findings against \
             --baseline; 2 usage error or unreadable input (a TRACE that cannot be opened, or no \
             trace record at all).",
        )
}

fn rules_command(name: &'static str) -> clap::Command {
    let cmd = clap::Command::new(name)
        .arg(
            Arg::new("format")
                .long("format")
                .value_name("FORMAT")
                .value_parser(PossibleValuesParser::new(["text", "json"]))
                .default_value("text")
                .help(
                    "text: Markdown, one section per rule; RULES.md is the whole catalogue. \
                     json: one array with an object per rule: rule, severity, kind, functions, \
                     requirement, doc, quote, documented_code, fix.",
                ),
        )
        .arg(
            Arg::new("ids")
                .value_name("RULE")
                .num_args(0..)
                .required(name == "explain")
                .help(
                    "A rule ID as findings name it (cuMemcpyPeer.range-outside-allocation). \
                     Without one, every rule. An ID no rule has is a usage error that names the \
                     IDs containing it.",
                ),
        )
        .after_help(format!(
            "{SEVERITY_HELP}\n\nEXIT STATUS:\n  0 success; 2 usage error."
        ));
    match name {
        "explain" => cmd.about("Print the rules named (`sharecheck rules RULE...`)"),
        _ => cmd.about(
            "Print the catalogue of rules sharecheck checks (RULES.md is its text output), or \
             the rules named",
        ),
    }
}

fn cat_command() -> clap::Command {
    clap::Command::new("cat")
        .about("Print the records of trace files as JSON Lines, a crashed process's included")
        .long_about(format!(
            "Print the records of trace files as JSON Lines: each file's records in its order, \
             one per line, exactly as written (but for DEL, C1 and bidi controls, written as \
             \\u escapes: the same JSON value), followed by the records its ring file \
             (FILE{ring}) still holds when its process ended without exit handlers (_exit, \
             exec, a fatal signal, kill -9): those are not in the file itself. A record cut \
             short and space never filled are left out (with a warning on stderr).",
            ring = sharecheck_core::ring::SUFFIX
        ))
        .arg(traces_arg(traces_help(&format!(
            "./{}",
            schema::DEFAULT_TRACE_DIR
        ))))
        .after_help(
            "EXIT STATUS:\n  0 success; 2 usage error or unreadable input (a TRACE that cannot \
             be opened).",
        )
}

fn clean_command() -> clap::Command {
    clap::Command::new("clean")
        .about(format!(
            "Remove the run directories `sharecheck run` left in ./{}",
            schema::DEFAULT_TRACE_DIR
        ))
        .arg(
            Arg::new("keep")
                .long("keep")
                .value_name("N")
                .value_parser(value_parser!(usize))
                .default_value("0")
                .help(
                    "Keep the newest N runs (0: remove every run directory). Only directories \
                     with a manifest.json are removed; other files stay.",
                ),
        )
        .after_help(
            "EXIT STATUS:\n  0 success; 2 usage error or a directory that could not be removed.",
        )
}

fn completions_command() -> clap::Command {
    clap::Command::new("completions")
        .about("Print a shell completion script (e.g. `sharecheck completions bash > ~/.local/share/bash-completion/completions/sharecheck`)")
        .arg(
            Arg::new("shell")
                .value_name("SHELL")
                .required(true)
                .value_parser(value_parser!(clap_complete::Shell)),
        )
}

/// The whole command line: every command, its flags and its help.
pub fn command() -> clap::Command {
    clap::Command::new("sharecheck")
        .about("Validate CUDA/HIP peer access, IPC, stream attach and logical endpoint calls")
        .version(env!("CARGO_PKG_VERSION"))
        .long_version(format!(
            "{} (trace schema v{})",
            env!("CARGO_PKG_VERSION"),
            schema::VERSION
        ))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .max_term_width(100)
        .subcommands([
            run_command(),
            report_command(),
            rules_command("rules"),
            rules_command("explain"),
            cat_command(),
            clean_command(),
            completions_command(),
        ])
        .after_help("Run `sharecheck help COMMAND` (or COMMAND --help) for the options of each.")
}

/// Parses the arguments (the program name first); an `Err` is a usage error, help or the
/// version, for `clap::Error::exit` to print with its exit status.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, clap::Error> {
    let mut cmd = command();
    let args: Vec<OsString> = args.into_iter().collect();
    let m = cmd
        .try_get_matches_from_mut(&args)
        .map_err(|e| program_before_dashdash(&mut cmd, &args, e))?;
    let Some((name, m)) = m.subcommand() else {
        return Err(cmd.error(
            clap::error::ErrorKind::MissingSubcommand,
            "no command given",
        ));
    };
    Ok(match name {
        "run" => Command::Run(run_args(m)),
        "report" => Command::Report(report_args(m)),
        "rules" | "explain" => Command::Rules(RulesArgs {
            format: Format::parse(m.get_one::<String>("format").map_or("text", String::as_str)),
            ids: strings(m, "ids"),
        }),
        "cat" => Command::Cat(paths(m, "traces")),
        "clean" => Command::Clean(*m.get_one::<usize>("keep").unwrap_or(&0)),
        "completions" => Command::Completions(
            *m.get_one::<clap_complete::Shell>("shell")
                .expect("required by the parser"),
        ),
        other => {
            return Err(cmd.error(
                clap::error::ErrorKind::InvalidSubcommand,
                format!("unknown command `{other}`"),
            ))
        }
    })
}

/// `sharecheck run prog`: clap finds an unexpected `prog`; say where it goes.
fn program_before_dashdash(
    cmd: &mut clap::Command,
    args: &[OsString],
    e: clap::Error,
) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let word = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(word)) => word.clone(),
        _ => return e,
    };
    if e.kind() != ErrorKind::UnknownArgument
        || word.starts_with('-')
        || args.get(1).is_none_or(|a| a != "run")
    {
        return e;
    }
    let run = cmd.find_subcommand_mut("run").expect("run is a command");
    run.error(
        ErrorKind::UnknownArgument,
        format!("`{word}` must come after `--`: write `sharecheck run [OPTIONS] -- {word} ...`"),
    )
}

fn strings(m: &ArgMatches, id: &str) -> Vec<String> {
    m.get_many::<String>(id)
        .map(|v| v.filter(|s| !s.trim().is_empty()).cloned().collect())
        .unwrap_or_default()
}

fn paths(m: &ArgMatches, id: &str) -> Vec<PathBuf> {
    m.get_many::<PathBuf>(id)
        .map(|v| v.cloned().collect())
        .unwrap_or_default()
}

fn run_args(m: &ArgMatches) -> RunArgs {
    let mut shim = Flags::default();
    for o in options::TABLE {
        match o.switch {
            Some(on) if m.get_flag(o.key) => {
                let _ = shim.set(o.key, on);
            }
            Some(_) => {}
            None => {
                // Each value was checked by the parser; in the order given, later ones win
                // (lists add up).
                for value in m.get_many::<String>(o.key).into_iter().flatten() {
                    let _ = shim.set(o.key, value);
                }
            }
        }
    }
    let mut prog = m
        .get_many::<OsString>("prog")
        .map(|v| v.cloned().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter();
    RunArgs {
        sim: m.get_flag("sim"),
        trace: m.get_one::<OsString>("trace").cloned(),
        options: m.get_one::<OsString>("options").cloned(),
        shim,
        quiet: m.get_flag("quiet"),
        keep: m.get_one::<usize>("keep").copied(),
        prog: prog.next().unwrap_or_default(),
        prog_args: prog.collect(),
    }
}

fn report_args(m: &ArgMatches) -> ReportArgs {
    let severity = |id: &str| m.get_one::<String>(id).and_then(|s| Severity::parse(s));
    ReportArgs {
        format: Format::parse(m.get_one::<String>("format").map_or("text", String::as_str)),
        fail_on: severity("fail-on"),
        traces: paths(m, "traces"),
        filter: Filter {
            rules: strings(m, "rule"),
            severity: severity("severity"),
            pids: m
                .get_many::<i64>("pid")
                .map(|v| v.copied().collect())
                .unwrap_or_default(),
            fns: strings(m, "fn"),
        },
        limit: *m.get_one::<usize>("limit").unwrap_or(&DEFAULT_LIMIT),
        all: m.get_flag("all"),
        suppressions: paths(m, "suppressions"),
        gen_suppressions: m.get_flag("gen-suppressions"),
        baseline: m.get_one::<PathBuf>("baseline").cloned(),
        jobs: *m.get_one::<usize>("jobs").unwrap_or(&0),
        memory_calls: *m
            .get_one::<usize>("memory-calls")
            .unwrap_or(&sharecheck_core::crossproc::SPILL_AT),
        partial: m.get_one::<PathBuf>("partial").cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use sharecheck_core::options::Mode;

    fn p(args: &[&str]) -> Result<Command, clap::Error> {
        parse(
            std::iter::once("sharecheck")
                .chain(args.iter().copied())
                .map(OsString::from),
        )
    }

    fn err(args: &[&str]) -> String {
        p(args).unwrap_err().render().to_string()
    }

    #[test]
    fn the_command_tree_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn run_parses_options_and_program() {
        let Command::Run(r) = p(&[
            "run",
            "--sim",
            "--trace=t/%p.jsonl",
            "--options",
            "a=1",
            "-q",
            "--",
            "prog",
            "--sim",
            "x",
        ])
        .unwrap() else {
            panic!()
        };
        assert!(r.sim && r.quiet);
        assert_eq!(r.trace.unwrap(), "t/%p.jsonl");
        assert_eq!(r.options.unwrap(), "a=1");
        assert_eq!(r.prog, "prog");
        assert_eq!(
            r.prog_args,
            vec![OsString::from("--sim"), OsString::from("x")]
        );
    }

    #[test]
    fn run_errors_say_what_to_type() {
        // The program goes after `--`: clap says so.
        let e = err(&["run", "prog"]);
        assert!(e.contains("`prog` must come after `--`"), "{e}");
        assert!(
            e.contains("Usage: sharecheck run [OPTIONS] -- PROG [ARGS...]"),
            "{e}"
        );
        let e = err(&["run", "--sim"]);
        assert!(e.contains("required") && e.contains("PROG"), "{e}");
        assert!(err(&["run", "--"]).contains("PROG"));
        // Typos get a suggestion.
        let e = err(&["run", "--sym", "--", "x"]);
        assert!(
            e.contains("unexpected argument '--sym'") && e.contains("--sim"),
            "{e}"
        );
        assert!(err(&["run", "--trace"]).contains("a value is required"));
        assert!(err(&["run", "--trace=", "--", "x"]).contains("a file pattern"));
        assert_eq!(
            p(&[]).unwrap_err().kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
        let e = err(&["frobnicate"]);
        assert!(e.contains("unrecognized subcommand 'frobnicate'"), "{e}");
        let e = err(&["reprot"]);
        assert!(e.contains("report"), "a suggestion: {e}");
    }

    #[test]
    fn report_parses() {
        let Command::Report(r) = p(&[
            "report",
            "--format",
            "json",
            "--fail-on=warning",
            "--rule",
            "a.b,c.d",
            "--rule=e.f",
            "--pid",
            "1,2",
            "--fn",
            "cuMemcpyPeer",
            "--limit",
            "3",
            "a",
            "--",
            "-b",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(r.format, Format::Json);
        assert_eq!(r.fail_on, Some(Severity::Warning));
        assert_eq!(r.traces, vec![PathBuf::from("a"), PathBuf::from("-b")]);
        assert_eq!(r.filter.rules, ["a.b", "c.d", "e.f"]);
        assert_eq!(r.filter.pids, [1, 2]);
        assert_eq!(r.filter.fns, ["cuMemcpyPeer"]);
        assert_eq!(r.limit, 3);
        for bad in [
            &["report", "--format", "xml"][..],
            &["report", "--fail-on", "fatal"],
            &["report", "--x"],
            &["report", "--pid", "x"],
            &["report", "--limit", "-1"],
        ] {
            assert_eq!(p(bad).unwrap_err().exit_code(), EXIT_USAGE, "{bad:?}");
        }
        let Command::Report(r) = p(&["report"]).unwrap() else {
            panic!()
        };
        assert_eq!(
            (r.format, r.limit, r.fail_on),
            (Format::Text, DEFAULT_LIMIT, None)
        );
    }

    #[test]
    fn run_parses_shim_flags() {
        let Command::Run(r) = p(&[
            "run",
            "--mode=strict",
            "--halt-on-error",
            "--error-exitcode",
            "9",
            "--mute",
            "peer-access.unidirectional,",
            "--mute=divergence.unlisted",
            "--duplicate-limit",
            "0",
            "--mode",
            "report",
            "--",
            "prog",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            r.shim,
            Flags {
                mode: Some(Mode::Report),
                halt_on_error: Some(true),
                error_exitcode: Some(Some(9)),
                durations: None,
                mute: Some(vec!["peer-access.unidirectional", "divergence.unlisted"]),
                duplicate_limit: Some(0),
                stack_depth: None,
                blocked_bind_ms: None,
                trace_level: None,
                trace_limit: None,
            }
        );
        assert_eq!(
            r.shim.pairs(),
            [
                "mode=report",
                "halt_on_error=1",
                "error_exitcode=9",
                "mute=peer-access.unidirectional,divergence.unlisted",
                "duplicate_limit=0",
            ]
        );
        assert!(Flags::default().pairs().is_empty());
        for (args, why) in [
            (
                &["run", "--mode", "loud", "--", "x"][..],
                "`--mode` needs `report` or `strict`, not `loud`",
            ),
            (&["run", "--error-exitcode", "abc", "--", "x"], "not `abc`"),
            (&["run", "--error-exitcode=-1", "--", "x"], "not `-1`"),
            (&["run", "--duplicate-limit", "1.5", "--", "x"], "not `1.5`"),
            (
                &["run", "--mute", "nope", "--", "x"],
                "`nope` given to `--mute`",
            ),
            (&["run", "--mute", " , ", "--", "x"], "at least one rule ID"),
            (
                &["run", "--halt-on-error=yes", "--", "x"],
                "unexpected value 'yes'",
            ),
            (
                &["run", "--trace-limit", "12T", "--", "x"],
                "a size in bytes",
            ),
            (
                &["run", "--mode"],
                "a value is required for '--mode <MODE>'",
            ),
        ] {
            let e = err(args);
            assert!(e.contains(why), "{args:?}: {e}");
        }
    }

    #[test]
    fn cat_clean_and_completions() {
        assert_eq!(p(&["cat"]).unwrap(), Command::Cat(vec![]));
        assert_eq!(
            p(&["cat", "a.jsonl", "--", "-b"]).unwrap(),
            Command::Cat(vec![PathBuf::from("a.jsonl"), PathBuf::from("-b")])
        );
        assert!(err(&["cat", "--format", "json"]).contains("unexpected argument '--format'"));
        assert_eq!(
            p(&["cat", "-h"]).unwrap_err().kind(),
            ErrorKind::DisplayHelp
        );
        assert_eq!(
            p(&["help", "cat"]).unwrap_err().kind(),
            ErrorKind::DisplayHelp
        );
        assert_eq!(p(&["clean"]).unwrap(), Command::Clean(0));
        assert_eq!(p(&["clean", "--keep", "3"]).unwrap(), Command::Clean(3));
        assert!(err(&["clean", "--keep", "x"]).contains("invalid value 'x'"));
        assert_eq!(
            p(&["completions", "bash"]).unwrap(),
            Command::Completions(clap_complete::Shell::Bash)
        );
        assert!(err(&["completions", "tcsh"]).contains("invalid value 'tcsh'"));
    }

    #[test]
    fn rules_parses() {
        assert_eq!(
            p(&["rules"]).unwrap(),
            Command::Rules(RulesArgs {
                format: Format::Text,
                ids: vec![]
            })
        );
        assert_eq!(
            p(&["rules", "--format=json", "a.b"]).unwrap(),
            Command::Rules(RulesArgs {
                format: Format::Json,
                ids: vec!["a.b".into()]
            })
        );
        assert_eq!(
            p(&["explain", "x.y", "z"]).unwrap(),
            Command::Rules(RulesArgs {
                format: Format::Text,
                ids: vec!["x.y".into(), "z".into()]
            })
        );
        assert!(err(&["explain"]).contains("required"));
        assert_eq!(
            p(&["rules", "-h"]).unwrap_err().kind(),
            ErrorKind::DisplayHelp
        );
        assert_eq!(
            p(&["--version"]).unwrap_err().kind(),
            ErrorKind::DisplayVersion
        );
    }

    #[test]
    fn every_option_of_the_table_is_a_run_flag_with_its_help() {
        let run = command().find_subcommand("run").unwrap().clone();
        for o in options::TABLE {
            let arg = run
                .get_arguments()
                .find(|a| a.get_id() == o.key)
                .unwrap_or_else(|| panic!("{} has no flag", o.key));
            assert_eq!(arg.get_long(), Some(o.flag_name().trim_start_matches("--")));
            assert!(arg.get_help().unwrap().to_string().starts_with(o.help));
        }
    }
}
