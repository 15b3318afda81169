//! Default agent definitions (docs/protocol.md#spawn-preamble) and `task setup-agents`.
//!
//! One source per agent, `templates/agents/<name>.md` (Claude Code's format:
//! YAML frontmatter then the system prompt); the Kiro JSON is derived from it
//! so the two runtimes never drift apart.

use std::path::Path;

use serde::Serialize;

use crate::core::agent_file::definition;
use crate::core::error::{Error, Result};
use crate::store::fsutil;

/// An agent definition split into frontmatter fields and prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// `name:`.
    pub name: String,
    /// `description:`.
    pub description: String,
    /// `tools:`, split on commas.
    pub tools: Vec<String>,
    /// `model:`.
    pub model: Option<String>,
    /// The system prompt after the frontmatter.
    pub prompt: String,
}

/// Parse a Claude Code agent file (`---` frontmatter of `key: value` lines, then the prompt).
pub fn parse_agent_md(text: &str) -> std::result::Result<AgentDef, String> {
    let rest = text.strip_prefix("---\n").ok_or("no '---' frontmatter at the top")?;
    let end = rest.find("\n---\n").ok_or("frontmatter is not closed by '---'")?;
    let (front, prompt) = (&rest[..end], &rest[end + 5..]);
    let mut def = AgentDef {
        name: String::new(),
        description: String::new(),
        tools: Vec::new(),
        model: None,
        prompt: prompt.trim().to_string(),
    };
    for line in front.lines() {
        let Some((k, v)) = line.split_once(':') else { continue };
        let v = v.trim().trim_matches('"').to_string();
        match k.trim() {
            "name" => def.name = v,
            "description" => def.description = v,
            "tools" => {
                def.tools = v
                    .split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect()
            }
            "model" => def.model = Some(v).filter(|m| !m.is_empty()),
            _ => {}
        }
    }
    if def.name.is_empty() {
        return Err("frontmatter has no 'name:'".into());
    }
    Ok(def)
}

/// Kiro's agent config (`.kiro/agents/<name>.json`): the documented fields we fill.
#[derive(Debug, Clone, Serialize)]
pub struct KiroAgent {
    /// Agent name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The system prompt.
    pub prompt: String,
    /// Built-in tool names.
    pub tools: Vec<String>,
    /// Tools used without asking: reading and, for roles that write, writing.
    #[serde(rename = "allowedTools")]
    pub allowed_tools: Vec<String>,
    /// The shell commands trusted without asking: the protocol's own `task` verbs.
    #[serde(rename = "toolsSettings")]
    pub tools_settings: serde_json::Value,
    /// Model id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Map Claude Code tool names to Kiro CLI built-in tool names.
fn kiro_tool(claude: &str) -> Option<&'static str> {
    Some(match claude {
        "Read" | "Grep" | "Glob" | "LS" => "read",
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => "write",
        "Bash" => "shell",
        _ => return None,
    })
}

/// Map Claude Code model aliases to Kiro model ids.
fn kiro_model(claude: &str) -> String {
    match claude {
        "sonnet" => "claude-sonnet-4".into(),
        "opus" => "claude-opus-4.1".into(),
        "haiku" => "claude-haiku-4.5".into(),
        other => other.into(),
    }
}

/// Derive the Kiro config from a Claude agent definition; `may_spawn` adds `task spawn`
/// and `task send` to the trusted commands (hubs), as Claude Code's rules do.
pub fn to_kiro(def: &AgentDef, may_spawn: bool) -> KiroAgent {
    let mut tools: Vec<String> = Vec::new();
    for t in &def.tools {
        if let Some(k) = kiro_tool(t) {
            if !tools.iter().any(|x| x == k) {
                tools.push(k.to_string());
            }
        }
    }
    let allowed_tools = tools.iter().filter(|t| *t != "shell").cloned().collect();
    KiroAgent {
        name: def.name.clone(),
        description: def.description.clone(),
        prompt: def.prompt.clone(),
        tools,
        allowed_tools,
        tools_settings: serde_json::json!({
            "shell": {"allowedCommands": crate::io::permissions::kiro_commands(may_spawn)}
        }),
        model: def.model.as_deref().map(kiro_model),
    }
}

/// Which runtimes' files to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// `.claude/agents/<name>.md`.
    Claude,
    /// `.kiro/agents/<name>.json`.
    Kiro,
    /// Both.
    Both,
    /// Codex CLI: `AGENTS.md`, every agent's role (Codex has no agent files).
    Codex,
    /// Gemini CLI: `GEMINI.md`, every agent's role (Gemini CLI has no agent files).
    Gemini,
}

/// The instructions file Codex and Gemini CLI read from their cwd: who is who in the
/// team, each role's body under its name.
const INSTRUCTIONS: &str = include_str!("../../templates/instructions-cli.md");

/// What `setup-agents` did, path by path (relative to the project).
#[derive(Debug, Default, Clone, Serialize)]
pub struct SetupReport {
    /// Files written.
    pub added: Vec<String>,
    /// Files that already existed and were left alone.
    pub kept: Vec<String>,
    /// Allow rules merged into `.claude/settings.json` (empty: all were there already).
    pub permissions_added: Vec<String>,
}

/// Write the roster's agents that are missing (the PM plays its primary hub); never
/// overwrite. For Claude Code, also merge the protocol's allow rules into the project's
/// `.claude/settings.json` (before any agent file, so a malformed one changes nothing).
pub fn setup(project: &Path, which: Which, roster: &crate::core::protocol::roster::Roster) -> Result<SetupReport> {
    let mut report = SetupReport::default();
    if matches!(which, Which::Claude | Which::Both) {
        report.permissions_added = crate::io::permissions::write_claude_settings(project)?;
    }
    let mut names = vec!["pm".to_string()];
    names.extend(roster.agents.keys().map(|n| roster.canonical(n)).filter(|n| n != "pm"));
    let instructions = match which {
        Which::Codex => Some(("AGENTS.md", "codex")),
        Which::Gemini => Some(("GEMINI.md", "gemini")),
        _ => None,
    };
    if let Some((file, runtime)) = instructions {
        let mut text = INSTRUCTIONS.replace("{runtime}", runtime);
        for name in &names {
            let def = parse_agent_md(&definition(name, roster))
                .map_err(|e| Error::BadInput(format!("built-in template for agent {name} is malformed: {e}")))?;
            text.push_str(&format!("\n## {name}\n\n{}\n", def.prompt.trim()));
        }
        let path = project.join(file);
        if fsutil::atomic_create(&path, text.as_bytes())? {
            report.added.push(file.to_string());
        } else {
            report.kept.push(file.to_string());
        }
        return Ok(report);
    }
    for name in &names {
        let text = definition(name, roster);
        let text = text.as_str();
        let def = parse_agent_md(text)
            .map_err(|e| Error::BadInput(format!("built-in template for agent {name} is malformed: {e}")))?;
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        if matches!(which, Which::Claude | Which::Both) {
            files.push((format!(".claude/agents/{name}.md"), text.as_bytes().to_vec()));
        }
        if matches!(which, Which::Kiro | Which::Both) {
            let mut json = serde_json::to_vec_pretty(&to_kiro(&def, roster.may_spawn(name))).expect("serialises");
            json.push(b'\n');
            files.push((format!(".kiro/agents/{name}.json"), json));
        }
        for (rel, bytes) in files {
            let path = project.join(&rel);
            if let Some(dir) = path.parent() {
                fsutil::create_dir_all(dir)?;
            }
            if fsutil::atomic_create(&path, &bytes)? {
                report.added.push(rel);
            } else {
                report.kept.push(rel);
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::agent_file::DEFAULT_AGENTS;

    #[test]
    fn every_roster_agent_gets_a_definition_that_parses() {
        for (roster, _) in crate::core::protocol::roster::BUILTIN {
            let r = crate::core::protocol::roster::Roster::builtin(roster).unwrap();
            for name in r.agents.keys().map(|n| r.canonical(n)) {
                let def = parse_agent_md(&definition(&name, &r)).unwrap_or_else(|e| panic!("{roster}/{name}: {e}"));
                assert_eq!(def.name, name);
                let k = to_kiro(&def, r.may_spawn(&name));
                assert!(!k.tools.is_empty(), "{name} maps to Kiro tools");
                let cmds = k.tools_settings["shell"]["allowedCommands"].to_string();
                assert!(cmds.contains("task handoff"), "{name}: {cmds}");
                assert_eq!(cmds.contains("task spawn"), r.may_spawn(&name), "{name}: {cmds}");
            }
        }
        let r = crate::core::protocol::roster::Roster::builtin("hub-and-spoke").unwrap();
        assert!(definition("revisionist", &r).contains("spoke of this task's team (roster 'hub-and-spoke')"));
    }

    #[test]
    fn every_template_parses_with_its_own_name() {
        for (name, text) in DEFAULT_AGENTS {
            let def = parse_agent_md(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(def.name, name);
            assert!(!def.description.is_empty(), "{name} has a description");
            assert!(!def.tools.is_empty(), "{name} has tools");
            assert!(def.prompt.len() > 200, "{name} has a real prompt");
            let k = to_kiro(&def, name == "pm");
            assert!(!k.tools.is_empty(), "{name} maps to Kiro tools");
        }
    }
}
