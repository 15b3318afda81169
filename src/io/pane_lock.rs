//! One delivery at a time per pane, across processes.
//!
//! The daemon, `task send` without a daemon, cron's `task checkin` and the supervisor's own
//! nudges may all type into the same pane at once. Two pastes that land before either
//! Enter become one submission with both texts glued together, and both senders report
//! success. So every delivery holds an advisory lock (flock) on a file named after the
//! tmux server and the pane, in the runtime folder (never in the project, which may be
//! read-only), from the first look at the screen until the submission is confirmed.
//!
//! The holder writes who it is into the lock file, so a sender that gives up after its
//! bounded wait can say which process holds the pane and since when.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::core::error::Result;
use crate::store::task::lock::Lock;

/// A held pane lock; the pane is free again when this is dropped (or the process dies).
#[derive(Debug)]
pub struct PaneLock {
    _lock: Lock,
}

/// FNV-1a, 64 bits: a short, stable file name for a server identity (a socket path, maybe
/// an ssh destination) that may hold characters a file name should not. Pure.
fn fnv64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The lock file's name for `pane` on the server `server_id`. Pure.
pub fn file_name(server_id: &str, pane: &str) -> String {
    let pane: String = pane
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{:016x}-{pane}.lock", fnv64(server_id))
}

/// Where the lock of `pane` on `server_id` lives.
pub fn path(server_id: &str, pane: &str) -> PathBuf {
    crate::store::paths::runtime_dir()
        .join("panes")
        .join(file_name(server_id, pane))
}

/// What a timed-out sender says about the holder, from the lock file's contents. Pure.
pub fn busy_message(pane: &str, waited: Duration, holder: &str) -> String {
    let holder = holder.trim();
    let who = if holder.is_empty() {
        "another delivery (holder unknown)".to_string()
    } else {
        holder.to_string()
    };
    format!(
        "pane {pane} stayed locked by {who} for {waited:.0?}; the message was not sent. \
         Another delivery to this agent is still running (or hung): retry later, or look at the agent with `task attach`"
    )
}

/// Take the lock of `pane`, waiting at most `timeout`. `what` says who we are (written
/// into the lock file for a waiter's error). `Ok(Err(message))` when the wait ran out.
pub async fn acquire(
    server_id: &str,
    pane: &str,
    what: &str,
    timeout: Duration,
) -> Result<std::result::Result<PaneLock, String>> {
    let p = path(server_id, pane);
    if let Some(dir) = p.parent() {
        private_dir(dir)?;
    }
    // A test shortens the wait to see it run out.
    let timeout = crate::io::hooks::get().pane_lock_timeout.unwrap_or(timeout);
    let start = Instant::now();
    let mut announced = false;
    loop {
        if let Some(lock) = Lock::try_acquire(&p)? {
            note_holder(&lock, &p, what);
            return Ok(Ok(PaneLock { _lock: lock }));
        }
        if !announced {
            announced = true;
            tracing::info!(pane, lock = %p.display(), "another delivery to this pane is running; waiting for it");
            test_hook_waiting();
        }
        if start.elapsed() >= timeout {
            let holder = std::fs::read_to_string(&p).unwrap_or_default();
            let holder = holder.lines().next().unwrap_or_default();
            return Ok(Err(busy_message(pane, start.elapsed(), holder)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Make `dir` (if missing) private, like the daemon's socket and the ssh masters: no one
/// else may hold our panes. One `stat` when it already is (every delivery comes here).
fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let private = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o077 == 0);
    if !private {
        crate::store::fsutil::create_dir_all(dir)?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Record who holds the lock; only a hint for waiters, so a failure is logged, not raised.
/// Written over the last holder's note through the lock's own descriptor: a delivery's
/// hottest path should not open the file twice and truncate it (the waiter reads line one).
fn note_holder(lock: &Lock, p: &Path, what: &str) {
    let text = format!(
        "process {} ({what}) since {}\n",
        std::process::id(),
        crate::core::clock::now().format("%H:%M:%S UTC")
    );
    if let Err(e) = lock.note(&text) {
        tracing::debug!(lock = %p.display(), error = %e, "could not note the pane lock's holder");
    }
}

/// Test hook (`pane_lock_waiting`): a sender that finds the pane locked leaves a file, so a
/// test knows senders are queued without guessing with sleeps.
fn test_hook_waiting() {
    if let Some(dir) = &crate::io::hooks::get().pane_lock_waiting {
        let f = dir.join(format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
        let _ = std::fs::write(f, b"");
    }
}

/// Who this process is, for the lock file: the program and its first two arguments (a
/// verb and a task name, never the message text, which comes later on the command line).
pub fn this_process() -> String {
    let mut args = std::env::args();
    let prog = args
        .next()
        .map(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(a)
        })
        .unwrap_or_else(|| "task".into());
    std::iter::once(prog).chain(args.take(2)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_folder_is_made_and_kept_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("panes");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700, "made private");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700, "opened up by someone, made private again");
    }

    #[test]
    fn names_differ_by_server_and_pane_and_are_plain() {
        let a = file_name("/tmp/s1", "%3");
        assert_eq!(a, file_name("/tmp/s1", "%3"));
        assert_ne!(a, file_name("/tmp/s2", "%3"));
        assert_ne!(a, file_name("/tmp/s1", "%31"));
        assert!(a.ends_with("-_3.lock") && !a.contains('/'), "{a}");
    }

    #[test]
    fn busy_message_names_the_holder_and_what_to_do() {
        let m = busy_message(
            "%1",
            Duration::from_secs(3),
            "process 42 (task send) since 12:00:00 UTC\n",
        );
        assert!(m.contains("%1") && m.contains("process 42 (task send)"), "{m}");
        assert!(m.contains("not sent") && m.contains("retry"), "{m}");
        assert!(busy_message("%1", Duration::ZERO, "").contains("holder unknown"));
    }
}
