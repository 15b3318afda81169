//! Recording, the last stage, on a fresh read of the state: the handoffs a check-in took go
//! into the ledger only once the PM's pane confirmed the message (or when there is no one
//! to tell); the next scheduled time moves either way, since an undelivered check-in is
//! retried by the handoffs it leaves new, not by firing the schedule again at once. Each
//! ending is an event in events.jsonl and the check-in's report.

use chrono::{DateTime, Utc};

use super::record::record;
use super::snapshot::Plan;
use super::{intent, note, nothing_recorded, save_next_checkin};
use crate::core::cost::view::CostView;
use crate::core::error::Result;
use crate::core::model::Phase;
use crate::core::report::{CheckinReport, Outcome, Report, Trigger};
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// A scheduled check-in with nothing to say: the next time saved, the skip an event.
pub(super) fn skipped(
    task: &Task,
    trigger: Trigger,
    why: &str,
    phase: Phase,
    next_checkin: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<CheckinReport> {
    save_next_checkin(task, next_checkin, now)?;
    note(
        task,
        EventKind::CheckinSkipped,
        serde_json::json!({"trigger": trigger, "why": why}),
        now,
    );
    Ok(CheckinReport {
        skipped: true,
        skip_reason: Some(why.into()),
        ..nothing_recorded(trigger, task, phase, next_checkin)
    })
}

/// The PM has finished and no agent reported since: everything recorded, no one told.
pub(super) async fn record_only(
    task: &Task,
    trigger: Trigger,
    plan: Plan,
    why: String,
    next_checkin: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<CheckinReport> {
    let Plan { cands, ev, .. } = plan;
    task.update_state(now, |fresh| {
        record(fresh, &cands, &ev, now);
        fresh.next_checkin = next_checkin;
        Ok(())
    })?;
    if ev.phase == Phase::Complete {
        crate::app::worktree::drop_merged_branches(task).await;
    }
    note(
        task,
        EventKind::CheckinSkipped,
        serde_json::json!({
            "trigger": trigger,
            "why": why,
            "new_handoffs": cands.len(),
            "files": cands.iter().map(|c| c.loaded.file.as_str()).collect::<Vec<_>>(),
            "signals": ev.signals.iter().map(|s| s.kind).collect::<Vec<_>>(),
            "recorded": true,
        }),
        now,
    );
    Ok(CheckinReport {
        trigger,
        skipped: true,
        skip_reason: Some(why),
        task: task.name.to_string(),
        new_handoffs: cands.iter().map(|c| c.loaded.file.clone()).collect(),
        signals: ev.signals,
        phase: ev.phase,
        delivery: None,
        checkin_id: None,
        recorded: true,
        next_checkin,
    })
}

/// After a delivery: recorded only when confirmed; the intent then finished (not
/// delivered, it stays, and the next check-in looks for its id before delivering: an
/// unconfirmed paste may have landed). `spend` is what the team had cost before it, for
/// the event's PM figures.
pub(super) async fn record_delivery(
    task: &Task,
    trigger: Trigger,
    plan: Plan,
    (delivery, id): (Report, Option<String>),
    spend: Option<&CostView>,
    next_checkin: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<CheckinReport> {
    let Plan { cands, ev, .. } = plan;
    let recorded = delivery.outcome == Outcome::Delivered;
    task.update_state(now, |fresh| {
        if recorded {
            record(fresh, &cands, &ev, now);
        }
        fresh.next_checkin = next_checkin;
        Ok(())
    })?;
    if recorded {
        intent::clear(task)?;
        if ev.phase == Phase::Complete {
            crate::app::worktree::drop_merged_branches(task).await;
        }
    }
    let pm = spend.and_then(|v| v.agents.iter().find(|a| a.agent == "pm"));
    note(
        task,
        EventKind::Checkin,
        serde_json::json!({
            "trigger": trigger,
            "id": id,
            "new_handoffs": cands.len(),
            "files": cands.iter().map(|c| c.loaded.file.as_str()).collect::<Vec<_>>(),
            "signals": ev.signals.iter().map(|s| s.kind).collect::<Vec<_>>(),
            "outcome": delivery.outcome,
            "reason": delivery.reason,
            "enters": delivery.enters,
            "bytes": delivery.bytes,
            "recorded": recorded,
            // The PM's tokens as read before this check-in: what later ones cost it.
            "pm_tokens": pm.filter(|a| a.known).map(|a| a.total_tokens),
            // Its current conversation's size before this check-in: the input this one costs.
            "pm_context": pm.and_then(|a| a.context.as_ref()).map(|c| c.tokens),
        }),
        now,
    );
    Ok(CheckinReport {
        trigger,
        skipped: false,
        skip_reason: None,
        task: task.name.to_string(),
        new_handoffs: cands.iter().map(|c| c.loaded.file.clone()).collect(),
        signals: ev.signals,
        phase: ev.phase,
        delivery: Some(delivery),
        checkin_id: id,
        recorded,
        next_checkin,
    })
}
