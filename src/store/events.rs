//! The per-task event log: `tasks/<name>/events.jsonl`, append-only.
//!
//! One JSON object per line (check-ins with trigger and delivery result,
//! spawns, handoffs, signals, deaths, restarts). Each event is one `write` on
//! an O_APPEND descriptor, so concurrent writers never interleave within a
//! line and a crash leaves at most a torn last line, which readers skip.
//! Prompt and pane text never go here: ids, lengths and hashes only.

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::error::{Error, Result};
use crate::store::task::Task;

/// What happened: the kinds this program writes. Read back as plain strings
/// ([`Event::kind`]): a log written by another version may hold others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An agent stopped by a human (`task ui`).
    AgentStopped,
    /// A corrupt pm_state.json set aside and started afresh.
    StateSetAside,
    /// An agent's pane or process ended.
    AgentDied,
    /// The PM started again after it died.
    PmRestart,
    /// Starting the dead PM again failed.
    PmRestartFailed,
    /// A client's hook reported a failed turn.
    TurnFailed,
    /// What a client's hook said was set aside against its screen.
    TurnCorrected,
    /// The state could be saved again after it could not.
    StorageRecovered,
    /// A check-in delivered (or tried).
    Checkin,
    /// A check-in with nothing to tell, or no one to tell.
    CheckinSkipped,
    /// An interrupted check-in looked for in what the PM received.
    CheckinSettled,
    /// A queued spawn that could not be started.
    SpawnDequeueFailed,
    /// An agent no longer needs a human or is no longer paused.
    AttentionCleared,
    /// An agent waits at a dialog only a human can answer.
    NeedsHuman,
    /// An agent stopped by a usage limit.
    Paused,
    /// A paused agent told to go on.
    Resumed,
    /// Telling a paused agent to go on failed.
    ResumeFailed,
    /// An agent's client compacted its conversation.
    Compacted,
    /// A message from the supervisor itself (a budget's wrap-up).
    SupervisorMessage,
    /// A spawn or a message refused (the gate, a lane, a budget).
    SpawnRefused,
    /// The PM's conversation replaced by a fresh one.
    PmRotated,
    /// A spoke asked to hand off before its conversation is replaced.
    CheckpointAsked,
    /// A spoke's conversation replaced by a fresh one.
    SpokeRotated,
    /// An agent started.
    Spawn,
    /// A permission request decided (by rule, the PM or a human).
    PermissionDecision,
    /// A permission request left to its dialog.
    PermissionRequest,
    /// An agent's lane freed.
    LaneReleased,
    /// A spawn held in a busy lane.
    SpawnQueued,
    /// A queued spawn dropped.
    SpawnQueueDropped,
    /// Something needs a human.
    Escalation,
    /// A context bundle that could not be removed.
    BundleCleanupFailed,
    /// Something a person did on the web page (`task web`), naming the web session.
    WebAction,
    /// An agent placed on a host of the fleet, and why there.
    Placed,
    /// A host with running agents stopped answering.
    HostUnreachable,
    /// A host that had stopped answering answers again.
    HostBack,
    /// An agent on a host silent past `failover_after:` started again on another.
    AgentMoved,
}

impl Kind {
    /// The word in events.jsonl.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::AgentStopped => "agent_stopped",
            Kind::StateSetAside => "state_set_aside",
            Kind::AgentDied => "agent_died",
            Kind::PmRestart => "pm_restart",
            Kind::PmRestartFailed => "pm_restart_failed",
            Kind::TurnFailed => "turn_failed",
            Kind::TurnCorrected => "turn_corrected",
            Kind::StorageRecovered => "storage_recovered",
            Kind::Checkin => "checkin",
            Kind::CheckinSkipped => "checkin_skipped",
            Kind::CheckinSettled => "checkin_settled",
            Kind::SpawnDequeueFailed => "spawn_dequeue_failed",
            Kind::AttentionCleared => "attention_cleared",
            Kind::NeedsHuman => "needs_human",
            Kind::Paused => "paused",
            Kind::Resumed => "resumed",
            Kind::ResumeFailed => "resume_failed",
            Kind::Compacted => "compacted",
            Kind::SupervisorMessage => "supervisor_message",
            Kind::SpawnRefused => "spawn_refused",
            Kind::PmRotated => "pm_rotated",
            Kind::CheckpointAsked => "checkpoint_asked",
            Kind::SpokeRotated => "spoke_rotated",
            Kind::Spawn => "spawn",
            Kind::PermissionDecision => "permission_decision",
            Kind::PermissionRequest => "permission_request",
            Kind::LaneReleased => "lane_released",
            Kind::SpawnQueued => "spawn_queued",
            Kind::SpawnQueueDropped => "spawn_queue_dropped",
            Kind::Escalation => "escalation",
            Kind::BundleCleanupFailed => "bundle_cleanup_failed",
            Kind::WebAction => "web_action",
            Kind::Placed => "placed",
            Kind::HostUnreachable => "host_unreachable",
            Kind::HostBack => "host_back",
            Kind::AgentMoved => "agent_moved",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When it happened.
    pub time: DateTime<Utc>,
    /// What happened: a [`Kind`]'s word (or another version's).
    pub kind: String,
    /// The agent concerned, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Details (ids, counts, outcomes — never prompt or pane text).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
}

/// `events.jsonl` of a task.
pub fn path(task: &Task) -> PathBuf {
    task.dir().join("events.jsonl")
}

/// Append one event.
pub fn append(task: &Task, kind: Kind, agent: Option<&str>, data: Value, now: DateTime<Utc>) -> Result<()> {
    let e = Event {
        time: now,
        kind: kind.as_str().to_string(),
        agent: agent.map(str::to_string),
        data,
    };
    let mut line = serde_json::to_vec(&e).expect("event serialises");
    line.push(b'\n');
    let p = path(task);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .map_err(|e| Error::io("open", &p, e))?;
    f.write_all(&line).map_err(|e| Error::io("append to", &p, e))?;
    note_appended(&p, &mut f, &line);
    Ok(())
}

/// How many bytes of its own appends this process keeps per log: a reader counts them
/// moments after they were written, so a few lines are enough.
const OWN_TAIL_MAX: usize = 16 * 1024;

/// The lines this process appended last to each log, with where they lie (a process memo:
/// [`crate::store::memo`]). The daemon counts the supervisor's spend from events.jsonl at
/// every check-in, and reading back the event its last check-in had just written was
/// eight system calls and a read each time.
#[derive(Default)]
struct OwnTails(std::sync::Mutex<std::collections::HashMap<PathBuf, OwnTail>>);

/// Bytes `start..end` of the log with identity `id`, as this process wrote them: its
/// appends one after the other, nobody else's between them.
struct OwnTail {
    id: (u64, u64),
    start: u64,
    end: u64,
    bytes: Vec<u8>,
}

impl crate::store::memo::Memo for OwnTails {
    const NAME: &'static str = "events.jsonl own appends";
    fn entries(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Note `line`, just appended through `f`. Where it landed is the descriptor's offset after
/// the write (an appending descriptor's offset is the end of its own write, whatever was
/// appended after it), so it joins the kept lines only when it begins where they end.
fn note_appended(p: &Path, f: &mut std::fs::File, line: &[u8]) {
    use std::io::Seek;
    use std::os::unix::fs::MetadataExt;
    let at = f.stream_position().ok().zip(f.metadata().ok());
    let mut tails = crate::store::memo::get::<OwnTails>()
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let Some((end, meta)) = at else {
        tails.remove(p);
        return;
    };
    let (id, start) = ((meta.dev(), meta.ino()), end - line.len() as u64);
    match tails.get_mut(p) {
        Some(t) if t.id == id && t.end == start && t.bytes.len() + line.len() <= OWN_TAIL_MAX => {
            t.bytes.extend_from_slice(line);
            t.end = end;
        }
        _ => {
            tails.insert(
                p.to_path_buf(),
                OwnTail {
                    id,
                    start,
                    end,
                    bytes: line.to_vec(),
                },
            );
        }
    }
}

/// Bytes `from..len` of the log at `p` (identity `id`, `len` bytes long now) when this
/// process wrote them all itself and nothing was appended after: what a reader would
/// read from the file, without reading it. `None` when that is not known.
pub fn own_tail(p: &Path, id: (u64, u64), from: u64, len: u64) -> Option<Vec<u8>> {
    let tails = crate::store::memo::get::<OwnTails>()
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let t = tails.get(p)?;
    (t.id == id && t.end == len && t.start <= from && from <= len)
        .then(|| t.bytes[(from - t.start) as usize..].to_vec())
}

/// An agent's death, as every place that finds one reports it: the `agent_died` event
/// (its pane, tmux server, why, and the host when remote) and a warning in the log.
pub fn agent_died(
    task: &Task,
    agent: &str,
    at: (Option<&str>, Option<&str>),
    host: Option<&str>,
    detail: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    let (pane, server) = at;
    let mut data = serde_json::json!({"pane": pane, "server": server, "detail": detail});
    if let Some(h) = host {
        data["host"] = h.into();
    }
    tracing::warn!(task = %task.name, agent, detail, host = host.unwrap_or("local"), "agent died");
    append(task, Kind::AgentDied, Some(agent), data, now)
}

/// Parse events from text, skipping lines that are not events (a torn last line).
pub fn parse(text: &str) -> Vec<Event> {
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Read all events of a task.
pub fn read(p: &Path) -> Result<Vec<Event>> {
    match std::fs::read(p) {
        Ok(b) => Ok(parse(&String::from_utf8_lossy(&b))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("read", p, e)),
    }
}

/// One human line for `task log`.
pub fn render(e: &Event) -> String {
    let mut s = format!("{} {:<16}", crate::core::clock::local_time(e.time), e.kind);
    if let Some(a) = &e.agent {
        s.push_str(&format!(" {a}"));
    }
    if let Value::Object(m) = &e.data {
        for (k, v) in m {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            s.push_str(&format!(" {k}={v}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_lines_are_skipped() {
        let good = serde_json::to_string(&Event {
            time: "2025-11-27T09:00:00Z".parse().unwrap(),
            kind: "checkin".into(),
            agent: Some("pm".into()),
            data: serde_json::json!({"outcome": "delivered"}),
        })
        .unwrap();
        let text = format!("{good}\n{{\"time\": \"2025-11-2");
        let ev = parse(&text);
        assert_eq!(ev.len(), 1);
        assert!(render(&ev[0]).contains("checkin") && render(&ev[0]).contains("outcome=delivered"));
    }
}
