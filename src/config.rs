//! The process's options (`SHARECHECK_OPTIONS`, [`sharecheck_core::options`]), read once on first
//! use; each problem with them is one warning. Every layer reads them here: the engine (mode,
//! mutes, limits on reports), the trace (its level and size limit).

use once_cell::sync::Lazy;
use sharecheck_core::options::Options;
use sharecheck_core::schema::env;

static OPTIONS: Lazy<Options> = Lazy::new(|| {
    let text = std::env::var(env::OPTIONS).unwrap_or_default();
    let (options, problems) = Options::parse(&text);
    for problem in problems {
        crate::log::warn_once(
            &format!("options:{problem}"),
            format_args!("{}: {problem}", env::OPTIONS),
        );
    }
    options
});

pub fn options() -> &'static Options {
    &OPTIONS
}
