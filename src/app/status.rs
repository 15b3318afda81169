//! `task status` and `task list`: read-only views of tasks, gathered here and rendered
//! by [`crate::core::status`].
//!
//! Cheap by construction: one directory listing for handoffs, one walk of artifacts,
//! and one parsed handoff per agent (its latest), so a task with 10,000 handoffs
//! answers in milliseconds; nothing here writes but usage.json (how far each agent's
//! transcript has been read, see [`crate::app::cost`]). [`task_status`] reads only the task
//! folder (no tmux); what the panes say (alive or dead, exit status, idle time, waiting
//! for a human) is asked of tmux by [`with_liveness`] and written over the matching
//! rows, and each lane's staleness is refreshed from it.

use crate::app::session::{self, Ctx};
use crate::core::clock;
use crate::core::error::{Error, Result};
use crate::core::handoff::{self, Status};
use crate::core::model::PaneState;
use crate::core::status::{AgentRow, Blocker, LaneRow, LaneState, ListRow, TaskStatus};
use crate::store::handoffs;
use crate::store::task::{self, Task};

/// The status of `t`, with liveness when any agent has a pane.
pub(crate) fn with_liveness(t: &Task) -> crate::Result<TaskStatus> {
    read_remote_usage(t);
    let mut s = task_status(t)?;
    add_liveness(t, &mut s);
    Ok(s)
}

/// Bring remote agents' usage up to date over their SSH masters (best effort, like liveness).
fn read_remote_usage(t: &Task) {
    let Ok(st) = t.state() else { return };
    if !st.agents.values().any(|a| a.host.remote().is_some()) {
        return;
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    rt.block_on(crate::app::cost::read_remote(t, &st));
}

/// Merge the panes' liveness into `s`. Best effort: status must show even when tmux or
/// the state cannot be reached, so any failure here leaves `s` as the folder says.
fn add_liveness(t: &Task, s: &mut TaskStatus) {
    let Ok(st) = t.state() else { return };
    if !st.agents.values().any(|a| a.pane.is_some()) {
        return;
    }
    let Ok(ctx) = Ctx::from_env() else {
        return;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let Ok(live) = rt.block_on(session::liveness(&ctx, &st, clock::now())) else {
        return;
    };
    for l in live {
        if let Some(row) = s.agents.iter_mut().find(|r| r.name == l.agent) {
            row.pane = Some(l.pane);
            row.exit_status = l.exit_status;
            row.exit_signal = l.exit_signal;
            row.idle_secs = l.idle_secs;
            row.waiting_for_human = l.waiting_for_human;
        }
        if let Some(lane) = s.lanes.iter_mut().find(|r| r.agent == l.agent) {
            lane.refresh(l.idle_secs.filter(|_| l.pane == PaneState::Alive));
        }
    }
}

/// Gather a task's status. Errors only for a missing task or an unreadable state.
pub fn task_status(task: &Task) -> Result<TaskStatus> {
    task.require()?;
    let state = task.state()?;
    let mut problems = Vec::new();
    let title = match task.spec() {
        Ok(s) => s.title.clone(),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let (names, skipped) = handoffs::list(&task.handoffs())?;
    let latest = crate::store::progress::latest_by_agent(&task.handoffs(), &names)?;
    let unprocessed = names
        .iter()
        .filter(|n| state.ledger.get(&n.file_name()).is_none())
        .count();

    let turns = crate::store::turns::all(task);
    let at = crate::core::clock::now();
    let mut agents: Vec<AgentRow> = Vec::new();
    let mut blockers = Vec::new();
    for name in agent_order(&names, &state) {
        let l = latest.iter().find(|l| l.agent() == name);
        if let Some(b) = l.and_then(|l| blocker(&name, l)) {
            blockers.push(b);
        }
        agents.push(agent_row(
            name.clone(),
            l,
            state.agents.get(&name),
            turns.get(&name),
            at,
        ));
    }
    let now = crate::core::clock::now();
    let spec = task.spec().ok();
    let timing = crate::core::protocol::lane::Timing::from_spec(spec.as_deref());
    let roster = match crate::store::roster::for_task(task) {
        Ok(r) => r.name.clone(),
        Err(e) => {
            problems.push(e.to_string());
            "?".into()
        }
    };
    let lanes = lane_rows(&state, timing.stale.as_secs(), now);
    let cost = crate::app::cost::gather(task, &state, now)
        .map_err(|e| tracing::warn!(task = %task.name, error = %e, "cannot gather usage"))
        .ok();
    Ok(TaskStatus {
        roster,
        lanes,
        task: task.name.to_string(),
        title,
        dir: task.dir().display().to_string(),
        phase: state.phase,
        last_checkin: state.last_checkin,
        next_checkin: state.next_checkin,
        agents,
        blockers,
        handoffs: names.len(),
        handoffs_unprocessed: unprocessed,
        handoffs_skipped: skipped.len(),
        artifacts: task::list_artifacts(task)?.len(),
        escalations: state.escalations.clone(),
        permissions: permission_rows(task),
        problems,
        git: state.git.clone(),
        watcher: handoffs::watch_stats::load(),
        rotation: crate::core::status::rotation_view(
            crate::app::rotate::policy(task),
            state.agents.get("pm").map(|_| pm_context(cost.as_ref())),
            state.agents.get("pm").map_or(0, |a| a.checkins),
        ),
        cost,
    })
}

/// Agents in the order they first handed off, then those only the state knows.
fn agent_order(names: &[crate::core::handoff::HandoffName], state: &crate::core::model::PmState) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for a in names.iter().map(|n| &n.agent).chain(state.agents.keys()) {
        if !order.contains(a) {
            order.push(a.clone());
        }
    }
    order
}

/// The blocker an agent's latest handoff reports, when it says BLOCKED.
fn blocker(agent: &str, l: &crate::core::handoff::Loaded) -> Option<Blocker> {
    (l.handoff.status == Status::Blocked).then(|| Blocker {
        agent: agent.to_string(),
        handoff: l.file.clone(),
        text: l
            .handoff
            .blockers()
            .map(|b| handoff::one_line(b, 100))
            .or_else(|| l.handoff.warnings.first().cloned())
            .unwrap_or_else(|| "no details given".into()),
    })
}

/// One agent's row from its latest handoff, its record and its client's last turn report
/// (the pane's liveness is filled in later, by whoever asks tmux).
fn agent_row(
    name: String,
    l: Option<&crate::core::handoff::Loaded>,
    st: Option<&crate::core::model::AgentState>,
    turn: Option<&crate::core::turn::Report>,
    at: chrono::DateTime<chrono::Utc>,
) -> AgentRow {
    AgentRow {
        last_status: l.map(|l| l.handoff.status),
        last_handoff: l.map(|l| l.file.clone()),
        last_handoff_time: l.map(|l| l.name.stamp.format("%Y-%m-%d %H:%M:%S").to_string()),
        recommended_next: l.and_then(|l| l.handoff.recommended_next.clone()),
        state: st.map_or_else(|| "unknown".into(), |s| s.status.to_string()),
        host: st.map_or_else(|| "local".into(), |s| s.host.to_string()),
        session: st.and_then(|s| s.session.clone()),
        pane: None,
        exit_status: None,
        exit_signal: None,
        idle_secs: None,
        waiting_for_human: false,
        unreachable_since: st.and_then(|s| s.unreachable_since),
        attention: st.and_then(|s| s.attention.clone()),
        worktree: st.and_then(|s| s.worktree.clone()),
        left_behind: st.map(|s| s.left_behind.clone()).unwrap_or_default(),
        placed: st.and_then(|s| s.placed.clone()),
        turn: turn.map(|r| {
            let set_aside = st.and_then(|s| s.turn_set_aside) == Some(r.at);
            crate::core::status::TurnView {
                text: crate::core::turn::describe(r, set_aside, at),
                report: r.clone(),
                set_aside,
            }
        }),
        name,
    }
}

/// Each lane: its holder, queue and last reason, and how long its holder has been quiet.
fn lane_rows(
    state: &crate::core::model::PmState,
    stale_after_secs: u64,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<LaneRow> {
    state
        .lanes
        .iter()
        .map(|(agent, l)| {
            let last = l.holder.as_ref().map(|h| {
                state
                    .agents
                    .get(agent)
                    .and_then(|a| a.last_activity)
                    .map_or(h.since, |t| t.max(h.since))
            });
            let mut row = LaneRow {
                agent: agent.clone(),
                state: LaneState::Free,
                since: l.holder.as_ref().map(|h| h.since),
                handoff: l.holder.as_ref().map(|h| h.handoff.clone()),
                queued: l.queued.as_ref().map(|q| q.handoff.clone()),
                last_reason: l.last_reason,
                released: l.released.clone(),
                idle_secs: last.map(|t| now.signed_duration_since(t).num_seconds().max(0)),
                stale_after_secs,
            };
            row.refresh(None);
            row
        })
        .collect()
}

/// The permission requests agents wait on (an unreadable store is logged, not fatal).
fn permission_rows(task: &Task) -> Vec<crate::core::status::PermissionRow> {
    crate::store::permits::pending(task)
        .unwrap_or_else(|e| {
            tracing::warn!(task = %task.name, error = %e, "cannot read the permission requests");
            Vec::new()
        })
        .into_iter()
        .map(|r| crate::core::status::PermissionRow {
            command: crate::store::permits::shown(&r.command).0,
            id: r.id,
            agent: r.agent,
            tool: r.tool,
            why: r.why,
            since: r.at,
        })
        .collect()
}

/// How full the PM's context is (percent), or why that is not known.
fn pm_context(cost: Option<&crate::core::cost::view::CostView>) -> std::result::Result<Option<u64>, String> {
    match cost.and_then(|c| c.agents.iter().find(|a| a.agent == "pm")) {
        Some(a) if !a.known => Err(a.unknown_why.clone().unwrap_or_else(|| "not read".into())),
        Some(a) => match &a.context {
            Some(c) if c.window.is_none() => Err(format!("no context window known for {}", c.model)),
            Some(c) => Ok(c.percent),
            None => Ok(None),
        },
        None => Err("its usage was not gathered".into()),
    }
}

/// List the tasks of a project. A task with a corrupt state is listed with its error.
pub fn list(project: &std::path::Path) -> Result<Vec<ListRow>> {
    let mut rows = Vec::new();
    for t in task::list_tasks(project)? {
        let (names, _) = handoffs::list(&t.handoffs())?;
        let mut agents: Vec<&str> = names.iter().map(|n| n.agent.as_str()).collect();
        agents.sort_unstable();
        agents.dedup();
        let (phase, last, error, extra_agents) = match t.state() {
            Ok(s) => {
                let extra = s.agents.keys().filter(|a| !agents.contains(&a.as_str())).count();
                (Some(s.phase), s.last_checkin, None, extra)
            }
            Err(e @ (Error::CorruptState { .. } | Error::StateTooNew { .. })) => (None, None, Some(e.to_string()), 0),
            Err(e) => return Err(e),
        };
        rows.push(ListRow {
            task: t.name.to_string(),
            phase,
            handoffs: names.len(),
            agents: agents.len() + extra_agents,
            last_checkin: last,
            error,
        });
    }
    Ok(rows)
}
