//! Permission requests the broker could not decide by rule, kept in the task folder
//! (`permissions/`) so that a request and its one decision outlive any process: the agent's
//! hook waiting for it, the daemon, the CLI of whoever answers. A request is
//! `<id>.request.json`; its decision `<id>.decision.json`, created without ever replacing
//! one, so the first answer wins and every later one is told so. `always.json` keeps the
//! rules `task permit … --always` added, by agent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::error::{Error, Result};
use crate::store::fsutil;
use crate::store::task::Task;

/// A request waiting for an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// `p-` and eight hex digits: short enough to type.
    pub id: String,
    /// The agent asking.
    pub agent: String,
    /// Claude Code's tool (`Bash`, `WebFetch`…).
    pub tool: String,
    /// What it wants to run or touch, as the agent wrote it.
    pub command: String,
    /// Why no rule decided it.
    pub why: String,
    /// When it was asked.
    pub at: DateTime<Utc>,
}

/// The one answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decided {
    pub id: String,
    /// `allow` or `deny`.
    pub decision: String,
    /// `pm`, `human` or `deadline`.
    pub by: String,
    /// The reason given, told to the agent with a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A rule was added for the agent (`--always`).
    #[serde(default)]
    pub always: bool,
    pub at: DateTime<Utc>,
}

/// How much of a command events and check-ins show.
const SHOWN: usize = 300;

/// A command as events and check-ins show it: cut, and whether it was.
pub fn shown(command: &str) -> (String, bool) {
    (command.chars().take(SHOWN).collect(), command.chars().count() > SHOWN)
}

fn dir(task: &Task) -> PathBuf {
    task.dir().join("permissions")
}

/// A fresh request id.
pub fn new_id() -> String {
    format!("p-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Whether `id` has the shape of a request id (checked before it names a file).
pub fn valid_id(id: &str) -> bool {
    id.len() == 10 && id.starts_with("p-") && id[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// Keep a new request (crash-safe).
pub fn open(task: &Task, r: &Request) -> Result<()> {
    fsutil::create_dir_all(&dir(task))?;
    let path = dir(task).join(format!("{}.request.json", r.id));
    fsutil::atomic_write(&path, &serde_json::to_vec_pretty(r).expect("a request serialises"))
}

/// The request `id`, if there is one.
pub fn request(task: &Task, id: &str) -> Result<Option<Request>> {
    read(&dir(task).join(format!("{id}.request.json")))
}

/// The decision of `id`, if it has one.
pub fn decision(task: &Task, id: &str) -> Result<Option<Decided>> {
    read(&dir(task).join(format!("{id}.decision.json")))
}

/// Record `d` unless `id` is decided already; either way, the decision that stands.
pub fn decide(task: &Task, d: &Decided) -> Result<(Decided, bool)> {
    fsutil::create_dir_all(&dir(task))?;
    let path = dir(task).join(format!("{}.decision.json", d.id));
    if fsutil::atomic_create(&path, &serde_json::to_vec_pretty(d).expect("a decision serialises"))? {
        return Ok((d.clone(), true));
    }
    let stands =
        read(&path)?.ok_or_else(|| Error::BadInput(format!("{} vanished while being read", path.display())))?;
    Ok((stands, false))
}

/// Requests without a decision, oldest first.
pub fn pending(task: &Task) -> Result<Vec<Request>> {
    let Ok(entries) = std::fs::read_dir(dir(task)) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".request.json") else {
            continue;
        };
        if !valid_id(id) || decision(task, id)?.is_some() {
            continue;
        }
        if let Some(r) = request(task, id)? {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.at.cmp(&b.at).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// The agents whose dialog is the broker's: a request of theirs waits, or was decided
/// less than `settle` before `now` (Claude Code takes a moment to close the dialog after
/// the hook answers).
pub fn brokered_agents(
    task: &Task,
    now: DateTime<Utc>,
    settle: std::time::Duration,
) -> Result<std::collections::BTreeSet<String>> {
    let Ok(entries) = std::fs::read_dir(dir(task)) else {
        return Ok(Default::default());
    };
    let since = now - chrono::Duration::from_std(settle).unwrap_or_default();
    let mut out = std::collections::BTreeSet::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".request.json").filter(|id| valid_id(id)) else {
            continue;
        };
        let recent = match decision(task, id)? {
            None => true,
            Some(d) => d.at >= since,
        };
        if recent {
            if let Some(r) = request(task, id)? {
                out.insert(r.agent);
            }
        }
    }
    Ok(out)
}

/// The rules `--always` added, by agent.
pub fn always(task: &Task) -> Result<BTreeMap<String, Vec<String>>> {
    Ok(read(&dir(task).join("always.json"))?.unwrap_or_default())
}

/// Add `rule` for `agent` to the task's `--always` rules.
pub fn add_always(task: &Task, agent: &str, rule: &str) -> Result<()> {
    let mut all = always(task)?;
    let rules = all.entry(agent.to_string()).or_default();
    if !rules.iter().any(|r| r == rule) {
        rules.push(rule.to_string());
    }
    fsutil::create_dir_all(&dir(task))?;
    fsutil::atomic_write(
        &dir(task).join("always.json"),
        &serde_json::to_vec_pretty(&all).expect("rules serialise"),
    )
}

fn read<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<Option<T>> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| Error::BadInput(format!("{} is not valid ({e}); move it aside", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}
