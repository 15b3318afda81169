//! Which files go into a bundle, and how long they stay: the rules alone, without a
//! file system, so each is tested on its own and read in one place.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::core::handoff::HandoffName;
use crate::core::model::Phase;

/// Split `---` frontmatter (simple `key: value` lines, keys lower-cased) from the body;
/// context files carry their selection rules there, the way Copilot instruction files do.
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

/// Whether a folder entry is a source file: `*.md`, hidden files left out so editors'
/// swap and backup files never reach an agent.
pub fn is_source_md(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "md")
        && !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// How long a phase-context item lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// Given to every deployment of its phase.
    PhasePersistent,
    /// Given to one deployment, then consumed (the default: a note meant for one agent
    /// should not reach the next one by accident).
    SingleAgent,
}

impl Persistence {
    /// From the `persistence:` frontmatter; an unknown word is `Err` with the fallback,
    /// so the caller can say in the manifest that it guessed.
    pub fn parse(written: Option<&str>) -> Result<Persistence, Persistence> {
        match written {
            Some("phase-persistent") => Ok(Persistence::PhasePersistent),
            Some("single-agent") | None => Ok(Persistence::SingleAgent),
            Some(_) => Err(Persistence::SingleAgent),
        }
    }

    /// Whether the deployment that takes the item removes it from `phase_context/`.
    pub fn is_consumed(self) -> bool {
        self == Persistence::SingleAgent
    }
}

/// Whether a phase-context item is for this deployment: its `phase:` and `agent:` match
/// (case-insensitively), an absent one matching any.
pub fn phase_context_applies(fm: &BTreeMap<String, String>, phase: Phase, agent: &str) -> bool {
    let phase_ok = fm.get("phase").is_none_or(|ph| ph.eq_ignore_ascii_case(phase.as_str()));
    let agent_ok = fm.get("agent").is_none_or(|a| a.eq_ignore_ascii_case(agent));
    phase_ok && agent_ok
}

/// The skill named by one `## Skills to Load` item: its first word, without the markdown
/// agents wrap names in (`` `name` ``, `**name**`, `name:` …).
pub fn skill_name(item: &str) -> &str {
    item.split_whitespace()
        .next()
        .unwrap_or("")
        .trim_matches(['`', '*', ',', ';', ':'])
}

/// A skill name that may be used in a path: the name comes from an agent's handoff, so
/// no separators, no dot-start, no NUL can walk it out of the skills folders.
pub fn safe_skill(name: &str) -> bool {
    !name.is_empty() && name.len() <= 100 && !name.starts_with('.') && !name.contains(['/', '\\', '\0']) && name != ".."
}

/// Where a skill is looked for, relative to the project, in order: Claude Code's own
/// layout first, so a project already set up for it needs nothing new.
pub fn skill_candidates(name: &str) -> [String; 2] {
    [
        format!(".claude/skills/{name}/SKILL.md"),
        format!("context/skills/{name}.md"),
    ]
}

/// The paths a handoff's `## Scope` names (files, then folders): what instruction
/// files' `applyTo:` globs are matched against.
pub fn scope_paths(scope: Option<&str>) -> Vec<String> {
    let (files, folders) = crate::core::preamble::scope_lists(scope.unwrap_or(""));
    files.into_iter().chain(folders).collect()
}

/// Whether an instruction file with this `applyTo:` goes in: a catch-all glob always
/// does (an agent with no scope still gets the project's general rules), any other
/// only when it matches a scope path. `Err` when it is not a glob.
pub fn instruction_applies(glob: &str, scope_paths: &[String]) -> Result<bool, globset::Error> {
    let m = globset::Glob::new(glob)?.compile_matcher();
    Ok(matches!(glob, "**/*" | "**" | "*") || scope_paths.iter().any(|s| m.is_match(s)))
}

/// The handoffs that may be the spawn's "previous" one, best first: the newest reports by
/// an agent other than the PM (the PM's own are instructions, not experience), never the
/// spawn's own handoff. The caller takes the first that loads.
pub fn previous_candidates<'a>(
    names: &'a [HandoffName],
    spawn_handoff: &'a str,
) -> impl Iterator<Item = &'a HandoffName> + 'a {
    names
        .iter()
        .rev()
        .filter(move |n| n.agent != "pm" && n.file_name() != spawn_handoff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(text: &str) -> BTreeMap<String, String> {
        frontmatter(text).0
    }

    #[test]
    fn frontmatter_is_split() {
        let (fm, body) = frontmatter("---\napplyTo: \"**/*.rs\"\nphase: DEVELOPING\n---\nbody\n");
        assert_eq!(fm["applyto"], "**/*.rs");
        assert_eq!(fm["phase"], "DEVELOPING");
        assert_eq!(body, "body\n");
        assert!(frontmatter("no fm").0.is_empty());
        assert!(
            frontmatter("---\nnever closed: x\n").0.is_empty(),
            "unclosed is no frontmatter"
        );
        let (fm, body) = frontmatter("---\r\nagent: 'dev'\r\n---\r\nbody");
        assert_eq!(fm["agent"], "dev");
        assert_eq!(body, "body");
    }

    #[test]
    fn only_visible_markdown_is_a_source() {
        assert!(is_source_md(Path::new("/x/notes.md")));
        assert!(is_source_md(Path::new("/x/a.b.md")));
        assert!(!is_source_md(Path::new("/x/.notes.md")), "hidden");
        assert!(!is_source_md(Path::new("/x/notes.md.swp")));
        assert!(!is_source_md(Path::new("/x/notes.MD")));
        assert!(!is_source_md(Path::new("/x/.md")));
    }

    #[test]
    fn persistence_defaults_to_single_agent() {
        assert_eq!(Persistence::parse(None), Ok(Persistence::SingleAgent));
        assert_eq!(Persistence::parse(Some("single-agent")), Ok(Persistence::SingleAgent));
        assert_eq!(
            Persistence::parse(Some("phase-persistent")),
            Ok(Persistence::PhasePersistent)
        );
        assert_eq!(Persistence::parse(Some("forever")), Err(Persistence::SingleAgent));
        assert_eq!(
            Persistence::parse(Some("Phase-Persistent")),
            Err(Persistence::SingleAgent),
            "spelled exactly"
        );
        assert!(Persistence::SingleAgent.is_consumed());
        assert!(!Persistence::PhasePersistent.is_consumed());
        assert_eq!(
            serde_json::to_value(Persistence::PhasePersistent).unwrap(),
            "phase-persistent"
        );
        assert_eq!(serde_json::to_value(Persistence::SingleAgent).unwrap(), "single-agent");
    }

    #[test]
    fn phase_context_matches_phase_and_agent_or_any() {
        let dev = Phase::Developing;
        assert!(phase_context_applies(&fm("no frontmatter"), dev, "dev"));
        assert!(phase_context_applies(&fm("---\nphase: developing\n---\n"), dev, "dev"));
        assert!(!phase_context_applies(&fm("---\nphase: TESTING\n---\n"), dev, "dev"));
        assert!(phase_context_applies(&fm("---\nagent: DEV\n---\n"), dev, "dev"));
        assert!(!phase_context_applies(&fm("---\nagent: test\n---\n"), dev, "dev"));
        assert!(!phase_context_applies(
            &fm("---\nphase: DEVELOPING\nagent: test\n---\n"),
            dev,
            "dev"
        ));
    }

    #[test]
    fn skill_names_are_unwrapped_and_refused_when_they_are_paths() {
        assert_eq!(skill_name("`embedded-testing` for the board"), "embedded-testing");
        assert_eq!(skill_name("**rust**:"), "rust");
        assert_eq!(skill_name(""), "");
        assert!(safe_skill("embedded-testing"));
        for bad in ["", "..", "../etc", ".hidden", "a/b", "a\\b", "a\0b", &"x".repeat(101)] {
            assert!(!safe_skill(bad), "{bad:?}");
        }
        assert_eq!(
            skill_candidates("rust"),
            [
                ".claude/skills/rust/SKILL.md".to_string(),
                "context/skills/rust.md".to_string()
            ]
        );
    }

    #[test]
    fn instructions_apply_by_scope_or_catch_all() {
        let scope = scope_paths(Some("May modify:\n- src/pool/writer.rs\nMay create:\n- docs/pool/\n"));
        assert_eq!(scope, vec!["src/pool/writer.rs", "docs/pool/"]);
        assert!(instruction_applies("src/pool/**", &scope).unwrap());
        assert!(instruction_applies("docs/**", &scope).unwrap());
        assert!(!instruction_applies("tests/**", &scope).unwrap());
        for all in ["**/*", "**", "*"] {
            assert!(instruction_applies(all, &[]).unwrap(), "{all} with no scope");
        }
        assert!(!instruction_applies("src/**", &[]).unwrap());
        assert!(instruction_applies("a[", &scope).is_err());
        assert!(scope_paths(None).is_empty());
    }

    #[test]
    fn the_previous_handoff_is_the_newest_report_not_the_pms_nor_the_spawns() {
        let names: Vec<HandoffName> = [
            "explore-20251127-090000.md",
            "architect-20251127-093000.md",
            "pm-20251127-100000.md",
            "dev-20251127-103500.md",
        ]
        .iter()
        .map(|f| HandoffName::parse(f).unwrap())
        .collect();
        let order: Vec<String> = previous_candidates(&names, "dev-20251127-103500.md")
            .map(|n| n.file_name())
            .collect();
        assert_eq!(
            order,
            vec!["architect-20251127-093000.md", "explore-20251127-090000.md"]
        );
        assert_eq!(
            previous_candidates(&names[2..3], "x.md").count(),
            0,
            "the PM's own never"
        );
    }
}
