//! The human-readable log on stderr, through `tracing`.
//!
//! Level from `SHARECHECK_LOG` (`RUST_LOG` syntax). Quiet by default: warnings about the shim
//! itself and every finding. Set up on first use, never in a constructor.

use parking_lot::Mutex;
use sharecheck_core::schema::env;
use std::collections::HashSet;
use std::fmt;
use std::sync::Once;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// Target of finding events: they are printed as the finding's own block.
pub const FINDING_TARGET: &str = "sharecheck::finding";
const DEFAULT_FILTER: &str = "warn,sharecheck::finding=trace";

static INIT: Once = Once::new();

pub fn init() {
    INIT.call_once(|| {
        let (filter, bad) = match std::env::var(env::LOG) {
            Ok(spec) => match EnvFilter::try_new(&spec) {
                Ok(f) => (f, None),
                Err(e) => (
                    EnvFilter::new(DEFAULT_FILTER),
                    Some(format!("{spec:?}: {e}")),
                ),
            },
            Err(_) => (EnvFilter::new(DEFAULT_FILTER), None),
        };
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .event_format(ShimFormat)
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        if let Some(bad) = bad {
            tracing::warn!("{} ignored, using {:?}: {}", env::LOG, DEFAULT_FILTER, bad);
        }
    });
}

struct ShimFormat;

impl<S, N> FormatEvent<S, N> for ShimFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if event.metadata().target() != FINDING_TARGET {
            let level = event.metadata().level().as_str().to_ascii_lowercase();
            write!(writer, "sharecheck: {level}: ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

static WARNED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// A warning printed once per `key` per process.
pub fn warn_once(key: &str, message: fmt::Arguments) {
    {
        let mut warned = WARNED.lock();
        if !warned
            .get_or_insert_with(HashSet::new)
            .insert(key.to_owned())
        {
            return;
        }
    }
    init();
    tracing::warn!("{}", message);
}

pub fn debug(message: fmt::Arguments) {
    init();
    tracing::debug!("{}", message);
}

pub fn error(message: fmt::Arguments) {
    init();
    tracing::error!("{}", message);
}

/// Prints a finding block (already formatted) at the level of its severity.
pub fn finding(level: tracing::Level, block: &str) {
    init();
    match level {
        tracing::Level::ERROR => tracing::error!(target: "sharecheck::finding", "{}", block),
        tracing::Level::WARN => tracing::warn!(target: "sharecheck::finding", "{}", block),
        _ => tracing::info!(target: "sharecheck::finding", "{}", block),
    }
}
