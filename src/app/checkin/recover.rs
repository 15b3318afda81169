//! Recovery, before anything is delivered: an unfinished check-in (its intent saved, then
//! a crash or a failed save) is looked for in the PM's pane. Found submitted → recorded;
//! left unsent in the input → submitted there, never pasted again; never reached the PM →
//! delivered again under the same id.

use chrono::{DateTime, Utc};

use super::snapshot::{self, Plan, evaluate_locked};
use super::{intent, note, nothing_recorded, record::record};
use crate::core::checkin::Signal;
use crate::core::error::Result;
use crate::core::report::{CheckinReport, Outcome, Trigger};
use crate::io::delivery;
use crate::io::tmux::Tmux;
use crate::store::events::Kind as EventKind;
use crate::store::handoffs::Ready;
use crate::store::task::Task;

/// How settling an unfinished check-in came out.
pub(super) enum Settled {
    /// Nothing more to do this time: the report.
    Done(CheckinReport),
    /// Deliver `plan`, under the unfinished intent's id when it never reached the PM.
    Go { plan: Plan, reuse_id: Option<String> },
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn settle_intent(
    task: &Task,
    tmux: &Tmux,
    trigger: Trigger,
    ready: Ready<'_>,
    extra: Vec<Signal>,
    cost: &snapshot::CostNote,
    mut plan: Plan,
    now: DateTime<Utc>,
) -> Result<Settled> {
    // An unfinished intent (a crash, or a save that failed, after it was written) is
    // settled before anything is delivered again: found in the PM's pane → recorded.
    // One left unsent in the PM's input (killed between paste and Enter) is submitted
    // there, never pasted again; until that is confirmed, nothing else is delivered.
    let mut reuse_id = None;
    if let Some(pending) = intent::load(task)? {
        let pm = match &plan.pm {
            Some((pane, runtime, _)) => Some((
                pane.clone(),
                crate::io::runtime::resolve(runtime.as_deref().unwrap_or("claude"))?,
            )),
            None => None,
        };
        let seen = intent::delivered(
            task,
            tmux,
            pm.as_ref().map(|(p, rt)| (p.as_str(), &rt.patterns)),
            &pending.id,
        )
        .await?;
        let mut completed = None;
        if let (intent::Found::Unsent, Some((pane, rt))) = (seen, &pm) {
            tracing::info!(task = %task.name, id = %pending.id, "an unfinished check-in sits unsent in the PM's input; submitting it");
            let r = delivery::submit_unsent(tmux, pane, &pending.id, &rt.patterns, &rt.delivery_options()).await?;
            completed = Some(r);
        }
        let found = match &completed {
            Some(r) => r.outcome == Outcome::Delivered,
            None => seen == intent::Found::Submitted,
        };
        note(
            task,
            EventKind::CheckinSettled,
            serde_json::json!({"id": pending.id, "files": pending.files, "found": found, "seen": seen.word(),
                "completed": completed.as_ref().map(|r| r.outcome)}),
            now,
        );
        if let Some(r) = completed.filter(|r| r.outcome != Outcome::Delivered) {
            // Still in the input (or pressed and not seen taken): the intent stays, and the
            // next check-in looks again; a fresh paste now would glue onto it.
            tracing::warn!(task = %task.name, id = %pending.id, reason = %r.reason, "the unsent check-in was not confirmed submitted");
            return Ok(Settled::Done(CheckinReport {
                delivery: Some(r),
                ..nothing_recorded(trigger, task, plan.ev.phase, task.state()?.next_checkin)
            }));
        }
        if !found {
            tracing::info!(task = %task.name, id = %pending.id, "an unfinished check-in never reached the PM; delivering it");
            reuse_id = Some(pending.id);
        } else {
            tracing::info!(task = %task.name, id = %pending.id, seen = seen.word(), "an unfinished check-in has reached the PM; recording it");
            let (done, rest): (Vec<_>, Vec<_>) = plan
                .cands
                .iter()
                .cloned()
                .partition(|c| pending.files.contains(&c.loaded.file));
            let ev = plan.ev.clone();
            task.update_state(now, |fresh| {
                record(fresh, &done, &ev, now);
                Ok(())
            })?;
            intent::clear(task)?;
            if rest.is_empty() {
                return Ok(Settled::Done(CheckinReport {
                    trigger,
                    skipped: true,
                    skip_reason: Some(if seen == intent::Found::Unsent {
                        format!(
                            "[checkin {}] was pasted before an interruption and left unsent; submitted and recorded now",
                            pending.id
                        )
                    } else {
                        format!(
                            "already delivered as [checkin {}] before an interruption; recorded now",
                            pending.id
                        )
                    }),
                    task: task.name.to_string(),
                    new_handoffs: done.iter().map(|c| c.loaded.file.clone()).collect(),
                    signals: ev.signals,
                    phase: ev.phase,
                    delivery: None,
                    checkin_id: None,
                    recorded: true,
                    next_checkin: task.state()?.next_checkin,
                }));
            }
            plan = task.update_state(now, |st| evaluate_locked(task, st, ready, extra, cost, now))?;
            for reason in &plan.escalated {
                crate::app::escalation::announce(task, reason, now)?;
            }
        }
    }
    Ok(Settled::Go { plan, reuse_id })
}
