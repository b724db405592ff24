//! The `sharecheck` command: runs programs under the sharecheck shim and reviews their traces.
//!
//! - [`args`]: command-line parsing and help texts;
//! - [`run`]: `sharecheck run`, the launcher;
//! - [`report`]: `sharecheck report`, merging traces into findings;
//! - [`trace`]: tolerant reading of trace files;
//! - [`rules`]: `sharecheck rules`, the rule catalogue.

mod args;
mod findings;
mod record;
mod report;
mod review;
mod rules;
mod run;
mod runs;
mod sarif;
mod symbolize;
mod timeline;
mod trace;

use std::io::Write;

use args::Command;

fn main() {
    let status = match args::parse(std::env::args_os().skip(1)) {
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
        Ok(Command::Help(text)) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            0
        }
        Ok(Command::Version) => {
            println!(
                "sharecheck {} (trace schema v{})",
                env!("CARGO_PKG_VERSION"),
                sharecheck_core::schema::VERSION
            );
            0
        }
        Err(e) => {
            eprintln!("sharecheck: {e}\nusage: {}", e.usage);
            eprintln!("Run `sharecheck --help` for more.");
            args::EXIT_USAGE
        }
    };
    std::process::exit(status);
}
