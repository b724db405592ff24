//! The `sharecheck` command: runs programs under the sharecheck shim and reviews their traces.
//!
//! - [`args`]: command-line parsing and help (clap);
//! - [`run`]: `sharecheck run`, the launcher;
//! - [`report`]: `sharecheck report`, merging traces into findings;
//! - [`trace`]: tolerant reading of trace files;
//! - [`rules`]: `sharecheck rules`, the rule catalogue.

mod args;
mod findings;
mod occurrence;
mod partial;
mod progress;
mod record;
mod report;
mod review;
mod rules;
mod run;
mod runs;
mod safe_json;
mod sarif;
mod steps;
mod summary;
mod symbolize;
mod timeline;
mod trace;

use std::io::Write;

use args::Command;

fn main() {
    let status = match args::parse(std::env::args_os()) {
        Ok(Command::Run(a)) => run::run(a),
        Ok(Command::Report(a)) => report::run(a),
        Ok(Command::Rules(a)) => rules::run(a),
        Ok(Command::Cat(traces)) => report::cat(traces),
        Ok(Command::Clean(keep)) => {
            let base = std::path::Path::new(sharecheck_core::schema::DEFAULT_TRACE_DIR);
            match runs::remove_oldest(base, keep) {
                Ok(n) => {
                    eprintln!(
                        "sharecheck: removed {n} run director{}",
                        if n == 1 { "y" } else { "ies" }
                    );
                    0
                }
                Err(e) => {
                    eprintln!("sharecheck: {e}");
                    args::EXIT_USAGE
                }
            }
        }
        Ok(Command::Completions(shell)) => {
            // Made in memory (clap_complete panics on a failed write), then written: a closed
            // pipe ends it quietly.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut args::command(), "sharecheck", &mut script);
            let mut out = std::io::stdout().lock();
            match out.write_all(&script).and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("sharecheck: cannot write the completions: {e}");
                    args::EXIT_USAGE
                }
                _ => 0,
            }
        }
        // Usage errors (exit 2), help and the version (exit 0), as clap prints them.
        Err(e) => e.exit(),
    };
    std::process::exit(status);
}
