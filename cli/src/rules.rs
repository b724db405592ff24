//! `sharecheck rules` (and `explain`): prints the rule catalogue of sharecheck-core, or the rules
//! named, as Markdown (RULES.md is the whole catalogue, kept equal by `tests/rules.rs`) or as one
//! JSON array for scripts.

use std::io::Write;

use sharecheck_core::catalogue::{catalogue_json, catalogue_text, rule_text, rules_json};
use sharecheck_core::rules::{by_id, ids_containing, Rule};

use crate::args::{Format, RulesArgs, EXIT_USAGE};
use crate::trace::io_reason;

/// Runs `sharecheck rules`; returns the exit status.
pub fn run(args: RulesArgs) -> i32 {
    let out = if args.ids.is_empty() {
        match args.format {
            Format::Text => catalogue_text(),
            Format::Json | Format::Sarif | Format::Perfetto => catalogue_json(),
        }
    } else {
        let mut named: Vec<&Rule> = Vec::new();
        for id in &args.ids {
            match by_id(id) {
                Some(rule) => named.push(rule),
                None => {
                    eprintln!("sharecheck: {}", unknown_rule(id));
                    return EXIT_USAGE;
                }
            }
        }
        match args.format {
            Format::Text => named
                .iter()
                .map(|r| rule_text(r))
                .collect::<Vec<_>>()
                .join("\n"),
            Format::Json | Format::Sarif | Format::Perfetto => rules_json(&named),
        }
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

/// The message for an ID no rule has: the IDs that contain it, or how to list them all.
pub fn unknown_rule(id: &str) -> String {
    let close = ids_containing(id);
    match close.len() {
        0 => format!("no rule `{id}` (`sharecheck rules` lists every rule)"),
        1..=8 => format!("no rule `{id}`; rules containing it: {}", close.join(", ")),
        n => format!(
            "no rule `{id}`; {n} rules contain it, among them {}",
            close[..8].join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_id_names_the_ids_that_contain_it() {
        let m = unknown_rule("memory-freed");
        assert!(
            m.contains("rules containing it: cuMemcpyPeer.memory-freed"),
            "{m}"
        );
        let m = unknown_rule("no-such-thing");
        assert!(m.contains("`sharecheck rules` lists every rule"), "{m}");
        let m = unknown_rule("cu");
        assert!(m.contains("rules contain it, among them"), "{m}");
    }
}
