//! The PM's state (pm_state.json's content): phase, agents, lineage, escalations, the
//! handoff ledger, lanes. Versioned: older schema versions are migrated by [`decode`];
//! reading and writing the file is [`crate::store::task::persist`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::handoff::{Ledger, Status};

/// The schema version this build writes.
pub const STATE_VERSION: u32 = 4;

/// The task phase (docs/protocol.md#phases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// Initial: the PM reads task.md and plans.
    #[default]
    Planning,
    /// Explore/plan agents are analysing.
    Exploring,
    /// Dev/architect agents are building.
    Developing,
    /// Test agents are running tests.
    Testing,
    /// A review agent is judging the work.
    Reviewing,
    /// Done; terminal.
    Complete,
    /// Waiting for a human or a new approach.
    Blocked,
    /// A review rejected the work; back to the relevant phase.
    Iterate,
}

impl Phase {
    /// All phases, in diagram order.
    pub const ALL: [Phase; 8] = [
        Phase::Planning,
        Phase::Exploring,
        Phase::Developing,
        Phase::Testing,
        Phase::Reviewing,
        Phase::Complete,
        Phase::Blocked,
        Phase::Iterate,
    ];

    /// Canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Planning => "PLANNING",
            Phase::Exploring => "EXPLORING",
            Phase::Developing => "DEVELOPING",
            Phase::Testing => "TESTING",
            Phase::Reviewing => "REVIEWING",
            Phase::Complete => "COMPLETE",
            Phase::Blocked => "BLOCKED",
            Phase::Iterate => "ITERATE",
        }
    }

    fn is_work(self) -> bool {
        matches!(self, Phase::Exploring | Phase::Developing | Phase::Testing)
    }

    /// The transitions of the phase machine (docs/protocol.md#the-phase-machine), plus what real runs need:
    /// moves between the three work phases (explore → develop, as in its
    /// Appendix B), any unfinished phase → BLOCKED, and BLOCKED → a work phase
    /// or PLANNING once unblocked. COMPLETE is terminal. Staying put is allowed.
    pub fn can_move_to(self, to: Phase) -> bool {
        use Phase::*;
        if self == to {
            return true;
        }
        match (self, to) {
            (Complete, _) => false,
            (_, Blocked) => true,
            (Planning, t) => t.is_work(),
            (f, t) if f.is_work() => t.is_work() || t == Reviewing,
            (Reviewing, t) => matches!(t, Complete | Iterate) || t.is_work(),
            (Iterate, t) => t.is_work() || t == Planning,
            (Blocked, t) => t.is_work() || t == Planning || t == Reviewing,
            _ => false,
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the supervisor knows of one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    /// Hub or spoke.
    #[serde(default)]
    pub role: super::AgentRole,
    /// `local`, or the remote host (its `cwd:` spec).
    #[serde(default)]
    pub host: super::AgentHost,
    /// tmux session name, when running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// tmux pane id (`%N`), when running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    /// The identity of the tmux server that held `pane` when it was started
    /// ([`crate::io::tmux::ServerId`]): a new server numbers its panes from `%0` again, so a
    /// pane id is only trusted on the server it was recorded under. `None` in records
    /// written before it was kept (those ids are trusted as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux_server: Option<String>,
    /// running, stopped, dead, done, blocked, needs_review (or unknown).
    #[serde(default)]
    pub status: super::AgentStatus,
    /// Status of its last handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<Status>,
    /// File name of its last handoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handoff: Option<String>,
    /// Last time anything was heard of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<DateTime<Utc>>,
    /// The runtime it was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The runtime's conversation id (Claude Code `--session-id`), for resuming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Earlier conversation ids of this agent (a respawn starts a new one): its usage is
    /// the sum over all of them, so none may be forgotten.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub past_sessions: Vec<String>,
    /// When the supervisor started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// For a remote agent: since when its host cannot be reached (cleared by the next good pull).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<DateTime<Utc>>,
    /// The current episode of needing a human or being paused by a usage limit
    /// ([`crate::core::attention`]); kept here so a restarted supervisor neither calls a
    /// human twice for one dialog nor forgets a pause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<crate::core::attention::Attention>,
    /// When it was asked for a checkpoint because its context filled up (a spoke; see
    /// [`crate::core::rotation::spoke_step`]), until it is continued in a fresh session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_asked: Option<DateTime<Utc>>,
    /// Check-ins delivered to its current conversation (the PM's): `rotate_every:` counts them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checkins: u32,
    /// The time of its client's last turn report ([`crate::core::turn`]) that its screen
    /// contradicted: set aside, so it is neither believed nor corrected again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_set_aside: Option<DateTime<Utc>>,
    /// When it was last sent the resume message after a usage limit (any episode): a limit
    /// that comes straight back is not nudged again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resume: Option<DateTime<Utc>>,
    /// Its git worktree, when it works in one ([`crate::core::worktree`]); kept after a
    /// conflict so the agent (or another) can resolve it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::core::worktree::AgentWorktree>,
    /// How many worktrees it was given in this task: the next one is numbered after them, so
    /// no branch name is used twice.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub worktrees_made: u32,
    /// Earlier runs of it on hosts that stopped answering, moved elsewhere by failover
    /// ([`crate::core::fleet`]): each is stopped when its host answers again, so it never
    /// runs beside its successor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_behind: Vec<LeftBehind>,
    /// Why the fleet put its current run on its host (each host weighed, as the spawn said),
    /// kept so `task status` can say it long after the spawn; `None` when it was not placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<String>,
    /// Fields added by newer builds, kept on rewrite.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// An agent's run left on a host that stopped answering, to stop when it answers again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftBehind {
    /// The host (a remote `AgentHost`).
    pub host: super::AgentHost,
    /// Its tmux session there.
    pub session: String,
    /// Its pane and that server's identity, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmux_server: Option<String>,
    /// Since when its host had not answered.
    pub silent_since: DateTime<Utc>,
    /// When it was moved.
    pub moved_at: DateTime<Utc>,
}

/// One edge of the handoff chain (docs/protocol.md#progress-and-lineage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineageEntry {
    /// The handoff file.
    pub file: String,
    /// Source agent.
    pub from: String,
    /// Target agent, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Recommended next agent, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended_next: Option<String>,
    /// The handoff's status.
    pub status: Status,
    /// When it was recorded.
    pub time: DateTime<Utc>,
}

/// The committed length, in bytes, of the log beside the state file. The state file is
/// the commit point: the log's bytes beyond its mark were written by a save that never
/// completed and are not records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Logs {
    /// Of `pm_state.log.jsonl` (version 4 on: the ledger's and the lineage's records).
    #[serde(default)]
    pub log_bytes: u64,
    /// Of `pm_state.ledger.jsonl`: a version-3 state's, read and never written.
    #[serde(default, skip_serializing_if = "no_bytes")]
    pub ledger_bytes: u64,
    /// Of `pm_state.lineage.jsonl`: likewise.
    #[serde(default, skip_serializing_if = "no_bytes")]
    pub lineage_bytes: u64,
}

fn no_bytes(n: &u64) -> bool {
    *n == 0
}

impl Logs {
    fn is_empty(&self) -> bool {
        *self == Logs::default()
    }
}

/// Something that needs a human (docs/protocol.md#signals: 3+ rejections, a PM that cannot be restarted, BLOCKED).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// When it was raised.
    pub time: DateTime<Utc>,
    /// What a human should look at.
    pub reason: String,
}

/// The whole state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PmState {
    /// Schema version; see [`STATE_VERSION`].
    pub version: u32,
    /// The task's phase.
    pub phase: Phase,
    /// When the last check-in was delivered.
    #[serde(default)]
    pub last_checkin: Option<DateTime<Utc>>,
    /// When the next scheduled check-in is due.
    #[serde(default)]
    pub next_checkin: Option<DateTime<Utc>>,
    /// Agents by name.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentState>,
    /// Processed handoffs. Stored in the state's log beside the state file
    /// (`crate::store::task::logs`; version 3 had a log for each); read inline from version 2. Shared between
    /// copies of the state (it grows with every handoff, and most changes of the state
    /// leave it alone): `Arc::make_mut` to change it.
    #[serde(default, skip_serializing)]
    pub ledger: Arc<Ledger>,
    /// Review rejections per piece of work (keyed by the rejected agent).
    #[serde(default)]
    pub review_rejections: BTreeMap<String, u32>,
    /// The handoff chain, in processing order. In the state's log like `ledger`, and
    /// shared between copies of the state the same way.
    #[serde(default, skip_serializing)]
    pub lineage: Arc<super::Lineage>,
    /// How much of the state's log (of a version-3 state: of its two logs) this state has committed.
    #[serde(default, skip_serializing_if = "Logs::is_empty")]
    pub logs: Logs,
    /// Things that need a human, newest last.
    #[serde(default)]
    pub escalations: Vec<Escalation>,
    /// When each rate-limited reminder (e.g. `no_progress`) was last sent.
    #[serde(default)]
    pub reminders: BTreeMap<String, DateTime<Utc>>,
    /// Times the PM was restarted by the daemon (for backoff and the limit).
    #[serde(default)]
    pub pm_restarts: Vec<DateTime<Utc>>,
    /// One lane per agent type: who holds it, what waits for it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lanes: BTreeMap<String, crate::core::protocol::lane::Lane>,
    /// The task's git side: the commit it started at and its branch
    /// ([`crate::core::worktree`]); `None` outside a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<crate::core::worktree::TaskGit>,
    /// Fields added by newer minor builds, kept on rewrite.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl PmState {
    /// Close the escalation of an agent's ended attention episode (no I/O).
    pub fn close_attention_escalation(&mut self, agent: &str, a: &crate::core::attention::Attention) {
        let prefix = crate::core::attention::escalation_prefix(agent, a.kind);
        self.escalations.retain(|e| !e.reason.starts_with(&prefix));
    }
}

impl Default for PmState {
    fn default() -> Self {
        PmState {
            version: STATE_VERSION,
            phase: Phase::Planning,
            last_checkin: None,
            next_checkin: None,
            agents: BTreeMap::new(),
            ledger: Arc::default(),
            review_rejections: BTreeMap::new(),
            lineage: Arc::default(),
            logs: Logs::default(),
            escalations: Vec::new(),
            reminders: BTreeMap::new(),
            pm_restarts: Vec::new(),
            lanes: BTreeMap::new(),
            git: None,
            extra: BTreeMap::new(),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Parse a timestamp the way version-1 files wrote it (RFC 3339, or naive local-free UTC).
fn v1_time(v: &Value) -> Option<DateTime<Utc>> {
    let s = v.as_str()?;
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Some(t.and_utc());
        }
    }
    None
}

/// Version 1 is the seed's shape: no `version`, `phase`, `last_checkin`, and
/// optionally `agents` as name → session string. Everything else is kept in `extra`.
fn migrate_v1(mut obj: serde_json::Map<String, Value>) -> std::result::Result<PmState, String> {
    let mut st = PmState::default();
    if let Some(p) = obj.remove("phase") {
        st.phase = serde_json::from_value(p).map_err(|e| format!("phase: {e}"))?;
    }
    if let Some(t) = obj.remove("last_checkin") {
        if !t.is_null() {
            st.last_checkin = Some(v1_time(&t).ok_or("last_checkin is not a timestamp")?);
        }
    }
    if let Some(Value::Object(agents)) = obj.remove("agents") {
        for (name, v) in agents {
            let a = AgentState {
                host: super::AgentHost::Local,
                session: v.as_str().map(str::to_string),
                status: "unknown".into(),
                ..AgentState::default()
            };
            st.agents.insert(name, a);
        }
    }
    st.extra = obj.into_iter().collect();
    Ok(st)
}

/// Decode state JSON of any supported version.
pub fn decode(bytes: &[u8]) -> std::result::Result<PmState, DecodeError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| DecodeError::Corrupt(e.to_string()))?;
    let Value::Object(obj) = v else {
        return Err(DecodeError::Corrupt("not a JSON object".into()));
    };
    match obj.get("version") {
        None => migrate_v1(obj).map_err(DecodeError::Corrupt),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(2..=4) => serde_json::from_value(Value::Object(obj)).map_err(|e| DecodeError::Corrupt(e.to_string())),
            Some(1) => {
                migrate_v1(obj.into_iter().filter(|(k, _)| k != "version").collect()).map_err(DecodeError::Corrupt)
            }
            Some(n) if n > STATE_VERSION as u64 => Err(DecodeError::TooNew(n)),
            _ => Err(DecodeError::Corrupt(format!("unknown schema version {n}"))),
        },
        Some(other) => Err(DecodeError::Corrupt(format!("version is {other}, not a number"))),
    }
    .map(|mut s| {
        s.version = STATE_VERSION;
        s
    })
}

/// Why state bytes could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON, or not our shape.
    Corrupt(String),
    /// A newer schema version.
    TooNew(u64),
}
