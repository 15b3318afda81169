//! Check-ins while the task's state cannot be saved (disk full, read-only, I/O error):
//! none is delivered (its intent could not be saved first), attempts back off, a human is
//! called once per episode with the cause, and check-ins resume by themselves once a
//! check-in gets through again. Kept in memory by whoever runs the task's check-ins (the
//! disk is what failed): an [`Episode`] the daemon's actor owns, or a fresh one per
//! cron-mode run; and marked in the runtime folder (a tmpfs as a rule, another disk anyway) so that cron-mode
//! check-ins — a process each — call the human once per episode too, not once per run.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::core::error::Error;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// First wait after a failed save; doubled after each failure up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(2);
/// The longest wait between attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// One episode of failed saves.
#[derive(Debug, Clone)]
struct Trouble {
    reason: String,
    failures: u32,
    retry_at: Instant,
}

/// The task's episode of failed saves, if one is under way.
#[derive(Debug, Default)]
pub struct Episode(Mutex<Inner>);

#[derive(Debug, Default)]
struct Inner {
    trouble: Option<Trouble>,
    /// When a successful check-in last found no marker of another process's episode: a
    /// daemon checks in up to 20 times a second, and the marker is looked for again only
    /// after [`MARKER_RECHECK`] (one is written by a process that runs check-ins of its own).
    no_marker_at: Option<Instant>,
}

/// How long a marker found absent is not looked for again by the same owner.
const MARKER_RECHECK: Duration = Duration::from_secs(60);

impl Episode {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The wait after `failures` failed attempts in a row (pure).
pub fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(MAX_BACKOFF)
}

/// Whether an error means the task's files cannot be written (or read back).
pub fn is_storage(e: &Error) -> bool {
    matches!(e, Error::Io { .. })
}

/// The escalation's text for a cause (pure).
pub fn reason(task: &Task, cause: &str) -> String {
    format!(
        "check-ins for task {} are stopped: its state cannot be saved ({cause}); free space or fix the permissions of {}; they resume by themselves once writing works",
        task.name,
        task.dir().display()
    )
}

/// `Some(why)` while the task is backing off: the check-in must not even try.
pub fn waiting(episode: &Episode) -> Option<String> {
    let ep = episode.lock();
    let t = ep.trouble.as_ref()?;
    (Instant::now() < t.retry_at).then(|| t.reason.clone())
}

/// A check-in failed with `e`: back off, and call a human at the first failure of an episode.
pub fn failed(task: &Task, episode: &Episode, e: &Error, now: DateTime<Utc>) {
    if !is_storage(e) {
        return;
    }
    let first = {
        let mut ep = episode.lock();
        ep.no_marker_at = None;
        let t = ep.trouble.get_or_insert_with(|| Trouble {
            reason: reason(task, &e.to_string()),
            failures: 0,
            retry_at: Instant::now(),
        });
        t.failures += 1;
        t.retry_at = Instant::now() + backoff(t.failures);
        tracing::error!(task = %task.name, error = %e, failures = t.failures, retry_in = ?backoff(t.failures), "check-ins stopped: the task's state cannot be saved");
        (t.failures == 1).then(|| t.reason.clone())
    };
    if let Some(r) = first
        && !told_before(task, &r)
    {
        crate::app::escalation::raise_even_unsaved(task, &r, now);
    }
}

/// Where an episode is marked for later processes: one file per task folder.
fn marker(task: &Task) -> std::path::PathBuf {
    let key = crate::core::handoff::sha256_hex(task.dir().as_os_str().as_encoded_bytes());
    crate::store::paths::runtime_dir()
        .join("storage-trouble")
        .join(&key[..16])
}

/// Whether an earlier process already called a human about this episode; marks it if not.
/// A marker that cannot be written either means the human is called again next run,
/// which beats never.
fn told_before(task: &Task, reason: &str) -> bool {
    let m = marker(task);
    // Any marker: the cause's words vary from run to run (a temp file's name).
    if m.exists() {
        tracing::info!(task = %task.name, "a human was already called about this (an earlier run)");
        return true;
    }
    let dir = m.parent().unwrap_or(std::path::Path::new("/"));
    let written = crate::store::fsutil::create_dir_all(dir)
        .and_then(|()| crate::store::fsutil::atomic_write(&m, reason.as_bytes()));
    if let Err(e) = written {
        tracing::warn!(task = %task.name, error = %e, "cannot mark the call to a human; the next run calls again");
    }
    false
}

/// A check-in got through: end the episode, close its escalation.
pub fn succeeded(task: &Task, episode: &Episode, now: DateTime<Utc>) {
    let (mine, looked_lately) = {
        let mut ep = episode.lock();
        let lately = ep.no_marker_at.is_some_and(|t| t.elapsed() < MARKER_RECHECK);
        (ep.trouble.take(), lately)
    };
    if mine.is_none() && looked_lately {
        return;
    }
    // An episode an earlier run (cron mode) began and called a human about.
    let m = marker(task);
    let marked = match std::fs::read(&m) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => Some(String::new()),
    };
    if marked.is_some() {
        let _ = std::fs::remove_file(&m);
    }
    episode.lock().no_marker_at = Some(Instant::now());
    let (reason, failures) = match (mine, marked) {
        (Some(t), _) => (t.reason, t.failures),
        (None, Some(r)) => (r, 0),
        (None, None) => return,
    };
    tracing::info!(task = %task.name, failures, "the task's state can be saved again; check-ins resume");
    let closed = task.update_state(now, |st| {
        st.escalations.retain(|e| e.reason != reason);
        Ok(())
    });
    if let Err(e) = closed {
        tracing::warn!(task = %task.name, error = %e, "cannot close the escalation about saving the state");
    }
    if let Err(e) = crate::store::events::append(
        task,
        EventKind::StorageRecovered,
        None,
        serde_json::json!({"failures": failures}),
        now,
    ) {
        tracing::warn!(task = %task.name, error = %e, "cannot append to events.jsonl");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_back_off_up_to_a_ceiling() {
        assert_eq!(backoff(1), FIRST_BACKOFF);
        assert_eq!(backoff(2), FIRST_BACKOFF * 2);
        assert_eq!(backoff(3), FIRST_BACKOFF * 4);
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[test]
    fn only_io_errors_stop_check_ins() {
        let full = Error::io("write", "/x", std::io::Error::from_raw_os_error(28));
        assert!(is_storage(&full));
        assert!(!is_storage(&Error::Environment("no tmux".into())));
    }
}
