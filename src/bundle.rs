//! Context bundles (seed 000): what an agent should know, assembled and deployed
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::fsutil;
use crate::handoff::{self, Handoff, Loaded};
use crate::task::{Phase, Task};

/// The bundle's keys, in seed 000's order.
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

/// The agent definition that goes into the bundle: the project's own
/// (`.claude/agents/<agent>.md`), else [`crate::agents::definition`].
pub fn agent_definition(task: &Task, agent: &str, roster: &crate::protocol::roster::Roster) -> String {
    let own = task.project.join(".claude/agents").join(format!("{agent}.md"));
    if let Ok(Ok(c)) = fsutil::read_regular(&own, FILE_CAP) {
        return handoff::decode(&c.bytes, &mut Vec::new());
    }
    crate::agents::definition(agent, roster)
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
    /// Now.
    pub now: DateTime<Utc>,
}

/// A bundle assembled in memory: what a deployment would write (and what `--prepare` shows).
#[derive(Debug, Clone)]
pub struct Assembled {
    /// context-bundle.json.
    pub bundle: Value,
    /// manifest.json.
    pub manifest: Manifest,
    /// `instructions/<name>` contents.
    pub instructions: Vec<(String, Vec<u8>)>,
    /// Single-agent items to consume: (where they are now, file name).
    pub consumed: Vec<(PathBuf, Vec<u8>)>,
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

/// The `*.md` files of a folder, sorted, at most [`MAX_FILES`] (the rest noted).
fn md_files(dir: &Path, notes: &mut Vec<String>) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "md")
                && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
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

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Split `---` frontmatter (simple `key: value` lines) from the body.
pub fn frontmatter(text: &str) -> (BTreeMap<String, String>, &str) {
    let mut map = BTreeMap::new();
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return (map, text);
    };
    let Some(end) = rest.find("\n---") else {
        return (map, text);
    };
    for line in rest[..end].lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().trim_matches(['"', '\'']).trim();
            map.insert(k.trim().to_ascii_lowercase(), v.to_string());
        }
    }
    let body = rest[end + 4..].trim_start_matches(['\r', '\n']);
    (map, body)
}

/// A list of `{file, text}` from a folder of notes.
fn notes_source(dir: &Path, shown_prefix: &str, report: &mut SourceReport) -> Value {
    let mut items = Vec::new();
    for p in md_files(dir, &mut report.notes) {
        let shown = format!("{shown_prefix}{}", file_name(&p));
        if let Some(text) = read_text(&p, &shown, &mut report.notes) {
            report.files.push(shown.clone());
            items.push(json!({"file": shown, "text": text}));
        }
    }
    report.present = !items.is_empty();
    if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items)
    }
}

/// Execution notes of a handoff: its `## Execution Notes` section, else what it says went wrong and right.
pub fn execution_notes(l: &Loaded) -> Value {
    let h = &l.handoff;
    let explicit = h
        .sections
        .other
        .iter()
        .find(|(heading, _)| heading.trim().eq_ignore_ascii_case("execution notes"))
        .map(|(_, body)| body.clone());
    json!({
        "execution_notes": explicit,
        "blockers": h.sections.blockers,
        "completed_work": h.sections.completed_work,
        "skill_gaps": h.sections.skill_gaps,
        "warnings": h.warnings,
    })
}

/// A skill name that may be used in a path: no separators, no dot-start, no NUL.
fn safe_skill(name: &str) -> bool {
    !name.is_empty() && name.len() <= 100 && !name.starts_with('.') && !name.contains(['/', '\\', '\0']) && name != ".."
}

/// Assemble the bundle without writing anything.
pub fn assemble(d: &Deploy<'_>) -> Assembled {
    let task = d.task;
    let project = &task.project;
    let mut reports: BTreeMap<String, SourceReport> = SOURCES
        .iter()
        .map(|k| (k.to_string(), SourceReport::default()))
        .collect();
    let mut bundle = serde_json::Map::new();
    let r = |reports: &mut BTreeMap<String, SourceReport>, k: &str| -> SourceReport {
        reports.remove(k).unwrap_or_default()
    };

    // research
    let mut rep = r(&mut reports, "research");
    bundle.insert(
        "research".into(),
        notes_source(&task.dir().join("research_notes"), "research_notes/", &mut rep),
    );
    reports.insert("research".into(), rep);

    // architecture
    let mut rep = r(&mut reports, "architecture");
    let arch = task.dir().join("architecture.json");
    let v = if arch.exists() {
        match read_text(&arch, "architecture.json", &mut rep.notes) {
            Some(text) => {
                rep.present = true;
                rep.files.push("architecture.json".into());
                serde_json::from_str(&text).unwrap_or_else(|e| {
                    rep.notes
                        .push(format!("architecture.json is not valid JSON ({e}); included as text"));
                    json!({"unparsed": text, "error": e.to_string()})
                })
            }
            None => Value::Null,
        }
    } else {
        Value::Null
    };
    bundle.insert("architecture".into(), v);
    reports.insert("architecture".into(), rep);

    // handoff
    let mut rep = r(&mut reports, "handoff");
    rep.present = true;
    rep.files.push(format!("handoffs/{}", d.spawn_handoff));
    let previous = handoff::list(&task.handoffs()).ok().and_then(|(names, _)| {
        names
            .iter()
            .rev()
            .filter(|n| n.agent != "pm" && n.file_name() != d.spawn_handoff)
            .find_map(|n| handoff::load(&task.handoffs(), n).ok()?.ok())
    });
    let previous = previous.map(|l| {
        rep.files.push(format!("handoffs/{}", l.file));
        json!({
            "file": l.file,
            "agent": l.agent(),
            "status": l.handoff.status,
            "recommended_next": l.handoff.recommended_next,
            "execution_notes": execution_notes(&l),
        })
    });
    bundle.insert(
        "handoff".into(),
        json!({
            "file": d.spawn_handoff,
            "status": d.handoff.status,
            "target": d.handoff.target,
            "recommended_next": d.handoff.recommended_next,
            "sections": d.handoff.sections,
            "previous": previous,
        }),
    );
    reports.insert("handoff".into(), rep);

    // phase_context
    let mut rep = r(&mut reports, "phase_context");
    let mut items = Vec::new();
    let mut consumed = Vec::new();
    for p in md_files(&task.dir().join("phase_context"), &mut rep.notes) {
        let shown = format!("phase_context/{}", file_name(&p));
        let Some(text) = read_text(&p, &shown, &mut rep.notes) else {
            continue;
        };
        let (fm, body) = frontmatter(&text);
        let phase_ok = fm
            .get("phase")
            .is_none_or(|ph| ph.eq_ignore_ascii_case(d.phase.as_str()));
        let agent_ok = fm.get("agent").is_none_or(|a| a.eq_ignore_ascii_case(d.agent));
        if !(phase_ok && agent_ok) {
            continue;
        }
        let persistence = match fm.get("persistence").map(String::as_str) {
            Some("phase-persistent") => "phase-persistent",
            Some("single-agent") | None => "single-agent",
            Some(other) => {
                rep.notes.push(format!(
                    "{shown}: unknown persistence '{other}'; treated as single-agent"
                ));
                "single-agent"
            }
        };
        if persistence == "single-agent" {
            consumed.push((p.clone(), text.clone().into_bytes()));
        }
        rep.files.push(shown.clone());
        items.push(json!({"file": shown, "persistence": persistence, "phase": fm.get("phase"), "text": body}));
    }
    rep.present = !items.is_empty();
    bundle.insert(
        "phase_context".into(),
        if items.is_empty() {
            Value::Null
        } else {
            Value::Array(items)
        },
    );
    reports.insert("phase_context".into(), rep);

    // skills
    let mut rep = r(&mut reports, "skills");
    let mut skills = Vec::new();
    for item in d.handoff.sections.skills_to_load.iter().flatten() {
        let name = item
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_matches(['`', '*', ',', ';', ':']);
        if !safe_skill(name) {
            rep.notes
                .push(format!("skill name {name:?} refused (no paths); not looked up"));
            continue;
        }
        let candidates = [
            (
                project.join(".claude/skills").join(name).join("SKILL.md"),
                format!(".claude/skills/{name}/SKILL.md"),
            ),
            (
                project.join("context/skills").join(format!("{name}.md")),
                format!("context/skills/{name}.md"),
            ),
        ];
        match candidates.iter().find(|(p, _)| p.exists()) {
            Some((p, shown)) => {
                if let Some(text) = read_text(p, shown, &mut rep.notes) {
                    rep.files.push(shown.clone());
                    skills.push(json!({"name": name, "file": shown, "text": text}));
                }
            }
            None => rep.notes.push(format!(
                "skill '{name}' not found in .claude/skills/ or context/skills/"
            )),
        }
    }
    rep.present = !skills.is_empty();
    bundle.insert(
        "skills".into(),
        if skills.is_empty() {
            Value::Null
        } else {
            Value::Array(skills)
        },
    );
    reports.insert("skills".into(), rep);

    // instructions
    let mut rep = r(&mut reports, "instructions");
    let (files, folders) = crate::preamble::scope_lists(d.handoff.sections.scope.as_deref().unwrap_or(""));
    let scope_paths: Vec<String> = files.into_iter().chain(folders).collect();
    let mut copied = Vec::new();
    let mut listed = Vec::new();
    for p in md_files(&project.join("context/instructions"), &mut rep.notes) {
        let shown = format!("context/instructions/{}", file_name(&p));
        let Some(text) = read_text(&p, &shown, &mut rep.notes) else {
            continue;
        };
        let (fm, _) = frontmatter(&text);
        let Some(glob) = fm.get("applyto") else { continue };
        let matched = match globset::Glob::new(glob) {
            Ok(g) => {
                let m = g.compile_matcher();
                matches!(glob.as_str(), "**/*" | "**" | "*") || scope_paths.iter().any(|s| m.is_match(s))
            }
            Err(e) => {
                rep.notes
                    .push(format!("{shown}: applyTo {glob:?} is not a glob ({e}); skipped"));
                false
            }
        };
        if matched {
            rep.files.push(shown.clone());
            listed.push(json!({"file": format!("instructions/{}", file_name(&p)), "applyTo": glob}));
            copied.push((file_name(&p), text.into_bytes()));
        }
    }
    rep.present = !copied.is_empty();
    bundle.insert(
        "instructions".into(),
        if listed.is_empty() {
            Value::Null
        } else {
            Value::Array(listed)
        },
    );
    reports.insert("instructions".into(), rep);

    // workspace_context
    let mut rep = r(&mut reports, "workspace_context");
    let ws = project.join("context/workspace.md");
    let v = if ws.exists() {
        read_text(&ws, "context/workspace.md", &mut rep.notes).map_or(Value::Null, |t| {
            rep.present = true;
            rep.files.push("context/workspace.md".into());
            Value::String(t)
        })
    } else {
        Value::Null
    };
    bundle.insert("workspace_context".into(), v);
    reports.insert("workspace_context".into(), rep);

    // knowledge
    let mut rep = r(&mut reports, "knowledge");
    bundle.insert(
        "knowledge".into(),
        notes_source(&project.join("context/knowledge"), "context/knowledge/", &mut rep),
    );
    reports.insert("knowledge".into(), rep);

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
        bundle: Value::Object(bundle),
        manifest,
        instructions: copied,
        consumed,
    }
}

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
        let mut bundle = serde_json::to_vec_pretty(&a.bundle).expect("bundle serialises");
        bundle.push(b'\n');
        write(&tmp.join("context/context-bundle.json"), &bundle)?;
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

fn put_away(task: &Task, agent: &str, cleaning: &Path, last: Option<&Loaded>, now: DateTime<Utc>) -> Result<PathBuf> {
    let manifest: Option<Value> = std::fs::read(cleaning.join("manifest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let root = reviewed_root(task);
    fsutil::create_dir_all(&root)?;
    let stamp = now.format("%Y%m%dT%H%M%SZ");
    let mut dest = root.join(format!("{agent}_{stamp}"));
    let mut n = 2;
    loop {
        match std::fs::create_dir(&dest) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => {
                dest = root.join(format!("{agent}_{stamp}-{n}"));
                n += 1;
            }
            Err(e) => return Err(Error::io("create", &dest, e)),
        }
    }
    let h = last.map(|l| &l.handoff);
    let notes = json!({
        "agent": agent,
        "task": task.name.as_str(),
        "handoff": last.map(|l| l.file.clone()),
        "status": h.map(|h| h.status),
        "cycle_result": h.and_then(|h| h.cycle_result.clone()),
        "summary": h.map(|h| h.summary()),
        "next_action": h.and_then(|h| h.sections.next_action.clone()),
        "recommended_next": h.and_then(|h| h.recommended_next.clone()),
        "notes": last.map(execution_notes),
        "cleaned_at": now,
        "manifest": manifest,
    });
    let mut bytes = serde_json::to_vec_pretty(&notes).expect("notes serialise");
    bytes.push(b'\n');
    let path = dest.join("execution_notes.json");
    fsutil::atomic_write(&path, &bytes)?;
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
    let _ = crate::events::append(
        task,
        "bundle_cleanup_failed",
        Some(agent),
        json!({"reason": reason}),
        now,
    );
    Cleanup::Failed(reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TaskName;

    fn setup() -> (tempfile::TempDir, Task) {
        let d = tempfile::tempdir().unwrap();
        let name: TaskName = "t1".parse().unwrap();
        let t = Task::new(d.path(), name).unwrap();
        crate::task::create_or_repair(&t, Utc::now()).unwrap();
        (d, t)
    }

    fn put(p: &Path, text: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const SPAWN: &str = "# Handoff: pm\n**Status:** IN_PROGRESS\n**Target:** dev\n\n## Instructions\nDo it.\n\n## Skills to Load\n- embedded-testing\n- ../etc\n- a/b\n- missing-one\n\n## Scope\nMay modify:\n- src/pool/writer.rs\n";

    fn deploy_with<'a>(t: &'a Task, agent: &'a str, phase: Phase, h: &'a Handoff) -> Deploy<'a> {
        Deploy {
            task: t,
            agent,
            role: "spoke",
            phase,
            spawn_handoff: "pm-20251127-103500.md",
            handoff: h,
            agent_md: "---\nname: dev\n---\nYou are dev.\n",
            now: "2025-11-27T10:35:00Z".parse().unwrap(),
        }
    }

    fn bundle_of(t: &Task, agent: &str) -> Value {
        serde_json::from_slice(&std::fs::read(active_dir(t, agent).join("context/context-bundle.json")).unwrap())
            .unwrap()
    }

    #[test]
    fn every_source_present() {
        let (_d, t) = setup();
        let p = t.project.clone();
        put(&t.dir().join("research_notes/a.md"), b"found 3 modules");
        put(&t.dir().join("architecture.json"), br#"{"decision": "pool"}"#);
        put(
            &t.handoffs().join("explore-20251127-093000.md"),
            b"# Handoff: explore\n**Status:** BLOCKED\n\n## Blockers\nno board\n\n## Execution Notes\ntried twice\n",
        );
        put(
            &t.dir().join("phase_context/keep.md"),
            b"---\npersistence: phase-persistent\nphase: DEVELOPING\n---\nalways\n",
        );
        put(&p.join(".claude/skills/embedded-testing/SKILL.md"), b"skill text");
        put(
            &p.join("context/instructions/pool.md"),
            b"---\napplyTo: \"src/pool/**\"\n---\npool rules\n",
        );
        put(
            &p.join("context/instructions/all.md"),
            b"---\napplyTo: \"**/*\"\n---\nall rules\n",
        );
        put(
            &p.join("context/instructions/docs.md"),
            b"---\napplyTo: \"docs/**\"\n---\nnot for us\n",
        );
        put(&p.join("context/instructions/plain.md"), b"no frontmatter\n");
        put(&p.join("context/workspace.md"), b"the workspace");
        put(&p.join("context/knowledge/k.md"), b"knowledge");
        let h = handoff::parse(SPAWN);
        let m = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        for k in SOURCES {
            assert!(m.sources[k].present, "{k} should be present: {m:?}");
        }
        let b = bundle_of(&t, "dev");
        assert_eq!(b["research"][0]["text"], "found 3 modules");
        assert_eq!(b["architecture"]["decision"], "pool");
        assert_eq!(b["handoff"]["file"], "pm-20251127-103500.md");
        assert_eq!(b["handoff"]["previous"]["agent"], "explore");
        assert_eq!(
            b["handoff"]["previous"]["execution_notes"]["execution_notes"],
            "tried twice"
        );
        assert_eq!(b["phase_context"][0]["persistence"], "phase-persistent");
        assert_eq!(b["skills"][0]["name"], "embedded-testing");
        assert_eq!(b["workspace_context"], "the workspace");
        assert_eq!(b["knowledge"][0]["text"], "knowledge");
        let mut inst: Vec<String> = std::fs::read_dir(active_dir(&t, "dev").join("instructions"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        inst.sort();
        assert_eq!(inst, vec!["all.md", "pool.md"], "exactly the matched instructions");
        assert_eq!(m.instructions, vec!["all.md", "pool.md"]);
        let notes = &m.sources["skills"].notes;
        assert!(notes.iter().any(|n| n.contains("\"../etc\" refused")), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("\"a/b\" refused")), "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("'missing-one' not found")), "{notes:?}");
        assert!(active_dir(&t, "dev").join("dev.agent.md").is_file());
        let on_disk: Manifest =
            serde_json::from_slice(&std::fs::read(active_dir(&t, "dev").join("manifest.json")).unwrap()).unwrap();
        assert_eq!(on_disk, m);
    }

    #[test]
    fn every_source_absent_is_null_and_deploys() {
        let (_d, t) = setup();
        let h = handoff::parse("# Handoff: pm\n**Status:** IN_PROGRESS\n");
        let m = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        let b = bundle_of(&t, "dev");
        for k in SOURCES {
            if k == "handoff" {
                assert!(m.sources[k].present);
                assert!(b[k]["previous"].is_null());
            } else {
                assert!(!m.sources[k].present, "{k}");
                assert!(b[k].is_null(), "{k}: {}", b[k]);
            }
        }
        assert!(m.instructions.is_empty());
    }

    #[test]
    fn phase_persistent_stays_single_agent_is_consumed_once() {
        let (_d, t) = setup();
        put(
            &t.dir().join("phase_context/keep.md"),
            b"---\npersistence: phase-persistent\nphase: DEVELOPING\n---\nkeep\n",
        );
        put(
            &t.dir().join("phase_context/once.md"),
            b"---\npersistence: single-agent\n---\nonce\n",
        );
        put(
            &t.dir().join("phase_context/test-only.md"),
            b"---\nphase: TESTING\n---\nlater\n",
        );
        let h = handoff::parse(SPAWN);
        let m1 = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        assert_eq!(
            m1.sources["phase_context"].files,
            vec!["phase_context/keep.md", "phase_context/once.md"]
        );
        assert_eq!(m1.consumed, vec!["once.md"]);
        assert!(!t.dir().join("phase_context/once.md").exists(), "consumed");
        let m2 = deploy(&deploy_with(&t, "architect", Phase::Developing, &h)).unwrap();
        assert_eq!(m2.sources["phase_context"].files, vec!["phase_context/keep.md"]);
        let m3 = deploy(&deploy_with(&t, "test", Phase::Testing, &h)).unwrap();
        assert_eq!(m3.sources["phase_context"].files, vec!["phase_context/test-only.md"]);
        // The consumed item goes to the reviewed queue with the execution notes.
        let Cleanup::Cleaned { notes } = cleanup(&t, "dev", None, "2025-11-27T11:00:00Z".parse().unwrap()) else {
            panic!("not cleaned")
        };
        assert!(notes.parent().unwrap().join("consumed/once.md").is_file());
    }

    #[test]
    fn redeploy_overwrites_and_cleanup_runs_once() {
        let (_d, t) = setup();
        put(
            &t.project.join("context/instructions/all.md"),
            b"---\napplyTo: \"**\"\n---\nx\n",
        );
        let h = handoff::parse(SPAWN);
        deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        assert!(active_dir(&t, "dev").join("instructions/all.md").exists());
        std::fs::remove_file(t.project.join("context/instructions/all.md")).unwrap();
        deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        assert!(
            !active_dir(&t, "dev").join("instructions/all.md").exists(),
            "the old bundle is gone"
        );
        let leftovers: Vec<_> = std::fs::read_dir(active_root(&t)).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp or old folders left");
        put(
            &t.handoffs().join("dev-20251127-113000.md"),
            b"# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\ndone\n",
        );
        let (names, _) = handoff::list(&t.handoffs()).unwrap();
        let last = handoff::load(&t.handoffs(), names.last().unwrap()).unwrap().unwrap();
        let now: DateTime<Utc> = "2025-11-27T11:30:00Z".parse().unwrap();
        let Cleanup::Cleaned { notes } = cleanup(&t, "dev", Some(&last), now) else {
            panic!()
        };
        assert!(
            notes.ends_with("reviewed_queue/dev_20251127T113000Z/execution_notes.json"),
            "{}",
            notes.display()
        );
        let v: Value = serde_json::from_slice(&std::fs::read(&notes).unwrap()).unwrap();
        assert_eq!(v["status"], "COMPLETE");
        assert_eq!(v["manifest"]["agent"], "dev");
        assert_eq!(
            cleanup(&t, "dev", Some(&last), now),
            Cleanup::AlreadyClean,
            "handoff and completion both fire"
        );
        assert_eq!(std::fs::read_dir(reviewed_root(&t)).unwrap().count(), 1, "one entry");
        assert!(!active_dir(&t, "dev").exists());
    }

    #[test]
    fn a_failing_cleanup_is_recorded_and_never_raised() {
        let (_d, t) = setup();
        let h = handoff::parse(SPAWN);
        deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        put(&reviewed_root(&t), b"a file where the folder should be");
        let r = cleanup(&t, "dev", None, Utc::now());
        assert!(matches!(r, Cleanup::Failed(_)), "{r:?}");
        let log = std::fs::read_to_string(crate::events::path(&t)).unwrap();
        assert!(log.contains("bundle_cleanup_failed"), "{log}");
    }

    #[test]
    fn odd_files_are_included_with_notes_or_skipped() {
        let (_d, t) = setup();
        put(&t.dir().join("research_notes/latin1.md"), b"caf\xe9");
        put(
            &t.dir().join("research_notes/big.md"),
            &vec![b'x'; (FILE_CAP + 10) as usize],
        );
        std::os::unix::fs::symlink("/etc/passwd", t.dir().join("research_notes/link.md")).unwrap();
        put(&t.dir().join("architecture.json"), b"{not json");
        let h = handoff::parse(SPAWN);
        let m = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        let notes = m.sources["research"].notes.join("\n");
        assert!(notes.contains("latin1.md: not valid UTF-8"), "{notes}");
        assert!(notes.contains("big.md: larger than 64 KiB"), "{notes}");
        assert!(notes.contains("link.md: skipped, it is a symbolic link"), "{notes}");
        assert_eq!(m.sources["research"].files.len(), 2);
        let b = bundle_of(&t, "dev");
        assert!(!b.to_string().contains("root:"), "nothing read through the symlink");
        assert_eq!(b["architecture"]["unparsed"], "{not json");
    }

    #[test]
    fn frontmatter_is_split() {
        let (fm, body) = frontmatter("---\napplyTo: \"**/*.rs\"\nphase: DEVELOPING\n---\nbody\n");
        assert_eq!(fm["applyto"], "**/*.rs");
        assert_eq!(fm["phase"], "DEVELOPING");
        assert_eq!(body, "body\n");
        assert!(frontmatter("no fm").0.is_empty());
    }
}
