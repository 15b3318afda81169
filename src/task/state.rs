//! pm_state.json: the PM's state, versioned and crash-safe.
//!
//! Written only by replacing the whole file atomically. Read strictly: a file
//! that does not parse is reported with its path and left in place for
//! read-only commands; commands that must write set it aside as
//! `pm_state.json.corrupt-<timestamp>` and say so, never silently replacing
//! it with an empty state. Older schema versions are migrated on read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::fsutil;
use crate::handoff::{Ledger, Status};

/// The schema version this build writes.
pub const STATE_VERSION: u32 = 2;

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
    /// hub or spoke.
    #[serde(default)]
    pub role: String,
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
    /// ([`crate::tmux::ServerId`]): a new server numbers its panes from `%0` again, so a
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
    /// When the supervisor started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// For a remote agent: since when its host cannot be reached (cleared by the next good pull).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable_since: Option<DateTime<Utc>>,
    /// The current episode of needing a human or being paused by a usage limit
    /// ([`crate::attention`]); kept here so a restarted supervisor neither calls a
    /// human twice for one dialog nor forgets a pause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<crate::attention::Attention>,
    /// When it was last sent the resume message after a usage limit (any episode): a limit
    /// that comes straight back is not nudged again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resume: Option<DateTime<Utc>>,
    /// Fields added by newer builds, kept on rewrite.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
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
    /// Processed handoffs.
    #[serde(default)]
    pub ledger: Ledger,
    /// Review rejections per piece of work (keyed by the rejected agent).
    #[serde(default)]
    pub review_rejections: BTreeMap<String, u32>,
    /// The handoff chain, in processing order.
    #[serde(default)]
    pub lineage: Vec<LineageEntry>,
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
    pub lanes: BTreeMap<String, crate::protocol::lane::Lane>,
    /// Fields added by newer minor builds, kept on rewrite.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl PmState {
    /// Close the escalation of an agent's ended attention episode (no I/O).
    pub fn close_attention_escalation(&mut self, agent: &str, a: &crate::attention::Attention) {
        let prefix = crate::attention::escalation_prefix(agent, a.kind);
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
            ledger: Ledger::default(),
            review_rejections: BTreeMap::new(),
            lineage: Vec::new(),
            escalations: Vec::new(),
            reminders: BTreeMap::new(),
            pm_restarts: Vec::new(),
            lanes: BTreeMap::new(),
            extra: BTreeMap::new(),
        }
    }
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
            Some(2) => serde_json::from_value(Value::Object(obj)).map_err(|e| DecodeError::Corrupt(e.to_string())),
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

/// Read the state for display. A missing file is a fresh state; a bad one is an error, untouched.
pub fn load(path: &Path, task: &str) -> Result<PmState> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PmState::default()),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    decode(&bytes).map_err(|e| match e {
        DecodeError::Corrupt(detail) => Error::CorruptState {
            path: path.to_path_buf(),
            task: task.to_string(),
            detail,
        },
        DecodeError::TooNew(found) => Error::StateTooNew {
            path: path.to_path_buf(),
            found,
            supported: STATE_VERSION,
        },
    })
}

/// Outcome of [`load_for_update`].
#[derive(Debug)]
pub struct Loaded {
    /// The state to modify and save.
    pub state: PmState,
    /// Where a corrupt file was moved, if it was.
    pub set_aside: Option<PathBuf>,
}

/// Read the state in order to change it. A corrupt file is moved aside ([`set_aside`],
/// reported in `set_aside`) and a fresh state returned; a too-new file is an error (never
/// set aside: it is valid, only not ours to rewrite).
pub fn load_for_update(path: &Path, task: &str, now: DateTime<Utc>) -> Result<Loaded> {
    match load(path, task) {
        Ok(state) => Ok(Loaded { state, set_aside: None }),
        Err(Error::CorruptState { .. }) => Ok(Loaded {
            state: PmState::default(),
            set_aside: Some(set_aside(path, now)?),
        }),
        Err(e) => Err(e),
    }
}

/// The prefix of every set-aside copy's file name.
pub const SET_ASIDE_PREFIX: &str = "pm_state.json.corrupt-";

/// The name a corrupt state set aside at `now` gets: `pm_state.json.corrupt-<UTC time to
/// the nanosecond>`, with `-<n>` added for the `n`th try, so a second corruption in the same
/// instant (or a clock set back) gets a name of its own. Pure.
pub fn set_aside_name(now: DateTime<Utc>, attempt: u32) -> String {
    let stamp = now.format("%Y%m%dT%H%M%S%.9fZ");
    match attempt {
        0 => format!("{SET_ASIDE_PREFIX}{stamp}"),
        n => format!("{SET_ASIDE_PREFIX}{stamp}-{n}"),
    }
}

/// Move the corrupt file at `path` aside under a name no earlier copy has
/// ([`set_aside_name`]): hard-linked to the new name, which fails rather than replace an
/// existing copy, then unlinked; where hard links are not supported, renamed after checking
/// the name is free (the caller holds the state lock). Returns the copy's path.
pub fn set_aside(path: &Path, now: DateTime<Utc>) -> Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    for attempt in 0..1000 {
        let aside = dir.join(set_aside_name(now, attempt));
        match std::fs::hard_link(path, &aside) {
            Ok(()) => {
                std::fs::remove_file(path)
                    .map_err(|e| Error::io("remove the corrupt state after copying it aside", path, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) if aside.symlink_metadata().is_ok() => continue,
            Err(_) => {
                std::fs::rename(path, &aside).map_err(|e| Error::io("set aside corrupt state", path, e))?;
            }
        }
        fsutil::sync_dir(dir)?;
        return Ok(aside);
    }
    Err(Error::io(
        "set aside corrupt state",
        path,
        std::io::Error::other("1000 set-aside copies with this timestamp already exist; remove old ones"),
    ))
}

/// The copies of corrupt states set aside in the task folder `dir`, oldest first (names
/// sort by time), so `task status` can name them until someone looks and removes them.
pub fn set_aside_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(SET_ASIDE_PREFIX))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Write the state atomically (temp, fsync, rename, fsync folder).
pub fn save(path: &Path, state: &PmState) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(state).expect("state serialises");
    bytes.push(b'\n');
    fsutil::atomic_write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut s = PmState {
            phase: Phase::Developing,
            ..Default::default()
        };
        s.last_checkin = Some("2025-11-27T09:00:00Z".parse().unwrap());
        s.ledger
            .record("dev-20251127-113000.md", 10, 5, "ab", "2025-11-27T11:31:00Z");
        s.review_rejections.insert("dev".into(), 2);
        s.agents.insert(
            "dev".into(),
            AgentState {
                role: "spoke".into(),
                host: crate::task::AgentHost::Local,
                status: "running".into(),
                last_status: Some(Status::NeedsReview),
                ..Default::default()
            },
        );
        s.extra.insert("future_field".into(), Value::from(7));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        save(&p, &s).unwrap();
        assert_eq!(load(&p, "t").unwrap(), s);
    }

    #[test]
    fn transitions_follow_the_diagram() {
        use Phase::*;
        for (from, to) in [
            (Planning, Exploring),
            (Planning, Developing),
            (Planning, Testing),
            (Exploring, Reviewing),
            (Exploring, Developing),
            (Developing, Reviewing),
            (Reviewing, Complete),
            (Reviewing, Iterate),
            (Reviewing, Blocked),
            (Iterate, Developing),
            (Blocked, Developing),
            (Testing, Testing),
        ] {
            assert!(from.can_move_to(to), "{from} -> {to}");
        }
        for (from, to) in [
            (Planning, Reviewing),
            (Planning, Complete),
            (Developing, Complete),
            (Complete, Developing),
            (Complete, Blocked),
            (Iterate, Complete),
            (Exploring, Iterate),
        ] {
            assert!(!from.can_move_to(to), "{from} -> {to} must be refused");
        }
    }

    #[test]
    fn corrupt_is_reported_then_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        std::fs::write(&p, b"{\"version\": 2, \"phase\": ").unwrap();
        let e = load(&p, "t").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_STATE);
        assert!(e.to_string().contains("pm_state.json"), "{e}");
        assert!(p.exists(), "read-only load leaves the file");
        let now: DateTime<Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        let l = load_for_update(&p, "t", now).unwrap();
        let aside = l.set_aside.unwrap();
        assert!(
            aside
                .to_string_lossy()
                .ends_with("pm_state.json.corrupt-20251127T090000.000000000Z"),
            "{aside:?}"
        );
        assert_eq!(std::fs::read(&aside).unwrap(), b"{\"version\": 2, \"phase\": ");
        assert!(!p.exists());
        // A second corruption at the very same instant keeps both copies.
        std::fs::write(&p, b"second").unwrap();
        let again = load_for_update(&p, "t", now).unwrap().set_aside.unwrap();
        assert_ne!(again, aside);
        assert!(again.to_string_lossy().ends_with(".000000000Z-1"), "{again:?}");
        assert_eq!(std::fs::read(&again).unwrap(), b"second");
        assert_eq!(std::fs::read(&aside).unwrap(), b"{\"version\": 2, \"phase\": ");
        assert_eq!(set_aside_files(d.path()), vec![aside, again]);
    }

    #[test]
    fn set_aside_names_carry_nanoseconds() {
        let t: DateTime<Utc> = "2025-11-27T09:00:00.123456789Z".parse().unwrap();
        assert_eq!(set_aside_name(t, 0), "pm_state.json.corrupt-20251127T090000.123456789Z");
        assert_eq!(
            set_aside_name(t, 2),
            "pm_state.json.corrupt-20251127T090000.123456789Z-2"
        );
    }

    #[test]
    fn too_new_is_not_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        std::fs::write(&p, b"{\"version\": 99, \"phase\": \"PLANNING\"}").unwrap();
        let now: DateTime<Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        assert!(matches!(
            load_for_update(&p, "t", now),
            Err(Error::StateTooNew { found: 99, .. })
        ));
        assert!(p.exists());
    }

    #[test]
    fn version_fixtures_are_read() {
        let v1 = decode(include_bytes!("../../tests/fixtures/pm_state.v1.json")).unwrap();
        assert_eq!(v1.version, STATE_VERSION);
        assert_eq!(v1.phase, Phase::Exploring);
        assert_eq!(v1.last_checkin, Some("2025-11-27T09:30:00Z".parse().unwrap()));
        assert_eq!(v1.agents["explore"].session.as_deref(), Some("dds-writer-pool-explore"));
        assert!(v1.extra.contains_key("current_agent"), "unknown v1 fields are kept");

        let v2 = decode(include_bytes!("../../tests/fixtures/pm_state.v2.json")).unwrap();
        assert_eq!(v2.phase, Phase::Reviewing);
        assert_eq!(v2.ledger.len(), 2);
        assert_eq!(v2.lineage.len(), 2);
        assert_eq!(v2.review_rejections["dev"], 1);
        assert_eq!(v2.agents["dev"].last_status, Some(Status::NeedsReview));
    }
}
