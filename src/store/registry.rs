//! Which tasks the daemon supervises: `<state dir>/tasks.json`, written atomically,
//! so a restarted daemon picks up every task it had.

use std::path::PathBuf;

use crate::core::error::Result;
use crate::store::fsutil;

use crate::core::wire::Supervised;

fn path() -> PathBuf {
    crate::store::paths::state_dir().join("tasks.json")
}

/// The registered tasks (a missing or unreadable file is an empty list, logged).
pub fn load() -> Vec<Supervised> {
    match std::fs::read(path()) {
        Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
            tracing::warn!(path = %path().display(), error = %e, "task registry unreadable; starting empty");
            Vec::new()
        }),
        Err(_) => Vec::new(),
    }
}

/// Save the list.
pub fn save(list: &[Supervised]) -> Result<()> {
    let p = path();
    if let Some(d) = p.parent() {
        fsutil::create_dir_all(d)?;
    }
    let mut b = serde_json::to_vec_pretty(list).expect("serialises");
    b.push(b'\n');
    fsutil::atomic_write(&p, &b)
}

/// Whether `task start` put the task under the daemon (it is in the registry a
/// daemon loads when it starts), whether or not a daemon runs now.
pub fn registered(s: &Supervised) -> bool {
    load().contains(s)
}
