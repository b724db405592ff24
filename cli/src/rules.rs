//! `sharecheck rules`: reserved for printing the rule catalogue of sharecheck-core.
//!
//! Not implemented yet. When the catalogue exists in `sharecheck_core`, this module will:
//! - parse its own options (add a `RulesArgs` to `args.rs` and a `RULES_USAGE` text, and list
//!   the command in `TOP_USAGE`);
//! - print each rule's ID, severity, kind, the contract sentence and its doc link, as text or as
//!   JSON (`--format`), in the finding field names of the trace schema.
//!
//! Until then the command says so and exits with the usage status, so that scripts calling it do
//! not mistake silence for an empty catalogue.

use crate::args::EXIT_USAGE;

/// Runs `sharecheck rules`; returns the exit status.
pub fn run() -> i32 {
    eprintln!(
        "sharecheck: the `rules` command is not available in this version; each finding's \
         \"doc\" member links to the contract it checks"
    );
    EXIT_USAGE
}
