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

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When it happened.
    pub time: DateTime<Utc>,
    /// What happened: `checkin`, `checkin_skipped`, `spawn`, `handoff`, `signal`, `agent_died`, `pm_restart`, `escalation`, `daemon`,
    /// `checkin_settled` (an interrupted check-in looked for in what the PM received), `storage_recovered`.
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
pub fn append(task: &Task, kind: &str, agent: Option<&str>, data: Value, now: DateTime<Utc>) -> Result<()> {
    let e = Event {
        time: now,
        kind: kind.to_string(),
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
    f.write_all(&line).map_err(|e| Error::io("append to", &p, e))
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
