//! `sharecheck rules`: prints the rule catalogue of sharecheck-core, as Markdown (RULES.md is
//! this output, kept equal by `tests/rules.rs`) or as one JSON array for scripts.

use std::io::Write;

use sharecheck_core::rules::{catalogue_json, catalogue_text};

use crate::args::{Format, RulesArgs, EXIT_USAGE};
use crate::trace::io_reason;

/// Runs `sharecheck rules`; returns the exit status.
pub fn run(args: RulesArgs) -> i32 {
    let out = match args.format {
        Format::Text => catalogue_text(),
        Format::Json => catalogue_json(),
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush())
    {
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("sharecheck: cannot write the rules: {}", io_reason(&e));
            EXIT_USAGE
        }
        _ => 0,
    }
}
