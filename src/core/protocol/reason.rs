//! Reason codes: every outcome of a spawn request as a value, and a refusal that carries
//! its code, so no side ever reads a code back out of a message's text. Kept apart from
//! the lane decisions (and free of imports) because the library's error type holds one.

use serde::{Deserialize, Serialize};

/// Every outcome of a spawn request; printed, in `--json`, events.jsonl and `task status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(
    clippy::enum_variant_names,
    reason = "the names are the protocol's reason codes (SPAWN_OK, …)"
)]
pub enum Reason {
    /// Started.
    SpawnOk,
    /// The lane was busy; held until it frees (`--queue`).
    SpawnQueued,
    /// A queued spawn was started because its lane freed.
    SpawnDequeued,
    /// Refused: the lane is busy (and no `--queue`, or its queue is full).
    SpawnRejectActiveLane,
    /// Refused: the same spawn moments ago.
    SpawnRejectDuplicate,
    /// Refused: the caller is a spoke.
    SpawnRejectSpokeCaller,
    /// Started after reclaiming a lane whose agent showed no sign of life.
    SpawnRecoveredStale,
    /// Refused: a budget covering the task or the role is used up (task.md `budget:`).
    SpawnRejectBudget,
}

impl Reason {
    /// The code as printed.
    pub fn code(self) -> &'static str {
        match self {
            Reason::SpawnOk => "SPAWN_OK",
            Reason::SpawnQueued => "SPAWN_QUEUED",
            Reason::SpawnDequeued => "SPAWN_DEQUEUED",
            Reason::SpawnRejectActiveLane => "SPAWN_REJECT_ACTIVE_LANE",
            Reason::SpawnRejectDuplicate => "SPAWN_REJECT_DUPLICATE",
            Reason::SpawnRejectSpokeCaller => "SPAWN_REJECT_SPOKE_CALLER",
            Reason::SpawnRecoveredStale => "SPAWN_RECOVERED_STALE",
            Reason::SpawnRejectBudget => "SPAWN_REJECT_BUDGET",
        }
    }

    /// All codes, for docs and for recognising one at the start of an error message.
    pub const ALL: [Reason; 8] = [
        Reason::SpawnOk,
        Reason::SpawnQueued,
        Reason::SpawnDequeued,
        Reason::SpawnRejectActiveLane,
        Reason::SpawnRejectDuplicate,
        Reason::SpawnRejectSpokeCaller,
        Reason::SpawnRecoveredStale,
        Reason::SpawnRejectBudget,
    ];
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

/// A refusal by the hub-and-spoke protocol, its reason code a value. The library raises
/// it as [`crate::core::error::Error::Refused`] (exit 6); the daemon answers it as a refused
/// response; `task spawn --json` prints its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// Why (`SPAWN_REJECT_*`).
    pub reason: Reason,
    /// What to tell the user; starts with the reason code.
    pub message: String,
}

impl Refusal {
    /// A refusal whose message is its code, then `why`.
    pub fn new(reason: Reason, why: &str) -> Refusal {
        Refusal {
            reason,
            message: format!("{}: {why}", reason.code()),
        }
    }
}
