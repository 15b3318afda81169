//! What the daemon's watcher over `handoffs/` folders lost: inotify queue overflows
//! (fs.inotify.max_queued_events), after each of which every task rescans its handoffs.
//! And events the daemon itself was too busy to take. `task status` shows both so a user
//! can tell a slow check-in from a lost event.

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
    /// Events the daemon was too busy to take (its queue of 256 full): each file is still
    /// found by the rescan every task makes every 5 s, later rather than at once.
    #[serde(default)]
    pub dropped: u64,
    /// When the last one was dropped.
    #[serde(default)]
    pub last_drop: Option<DateTime<Utc>>,
}
