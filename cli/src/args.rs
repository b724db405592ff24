//! Command-line parsing, hand-written: one function per command, each returning either the parsed
//! command or a [`UsageError`] that says what was wrong and what to type instead.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::LazyLock;

use sharecheck_core::options::{self, FlagError, Flags, OptionInfo};
use sharecheck_core::schema::{self, env, libraries};

/// Exit status of a usage error (bad flags, missing program): the convention of most Unix tools.
pub const EXIT_USAGE: i32 = 2;

/// Help lines are wrapped to this width.
const WIDTH: usize = 96;
/// Where an option's description starts in `OPTIONS:` lists.
const HELP_COLUMN: usize = 24;
/// Usage synopses are wrapped to this width.
const SYNOPSIS_WIDTH: usize = 90;
/// Where a variable's description starts in `ENVIRONMENT:` lists.
const ENV_COLUMN: usize = 28;

/// Packs `words` into lines of at most `width` columns (a longer word stands alone): the first
/// line is `first`, which starts at column `first_col`, then words; the others start with
/// `indent` spaces.
fn wrap<'a>(
    first: &str,
    first_col: usize,
    indent: usize,
    width: usize,
    words: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut out = String::from(first);
    let mut col = first_col + first.chars().count();
    let mut at_start = first.is_empty();
    for word in words {
        let len = word.chars().count();
        if !at_start && col + 1 + len > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            at_start = true;
        }
        if !at_start {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
        at_start = false;
    }
    out
}

/// One entry of an `OPTIONS:` list: `    --flag VALUE        help...`, the help starting at
/// `column` (on the next line when the name reaches it) and wrapped.
fn entry(name: &str, column: usize, help: &str) -> String {
    let mut out = format!("    {name}");
    if out.len() + 1 > column {
        out.push('\n');
        out.push_str(&" ".repeat(column));
    } else {
        out.push_str(&" ".repeat(column - out.len()));
    }
    let mut words = help.split_whitespace();
    let first = words.next().unwrap_or("");
    out + &wrap(first, column, column, WIDTH, words) + "\n"
}

/// An entry of the `OPTIONS:` list of a command.
fn option_entry(flag: &str, help: &str) -> String {
    entry(flag, HELP_COLUMN, help)
}

/// `sharecheck run [--sim] ... -- PROG [ARGS...]`: the synopsis of `sharecheck run`, with every
/// flag of the options table. Continuation lines start with `indent` spaces, under the first
/// `[`; the first line starts at column `indent - 15`.
fn run_synopsis(indent: usize) -> String {
    let items: Vec<String> = [
        "[--sim]",
        "[--trace PATTERN]",
        "[--options OPTS]",
        "[--quiet]",
    ]
    .into_iter()
    .map(String::from)
    .chain(options::TABLE.iter().map(|o| format!("[{}]", o.flag)))
    .chain(["-- PROG [ARGS...]".to_string()])
    .collect();
    wrap(
        "sharecheck run",
        indent - "sharecheck run ".len(),
        indent,
        SYNOPSIS_WIDTH,
        items.iter().map(String::as_str),
    )
}

/// One entry per table row: the help text, whether the flag adds up, and the default of a key
/// that takes a value.
fn option_flag_entries() -> String {
    options::TABLE
        .iter()
        .map(|o: &OptionInfo| {
            let default = match ((o.default_text)(), o.switch) {
                (Some(d), None) => format!(" Default: {d}."),
                _ => String::new(),
            };
            let repeat = if o.adds_up { " Repeatable." } else { "" };
            option_entry(o.flag, &format!("{}{repeat}{default}", o.help))
        })
        .collect()
}

/// The paragraph after the `OPTIONS:` list of `sharecheck run`: how the flags become pairs.
fn option_flags_paragraph() -> String {
    let t = options::TABLE;
    let (first, last) = (t[0].flag_name(), t[t.len() - 1].flag_name());
    let adds_up: Vec<&str> = t.iter().filter(|o| o.adds_up).map(|o| o.key).collect();
    let adds_up = match adds_up.as_slice() {
        [] => String::new(),
        keys => format!(", and {} lists add up", keys.join(" and ")),
    };
    let text = format!(
        "The flags from {first} to {last} set the {opts} keys of the same name ({keys}). PROG \
         gets ${opts}, then --options, then these flags, joined with `:`; a later pair wins \
         over an earlier one{adds_up}. sharecheck checks the result before PROG starts and \
         prints each problem: a bad pair keeps that key's default and PROG still runs. A \
         malformed flag value is a usage error. In strict mode a call the documentation says \
         must fail returns its documented code (`sharecheck rules`: Strict code) without \
         reaching the driver.",
        opts = env::OPTIONS,
        keys = options::KEYS.join(", "),
    );
    wrap("", 0, 0, WIDTH, text.split_whitespace()) + "\n"
}

static TOP_USAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "\
sharecheck: validate CUDA/HIP peer access, IPC, stream attach and logical endpoint calls

USAGE:
    {run}
    sharecheck report [--format text|json] [--fail-on error|warning|info] [TRACE...]
    sharecheck rules [--format text|json] [RULE...]
    sharecheck explain RULE...
    sharecheck cat [TRACE...]
    sharecheck clean [--keep N]
    sharecheck help [COMMAND]
    sharecheck --version

COMMANDS:
    run       Run PROG (and every process it starts) under the sharecheck shim, then print
              a one-line summary of the traces it wrote.
    report    Merge the trace files of one or more runs and print the findings.
    rules     Print the catalogue of rules sharecheck checks (RULES.md is its text output), or
              the rules named.
    explain   Print the rules named (`sharecheck rules RULE...`).
    cat       Print the records of trace files as JSON Lines, with what a process that crashed
              left in its ring file (for jq and other readers).
    clean     Remove the run directories `run` left in ./sharecheck-trace (all, or all but the
              newest N).
    help      Print this text, or the help of one command.

Run `sharecheck help run`, `sharecheck help report`, `sharecheck help rules` or
`sharecheck help cat` for the options of each command.
",
        run = run_synopsis(19)
    )
});

static RUN_USAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "\
sharecheck run: run a program under the sharecheck shim

USAGE:
    sharecheck run [OPTIONS] -- PROG [ARGS...]

PROG is searched in PATH as a shell would. It and every process it starts inherit the shim
through LD_PRELOAD; each process writes its own JSON Lines trace.

OPTIONS:
{sim}{trace}{keep}{options}{flags}    -q, --quiet         Do not print the summary line after PROG exits.
    -h, --help          Print this help.

{paragraph}
ENVIRONMENT:
{env_shim}{env_sim}{env_job_key}
EXIT STATUS:
    PROG's exit status; 128+N if PROG was killed by signal N; 126/127 if PROG could not be
    started (not executable / not found); 2 on a usage error or if the shim cannot be found.
    With error_exitcode=N (--error-exitcode N): N if PROG exited 0 and a trace file this run
    created or changed holds a finding of severity error.
",
        sim = option_entry(
            "--sim",
            &format!(
                "Use the simulated CUDA driver / HIP runtime instead of the real ones (no GPU \
                 needed). Found next to the shim, or at ${}.",
                env::SIM_LIBRARY
            )
        ),
        trace = option_entry(
            "--trace PATTERN",
            &format!(
                "Where each process writes its trace (sets {}). The shim expands %p (pid), %h \
                 (host), %q{{VAR}} (environment variable, with / made _ so that it names one \
                 piece of a path), %%; makes missing directories; writes NAME.PID where NAME \
                 is taken (the summary names the files written); /dev/null: no trace. \
                 Default: ${} if set, else a \
                 directory of this run's own, ./{}/run-DATE-TIME-PID/{}, with a manifest.json \
                 (program, arguments, start and end, exit status, options, version)",
                env::TRACE,
                env::TRACE,
                schema::DEFAULT_TRACE_DIR,
                schema::DEFAULT_TRACE_FILE
            )
        ),
        keep = option_entry(
            "--keep N",
            &format!(
                "Keep the newest N run directories of ./{} (this one included); older ones \
                 are removed after the run. Default {}; 0 keeps all.",
                schema::DEFAULT_TRACE_DIR,
                DEFAULT_KEEP_RUNS
            )
        ),
        options = option_entry(
            "--options OPTS",
            &format!(
                "key=value:key=value options of the shim ({}; below).",
                env::OPTIONS
            )
        ),
        flags = option_flag_entries(),
        paragraph = option_flags_paragraph(),
        env_shim = entry(
            env::SHIM,
            ENV_COLUMN,
            &format!(
                "Path of {shim} (default: next to this executable, or ../lib/{shim} relative \
                 to it).",
                shim = libraries::SHIM
            )
        ),
        env_sim = entry(
            env::SIM_LIBRARY,
            ENV_COLUMN,
            &format!("Path of {} for --sim.", libraries::SIM)
        ),
        env_job_key = entry(
            env::JOB_KEY,
            ENV_COLUMN,
            "Key of the IPC handle fingerprints; generated when unset so every process of the \
             job uses the same one."
        ),
    )
});

pub const RULES_USAGE: &str = "\
sharecheck rules: print the catalogue of rules sharecheck checks, or the rules named

USAGE:
    sharecheck rules [--format text|json] [RULE...]
    sharecheck explain [--format text|json] RULE...

ARGUMENTS:
    RULE                A rule ID as findings name it (cuMemcpyPeer.range-outside-allocation).
                        Without one, every rule. An ID no rule has is a usage error that names
                        the IDs containing it.

OPTIONS:
    --format text|json  text (default): Markdown, one section per rule; RULES.md is the whole
                        catalogue. json: one array with an object per rule: rule, severity,
                        kind, functions, requirement, doc, quote, documented_code, fix.
    -h, --help          Print this help.

SEVERITY:
    error    a documented requirement is broken: the call fails or its result is not what the
             program meant
    warning  undefined or silently different behaviour
    info     harmless or explanatory (a query with no effect on later calls, a note on what a
             call did, a failure explained)

EXIT STATUS:
    0 success; 2 usage error.
";

static REPORT_USAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "\
sharecheck report: merge trace files and print the findings

USAGE:
    sharecheck report [OPTIONS] [TRACE...]

TRACE is a trace file or a directory (every *{suffix} in it, and *{suffix}.PID: where the shim
writes when *{suffix} exists). Default: the newest run directory of ./{dir} (what the last
`sharecheck run` wrote), or ./{dir} itself where it holds none.

OPTIONS:
    --format text|json|sarif|perfetto
                            text (default): findings grouped by rule, calls per function, each
                            exported IPC handle's exchange (IPC HANDLES) and a SUMMARY line.
                            sarif: SARIF 2.1.0 for code-scanning services and IDEs (the rule
                            catalogue as the tool's rules; each finding with its stack, file and
                            line where resolved).
                            json: one object {{\"calls\",\"processes\",\"findings\"}} with the
                            findings of every process sorted by (pid, time, seq), and \"ipc\":
                            [{{\"handle\",\"steps\"}}] when a memory handle was exported.
                            perfetto: a timeline (Chrome trace-event JSON) for ui.perfetto.dev or
                            chrome://tracing: a track per process and thread, each call a slice
                            with its arguments and result, each finding an instant event, each
                            IPC or endpoint handle's export -> import a flow arrow.
    --fail-on SEVERITY      Exit 1 if a finding of SEVERITY or worse exists
                            (error, warning or info). Useful in CI.
    --rule ID[,ID...]       Only the findings of these rules (repeatable).
    --severity SEVERITY     Only findings of SEVERITY or worse.
    --pid PID[,PID...]      Only the findings of these processes (repeatable).
    --fn NAME[,NAME...]     Only the findings on calls of these functions (exact symbols, such
                            as cuMemcpyPeerAsync_ptsz; repeatable).
    --limit N               Show at most N occurrences of each rule in text (default 10; 0: all);
                            every occurrence is counted.
    --all                   Without a TRACE: every run directory of ./{dir}, not only the
                            newest.
    --suppressions FILE     Leave out the findings a suppression of FILE matches (repeatable);
                            they are counted (\"suppressed\" in JSON), not shown. A line is one
                            suppression: conditions rule:GLOB, fn:GLOB and frame:GLOB (any frame
                            of the stack, as module+0xOFFSET (symbol)), all of which must hold;
                            # starts a comment.
    --gen-suppressions      Print suppressions for the findings shown, instead of the report.
    --baseline TRACE        Compare with an earlier run (a run directory or trace files): list the
                            findings that are new and those that are gone (by rule, function
                            and the innermost frame), and exit 1 if any is new.
    -h, --help              Print this help.

The filters apply to everything the report shows and counts, --fail-on included.

EXIT STATUS:
    0 success; 1 findings at or above --fail-on; 2 usage error or unreadable input (a TRACE
    that cannot be opened, or no trace record at all).
",
        suffix = schema::TRACE_SUFFIX,
        dir = schema::DEFAULT_TRACE_DIR,
    )
});

/// `sharecheck --help`.
pub fn top_usage() -> &'static str {
    &TOP_USAGE
}

/// `sharecheck help run`.
pub fn run_usage() -> &'static str {
    &RUN_USAGE
}

/// `sharecheck help report`.
pub fn report_usage() -> &'static str {
    &REPORT_USAGE
}

#[derive(Debug)]
pub struct UsageError {
    /// What was wrong, e.g. "unknown option `--foo`".
    pub message: String,
    /// The usage line of the command concerned.
    pub usage: &'static str,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

fn usage_err(message: impl Into<String>, usage: &'static str) -> UsageError {
    UsageError {
        message: message.into(),
        usage,
    }
}

// Continuation lines line up under the first `[` after the `usage: ` prefix main.rs prints.
static RUN_SHORT: LazyLock<String> = LazyLock::new(|| run_synopsis(22));

/// The usage line of `sharecheck run`, printed after a usage error.
pub fn run_short() -> &'static str {
    &RUN_SHORT
}

pub const REPORT_SHORT: &str =
    "sharecheck report [--format text|json|sarif|perfetto] [--fail-on SEVERITY] \
    [--rule ID] [--severity SEVERITY] [--pid PID] [--fn NAME] [--limit N] [TRACE...]";
pub const RULES_SHORT: &str = "sharecheck rules [--format text|json] [RULE...]";
pub const CLEAN_SHORT: &str = "sharecheck clean [--keep N]";

pub const CLEAN_USAGE: &str = "\
sharecheck clean: remove the run directories `sharecheck run` left in ./sharecheck-trace

USAGE:
    sharecheck clean [--keep N]

OPTIONS:
    --keep N    Keep the newest N runs (default 0: remove every run directory). Only
                directories with a manifest.json are removed; other files stay.
    -h, --help  Print this help.

EXIT STATUS:
    0 success; 2 usage error or a directory that could not be removed.
";
pub const CAT_SHORT: &str = "sharecheck cat [TRACE...]";

static CAT_USAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "\
sharecheck cat: print the records of trace files as JSON Lines

USAGE:
    sharecheck cat [TRACE...]

TRACE is a trace file or a directory (every *{suffix} in it, and *{suffix}.PID). Default:
./{dir}. Each file's records are printed in the file's order, one per line, exactly as written,
followed by the records its ring file (FILE{ring}) still holds when its process ended without
exit handlers (_exit, exec, a fatal signal, kill -9): those are not in the file itself. A record
cut short and space never filled are left out (with a warning on stderr).

OPTIONS:
    -h, --help    Print this help.

EXIT STATUS:
    0 success; 2 usage error or unreadable input (a TRACE that cannot be opened).
",
        suffix = schema::TRACE_SUFFIX,
        dir = schema::DEFAULT_TRACE_DIR,
        ring = sharecheck_core::ring::SUFFIX,
    )
});

/// `sharecheck help cat`.
pub fn cat_usage() -> &'static str {
    &CAT_USAGE
}
pub const TOP_SHORT: &str = "sharecheck run|report|rules|help [...]  (see `sharecheck --help`)";

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(RunArgs),
    Report(ReportArgs),
    Rules(RulesArgs),
    /// `sharecheck cat TRACE...`.
    Cat(Vec<PathBuf>),
    /// `sharecheck clean [--keep N]`: the run directories kept.
    Clean(usize),
    /// Help text to print on stdout.
    Help(&'static str),
    Version,
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

/// Run directories `sharecheck run` keeps by default.
pub const DEFAULT_KEEP_RUNS: usize = 10;

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

/// Occurrences of a rule shown in text by default.
pub const DEFAULT_LIMIT: usize = 10;

/// Splits `--name=value` into (`--name`, Some(value)); anything else into (arg, None).
fn split_eq(arg: &OsStr) -> (String, Option<OsString>) {
    let bytes = arg.as_bytes();
    if bytes.starts_with(b"--") {
        if let Some(eq) = bytes.iter().position(|&b| b == b'=') {
            let name = String::from_utf8_lossy(&bytes[..eq]).into_owned();
            let value = OsStr::from_bytes(&bytes[eq + 1..]);
            return (name, Some(value.to_os_string()));
        }
    }
    (arg.to_string_lossy().into_owned(), None)
}

/// Takes the value of option `name`: the `=value` part, or the next argument.
fn take_value(
    name: &str,
    inline: Option<OsString>,
    rest: &mut impl Iterator<Item = OsString>,
    what: &str,
    usage: &'static str,
) -> Result<OsString, UsageError> {
    let value = match inline {
        Some(v) => v,
        None => rest
            .next()
            .ok_or_else(|| usage_err(format!("option `{name}` needs a value ({what})"), usage))?,
    };
    if value.is_empty() {
        return Err(usage_err(
            format!("option `{name}` needs a non-empty value ({what})"),
            usage,
        ));
    }
    Ok(value)
}

/// The value of `--format`: text or json.
fn take_format(
    name: &str,
    inline: Option<OsString>,
    rest: &mut impl Iterator<Item = OsString>,
    usage: &'static str,
) -> Result<Format, UsageError> {
    let v = take_value(name, inline, rest, "text or json", usage)?;
    match v.to_string_lossy().as_ref() {
        "text" => Ok(Format::Text),
        "json" => Ok(Format::Json),
        other => Err(usage_err(
            format!("unknown format `{other}` for `--format` (use text or json)"),
            usage,
        )),
    }
}

fn no_value(name: &str, inline: &Option<OsString>, usage: &'static str) -> Result<(), UsageError> {
    match inline {
        Some(_) => Err(usage_err(format!("option `{name}` takes no value"), usage)),
        None => Ok(()),
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, UsageError> {
    let mut args = args.into_iter();
    let Some(first) = args.next() else {
        return Err(usage_err("no command given", TOP_SHORT));
    };
    match first.to_string_lossy().as_ref() {
        "run" => parse_run(args),
        "report" => parse_report(args),
        "rules" => parse_rules(args, "rules"),
        "explain" => parse_rules(args, "explain"),
        "cat" => parse_cat(args),
        "clean" => parse_clean(args),
        "help" | "--help" | "-h" => match args.next() {
            None => Ok(Command::Help(top_usage())),
            Some(cmd) => match cmd.to_string_lossy().as_ref() {
                "run" => Ok(Command::Help(run_usage())),
                "report" => Ok(Command::Help(report_usage())),
                "rules" | "explain" => Ok(Command::Help(RULES_USAGE)),
                "cat" => Ok(Command::Help(cat_usage())),
                "clean" => Ok(Command::Help(CLEAN_USAGE)),
                "help" => Ok(Command::Help(top_usage())),
                other => Err(usage_err(
                    format!(
                        "no help for unknown command `{other}` (commands: run, report, rules, explain, cat, clean)"
                    ),
                    TOP_SHORT,
                )),
            },
        },
        "--version" | "-V" | "version" => Ok(Command::Version),
        other if other.starts_with('-') => Err(usage_err(
            format!(
                "unknown option `{other}`; options go after the command (run, report, rules, cat)"
            ),
            TOP_SHORT,
        )),
        other => Err(usage_err(
            format!("unknown command `{other}` (commands: run, report, rules, cat, help)"),
            TOP_SHORT,
        )),
    }
}

fn parse_run(args: impl Iterator<Item = OsString>) -> Result<Command, UsageError> {
    let usage = run_short();
    let mut args = args.peekable();
    let mut run = RunArgs::default();
    let mut saw_dashdash = false;
    while let Some(arg) = args.next() {
        if arg == "--" {
            saw_dashdash = true;
            break;
        }
        let (name, inline) = split_eq(&arg);
        if let Some(option) = options::by_flag(&name) {
            let value = match option.switch {
                Some(on) => {
                    no_value(&name, &inline, usage)?;
                    on.to_string()
                }
                None => take_value(&name, inline, &mut args, option.expected, usage)?
                    .to_string_lossy()
                    .into_owned(),
            };
            run.shim
                .set(option.key, &value)
                .map_err(|e| usage_err(flag_error(&name, &value, e), usage))?;
            continue;
        }
        match name.as_str() {
            "--sim" => {
                no_value(&name, &inline, usage)?;
                run.sim = true;
            }
            "--quiet" | "-q" => {
                no_value(&name, &inline, usage)?;
                run.quiet = true;
            }
            "--keep" => {
                let v = take_value(&name, inline, &mut args, "a number of runs", usage)?;
                let v = v.to_string_lossy();
                run.keep = Some(v.parse().map_err(|_| {
                    usage_err(format!("`{v}` is not a number of runs for `--keep`"), usage)
                })?);
            }
            "--trace" => {
                run.trace = Some(take_value(
                    &name,
                    inline,
                    &mut args,
                    "a file pattern such as traces/%p.jsonl",
                    usage,
                )?)
            }
            "--options" => {
                run.options = Some(take_value(
                    &name,
                    inline,
                    &mut args,
                    "key=value:key=value",
                    usage,
                )?)
            }
            "--help" | "-h" => return Ok(Command::Help(run_usage())),
            _ if name.starts_with('-') => {
                return Err(usage_err(
                    format!(
                        "unknown option `{name}` for `run` (options: --sim, --trace, --keep, --options, \
                         {}, --quiet)",
                        options::TABLE
                            .iter()
                            .map(OptionInfo::flag_name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    usage,
                ))
            }
            _ => {
                return Err(usage_err(
                    format!(
                    "`{name}` must come after `--`: write `sharecheck run [OPTIONS] -- {name} ...`"
                ),
                    usage,
                ))
            }
        }
    }
    if !saw_dashdash {
        return Err(usage_err("missing `--` and the program to run", usage));
    }
    let Some(prog) = args.next() else {
        return Err(usage_err("missing the program to run after `--`", usage));
    };
    if prog.is_empty() {
        return Err(usage_err(
            "the program to run after `--` is an empty string",
            usage,
        ));
    }
    run.prog = prog;
    run.prog_args = args.collect();
    Ok(Command::Run(run))
}

/// The usage error for a value [`Flags::set`] refused.
fn flag_error(flag: &str, value: &str, error: FlagError) -> String {
    match error {
        FlagError::Invalid { expected } => format!("`{flag}` needs {expected}, not `{value}`"),
        FlagError::Rejected(r) => format!("`{}` given to `{flag}` {}", r.item, r.why),
        FlagError::UnknownKey => format!("`{flag}` names no option key"),
    }
}

fn parse_cat(args: impl Iterator<Item = OsString>) -> Result<Command, UsageError> {
    let mut args = args.peekable();
    let mut traces = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--" {
            traces.extend(args.by_ref().map(PathBuf::from));
            break;
        }
        let (name, _) = split_eq(&arg);
        match name.as_str() {
            "--help" | "-h" => return Ok(Command::Help(cat_usage())),
            _ if name.starts_with('-') && name != "-" => {
                return Err(usage_err(
                    format!(
                        "unknown option `{name}` for `cat` (it takes none); to read a file whose \
                         name starts with `-`, put it after `--`"
                    ),
                    CAT_SHORT,
                ))
            }
            _ => traces.push(PathBuf::from(arg)),
        }
    }
    Ok(Command::Cat(traces))
}

fn parse_report(args: impl Iterator<Item = OsString>) -> Result<Command, UsageError> {
    let usage = REPORT_SHORT;
    let mut args = args.peekable();
    let mut format = Format::Text;
    let mut fail_on = None;
    let mut traces = Vec::new();
    let mut filter = Filter::default();
    let mut limit = DEFAULT_LIMIT;
    let mut all = false;
    let mut suppressions = Vec::new();
    let mut gen_suppressions = false;
    let mut baseline = None;
    let severity = |name: &str, v: &OsStr| {
        let v = v.to_string_lossy();
        Severity::parse(&v).ok_or_else(|| {
            usage_err(
                format!("unknown severity `{v}` for `{name}` (use error, warning or info)"),
                usage,
            )
        })
    };
    let list = |v: &OsStr| -> Vec<String> {
        v.to_string_lossy()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    while let Some(arg) = args.next() {
        if arg == "--" {
            traces.extend(args.by_ref().map(PathBuf::from));
            break;
        }
        let (name, inline) = split_eq(&arg);
        match name.as_str() {
            "--format" => {
                let v = take_value(
                    &name,
                    inline,
                    &mut args,
                    "text, json, sarif or perfetto",
                    usage,
                )?;
                format = match v.to_string_lossy().as_ref() {
                    "text" => Format::Text,
                    "json" => Format::Json,
                    "sarif" => Format::Sarif,
                    "perfetto" => Format::Perfetto,
                    other => {
                        return Err(usage_err(
                            format!(
                                "unknown format `{other}` for `--format` (use text, json, sarif \
                                 or perfetto)"
                            ),
                            usage,
                        ))
                    }
                }
            }
            "--fail-on" => {
                let v = take_value(&name, inline, &mut args, "error, warning or info", usage)?;
                fail_on = Some(severity(&name, &v)?);
            }
            "--severity" => {
                let v = take_value(&name, inline, &mut args, "error, warning or info", usage)?;
                filter.severity = Some(severity(&name, &v)?);
            }
            "--all" => {
                no_value(&name, &inline, usage)?;
                all = true;
            }
            "--suppressions" => {
                let v = take_value(&name, inline, &mut args, "a suppressions file", usage)?;
                suppressions.push(PathBuf::from(v));
            }
            "--gen-suppressions" => {
                no_value(&name, &inline, usage)?;
                gen_suppressions = true;
            }
            "--baseline" => {
                let v = take_value(&name, inline, &mut args, "an earlier run's traces", usage)?;
                baseline = Some(PathBuf::from(v));
            }
            "--rule" => {
                let v = take_value(&name, inline, &mut args, "a rule ID", usage)?;
                filter.rules.extend(list(&v));
            }
            "--fn" => {
                let v = take_value(&name, inline, &mut args, "a function name", usage)?;
                filter.fns.extend(list(&v));
            }
            "--pid" => {
                let v = take_value(&name, inline, &mut args, "a process id", usage)?;
                for p in list(&v) {
                    filter.pids.push(p.parse().map_err(|_| {
                        usage_err(format!("`{p}` is not a process id for `--pid`"), usage)
                    })?);
                }
            }
            "--limit" => {
                let v = take_value(&name, inline, &mut args, "a number", usage)?;
                let v = v.to_string_lossy();
                limit = v.parse().map_err(|_| {
                    usage_err(format!("`{v}` is not a number for `--limit`"), usage)
                })?;
            }
            "--help" | "-h" => return Ok(Command::Help(report_usage())),
            _ if name.starts_with('-') && name != "-" => {
                return Err(usage_err(
                    format!(
                        "unknown option `{name}` for `report` (options: --format, --fail-on, \
                         --rule, --severity, --pid, --fn, --limit, --all, --suppressions, \
                         --gen-suppressions, --baseline); \
                         to read a file whose name starts with `-`, put it after `--`"
                    ),
                    usage,
                ))
            }
            _ => traces.push(PathBuf::from(arg)),
        }
    }
    Ok(Command::Report(ReportArgs {
        format,
        fail_on,
        traces,
        filter,
        limit,
        all,
        suppressions,
        gen_suppressions,
        baseline,
    }))
}

fn parse_clean(mut args: impl Iterator<Item = OsString>) -> Result<Command, UsageError> {
    let usage = CLEAN_SHORT;
    let mut keep = 0;
    while let Some(arg) = args.next() {
        let (name, inline) = split_eq(&arg);
        match name.as_str() {
            "--keep" => {
                let v = take_value(&name, inline, &mut args, "a number of runs", usage)?;
                let v = v.to_string_lossy();
                keep = v.parse().map_err(|_| {
                    usage_err(format!("`{v}` is not a number of runs for `--keep`"), usage)
                })?;
            }
            "--help" | "-h" => return Ok(Command::Help(CLEAN_USAGE)),
            _ => {
                return Err(usage_err(
                    format!("unknown argument `{name}` for `clean` (options: --keep)"),
                    usage,
                ))
            }
        }
    }
    Ok(Command::Clean(keep))
}

fn parse_rules(
    mut args: impl Iterator<Item = OsString>,
    command: &str,
) -> Result<Command, UsageError> {
    let usage = RULES_SHORT;
    let mut format = Format::Text;
    let mut ids = Vec::new();
    while let Some(arg) = args.next() {
        let (name, inline) = split_eq(&arg);
        match name.as_str() {
            "--format" => format = take_format(&name, inline, &mut args, usage)?,
            "--help" | "-h" => return Ok(Command::Help(RULES_USAGE)),
            _ if name.starts_with('-') => {
                return Err(usage_err(
                    format!("unknown option `{name}` for `{command}` (options: --format)"),
                    usage,
                ))
            }
            _ => ids.push(arg.to_string_lossy().into_owned()),
        }
    }
    if command == "explain" && ids.is_empty() {
        return Err(usage_err("`explain` needs the ID of a rule", usage));
    }
    Ok(Command::Rules(RulesArgs { format, ids }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharecheck_core::options::Mode;

    fn p(args: &[&str]) -> Result<Command, UsageError> {
        parse(args.iter().map(OsString::from))
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
    fn run_errors() {
        assert!(p(&["run", "prog"])
            .unwrap_err()
            .message
            .contains("after `--`"));
        assert!(p(&["run", "--sim"])
            .unwrap_err()
            .message
            .contains("missing `--`"));
        assert!(p(&["run", "--"])
            .unwrap_err()
            .message
            .contains("missing the program"));
        assert!(p(&["run", "--bogus", "--", "x"])
            .unwrap_err()
            .message
            .contains("unknown option `--bogus`"));
        assert!(p(&["run", "--trace"])
            .unwrap_err()
            .message
            .contains("needs a value"));
        assert!(p(&["run", "--sim=1", "--", "x"])
            .unwrap_err()
            .message
            .contains("takes no value"));
        assert!(p(&[]).is_err());
        assert!(p(&["frobnicate"])
            .unwrap_err()
            .message
            .contains("unknown command"));
    }

    #[test]
    fn report_parses() {
        let Command::Report(r) = p(&[
            "report",
            "--format",
            "json",
            "--fail-on=warning",
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
        assert!(p(&["report", "--format", "xml"]).is_err());
        assert!(p(&["report", "--fail-on", "fatal"]).is_err());
        assert!(p(&["report", "--x"]).is_err());
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
            (&["run", "--error-exitcode", "-1", "--", "x"], "not `-1`"),
            (&["run", "--duplicate-limit", "1.5", "--", "x"], "not `1.5`"),
            (
                &["run", "--mute", "nope", "--", "x"],
                "`nope` given to `--mute`",
            ),
            (&["run", "--mute", " , ", "--", "x"], "at least one rule ID"),
            (&["run", "--halt-on-error=yes", "--", "x"], "takes no value"),
            (
                &["run", "--mode"],
                "`--mode` needs a value (`report` or `strict`)",
            ),
        ] {
            let err = p(args).unwrap_err();
            assert!(err.message.contains(why), "{args:?}: {}", err.message);
            assert_eq!(err.usage, run_short());
        }
    }

    #[test]
    fn cat_takes_traces_and_no_options() {
        assert_eq!(p(&["cat"]).unwrap(), Command::Cat(vec![]));
        assert_eq!(
            p(&["cat", "a.jsonl", "--", "-b"]).unwrap(),
            Command::Cat(vec![PathBuf::from("a.jsonl"), PathBuf::from("-b")])
        );
        let e = p(&["cat", "--format", "json"]).unwrap_err();
        assert!(e.message.contains("takes none"), "{}", e.message);
        assert_eq!(e.usage, CAT_SHORT);
        assert_eq!(p(&["cat", "-h"]).unwrap(), Command::Help(cat_usage()));
        assert_eq!(p(&["help", "cat"]).unwrap(), Command::Help(cat_usage()));
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
        assert_eq!(p(&["rules", "-h"]).unwrap(), Command::Help(RULES_USAGE));
        assert_eq!(p(&["help", "rules"]).unwrap(), Command::Help(RULES_USAGE));
        assert_eq!(p(&["help", "explain"]).unwrap(), Command::Help(RULES_USAGE));
        for args in [
            &["rules", "--format", "xml"][..],
            &["rules", "-x"],
            &["explain"],
        ] {
            assert_eq!(p(args).unwrap_err().usage, RULES_SHORT, "{args:?}");
        }
    }

    #[test]
    fn help_and_version() {
        assert_eq!(p(&["--help"]).unwrap(), Command::Help(top_usage()));
        assert_eq!(p(&["help", "run"]).unwrap(), Command::Help(run_usage()));
        assert_eq!(p(&["report", "-h"]).unwrap(), Command::Help(report_usage()));
        assert_eq!(p(&["--version"]).unwrap(), Command::Version);
    }
}
