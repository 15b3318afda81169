//! What the daemon's watcher over `handoffs/` folders lost: inotify queue overflows
//! (fs.inotify.max_queued_events), after each of which every task rescans its handoffs.
//! `task status` shows it so a user can tell a slow check-in from a lost event.

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
