//! `SHARECHECK_OPTIONS`: `key=value` pairs separated by `:`, as the sanitizers take them.
//!
//! Read by the shim (mode, halt_on_error, mute, duplicate_limit) and by `sharecheck run`
//! (error_exitcode). A bad pair is reported in one message naming the key and is otherwise
//! ignored: that key keeps its default, the rest still apply. Parsing never fails.
//!
//! Every key is one row of [`options_table!`] (as compiler-rt's `sanitizer_flags.inc`): its
//! name, Rust type, default, the [`Kind`] that reads and writes its value, the value syntax, the
//! `sharecheck run` flag and the help text. The row makes the [`Options`] field and default, the
//! parser, [`Options::to_text`], [`KEYS`], the flag parser ([`Flags`]), the `sharecheck run`
//! help and the README table ([`readme_table`]). Adding an option is one row.

use crate::rules;

/// What the shim does with a call the contract says must fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything unchanged; report findings.
    Report,
    /// Do not forward a call the documentation says must fail; return the documented code.
    Strict,
}

/// What a trace records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceLevel {
    /// Every covered call (the default).
    Calls,
    /// Calls with findings, and the calls `sharecheck report`'s cross-process checks read
    /// ([`crate::rules::read_by_report`]).
    Findings,
}

impl TraceLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceLevel::Calls => "calls",
            TraceLevel::Findings => "findings",
        }
    }
}

pub const DEFAULT_DUPLICATE_LIMIT: u32 = 10;
/// Frames of the host call stack a finding carries by default.
pub const DEFAULT_STACK_DEPTH: u32 = 16;

/// The table of `SHARECHECK_OPTIONS` keys. One row per key:
///
/// ```text
/// key: RustType = default, kind Kind, syntax "value syntax", flag "--flag VALUE",
///     help "what it does";
/// ```
///
/// `syntax` is the value as the README shows it (`a|b` for alternatives); `flag` is the
/// `sharecheck run` flag, with a value name when the flag takes one (a [`Kind`] with a
/// [`Kind::SWITCH`] value takes none); `help` is one sentence for the README and `--help`.
macro_rules! options_table {
    ($(
        $key:ident: $ty:ty = $default:expr, kind $kind:ty, syntax $syntax:literal,
            flag $flag:literal, help $help:literal;
    )*) => {
        /// The parsed `SHARECHECK_OPTIONS` (one field per row of the table).
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Options {
            $(#[doc = $help] pub $key: $ty,)*
        }

        impl Default for Options {
            fn default() -> Self {
                Options { $($key: $default,)* }
            }
        }

        /// The keys, in table order, for messages and `--help`.
        pub const KEYS: &[&str] = &[$(stringify!($key)),*];

        /// The table, as data: every row in order.
        pub const TABLE: &[OptionInfo] = &[$(OptionInfo {
            key: stringify!($key),
            syntax: $syntax,
            flag: $flag,
            help: $help,
            expected: <$kind as Kind>::EXPECTED,
            switch: <$kind as Kind>::SWITCH,
            adds_up: <$kind as Kind>::ADDS_UP,
            default_text: || <$kind as Kind>::text(&$default),
        }),*];

        impl Options {
            /// Applies one `key=value` pair; `false` for an unknown key.
            fn apply(&mut self, key: &str, value: &str, problems: &mut Vec<String>) -> bool {
                match key {
                    $(stringify!($key) => {
                        let (parsed, rejected) = <$kind as Kind>::parse(value);
                        for Rejected { item, why } in rejected {
                            problems.push(format!("{key}: `{item}` {why}; ignoring it"));
                        }
                        match parsed {
                            Some(v) => <$kind as Kind>::merge(&mut self.$key, v),
                            None => problems.push(format!(
                                "{key}={value:?}: expected {}; keeping the default",
                                <$kind as Kind>::EXPECTED
                            )),
                        }
                        true
                    })*
                    _ => false,
                }
            }

            /// The options as `key=value:...` text that [`Options::parse`] reads back.
            pub fn to_text(&self) -> String {
                let mut pairs: Vec<String> = Vec::new();
                $(if let Some(text) = <$kind as Kind>::text(&self.$key) {
                    pairs.push(format!("{}={text}", stringify!($key)));
                })*
                pairs.join(":")
            }
        }

        /// Options set one at a time, as `sharecheck run`'s flags set them: `None` for a key no
        /// flag set. A later flag replaces an earlier one; lists add up.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Flags {
            $(pub $key: Option<$ty>,)*
        }

        impl Flags {
            /// Sets `key` from a flag's value. Unlike `SHARECHECK_OPTIONS`, nothing is ignored:
            /// a value that is wrong in any part, or that sets nothing, is an error.
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), FlagError> {
                match key {
                    $(stringify!($key) => {
                        let (parsed, rejected) = <$kind as Kind>::parse(value);
                        if let Some(first) = rejected.into_iter().next() {
                            return Err(FlagError::Rejected(first));
                        }
                        match parsed {
                            Some(v) if <$kind as Kind>::text(&v).is_some() => {
                                match &mut self.$key {
                                    Some(old) => <$kind as Kind>::merge(old, v),
                                    unset => *unset = Some(v),
                                }
                                Ok(())
                            }
                            _ => Err(FlagError::Invalid {
                                expected: <$kind as Kind>::EXPECTED,
                            }),
                        }
                    })*
                    _ => Err(FlagError::UnknownKey),
                }
            }

            /// The flags as `SHARECHECK_OPTIONS` pairs, in table order.
            pub fn pairs(&self) -> Vec<String> {
                let mut pairs: Vec<String> = Vec::new();
                $(if let Some(text) = self.$key.as_ref().and_then(<$kind as Kind>::text) {
                    pairs.push(format!("{}={text}", stringify!($key)));
                })*
                pairs
            }
        }
    };
}

options_table! {
    mode: Mode = Mode::Report, kind ModeKind, syntax "report|strict", flag "--mode MODE",
        help "`report`: forward every call. `strict`: a call the contract says must fail is not \
              forwarded; the shim returns the documented code (`forwarded:false` in the record; \
              HIP's last error is not set by such a refusal).";
    halt_on_error: bool = false, kind Switch, syntax "0|1", flag "--halt-on-error",
        help "Abort (SIGABRT) the process after the first error is recorded.";
    error_exitcode: Option<i32> = None, kind ExitStatus, syntax "N",
        flag "--error-exitcode N",
        help "`sharecheck run` exits N when the program exited 0 and a trace this run wrote \
              holds an error (0: off).";
    mute: Vec<&'static str> = Vec::new(), kind RuleIds, syntax "ID,ID",
        flag "--mute ID[,ID...]",
        help "Drop the findings of these rules (IDs: `sharecheck rules`).";
    durations: bool = false, kind Switch, syntax "0|1", flag "--durations",
        help "Trace each call's duration in the driver (`d`, ns): a second clock read per call.";
    duplicate_limit: u32 = DEFAULT_DUPLICATE_LIMIT, kind Count, syntax "N",
        flag "--duplicate-limit N",
        help "Print at most N reports per rule on stderr (0: no limit); the last says so; the \
              trace keeps all.";
    stack_depth: u32 = DEFAULT_STACK_DEPTH, kind Count, syntax "N",
        flag "--stack-depth N",
        help "Frames of the host call stack each finding carries (module+offset, and the \
              function from the module's symbol table; `sharecheck report` adds file:line). \
              0: none. Captured for a finding that is printed or traced (one past \
              duplicate_limit without a trace is only counted), and, traced, for the calls a \
              report-phase rule may name.";
    blocked_bind_ms: u32 = 5000, kind Count, syntax "MS",
        flag "--blocked-bind-ms MS",
        help "Report a multicast bind still blocked after MS milliseconds (the driver blocks it \
              until every device of the team is added), naming the devices this process added; \
              0: never.";
    trace_level: TraceLevel = TraceLevel::Calls, kind TraceLevelKind, syntax "calls|findings",
        flag "--trace-level LEVEL",
        help "`calls`: the trace records every covered call. `findings`: only calls with \
              findings and the calls the report's cross-process checks read (IPC, logical \
              endpoints, frees, context and event destruction), for long jobs; the report \
              says the trace is partial.";
    trace_limit: u64 = 0, kind Bytes, syntax "SIZE",
        flag "--trace-limit SIZE",
        help "Stop recording once a trace file would grow past SIZE bytes (`K`, `M`, `G`: \
              KiB, MiB, GiB; at least 4K; 0: no limit). The file then ends with a line that \
              says so and the process's exit record; `sharecheck run` and `report` name the \
              files cut short.";
}

/// One row of the table, as data.
#[derive(Clone, Copy, Debug)]
pub struct OptionInfo {
    pub key: &'static str,
    /// The value as the README shows it: `a|b` for alternatives, else a placeholder.
    pub syntax: &'static str,
    /// The `sharecheck run` flag and, after a space, its value name (none for a switch).
    pub flag: &'static str,
    pub help: &'static str,
    /// What a good value looks like, for messages: see [`Kind::EXPECTED`].
    pub expected: &'static str,
    /// The value a flag without a value stands for: see [`Kind::SWITCH`].
    pub switch: Option<&'static str>,
    /// Whether later values add to earlier ones (lists) instead of replacing them.
    pub adds_up: bool,
    /// The default as `key=` text, `None` when the default writes nothing (an empty list).
    pub default_text: fn() -> Option<String>,
}

impl OptionInfo {
    /// The flag itself: `--mode`.
    pub fn flag_name(&self) -> &'static str {
        self.flag
            .split_once(' ')
            .map_or(self.flag, |(name, _)| name)
    }

    /// The flag's value name (`MODE`), `None` for a switch.
    pub fn flag_value(&self) -> Option<&'static str> {
        self.flag.split_once(' ').map(|(_, value)| value)
    }

    /// The pairs the README shows for this key: `mode=report` / `mode=strict`.
    pub fn spellings(&self) -> Vec<String> {
        self.syntax
            .split('|')
            .map(|v| format!("{}={v}", self.key))
            .collect()
    }
}

/// The row whose `sharecheck run` flag is `name` (`--mode`).
pub fn by_flag(name: &str) -> Option<&'static OptionInfo> {
    TABLE.iter().find(|o| o.flag_name() == name)
}

/// A part of a value that was rejected while the rest applies (an unknown ID in a list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub item: String,
    /// Completes "`item` ...": "is not a rule ID (...)".
    pub why: &'static str,
}

/// Why [`Flags::set`] refused a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlagError {
    /// The value is not one the key takes (or sets nothing).
    Invalid { expected: &'static str },
    /// A part of the value is wrong.
    Rejected(Rejected),
    /// No row has this key.
    UnknownKey,
}

/// How the values of one kind of option are read, written and combined. The table names a kind
/// per key; a kind is a type with no values (it is never constructed).
pub trait Kind {
    type Value;
    /// What a good value looks like, completing "expected ..." and "`--flag` needs ...".
    const EXPECTED: &'static str;
    /// The value a `sharecheck run` flag given without a value stands for; `None` when the
    /// flag takes a value.
    const SWITCH: Option<&'static str> = None;
    /// Whether [`Kind::merge`] adds up rather than replaces.
    const ADDS_UP: bool = false;
    /// Reads a value: `None` when it is rejected whole; parts rejected while the rest applies go
    /// in the list.
    fn parse(text: &str) -> (Option<Self::Value>, Vec<Rejected>);
    /// The value as text [`Kind::parse`] reads back; `None` when it writes nothing.
    fn text(value: &Self::Value) -> Option<String>;
    /// Combines a later value with an earlier one: the later replaces it.
    fn merge(into: &mut Self::Value, later: Self::Value) {
        *into = later;
    }
}

fn whole<T>(value: Option<T>) -> (Option<T>, Vec<Rejected>) {
    (value, Vec::new())
}

/// `report` or `strict`.
pub enum ModeKind {}

impl Kind for ModeKind {
    type Value = Mode;
    const EXPECTED: &'static str = "`report` or `strict`";
    fn parse(text: &str) -> (Option<Mode>, Vec<Rejected>) {
        whole(match text {
            "report" => Some(Mode::Report),
            "strict" => Some(Mode::Strict),
            _ => None,
        })
    }
    fn text(value: &Mode) -> Option<String> {
        Some(
            match value {
                Mode::Report => "report",
                Mode::Strict => "strict",
            }
            .into(),
        )
    }
}

/// On or off: `1`/`true`/`yes`, `0`/`false`/`no`. As a flag, its presence means on.
pub enum Switch {}

impl Kind for Switch {
    type Value = bool;
    const EXPECTED: &'static str = "0 or 1";
    const SWITCH: Option<&'static str> = Some("1");
    fn parse(text: &str) -> (Option<bool>, Vec<Rejected>) {
        whole(match text {
            "1" | "true" | "yes" => Some(true),
            "0" | "false" | "no" => Some(false),
            _ => None,
        })
    }
    fn text(value: &bool) -> Option<String> {
        Some(u8::from(*value).to_string())
    }
}

/// A process exit status from 1 to 255; 0 means off (`None`).
pub enum ExitStatus {}

impl Kind for ExitStatus {
    type Value = Option<i32>;
    const EXPECTED: &'static str = "an exit status from 1 to 255, or 0 for off";
    fn parse(text: &str) -> (Option<Option<i32>>, Vec<Rejected>) {
        whole(match text.parse::<i32>() {
            Ok(n) if (0..=255).contains(&n) => Some((n != 0).then_some(n)),
            _ => None,
        })
    }
    fn text(value: &Option<i32>) -> Option<String> {
        Some(value.unwrap_or(0).to_string())
    }
}

/// A count; 0 means no limit.
pub enum Count {}

impl Kind for Count {
    type Value = u32;
    const EXPECTED: &'static str = "a count of reports per rule, 0 for no limit";
    fn parse(text: &str) -> (Option<u32>, Vec<Rejected>) {
        whole(text.parse::<u32>().ok())
    }
    fn text(value: &u32) -> Option<String> {
        Some(value.to_string())
    }
}

/// `calls` or `findings`.
pub enum TraceLevelKind {}

impl Kind for TraceLevelKind {
    type Value = TraceLevel;
    const EXPECTED: &'static str = "`calls` or `findings`";
    fn parse(text: &str) -> (Option<TraceLevel>, Vec<Rejected>) {
        whole(match text {
            "calls" => Some(TraceLevel::Calls),
            "findings" => Some(TraceLevel::Findings),
            _ => None,
        })
    }
    fn text(value: &TraceLevel) -> Option<String> {
        Some(value.as_str().into())
    }
}

/// A size in bytes, with an optional `K`, `M` or `G` (KiB, MiB, GiB); 0 means no limit.
pub enum Bytes {}

impl Kind for Bytes {
    type Value = u64;
    const EXPECTED: &'static str = "a size in bytes (suffix K, M or G), 0 for no limit";
    fn parse(text: &str) -> (Option<u64>, Vec<Rejected>) {
        let (digits, shift) = match text.as_bytes().last() {
            Some(b'K' | b'k') => (&text[..text.len() - 1], 10),
            Some(b'M' | b'm') => (&text[..text.len() - 1], 20),
            Some(b'G' | b'g') => (&text[..text.len() - 1], 30),
            _ => (text, 0),
        };
        whole(
            digits
                .parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(1u64 << shift)),
        )
    }
    fn text(value: &u64) -> Option<String> {
        Some(value.to_string())
    }
}

/// Rule IDs separated by commas, checked against the catalogue ([`rules::by_id`]). An unknown ID
/// is rejected alone; lists add up.
pub enum RuleIds {}

impl Kind for RuleIds {
    type Value = Vec<&'static str>;
    const EXPECTED: &'static str = "at least one rule ID (IDs separated by commas)";
    const ADDS_UP: bool = true;
    fn parse(text: &str) -> (Option<Vec<&'static str>>, Vec<Rejected>) {
        let mut ids = Vec::new();
        let mut rejected = Vec::new();
        for id in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match rules::by_id(id) {
                Some(rule) => ids.push(rule.id),
                None => rejected.push(Rejected {
                    item: id.to_string(),
                    why: "is not a rule ID (list them with `sharecheck rules`)",
                }),
            }
        }
        (Some(ids), rejected)
    }
    fn text(value: &Vec<&'static str>) -> Option<String> {
        (!value.is_empty()).then(|| value.join(","))
    }
    fn merge(into: &mut Vec<&'static str>, later: Vec<&'static str>) {
        into.extend(later);
    }
}

impl Options {
    pub fn is_muted(&self, id: &str) -> bool {
        self.mute.contains(&id)
    }

    /// Parses `text`; returns the options and one message per problem (for stderr).
    pub fn parse(text: &str) -> (Options, Vec<String>) {
        let mut options = Options::default();
        let mut problems = Vec::new();
        for pair in text.split(':').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                problems.push(format!(
                    "`{pair}` is not key=value; expected e.g. mode=strict (keys: {})",
                    KEYS.join(", ")
                ));
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if !options.apply(key, value, &mut problems) {
                problems.push(format!(
                    "unknown key `{key}` (known keys: {}); ignoring it",
                    KEYS.join(", ")
                ));
            }
        }
        if options.trace_limit != 0 && options.trace_limit < MIN_TRACE_LIMIT {
            problems.push(format!(
                "trace_limit={} is below {MIN_TRACE_LIMIT} bytes, the least a trace file keeps \
                 (its process record and the line that says it reached the limit); \
                 {MIN_TRACE_LIMIT} is used",
                options.trace_limit
            ));
            options.trace_limit = MIN_TRACE_LIMIT;
        }
        (options, problems)
    }
}

/// The smallest `trace_limit` taken: a trace file keeps its process record and the line that
/// says it reached the limit.
pub const MIN_TRACE_LIMIT: u64 = 4096;

/// The README's options table (Markdown), generated from the table; the CLI's tests keep
/// README.md equal to it.
pub fn readme_table() -> String {
    let mut out =
        String::from("| key | default | `sharecheck run` flag | meaning |\n|---|---|---|---|\n");
    for o in TABLE {
        let keys = o
            .spellings()
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(" / ");
        let default = (o.default_text)().map_or("none".to_string(), |d| format!("`{d}`"));
        out.push_str(&format!(
            "| {keys} | {default} | `{}` | {} |\n",
            o.flag, o.help
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_gives_defaults() {
        assert_eq!(Options::parse(""), (Options::default(), vec![]));
        assert_eq!(Options::parse(" : :"), (Options::default(), vec![]));
    }

    #[test]
    fn every_key_parses() {
        let (o, problems) = Options::parse(
            "mode=strict:halt_on_error=1:error_exitcode=7:mute=cuCtxEnablePeerAccess.flags-not-zero,\
             peer-access.unidirectional:duplicate_limit=3",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(o.mode, Mode::Strict);
        assert!(o.halt_on_error);
        assert_eq!(o.error_exitcode, Some(7));
        assert_eq!(
            o.mute,
            vec![
                "cuCtxEnablePeerAccess.flags-not-zero",
                "peer-access.unidirectional"
            ]
        );
        assert!(o.is_muted("peer-access.unidirectional"));
        assert_eq!(o.duplicate_limit, 3);
        assert_eq!(Options::parse(&o.to_text()), (o, vec![]));
    }

    #[test]
    fn defaults_round_trip_and_are_written_in_table_order() {
        let text = Options::default().to_text();
        assert_eq!(
            text,
            "mode=report:halt_on_error=0:error_exitcode=0:durations=0:duplicate_limit=10:stack_depth=16:\
             blocked_bind_ms=5000:trace_level=calls:trace_limit=0"
        );
        assert_eq!(Options::parse(&text), (Options::default(), vec![]));
    }

    #[test]
    fn trace_level_and_sizes_with_units_parse_and_bad_ones_keep_the_default() {
        let (o, problems) = Options::parse("trace_limit=1");
        assert_eq!(o.trace_limit, MIN_TRACE_LIMIT, "the least a file keeps");
        assert!(
            problems[0].contains("trace_limit=1 is below 4096 bytes"),
            "{problems:?}"
        );
        let (o, problems) = Options::parse("trace_level=findings:trace_limit=64K");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(o.trace_level, TraceLevel::Findings);
        assert_eq!(o.trace_limit, 64 << 10);
        for (text, bytes) in [("0", 0), ("5000", 5000), ("3m", 3 << 20), ("2G", 2 << 30)] {
            assert_eq!(
                Options::parse(&format!("trace_limit={text}")).0.trace_limit,
                bytes
            );
        }
        let (o, problems) =
            Options::parse("trace_level=everything:trace_limit=12T:trace_limit=99999999999G");
        assert_eq!(o.trace_level, TraceLevel::Calls);
        assert_eq!(o.trace_limit, 0);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("expected `calls` or `findings`"));
        assert!(problems[1].contains("a size in bytes (suffix K, M or G)"));
        assert_eq!(Options::parse(&o.to_text()).0, o);
    }

    #[test]
    fn later_pairs_win_and_mute_lists_add_up() {
        let (o, problems) = Options::parse(
            "mode=strict:mute=peer-access.unidirectional:mode=report:duplicate_limit=1:\
             mute=divergence.unlisted:halt_on_error=yes:halt_on_error=no:error_exitcode=3:\
             error_exitcode=0",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(o.mode, Mode::Report);
        assert_eq!(
            o.mute,
            ["peer-access.unidirectional", "divergence.unlisted"]
        );
        assert_eq!(o.duplicate_limit, 1);
        assert!(!o.halt_on_error);
        assert_eq!(o.error_exitcode, None);
    }

    #[test]
    fn bad_values_name_the_key_and_keep_defaults_while_good_pairs_apply() {
        let (o, problems) = Options::parse(
            "mode=loud:halt_on_error=maybe:error_exitcode=300:duplicate_limit=-1:colour=red:\
             mute=no.such-rule:justtext:mode=strict",
        );
        assert_eq!(o.mode, Mode::Strict, "the later good pair still applies");
        assert!(!o.halt_on_error);
        assert_eq!(o.error_exitcode, None);
        assert_eq!(o.duplicate_limit, DEFAULT_DUPLICATE_LIMIT);
        assert!(o.mute.is_empty());
        assert_eq!(problems.len(), 7, "{problems:?}");
        for (problem, needle) in problems.iter().zip([
            "mode=\"loud\": expected `report` or `strict`; keeping the default",
            "halt_on_error=\"maybe\"",
            "error_exitcode=\"300\"",
            "duplicate_limit=\"-1\"",
            "unknown key `colour`",
            "mute: `no.such-rule` is not a rule ID",
            "`justtext` is not key=value",
        ]) {
            assert!(problem.contains(needle), "{problem:?} lacks {needle:?}");
        }
    }

    #[test]
    fn an_unknown_mute_id_is_dropped_alone() {
        let (o, problems) = Options::parse("mute=nope,peer-access.unidirectional");
        assert_eq!(o.mute, ["peer-access.unidirectional"]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].ends_with("; ignoring it"), "{problems:?}");
    }

    #[test]
    fn flags_replace_or_add_up_and_write_pairs_in_table_order() {
        let mut f = Flags::default();
        f.set("duplicate_limit", "0").unwrap();
        f.set("mute", "peer-access.unidirectional,").unwrap();
        f.set("mode", "strict").unwrap();
        f.set("mute", "divergence.unlisted").unwrap();
        f.set("mode", "report").unwrap();
        f.set("error_exitcode", "0").unwrap();
        f.set("halt_on_error", "1").unwrap();
        assert_eq!(
            f,
            Flags {
                mode: Some(Mode::Report),
                halt_on_error: Some(true),
                error_exitcode: Some(None),
                durations: None,
                mute: Some(vec!["peer-access.unidirectional", "divergence.unlisted"]),
                duplicate_limit: Some(0),
                stack_depth: None,
                blocked_bind_ms: None,
                trace_level: None,
                trace_limit: None,
            }
        );
        let pairs = f.pairs();
        assert_eq!(
            pairs,
            [
                "mode=report",
                "halt_on_error=1",
                "error_exitcode=0",
                "mute=peer-access.unidirectional,divergence.unlisted",
                "duplicate_limit=0",
            ]
        );
        // What the flags write, the options parser reads.
        let (o, problems) = Options::parse(&pairs.join(":"));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(o.mute.len(), 2);
        assert!(Flags::default().pairs().is_empty());
    }

    #[test]
    fn flags_refuse_what_the_options_would_ignore() {
        let mut f = Flags::default();
        for (key, value, want) in [
            ("mode", "loud", "`report` or `strict`"),
            ("error_exitcode", "256", "an exit status"),
            ("error_exitcode", "-1", "an exit status"),
            ("duplicate_limit", "1.5", "a count"),
            ("mute", " , ", "at least one rule ID"),
            ("halt_on_error", "maybe", "0 or 1"),
        ] {
            match f.set(key, value) {
                Err(FlagError::Invalid { expected }) => assert!(expected.contains(want)),
                other => panic!("{key}={value}: {other:?}"),
            }
        }
        assert_eq!(
            f.set("mute", "peer-access.unidirectional,nope"),
            Err(FlagError::Rejected(Rejected {
                item: "nope".into(),
                why: "is not a rule ID (list them with `sharecheck rules`)"
            }))
        );
        assert_eq!(f.set("colour", "red"), Err(FlagError::UnknownKey));
        assert_eq!(f, Flags::default(), "a refused value sets nothing");
    }

    #[test]
    fn the_table_is_consistent() {
        assert_eq!(KEYS.len(), TABLE.len());
        for (key, o) in KEYS.iter().zip(TABLE) {
            assert_eq!(*key, o.key);
            // The flag is the key with dashes, and it takes a value unless the kind is a switch.
            assert_eq!(o.flag_name(), format!("--{}", key.replace('_', "-")));
            assert_eq!(o.flag_value().is_none(), o.switch.is_some(), "{key}");
            assert_eq!(by_flag(o.flag_name()).map(|f| f.key), Some(*key));
            // The default is written as the parser reads it, and the switch value parses.
            let default = Options::default().to_text();
            match (o.default_text)() {
                Some(d) => assert!(default.contains(&format!("{key}={d}")), "{default}"),
                None => assert!(!default.contains(&format!("{key}="))),
            }
            if let Some(on) = o.switch {
                let mut f = Flags::default();
                f.set(key, on).unwrap();
            }
            assert!(!o.help.is_empty() && !o.expected.is_empty());
        }
        assert!(by_flag("--options").is_none());
    }

    #[test]
    fn readme_table_has_a_row_per_key() {
        let table = readme_table();
        assert_eq!(table.lines().count(), 2 + TABLE.len());
        assert!(table.contains(
            "| `mode=report` / `mode=strict` | `report` | `--mode MODE` | `report`: forward"
        ));
        assert!(table.contains("| `mute=ID,ID` | none | `--mute ID[,ID...]` |"));
        assert!(table.contains("| `duplicate_limit=N` | `10` |"));
    }
}
