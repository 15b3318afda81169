//! Settling a task's lanes: release every lane whose agent is done, dead or (when someone
//! waits) stale, then start the spawn queued behind each lane that freed. Run by the
//! daemon's tick, every check-in and every spawn, so no lane waits on a timer; the
//! decisions are [`crate::core::protocol::lane`]'s and the lane I/O is [`crate::app::lanes`]'s.

use chrono::{DateTime, Utc};

use crate::app::context::Ctx;
use crate::app::lanes::{Settled, Surroundings, died_before_replaced, observe_in, release};
use crate::core::error::Result;
use crate::core::protocol::lane::{self, Reason, Timing};
use crate::store::events::Kind as EventKind;
use crate::store::handoffs::Ready;
use crate::store::task::Task;

/// Release what is due and start what was waiting. Never fails as a whole: a
/// problem with one lane is logged and the others are still settled.
pub async fn settle(ctx: &Ctx, task: &Task, ready: Ready<'_>, now: DateTime<Utc>) -> Settled {
    let mut out = Settled::default();
    let Ok(st) = task.state() else { return out };
    if st.lanes.is_empty() {
        return out;
    }
    let timing = Timing::from_spec(task.spec().ok().as_deref());
    // One handoff listing and one pane listing for all the lanes.
    let around = match st.lanes.values().any(|l| l.holder.is_some()) {
        true => Some(Surroundings::read(ctx, task, &st).await),
        false => None,
    };
    // The panes of the runs found dead, by agent: a spawn queued behind one replaces its record.
    let mut dead_runs = std::collections::BTreeMap::new();
    for (agent, l) in &st.lanes {
        let (Some(h), Some(around)) = (&l.holder, &around) else {
            continue;
        };
        let (seen, last) = observe_in(around, task, &st, agent, h, ready, now);
        let Some(reason) = lane::release_due(h, &seen, l.queued.is_some(), now, &timing) else {
            continue;
        };
        match release(task, agent, Some(h.since), reason, last.as_ref(), now) {
            Ok(true) => {
                if reason == lane::ReleaseReason::PaneDied {
                    dead_runs.insert(agent.clone(), h.pane.clone());
                }
                out.released.push((agent.clone(), reason));
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(task = %task.name, agent, error = %e, "cannot release a lane"),
        }
    }
    let Ok(st) = task.state() else { return out };
    for (agent, l) in &st.lanes {
        if l.holder.is_some() || l.queued.is_none() {
            continue;
        }
        // A used-up budget holds the queue (a spawn refused now would be lost); it starts
        // once the budget is raised.
        if let Some(why) = crate::app::cost::refusal(task, agent, now) {
            tracing::info!(task = %task.name, agent, why = %why, "a queued spawn waits: its budget is used up");
            continue;
        }
        // The dead run's record is about to be replaced: its death recorded first (left to
        // the daemon's look, which tells the PM, while the queue waits).
        if let Some(pane) = dead_runs.get(agent)
            && let Err(e) = died_before_replaced(task, agent, pane.as_deref(), now)
        {
            tracing::warn!(task = %task.name, agent, error = %e, "cannot record a death");
        }
        match start_queued(ctx, task, agent, now).await {
            Ok(Some(_)) => out.dequeued.push(agent.clone()),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(task = %task.name, agent, error = %e, "a queued spawn could not start");
                let _ = crate::store::events::append(
                    task,
                    EventKind::SpawnDequeueFailed,
                    Some(agent),
                    serde_json::json!({"error": e.to_string()}),
                    now,
                );
                out.failed.push((agent.clone(), e.to_string()));
            }
        }
    }
    out
}

/// Take the queued spawn out of a free lane and start it (SPAWN_DEQUEUED).
async fn start_queued(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    now: DateTime<Utc>,
) -> Result<Option<crate::core::report::SpawnReport>> {
    let q = task.update_state(now, |st| {
        Ok(st
            .lanes
            .get_mut(agent)
            .filter(|l| l.holder.is_none())
            .and_then(|l| l.queued.take()))
    })?;
    let Some(q) = q else { return Ok(None) };
    let name: crate::core::names::AgentName = agent.parse()?;
    let r = crate::app::session::spawn_with(
        ctx,
        task,
        &name,
        std::path::Path::new(&q.handoff),
        &q.flags,
        crate::app::session::SpawnMode::Dequeue,
        now,
    )
    .await?;
    debug_assert!(matches!(r.reason, Reason::SpawnDequeued | Reason::SpawnQueued));
    // Queued again: no host of the fleet has a free slot yet.
    if r.reason == Reason::SpawnQueued {
        return Ok(None);
    }
    Ok(Some(r))
}
