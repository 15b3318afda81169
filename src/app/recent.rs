//! What this process did lately, per task: a remote pull, a look at the agents' screens.
//! The daemon does both on its own ticks and again inside a check-in; when the tick did
//! it a moment ago, the check-in's copy only adds latency (an ssh round trip per remote
//! pane) and CPU. Kept in memory only: a new process (cron mode, a restarted daemon)
//! has done nothing lately and does it all.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::store::task::Task;

/// One kind of deed, by task folder: when it last started and succeeded.
pub struct Recent(OnceLock<Mutex<HashMap<PathBuf, Instant>>>);

impl Recent {
    /// Nothing done yet (usable in a `static`).
    pub const fn new() -> Self {
        Recent(OnceLock::new())
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Instant>> {
        self.0
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `task`'s deed, started at `started`, succeeded: what it saw is as fresh as that.
    pub fn done(&self, task: &Task, started: Instant) {
        self.map().insert(task.dir(), started);
    }

    /// `task`'s deed failed: the next one must not be skipped.
    pub fn failed(&self, task: &Task) {
        self.map().remove(&task.dir());
    }

    /// Whether `task`'s deed succeeded, started less than `within` ago.
    pub fn within(&self, task: &Task, within: Duration) -> bool {
        self.map().get(&task.dir()).is_some_and(|t| t.elapsed() < within)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_until_it_ages_or_fails() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t".parse().unwrap()).unwrap();
        let other = Task::new(d.path(), "u".parse().unwrap()).unwrap();
        let r = Recent::new();
        assert!(!r.within(&task, Duration::from_secs(60)), "nothing done yet");
        r.done(&task, Instant::now());
        assert!(r.within(&task, Duration::from_secs(60)));
        assert!(!r.within(&other, Duration::from_secs(60)), "per task");
        r.done(&task, Instant::now() - Duration::from_secs(10));
        assert!(!r.within(&task, Duration::from_secs(5)), "aged");
        r.done(&task, Instant::now());
        r.failed(&task);
        assert!(!r.within(&task, Duration::from_secs(60)), "a failure is never fresh");
    }
}
