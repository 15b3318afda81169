//! What `task status` and `task list` show, and how: the rows (typed, serialised as
//! `--json`) and their human rendering. Gathering them is [`crate::app::status`]'s.

use chrono::{DateTime, Utc};
use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;

use crate::core::handoff::{self, Status};
use crate::core::model::Phase;

/// The `--json` schema version of status and list output.
pub const JSON_SCHEMA: u32 = 1;

/// One agent's row.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRow {
    /// Agent name.
    pub name: String,
    /// Status of its latest handoff, if any.
    pub last_status: Option<Status>,
    /// Its latest handoff file.
    pub last_handoff: Option<String>,
    /// The time in that handoff's name (local, `YYYY-MM-DD HH:MM:SS`).
    pub last_handoff_time: Option<String>,
    /// Recommended next agent from that handoff.
    pub recommended_next: Option<String>,
    /// What the supervisor recorded: running, stopped, dead, … (`unknown` when never started by it).
    pub state: String,
    /// `local` or the remote destination.
    pub host: String,
    /// tmux session, when recorded.
    pub session: Option<String>,
    /// Pane liveness: alive, dead, gone, not-started, unreachable (null when tmux was not asked).
    pub pane: Option<crate::core::model::PaneState>,
    /// Exit status of a dead pane.
    pub exit_status: Option<i32>,
    /// Signal that killed a dead pane.
    pub exit_signal: Option<i32>,
    /// Seconds since the pane last showed activity.
    pub idle_secs: Option<i64>,
    /// The pane shows a permission or trust dialog.
    pub waiting_for_human: bool,
    /// A remote agent's host has not answered since then (`null` when reachable or local).
    pub unreachable_since: Option<DateTime<Utc>>,
    /// The agent needs a human or is paused by a usage limit, as the supervisor last saw it
    /// (`null` when neither); see docs/json.md.
    pub attention: Option<crate::core::attention::Attention>,
    /// Its git worktree (path, branch, base commit, stage), when it has one; see docs/worktrees.md.
    pub worktree: Option<crate::core::worktree::AgentWorktree>,
    /// What its client last said about its turn through its hooks (`null` for clients
    /// without them); see docs/json.md.
    pub turn: Option<TurnView>,
    /// Runs of it left on hosts that stopped answering (failover), stopped when they answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_behind: Vec<crate::core::model::LeftBehind>,
    /// Why the fleet chose its host, when it was placed (`hosts:` in task.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placed: Option<String>,
}

/// The PM rotation's settings and where the PM stands against them.
#[derive(Debug, Clone, Serialize)]
pub struct RotationView {
    /// `rotate_at:` in percent; null when off.
    pub at_percent: Option<u64>,
    /// `rotate_every:` check-ins; null when off.
    pub every: Option<u32>,
    /// The PM's current conversation's fill, when known.
    pub pm_percent: Option<u64>,
    /// Check-ins delivered to its current conversation.
    pub pm_checkins: u32,
    /// Why rotation cannot happen as set (a fill unknown, a bad setting), when so.
    pub note: Option<String>,
}

/// The rotation line, or None for a task with no PM yet. Pure.
pub fn rotation_view(
    policy: std::result::Result<crate::core::rotation::Policy, String>,
    pm_known: Option<std::result::Result<Option<u64>, String>>,
    pm_checkins: u32,
) -> Option<RotationView> {
    let known = pm_known?;
    let p = match policy {
        Ok(p) => p,
        Err(e) => {
            return Some(RotationView {
                at_percent: None,
                every: None,
                pm_percent: None,
                pm_checkins,
                note: Some(format!("off: {e}")),
            });
        }
    };
    let (pm_percent, unknown_why) = match known {
        Ok(p) => (p, None),
        Err(why) => (None, Some(why)),
    };
    let note = match (p.at_percent, p.every, &unknown_why) {
        (None, None, _) => Some("off (rotate_at: off)".to_string()),
        (Some(_), None, Some(why)) => Some(format!(
            "off in effect: the PM's context fill is unknown ({why}); set rotate_every: to rotate by check-ins"
        )),
        (Some(_), Some(_), Some(why)) => Some(format!("by check-ins only: the PM's context fill is unknown ({why})")),
        _ => None,
    };
    Some(RotationView {
        at_percent: p.at_percent,
        every: p.every,
        pm_percent,
        pm_checkins,
        note,
    })
}

fn rotation_line(r: &RotationView) -> String {
    let mut parts = Vec::new();
    if let Some(at) = r.at_percent {
        parts.push(match r.pm_percent {
            Some(now) => format!("at {at}% of the PM's context (now {now}%)"),
            None => format!("at {at}% of the PM's context"),
        });
    }
    if let Some(n) = r.every {
        parts.push(format!("every {n} check-ins ({} so far)", r.pm_checkins));
    }
    let mut line = parts.join(", ");
    if let Some(n) = &r.note {
        if !line.is_empty() {
            line.push_str(" — ");
        }
        line.push_str(n);
    }
    format!("Rotation:      {line}\n")
}

/// An agent's last turn report ([`crate::core::turn`]) as status shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TurnView {
    #[serde(flatten)]
    pub report: crate::core::turn::Report,
    /// Its screen contradicted it, and it no longer counts.
    pub set_aside: bool,
    /// One phrase: `ended 12s ago`.
    pub text: String,
}

/// A blocker from an agent's latest handoff.
#[derive(Debug, Clone, Serialize)]
pub struct Blocker {
    /// Agent name.
    pub agent: String,
    /// Handoff file.
    pub handoff: String,
    /// One-line description.
    pub text: String,
}

/// A permission request an agent waits on (the broker's; answered with `task permit`).
#[derive(Debug, Clone, Serialize)]
pub struct PermissionRow {
    /// Its id (`p-…`).
    pub id: String,
    /// The agent waiting.
    pub agent: String,
    /// Claude Code's tool.
    pub tool: String,
    /// What it wants to run, cut at 300 characters.
    pub command: String,
    /// Why no rule decided it.
    pub why: String,
    /// When it was asked.
    pub since: DateTime<Utc>,
}

/// A lane as `task status` sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneState {
    /// Nobody holds it.
    Free,
    /// Held by an agent that shows signs of life.
    Busy,
    /// Held, but silent for `stale_after_secs`: the next spawn (or queued spawn) reclaims it.
    Stale,
}

impl std::fmt::Display for LaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LaneState::Free => "free",
            LaneState::Busy => "busy",
            LaneState::Stale => "stale",
        })
    }
}

/// One lane as `task status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LaneRow {
    /// The agent type.
    pub agent: String,
    /// Free, busy or stale.
    pub state: LaneState,
    /// Held since.
    pub since: Option<DateTime<Utc>>,
    /// The handoff the holder was started with.
    pub handoff: Option<String>,
    /// The spawn waiting in the lane, by handoff.
    pub queued: Option<String>,
    /// The last spawn request's reason code.
    pub last_reason: Option<crate::core::protocol::lane::Reason>,
    /// The last release: why, and when.
    pub released: Option<crate::core::protocol::lane::Released>,
    /// Seconds since the holder's last sign of life.
    pub idle_secs: Option<i64>,
    /// After how long without a sign of life the lane counts as stale.
    pub stale_after_secs: u64,
}

impl LaneRow {
    /// Recompute busy/stale from a fresher idle time (the pane's activity).
    pub fn refresh(&mut self, idle_secs: Option<i64>) {
        if let (Some(new), Some(old)) = (idle_secs, self.idle_secs) {
            self.idle_secs = Some(new.min(old));
        } else if idle_secs.is_some() {
            self.idle_secs = idle_secs;
        }
        if self.since.is_some() {
            let stale = self.idle_secs.is_some_and(|i| i >= self.stale_after_secs as i64);
            self.state = if stale { LaneState::Stale } else { LaneState::Busy };
        }
    }
}

/// The whole status of one task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskStatus {
    /// Task name.
    pub task: String,
    /// task.md title.
    pub title: Option<String>,
    /// Task folder.
    pub dir: String,
    /// Phase from pm_state.json.
    pub phase: Phase,
    /// Last delivered check-in.
    pub last_checkin: Option<DateTime<Utc>>,
    /// Next scheduled check-in.
    pub next_checkin: Option<DateTime<Utc>>,
    /// Agents, by first appearance.
    pub agents: Vec<AgentRow>,
    /// Blockers from latest handoffs.
    pub blockers: Vec<Blocker>,
    /// Handoff files.
    pub handoffs: usize,
    /// Handoffs not yet processed by a check-in.
    pub handoffs_unprocessed: usize,
    /// Entries in handoffs/ that are not handoffs (bad names, symlinks…).
    pub handoffs_skipped: usize,
    /// Artifact files.
    pub artifacts: usize,
    /// Open escalations: what needs a human.
    pub escalations: Vec<crate::core::model::Escalation>,
    /// Permission requests agents wait on, oldest first.
    pub permissions: Vec<PermissionRow>,
    /// The task's roster.
    pub roster: String,
    /// One row per lane (agent type) that has been used.
    pub lanes: Vec<LaneRow>,
    /// Problems reading the task (task.md errors), one line each.
    pub problems: Vec<String>,
    /// The daemon's file watcher, daemon-wide: its event queue overflows (each one a
    /// rescan of every task's handoffs) since it started; `None` when no daemon saved any.
    pub watcher: Option<crate::core::model::WatchStats>,
    /// The PM rotation (null before the PM started).
    pub rotation: Option<RotationView>,
    /// What the team has cost (`null` when it could not be gathered); see docs/json.md.
    pub cost: Option<crate::core::cost::view::CostView>,
    /// The task's git side (start commit, task branch and its head); `null` outside git.
    pub git: Option<crate::core::worktree::TaskGit>,
}

fn opt_time(t: Option<DateTime<Utc>>) -> String {
    t.map(crate::core::clock::local_time).unwrap_or_else(|| "-".into())
}

fn table() -> Table {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(100);
    t
}

/// Human rendering of one task's status; fits 100 columns. Top to bottom: the task's
/// facts, its agents, their worktrees, the lanes, who cannot go on, and what needs a human.
pub fn render(s: &TaskStatus) -> String {
    let mut out = facts(s);
    out.push('\n');
    out.push_str(&agents_table(s));
    out.push_str(&worktrees_table(s));
    out.push_str(&placements(s));
    out.push_str(&lanes_table(s));
    out.push_str(&attention_lines(s));
    out.push('\n');
    out.push_str(&needs_a_human(s));
    out
}

/// Task, folder, phase, check-ins, counts, cost, branch and the watcher's troubles.
fn facts(s: &TaskStatus) -> String {
    let mut out = String::new();
    out.push_str(&format!("Task:          {}", s.task));
    if let Some(t) = &s.title {
        out.push_str(&format!(" — {}", handoff::one_line(t, 70)));
    }
    out.push('\n');
    out.push_str(&format!("Folder:        {}\n", s.dir));
    out.push_str(&format!("Phase:         {}\n", s.phase));
    out.push_str(&format!("Last check-in: {}\n", opt_time(s.last_checkin)));
    out.push_str(&format!("Next check-in: {}\n", opt_time(s.next_checkin)));
    out.push_str(&format!(
        "Handoffs:      {} ({} not yet checked in{})\n",
        s.handoffs,
        s.handoffs_unprocessed,
        if s.handoffs_skipped > 0 {
            format!(", {} skipped", s.handoffs_skipped)
        } else {
            String::new()
        }
    ));
    out.push_str(&format!("Artifacts:     {}\n", s.artifacts));
    if let Some(c) = &s.cost {
        out.push_str(&crate::core::cost::view::render_status(c));
    }
    if let Some(r) = &s.rotation {
        out.push_str(&rotation_line(r));
    }
    if let Some(g) = &s.git {
        out.push_str(&match (&g.branch, &g.head) {
            (Some(b), Some(h)) => format!(
                "Branch:        {b} at {} (from {})\n",
                crate::core::worktree::short(h),
                crate::core::worktree::short(&g.start_commit)
            ),
            _ => format!(
                "Started at:    commit {}\n",
                crate::core::worktree::short(&g.start_commit)
            ),
        });
    }
    if let Some(w) = s.watcher.as_ref().filter(|w| w.overflows > 0) {
        out.push_str(&format!(
            "Watcher:       {} event queue overflow(s), handoffs rescanned (last {}; daemon-wide)\n",
            w.overflows,
            opt_time(w.last_overflow)
        ));
    }
    if let Some(w) = s.watcher.as_ref().filter(|w| w.dropped > 0) {
        out.push_str(&format!(
            "Watcher:       {} event(s) dropped while the daemon was busy, found by the 5 s rescan (last {}; daemon-wide)\n",
            w.dropped,
            opt_time(w.last_drop)
        ));
    }
    out
}

/// One row per agent: state, pane (and why it is stopped), idle time, last handoff.
fn agents_table(s: &TaskStatus) -> String {
    let mut out = String::new();
    if s.agents.is_empty() {
        out.push_str("No agents yet.\n");
    } else {
        let mut t = table();
        t.set_header(vec![
            "AGENT",
            "STATE",
            "PANE",
            "IDLE",
            "TURN",
            "LAST STATUS",
            "LAST HANDOFF",
            "NEXT",
        ]);
        for a in &s.agents {
            let pane = match (&a.pane, a.exit_status) {
                (Some(p), Some(code)) => format!("{p} ({code})"),
                (Some(p), None) if a.exit_signal.is_some() => format!("{p} (signal {})", a.exit_signal.unwrap_or(0)),
                (Some(p), None) if a.waiting_for_human => format!("{p}, needs human"),
                (Some(p), None)
                    if a.attention
                        .as_ref()
                        .is_some_and(|x| x.kind == crate::core::attention::Kind::Paused) =>
                {
                    format!("{p}, paused")
                }
                (Some(p), None) => p.to_string(),
                (None, _) => "-".into(),
            };
            let pane = match a.unreachable_since {
                Some(since) => format!(
                    "unreachable since {}",
                    since.with_timezone(&chrono::Local).format("%m-%d %H:%M")
                ),
                None => pane,
            };
            let pane = match a.left_behind.first() {
                Some(l) => format!(
                    "{pane}; moved off {} (its old run is stopped when that host answers)",
                    l.host.to_string().split(':').next().unwrap_or("")
                ),
                None => pane,
            };
            let name = match a.host.as_str() {
                "" | "local" => a.name.clone(),
                h => format!("{}@{}", a.name, h.split(':').next().unwrap_or(h)),
            };
            t.add_row(vec![
                name,
                a.state.clone(),
                pane,
                a.idle_secs.map(idle).unwrap_or_else(|| "-".into()),
                a.turn.as_ref().map_or_else(|| "-".into(), |t| t.text.clone()),
                a.last_status.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
                a.last_handoff_time.clone().unwrap_or_else(|| "-".into()),
                a.recommended_next.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&trim_lines(&t.to_string()));
        out.push('\n');
    }
    out
}

/// Why the fleet put each placed agent where it runs (nothing when none was placed).
fn placements(s: &TaskStatus) -> String {
    let placed: Vec<String> = s
        .agents
        .iter()
        .filter_map(|a| Some(format!("  {}: {}\n", a.name, a.placed.as_deref()?)))
        .collect();
    if placed.is_empty() {
        return String::new();
    }
    format!("\nPlaced by the fleet:\n{}", placed.concat())
}

/// The agents working in git worktrees (nothing when none does).
fn worktrees_table(s: &TaskStatus) -> String {
    let mut out = String::new();
    let trees: Vec<_> = s
        .agents
        .iter()
        .filter_map(|a| Some((a.name.as_str(), a.worktree.as_ref()?)))
        .collect();
    if !trees.is_empty() {
        out.push_str("\nWorktrees:\n");
        let mut t = table();
        t.set_header(vec!["  AGENT", "STAGE", "BRANCH", "BASE", "FOLDER"]);
        for (name, w) in trees {
            t.add_row(vec![
                format!("  {name}"),
                w.stage_word().to_string(),
                w.branch.clone().unwrap_or_else(|| "(detached)".into()),
                crate::core::worktree::short(&w.base).to_string(),
                w.path.display().to_string(),
            ]);
        }
        out.push_str(&trim_lines(&t.to_string()));
        out.push('\n');
    }
    out
}

/// The roster's lanes: who holds each, what is queued, the last spawn and release.
fn lanes_table(s: &TaskStatus) -> String {
    let mut out = String::new();
    if !s.lanes.is_empty() {
        out.push_str(&format!(
            "\nLanes (roster {}; stale after {}):\n",
            s.roster,
            idle(s.lanes[0].stale_after_secs as i64)
        ));
        let mut t = table();
        t.set_header(vec![
            "  LANE",
            "STATE",
            "SINCE",
            "IDLE",
            "QUEUED",
            "LAST SPAWN",
            "LAST RELEASE",
        ]);
        for l in &s.lanes {
            let file = |p: &str| {
                std::path::Path::new(p)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| p.to_string())
            };
            t.add_row(vec![
                format!("  {}", l.agent),
                l.state.to_string(),
                opt_time(l.since),
                l.idle_secs
                    .filter(|_| l.since.is_some())
                    .map(idle)
                    .unwrap_or_else(|| "-".into()),
                l.queued.as_deref().map(file).unwrap_or_else(|| "-".into()),
                l.last_reason
                    .map(|r| r.code().to_string())
                    .unwrap_or_else(|| "-".into()),
                l.released
                    .as_ref()
                    .map(|r| format!("{} ({})", r.reason.as_str(), crate::core::clock::local_time(r.at)))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&trim_lines(&t.to_string()));
        out.push('\n');
    }
    out
}

/// Agents at a dialog or paused by a usage limit, with the episode's story.
fn attention_lines(s: &TaskStatus) -> String {
    let mut out = String::new();
    let waiting: Vec<&AgentRow> = s
        .agents
        .iter()
        .filter(|a| a.attention.is_some() || a.waiting_for_human)
        .collect();
    if !waiting.is_empty() {
        out.push_str("\nAttention:\n");
        for a in waiting {
            let line = match &a.attention {
                Some(at) => {
                    use crate::core::attention::Kind;
                    let mut l = match at.kind {
                        Kind::NeedsHuman => format!(
                            "needs a human since {}: {} \"{}\"{}",
                            crate::core::clock::local_time(at.since),
                            at.reason,
                            at.line,
                            match at.escalated_at {
                                Some(t) => format!(" (human called {})", crate::core::clock::local_time(t)),
                                None => " (a human is called if it stays)".into(),
                            }
                        ),
                        Kind::Paused => format!(
                            "paused until {}{}: \"{}\"",
                            at.resets_at
                                .map(crate::core::clock::local_time)
                                .unwrap_or_else(|| "?".into()),
                            if at.reset_parsed {
                                ""
                            } else {
                                " (reset not shown; default wait)"
                            },
                            at.line
                        ),
                    };
                    if let Some(r) = at.resumed_at {
                        l.push_str(&format!(", resumed {}", crate::core::clock::local_time(r)));
                    }
                    l
                }
                None => "shows a dialog (not yet seen by the supervisor)".into(),
            };
            out.push_str(&format!("  {}  {line}\n", a.name));
        }
    }
    out
}

/// Blockers, escalations, permission requests waiting, and problems reading the task.
fn needs_a_human(s: &TaskStatus) -> String {
    let mut out = String::new();
    if s.blockers.is_empty() {
        out.push_str("Blockers:      none\n");
    } else {
        out.push_str("Blockers:\n");
        for b in &s.blockers {
            out.push_str(&format!("  {} ({}): {}\n", b.agent, b.handoff, b.text));
        }
    }
    for e in &s.escalations {
        out.push_str(&format!(
            "NEEDS A HUMAN: {} (since {})\n",
            e.reason,
            crate::core::clock::local_time(e.time)
        ));
    }
    for p in &s.permissions {
        out.push_str(&format!(
            "WAITING FOR PERMISSION: {} {} wants {} {:?} since {}; answer: task permit {} {} allow|deny\n",
            p.id,
            p.agent,
            if p.tool == "Bash" {
                "to run".to_string()
            } else {
                format!("to use {}", p.tool)
            },
            p.command,
            crate::core::clock::local_time(p.since),
            s.task,
            p.id
        ));
    }
    for p in &s.problems {
        out.push_str(&format!("Problem:       {p}\n"));
    }
    out
}

fn idle(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn trim_lines(s: &str) -> String {
    s.lines().map(|l| l.trim_end()).collect::<Vec<_>>().join("\n")
}

/// One row of `task list`.
#[derive(Debug, Clone, Serialize)]
pub struct ListRow {
    /// Task name.
    pub task: String,
    /// Phase, when the state is readable.
    pub phase: Option<Phase>,
    /// Number of handoffs.
    pub handoffs: usize,
    /// Number of agents seen.
    pub agents: usize,
    /// Last check-in.
    pub last_checkin: Option<DateTime<Utc>>,
    /// A problem reading it (corrupt state), instead of failing the whole list.
    pub error: Option<String>,
}

/// Human rendering of `task list`.
pub fn render_list(project: &std::path::Path, rows: &[ListRow]) -> String {
    if rows.is_empty() {
        return format!(
            "No tasks in {}/tasks. Create one with `task new <name>`.\n",
            project.display()
        );
    }
    let mut t = table();
    t.set_header(vec!["TASK", "PHASE", "AGENTS", "HANDOFFS", "LAST CHECK-IN"]);
    for r in rows {
        t.add_row(vec![
            r.task.clone(),
            r.phase
                .map(|p| p.to_string())
                .unwrap_or_else(|| "STATE UNREADABLE".into()),
            r.agents.to_string(),
            r.handoffs.to_string(),
            opt_time(r.last_checkin),
        ]);
    }
    let mut s = trim_lines(&t.to_string());
    s.push('\n');
    for r in rows {
        if let Some(e) = &r.error {
            s.push_str(&format!("{}: {e}\n", r.task));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::rotation::Policy;

    #[test]
    fn rotation_says_where_the_pm_stands_and_why_it_cannot_rotate() {
        let on = Policy {
            at_percent: Some(60),
            every: None,
        };
        assert!(rotation_view(Ok(on), None, 0).is_none(), "no PM yet");
        let r = rotation_view(Ok(on), Some(Ok(Some(12))), 3).unwrap();
        assert_eq!(
            rotation_line(&r),
            "Rotation:      at 60% of the PM's context (now 12%)\n"
        );
        let r = rotation_view(
            Ok(on),
            Some(Err("the demo runtime keeps no usage record we read".into())),
            0,
        )
        .unwrap();
        assert!(
            rotation_line(&r).contains("off in effect: the PM's context fill is unknown (the demo runtime"),
            "{}",
            rotation_line(&r)
        );
        let both = Policy {
            at_percent: Some(60),
            every: Some(20),
        };
        let r = rotation_view(Ok(both), Some(Err("x".into())), 4).unwrap();
        assert_eq!(
            rotation_line(&r),
            "Rotation:      at 60% of the PM's context, every 20 check-ins (4 so far) — by check-ins only: the PM's context fill is unknown (x)\n"
        );
        let r = rotation_view(Err("rotate_at: \"x\" is not a percentage".into()), Some(Ok(None)), 0).unwrap();
        assert!(rotation_line(&r).contains("off: rotate_at"), "{}", rotation_line(&r));
    }
}
