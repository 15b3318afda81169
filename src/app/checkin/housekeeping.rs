//! Housekeeping, the check-in's first stage: what must be true on disk and on screen
//! before the PM is told anything — remote pulls, lanes settled (which may start queued
//! spawns), worktree merges, the broker's waiting requests, a look at every screen — and
//! what the team has cost. Each step logs its own failure and never stops the check-in.

use chrono::{DateTime, Utc};

use super::snapshot;
use crate::app::recent::Lately;
use crate::core::checkin::Signal;
use crate::core::error::Result;
use crate::core::report::Trigger;
use crate::io::tmux::Tmux;
use crate::store::handoffs::Ready;
use crate::store::task::Task;

/// A handoff's check-in skips its own look at the screens when its caller looked this
/// recently: the daemon's liveness tick looks every 5 s, and a second look costs the
/// check-in a capture per pane (an ssh round trip for a remote one) for nothing new.
const LOOKED_WITHIN: std::time::Duration = std::time::Duration::from_secs(6);

/// Observe every agent's screen for dialogs and usage limits (see [`crate::core::attention`]);
/// a full look is noted in `lately`.
pub async fn tend_attention(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
    lately: &Lately,
) -> crate::app::attend::Tended {
    let ctx = match crate::app::session::Ctx::on(tmux) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look at the agents' screens");
            lately.looked.failed();
            return Default::default();
        }
    };
    let started = std::time::Instant::now();
    match crate::app::attend::tend(&ctx, task, now).await {
        Ok(t) => {
            lately.looked.done(started);
            t
        }
        Err(e) => {
            tracing::warn!(task = %task.name, error = %e, "looking for agents that need a human failed");
            lately.looked.failed();
            Default::default()
        }
    }
}

/// Settle the task's lanes on this tmux server (see [`crate::app::lanes::settle`]).
pub async fn settle_lanes(task: &Task, tmux: &Tmux, ready: Ready<'_>, now: DateTime<Utc>) {
    match crate::app::session::Ctx::on(tmux) {
        Ok(ctx) => {
            let s = crate::app::settle::settle(&ctx, task, ready, now).await;
            if s != crate::app::lanes::Settled::default() {
                tracing::info!(task = %task.name, released = ?s.released, dequeued = ?s.dequeued, failed = ?s.failed, "lanes settled");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot settle lanes"),
    }
}

/// Before the PM is told anything: remote pulls, lanes, worktree merges, the broker's
/// waiting requests and a look at every screen. Returns the signals they add.
pub(super) async fn housekeeping(
    task: &Task,
    tmux: &Tmux,
    trigger: Trigger,
    ready: Ready<'_>,
    lately: &Lately,
    now: DateTime<Utc>,
) -> Vec<Signal> {
    let mut extra = Vec::new();
    // Remote agents' handoffs and artifacts first (an unreachable host is skipped, not
    // fatal); the daemon's remote watch has usually pulled just now, and once is enough.
    let pulled = crate::app::session::pull_remotes_unless_fresh(task, std::time::Duration::from_secs(1), lately).await;
    for problem in &pulled.problems {
        tracing::warn!(task = %task.name, problem = %problem, "remote pull before the check-in failed");
    }
    ready.saw_renamed(&pulled.arrived);

    // Lanes: free those whose agent is done or dead, start what waited for them.
    settle_lanes(task, tmux, ready, now).await;

    // Worktrees: the work of agents that ended their turn is committed and merged (or found
    // conflicting) before the PM hears of their handoffs, so it hears both at once.
    extra.extend(crate::app::worktree::settle(task, ready, now).await);

    // Permission requests the broker is waiting on (the PM answers with `task permit`).
    extra.extend(permit_signals(task));

    // Dialogs and usage limits: escalate, pause, resume (cron mode has no other watcher).
    // A handoff's check-in is the one whose latency counts; a look moments ago will do.
    if trigger == Trigger::Handoff && lately.looked.within(LOOKED_WITHIN) {
        tracing::debug!(task = %task.name, "screens looked at moments ago; not again");
    } else {
        tend_attention(task, tmux, now, lately).await;
    }
    extra
}

/// The check-in's line for each request the PM may answer (not its own).
fn permit_signals(task: &Task) -> Vec<crate::core::checkin::signals::Signal> {
    let pending = crate::store::permits::pending(task).unwrap_or_else(|e| {
        tracing::warn!(task = %task.name, error = %e, "cannot read the permission requests");
        Vec::new()
    });
    pending
        .into_iter()
        .filter(|r| r.agent != "pm")
        .map(|r| {
            let (shown, truncated) = crate::store::permits::shown(&r.command);
            let what = if r.tool == "Bash" { "to run".to_string() } else { format!("to use {}", r.tool) };
            crate::core::checkin::signals::Signal {
                kind: crate::core::checkin::signals::SignalKind::PermissionRequest,
                agent: r.agent.clone(),
                file: None,
                text: format!(
                    "{} {}: {} wants {what} `{}{}` ({}); answer: `task permit {} {} allow` or `deny` (add --always, --reason \"…\")",
                    crate::core::checkin::signals::PERMIT_MARK,
                    r.id,
                    r.agent,
                    shown.replace('`', "'"),
                    if truncated { "…" } else { "" },
                    r.why.replace('`', "'"),
                    task.name,
                    r.id
                ),
            }
        })
        .collect()
}

/// What the team has cost, for the message and the budgets (with the view it came from);
/// agents a used-up budget covers are told to wrap up.
pub(super) async fn cost_note(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
) -> Result<(snapshot::CostNote, Option<crate::core::cost::view::CostView>)> {
    // What the team has cost: read before the lock (transcripts can be large).
    let before = task.state()?;
    crate::app::cost::read_remote(task, &before).await;
    let spend = crate::app::cost::gather(task, &before, now)
        .map_err(|e| tracing::warn!(task = %task.name, error = %e, "cannot gather usage for the check-in"))
        .ok();
    let cost = snapshot::CostNote {
        line: spend
            .as_ref()
            .map(crate::core::cost::view::checkin_line)
            .unwrap_or_default(),
        standings: spend.as_ref().map(|v| v.budgets.clone()).unwrap_or_default(),
        gathered: spend.is_some(),
        block: spend.as_ref().map(crate::core::cost::view::render_progress),
    };
    // A used-up budget: every running agent it covers is told once to wrap up (under the
    // check-in lock, so two check-ins never tell one agent twice).
    crate::app::cost::tell_wrap_up(task, tmux, &cost.standings, now).await;
    Ok((cost, spend))
}
