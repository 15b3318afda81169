//! One actor per supervised task: the only code in the daemon that runs the
//! task's check-ins, so two never overlap and no state is shared.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::checkin::{self, Signal, SignalKind, Trigger};
use crate::clock;
use crate::delivery::Outcome;
use crate::handoff;
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
    /// The schedule fired.
    Schedule,
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

async fn checkin(
    task: &Task,
    tmux: &Tmux,
    finals: &Finals,
    trigger: Trigger,
    extra: Vec<Signal>,
) -> Option<checkin::CheckinReport> {
    let now = now_ns();
    match checkin::run_with(task, tmux, clock::now(), trigger, extra, &|l| finals.ready(l, now)).await {
        Ok(r) => {
            tracing::info!(
                task = %task.name,
                trigger = ?trigger,
                new = r.new_handoffs.len(),
                outcome = ?r.delivery.as_ref().map(|d| d.outcome),
                skipped = r.skipped,
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

/// Agents recorded as running whose pane is dead or gone; marks them dead in the state.
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
        if dead && reported.insert(format!("{name}@{pane}")) {
            let now = clock::now();
            if let Ok(_l) = task.lock_state() {
                if let Ok(mut fresh) = task.state_for_update(now) {
                    if let Some(x) = fresh.agents.get_mut(name) {
                        x.status = "dead".into();
                    }
                    let _ = task.save_state(&fresh);
                }
            }
            let _ = crate::events::append(
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

/// Restart the dead PM, or give up and escalate; returns when to look again.
async fn handle_pm_death(task: &Task, tmux: &Tmux) -> Option<Instant> {
    let now = clock::now();
    let restarts = task.state().map(|s| s.pm_restarts).unwrap_or_default();
    match restart_decision(&restarts, now) {
        Restart::After(d) => Some(Instant::now() + d),
        Restart::GiveUp => {
            if let Ok(_l) = task.lock_state() {
                if let Ok(mut st) = task.state_for_update(now) {
                    st.phase = crate::task::Phase::Blocked;
                    let _ = task.save_state(&st);
                }
            }
            let reason = format!(
                "the PM died {} times within {} minutes and is not restarted again; look with `task attach {}` and start it with `task start {}`",
                restarts.len(),
                RESTART_WINDOW.as_secs() / 60,
                task.name,
                task.name
            );
            let _ = crate::escalation::raise(task, &reason, now);
            None
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
            if let Ok(_l) = task.lock_state() {
                if let Ok(mut st) = task.state_for_update(now) {
                    st.pm_restarts.push(now);
                    let _ = task.save_state(&st);
                }
            }
            match crate::session::restart_pm(&ctx, task, now).await {
                Ok(s) => {
                    let _ = crate::events::append(
                        task,
                        "pm_restart",
                        Some("pm"),
                        serde_json::json!({"pane": s.pane, "attempt": restarts.len() + 1}),
                        now,
                    );
                    tracing::warn!(task = %task.name, pane = %s.pane, "restarted the PM");
                }
                Err(e) => {
                    let _ = crate::events::append(
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
                Some(Msg::Schedule) => {
                    checkin(&task, &tmux, &finals, Trigger::Schedule, Vec::new()).await;
                }
                Some(Msg::CheckinNow(reply)) => {
                    let now = now_ns();
                    let r = checkin::run_with(&task, &tmux, clock::now(), Trigger::Manual, Vec::new(), &|l| finals.ready(l, now)).await;
                    let _ = reply.send(r.map(|r| serde_json::to_value(r).unwrap_or_default()).map_err(|e| e.to_string()));
                }
            },
            _ = tokio::time::sleep_until(sleep_until), if due.is_some() => {
                due = None;
                if terminal_pending(&task, &finals) {
                    if let Some(r) = checkin(&task, &tmux, &finals, Trigger::Handoff, Vec::new()).await {
                        let delivered = r.delivery.as_ref().is_some_and(|d| d.outcome == Outcome::Delivered);
                        if !delivered && !r.skipped {
                            due = Some(Instant::now() + RETRY_AFTER);
                        }
                    }
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
                if pm_dead {
                    pm_retry = handle_pm_death(&task, &tmux).await;
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
