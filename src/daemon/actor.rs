//! One actor per supervised task: the only code in the daemon that runs the
//! task's check-ins, so two never overlap and no state is shared.
//!
//! The actor also keeps the task's schedule. It sleeps until the `next_checkin`
//! saved in pm_state.json, never a timer counted from its own start: a daemon
//! restarted every few minutes still checks in on time, and a check-in missed
//! while it was down runs as soon as it is back.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::checkin::{self, Signal, SignalKind, Trigger};
use crate::clock;
use crate::delivery::Outcome;
use crate::handoff;
use crate::schedule::{self, Schedule};
use crate::task::Task;
use crate::tmux::Tmux;

/// Debounce between a hint and the scan it causes: a burst becomes one check-in.
const DEBOUNCE: Duration = Duration::from_millis(150);
/// How often remote hosts are pulled (a remote handoff reaches the ledger within ~this).
const PULL_EVERY: Duration = Duration::from_secs(2);
/// How often panes are checked for deaths.
const LIVENESS_EVERY: Duration = Duration::from_secs(5);
/// After an undelivered check-in, try again this soon.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// A handoff with no close or rename seen is read once its mtime is this old
/// (network filesystems and files written while the daemon was down give no events).
const SETTLE: Duration = Duration::from_secs(2);

/// Handoffs known to be complete: file name → its mtime when the writer closed
/// or renamed it. A later write changes the mtime, so the entry no longer vouches.
#[derive(Debug, Default)]
pub struct Finals(BTreeMap<String, i64>);

impl Finals {
    /// Record that `file` in `dir` was just closed after writing or renamed into place.
    pub fn saw(&mut self, dir: &std::path::Path, file: &str) {
        if let Ok(m) = std::fs::symlink_metadata(dir.join(file)) {
            self.0.insert(file.to_string(), crate::fsutil::mtime_ns(&m));
        }
        if self.0.len() > 4096 {
            let first = self.0.keys().next().cloned();
            if let Some(k) = first {
                self.0.remove(&k);
            }
        }
    }

    /// Whether a new handoff may be read now: its writer is known to be done,
    /// or it has not changed for [`SETTLE`].
    pub fn ready(&self, l: &handoff::Loaded, now_ns: i64) -> bool {
        self.ready_at(&l.file, l.mtime_ns, now_ns)
    }

    fn ready_at(&self, file: &str, mtime_ns: i64, now_ns: i64) -> bool {
        self.0.get(file) == Some(&mtime_ns) || now_ns.saturating_sub(mtime_ns) >= SETTLE.as_nanos() as i64
    }
}

fn is_remote(host: &str) -> bool {
    !host.is_empty() && host != "local"
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(i64::MAX)
}

/// PM restarts allowed within [`RESTART_WINDOW`] before the task is BLOCKED and a human called.
pub const MAX_PM_RESTARTS: usize = 3;
/// The window for [`MAX_PM_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(600);

/// What to do about a dead PM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Restart it now.
    Now,
    /// Back off this long first (1 s, 2 s, 4 s… after each recent restart).
    After(Duration),
    /// Too many restarts in the window: stop and escalate.
    GiveUp,
}

/// Decide, from the recent restart times, whether to restart a dead PM. Pure.
pub fn restart_decision(restarts: &[chrono::DateTime<chrono::Utc>], now: chrono::DateTime<chrono::Utc>) -> Restart {
    let window = chrono::Duration::from_std(RESTART_WINDOW).expect("fits");
    let recent: Vec<_> = restarts.iter().filter(|t| now - **t < window).collect();
    if recent.len() >= MAX_PM_RESTARTS {
        return Restart::GiveUp;
    }
    let Some(last) = recent.iter().max() else {
        return Restart::Now;
    };
    let backoff = Duration::from_secs(1 << recent.len().min(6));
    let since = (now - **last).to_std().unwrap_or_default();
    if since >= backoff {
        Restart::Now
    } else {
        Restart::After(backoff - since)
    }
}

/// Messages an actor understands.
#[derive(Debug)]
pub enum Msg {
    /// Something may have changed in handoffs/ (the reconcile tick, a rescan).
    Hint,
    /// The named handoff was closed after writing or renamed into place.
    Final(String),
    /// Check in now and send back the report as JSON.
    CheckinNow(oneshot::Sender<std::result::Result<serde_json::Value, String>>),
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

/// Whether any handoff not yet in the ledger, and ready to read, should wake the PM.
fn terminal_pending(task: &Task, finals: &Finals) -> bool {
    let Ok(st) = task.state() else { return false };
    let Ok((names, _)) = handoff::list(&task.handoffs()) else {
        return false;
    };
    match st.ledger.scan(&task.handoffs(), &names) {
        Ok((cands, _)) => cands
            .iter()
            .any(|c| wakes_the_pm(&c.loaded) && finals.ready(&c.loaded, now_ns())),
        Err(_) => false,
    }
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
    finals: &Finals,
    trigger: Trigger,
    extra: Vec<Signal>,
) -> Option<checkin::CheckinReport> {
    let now = now_ns();
    let sched = schedule_of(task).ok();
    match checkin::run_with(
        task,
        tmux,
        clock::now(),
        trigger,
        extra,
        &|l| finals.ready(l, now),
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
fn update_state(task: &Task, what: &'static str, f: impl FnOnce(&mut crate::task::PmState)) -> bool {
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
    if let Err(e) = crate::events::append(task, kind, agent, data, now) {
        tracing::warn!(task = %task.name, kind, error = %e, "cannot append to events.jsonl");
    }
}

/// Agents recorded as running whose pane is dead or gone; marks them dead in the state
/// (retried at every look until it is saved), reports each death once.
/// The PM's death is returned as `pm_dead` rather than as a signal (there is no one to tell).
async fn deaths(task: &Task, tmux: &Tmux, reported: &mut BTreeSet<String>, pm_dead: &mut bool) -> Vec<Signal> {
    let Ok(st) = task.state() else { return Vec::new() };
    let Ok(panes) = tmux.list_panes().await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, a) in &st.agents {
        // Remote panes live on another tmux server; pulls and status cover them.
        if a.status != "running" || is_remote(&a.host) {
            continue;
        }
        let Some(pane) = &a.pane else { continue };
        let info = panes.iter().find(|p| &p.pane_id == pane);
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
        update_state(task, "an agent's death", |fresh| {
            if let Some(x) = fresh.agents.get_mut(name) {
                x.status = "dead".into();
            }
        });
        if reported.insert(format!("{name}@{pane}")) {
            let now = clock::now();
            event(
                task,
                "agent_died",
                Some(name),
                serde_json::json!({"pane": pane, "detail": detail}),
                now,
            );
            tracing::warn!(task = %task.name, agent = %name, %detail, "agent died");
            if name == "pm" {
                *pm_dead = true;
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

/// Restart the dead PM, or give up and escalate; returns when to look again (also after
/// a state save failed, so it is retried rather than lost).
async fn handle_pm_death(task: &Task, tmux: &Tmux) -> Option<Instant> {
    let now = clock::now();
    let restarts = task.state().map(|s| s.pm_restarts).unwrap_or_default();
    match restart_decision(&restarts, now) {
        Restart::After(d) => Some(Instant::now() + d),
        Restart::GiveUp => {
            let saved = update_state(task, "the BLOCKED phase after repeated PM deaths", |st| {
                st.phase = crate::task::Phase::Blocked;
            });
            let reason = format!(
                "the PM died {} times within {} minutes and is not restarted again; look with `task attach {}` and start it with `task start {}`",
                restarts.len(),
                RESTART_WINDOW.as_secs() / 60,
                task.name,
                task.name
            );
            // Raised once per reason, so a retry after a failed save calls no one twice.
            if let Err(e) = crate::escalation::raise(task, &reason, now) {
                tracing::error!(task = %task.name, error = %e, "cannot call a human about the dead PM");
                return Some(Instant::now() + LIVENESS_EVERY);
            }
            (!saved).then(|| Instant::now() + LIVENESS_EVERY)
        }
        Restart::Now => {
            let ctx = match crate::session::Ctx::from_env() {
                Ok(c) => crate::session::Ctx {
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
            match crate::session::restart_pm(&ctx, task, now).await {
                Ok(s) => {
                    event(
                        task,
                        "pm_restart",
                        Some("pm"),
                        serde_json::json!({"pane": s.pane, "attempt": restarts.len() + 1}),
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
    let mut finals = Finals::default();
    let mut pulls = tokio::time::interval(PULL_EVERY);
    pulls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(task = %task.name, dir = %task.dir().display(), "supervising");
    loop {
        let sleep_until = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            msg = rx.recv() => match msg {
                None => break,
                Some(Msg::Hint) => {
                    if due.is_none() {
                        due = Some(Instant::now() + DEBOUNCE);
                    }
                }
                Some(Msg::Final(file)) => {
                    finals.saw(&task.handoffs(), &file);
                    if due.is_none() {
                        due = Some(Instant::now() + DEBOUNCE);
                    }
                }
                Some(Msg::CheckinNow(reply)) => {
                    let now = now_ns();
                    let sched = schedule_of(&task).ok();
                    let r = checkin::run_with(&task, &tmux, clock::now(), Trigger::Manual, Vec::new(), &|l| finals.ready(l, now), sched.as_ref()).await;
                    let _ = reply.send(r.map(|r| serde_json::to_value(r).unwrap_or_default()).map_err(|e| e.to_string()));
                    next_at = next_due(&task, clock::now(), &mut warned);
                }
            },
            _ = tokio::time::sleep_until(next_at.map_or_else(Instant::now, instant_at)), if next_at.is_some() => {
                checkin(&task, &tmux, &finals, Trigger::Schedule, Vec::new()).await;
                // A check-in that stood down (another was running) or failed saved no new
                // time: look again shortly rather than fire in a loop.
                let now = clock::now();
                next_at = next_due(&task, now, &mut warned)
                    .map(|t| t.max(now + chrono::Duration::from_std(RETRY_AFTER).expect("fits")));
            }
            _ = tokio::time::sleep_until(sleep_until), if due.is_some() => {
                due = None;
                if terminal_pending(&task, &finals) {
                    // A failed check-in (the state could not be saved, say) is retried too;
                    // checkin::storage paces the attempts and calls a human once.
                    let retry = match checkin(&task, &tmux, &finals, Trigger::Handoff, Vec::new()).await {
                        Some(r) => !r.skipped && r.delivery.as_ref().is_none_or(|d| d.outcome != Outcome::Delivered),
                        None => true,
                    };
                    if retry {
                        due = Some(Instant::now() + RETRY_AFTER);
                    }
                    next_at = next_due(&task, clock::now(), &mut warned);
                }
            }
            _ = pulls.tick() => {
                if !crate::session::remote_hosts(&task).is_empty() {
                    crate::session::pull_remotes(&task).await;
                    if due.is_none() {
                        due = Some(Instant::now() + DEBOUNCE);
                    }
                }
            }
            _ = liveness.tick() => {
                let now = now_ns();
                checkin::settle_lanes(&task, &tmux, &|l| finals.ready(l, now), clock::now()).await;
                let mut pm_dead = false;
                let sigs = deaths(&task, &tmux, &mut reported, &mut pm_dead).await;
                if !sigs.is_empty() {
                    checkin(&task, &tmux, &finals, Trigger::Death, sigs).await;
                }
                // Pick up a time saved by someone else (`task start`) or a changed task.md.
                next_at = next_due(&task, clock::now(), &mut warned);
                if pm_dead {
                    pm_retry = handle_pm_death(&task, &tmux).await;
                }
                // Dialogs and usage limits: the PM hears of a called human or a paused spoke at once.
                if checkin::tend_attention(&task, &tmux, clock::now()).await.worth_a_checkin() {
                    checkin(&task, &tmux, &finals, Trigger::Attention, Vec::new()).await;
                }
            }
            _ = tokio::time::sleep_until(pm_retry.unwrap_or_else(Instant::now)), if pm_retry.is_some() => {
                pm_retry = handle_pm_death(&task, &tmux).await;
            }
        }
    }
    tracing::info!(task = %task.name, "no longer supervised");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_then_give_up() {
        let t0: chrono::DateTime<chrono::Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        let s = |secs: i64| t0 + chrono::Duration::seconds(secs);
        assert_eq!(restart_decision(&[], t0), Restart::Now);
        assert_eq!(restart_decision(&[s(0)], s(1)), Restart::After(Duration::from_secs(1)));
        assert_eq!(restart_decision(&[s(0)], s(2)), Restart::Now);
        assert_eq!(
            restart_decision(&[s(0), s(2)], s(3)),
            Restart::After(Duration::from_secs(3))
        );
        assert_eq!(restart_decision(&[s(0), s(2), s(6)], s(7)), Restart::GiveUp);
        // Old restarts fall out of the window.
        assert_eq!(restart_decision(&[s(0), s(2), s(6)], s(700)), Restart::Now);
    }

    #[test]
    fn a_handoff_is_ready_when_closed_or_settled() {
        let sec = 1_000_000_000i64;
        let mut f = Finals::default();
        assert!(
            !f.ready_at("dev-20251127-090000.md", 100 * sec, 101 * sec),
            "fresh and never closed"
        );
        assert!(f.ready_at("dev-20251127-090000.md", 100 * sec, 102 * sec), "settled");
        f.0.insert("dev-20251127-090000.md".into(), 100 * sec);
        assert!(
            f.ready_at("dev-20251127-090000.md", 100 * sec, 100 * sec),
            "closed at this mtime"
        );
        assert!(
            !f.ready_at("dev-20251127-090000.md", 100 * sec + 1, 100 * sec + 1),
            "written again since the close"
        );
    }
}
