//! What the supervisor did lately for one task: a remote pull, a look at the agents'
//! screens. The daemon's actor does both on its own ticks and again inside a check-in;
//! when the tick did it a moment ago, the check-in's copy only adds latency (an ssh round
//! trip per remote pane) and CPU. Owned by whoever runs the task's check-ins and handed
//! to each: the actor keeps one for as long as it supervises the task; cron mode and
//! `task checkin` start from an empty one, and so do everything.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One kind of deed: when it last started and succeeded.
#[derive(Debug, Default)]
pub struct Deed(Mutex<Option<Instant>>);

impl Deed {
    fn at(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The deed, started at `started`, succeeded: what it saw is as fresh as that.
    pub fn done(&self, started: Instant) {
        *self.at() = Some(started);
    }

    /// The deed failed: the next one must not be skipped.
    pub fn failed(&self) {
        *self.at() = None;
    }

    /// Whether the deed succeeded, started less than `within` ago.
    pub fn within(&self, within: Duration) -> bool {
        self.at().is_some_and(|t| t.elapsed() < within)
    }
}

/// What lately happened to one task's check-ins: the deeds a check-in may skip when
/// they were done moments ago, and an episode of state saves failing (check-ins back off).
#[derive(Debug, Default)]
pub struct Lately {
    /// Every remote host of the task pulled without a problem.
    pub pulled: Deed,
    /// Every agent's screen looked at.
    pub looked: Deed,
    /// The state could not be saved: since when, and when to try again.
    pub storage: crate::app::checkin::storage::Episode,
    /// Hosts found silent by the actor's last look (by their `AgentHost` string), and
    /// since when: pulls pass them over rather than wait on them, and the look that finds
    /// one answering again gives it back to them.
    pub silent: Mutex<std::collections::BTreeMap<String, chrono::DateTime<chrono::Utc>>>,
}

impl Lately {
    /// Whether `host` was found silent.
    pub fn is_silent(&self, host: &str) -> bool {
        self.silent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_until_it_ages_or_fails() {
        let r = Deed::default();
        assert!(!r.within(Duration::from_secs(60)), "nothing done yet");
        r.done(Instant::now());
        assert!(r.within(Duration::from_secs(60)));
        r.done(Instant::now() - Duration::from_secs(10));
        assert!(!r.within(Duration::from_secs(5)), "aged");
        r.done(Instant::now());
        r.failed();
        assert!(!r.within(Duration::from_secs(60)), "a failure is never fresh");
    }
}
