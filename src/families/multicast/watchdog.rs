//! The multicast watchdog: a bind blocks in the driver until every device of its team is added
//! ("Any calls to cuMulticastBindMem ... will block until all devices have been added"), forever
//! if one never is. Each bind is armed before the driver's call and disarmed when it returns; a
//! thread of the shim's own (started with the first bind, every signal blocked but SIGSYS, sleeping while
//! nothing is armed) reports a bind still blocked after `blocked_bind_ms` once, with the devices
//! this process added, on stderr and in the trace (an event record `multicast-watchdog`): it
//! explains a hang while it happens. A bind that then returns is recorded as usual.

use crate::engine::{self, At};
use crate::findings::Finding;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A bind in the driver.
struct Pending {
    id: u64,
    armed_ns: u64,
    reported: bool,
    call: &'static str,
    /// What the blocked call breaks: a bind's rule or a map's.
    rule: &'static sharecheck_core::rules::Rule,
    mc: u64,
    /// What this process knows of the team: `(numDevices, devices added here)`; `None` for an
    /// object it did not create.
    team: Option<(u32, Vec<i32>)>,
    at: At,
    stack: Arc<Vec<crate::stack::Frame>>,
}

static PENDING: Mutex<Vec<Pending>> = parking_lot::const_mutex(Vec::new());
static WAKE: Condvar = Condvar::new();
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

const NO_THREAD: u8 = 0;
const RUNNING: u8 = 1;
const FAILED: u8 = 2;
static THREAD: AtomicU8 = AtomicU8::new(NO_THREAD);

/// A bind armed: disarmed when dropped (its check's plan, dropped once the driver returned, or
/// when a check panicked).
pub struct Armed(u64);

impl Drop for Armed {
    fn drop(&mut self) {
        PENDING.lock().retain(|p| p.id != self.0);
    }
}

/// Arms the bind or map `call` of object `mc` made now by this thread, reported under `rule`.
/// `None` when `blocked_bind_ms` is 0 or the watchdog cannot run.
pub fn arm(
    call: &'static str,
    rule: &'static sharecheck_core::rules::Rule,
    mc: u64,
    team: Option<(u32, Vec<i32>)>,
) -> Option<Armed> {
    let options = engine::options();
    if options.blocked_bind_ms == 0 || !started() {
        return None;
    }
    let stack = match options.stack_depth {
        0 => Vec::new(),
        _ => engine::capture_stack(options),
    };
    let id = NEXT_ID.fetch_add(1, Relaxed);
    let pending = Pending {
        id,
        armed_ns: crate::clock::monotonic_ns(),
        reported: false,
        call,
        rule,
        mc,
        team,
        at: At {
            pid: crate::trace::pid(),
            tid: crate::trace::tid(),
            seq: crate::log::IN_THE_DRIVER,
        },
        stack: Arc::new(stack),
    };
    PENDING.lock().push(pending);
    WAKE.notify_one();
    Some(Armed(id))
}

/// Whether the watchdog's thread runs (started on first use; not from a signal handler, whose
/// bind is then not watched: the next bind's call starts it).
fn started() -> bool {
    match THREAD.compare_exchange(NO_THREAD, RUNNING, Relaxed, Relaxed) {
        Ok(_) => match crate::guard::spawn_quiet(watchdog_main) {
            crate::guard::Spawned::Started => true,
            crate::guard::Spawned::NotNow => {
                THREAD.store(NO_THREAD, Relaxed);
                false
            }
            crate::guard::Spawned::Failed => {
                THREAD.store(FAILED, Relaxed);
                false
            }
        },
        Err(state) => state == RUNNING,
    }
}

extern "C" fn watchdog_main(_: *mut libc::c_void) -> *mut libc::c_void {
    crate::guard::shielded((), watch);
    std::ptr::null_mut()
}

/// Reports each bind blocked past the limit once; sleeps until the next could be, or until one is
/// armed.
fn watch() {
    let limit_ns = u64::from(engine::options().blocked_bind_ms) * 1_000_000;
    let mut pending = PENDING.lock();
    loop {
        let now = crate::clock::monotonic_ns();
        let mut due = Vec::new();
        let mut next: Option<u64> = None;
        for p in pending.iter_mut().filter(|p| !p.reported) {
            let deadline = p.armed_ns.saturating_add(limit_ns);
            if deadline <= now {
                p.reported = true;
                due.push(finding(p, now));
            } else {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
            }
        }
        if !due.is_empty() {
            drop(pending);
            for (f, call, at) in due {
                report(&f, call, at);
            }
            pending = PENDING.lock();
            continue;
        }
        match next {
            Some(deadline) => {
                let wait = Duration::from_nanos(deadline.saturating_sub(now).max(1_000_000));
                WAKE.wait_for(&mut pending, wait);
            }
            None => WAKE.wait(&mut pending),
        }
    }
}

/// The finding of a bind blocked since `p.armed_ns`.
fn finding(p: &Pending, now: u64) -> (Finding, &'static str, At) {
    let seconds = now.saturating_sub(p.armed_ns) as f64 / 1e9;
    let team = match &p.team {
        Some((n, devices)) => {
            let list: Vec<String> = devices.iter().map(i32::to_string).collect();
            format!(
                "this process added {} of the team's {n} devices ([{}]); the others must be \
                 added here or by the processes the object is exported to",
                devices.len(),
                list.join(", ")
            )
        }
        None => "this process did not create the object: the processes that hold it must add \
                 every device of its team"
            .to_string(),
    };
    let message = format!(
        "{} of multicast object {} has been blocked in the driver for {seconds:.1} s: the driver \
         blocks it until every device of the team is added (cuMulticastAddDevice); {team}",
        p.call,
        engine::hex(p.mc)
    );
    let f = Finding {
        rule: p.rule,
        message,
        stack: p.stack.clone(),
    };
    (f, p.call, p.at)
}

fn report(f: &Finding, call: &'static str, at: At) {
    let kept = engine::report_away(
        engine::states(),
        f,
        call,
        at,
        crate::engine::state::AT_EXIT_WAIT,
    );
    if kept == Some(true) {
        let f = std::slice::from_ref(f);
        crate::trace::write_event_of(Some(at.tid), "multicast-watchdog", f, |w| {
            w.kv_str("call", call);
        });
    }
}

/// In a forked child: no watchdog thread, and no bind of the parent's other threads in flight.
/// The table's lock may have been held by one of them: it is made anew without reading it.
pub fn after_fork_in_child() {
    THREAD.store(NO_THREAD, Relaxed);
    if let Some(mut pending) = PENDING.try_lock() {
        pending.clear();
        return;
    }
    // SAFETY: only this thread runs in the child; the thread that held the lock is gone, and
    // the vector it may have been changing is leaked, never read.
    unsafe { PENDING.force_unlock() };
    std::mem::forget(std::mem::take(&mut *PENDING.lock()));
}
