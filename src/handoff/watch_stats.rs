//! What the daemon's watcher over `handoffs/` folders lost: inotify queue overflows
//! (fs.inotify.max_queued_events) after which every task rescans its handoffs. Kept in
//! one daemon-wide file beside the daemon's socket, so `task status` can show it without
//! asking the daemon; a new daemon starts it again from zero.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The daemon's watcher counts, as saved in `watcher.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchStats {
    /// The daemon that counted.
    pub pid: u32,
    /// Event queue overflows (events lost, a rescan of every task ran) since it started.
    pub overflows: u64,
    /// When the last one happened.
    pub last_overflow: Option<DateTime<Utc>>,
}

/// Where the counts live (daemon-wide, beside daemon.sock).
pub fn path() -> PathBuf {
    crate::paths::runtime_dir().join("watcher.json")
}

impl WatchStats {
    /// The counts of the daemon that last saved them; `None` when none did (or unreadable).
    pub fn load() -> Option<WatchStats> {
        serde_json::from_slice(&std::fs::read(path()).ok()?).ok()
    }

    /// Save atomically (temp file, fsync, rename).
    pub fn save(&self) -> crate::error::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).expect("serialisable");
        crate::fsutil::atomic_write(&path(), &bytes)
    }
}
