//! Rendering the texts the supervisor sends: spawn preambles, local and remote
//! (docs/protocol.md#spawn-preamble), the PM's preamble, and check-in messages. The words live in
//! templates/; this module only fills `{placeholders}` (`{{` and `}}` stand
//! for literal braces).

/// Spoke preamble (docs/protocol.md#spawn-preamble).
pub const AGENT_TEMPLATE: &str = include_str!("../../templates/preamble-agent.md");
/// The remote addition (docs/protocol.md#spawn-preamble).
pub const REMOTE_TEMPLATE: &str = include_str!("../../templates/preamble-remote.md");
/// The PM's preamble.
pub const PM_TEMPLATE: &str = include_str!("../../templates/preamble-pm.md");
/// The scope-boundary block of a spoke preamble (docs/protocol.md#spawn-preamble).
pub const SCOPE_TEMPLATE: &str = include_str!("../../templates/preamble-scope.md");
/// The structured-result rule for agents whose roster requires gates (docs/protocol.md#structured-results).
pub const GATES_TEMPLATE: &str = include_str!("../../templates/preamble-gates.md");
/// Where an agent in its own worktree works and what becomes of its work.
pub const WORKTREE_TEMPLATE: &str = include_str!("../../templates/preamble-worktree.md");
/// What an agent sent back to a conflicted branch is told first.
pub const WORKTREE_CONFLICT_TEMPLATE: &str = include_str!("../../templates/preamble-worktree-conflict.md");
/// The check-in message to the PM.
pub const CHECKIN_TEMPLATE: &str = include_str!("../../templates/checkin.md");

/// Fill `{key}` placeholders; `{{`/`}}` become literal braces; unknown keys are left as they are.
pub fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(r) = tail.strip_prefix("{{") {
            out.push('{');
            rest = r;
        } else if let Some(r) = tail.strip_prefix("}}") {
            out.push('}');
            rest = r;
        } else if let Some(after) = tail.strip_prefix('{') {
            let value = after
                .find('}')
                .map(|j| &after[..j])
                .and_then(|key| vars.iter().find(|(k, _)| *k == key).map(|(k, v)| (k.len(), *v)));
            match value {
                Some((klen, v)) => {
                    out.push_str(v);
                    rest = &after[klen + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        } else {
            out.push('}');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// Everything a spoke preamble names.
#[derive(Debug, Clone)]
pub struct AgentPreamble<'a> {
    pub agent: &'a str,
    pub role: &'a str,
    pub task: &'a str,
    pub spawned: &'a str,
    pub cwd: &'a str,
    pub task_dir: &'a str,
    pub task_bin: &'a str,
    pub handoff_file: &'a str,
    pub handoff: &'a str,
    /// `(host, remote cwd)` for a remote agent.
    pub remote: Option<(&'a str, &'a str)>,
    /// The PM handoff's `## Scope` section, when it has one.
    pub scope: Option<&'a str>,
    /// The roster requires `## Gates Honored` of this agent.
    pub requires_gates: bool,
    /// Its worktree block ([`worktree_block`]), when it works in one.
    pub worktree: Option<String>,
}

/// What an agent in its own worktree is told: where, on which branch, what happens to
/// its work, and (sent back after a conflict) what to resolve first.
pub fn worktree_block(
    path: &str,
    branch: Option<&str>,
    base: &str,
    task_branch: &str,
    conflict: Option<&[String]>,
) -> String {
    let branch_line = match branch {
        Some(b) => format!("branch `{b}`"),
        None => "a detached HEAD (read only: nothing you change here is kept)".into(),
    };
    let work_rule = match branch {
        Some(_) => format!(
            "Commit as you go if you like; whatever is uncommitted when you write your final\nhandoff is committed for you, and your branch is merged into `{task_branch}`.\nDo not switch branches, and do not touch other worktrees or the main checkout."
        ),
        None => "Read and run things here; do not commit.".into(),
    };
    let conflict_block = conflict
        .map(|files| {
            fill(
                WORKTREE_CONFLICT_TEMPLATE,
                &[("task_branch", task_branch), ("files", &files.join(", "))],
            )
        })
        .unwrap_or_default();
    fill(
        WORKTREE_TEMPLATE,
        &[
            ("worktree", path),
            ("branch_line", &branch_line),
            ("base", base),
            ("work_rule", &work_rule),
            ("conflict_block", &conflict_block),
        ],
    )
}

/// Split a `## Scope` section into files the agent may modify and folders it may
/// create files in. Fault-tolerant: a line mentioning "create", "folder" or
/// "director" starts the folders list, one mentioning "modify", "edit" or "files"
/// the files list; list items and backticked paths go to the current list
/// (files by default); an item ending in `/` is a folder wherever it stands.
pub fn scope_lists(scope: &str) -> (Vec<String>, Vec<String>) {
    let (mut files, mut folders) = (Vec::new(), Vec::new());
    let mut in_folders = false;
    for line in scope.lines() {
        let t = line.trim();
        let lower = t.to_ascii_lowercase();
        let item = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .or_else(|| t.strip_prefix("+ "));
        let Some(item) = item else {
            if lower.contains("create") || lower.contains("folder") || lower.contains("director") {
                in_folders = true;
            } else if lower.contains("modify") || lower.contains("edit") || lower.contains("files") {
                in_folders = false;
            }
            // "Modify: `a.rs`, `b.rs`" on one line.
            for (i, part) in t.split('`').enumerate() {
                if i % 2 == 1 && !part.trim().is_empty() {
                    let p = part.trim().to_string();
                    if in_folders || p.ends_with('/') {
                        folders.push(p)
                    } else {
                        files.push(p)
                    }
                }
            }
            continue;
        };
        let p = item.trim().trim_matches('`').trim().to_string();
        if p.is_empty() {
            continue;
        }
        if in_folders || p.ends_with('/') {
            folders.push(p);
        } else {
            files.push(p);
        }
    }
    (files, folders)
}

fn bullet_list(items: &[String], empty: &str) -> String {
    if items.is_empty() {
        return format!("- {empty}");
    }
    items.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n")
}

/// Render a spoke preamble followed by the PM handoff's contents.
pub fn agent(p: &AgentPreamble<'_>) -> String {
    let remote_block = match p.remote {
        Some((host, cwd)) => fill(
            REMOTE_TEMPLATE,
            &[("remote_host", host), ("remote_cwd", cwd), ("task", p.task)],
        ),
        None => String::new(),
    };
    let (files, folders) = scope_lists(p.scope.unwrap_or(""));
    let scope_block = fill(
        SCOPE_TEMPLATE,
        &[
            (
                "files",
                &bullet_list(
                    &files,
                    if p.scope.is_some() {
                        "none"
                    } else {
                        "none named: the PM's handoff has no `## Scope`; change only what your instructions need"
                    },
                ),
            ),
            ("folders", &bullet_list(&folders, "none named")),
        ],
    );
    fill(
        AGENT_TEMPLATE,
        &[
            ("agent", p.agent),
            ("role", p.role),
            ("task", p.task),
            ("spawned", p.spawned),
            ("cwd", p.cwd),
            ("task_dir", p.task_dir),
            ("task_bin", p.task_bin),
            ("handoff_file", p.handoff_file),
            ("handoff", p.handoff.trim_end()),
            ("remote_block", &remote_block),
            ("worktree_block", p.worktree.as_deref().unwrap_or("")),
            ("scope_block", &scope_block),
            ("gates_block", if p.requires_gates { GATES_TEMPLATE } else { "" }),
        ],
    )
}

/// Render the PM's preamble.
pub fn pm(
    task: &str,
    spawned: &str,
    task_dir: &str,
    task_bin: &str,
    checkin: &str,
    no_progress: &str,
    roster_block: &str,
) -> String {
    fill(
        PM_TEMPLATE,
        &[
            ("roster_block", roster_block.trim_end()),
            ("task", task),
            ("spawned", spawned),
            ("task_dir", task_dir),
            ("task_bin", task_bin),
            ("checkin", checkin),
            ("no_progress", no_progress),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_replaces_known_and_keeps_the_rest() {
        assert_eq!(fill("a {x} {y} {{z}} }", &[("x", "1")]), "a 1 {y} {z} }");
        assert_eq!(fill("{x}{x}", &[("x", "{x}")]), "{x}{x}", "values are not re-expanded");
    }

    #[test]
    fn agent_preamble_has_the_protocol_and_the_handoff() {
        let text = agent(&AgentPreamble {
            agent: "dev",
            role: "spoke",
            task: "t1",
            spawned: "2025-11-27 10:35:00 +00:00",
            cwd: "/repo",
            task_dir: "/repo/tasks/t1",
            task_bin: "task",
            handoff_file: "handoffs/pm-20251127-103500.md",
            handoff: "# Handoff: pm\n## Instructions\nDo it.\n",
            remote: None,
            scope: None,
            requires_gates: false,
            worktree: None,
        });
        for needle in [
            "# Agent: dev",
            "**Task:** t1",
            "Your working directory: /repo",
            "/repo/tasks/t1/artifacts/",
            "/repo/tasks/t1/scratchpad/dev/",
            "handoffs/dev-{YYYYMMDD}-{HHMMSS}.md",
            "task handoff t1 --from dev --status COMPLETE",
            "## Your Instructions",
            "## Instructions\nDo it.",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert!(!text.contains("Remote Setup"));
        assert!(
            text.contains("SCOPE ESCALATION") && text.contains("has no `## Scope`"),
            "{text}"
        );
        assert!(text.contains("SPAWN_REJECT_SPOKE_CALLER"), "the anti-spawning rule");
        let remote = agent(&AgentPreamble {
            remote: Some(("u@h", "/srv/r")),
            ..AgentPreamble {
                agent: "dev",
                role: "spoke",
                task: "t1",
                spawned: "",
                cwd: "/srv/r",
                task_dir: "/srv/r/tasks/t1",
                task_bin: "task",
                handoff_file: "",
                handoff: "",
                remote: None,
                scope: None,
                requires_gates: true,
                worktree: None,
            }
        });
        assert!(remote.contains("You are running on: u@h") && remote.contains("/srv/r/tasks/t1/"));
        assert!(remote.contains("requires a `## Gates Honored`"));
        assert!(!text.contains("requires a `## Gates Honored`"));
    }

    #[test]
    fn scope_sections_become_files_and_folders() {
        let (f, d) =
            scope_lists("May modify:\n- src/a.rs\n- `src/b.rs`\n\nMay create files in:\n- tests/\n- benches\n");
        assert_eq!(f, vec!["src/a.rs", "src/b.rs"]);
        assert_eq!(d, vec!["tests/", "benches"]);
        let (f, d) = scope_lists("- first.rs\nFiles: `x.rs`, `y.rs`\nFolders: `out/`\n- lone\n");
        assert_eq!(f, vec!["first.rs", "x.rs", "y.rs"]);
        assert_eq!(d, vec!["out/", "lone"]);
        assert_eq!(scope_lists("whatever, no list"), (vec![], vec![]));
        let text = agent(&AgentPreamble {
            agent: "dev",
            role: "spoke",
            task: "t1",
            spawned: "",
            cwd: "/r",
            task_dir: "/r/tasks/t1",
            task_bin: "task",
            handoff_file: "",
            handoff: "",
            remote: None,
            scope: Some("May modify:\n- src/a.rs\nMay create:\n- tests/\n"),
            requires_gates: false,
            worktree: None,
        });
        assert!(
            text.contains("Files you may modify:\n- src/a.rs\nFolders where you may create new files:\n- tests/"),
            "{text}"
        );
    }
}
