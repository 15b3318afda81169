//! The bundle on disk: deployed whole or not at all, copied for remote hosts, and put
//! away for review without ever failing the handoff that ends the agent's turn.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::{
    Deploy, ExecutionNotes, Manifest, active_dir, active_root, assemble, execution_notes, file_name, reviewed_root,
};
use crate::core::error::{Error, Result};
use crate::core::handoff::{Loaded, Status};
use crate::store::events::Kind as EventKind;
use crate::store::fsutil;
use crate::store::task::Task;

fn unique_suffix() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{ns}", std::process::id())
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fsutil::create_dir_all(dir)?;
    }
    fsutil::atomic_write(path, bytes)
}

/// Deploy `active_agents/{agent}/`, replacing any earlier bundle of that agent whole.
pub fn deploy(d: &Deploy<'_>) -> Result<Manifest> {
    let a = assemble(d);
    let root = active_root(d.task);
    fsutil::create_dir_all(&root)?;
    let tmp = root.join(format!(".{}.deploy-{}", d.agent, unique_suffix()));
    let built = (|| -> Result<()> {
        write(&tmp.join(format!("{}.agent.md", d.agent)), d.agent_md.as_bytes())?;
        write(&tmp.join("context/context-bundle.json"), &a.bundle.to_json())?;
        fsutil::create_dir_all(&tmp.join("instructions"))?;
        for (name, bytes) in &a.instructions {
            write(&tmp.join("instructions").join(name), bytes)?;
        }
        for (p, bytes) in &a.consumed {
            write(&tmp.join("context/consumed").join(file_name(p)), bytes)?;
        }
        let mut manifest = serde_json::to_vec_pretty(&a.manifest).expect("manifest serialises");
        manifest.push(b'\n');
        write(&tmp.join("manifest.json"), &manifest)
    })();
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let dest = active_dir(d.task, d.agent);
    let old = root.join(format!(".{}.old-{}", d.agent, unique_suffix()));
    let had_old = match std::fs::rename(&dest, &old) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(Error::io("set aside the old bundle", &dest, e));
        }
    };
    std::fs::rename(&tmp, &dest).map_err(|e| Error::io("deploy the bundle", &dest, e))?;
    fsutil::sync_dir(&root)?;
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    // Consumed only once the bundle that holds them is in place: at worst seen twice, never lost.
    for (p, _) in &a.consumed {
        if let Err(e) = std::fs::remove_file(p) {
            tracing::warn!(file = %p.display(), error = %e, "a consumed context item could not be removed");
        }
    }
    Ok(a.manifest)
}

/// The files of a deployed bundle, relative to the task folder (for copying it to a remote host).
pub fn files(task: &Task, agent: &str) -> Result<Vec<(String, Vec<u8>)>> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        let rd = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, base, out)?;
            } else {
                let bytes = std::fs::read(&p).map_err(|e| Error::io("read", &p, e))?;
                let rel = p.strip_prefix(base).unwrap_or(&p).display().to_string();
                out.push((rel, bytes));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let dir = active_dir(task, agent);
    if dir.is_dir() {
        walk(&dir, &task.dir(), &mut out)?;
    }
    Ok(out)
}

/// What a cleanup did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// The bundle was put away; its execution notes are here.
    Cleaned {
        /// `reviewed_queue/{agent}_{timestamp}/execution_notes.json`.
        notes: PathBuf,
    },
    /// There was no bundle (never deployed, or already cleaned).
    AlreadyClean,
    /// Something failed; logged and recorded, never raised.
    Failed(String),
}

/// Put `agent`'s bundle away: execution notes (from `last`, its final handoff, when
/// known) to `reviewed_queue/`, `active_agents/{agent}/` removed. Idempotent and safe
/// against a concurrent cleanup; a failure is logged and recorded in events.jsonl,
/// and never returned as an error, so it cannot block the handoff that caused it.
pub fn cleanup(task: &Task, agent: &str, last: Option<&Loaded>, now: DateTime<Utc>) -> Cleanup {
    let dir = active_dir(task, agent);
    let cleaning = active_root(task).join(format!(".{agent}.cleaning-{}", unique_suffix()));
    match std::fs::rename(&dir, &cleaning) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Cleanup::AlreadyClean,
        Err(e) => return failed(task, agent, format!("cannot take {}: {e}", dir.display()), now),
    }
    match put_away(task, agent, &cleaning, last, now) {
        Ok(notes) => {
            tracing::info!(task = %task.name, agent, notes = %notes.display(), "bundle cleaned up");
            Cleanup::Cleaned { notes }
        }
        Err(e) => failed(task, agent, e.to_string(), now),
    }
}

/// The `n`th candidate name of a cleanup's folder in the reviewed queue: the agent and
/// the time, so a reviewer lists them in order, with `-2`, `-3`… when one agent is
/// cleaned up twice in a second.
pub(super) fn review_dir_name(agent: &str, now: DateTime<Utc>, n: u32) -> String {
    let stamp = now.format("%Y%m%dT%H%M%SZ");
    if n <= 1 {
        format!("{agent}_{stamp}")
    } else {
        format!("{agent}_{stamp}-{n}")
    }
}

/// execution_notes.json: how an agent's turn ended, for whoever reviews the queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewNotes {
    /// The agent.
    pub agent: String,
    /// The task.
    pub task: String,
    /// Its final handoff (file name), when known: a pane can end without one.
    pub handoff: Option<String>,
    /// That handoff's status.
    pub status: Option<Status>,
    /// Its cycle result.
    pub cycle_result: Option<String>,
    /// Its one-line summary.
    pub summary: Option<String>,
    /// Its `## Next Action`.
    pub next_action: Option<String>,
    /// Whom it recommended next.
    pub recommended_next: Option<String>,
    /// How it went.
    pub notes: Option<ExecutionNotes>,
    /// When the bundle was put away.
    pub cleaned_at: DateTime<Utc>,
    /// The manifest as deployed, kept as found so one written by an older version survives.
    pub manifest: Option<Value>,
}

impl ReviewNotes {
    /// The notes of `agent`'s turn, from its final handoff when there is one.
    pub fn new(task: &Task, agent: &str, last: Option<&Loaded>, now: DateTime<Utc>, manifest: Option<Value>) -> Self {
        let h = last.map(|l| &l.handoff);
        ReviewNotes {
            agent: agent.to_string(),
            task: task.name.to_string(),
            handoff: last.map(|l| l.file.clone()),
            status: h.map(|h| h.status),
            cycle_result: h.and_then(|h| h.cycle_result.clone()),
            summary: h.map(|h| h.summary()),
            next_action: h.and_then(|h| h.sections.next_action.clone()),
            recommended_next: h.and_then(|h| h.recommended_next.clone()),
            notes: last.map(execution_notes),
            cleaned_at: now,
            manifest,
        }
    }

    /// The bytes of execution_notes.json, keys sorted as the bundle's are (see [`super::Bundle::to_json`]).
    pub fn to_json(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).expect("notes are plain data");
        let mut bytes = serde_json::to_vec_pretty(&value).expect("a value serialises");
        bytes.push(b'\n');
        bytes
    }
}

fn put_away(task: &Task, agent: &str, cleaning: &Path, last: Option<&Loaded>, now: DateTime<Utc>) -> Result<PathBuf> {
    let manifest: Option<Value> = std::fs::read(cleaning.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let root = reviewed_root(task);
    fsutil::create_dir_all(&root)?;
    let mut n = 1;
    let dest = loop {
        let dest = root.join(review_dir_name(agent, now, n));
        match std::fs::create_dir(&dest) {
            Ok(()) => break dest,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 999 => n += 1,
            Err(e) => return Err(Error::io("create", &dest, e)),
        }
    };
    let notes = ReviewNotes::new(task, agent, last, now, manifest);
    let path = dest.join("execution_notes.json");
    fsutil::atomic_write(&path, &notes.to_json())?;
    let consumed = cleaning.join("context/consumed");
    if consumed.is_dir() {
        std::fs::rename(&consumed, dest.join("consumed"))
            .map_err(|e| Error::io("keep consumed context", &consumed, e))?;
    }
    std::fs::remove_dir_all(cleaning).map_err(|e| Error::io("remove", cleaning, e))?;
    Ok(path)
}

fn failed(task: &Task, agent: &str, reason: String, now: DateTime<Utc>) -> Cleanup {
    tracing::warn!(task = %task.name, agent, %reason, "bundle cleanup failed");
    let _ = crate::store::events::append(
        task,
        EventKind::BundleCleanupFailed,
        Some(agent),
        json!({"reason": reason}),
        now,
    );
    Cleanup::Failed(reason)
}
