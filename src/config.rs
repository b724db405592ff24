//! The process's options (`SHARECHECK_OPTIONS`, [`sharecheck_core::options`]), read once on first
//! use; each problem with them is one warning. Every layer reads them here: the engine (mode,
//! mutes, limits on reports), the trace (its level and size limit).

use sharecheck_core::options::Options;
use sharecheck_core::schema::env;
use std::sync::LazyLock;

static OPTIONS: LazyLock<Options> = LazyLock::new(|| {
    let raw = std::env::var_os(env::OPTIONS).unwrap_or_default();
    let text = raw.to_string_lossy();
    let (options, mut problems) = Options::parse(&text);
    if raw.to_str().is_none() {
        problems.insert(0, format!("not UTF-8; read as {text:?}"));
    }
    // `sharecheck run` printed them once already, for every process of the run.
    let reported = std::env::var_os(env::OPTIONS_REPORTED).is_some_and(|r| r == raw);
    if !reported {
        for problem in problems {
            crate::log::warn_once(
                &format!("options:{problem}"),
                format_args!("{}: {problem}", env::OPTIONS),
            );
        }
    }
    options
});

pub fn options() -> &'static Options {
    &OPTIONS
}
