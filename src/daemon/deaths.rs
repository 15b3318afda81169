//! Deaths, as the task's actor sees them: agents recorded as running whose pane is dead
//! or gone are marked dead and reported once each (a spoke's death is a signal for the
//! PM's check-in); a dead PM is started again after a backoff, or a human is called
//! when it keeps dying.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use super::state_guard::View;
use super::timing::{LIVENESS_EVERY, Restart, give_up_reason, recent_restarts, restart_decision};
use crate::core::checkin::{Signal, SignalKind};
use crate::core::clock;
use crate::core::model::AgentStatus;
use crate::io::tmux::Tmux;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

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
fn event(
    task: &Task,
    kind: EventKind,
    agent: Option<&str>,
    data: serde_json::Value,
    now: chrono::DateTime<chrono::Utc>,
) {
    if let Err(e) = crate::store::events::append(task, kind, agent, data, now) {
        tracing::warn!(task = %task.name, %kind, error = %e, "cannot append to events.jsonl");
    }
}

/// Agents recorded as running whose pane is dead or gone; marks them dead in the state
/// (retried at every look until it is saved), reports each death once.
/// The PM's death is returned as `pm_dead` rather than as a signal (there is no one to tell).
pub(super) async fn deaths(
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
                EventKind::AgentDied,
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
pub(super) async fn handle_pm_death(
    task: &Task,
    tmux: &Tmux,
    died_at: chrono::DateTime<chrono::Utc>,
) -> Option<Instant> {
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
                        EventKind::PmRestart,
                        Some("pm"),
                        serde_json::json!({"pane": s.pane, "attempt": recent_restarts(&restarts, died_at) + 1, "died_at": died_at}),
                        now,
                    );
                    tracing::warn!(task = %task.name, pane = %s.pane, "restarted the PM");
                }
                Err(e) => {
                    event(
                        task,
                        EventKind::PmRestartFailed,
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
