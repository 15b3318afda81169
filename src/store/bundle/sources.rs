//! One function per bundle source: where it looks, what it gives the agent, and what it
//! notes instead of failing. A source that finds nothing returns `None`; no source can
//! stop a spawn, because a thin bundle is better than an agent that never starts.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::select::{self, Persistence};
use super::{Deploy, FILE_CAP, MAX_FILES, SourceReport, file_name};
use crate::core::handoff::{self, Handoff, Loaded, Sections, Status};
use crate::core::model::Phase;
use crate::store::fsutil;
use crate::store::handoffs;
use crate::store::task::Task;

/// A notes file as agents get it (`research`, `knowledge`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// Relative to the task or project folder, as in the manifest.
    pub file: String,
    /// Its text.
    pub text: String,
}

/// architecture.json as found: its JSON, or its text with the parse error, so a
/// hand-edited file with a trailing comma still reaches the agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Architecture {
    /// Valid JSON, as written.
    Parsed(Value),
    /// Not JSON.
    Unparsed {
        /// The text.
        unparsed: String,
        /// Why it did not parse.
        error: String,
    },
}

/// What an agent learns from a handoff about how the work went (the bundle's previous
/// report, and the reviewed queue's notes at cleanup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionNotes {
    /// The `## Execution Notes` section, when the agent wrote one.
    pub execution_notes: Option<String>,
    /// `## Blockers`.
    pub blockers: Option<String>,
    /// `## Completed Work`.
    pub completed_work: Option<String>,
    /// `## Skill Gaps`.
    pub skill_gaps: Option<String>,
    /// What the parser had to guess.
    pub warnings: Vec<String>,
}

/// The newest report by another agent, so the spawned agent starts from what was learnt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Previous {
    /// Its file name in handoffs/.
    pub file: String,
    /// Who wrote it.
    pub agent: String,
    /// Its status.
    pub status: Status,
    /// Whom it recommended next.
    pub recommended_next: Option<String>,
    /// How it went.
    pub execution_notes: ExecutionNotes,
}

/// The `handoff` source: the PM's instructions of this spawn, and the previous report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpawnHandoff {
    /// Its file name in handoffs/.
    pub file: String,
    /// Its status.
    pub status: Status,
    /// Its target.
    pub target: Option<String>,
    /// Its recommended next agent.
    pub recommended_next: Option<String>,
    /// Its sections, parsed.
    pub sections: Sections,
    /// See [`Previous`].
    pub previous: Option<Previous>,
}

/// A phase-context item that applies to this deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseItem {
    /// `phase_context/<name>`.
    pub file: String,
    /// Whether it stays for the phase or is consumed now.
    pub persistence: Persistence,
    /// Its `phase:`, when it names one.
    pub phase: Option<String>,
    /// Its body, without the frontmatter.
    pub text: String,
}

/// A skill the handoff asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// As asked.
    pub name: String,
    /// Where it was found, relative to the project.
    pub file: String,
    /// Its text.
    pub text: String,
}

/// An instruction file copied into the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstructionRef {
    /// `instructions/<name>`, inside the bundle.
    pub file: String,
    /// The glob that matched.
    #[serde(rename = "applyTo")]
    pub apply_to: String,
}

/// The agent definition that goes into the bundle: the project's own
/// (`.claude/agents/<agent>.md`), else [`crate::core::agent_file::definition`].
pub fn agent_definition(task: &Task, agent: &str, roster: &crate::core::protocol::roster::Roster) -> String {
    let own = task.project.join(".claude/agents").join(format!("{agent}.md"));
    if let Ok(Ok(c)) = fsutil::read_regular(&own, FILE_CAP) {
        return handoff::decode(&c.bytes, &mut Vec::new());
    }
    crate::core::agent_file::definition(agent, roster)
}

/// Execution notes of a handoff: its `## Execution Notes` section, else what it says went wrong and right.
pub fn execution_notes(l: &Loaded) -> ExecutionNotes {
    let h = &l.handoff;
    let explicit = h
        .sections
        .other
        .iter()
        .find(|(heading, _)| heading.trim().eq_ignore_ascii_case("execution notes"))
        .map(|(_, body)| body.clone());
    ExecutionNotes {
        execution_notes: explicit,
        blockers: h.sections.blockers.clone(),
        completed_work: h.sections.completed_work.clone(),
        skill_gaps: h.sections.skill_gaps.clone(),
        warnings: h.warnings.clone(),
    }
}

/// `research_notes/*.md` of the task.
pub(super) fn research(task: &Task, rep: &mut SourceReport) -> Option<Vec<Note>> {
    notes_folder(&task.dir().join("research_notes"), "research_notes/", rep)
}

/// `architecture.json` of the task.
pub(super) fn architecture(task: &Task, rep: &mut SourceReport) -> Option<Architecture> {
    let arch = task.dir().join("architecture.json");
    if !arch.exists() {
        return None;
    }
    let text = read_text(&arch, "architecture.json", &mut rep.notes)?;
    rep.files.push("architecture.json".into());
    Some(match serde_json::from_str(&text) {
        Ok(v) => Architecture::Parsed(v),
        Err(e) => {
            rep.notes
                .push(format!("architecture.json is not valid JSON ({e}); included as text"));
            Architecture::Unparsed {
                unparsed: text,
                error: e.to_string(),
            }
        }
    })
}

/// The spawn's own handoff, and the newest report before it that still loads.
pub(super) fn handoff(d: &Deploy<'_>, rep: &mut SourceReport) -> SpawnHandoff {
    let dir = d.task.handoffs();
    rep.files.push(format!("handoffs/{}", d.spawn_handoff));
    let previous = handoffs::list(&dir).ok().and_then(|(names, _)| {
        select::previous_candidates(&names, d.spawn_handoff).find_map(|n| handoffs::load(&dir, n).ok()?.ok())
    });
    let previous = previous.map(|l| {
        rep.files.push(format!("handoffs/{}", l.file));
        Previous {
            agent: l.agent().to_string(),
            status: l.handoff.status,
            recommended_next: l.handoff.recommended_next.clone(),
            execution_notes: execution_notes(&l),
            file: l.file,
        }
    });
    let h: &Handoff = d.handoff;
    SpawnHandoff {
        file: d.spawn_handoff.to_string(),
        status: h.status,
        target: h.target.clone(),
        recommended_next: h.recommended_next.clone(),
        sections: h.sections.clone(),
        previous,
    }
}

/// `phase_context/*.md` of the task that apply to this deployment; single-agent items
/// are added to `consumed` (the deployment removes them once it is in place).
pub(super) fn phase_context(
    task: &Task,
    phase: Phase,
    agent: &str,
    rep: &mut SourceReport,
    consumed: &mut Vec<(PathBuf, Vec<u8>)>,
) -> Option<Vec<PhaseItem>> {
    let mut items = Vec::new();
    for p in md_files(&task.dir().join("phase_context"), &mut rep.notes) {
        let shown = format!("phase_context/{}", file_name(&p));
        let Some(text) = read_text(&p, &shown, &mut rep.notes) else {
            continue;
        };
        let (fm, body) = select::frontmatter(&text);
        if !select::phase_context_applies(&fm, phase, agent) {
            continue;
        }
        let written = fm.get("persistence").map(String::as_str);
        let persistence = Persistence::parse(written).unwrap_or_else(|fallback| {
            rep.notes.push(format!(
                "{shown}: unknown persistence '{}'; treated as single-agent",
                written.unwrap_or_default()
            ));
            fallback
        });
        let item = PhaseItem {
            file: shown.clone(),
            persistence,
            phase: fm.get("phase").cloned(),
            text: body.to_string(),
        };
        if persistence.is_consumed() {
            consumed.push((p.clone(), text.clone().into_bytes()));
        }
        rep.files.push(shown);
        items.push(item);
    }
    non_empty(items)
}

/// Each skill named under the handoff's `## Skills to Load`, from the first place it is found.
pub(super) fn skills(project: &Path, h: &Handoff, rep: &mut SourceReport) -> Option<Vec<Skill>> {
    let mut skills = Vec::new();
    for item in h.sections.skills_to_load.iter().flatten() {
        let name = select::skill_name(item);
        if !select::safe_skill(name) {
            rep.notes
                .push(format!("skill name {name:?} refused (no paths); not looked up"));
            continue;
        }
        match select::skill_candidates(name)
            .into_iter()
            .find(|rel| project.join(rel).exists())
        {
            Some(shown) => {
                if let Some(text) = read_text(&project.join(&shown), &shown, &mut rep.notes) {
                    rep.files.push(shown.clone());
                    skills.push(Skill {
                        name: name.to_string(),
                        file: shown,
                        text,
                    });
                }
            }
            None => rep.notes.push(format!(
                "skill '{name}' not found in .claude/skills/ or context/skills/"
            )),
        }
    }
    non_empty(skills)
}

/// `context/instructions/*.md` of the project whose `applyTo:` matches the handoff's
/// scope; their bytes are added to `copied` as (file name, bytes) for `instructions/`.
pub(super) fn instructions(
    project: &Path,
    h: &Handoff,
    rep: &mut SourceReport,
    copied: &mut Vec<(String, Vec<u8>)>,
) -> Option<Vec<InstructionRef>> {
    let scope = select::scope_paths(h.sections.scope.as_deref());
    let mut listed = Vec::new();
    for p in md_files(&project.join("context/instructions"), &mut rep.notes) {
        let shown = format!("context/instructions/{}", file_name(&p));
        let Some(text) = read_text(&p, &shown, &mut rep.notes) else {
            continue;
        };
        let (fm, _) = select::frontmatter(&text);
        let Some(glob) = fm.get("applyto") else { continue };
        let matched = select::instruction_applies(glob, &scope).unwrap_or_else(|e| {
            rep.notes
                .push(format!("{shown}: applyTo {glob:?} is not a glob ({e}); skipped"));
            false
        });
        if matched {
            rep.files.push(shown);
            listed.push(InstructionRef {
                file: format!("instructions/{}", file_name(&p)),
                apply_to: glob.clone(),
            });
            copied.push((file_name(&p), text.into_bytes()));
        }
    }
    non_empty(listed)
}

/// `context/workspace.md` of the project.
pub(super) fn workspace_context(project: &Path, rep: &mut SourceReport) -> Option<String> {
    let ws = project.join("context/workspace.md");
    if !ws.exists() {
        return None;
    }
    let text = read_text(&ws, "context/workspace.md", &mut rep.notes)?;
    rep.files.push("context/workspace.md".into());
    Some(text)
}

/// `context/knowledge/*.md` of the project.
pub(super) fn knowledge(project: &Path, rep: &mut SourceReport) -> Option<Vec<Note>> {
    notes_folder(&project.join("context/knowledge"), "context/knowledge/", rep)
}

/// Every readable `*.md` of a folder as a [`Note`].
fn notes_folder(dir: &Path, shown_prefix: &str, rep: &mut SourceReport) -> Option<Vec<Note>> {
    let mut items = Vec::new();
    for p in md_files(dir, &mut rep.notes) {
        let shown = format!("{shown_prefix}{}", file_name(&p));
        if let Some(text) = read_text(&p, &shown, &mut rep.notes) {
            rep.files.push(shown.clone());
            items.push(Note { file: shown, text });
        }
    }
    non_empty(items)
}

/// A source that found nothing is absent, not an empty list.
fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// Read one source file under the bundle rules; `None` (with a note) when it cannot be used.
fn read_text(path: &Path, shown: &str, notes: &mut Vec<String>) -> Option<String> {
    match fsutil::read_regular(path, FILE_CAP) {
        Ok(Ok(c)) => {
            if c.truncated {
                notes.push(format!(
                    "{shown}: larger than {} KiB; only its head is included",
                    FILE_CAP / 1024
                ));
            }
            let mut warnings = Vec::new();
            let text = handoff::decode(&c.bytes, &mut warnings);
            if !warnings.is_empty() || std::str::from_utf8(&c.bytes).is_err() {
                notes.push(format!("{shown}: not valid UTF-8; decoded with replacement characters"));
            }
            Some(text)
        }
        Ok(Err(skip)) => {
            notes.push(format!("{shown}: skipped, {}", skip.reason()));
            None
        }
        Err(e) => {
            notes.push(format!("{shown}: cannot be read ({e})"));
            None
        }
    }
}

/// The source files of a folder, sorted, at most [`MAX_FILES`] (the rest noted).
fn md_files(dir: &Path, notes: &mut Vec<String>) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| select::is_source_md(p))
        .collect();
    files.sort();
    if files.len() > MAX_FILES {
        notes.push(format!(
            "{}: {} files; only the first {MAX_FILES} by name are included",
            dir.display(),
            files.len()
        ));
        files.truncate(MAX_FILES);
    }
    files
}
