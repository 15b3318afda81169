//! Context bundles (docs/protocol.md#context-bundles): what an agent should know, assembled and deployed
//! on spawn, and put away for review when its turn ends.
//!
//! On every spawn the supervisor writes, under the task folder:
//!
//! ```text
//! active_agents/{agent}/
//!   {agent}.agent.md            the agent definition
//!   manifest.json               what was deployed, from which sources, with notes
//!   context/context-bundle.json the bundle: one key per source, null when absent
//!   context/consumed/           single-agent context items taken by this deployment
//!   instructions/*.md           instruction files whose applyTo matched
//! reviewed_queue/{agent}_{YYYYMMDDTHHMMSSZ}/execution_notes.json   at cleanup
//! ```
//!
//! The bundle is assembled from up to 8 sources; a missing source is `null` and
//! never an error:
//!
//! | key | source |
//! |---|---|
//! | `research` | `<task>/research_notes/*.md` |
//! | `architecture` | `<task>/architecture.json` (kept as text with an error when not JSON) |
//! | `handoff` | the PM handoff of the spawn, and `previous`: the newest handoff by another agent than the PM, with its execution notes |
//! | `phase_context` | `<task>/phase_context/*.md` whose frontmatter `phase:` / `agent:` match (absent = any); `persistence: phase-persistent` items stay for every deployment of the phase, `single-agent` items (the default) are consumed by one deployment |
//! | `skills` | each name under the handoff's `## Skills to Load`: `<project>/.claude/skills/<name>/SKILL.md`, else `<project>/context/skills/<name>.md` |
//! | `instructions` | `<project>/context/instructions/*.md` whose frontmatter `applyTo:` glob matches a path in the handoff's `## Scope` (or is `**/*`, `**`, `*`); copied to `instructions/` |
//! | `workspace_context` | `<project>/context/workspace.md` |
//! | `knowledge` | `<project>/context/knowledge/*.md` |
//!
//! Files are read only when they are regular files (no symlinks), at most 64 KiB each
//! and 50 per source, non-UTF-8 decoded lossily; each such case is a manifest note.
//! Redeploying an agent replaces its bundle whole (one active agent per type), and
//! a crash never leaves a half-written bundle under the agent's name. Cleanup runs
//! on the agent's terminal handoff or when its pane ends, whichever comes first;
//! it is idempotent and never fails the caller.
//!
//! The code follows that table: `sources.rs` has one function per row (what it reads,
//! its fallback, its notes), `select.rs` the rules that decide what goes in (pure and
//! unit-tested), `disk.rs` the deployment, the copy for remote hosts and the cleanup;
//! this file types the bundle and puts the sources together.

mod disk;
mod select;
mod sources;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::handoff::Handoff;
use crate::core::model::Phase;
use crate::store::task::Task;

pub use disk::{cleanup, deploy, files};
pub use sources::{
    Architecture, ExecutionNotes, InstructionRef, Note, PhaseItem, Skill, SpawnHandoff, agent_definition,
    execution_notes,
};

/// The bundle's keys, in the order of docs/protocol.md#sources.
#[cfg(test)]
pub const SOURCES: [&str; 8] = [
    "research",
    "architecture",
    "handoff",
    "phase_context",
    "skills",
    "instructions",
    "workspace_context",
    "knowledge",
];
/// Largest file read into a bundle.
pub const FILE_CAP: u64 = 64 * 1024;
/// Most files taken from one source.
pub const MAX_FILES: usize = 50;
/// manifest.json's schema.
pub const MANIFEST_VERSION: u32 = 1;

/// `active_agents/` of a task.
pub fn active_root(task: &Task) -> PathBuf {
    task.dir().join("active_agents")
}

/// Where `agent`'s bundle lives while it works.
pub fn active_dir(task: &Task, agent: &str) -> PathBuf {
    active_root(task).join(agent)
}

/// `reviewed_queue/` of a task.
pub fn reviewed_root(task: &Task) -> PathBuf {
    task.dir().join("reviewed_queue")
}

/// One source as the manifest reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReport {
    /// Something was found.
    pub present: bool,
    /// The files used (relative to the task or project folder).
    pub files: Vec<String>,
    /// What was skipped, cut or doubtful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// manifest.json: what was deployed and from where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// The agent.
    pub agent: String,
    /// The task.
    pub task: String,
    /// hub or spoke.
    pub role: String,
    /// The phase it was deployed in.
    pub phase: Phase,
    /// When.
    pub deployed_at: DateTime<Utc>,
    /// The PM handoff it was spawned with (file name).
    pub spawn_handoff: String,
    /// Per source key.
    pub sources: BTreeMap<String, SourceReport>,
    /// Instruction files copied to `instructions/`.
    pub instructions: Vec<String>,
    /// Single-agent context items this deployment consumed.
    pub consumed: Vec<String>,
}

/// What a deployment needs.
#[derive(Debug, Clone)]
pub struct Deploy<'a> {
    /// The task.
    pub task: &'a Task,
    /// The agent.
    pub agent: &'a str,
    /// hub or spoke.
    pub role: &'a str,
    /// The phase the spawn puts the task in.
    pub phase: Phase,
    /// File name of the PM handoff in handoffs/.
    pub spawn_handoff: &'a str,
    /// Its parse.
    pub handoff: &'a Handoff,
    /// The agent definition text.
    pub agent_md: &'a str,
    /// Its worktree, when it has one.
    pub worktree: Option<&'a crate::core::worktree::WorktreeNote>,
    /// Now.
    pub now: DateTime<Utc>,
}

/// context-bundle.json: one key per source, `None` (null) when the source found
/// nothing, so an agent can tell "no research" from "research not looked for".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bundle {
    /// `research_notes/*.md`.
    pub research: Option<Vec<Note>>,
    /// `architecture.json`.
    pub architecture: Option<Architecture>,
    /// The spawn's handoff and the previous report: always there, a spawn has one.
    pub handoff: SpawnHandoff,
    /// The matching `phase_context/*.md`.
    pub phase_context: Option<Vec<PhaseItem>>,
    /// The skills the handoff asked for.
    pub skills: Option<Vec<Skill>>,
    /// The instruction files copied to `instructions/`.
    pub instructions: Option<Vec<InstructionRef>>,
    /// `context/workspace.md`.
    pub workspace_context: Option<String>,
    /// `context/knowledge/*.md`.
    pub knowledge: Option<Vec<Note>>,
    /// The agent's git worktree, when it works in one (docs/worktrees.md). Not a source:
    /// absent, not null, for an agent without one, so such bundles keep their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::core::worktree::WorktreeNote>,
}

impl Bundle {
    /// The bytes of context-bundle.json. They go through `serde_json::Value`, whose
    /// maps sort their keys: the file has always been written that way, and agents and
    /// reviewers diff bundles, so the field order above must not leak into it.
    pub fn to_json(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).expect("a bundle is plain data");
        let mut bytes = serde_json::to_vec_pretty(&value).expect("a value serialises");
        bytes.push(b'\n');
        bytes
    }
}

/// A bundle assembled in memory: what a deployment would write (and what `--prepare` shows).
#[derive(Debug, Clone)]
pub struct Assembled {
    /// context-bundle.json.
    pub bundle: Bundle,
    /// manifest.json.
    pub manifest: Manifest,
    /// `instructions/<name>` contents.
    pub instructions: Vec<(String, Vec<u8>)>,
    /// Single-agent items to consume: (where they are now, their bytes).
    pub consumed: Vec<(PathBuf, Vec<u8>)>,
}

/// Run one source under its manifest key: its report says present exactly when it
/// gave the bundle something.
fn source<T>(
    reports: &mut BTreeMap<String, SourceReport>,
    key: &str,
    read: impl FnOnce(&mut SourceReport) -> Option<T>,
) -> Option<T> {
    let mut report = SourceReport::default();
    let found = read(&mut report);
    report.present = found.is_some();
    reports.insert(key.to_string(), report);
    found
}

/// Assemble the bundle without writing anything, so `task spawn --prepare` can show
/// exactly what a deployment would write.
pub fn assemble(d: &Deploy<'_>) -> Assembled {
    let task = d.task;
    let project = &task.project;
    let mut reports = BTreeMap::new();
    let mut consumed = Vec::new();
    let mut copied = Vec::new();
    let bundle = Bundle {
        research: source(&mut reports, "research", |r| sources::research(task, r)),
        architecture: source(&mut reports, "architecture", |r| sources::architecture(task, r)),
        handoff: source(&mut reports, "handoff", |r| Some(sources::handoff(d, r)))
            .expect("the spawn's handoff is always there"),
        phase_context: source(&mut reports, "phase_context", |r| {
            sources::phase_context(task, d.phase, d.agent, r, &mut consumed)
        }),
        skills: source(&mut reports, "skills", |r| sources::skills(project, d.handoff, r)),
        instructions: source(&mut reports, "instructions", |r| {
            sources::instructions(project, d.handoff, r, &mut copied)
        }),
        workspace_context: source(&mut reports, "workspace_context", |r| {
            sources::workspace_context(project, r)
        }),
        knowledge: source(&mut reports, "knowledge", |r| sources::knowledge(project, r)),
        worktree: d.worktree.cloned(),
    };
    let manifest = Manifest {
        version: MANIFEST_VERSION,
        agent: d.agent.to_string(),
        task: task.name.to_string(),
        role: d.role.to_string(),
        phase: d.phase,
        deployed_at: d.now,
        spawn_handoff: d.spawn_handoff.to_string(),
        sources: reports,
        instructions: copied.iter().map(|(n, _)| n.clone()).collect(),
        consumed: consumed.iter().map(|(p, _)| file_name(p)).collect(),
    };
    Assembled {
        bundle,
        manifest,
        instructions: copied,
        consumed,
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
