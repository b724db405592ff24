//! Progress of a long read, on stderr (issue 27: where traces are large, say so before the time
//! is spent): a bar when stderr is a terminal and the traces hold more than a few seconds' worth
//! of reading ([`MIN_BYTES`]), nothing otherwise (piped, redirected, or small).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;

/// Traces of more bytes than this get a bar: about two seconds of reading at the report's rate
/// on one core (`scripts/bench-report.sh`: 140 MB/s of correct calls).
pub const MIN_BYTES: u64 = 256 << 20;

/// Bytes read are passed to the bar in steps of this many (the bar redraws itself at most 20
/// times a second whatever the steps).
const STEP: u64 = 1 << 20;

/// The bar of one read, or nothing.
pub struct Progress {
    bar: Option<ProgressBar>,
    pending: u64,
    /// The bar is this one's to clear when done (not a reading thread's share of it).
    owner: bool,
}

impl Progress {
    /// No progress shown.
    pub fn hidden() -> Progress {
        Progress {
            bar: None,
            pending: 0,
            owner: true,
        }
    }

    /// A bar for reading `files`, when stderr is a terminal and they hold more than
    /// [`MIN_BYTES`] (or `SHARECHECK_PROGRESS_MIN_BYTES`); [`Progress::hidden`] otherwise.
    pub fn for_files(files: &[PathBuf]) -> Progress {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress::hidden();
        }
        let min = std::env::var(sharecheck_core::schema::env::PROGRESS_MIN_BYTES)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(MIN_BYTES);
        let total: u64 = files
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        if total <= min {
            return Progress::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:20}] {binary_bytes}/{binary_total_bytes}, {eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(format!(
            "sharecheck: reading {} trace{}",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        ));
        bar.tick();
        Progress {
            bar: Some(bar),
            pending: 0,
            owner: true,
        }
    }

    /// A share of this bar for a thread reading some of the files: what it reads advances the
    /// bar; dropping it leaves the bar to this one.
    pub fn share(&self) -> Progress {
        Progress {
            bar: self.bar.clone(),
            pending: 0,
            owner: false,
        }
    }

    /// `bytes` more were read.
    #[inline]
    pub fn advance(&mut self, bytes: u64) {
        if let Some(bar) = &self.bar {
            self.pending += bytes;
            if self.pending >= STEP {
                bar.inc(self.pending);
                self.pending = 0;
            }
        }
    }

    /// The read is over: the bar is cleared (what follows is the report).
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.inc(self.pending);
            if self.owner {
                bar.finish_and_clear();
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// With `SHARECHECK_REPORT_PHASES` set, prints on stderr how long the report's phase `name` took
/// since the last one ended (or the first began): where the time of a large report goes, for
/// `scripts/bench-report-parallel.sh` (issue 27).
pub fn phase_done(name: &str) {
    use std::sync::Mutex;
    use std::time::Instant;
    static LAST: Mutex<Option<Instant>> = Mutex::new(None);
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = || std::env::var_os(sharecheck_core::schema::env::REPORT_PHASES).is_some();
    if !*ON.get_or_init(on) {
        return;
    }
    let now = Instant::now();
    let mut last = LAST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(then) = last.replace(now) {
        eprintln!(
            "sharecheck: phase {name}: {:.3} s",
            (now - then).as_secs_f64()
        );
    }
}
