//! What agents may run without asking a human: Claude Code's permission rules and Kiro's
//! trusted commands for the protocol's own commands.
//!
//! An agent that stops at "Do you want to proceed?" with nobody watching stalls the whole
//! task, so the rules every taught command needs are written by `task setup-agents` (the
//! project's `.claude/settings.json`, merged, never overwritten) and passed to each agent
//! at start (`--settings`), where hubs also get `task spawn` and `task send`. The rules are
//! only the first line of defence for spawning: the gate still refuses a spoke's spawn.

use std::path::Path;

use serde_json::{Map, Value};

use crate::core::error::{Error, Result};
use crate::store::fsutil;

/// The `task` verbs every agent is taught (handing off, reading status, the log, progress).
pub const COMMON_VERBS: [&str; 4] = ["handoff", "status", "log", "progress"];

/// The verbs only agents that may spawn are taught.
pub const HUB_VERBS: [&str; 3] = ["spawn", "send", "permit"];

/// Claude Code's permission modes (`--permission-mode`), as its `--help` lists them.
pub const CLAUDE_MODES: [&str; 6] = ["acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"];

/// The mode that lets an agent run anything without asking: allowed only when a user asks.
pub const BYPASS: &str = "bypassPermissions";

fn verbs(may_spawn: bool) -> impl Iterator<Item = &'static str> {
    COMMON_VERBS
        .into_iter()
        .chain(HUB_VERBS.into_iter().filter(move |_| may_spawn))
}

/// Claude Code allow rules for an agent; prefix rules (`Bash(task handoff:*)`) match the
/// plain command forms the preambles teach, heredoc bodies included.
pub fn claude_rules(may_spawn: bool) -> Vec<String> {
    verbs(may_spawn).map(|v| format!("Bash(task {v}:*)")).collect()
}

/// The `--settings` value for one agent: the protocol's allow rules, task.md's rules for
/// it (see [`crate::core::rules`]), and its sandbox when it has one (see
/// [`crate::core::sandbox::claude_settings`]), as Claude Code settings JSON.
///
/// `hook` is the shell command Claude Code runs when it is about to show a permission
/// dialog (`task hook permission-request`, see [`crate::app::broker`]) and its timeout in
/// seconds: the broker's deadline plus a margin, so that the deadline's denial, recorded
/// once, always comes before Claude Code gives up on the hook.
///
/// `turn_hooks` is the `task hook` command line the turn hooks append their event to
/// ([`crate::core::turn::EVENTS`]). They run in the background (`async`): a report never
/// delays the agent's prompt or the end of its turn, and answers nothing.
pub fn claude_session_settings(
    may_spawn: bool,
    rules: &crate::core::rules::Rules,
    sandbox: Option<Value>,
    hook: Option<(&str, u64)>,
    turn_hooks: Option<&[String]>,
) -> String {
    let mut allow = claude_rules(may_spawn);
    allow.extend(rules.allow.iter().cloned());
    let mut v = serde_json::json!({"permissions": {"allow": allow, "deny": rules.deny}});
    let mut hooks = Map::new();
    if let Some((h, timeout)) = hook {
        hooks.insert(
            "PermissionRequest".into(),
            serde_json::json!([{"matcher": "*", "hooks": [{"type": "command", "command": h, "timeout": timeout}]}]),
        );
    }
    if let Some(base) = turn_hooks {
        for (name, event) in crate::core::turn::EVENTS {
            let mut argv = base.to_vec();
            argv.push(name.to_string());
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let command = crate::core::shell::shell_join(&argv);
            hooks.insert(
                event.into(),
                serde_json::json!([{"hooks": [{"type": "command", "command": command, "timeout": TURN_HOOK_TIMEOUT, "async": true}]}]),
            );
        }
    }
    if !hooks.is_empty() {
        v["hooks"] = Value::Object(hooks);
    }
    if let Some(s) = sandbox {
        v["sandbox"] = s;
    }
    v.to_string()
}

/// Seconds a turn hook may take: enough to look at the agents and run a check-in when a
/// turn failed or waits (see [`crate::app::turn`]).
pub const TURN_HOOK_TIMEOUT: u64 = 120;

/// Kiro's `toolsSettings.shell.allowedCommands` (regular expressions) for an agent.
pub fn kiro_commands(may_spawn: bool) -> Vec<String> {
    verbs(may_spawn).map(|v| format!("^task {v}( .*)?$")).collect()
}

/// Check a permission mode before any agent starts with it.
pub fn check_mode(mode: &str) -> std::result::Result<(), String> {
    if CLAUDE_MODES.contains(&mode) {
        Ok(())
    } else {
        Err(format!(
            "unknown permission_mode {mode:?}; choose one of {}",
            CLAUDE_MODES.join(", ")
        ))
    }
}

/// Add `rules` to `permissions.allow` of a settings file's text, keeping every other key
/// and rule. Returns the new text and the rules that were added (none: leave the file).
pub fn merge_settings(existing: Option<&str>, rules: &[String]) -> std::result::Result<(String, Vec<String>), String> {
    let mut root = match existing.map(str::trim) {
        None | Some("") => Value::Object(Map::new()),
        Some(text) => serde_json::from_str::<Value>(text).map_err(|e| format!("it is not valid JSON ({e})"))?,
    };
    let obj = root.as_object_mut().ok_or("its top level is not a JSON object")?;
    let perms = obj
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("\"permissions\" is not an object")?;
    let allow = perms
        .entry("allow")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or("\"permissions.allow\" is not a list")?;
    let mut added = Vec::new();
    for r in rules {
        if !allow.iter().any(|a| a.as_str() == Some(r)) {
            allow.push(Value::String(r.clone()));
            added.push(r.clone());
        }
    }
    let mut text = serde_json::to_string_pretty(&root).expect("JSON values serialise");
    text.push('\n');
    Ok((text, added))
}

/// Merge the rules every agent needs into `<project>/.claude/settings.json` (atomically).
/// A malformed file is refused and left exactly as it was.
pub fn write_claude_settings(project: &Path) -> Result<Vec<String>> {
    let path = project.join(".claude").join("settings.json");
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    let (text, added) = merge_settings(existing.as_deref(), &claude_rules(false)).map_err(|why| {
        Error::BadInput(format!(
            "{} cannot be merged: {why}; fix or move it, then run `task setup-agents` again (the file was not changed)",
            path.display()
        ))
    })?;
    if !added.is_empty() {
        fsutil::create_dir_all(path.parent().expect("has a parent"))?;
        fsutil::atomic_write(&path, text.as_bytes())?;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spokes_get_the_common_verbs_and_hubs_also_spawn_and_send() {
        assert_eq!(
            claude_rules(false),
            [
                "Bash(task handoff:*)",
                "Bash(task status:*)",
                "Bash(task log:*)",
                "Bash(task progress:*)"
            ]
        );
        let hub = claude_rules(true);
        assert!(hub.contains(&"Bash(task spawn:*)".to_string()) && hub.contains(&"Bash(task send:*)".to_string()));
        let v: Value =
            serde_json::from_str(&claude_session_settings(true, &Default::default(), None, None, None)).unwrap();
        assert_eq!(v["permissions"]["allow"].as_array().unwrap().len(), 7);
        assert!(v.get("hooks").is_none());
        assert_eq!(kiro_commands(false)[0], "^task handoff( .*)?$");
    }

    #[test]
    fn turn_hooks_run_in_the_background_with_the_event_quoted() {
        let base = ["/opt/my tools/task".to_string(), "hook".to_string()];
        let text = claude_session_settings(
            false,
            &Default::default(),
            None,
            Some(("task hook permission-request", 9)),
            Some(&base),
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"], 9);
        for (name, event) in crate::core::turn::EVENTS {
            let h = &v["hooks"][event][0]["hooks"][0];
            assert_eq!(h["command"], format!("'/opt/my tools/task' hook {name}"), "{event}");
            assert_eq!(h["async"], true, "{event}");
        }
    }

    #[test]
    fn merging_keeps_every_key_and_rule_and_adds_only_what_is_missing() {
        let user = r#"{"model": "opus", "permissions": {"allow": ["Bash(cargo test:*)", "Bash(task status:*)"], "deny": ["Read(.env)"]}, "env": {"A": "1"}}"#;
        let (text, added) = merge_settings(Some(user), &claude_rules(false)).unwrap();
        assert_eq!(added.len(), 3, "task status was already there: {added:?}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["env"]["A"], "1");
        assert_eq!(v["permissions"]["deny"][0], "Read(.env)");
        let allow: Vec<&str> = v["permissions"]["allow"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(&allow[..2], ["Bash(cargo test:*)", "Bash(task status:*)"]);
        assert_eq!(allow.len(), 5);
        let (_, again) = merge_settings(Some(&text), &claude_rules(false)).unwrap();
        assert!(again.is_empty(), "a second merge adds nothing");
        assert_eq!(merge_settings(None, &claude_rules(false)).unwrap().1.len(), 4);
    }

    #[test]
    fn a_malformed_file_is_refused_with_the_reason() {
        for (bad, why) in [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "not a JSON object"),
            (r#"{"permissions": []}"#, "\"permissions\" is not an object"),
            (r#"{"permissions": {"allow": "Bash"}}"#, "not a list"),
        ] {
            let e = merge_settings(Some(bad), &claude_rules(false)).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn only_known_modes_pass() {
        assert!(check_mode("acceptEdits").is_ok());
        assert!(check_mode("bypassPermissions").is_ok());
        assert!(check_mode("yolo").unwrap_err().contains("acceptEdits"));
    }
}
