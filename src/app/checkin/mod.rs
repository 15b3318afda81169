//! Check-ins: take the new handoffs from the ledger, compute the signals of
//! signals (docs/protocol.md#signals) and the phase (docs/protocol.md#phases), refresh progress.md, and deliver the
//! message to the PM with verified delivery.
//!
//! The state (ledger, last_checkin, phase, lineage) is saved only after the
//! PM's pane confirms the message was submitted, so an undelivered check-in
//! is retried next time rather than lost. Two check-ins of one task never
//! overlap: the later one finds the check-in lock held and stands down.
//!
//! One check-in works from one snapshot: the state and the handoff listing are
//! read once under the state lock ([`snapshot`]), and the evaluation, progress.md
//! (written once), the escalations and the message all come from it. Delivery
//! holds no state lock; recording is a second short locked phase on a fresh read.
//!
//! The pure parts live beside the run: [`signals`] (signals and phase),
//! [`message`] (the message), [`record`] (what a recorded check-in saves).

mod demand;
pub mod intent;
mod record;
mod snapshot;
pub mod storage;

use chrono::{DateTime, Utc};

pub use crate::core::checkin::{Signal, undeliverable};
pub(crate) use demand::{Checkin, checkin};
use record::record;
use snapshot::{Plan, evaluate_locked};
#[cfg(test)]
use {
    crate::core::checkin::message::render_message,
    crate::core::checkin::signals::{Evaluation, attention_signals, evaluate},
    record::{apply_handoffs, status_after},
};

use crate::core::error::{Error, Result};
use crate::core::handoff::Loaded;
use crate::core::report::Outcome;
use crate::core::report::{CheckinReport, Trigger};
use crate::io::delivery;
use crate::io::tmux::Tmux;
use crate::store::task::Task;

/// Save when the next scheduled check-in is due.
pub fn save_next_checkin(task: &Task, next: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Result<()> {
    task.update_state(now, |st| {
        st.next_checkin = next;
        Ok(())
    })
}

/// When each task's agents' screens were last all looked at (this process).
static TENDED: crate::app::recent::Recent = crate::app::recent::Recent::new();

/// A handoff's check-in skips its own look at the screens when this process looked this
/// recently: the daemon's liveness tick looks every 5 s, and a second look costs the
/// check-in a capture per pane (an ssh round trip for a remote one) for nothing new.
const LOOKED_WITHIN: std::time::Duration = std::time::Duration::from_secs(6);

/// Observe every agent's screen for dialogs and usage limits (see [`crate::core::attention`]).
pub async fn tend_attention(task: &Task, tmux: &Tmux, now: DateTime<Utc>) -> crate::app::attend::Tended {
    let ctx = match crate::app::session::Ctx::on(tmux) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look at the agents' screens");
            TENDED.failed(task);
            return Default::default();
        }
    };
    let started = std::time::Instant::now();
    match crate::app::attend::tend(&ctx, task, now).await {
        Ok(t) => {
            TENDED.done(task, started);
            t
        }
        Err(e) => {
            tracing::warn!(task = %task.name, error = %e, "looking for agents that need a human failed");
            TENDED.failed(task);
            Default::default()
        }
    }
}

/// Settle the task's lanes on this tmux server (see [`crate::app::lanes::settle`]).
pub async fn settle_lanes(task: &Task, tmux: &Tmux, ready: &(dyn Fn(&Loaded) -> bool + Sync), now: DateTime<Utc>) {
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
    run_with(task, tmux, now, trigger, extra, &|_| true, schedule).await
}

/// [`run`], taking only the new handoffs `ready` accepts; the rest stay new
/// for a later check-in. The daemon uses it to leave alone a file that is
/// still being written (no close or rename seen, modified moments ago).
pub async fn run_with(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
    trigger: Trigger,
    extra: Vec<Signal>,
    ready: &(dyn Fn(&Loaded) -> bool + Sync),
    schedule: Option<&crate::io::schedule::Schedule>,
) -> Result<CheckinReport> {
    let cycle = Cycle {
        trigger,
        extra,
        ready,
        schedule,
    };
    run_cycle(task, tmux, now, cycle).await
}

/// One check-in's inputs besides the task and the time.
struct Cycle<'a> {
    trigger: Trigger,
    extra: Vec<Signal>,
    ready: &'a (dyn Fn(&Loaded) -> bool + Sync),
    schedule: Option<&'a crate::io::schedule::Schedule>,
}

/// [`run_inner`] behind the storage guard: while the task's state cannot be saved,
/// check-ins back off and a human is called once ([`storage`]).
async fn run_cycle(task: &Task, tmux: &Tmux, now: DateTime<Utc>, cycle: Cycle<'_>) -> Result<CheckinReport> {
    if let Some(why) = storage::waiting(task) {
        return Err(Error::Environment(format!(
            "{why} (backing off before the next attempt)"
        )));
    }
    let r = run_inner(task, tmux, now, cycle).await;
    match &r {
        Ok(rep) if rep.recorded || rep.delivery.is_some() || rep.skipped => storage::succeeded(task, now),
        Ok(_) => {}
        Err(e) => storage::failed(task, e, now),
    }
    r
}

/// Append to events.jsonl; a failure is logged, never a reason to deliver again.
fn note(task: &Task, kind: &str, data: serde_json::Value, now: DateTime<Utc>) {
    if let Err(e) = crate::store::events::append(task, kind, Some("pm"), data, now) {
        tracing::warn!(task = %task.name, kind, error = %e, "cannot append to events.jsonl");
    }
}

/// Before the PM is told anything: remote pulls, lanes, worktree merges, the broker's
/// waiting requests and a look at every screen. Returns the signals they add.
async fn housekeeping(
    task: &Task,
    tmux: &Tmux,
    trigger: Trigger,
    ready: &(dyn Fn(&Loaded) -> bool + Sync),
    now: DateTime<Utc>,
) -> Vec<Signal> {
    let mut extra = Vec::new();
    // Remote agents' handoffs and artifacts first (an unreachable host is skipped, not
    // fatal); the daemon's remote watch has usually pulled just now, and once is enough.
    for problem in crate::app::session::pull_remotes_unless_fresh(task, std::time::Duration::from_secs(1)).await {
        tracing::warn!(task = %task.name, problem = %problem, "remote pull before the check-in failed");
    }

    // Lanes: free those whose agent is done or dead, start what waited for them.
    settle_lanes(task, tmux, ready, now).await;

    // Worktrees: the work of agents that ended their turn is committed and merged (or found
    // conflicting) before the PM hears of their handoffs, so it hears both at once.
    extra.extend(crate::app::worktree::settle(task, ready, now).await);

    // Permission requests the broker is waiting on (the PM answers with `task permit`).
    extra.extend(permit_signals(task));

    // Dialogs and usage limits: escalate, pause, resume (cron mode has no other watcher).
    // A handoff's check-in is the one whose latency counts; a look moments ago will do.
    if trigger == Trigger::Handoff && TENDED.within(task, LOOKED_WITHIN) {
        tracing::debug!(task = %task.name, "screens looked at moments ago; not again");
    } else {
        tend_attention(task, tmux, now).await;
    }
    extra
}

/// What the team has cost, for the message and the budgets (with the view it came from);
/// agents a used-up budget covers are told to wrap up.
async fn cost_note(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
) -> Result<(snapshot::CostNote, Option<crate::core::cost::view::CostView>)> {
    // What the team has cost: read before the lock (transcripts can be large).
    let before = task.state()?;
    crate::app::cost::read_remote(task, &before).await;
    let spend = crate::app::cost::gather_for_checkin(task, &before, now)
        .map_err(|e| tracing::warn!(task = %task.name, error = %e, "cannot gather usage for the check-in"))
        .ok();
    let cost = snapshot::CostNote {
        line: spend
            .as_ref()
            .map(crate::core::cost::view::checkin_line)
            .unwrap_or_default(),
        standings: spend.as_ref().map(|v| v.budgets.clone()).unwrap_or_default(),
        gathered: spend.is_some(),
    };
    // A used-up budget: every running agent it covers is told once to wrap up (under the
    // check-in lock, so two check-ins never tell one agent twice).
    crate::app::cost::tell_wrap_up(task, tmux, &cost.standings, now).await;
    Ok((cost, spend))
}

/// How settling an unfinished check-in came out.
enum Settled {
    /// Nothing more to do this time: the report.
    Done(CheckinReport),
    /// Deliver `plan`, under the unfinished intent's id when it never reached the PM.
    Go { plan: Plan, reuse_id: Option<String> },
}

#[allow(clippy::too_many_arguments)]
async fn settle_intent(
    task: &Task,
    tmux: &Tmux,
    trigger: Trigger,
    ready: &(dyn Fn(&Loaded) -> bool + Sync),
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
            "checkin_settled",
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

async fn run_inner(task: &Task, tmux: &Tmux, now: DateTime<Utc>, cycle: Cycle<'_>) -> Result<CheckinReport> {
    let Cycle {
        trigger,
        mut extra,
        ready,
        schedule,
    } = cycle;
    let Some(_checkin_lock) = task.try_lock_checkin()? else {
        let st = task.state()?;
        return Ok(nothing_recorded(trigger, task, st.phase, st.next_checkin));
    };

    extra.extend(housekeeping(task, tmux, trigger, ready, now).await);
    let (cost, spend) = cost_note(task, tmux, now).await?;

    // A: under the state lock, one snapshot: evaluate, open escalations, progress.md, the message.
    let plan = task.update_state(now, |st| evaluate_locked(task, st, ready, extra.clone(), &cost, now))?;
    for reason in &plan.escalated {
        crate::app::escalation::announce(task, reason, now)?;
    }

    // An unfinished intent is settled before anything is delivered again (see settle_intent).
    let (plan, reuse_id) = match settle_intent(task, tmux, trigger, ready, extra, &cost, plan, now).await? {
        Settled::Done(report) => return Ok(report),
        Settled::Go { plan, reuse_id } => (plan, reuse_id),
    };
    let Plan {
        cands,
        ev,
        message,
        pm,
        quiet,
        escalated: _,
    } = plan;

    let next_checkin = schedule.and_then(|s| s.next_after(now));
    if trigger == Trigger::Schedule && quiet && cands.is_empty() && ev.signals.is_empty() {
        save_next_checkin(task, next_checkin, now)?;
        let why = "nothing new";
        note(
            task,
            "checkin_skipped",
            serde_json::json!({"trigger": trigger, "why": why}),
            now,
        );
        return Ok(CheckinReport {
            skipped: true,
            skip_reason: Some(why.into()),
            ..nothing_recorded(trigger, task, ev.phase, next_checkin)
        });
    }

    // The PM has finished (COMPLETE or BLOCKED) and no agent reported since: record
    // everything, tell no one.
    let new: Vec<Loaded> = cands.iter().map(|c| c.loaded.clone()).collect();
    if let Some(why) = undeliverable(&new, ev.phase) {
        task.update_state(now, |fresh| {
            record(fresh, &cands, &ev, now);
            fresh.next_checkin = next_checkin;
            Ok(())
        })?;
        if ev.phase == crate::core::model::Phase::Complete {
            crate::app::worktree::drop_merged_branches(task).await;
        }
        note(
            task,
            "checkin_skipped",
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
        return Ok(CheckinReport {
            trigger,
            skipped: true,
            skip_reason: Some(why),
            task: task.name.to_string(),
            new_handoffs: cands.iter().map(|c| c.loaded.file.clone()).collect(),
            signals: ev.signals,
            phase: ev.phase,
            delivery: None,
            recorded: true,
            next_checkin,
        });
    }

    // B: deliver without holding the state lock (the PM may run `task spawn` at once).
    let delivery = match pm {
        None => crate::core::report::Report {
            outcome: Outcome::Failed,
            reason: format!("the PM is not running; start it with `task start {}`", task.name),
            enters: 0,
            bytes: message.len(),
        },
        // A paused PM would spend its message on another refusal; it hears everything once resumed.
        // A PM at a dialog cannot take it either (delivery would wait out its ready timeout).
        Some((_, _, Some(at))) if at.resumed_at.is_none() => crate::core::report::Report {
            outcome: Outcome::Failed,
            reason: match at.kind {
                crate::core::attention::Kind::Paused => format!(
                    "the PM is paused by a usage limit until {}; the check-in waits for it to resume",
                    at.resets_at
                        .map(crate::core::clock::local_time)
                        .unwrap_or_else(|| "?".into())
                ),
                crate::core::attention::Kind::NeedsHuman => format!(
                    "the PM waits for a human ({} \"{}\"); the check-in is delivered once that is answered",
                    at.reason, at.line
                ),
            },
            enters: 0,
            bytes: message.len(),
        },
        Some((pane, runtime, _)) => {
            let rt = crate::io::runtime::resolve(runtime.as_deref().unwrap_or("claude"))?;
            // The intent is durable before anything is pasted; when it cannot be saved,
            // nothing is delivered (a delivery that cannot be recorded would repeat).
            let id = reuse_id.unwrap_or_else(intent::new_id);
            intent::save(
                task,
                &intent::Intent {
                    id: id.clone(),
                    files: cands.iter().map(|c| c.loaded.file.clone()).collect(),
                },
            )?;
            crate::io::hooks::pause(crate::io::hooks::Point::BeforeDeliver).await;
            let tagged = intent::tagged(&message, &id);
            let d = delivery::deliver(tmux, &pane, &tagged, &rt.patterns, &rt.delivery_options()).await?;
            crate::io::hooks::pause(crate::io::hooks::Point::AfterDeliver).await;
            d
        }
    };

    // C: record only a confirmed delivery, on a fresh read of the state. The next
    // scheduled time moves either way: an undelivered check-in is retried by the
    // handoffs it leaves new, not by firing the schedule again at once.
    let recorded = delivery.outcome == Outcome::Delivered;
    task.update_state(now, |fresh| {
        if recorded {
            record(fresh, &cands, &ev, now);
        }
        fresh.next_checkin = next_checkin;
        Ok(())
    })?;
    // Recorded: the intent is finished. Not delivered: it stays, and the next check-in
    // looks for its id before delivering (an unconfirmed paste may have landed).
    if recorded {
        intent::clear(task)?;
        if ev.phase == crate::core::model::Phase::Complete {
            crate::app::worktree::drop_merged_branches(task).await;
        }
    }
    note(
        task,
        "checkin",
        serde_json::json!({
            "trigger": trigger,
            "new_handoffs": cands.len(),
            "files": cands.iter().map(|c| c.loaded.file.as_str()).collect::<Vec<_>>(),
            "signals": ev.signals.iter().map(|s| s.kind).collect::<Vec<_>>(),
            "outcome": delivery.outcome,
            "enters": delivery.enters,
            "bytes": delivery.bytes,
            "recorded": recorded,
            // The PM's tokens as read before this check-in: what later ones cost it.
            "pm_tokens": spend.as_ref().and_then(|v| v.agents.iter().find(|a| a.agent == "pm" && a.known)).map(|a| a.total_tokens),
            // Its current conversation's size before this check-in: the input this one costs.
            "pm_context": spend.as_ref().and_then(|v| v.agents.iter().find(|a| a.agent == "pm")).and_then(|a| a.context.as_ref()).map(|c| c.tokens),
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
        recorded,
        next_checkin,
    })
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
        recorded: false,
        next_checkin,
    }
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
