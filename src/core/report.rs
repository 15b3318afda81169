//! What a use case reports: a check-in, a spawn, a stop, a delivery. Plain data shared
//! by the CLI (which renders it or prints it as `--json`), the daemon (which sends it
//! over the control socket as itself) and the application layer (which fills it in).

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::checkin::Signal;
use crate::core::model::Phase;

/// What caused a check-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// `task checkin` (cron or a human).
    Manual,
    /// A new terminal handoff (the daemon's watcher).
    Handoff,
    /// The task's schedule.
    Schedule,
    /// An agent's pane died.
    Death,
    /// An agent began to need a human, or was paused by a usage limit.
    Attention,
}

/// What a check-in did; `task checkin --json` prints it, and it crosses the daemon's socket
/// as itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckinReport {
    /// What caused it.
    pub trigger: Trigger,
    /// Not sent to the PM: a scheduled check-in with nothing new and no signal,
    /// or one after the PM declared the task COMPLETE or BLOCKED (`skip_reason` says which).
    pub skipped: bool,
    /// Why it was not sent (`null` when it was, or when another check-in was running).
    pub skip_reason: Option<String>,
    /// The task.
    pub task: String,
    /// New handoffs taken from the ledger.
    pub new_handoffs: Vec<String>,
    /// Signals computed.
    pub signals: Vec<Signal>,
    /// Phase after the check-in.
    pub phase: Phase,
    /// Delivery to the PM (`None` when another check-in was running).
    pub delivery: Option<Report>,
    /// The id its message carried (`[checkin c-1a2b3c]`), when one was typed into the PM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkin_id: Option<String>,
    /// Whether the state (ledger, last_checkin) was saved.
    pub recorded: bool,
    /// When the next scheduled check-in is due (`null`: no schedule, e.g. cron mode without a crontab line).
    pub next_checkin: Option<DateTime<Utc>>,
}

/// What a start or spawn did: enough to find the agent again (session, pane, host) and
/// to see exactly what it was told (the saved preamble) and run (argv).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Started {
    /// The agent.
    pub agent: String,
    /// Its tmux session.
    pub session: String,
    /// Its pane id.
    pub pane: String,
    /// The runtime.
    pub runtime: String,
    /// Where the exact preamble sent is saved.
    pub preamble: PathBuf,
    /// The command line started (argv).
    pub argv: Vec<String>,
    /// `local`, or the remote host it runs on.
    pub host: String,
    /// Its sandbox: `on`, `off`, `unavailable` (asked for, not to be had here; see the
    /// spawn event's `sandbox_why`) or `unsupported` (a runtime without one).
    #[serde(default)]
    pub sandbox: String,
    /// Why a sandbox asked for is not on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_why: Option<String>,
}

/// What a spawn did, with its reason code, so the PM (and the gate's log) can tell a start
/// from a queued or recovered one. `started` is absent when it was queued. This nested
/// form crosses the daemon's socket; [`SpawnReport::to_json`] is what `--json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpawnReport {
    /// SPAWN_OK, SPAWN_QUEUED, SPAWN_DEQUEUED or SPAWN_RECOVERED_STALE.
    pub reason: crate::core::protocol::lane::Reason,
    /// The agent.
    pub agent: String,
    /// hub or spoke, from the roster.
    pub role: String,
    /// The task's roster.
    pub roster: String,
    /// What was started.
    #[serde(default)]
    pub started: Option<Started>,
    /// For a queued spawn: what holds the lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Things the caller should know (a stale lane reclaimed, a bundle not deployed…).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl SpawnReport {
    /// `task spawn --json`: the report with what was started laid out at the top level
    /// (docs/json.md), as scripts have always read it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::to_value(self).unwrap_or_default();
        if let Some(obj) = out.as_object_mut() {
            if let Some(serde_json::Value::Object(started)) = obj.remove("started") {
                obj.extend(started);
            }
        }
        out
    }
}

/// What `task stop` did, split so that a session still running on an unreachable host
/// is never reported as ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Stopped {
    /// Sessions ended.
    pub ended: Vec<String>,
    /// Sessions that were already gone.
    pub already_gone: Vec<String>,
    /// Remote sessions that could not be reached (still running there; retry `task stop`).
    #[serde(default)]
    pub unreachable: Vec<String>,
}

/// The result of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Seen submitted.
    Delivered,
    /// Pasted and Enter pressed, but submission was not seen in time.
    Unconfirmed,
    /// Not pasted (pane gone, never ready, a dialog) or tmux failed.
    Failed,
}

/// What happened, for the CLI, the event log and the check-in ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The outcome.
    pub outcome: Outcome,
    /// Why, in a sentence.
    pub reason: String,
    /// Enter presses used.
    pub enters: u32,
    /// Bytes pasted (after sanitising).
    pub bytes: usize,
}
