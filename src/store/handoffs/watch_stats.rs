//! The daemon watcher's counts on disk: one daemon-wide file beside the daemon's
//! socket, so `task status` can show them without asking the daemon; a new daemon
//! starts them again from zero.

use std::path::PathBuf;

use crate::core::model::WatchStats;

/// Where the counts live (daemon-wide, beside daemon.sock).
pub fn path() -> PathBuf {
    crate::store::paths::runtime_dir().join("watcher.json")
}

/// The counts of the daemon that last saved them; `None` when none did (or unreadable).
pub fn load() -> Option<WatchStats> {
    serde_json::from_slice(&std::fs::read(path()).ok()?).ok()
}

/// Save atomically (temp file, fsync, rename).
pub fn save(stats: &WatchStats) -> crate::core::error::Result<()> {
    let bytes = serde_json::to_vec_pretty(stats).expect("serialisable");
    crate::store::fsutil::atomic_write(&path(), &bytes)
}
