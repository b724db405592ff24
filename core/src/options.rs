//! `SHARECHECK_OPTIONS`: `key=value` pairs separated by `:`, as the sanitizers take them.
//!
//! Read by the shim (mode, halt_on_error, mute, duplicate_limit) and by `sharecheck run`
//! (error_exitcode). A bad pair is reported in one message naming the key and is otherwise
//! ignored: that key keeps its default, the rest still apply. Parsing never fails.

use crate::rules;

/// What the shim does with a call the contract says must fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything unchanged; report findings.
    Report,
    /// Do not forward a call the documentation says must fail; return the documented code.
    Strict,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub mode: Mode,
    /// Abort the process after the first error is reported.
    pub halt_on_error: bool,
    /// `sharecheck run` exits with this status when errors were found and PROG exited 0.
    pub error_exitcode: Option<i32>,
    /// Rule IDs whose findings are dropped.
    pub mute: Vec<&'static str>,
    /// Reports per rule printed on stderr; 0 means no limit.
    pub duplicate_limit: u32,
}

pub const DEFAULT_DUPLICATE_LIMIT: u32 = 10;

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Report,
            halt_on_error: false,
            error_exitcode: None,
            mute: Vec::new(),
            duplicate_limit: DEFAULT_DUPLICATE_LIMIT,
        }
    }
}

/// The keys, for messages and `--help`.
pub const KEYS: &[&str] = &[
    "mode",
    "halt_on_error",
    "error_exitcode",
    "mute",
    "duplicate_limit",
];

fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "true" | "yes" => Some(true),
        "0" | "false" | "no" => Some(false),
        _ => None,
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
            let mut bad = |expected: &str| {
                problems.push(format!(
                    "{key}={value:?}: expected {expected}; keeping the default"
                ))
            };
            match key {
                "mode" => match value {
                    "report" => options.mode = Mode::Report,
                    "strict" => options.mode = Mode::Strict,
                    _ => bad("`report` or `strict`"),
                },
                "halt_on_error" => match parse_bool(value) {
                    Some(b) => options.halt_on_error = b,
                    None => bad("0 or 1"),
                },
                "error_exitcode" => match value.parse::<i32>() {
                    Ok(n) if (0..=255).contains(&n) => {
                        options.error_exitcode = (n != 0).then_some(n)
                    }
                    _ => bad("an exit status from 0 (off) to 255"),
                },
                "duplicate_limit" => match value.parse::<u32>() {
                    Ok(n) => options.duplicate_limit = n,
                    Err(_) => bad("a count (0 = no limit)"),
                },
                "mute" => {
                    for id in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        match rules::by_id(id) {
                            Some(rule) => options.mute.push(rule.id),
                            None => problems.push(format!(
                                "mute: `{id}` is not a rule ID (list them with `sharecheck \
                                 rules`); ignoring it"
                            )),
                        }
                    }
                }
                _ => problems.push(format!(
                    "unknown key `{key}` (known keys: {}); ignoring it",
                    KEYS.join(", ")
                )),
            }
        }
        (options, problems)
    }

    /// The options as `key=value:...` text that [`Options::parse`] reads back.
    pub fn to_text(&self) -> String {
        let mut pairs = vec![format!(
            "mode={}",
            match self.mode {
                Mode::Report => "report",
                Mode::Strict => "strict",
            }
        )];
        pairs.push(format!("halt_on_error={}", u8::from(self.halt_on_error)));
        pairs.push(format!(
            "error_exitcode={}",
            self.error_exitcode.unwrap_or(0)
        ));
        if !self.mute.is_empty() {
            pairs.push(format!("mute={}", self.mute.join(",")));
        }
        pairs.push(format!("duplicate_limit={}", self.duplicate_limit));
        pairs.join(":")
    }
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
            "mode=\"loud\"",
            "halt_on_error=\"maybe\"",
            "error_exitcode=\"300\"",
            "duplicate_limit=\"-1\"",
            "unknown key `colour`",
            "`no.such-rule` is not a rule ID",
            "`justtext` is not key=value",
        ]) {
            assert!(problem.contains(needle), "{problem:?} lacks {needle:?}");
        }
    }
}
