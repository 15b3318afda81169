//! The permission broker: Claude Code's `PermissionRequest` hook runs `task hook
//! permission-request` the moment it is about to show a permission dialog, and the
//! request is answered, in order:
//!
//! 1. by rules: Claude Code already applies each agent's rules (the protocol's, task.md's)
//!    to what it can analyse; a dialog comes when it cannot — a compound command, a
//!    command substitution — and then a real shell parser ([`crate::core::compound`])
//!    takes the command apart: denied when any part matches a deny rule, allowed when
//!    every part matches an allow rule;
//! 2. by the PM: the request is kept in the task folder ([`crate::store::permits`]) and
//!    goes into the PM's check-in at once; the PM answers with `task permit`;
//! 3. by a human: past `permit_timeout:` (default 5 min) unanswered, a human is called
//!    (escalation, notify command), and answers the same way;
//! 4. by the deadline: past `permit_deadline:` (default 30 min) it is denied, with a
//!    message the agent can act on.
//!
//! The hook waits for the answer (its timeout in the agent's settings is the deadline plus
//! a margin, so the deadline always decides first), and the answer is recorded once,
//! whoever gives it, whatever restarts in between. Every request and decision is an event.

use std::time::Duration;

use serde_json::{Value, json};

use crate::core::error::{Error, Result};
use crate::core::rules::Timing;
use crate::store::events::Kind as EventKind;
use crate::store::permits::{self, Decided, Request, shown};
use crate::store::task::Task;

/// How often the waiting hook looks for the answer.
const POLL: Duration = Duration::from_millis(200);

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

/// What a request is about: the tool and its command (or, for other tools, their input).
fn subject(input: &Value) -> (String, String) {
    let tool = input["tool_name"].as_str().unwrap_or("").to_string();
    let command = match input["tool_input"]["command"].as_str() {
        Some(c) => c.to_string(),
        None => input["tool_input"].to_string(),
    };
    (tool, command)
}

/// Decide a request (`input`: the hook's JSON) for `agent` of `task` by rules alone, and
/// record it. `Undecided` is recorded (`left_to: the dialog`) only when `record_undecided`.
pub fn decide(
    task: &Task,
    agent: &str,
    input: &Value,
    record_undecided: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Decision> {
    let (tool, command) = subject(input);
    let decision = judge(task, agent, &tool, &command);
    let (shown, truncated) = shown(&command);
    let (kind, mut data) = match &decision {
        Decision::Allow(why) => (
            EventKind::PermissionDecision,
            json!({"decision": "allow", "by": "rules", "why": why}),
        ),
        Decision::Deny(why) => (
            EventKind::PermissionDecision,
            json!({"decision": "deny", "by": "rules", "why": why}),
        ),
        Decision::Undecided(_) if !record_undecided => return Ok(decision),
        Decision::Undecided(why) => (
            EventKind::PermissionRequest,
            json!({"decision": "none", "left_to": "the dialog", "why": why}),
        ),
    };
    data["tool"] = json!(tool);
    data["command"] = json!(shown);
    data["truncated"] = json!(truncated);
    crate::store::events::append(task, kind, Some(agent), data, now)?;
    Ok(decision)
}

/// The whole broker for one request: rules, then the PM (told through a check-in), then a
/// human, then the deadline. Returns the decision that stands, to answer the hook with.
pub async fn handle(
    task: &Task,
    agent: &str,
    input: &Value,
    ctx: Option<&crate::app::session::Ctx>,
) -> Result<Decision> {
    let now = crate::core::clock::now();
    match decide(task, agent, input, false, now)? {
        Decision::Undecided(why) => ask(task, agent, input, &why, ctx).await,
        d => Ok(d),
    }
}

/// The escalation text of a request: found again by its prefix when it is answered.
fn escalation_prefix(r: &Request) -> String {
    format!("{} asks permission ({}): ", r.agent, r.id)
}

async fn ask(
    task: &Task,
    agent: &str,
    input: &Value,
    why: &str,
    ctx: Option<&crate::app::session::Ctx>,
) -> Result<Decision> {
    let timing = task.spec().map(|s| Timing::of(&s)).unwrap_or_default();
    let (tool, command) = subject(input);
    let now = crate::core::clock::now();
    let req = Request {
        id: permits::new_id(),
        agent: agent.to_string(),
        tool: tool.clone(),
        command: command.clone(),
        why: why.to_string(),
        at: now,
    };
    permits::open(task, &req)?;
    // The PM cannot answer its own request (it is waiting on it): a human is asked at once.
    let by_pm = agent != "pm";
    let (shown, truncated) = shown(&command);
    crate::store::events::append(
        task,
        EventKind::PermissionRequest,
        Some(agent),
        json!({"id": req.id, "tool": tool, "command": shown, "truncated": truncated, "why": why,
               "asked": if by_pm { "pm" } else { "human" }}),
        now,
    )?;
    tracing::info!(task = %task.name, agent, id = %req.id, by_pm, "permission request waits for an answer");
    if let (true, Some(ctx)) = (by_pm, ctx) {
        // Told now, not at the next scheduled check-in; the answer is awaited below.
        if let Err(e) = crate::app::checkin::checkin(task, ctx).await {
            tracing::warn!(task = %task.name, error = %e, "the check-in telling the PM of a permission request failed; it waits for the next one");
        }
    }
    let started = std::time::Instant::now();
    let mut human_called = false;
    loop {
        if let Some(d) = permits::decision(task, &req.id)? {
            return Ok(answer_of(&d, &req));
        }
        let waited = started.elapsed();
        if !human_called && (!by_pm || waited >= timing.human_after) {
            human_called = true;
            let deadline = now + chrono::Duration::from_std(timing.deadline).unwrap_or_default();
            let reason = format!(
                "{}`{}`; answer with `task permit {} {} allow` or `deny` (denied at {} if nobody does)",
                escalation_prefix(&req),
                shown,
                task.name,
                req.id,
                crate::core::clock::local_time(deadline)
            );
            crate::app::escalation::raise(task, &reason, crate::core::clock::now())?;
        }
        if waited >= timing.deadline {
            let d = Decided {
                id: req.id.clone(),
                decision: "deny".into(),
                by: "deadline".into(),
                reason: Some(format!(
                    "nobody approved `{shown}` within {}; hand off BLOCKED if you cannot go on without it",
                    crate::core::clock::say_duration(timing.deadline)
                )),
                always: false,
                at: crate::core::clock::now(),
            };
            let (stands, ours) = permits::decide(task, &d)?;
            if ours {
                record_decision(task, &req, &stands)?;
            }
            return Ok(answer_of(&stands, &req));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn answer_of(d: &Decided, r: &Request) -> Decision {
    let who = match d.by.as_str() {
        "pm" => "the PM",
        "human" => "a human",
        _ => "the deadline",
    };
    if d.decision == "allow" {
        return Decision::Allow(format!("allowed by {who}"));
    }
    let (shown, _) = shown(&r.command);
    Decision::Deny(match &d.reason {
        Some(reason) if d.by == "deadline" => format!("denied: {reason}"),
        Some(reason) => format!("denied by {who}: {reason}"),
        None => format!("denied by {who}: `{shown}`; do without it, or hand off BLOCKED if you cannot go on"),
    })
}

/// The event of a decision, and its escalation closed.
fn record_decision(task: &Task, r: &Request, d: &Decided) -> Result<()> {
    let (shown, truncated) = shown(&r.command);
    crate::store::events::append(
        task,
        EventKind::PermissionDecision,
        Some(&r.agent),
        json!({"id": r.id, "decision": d.decision, "by": d.by, "reason": d.reason, "always": d.always,
               "tool": r.tool, "command": shown, "truncated": truncated}),
        d.at,
    )?;
    let prefix = escalation_prefix(r);
    let closed = task.update_state(d.at, |st| {
        let before = st.escalations.len();
        st.escalations.retain(|e| !e.reason.starts_with(&prefix));
        Ok(st.escalations.len() != before)
    })?;
    if closed {
        crate::app::escalation::refresh_progress(task, d.at)?;
    }
    Ok(())
}

/// `task permit`: answer request `id` (`by`: `pm` or `human`). With `always`, an allowed
/// request's exact command becomes a rule for that agent in this task. Returns the decision
/// that stands and whether it is this one (`false`: it had been decided already).
pub fn permit(
    task: &Task,
    id: &str,
    allow: bool,
    always: bool,
    reason: Option<String>,
    by: &str,
) -> Result<(Decided, bool)> {
    if !permits::valid_id(id) {
        return Err(Error::BadInput(format!(
            "{id:?} is not a permission request id (p- and 8 hex digits, as the check-in names it)"
        )));
    }
    let Some(r) = permits::request(task, id)? else {
        let open: Vec<String> = permits::pending(task)?.into_iter().map(|r| r.id).collect();
        return Err(Error::BadInput(format!(
            "no permission request {id} in task '{}'; waiting: {}",
            task.name,
            if open.is_empty() {
                "none".to_string()
            } else {
                open.join(", ")
            }
        )));
    };
    let d = Decided {
        id: id.to_string(),
        decision: if allow { "allow" } else { "deny" }.into(),
        by: by.to_string(),
        reason,
        always: always && allow,
        at: crate::core::clock::now(),
    };
    let (stands, ours) = permits::decide(task, &d)?;
    if ours {
        if stands.always {
            let rule = if r.tool == "Bash" {
                format!("Bash({})", r.command)
            } else {
                r.tool.clone()
            };
            permits::add_always(task, &r.agent, &rule)?;
        }
        record_decision(task, &r, &stands)?;
    }
    Ok((stands, ours))
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
    allow.extend(
        permits::always(task)
            .ok()
            .and_then(|mut a| a.remove(agent))
            .unwrap_or_default(),
    );
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
