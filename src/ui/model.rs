//! The view model of `task ui`: what the screen shows, computed from task statuses and
//! events by plain functions (no I/O), so every kind of row is unit-tested.
//!
//! "Needs you" comes first because it is the one question a person running many agents
//! asks: which agent cannot go on without me, since when, and why.

use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

use crate::core::attention::Kind;
use crate::core::model::PaneState;
use crate::core::status::{LaneState, TaskStatus};
use crate::store::events::Event;

/// One task as the UI holds it: its status (liveness merged in by the source) and the
/// newest events of its log.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// The task's status, as `task status` gathers it.
    pub status: TaskStatus,
    /// Its newest events, oldest first (a bounded tail of events.jsonl).
    pub events: Vec<Event>,
}

/// Why an item needs a human, most urgent first (the order of the variants is the order
/// on screen: a dialog blocks an agent this minute, a stale lane may sort itself out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Why {
    /// The agent's screen shows a dialog (permission, trust, login…).
    Dialog,
    /// The agent waits for a permission no rule gave (the PM is asked too); `a`/`d` answer.
    Permit,
    /// The supervisor called a human (PM out of restarts, storage trouble…).
    Escalation,
    /// The agent's pane died while it was supposed to run.
    Dead,
    /// The agent's latest handoff says BLOCKED.
    Blocked,
    /// The agent's host cannot be reached.
    Unreachable,
    /// The agent's lane is held by an agent silent for too long.
    StaleLane,
    /// The agent hit a usage limit and resumes by itself.
    Paused,
}

impl Why {
    /// The short word in the first column.
    pub fn word(self) -> &'static str {
        match self {
            Why::Dialog => "dialog",
            Why::Permit => "permit",
            Why::Escalation => "escalated",
            Why::Dead => "dead",
            Why::Blocked => "blocked",
            Why::Unreachable => "unreachable",
            Why::StaleLane => "stale",
            Why::Paused => "paused",
        }
    }
}

/// One row under "Needs you".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Why, which also ranks it.
    pub why: Why,
    /// The task.
    pub task: String,
    /// The agent, when the item is about one.
    pub agent: Option<String>,
    /// One line saying what is wrong.
    pub text: String,
    /// Since when, when known.
    pub since: Option<DateTime<Utc>>,
    /// For a permission request: its task's index in the list and its id (`a`/`d` answer it).
    pub permit: Option<(usize, String)>,
}

impl Need {
    /// Identity for "marked seen": the same episode keeps its key; a new one (another
    /// since, another text) shows again.
    pub fn key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.why.word(),
            self.task,
            self.agent.as_deref().unwrap_or(""),
            self.since.map(|t| t.timestamp()).unwrap_or(0),
            self.text
        )
    }
}

/// Whether an agent that should be running has lost its pane.
fn is_dead(state: &str, pane: Option<PaneState>) -> bool {
    state == "dead" || (state == "running" && matches!(pane, Some(PaneState::Dead | PaneState::Gone)))
}

/// Everything that needs a human across `tasks`, most urgent first (then oldest first),
/// leaving out items whose key is in `seen`.
pub fn needs(tasks: &[TaskView], seen: &BTreeSet<String>) -> Vec<Need> {
    let mut out = Vec::new();
    for (index, t) in tasks.iter().enumerate() {
        permission_needs(index, &t.status, &mut out);
        escalation_needs(&t.status, &mut out);
        blocker_needs(&t.status, &mut out);
        for a in &t.status.agents {
            agent_needs(t, a, &mut out);
        }
        lane_needs(&t.status, &mut out);
    }
    out.retain(|n| !seen.contains(&n.key()));
    out.sort_by(|a, b| {
        (a.why, a.since.is_none(), a.since, &a.task, &a.agent).cmp(&(
            b.why,
            b.since.is_none(),
            b.since,
            &b.task,
            &b.agent,
        ))
    });
    out
}

/// A row that is not a permission request.
fn need(why: Why, s: &TaskStatus, agent: Option<&str>, text: String, since: Option<DateTime<Utc>>) -> Need {
    Need {
        why,
        task: s.task.clone(),
        agent: agent.map(str::to_string),
        text,
        since,
        permit: None,
    }
}

/// Waiting permission requests, answerable from the row (`index` is the task's).
fn permission_needs(index: usize, s: &TaskStatus, out: &mut Vec<Need>) {
    for p in &s.permissions {
        // Quoted and escaped as `task status` shows it: the text is the agent's, not ours.
        let what = if p.tool == "Bash" {
            format!("wants to run {:?}", p.command)
        } else {
            format!("wants to use {}: {:?}", p.tool, p.command)
        };
        out.push(Need {
            why: Why::Permit,
            task: s.task.clone(),
            agent: Some(p.agent.clone()),
            text: crate::core::handoff::one_line(&format!("{what} ({}); a allow, d deny", p.why), 200),
            since: Some(p.since),
            permit: Some((index, p.id.clone())),
        });
    }
}

/// Open escalations, but for a request's own (the human called for it): its row is the request's.
fn escalation_needs(s: &TaskStatus, out: &mut Vec<Need>) {
    let asks = |reason: &str| {
        s.permissions
            .iter()
            .any(|p| reason.starts_with(&format!("{} asks permission ({})", p.agent, p.id)))
    };
    for e in s.escalations.iter().filter(|e| !asks(&e.reason)) {
        out.push(need(
            Why::Escalation,
            s,
            None,
            crate::core::handoff::one_line(&e.reason, 200),
            Some(e.time),
        ));
    }
}

/// BLOCKED handoffs, since the agent's last handoff.
fn blocker_needs(s: &TaskStatus, out: &mut Vec<Need>) {
    for b in &s.blockers {
        let since = s
            .agents
            .iter()
            .find(|a| a.name == b.agent)
            .and_then(|a| a.last_handoff_time.as_deref())
            .and_then(parse_stamp);
        out.push(need(
            Why::Blocked,
            s,
            Some(&b.agent),
            format!("BLOCKED: {}", b.text),
            since,
        ));
    }
}

/// One agent's: a dialog or usage limit on its screen, a dead pane, an unreachable host.
fn agent_needs(t: &TaskView, a: &crate::core::status::AgentRow, out: &mut Vec<Need>) {
    let s = &t.status;
    let agent = Some(a.name.as_str());
    if let Some(at) = &a.attention {
        let (why, text) = match at.kind {
            Kind::NeedsHuman => (Why::Dialog, format!("{}: {}", at.reason, at.line)),
            Kind::Paused => (
                Why::Paused,
                match at.resets_at {
                    Some(r) => format!(
                        "{}; resumes {}",
                        at.reason,
                        r.with_timezone(&chrono::Local).format("%H:%M")
                    ),
                    None => at.reason.clone(),
                },
            ),
        };
        out.push(need(why, s, agent, text, Some(at.since)));
    } else if a.waiting_for_human {
        out.push(need(Why::Dialog, s, agent, "its screen shows a dialog".into(), None));
    }
    if is_dead(&a.state, a.pane) {
        let how = match (a.exit_status, a.exit_signal) {
            (_, Some(sig)) => format!("pane died (signal {sig})"),
            (Some(code), _) => format!("pane died (exit {code})"),
            _ => "pane is gone".into(),
        };
        // Since when: the supervisor's record of the death, when it made one.
        let since = t
            .events
            .iter()
            .rev()
            .find(|e| {
                e.kind == crate::store::events::Kind::AgentDied.as_str() && e.agent.as_deref() == Some(a.name.as_str())
            })
            .map(|e| e.time);
        out.push(need(
            Why::Dead,
            s,
            agent,
            format!("{how}; Enter to look, or restart it"),
            since,
        ));
    }
    if a.pane == Some(PaneState::Unreachable) || a.unreachable_since.is_some() {
        let text = format!("host {} does not answer", a.host);
        out.push(need(Why::Unreachable, s, agent, text, a.unreachable_since));
    }
}

/// Lanes held by an agent gone silent.
fn lane_needs(s: &TaskStatus, out: &mut Vec<Need>) {
    for l in s.lanes.iter().filter(|l| l.state == LaneState::Stale) {
        let text = format!("lane held but silent for {}", ago(l.idle_secs.unwrap_or(0)));
        out.push(need(Why::StaleLane, s, Some(&l.agent), text, l.since));
    }
}

/// A handoff name's stamp (`2025-11-27 09:00:00`, as status prints it) as a time.
fn parse_stamp(s: &str) -> Option<DateTime<Utc>> {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|n| n.and_utc())
}

pub use crate::core::clock::ago;

/// "since" as the age of `t` at `now` (`-` when unknown).
pub fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    t.map(|t| ago(now.signed_duration_since(t).num_seconds()))
        .unwrap_or_else(|| "-".into())
}

/// One line of the Tasks and agents list: a task, or one of its agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// `tasks[i]`.
    Task(usize),
    /// Agent `j` of `tasks[i]`.
    Agent(usize, usize),
}

/// The rows of the Tasks and agents list, each task followed by its agents, keeping only
/// what matches `filter` (a case-insensitive substring of the task or agent name; a task
/// whose name matches keeps all its agents).
pub fn rows(tasks: &[TaskView], filter: &str) -> Vec<Row> {
    let f = filter.to_lowercase();
    let mut out = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let task_hit = f.is_empty() || t.status.task.to_lowercase().contains(&f);
        let agents: Vec<usize> = (0..t.status.agents.len())
            .filter(|&j| task_hit || t.status.agents[j].name.to_lowercase().contains(&f))
            .collect();
        if task_hit || !agents.is_empty() {
            out.push(Row::Task(i));
            out.extend(agents.into_iter().map(|j| Row::Agent(i, j)));
        }
    }
    out
}

/// The lane word for an agent: `busy`, `stale`, `queued` (a spawn waits), or `-`.
/// How full an agent's context is (`ctx 45%`, with `+c` after a compaction by its client),
/// or `ctx -` when unknown.
pub fn fill_word(s: &TaskStatus, agent: &str) -> String {
    let a = s.cost.as_ref().and_then(|c| c.agents.iter().find(|a| a.agent == agent));
    let pct = a.and_then(|a| a.context.as_ref()?.percent);
    let compacted = if a.is_some_and(|a| a.compactions > 0) { "+c" } else { "" };
    match pct {
        Some(p) => format!("ctx {p}%{compacted}"),
        None => "ctx -".into(),
    }
}

pub fn lane_word(s: &TaskStatus, agent: &str) -> String {
    match s.lanes.iter().find(|l| l.agent == agent) {
        Some(l) if l.queued.is_some() => format!("{}+queued", l.state),
        Some(l) if l.state != LaneState::Free => l.state.to_string(),
        _ => "-".into(),
    }
}

/// The selected task's events, newest first, matching `filter`.
pub fn events<'a>(t: &'a TaskView, filter: &str) -> Vec<&'a Event> {
    let f = filter.to_lowercase();
    t.events
        .iter()
        .rev()
        .filter(|e| f.is_empty() || crate::store::events::render(e).to_lowercase().contains(&f))
        .collect()
}

/// The handoff file an event names, for Enter on an event (opens it in `$PAGER`).
pub fn event_handoff(e: &Event) -> Option<String> {
    let m = e.data.as_object()?;
    ["handoff", "file"]
        .iter()
        .find_map(|k| m.get(*k).and_then(|v| v.as_str()))
        .filter(|f| f.ends_with(".md"))
        .map(str::to_string)
}

#[cfg(test)]
#[path = "model_tests.rs"]
pub(crate) mod tests;
