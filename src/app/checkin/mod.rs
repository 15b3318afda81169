//! Check-ins: take the new handoffs from the ledger, compute the signals
//! (docs/protocol.md#signals) and the phase (docs/protocol.md#phases), refresh progress.md,
//! and deliver the message to the PM with verified delivery.
//!
//! One check-in is a pipeline, read top to bottom in [`run_inner`], one stage per file:
//!
//! 1. [`housekeeping`] — remote pulls, lanes, worktree merges, waiting permission
//!    requests, a look at the screens; what the team has cost.
//! 2. the plan ([`snapshot`]) — under the state lock, from one snapshot of the state and
//!    the handoff listing: the evaluation, escalations opened, progress.md (written once)
//!    and the message.
//! 3. [`recover`] — an unfinished check-in (intent saved, then a crash) is settled before
//!    anything is delivered again.
//! 4. [`decide`] — pure: skip, record without telling anyone, or deliver (and whether the
//!    PM can take a message now).
//! 5. [`deliver`] — the intent saved, then the message pasted and its submission verified,
//!    with no state lock held.
//! 6. [`finish`] — recorded on a fresh read, only once delivery is confirmed, so an
//!    undelivered check-in is retried rather than lost; an event and the report.
//!
//! Two check-ins of one task never overlap: the later one finds the check-in lock held and
//! stands down. The pure parts of the evaluation live in `core::checkin` (signals, phase,
//! message); [`record`] is what a recorded check-in saves.

mod decide;
mod deliver;
mod demand;
mod finish;
mod housekeeping;
pub mod intent;
mod record;
mod recover;
mod snapshot;
pub mod storage;

use chrono::{DateTime, Utc};

pub use crate::core::checkin::{Signal, undeliverable};
use decide::{Decision, decide};
pub(crate) use demand::{Checkin, checkin};
pub use housekeeping::{settle_lanes, tend_attention};
use recover::Settled;
use snapshot::evaluate_locked;
#[cfg(test)]
use {
    crate::core::checkin::message::render_message,
    crate::core::checkin::signals::{Evaluation, attention_signals, evaluate},
    record::{apply_handoffs, record, status_after},
};

use crate::core::error::{Error, Result};
use crate::core::handoff::Loaded;
use crate::core::report::{CheckinReport, Trigger};
use crate::io::tmux::Tmux;
use crate::store::handoffs::Ready;
use crate::store::task::Task;

/// Save when the next scheduled check-in is due.
pub fn save_next_checkin(task: &Task, next: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<()> {
    task.update_state(now, |st| {
        st.next_checkin = next;
        Ok(())
    })
}

/// Run one check-in: scribe, signals, message, verified delivery, then record.
/// `extra` signals (agent deaths) are added to those computed from handoffs.
/// A scheduled check-in with nothing to say is recorded in events.jsonl but not
/// sent, unless task.md sets `quiet_checkins: false`. Once the PM has declared the
/// task COMPLETE or BLOCKED, a check-in is recorded but not sent unless an agent
/// reported since ([`undeliverable`]). Every check-in that runs saves when the
/// next one is due by `schedule` (`None`: nothing schedules this task).
pub async fn run(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
    trigger: Trigger,
    extra: Vec<Signal>,
    schedule: Option<&crate::io::schedule::Schedule>,
) -> Result<CheckinReport> {
    let lately = crate::app::recent::Lately::default();
    run_with(task, tmux, now, trigger, extra, Ready::All, &lately, schedule).await
}

/// [`run`], taking only the new handoffs `ready` accepts; the rest stay new
/// for a later check-in. The daemon uses it to leave alone a file that is
/// still being written (no close or rename seen, modified moments ago), and hands in
/// what its actor did `lately` (a pull, a look at the screens) so a handoff's check-in
/// need not do it again.
#[allow(clippy::too_many_arguments)]
pub async fn run_with(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
    trigger: Trigger,
    extra: Vec<Signal>,
    ready: Ready<'_>,
    lately: &crate::app::recent::Lately,
    schedule: Option<&crate::io::schedule::Schedule>,
) -> Result<CheckinReport> {
    let cycle = Cycle {
        trigger,
        extra,
        ready,
        lately,
        schedule,
    };
    run_cycle(task, tmux, now, cycle).await
}

/// One check-in's inputs besides the task and the time.
struct Cycle<'a> {
    trigger: Trigger,
    extra: Vec<Signal>,
    ready: Ready<'a>,
    lately: &'a crate::app::recent::Lately,
    schedule: Option<&'a crate::io::schedule::Schedule>,
}

/// [`run_inner`] behind the storage guard: while the task's state cannot be saved,
/// check-ins back off and a human is called once ([`storage`]).
async fn run_cycle(task: &Task, tmux: &Tmux, now: DateTime<Utc>, cycle: Cycle<'_>) -> Result<CheckinReport> {
    let lately = cycle.lately;
    let episode = &lately.storage;
    if let Some(why) = storage::waiting(episode) {
        return Err(Error::Environment(format!(
            "{why} (backing off before the next attempt)"
        )));
    }
    let r = run_inner(task, tmux, now, cycle).await;
    match &r {
        Ok(rep) if rep.recorded || rep.delivery.is_some() || rep.skipped => storage::succeeded(task, episode, now),
        Ok(_) => {}
        Err(e) => storage::failed(task, episode, e, now),
    }
    r
}

/// Append to events.jsonl; a failure is logged, never a reason to deliver again.
fn note(task: &Task, kind: crate::store::events::Kind, data: serde_json::Value, now: DateTime<Utc>) {
    if let Err(e) = crate::store::events::append(task, kind, Some("pm"), data, now) {
        tracing::warn!(task = %task.name, %kind, error = %e, "cannot append to events.jsonl");
    }
}

/// The check-in, top to bottom: housekeeping, the plan under the state lock, recovery of an
/// unfinished one, the decision, delivery, the record. Under the check-in lock: a second
/// check-in of the task stands down and reports nothing recorded.
async fn run_inner(task: &Task, tmux: &Tmux, now: DateTime<Utc>, cycle: Cycle<'_>) -> Result<CheckinReport> {
    let Cycle {
        trigger,
        mut extra,
        ready,
        lately,
        schedule,
    } = cycle;
    let Some(_checkin_lock) = task.try_lock_checkin()? else {
        let st = task.state()?;
        return Ok(nothing_recorded(trigger, task, st.phase, st.next_checkin));
    };

    // 1. Housekeeping: pulls, lanes, merges, waiting requests, screens; what the team cost.
    extra.extend(housekeeping::housekeeping(task, tmux, trigger, ready, lately, now).await);
    let (cost, spend) = housekeeping::cost_note(task, tmux, now).await?;

    // 2. The plan, under the state lock from one snapshot: evaluation, escalations opened,
    //    progress.md, the message.
    let plan = task.update_state(now, |st| evaluate_locked(task, st, ready, extra.clone(), &cost, now))?;
    for reason in &plan.escalated {
        crate::app::escalation::announce(task, reason, now)?;
    }

    // 3. Recovery: an unfinished check-in is settled before anything is delivered again.
    let (plan, reuse_id) = match recover::settle_intent(task, tmux, trigger, ready, extra, &cost, plan, now).await? {
        Settled::Done(report) => return Ok(report),
        Settled::Go { plan, reuse_id } => (plan, reuse_id),
    };

    // 4. The decision (pure), then 5. delivery and 6. the record.
    let next_checkin = schedule.and_then(|s| s.next_after(now));
    let new: Vec<Loaded> = plan.cands.iter().map(|c| c.loaded.clone()).collect();
    match decide(trigger, plan.quiet, &new, &plan.ev) {
        Decision::Skip(why) => finish::skipped(task, trigger, why, plan.ev.phase, next_checkin, now),
        Decision::RecordOnly(why) => finish::record_only(task, trigger, plan, why, next_checkin, now).await,
        Decision::Deliver => {
            let delivery = deliver::deliver(task, tmux, &plan, reuse_id).await?;
            finish::record_delivery(task, trigger, plan, delivery, spend.as_ref(), next_checkin, now).await
        }
    }
}

#[cfg(test)]
mod tests;

/// The report of a check-in that told and recorded nothing (another was running, an
/// unsent one is still in the PM's input, nothing to say): callers set what differs.
fn nothing_recorded(
    trigger: Trigger,
    task: &Task,
    phase: crate::core::model::Phase,
    next_checkin: Option<DateTime<Utc>>,
) -> CheckinReport {
    CheckinReport {
        trigger,
        skipped: false,
        skip_reason: None,
        task: task.name.to_string(),
        new_handoffs: Vec::new(),
        signals: Vec::new(),
        phase,
        delivery: None,
        checkin_id: None,
        recorded: false,
        next_checkin,
    }
}
