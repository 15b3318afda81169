//! The permission broker's first rung: Claude Code's `PermissionRequest` hook runs
//! `task hook permission-request` the moment it is about to show a permission dialog, and
//! the supervisor answers from rules before anyone is asked. Claude Code already applies
//! each agent's rules (the protocol's, task.md's) to commands it can analyse; a dialog
//! comes when it cannot — a compound command, a command substitution — and then a real
//! shell parser ([`crate::core::compound`]) takes the command apart: denied when any
//! simple command in it matches a deny rule, allowed when every one matches an allow rule,
//! and otherwise left to the dialog (and to a human, through the attention path).
//! Every request and decision is an event.

use serde_json::{Value, json};

use crate::core::error::Result;
use crate::store::task::Task;

/// What the hook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow(String),
    /// Refuse it, telling the agent why.
    Deny(String),
    /// No answer: Claude Code shows its dialog.
    Undecided(String),
}

/// How much of a command an event keeps.
const SHOWN: usize = 300;

/// Decide a request (`input`: the hook's JSON) for `agent` of `task`, and record it.
pub fn decide(task: &Task, agent: &str, input: &Value, now: chrono::DateTime<chrono::Utc>) -> Result<Decision> {
    let tool = input["tool_name"].as_str().unwrap_or("").to_string();
    let command = input["tool_input"]["command"].as_str().unwrap_or("").to_string();
    let decision = judge(task, agent, &tool, &command);
    let shown: String = command.chars().take(SHOWN).collect();
    let (kind, data) = match &decision {
        Decision::Allow(why) => (
            "permission_decision",
            json!({"decision": "allow", "by": "rules", "why": why}),
        ),
        Decision::Deny(why) => (
            "permission_decision",
            json!({"decision": "deny", "by": "rules", "why": why}),
        ),
        Decision::Undecided(why) => (
            "permission_request",
            json!({"decision": "none", "left_to": "the dialog", "why": why}),
        ),
    };
    let mut data = data;
    data["tool"] = json!(tool);
    data["command"] = json!(shown);
    data["truncated"] = json!(command.chars().count() > SHOWN);
    crate::store::events::append(task, kind, Some(agent), data, now)?;
    Ok(decision)
}

fn judge(task: &Task, agent: &str, tool: &str, command: &str) -> Decision {
    if tool != "Bash" {
        return Decision::Undecided(format!(
            "{tool} is not a shell command; only rules Claude Code applies cover it"
        ));
    }
    let spec = match task.spec() {
        Ok(s) => s,
        Err(e) => return Decision::Undecided(format!("task.md unreadable: {e}")),
    };
    let rules = match crate::core::rules::for_agent(agent, |k| spec.setting(k).map(str::to_string)) {
        Ok(r) => r,
        Err(e) => return Decision::Undecided(e),
    };
    let may_spawn = crate::store::roster::for_task(task)
        .map(|r| r.may_spawn(agent))
        .unwrap_or(false);
    let mut allow = crate::io::permissions::claude_rules(may_spawn);
    allow.extend(rules.allow);
    let commands = match crate::core::compound::simple_commands(command) {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => return Decision::Undecided("no command in it".into()),
        Err(why) => return Decision::Undecided(why),
    };
    if let Some(c) = commands.iter().find(|c| crate::core::compound::matches(c, &rules.deny)) {
        return Decision::Deny(format!(
            "denied by task.md's rules: `{c}`; do without it, or hand off BLOCKED if you cannot go on"
        ));
    }
    match commands.iter().find(|c| !crate::core::compound::matches(c, &allow)) {
        Some(c) => Decision::Undecided(format!("no rule allows `{c}`")),
        None => Decision::Allow(format!("every command in it is allowed: {}", commands.join("; "))),
    }
}

/// The hook's answer on stdout (Claude Code's `hookSpecificOutput`); `None` prints nothing,
/// which leaves the dialog to show.
pub fn answer(d: &Decision) -> Option<Value> {
    let decision = match d {
        Decision::Allow(_) => json!({"behavior": "allow"}),
        Decision::Deny(why) => json!({"behavior": "deny", "message": why}),
        Decision::Undecided(_) => return None,
    };
    Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}))
}
