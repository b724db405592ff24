//! Shared vocabulary of sharecheck.
//!
//! The shim, the simulated driver and the CLI all speak through this crate:
//! - [`ffi`]: ABI-exact argument types; each one knows its C spelling and how it is traced;
//! - [`functions`]: the one declaration list of interposed functions ([`interposed_functions!`]);
//! - [`names`]: result-code names;
//! - [`json`]: the allocation-free JSON writer used for trace records;
//! - [`rules`]: the rule catalogue, by family (stable IDs, documented sentences, fixes);
//! - [`table`]: the one table of which checks run on which function;
//! - `crossproc` (feature `report`): report-phase checks over the traces of every process;
//! - [`options`]: `SHARECHECK_OPTIONS`, shared by the shim and `sharecheck run`;
//! - [`place`]: where a call acted (context, device, UUIDs), as records say it;
//! - [`pattern`]: trace file patterns (`%p`, `%h`, `%q{VAR}`, `%%`), one tokenizer;
//! - [`codes`]: the result codes sharecheck names;
//! - [`schema`]: constants of the trace file format, environment variables, library names.

pub mod catalogue;
pub mod codes;
#[cfg(feature = "report")]
pub mod crossproc;
pub mod ffi;
pub mod functions;
pub mod imex;
pub mod json;
pub mod meanings;
pub mod names;
pub mod options;
pub mod pattern;
pub mod place;
pub mod ring;
pub mod rules;
pub mod schema;
pub mod table;

pub use functions::{Api, FnId, FnInfo, FUNCTIONS};
