//! One actor per supervised task: the only code in the daemon that runs the
//! task's check-ins, so two never overlap and no state is shared.
//!
//! The actor also keeps the task's schedule. It sleeps until the `next_checkin`
//! saved in pm_state.json, never a timer counted from its own start: a daemon
//! restarted every few minutes still checks in on time, and a check-in missed
//! while it was down runs as soon as it is back.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::state_guard::{Guard, View};
use super::timing::{DEBOUNCE, Restart, give_up_reason, handoff_due, hold_until, recent_restarts, restart_decision};
use crate::app::checkin;
use crate::core::checkin::{Signal, SignalKind};
use crate::core::clock;
use crate::core::handoff;
use crate::core::model::AgentStatus;
use crate::core::report::Outcome;
use crate::core::report::Trigger;
use crate::io::schedule::{self, Schedule};
use crate::io::tmux::Tmux;
use crate::store::handoffs;
use crate::store::task::Task;

/// How often remote hosts are pulled: the fallback for a missed remote watch event
/// ([`crate::io::remote::watch`] pulls as soon as a remote handoff is written). A test
/// makes it long to prove a handoff came by the watch.
fn pull_every() -> Duration {
    crate::io::hooks::get().pull_every.unwrap_or(Duration::from_secs(2))
}
/// How often panes are checked for deaths.
const LIVENESS_EVERY: Duration = Duration::from_secs(5);
/// After an undelivered check-in, try again this soon.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Messages an actor understands.
#[derive(Debug)]
pub enum Msg {
    /// Something may have changed in handoffs/ (the reconcile tick, a rescan).
    Hint,
    /// The named handoff was closed after writing or renamed into place.
    Final(String, handoffs::How),
    /// Check in now and send back the report as JSON.
    CheckinNow(oneshot::Sender<crate::core::wire::Response>),
    /// An agent was spawned (maybe on a remote host, to be watched and pulled).
    Spawned,
    /// Rotate the PM now for the caller named (`task rotate`), and send back the answer.
    RotateNow(String, oneshot::Sender<crate::core::wire::Response>),
}

/// A cheap handle on a running actor.
#[derive(Debug, Clone)]
pub struct Handle {
    /// Its mailbox.
    pub tx: mpsc::Sender<Msg>,
}

/// Start the actor for `task`.
pub fn spawn(task: Task, tmux: Tmux) -> (Handle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(64);
    let join = tokio::spawn(run(task, tmux, rx));
    (Handle { tx }, join)
}

/// Whether a new handoff is worth an immediate check-in: a terminal status, the PM's
/// own included (its COMPLETE or BLOCKED is what moves the task's phase, and a check-in
/// is what records it).
fn wakes_the_pm(l: &handoff::Loaded) -> bool {
    l.handoff.status.is_terminal()
}

/// What a look at the handoffs not yet in the ledger found.
#[derive(Debug, Default)]
struct Pending {
    /// A final handoff that wakes the PM is among them.
    wake: bool,
    /// When each of the others still settling becomes final, if it stays as it is.
    settling: Vec<Instant>,
}

/// Look at every handoff not yet in the ledger. Each one is observed, terminal or not, so
/// the quiet time of a file no event announced (written while no daemon watched: before a
/// start, during a restart) runs from the first scan after the start, not from the
/// check-in that would otherwise leave it out.
fn pending(task: &Task, quiet: &handoffs::Quiet) -> Pending {
    let Ok(st) = task.state() else {
        return Pending::default();
    };
    let dir = task.handoffs();
    let Ok(listing) = handoffs::listing(&dir) else {
        return Pending::default();
    };
    let Ok(found) = handoffs::scan_listing(&st.ledger, &dir, &listing) else {
        return Pending::default();
    };
    let mut p = Pending::default();
    for c in &found.cands {
        if quiet.ready(&dir, &c.loaded) {
            p.wake |= wakes_the_pm(&c.loaded);
        } else if let Some(t) = quiet.settles_at(&c.loaded.file) {
            p.settling.push(t.into());
        }
    }
    p
}

/// The task's schedule from task.md `checkin:` (read each time, so an edit applies
/// without a restart). A bad one turns scheduled check-ins off for the task;
/// handoffs still wake the PM.
fn schedule_of(task: &Task) -> std::result::Result<Schedule, String> {
    let setting = task.spec().ok().and_then(|s| s.setting("checkin").map(str::to_string));
    Schedule::parse(setting.as_deref())
}

/// When the next scheduled check-in is due, from what pm_state.json saved
/// (see [`Schedule::resume`]); `None` when the task has no usable schedule,
/// which is logged once per distinct problem (`warned`), not at every look.
fn next_due(
    task: &Task,
    now: chrono::DateTime<chrono::Utc>,
    warned: &mut Option<String>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let sched = match schedule_of(task) {
        Ok(s) => {
            *warned = None;
            s
        }
        Err(e) => {
            if warned.as_deref() != Some(e.as_str()) {
                tracing::warn!(task = %task.name, error = %e, "bad check-in schedule; scheduled check-ins are off for this task");
                *warned = Some(e);
            }
            return None;
        }
    };
    let st = task.state().ok()?;
    sched.resume(st.next_checkin, st.last_checkin, now)
}

/// The tokio instant for a wall-clock time (now when it is past).
fn instant_at(due: chrono::DateTime<chrono::Utc>) -> Instant {
    Instant::now() + schedule::until(due, clock::now())
}

async fn checkin(
    task: &Task,
    tmux: &Tmux,
    quiet: &handoffs::Quiet,
    trigger: Trigger,
    extra: Vec<Signal>,
) -> Option<crate::core::report::CheckinReport> {
    let dir = task.handoffs();
    let sched = schedule_of(task).ok();
    match checkin::run_with(
        task,
        tmux,
        clock::now(),
        trigger,
        extra,
        handoffs::Ready::Final(quiet, &dir),
        sched.as_ref(),
    )
    .await
    {
        Ok(r) => {
            tracing::info!(
                task = %task.name,
                trigger = ?trigger,
                new = r.new_handoffs.len(),
                outcome = ?r.delivery.as_ref().map(|d| d.outcome),
                skipped = r.skipped,
                next = ?r.next_checkin,
                "check-in"
            );
            Some(r)
        }
        Err(e) => {
            tracing::warn!(task = %task.name, error = %e, "check-in failed");
            None
        }
    }
}

/// Change the task's pm_state.json ([`Task::update_state`]). A failure is logged (error
/// level) with the task and `what` was being saved, and returned as `false` so the caller
/// can retry.
fn update_state(task: &Task, what: &'static str, f: impl FnOnce(&mut crate::core::model::PmState)) -> bool {
    match task.update_state(clock::now(), |st| {
        f(st);
        Ok(())
    }) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(task = %task.name, what, error = %e, "cannot save pm_state.json");
            false
        }
    }
}

/// Append to the task's events.jsonl; a failure is logged, never fatal (the log is a record).
fn event(task: &Task, kind: &str, agent: Option<&str>, data: serde_json::Value, now: chrono::DateTime<chrono::Utc>) {
    if let Err(e) = crate::store::events::append(task, kind, agent, data, now) {
        tracing::warn!(task = %task.name, kind, error = %e, "cannot append to events.jsonl");
    }
}

/// Agents recorded as running whose pane is dead or gone; marks them dead in the state
/// (retried at every look until it is saved), reports each death once.
/// The PM's death is returned as `pm_dead` rather than as a signal (there is no one to tell).
async fn deaths(
    task: &Task,
    tmux: &Tmux,
    view: Option<&View>,
    reported: &mut BTreeSet<String>,
    pm_died: &mut Option<chrono::DateTime<chrono::Utc>>,
) -> Vec<Signal> {
    // The guard's view: a repaired state, or a newer version's lent read-only from memory.
    let Some(View { state: st, writable }) = view else {
        return Vec::new();
    };
    let alive: Vec<(&str, Option<&str>)> = st
        .agents
        .values()
        .filter(|a| a.status == AgentStatus::Running && a.host.remote().is_none())
        .filter_map(|a| Some((a.pane.as_deref()?, a.tmux_server.as_deref())))
        .collect();
    let Ok(panes) = tmux.list_panes_expecting(&alive).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, a) in &st.agents {
        // Remote panes live on another tmux server; pulls and status cover them.
        if a.status != AgentStatus::Running || a.host.remote().is_some() {
            continue;
        }
        let Some(pane) = &a.pane else { continue };
        let info = crate::io::tmux::find_pane(&panes, pane, a.tmux_server.as_deref());
        let (dead, detail) = match info {
            None => (true, "its tmux pane is gone".to_string()),
            Some(p) if p.dead => (
                true,
                match (p.dead_status, p.dead_signal) {
                    (Some(code), _) => format!("it exited with status {code}"),
                    (None, Some(sig)) => format!("it was killed by signal {sig}"),
                    _ => "it exited".to_string(),
                },
            ),
            _ => (false, String::new()),
        };
        if !dead {
            continue;
        }
        // Still "running" in the state: marked dead now, or at the next look if this save fails.
        if *writable {
            update_state(task, "an agent's death", |fresh| {
                if let Some(x) = fresh.agents.get_mut(name) {
                    x.status = AgentStatus::Dead;
                }
            });
        }
        // Remembered per server and pane: the next server reuses `%0`, `%1`…, and a death
        // in a reused pane id is a new death.
        let server = a.tmux_server.as_deref().unwrap_or("?");
        if reported.insert(format!("{name}@{server}/{pane}")) {
            let now = clock::now();
            event(
                task,
                "agent_died",
                Some(name),
                serde_json::json!({"pane": pane, "server": a.tmux_server, "detail": detail}),
                now,
            );
            tracing::warn!(task = %task.name, agent = %name, %detail, "agent died");
            if name == "pm" {
                *pm_died = Some(now);
            } else {
                out.push(Signal {
                    kind: SignalKind::Blocked,
                    agent: name.clone(),
                    file: None,
                    text: format!("agent died: {detail}; restart it with `task spawn` or reassign the work"),
                });
            }
        }
    }
    out
}

/// Restart the PM that died at `died_at` once its backoff has run, or give up and
/// escalate; returns when to look again (the backoff's end, or a retry after a state save
/// failed, so it is retried rather than lost).
async fn handle_pm_death(task: &Task, tmux: &Tmux, died_at: chrono::DateTime<chrono::Utc>) -> Option<Instant> {
    let now = clock::now();
    let restarts = task.state().map(|s| s.pm_restarts.clone()).unwrap_or_default();
    match restart_decision(&restarts, died_at, now) {
        Restart::After(d) => Some(Instant::now() + d),
        Restart::GiveUp => {
            let saved = update_state(task, "the BLOCKED phase after repeated PM deaths", |st| {
                st.phase = crate::core::model::Phase::Blocked;
            });
            let reason = give_up_reason(&restarts, died_at, task.name.as_str());
            // Raised once per reason, so a retry after a failed save calls no one twice.
            if let Err(e) = crate::app::escalation::raise(task, &reason, now) {
                tracing::error!(task = %task.name, error = %e, "cannot call a human about the dead PM");
                return Some(Instant::now() + LIVENESS_EVERY);
            }
            (!saved).then(|| Instant::now() + LIVENESS_EVERY)
        }
        Restart::Now => {
            let ctx = match crate::app::session::Ctx::from_env() {
                Ok(c) => crate::app::session::Ctx {
                    tmux: tmux.clone(),
                    ..c
                },
                Err(e) => {
                    tracing::warn!(error = %e, "cannot restart the PM");
                    return None;
                }
            };
            // An unrecorded restart would escape the backoff and the limit: retry instead.
            if !update_state(task, "a PM restart", |st| st.pm_restarts.push(now)) {
                return Some(Instant::now() + LIVENESS_EVERY);
            }
            match crate::app::session::restart_pm(&ctx, task, now).await {
                Ok(s) => {
                    event(
                        task,
                        "pm_restart",
                        Some("pm"),
                        serde_json::json!({"pane": s.pane, "attempt": recent_restarts(&restarts, died_at) + 1, "died_at": died_at}),
                        now,
                    );
                    tracing::warn!(task = %task.name, pane = %s.pane, "restarted the PM");
                }
                Err(e) => {
                    event(
                        task,
                        "pm_restart_failed",
                        Some("pm"),
                        serde_json::json!({"error": e.to_string()}),
                        now,
                    );
                    tracing::warn!(task = %task.name, error = %e, "PM restart failed");
                    return Some(Instant::now() + Duration::from_secs(1));
                }
            }
            None
        }
    }
}

async fn run(task: Task, tmux: Tmux, mut rx: mpsc::Receiver<Msg>) {
    let mut due: Option<Instant> = Some(Instant::now());
    // The schedule resumes from the saved time, which is saved again if it had to be computed.
    let mut warned = None;
    let mut next_at = next_due(&task, clock::now(), &mut warned);
    if task.state().is_ok_and(|st| st.next_checkin != next_at) {
        if let Err(e) = checkin::save_next_checkin(&task, next_at, clock::now()) {
            tracing::warn!(task = %task.name, error = %e, "cannot save the next check-in time");
        }
    }
    tracing::info!(task = %task.name, next = ?next_at, "check-in schedule");
    let mut liveness = tokio::time::interval(LIVENESS_EVERY);
    liveness.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported = BTreeSet::new();
    let mut pm_retry: Option<Instant> = None;
    let mut guard = Guard::new(&task);
    // When the PM was last seen dead: its restart's backoff counts from there.
    let mut pm_death: Option<chrono::DateTime<chrono::Utc>> = None;
    let quiet = handoffs::Quiet::default();
    let dir = task.handoffs();
    let mut pulls = tokio::time::interval(pull_every());
    pulls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watches = super::watches::Watches::default();
    // Whether the task has (or may have) remote agents: without any, the pull tick sleeps
    // rather than read the state every 2 s. The liveness tick sets it from the state.
    let mut remote = true;
    // Whether the coming check-in was already held once for handoffs still settling.
    let mut held = false;
    // When the last handoff check-in began (the coalescing window runs from there).
    let mut last_start: Option<Instant> = None;
    let mut rotation = crate::app::rotate::Watch::default();
    tracing::info!(task = %task.name, dir = %task.dir().display(), "supervising");
    loop {
        let sleep_until = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            msg = rx.recv() => match msg {
                None => break,
                Some(Msg::Spawned) => remote = true,
                Some(Msg::Hint) => {
                    if due.is_none() {
                        due = Some(Instant::now() + DEBOUNCE);
                    }
                }
                Some(Msg::Final(file, how)) => {
                    // Renamed in: final now. Closed after writing: the look at `due` finds
                    // it settling and waits for its quiet time. A check-in held for handoffs
                    // still settling waits for them: a second event for the same rename
                    // (inotify reports it to and both ways) must not cut that short.
                    quiet.saw(&dir, &file, how);
                    if !held {
                        due = Some(handoff_due(Instant::now(), last_start, due));
                    }
                }
                Some(Msg::RotateNow(by, reply)) => {
                    let answer = match crate::app::session::Ctx::on(&tmux) {
                        Ok(ctx) => crate::app::rotate::asked(&ctx, &task, &by).await,
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(answer.map_or_else(
                        |e| crate::core::wire::Response::error(&e),
                        |r| crate::core::wire::Response::Rotated { rotated: Box::new(r) },
                    ));
                }
                Some(Msg::CheckinNow(reply)) => {
                    let sched = schedule_of(&task).ok();
                    let r = checkin::run_with(&task, &tmux, clock::now(), Trigger::Manual, Vec::new(), handoffs::Ready::Final(&quiet, &dir), sched.as_ref()).await;
                    let _ = reply.send(r.map_or_else(
                        |e| crate::core::wire::Response::error(&e),
                        |r| crate::core::wire::Response::Checkin { report: Box::new(r) },
                    ));
                    next_at = next_due(&task, clock::now(), &mut warned);
                }
            },
            _ = tokio::time::sleep_until(next_at.map_or_else(Instant::now, instant_at)), if next_at.is_some() => {
                checkin(&task, &tmux, &quiet, Trigger::Schedule, Vec::new()).await;
                // A check-in that stood down (another was running) or failed saved no new
                // time: look again shortly rather than fire in a loop.
                let now = clock::now();
                next_at = next_due(&task, now, &mut warned)
                    .map(|t| t.max(now + chrono::Duration::from_std(RETRY_AFTER).expect("fits")));
            }
            _ = tokio::time::sleep_until(sleep_until), if due.is_some() => {
                due = None;
                let found = pending(&task, &quiet);
                let hold = if found.wake { hold_until(&found.settling, Instant::now(), held) } else { None };
                held = hold.is_some();
                if let Some(t) = hold {
                    due = Some(t);
                } else if found.wake {
                    // A failed check-in (the state could not be saved, say) is retried too;
                    // checkin::storage paces the attempts and calls a human once.
                    let sent_at = clock::now();
                    last_start = Some(Instant::now());
                    let report = checkin(&task, &tmux, &quiet, Trigger::Handoff, Vec::new()).await;
                    let delivered = report
                        .as_ref()
                        .is_some_and(|r| r.delivery.as_ref().is_some_and(|d| d.outcome == Outcome::Delivered));
                    let retry = match &report {
                        Some(r) => !r.skipped && !delivered,
                        None => true,
                    };
                    if retry {
                        due = Some(Instant::now() + RETRY_AFTER);
                    }
                    // A team that never pauses still gets its PM rotated: once this
                    // check-in's turn is over, when a rotation is due.
                    if delivered {
                        if let Ok(ctx) = crate::app::session::Ctx::on(&tmux) {
                            rotation.after_checkin(&ctx, &task, sent_at).await;
                        }
                    }
                    next_at = next_due(&task, clock::now(), &mut warned);
                }
                // A handoff still settling is looked at again the moment it may be final.
                if due.is_none() {
                    due = quiet.next_due().map(Instant::from_std);
                }
            }
            () = watches.changed() => {
                crate::app::session::pull_remotes(&task).await;
                // The watch already folded a burst into one pull: no debounce on top.
                due = Some(Instant::now());
            }
            _ = pulls.tick(), if remote => {
                watches.refresh(&task);
                remote = !crate::app::session::remote_hosts(&task).is_empty();
                if remote {
                    crate::app::session::pull_remotes(&task).await;
                    if due.is_none() {
                        due = Some(Instant::now() + DEBOUNCE);
                    }
                }
            }
            _ = liveness.tick() => {
                // First: a corrupt state is set aside and reported before anyone else meets it.
                let view = guard.look(&task, clock::now());
                // A remote agent spawned since the last pull is watched (and pulled) from now on.
                remote = view.as_ref().is_none_or(|v| v.state.agents.values().any(|a| a.host.remote().is_some()));
                if remote {
                    watches.refresh(&task);
                }
                checkin::settle_lanes(&task, &tmux, handoffs::Ready::Final(&quiet, &dir), clock::now()).await;
                let mut pm_died = None;
                let sigs = deaths(&task, &tmux, view.as_ref(), &mut reported, &mut pm_died).await;
                if !sigs.is_empty() {
                    checkin(&task, &tmux, &quiet, Trigger::Death, sigs).await;
                }
                // Pick up a time saved by someone else (`task start`) or a changed task.md.
                next_at = next_due(&task, clock::now(), &mut warned);
                // A restart that cannot be recorded (a newer version's state) is not made.
                if let (Some(t), true) = (pm_died, view.as_ref().is_some_and(|v| v.writable)) {
                    pm_death = Some(t);
                    pm_retry = handle_pm_death(&task, &tmux, t).await;
                }
                // Dialogs and usage limits: the PM hears of a called human or a paused spoke at once.
                if checkin::tend_attention(&task, &tmux, clock::now()).await.worth_a_checkin() {
                    checkin(&task, &tmux, &quiet, Trigger::Attention, Vec::new()).await;
                }
                // A PM conversation grown past rotate_at is replaced between check-ins (this
                // actor delivers none meanwhile), when no handoff waits to be told or settles.
                if let Ok(ctx) = crate::app::session::Ctx::on(&tmux) {
                    let calm = || {
                        let found = pending(&task, &quiet);
                        pm_retry.is_none() && !found.wake && found.settling.is_empty()
                    };
                    rotation.tick(&ctx, &task, calm).await;
                    // Spokes whose context filled up: a checkpoint, then a fresh session.
                    let sigs = crate::app::rotate::tend_spokes(&ctx, &task, clock::now()).await;
                    if !sigs.is_empty() {
                        checkin(&task, &tmux, &quiet, Trigger::Attention, sigs).await;
                    }
                }
            }
            _ = tokio::time::sleep_until(pm_retry.unwrap_or_else(Instant::now)), if pm_retry.is_some() => {
                pm_retry = match pm_death {
                    Some(t) => handle_pm_death(&task, &tmux, t).await,
                    None => None,
                };
            }
        }
    }
    tracing::info!(task = %task.name, "no longer supervised");
}
