//! Lanes: at most one active agent per (task, agent type), and a lane that
//! always comes free again.
//!
//! Seed 002's lanes deadlocked because nothing released them, and its queue was
//! written but never read. Here a lane is acquired by the spawn that starts the
//! agent and released by whichever comes first of: the agent's terminal handoff,
//! its pane dying, `task stop`, or stale recovery (no sign of life for
//! `lane_stale`, 10 minutes by default, when a spawn or a queued spawn needs the
//! lane). A `--queue` spawn waits in the lane (one per lane) and the supervisor
//! starts it as soon as the lane frees. The decisions are plain functions here;
//! `session` does the I/O.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Default time without a sign of life after which a lane may be reclaimed.
pub const DEFAULT_STALE: Duration = Duration::from_secs(10 * 60);
/// Default window in which the same spawn again is a duplicate.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(10);

pub use super::reason::Reason;

/// Why a lane came free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// The agent wrote a COMPLETE, BLOCKED or NEEDS_REVIEW handoff.
    TerminalHandoff,
    /// Its pane exited or vanished.
    PaneDied,
    /// `task stop`.
    Stopped,
    /// No sign of life for the stale time; reclaimed.
    Stale,
    /// The spawn that acquired it failed before the agent started.
    SpawnFailed,
}

impl ReleaseReason {
    /// As shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::TerminalHandoff => "terminal handoff",
            ReleaseReason::PaneDied => "pane died",
            ReleaseReason::Stopped => "task stop",
            ReleaseReason::Stale => "stale",
            ReleaseReason::SpawnFailed => "spawn failed",
        }
    }
}

/// The agent holding a lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// When the lane was acquired.
    pub since: DateTime<Utc>,
    /// The PM handoff it was started with.
    pub handoff: String,
    /// Its tmux pane, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
}

/// What a spawn asked for besides its handoff; kept with a queued spawn so that it
/// starts as it was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnFlags {
    /// `--runtime`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// `--worktree[=detached]`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<crate::core::worktree::Isolation>,
}

/// A spawn waiting for its lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queued {
    /// The PM handoff to start it with (absolute path).
    pub handoff: String,
    /// Its flags.
    #[serde(flatten)]
    pub flags: SpawnFlags,
    /// When it was queued.
    pub at: DateTime<Utc>,
}

/// The last spawn request that took the lane, for the duplicate window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSpawn {
    /// Its handoff.
    pub handoff: String,
    /// When.
    pub at: DateTime<Utc>,
}

/// The last release, for `task status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// Why.
    pub reason: ReleaseReason,
    /// When.
    pub at: DateTime<Utc>,
    /// The released holder's pane. A run released as dead is marked dead by the daemon's
    /// next look, which tells the PM; a spawn that comes first records the death itself
    /// before its new run replaces the record (the pane says which run died).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
}

/// One lane (keyed by agent name in pm_state.json `lanes`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    /// The active agent, when busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// The one pending spawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Queued>,
    /// For the duplicate window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_spawn: Option<LastSpawn>,
    /// The last release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<Released>,
    /// The outcome of the last spawn request for this lane, for `task status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<Reason>,
}

/// Lane timings from task.md (`lane_stale:`, `spawn_debounce:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Time without a sign of life after which a lane may be reclaimed.
    pub stale: Duration,
    /// Window in which the same spawn again is a duplicate.
    pub debounce: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            stale: DEFAULT_STALE,
            debounce: DEFAULT_DEBOUNCE,
        }
    }
}

impl Timing {
    /// From task.md settings; bad values fall back to the defaults (with the reason logged).
    pub fn from_spec(spec: Option<&crate::core::model::taskmd::TaskSpec>) -> Timing {
        let mut t = Timing::default();
        let get = |k: &str| spec.and_then(|s| s.setting(k));
        if let Some(v) = get("lane_stale") {
            match crate::core::clock::parse_duration(v) {
                Some(d) => t.stale = d,
                None => tracing::warn!(value = v, "lane_stale is not a duration like 10m; using 10m"),
            }
        }
        if let Some(v) = get("spawn_debounce") {
            match crate::core::clock::parse_duration(v) {
                Some(d) => t.debounce = d,
                None => tracing::warn!(value = v, "spawn_debounce is not a duration like 10s; using 10s"),
            }
        }
        t
    }
}

/// What to do with a spawn request. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Take the lane and start; `stale` when a silent holder was reclaimed.
    Acquire {
        /// A stale holder is being replaced.
        stale: bool,
    },
    /// Hold the request in the lane's queue.
    Queue,
    /// Refuse.
    Reject(Reason),
}

/// Whether the holder has shown no sign of life for the stale time.
pub fn is_stale(h: &Holder, last_sign: Option<DateTime<Utc>>, now: DateTime<Utc>, t: &Timing) -> bool {
    let last = last_sign.map_or(h.since, |s| s.max(h.since));
    now.signed_duration_since(last).to_std().is_ok_and(|d| d >= t.stale)
}

/// Decide a spawn of `handoff` into `lane`. `last_sign` is the newest sign of
/// life of the holder (pane activity, a handoff, an artifact). Checked in this
/// order: duplicate, free, stale, queue, busy.
pub fn decide(
    lane: &Lane,
    handoff: &str,
    queue: bool,
    last_sign: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    t: &Timing,
) -> Decision {
    let recent = |at: DateTime<Utc>| now.signed_duration_since(at).to_std().map_or(true, |d| d < t.debounce);
    let dup = lane
        .last_spawn
        .as_ref()
        .is_some_and(|l| l.handoff == handoff && recent(l.at))
        || lane.queued.as_ref().is_some_and(|q| q.handoff == handoff);
    if dup {
        return Decision::Reject(Reason::SpawnRejectDuplicate);
    }
    let Some(h) = &lane.holder else {
        return Decision::Acquire { stale: false };
    };
    if is_stale(h, last_sign, now, t) {
        return Decision::Acquire { stale: true };
    }
    if queue && lane.queued.is_none() {
        return Decision::Queue;
    }
    Decision::Reject(Reason::SpawnRejectActiveLane)
}

/// Take the lane for a spawn of `handoff`.
pub fn acquire(lane: &mut Lane, handoff: &str, now: DateTime<Utc>) {
    lane.holder = Some(Holder {
        since: now,
        handoff: handoff.to_string(),
        pane: None,
    });
    lane.last_spawn = Some(LastSpawn {
        handoff: handoff.to_string(),
        at: now,
    });
}

/// Free the lane; returns whether it was held. The duplicate window ends with
/// it: spawning the same handoff again after a release is a retry, not a double.
pub fn release(lane: &mut Lane, reason: ReleaseReason, now: DateTime<Utc>) -> bool {
    lane.last_spawn = None;
    let Some(h) = lane.holder.take() else {
        return false;
    };
    lane.released = Some(Released {
        reason,
        at: now,
        pane: h.pane,
    });
    true
}

/// What the holder's agent has done since it took the lane, as the I/O edge saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seen {
    /// It wrote a terminal handoff after acquiring (and the file is complete).
    pub terminal_handoff: bool,
    /// Its pane is dead or gone (known only for local agents).
    pub pane_dead: bool,
    /// The newest sign of life.
    pub last_sign: Option<DateTime<Utc>>,
}

/// Why a held lane should be released now, if it should. A stale holder is
/// released only when someone is waiting for the lane (`waiting`): a slow agent
/// nobody needs to replace is left alone and shown as stale.
pub fn release_due(h: &Holder, seen: &Seen, waiting: bool, now: DateTime<Utc>, t: &Timing) -> Option<ReleaseReason> {
    if seen.terminal_handoff {
        Some(ReleaseReason::TerminalHandoff)
    } else if seen.pane_dead {
        Some(ReleaseReason::PaneDied)
    } else if waiting && is_stale(h, seen.last_sign, now, t) {
        Some(ReleaseReason::Stale)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn free_busy_queue_duplicate_stale() {
        let t = Timing::default();
        let mut lane = Lane::default();
        assert_eq!(
            decide(&lane, "a.md", false, None, at(0), &t),
            Decision::Acquire { stale: false }
        );
        acquire(&mut lane, "a.md", at(0));
        assert_eq!(
            decide(&lane, "a.md", false, None, at(1), &t),
            Decision::Reject(Reason::SpawnRejectDuplicate)
        );
        assert_eq!(
            decide(&lane, "b.md", false, None, at(1), &t),
            Decision::Reject(Reason::SpawnRejectActiveLane)
        );
        assert_eq!(decide(&lane, "b.md", true, None, at(1), &t), Decision::Queue);
        lane.queued = Some(Queued {
            handoff: "b.md".into(),
            flags: SpawnFlags::default(),
            at: at(1),
        });
        assert_eq!(
            decide(&lane, "b.md", true, None, at(30), &t),
            Decision::Reject(Reason::SpawnRejectDuplicate),
            "the queued one again"
        );
        assert_eq!(
            decide(&lane, "c.md", true, None, at(30), &t),
            Decision::Reject(Reason::SpawnRejectActiveLane),
            "one pending spawn per lane"
        );
        // The same handoff after the window is not a duplicate (a retry after a failure).
        assert_eq!(
            decide(&lane, "a.md", false, Some(at(500)), at(600), &t),
            Decision::Reject(Reason::SpawnRejectActiveLane)
        );
        // Silent for the stale time: reclaimed.
        assert_eq!(
            decide(&lane, "c.md", false, Some(at(60)), at(60 + 600), &t),
            Decision::Acquire { stale: true }
        );
        assert!(release(&mut lane, ReleaseReason::TerminalHandoff, at(700)));
        assert!(!release(&mut lane, ReleaseReason::PaneDied, at(701)), "released once");
        assert_eq!(lane.released.as_ref().unwrap().reason, ReleaseReason::TerminalHandoff);
        assert_eq!(
            decide(&lane, "c.md", false, None, at(702), &t),
            Decision::Acquire { stale: false }
        );
        assert_eq!(
            decide(&lane, "a.md", false, None, at(702), &t),
            Decision::Acquire { stale: false },
            "a retry after a release is not a duplicate"
        );
    }

    #[test]
    fn every_release_path() {
        let t = Timing::default();
        let h = Holder {
            since: at(0),
            handoff: "a.md".into(),
            pane: Some("%1".into()),
        };
        let seen = |terminal, dead, last: i64| Seen {
            terminal_handoff: terminal,
            pane_dead: dead,
            last_sign: Some(at(last)),
        };
        assert_eq!(
            release_due(&h, &seen(true, false, 5), false, at(10), &t),
            Some(ReleaseReason::TerminalHandoff)
        );
        assert_eq!(
            release_due(&h, &seen(false, true, 5), false, at(10), &t),
            Some(ReleaseReason::PaneDied)
        );
        assert_eq!(release_due(&h, &seen(false, false, 5), true, at(10), &t), None);
        assert_eq!(
            release_due(&h, &seen(false, false, 5), false, at(5 + 600), &t),
            None,
            "stale but nobody waits"
        );
        assert_eq!(
            release_due(&h, &seen(false, false, 5), true, at(5 + 600), &t),
            Some(ReleaseReason::Stale)
        );
    }

    #[test]
    fn codes_round_trip_through_messages() {
        for r in Reason::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.code());
        }
    }
}
