//! Deaths, as the task's actor sees them: agents recorded as running whose pane is dead
//! or gone are marked dead and reported once each (a spoke's death is a signal for the
//! PM's check-in); a dead PM is started again after a backoff, or a human is called
//! when it keeps dying.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use super::state_guard::View;
use super::timing::{
    LIVENESS_EVERY, Restart, give_up_reason, recent_restarts, restart_decision, restart_failing_reason,
    retry_failed_restart,
};
use crate::core::checkin::{Signal, SignalKind};
use crate::core::clock;
use crate::core::model::{AgentStatus, PmState, RemoteSpec};
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
        let host = a.host.remote().map(|_| a.host.to_string());
        if let Some(now) = mark_dead(task, name, a, *writable, host.as_deref(), &detail, reported) {
            if name == "pm" {
                *pm_died = Some(now);
            } else {
                out.push(died(name, &detail));
            }
        }
    }
    out
}

/// The PM's signal for a spoke's death.
fn died(agent: &str, detail: &str) -> Signal {
    Signal {
        kind: SignalKind::Blocked,
        agent: agent.to_string(),
        file: None,
        text: format!("agent died: {detail}; restart it with `task spawn` or reassign the work"),
    }
}

/// A death seen: the agent marked dead (now, or at the next look if this save fails), and
/// reported once — remembered per host, server and pane, since the next server reuses
/// `%0`, `%1`… and a death in a reused pane id is a new death. The time, when reported now.
fn mark_dead(
    task: &Task,
    name: &str,
    a: &crate::core::model::AgentState,
    writable: bool,
    host: Option<&str>,
    detail: &str,
    reported: &mut BTreeSet<String>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    if writable {
        // The record may have moved on since this look read it: a spawn that came first
        // records the death itself (and tells its caller), or replaced a run it stopped.
        let mut ours = false;
        let saved = update_state(task, "an agent's death", |fresh| {
            if let Some(x) = fresh
                .agents
                .get_mut(name)
                .filter(|x| x.status == AgentStatus::Running && x.pane == a.pane)
            {
                x.status = AgentStatus::Dead;
                ours = true;
            }
        });
        if saved && !ours {
            return None;
        }
    }
    let server = a.tmux_server.as_deref().unwrap_or("?");
    let pane = a.pane.as_deref().unwrap_or("?");
    if !reported.insert(format!("{name}@{}@{server}/{pane}", host.unwrap_or("local"))) {
        return None;
    }
    let now = clock::now();
    let at = (Some(pane), a.tmux_server.as_deref());
    if let Err(e) = crate::store::events::agent_died(task, name, at, host, detail, now) {
        tracing::warn!(task = %task.name, error = %e, "cannot append to events.jsonl");
    }
    Some(now)
}

/// How long a host may stay silent before the PM is told (task.md `host_timeout:`).
const HOST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one host may take to answer a look: a login shell's rc files can take
/// seconds, and a silent host's master gives up after 15 s anyway.
const HOST_LOOK: Duration = Duration::from_secs(20);

/// Remote agents recorded as running: one pane listing per host over its master. On a host
/// that answers, an agent whose pane is dead or gone is marked dead and reported once, as a
/// local one is (its slot on the fleet frees). A host that does not answer is recorded
/// (`host_unreachable`, naming its agents) and, once silent past `host_timeout:`, told to
/// the PM once; when it answers again, `host_back`, and its agents are looked at as before.
/// What a look at a task's hosts found beyond deaths: agents for failover to move, and hosts
/// answering again where runs were left behind.
#[derive(Default)]
pub(super) struct HostLook {
    pub signals: Vec<Signal>,
    /// (host, its agents, silent since): silent past `failover_after:`, failover on.
    pub to_move: Vec<(String, Vec<String>, chrono::DateTime<chrono::Utc>)>,
    /// Hosts that answer and hold runs left behind.
    pub answering_with_left: Vec<crate::core::model::RemoteSpec>,
}

pub(super) async fn remote_deaths(
    task: &Task,
    view: Option<&View>,
    reported: &mut BTreeSet<String>,
    lately: &crate::app::recent::Lately,
    failover: Option<Duration>,
) -> HostLook {
    let mut found = HostLook::default();
    let Some(View { state: st, writable }) = view else {
        return found;
    };
    let (by_host, left) = hosts_to_look_at(st);
    let look = Look {
        task,
        timeout: task
            .spec()
            .ok()
            .and_then(|s| s.setting("host_timeout").and_then(clock::parse_duration))
            .unwrap_or(HOST_TIMEOUT),
        failover,
        writable: *writable,
        now: clock::now(),
    };
    // A host with no running agent of the task left is no one's to watch: pulls take it back.
    let mut down = lately
        .silent
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    down.retain(|h, _| by_host.contains_key(h));
    let looks = list_panes_on(by_host.values().map(|(spec, _)| spec)).await;
    for ((host, (spec, agents)), listed) in by_host.into_iter().zip(looks) {
        match listed {
            Ok(Ok(panes)) => {
                look.answering(&host, &spec, &mut down);
                if left.contains(&spec) {
                    found.answering_with_left.push(spec.clone());
                }
                for name in agents {
                    look.dead_on(&host, name, &st.agents[name], &panes, reported, &mut found);
                }
            }
            Ok(Err(_)) | Err(_) if agents.is_empty() => {}
            Ok(Err(_)) | Err(_) => look.silent(&host, &spec, &agents, &mut down, reported, &mut found),
        }
    }
    *lately.silent.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = down;
    found
}

/// The task's running remote agents by host, and the hosts holding runs left behind by
/// failover (looked at too, with no agents: stopped when they answer).
fn hosts_to_look_at(st: &PmState) -> (ByHost<'_>, Vec<RemoteSpec>) {
    let mut by_host = ByHost::new();
    for (name, a) in &st.agents {
        if a.status != AgentStatus::Running {
            continue;
        }
        if let Some(r) = a.host.remote() {
            by_host
                .entry(a.host.to_string())
                .or_insert_with(|| (r.clone(), Vec::new()))
                .1
                .push(name);
        }
    }
    let left = crate::app::failover::left_behind_hosts(st);
    for r in &left {
        by_host
            .entry(crate::core::model::AgentHost::Remote(r.clone()).to_string())
            .or_insert_with(|| (r.clone(), Vec::new()));
    }
    (by_host, left)
}

/// Hosts found silent, with since when (the actor's `Lately::silent`).
type Silent = std::collections::BTreeMap<String, chrono::DateTime<chrono::Utc>>;

/// Hosts by name: the host's spec and the task's running agents there.
type ByHost<'a> = std::collections::BTreeMap<String, (RemoteSpec, Vec<&'a String>)>;

/// Every host's pane listing at once: a silent one costs one bounded wait, not one per host.
async fn list_panes_on<'a>(
    specs: impl Iterator<Item = &'a RemoteSpec>,
) -> Vec<std::result::Result<crate::core::error::Result<Vec<crate::io::tmux::PaneInfo>>, tokio::time::error::Elapsed>> {
    futures_util::future::join_all(specs.map(|spec| {
        // The host's heartbeat says at once when it stops answering, and ends this look
        // (and every pull and command to it) then; a silent host is not dialled here.
        crate::io::remote::heartbeat::keep(spec);
        // A host that failed moments ago is not dialled again on every tick (its backoff,
        // shared with the pulls, runs from 2 s to a minute).
        tokio::time::timeout(HOST_LOOK, async move {
            let h = crate::io::remote::Host::connect_backoff(spec).await?;
            h.tmux()?.list_panes().await
        })
    }))
    .await
}

/// One look at a task's hosts: what each host's answer or silence is weighed with.
struct Look<'a> {
    task: &'a Task,
    /// Silent this long, the PM is told (task.md `host_timeout:`).
    timeout: Duration,
    /// Silent this long, the host's agents are moved (`failover_after:`, when on).
    failover: Option<Duration>,
    /// Whether deaths may be saved (not a newer version's state lent read-only).
    writable: bool,
    now: chrono::DateTime<chrono::Utc>,
}

impl Look<'_> {
    /// A host that does not answer: recorded once per silence (`host_unreachable`, its
    /// agents marked unreachable); past `failover_after:` its agents are to be moved, past
    /// `host_timeout:` the PM is told — each once per silence.
    fn silent(
        &self,
        host: &str,
        spec: &RemoteSpec,
        agents: &[&String],
        down: &mut Silent,
        reported: &mut BTreeSet<String>,
        found: &mut HostLook,
    ) {
        let (task, now) = (self.task, self.now);
        let since = *down.entry(host.to_string()).or_insert_with(|| {
            let since = crate::io::health::silent_since(&crate::io::remote::key(spec)).unwrap_or(now);
            event(
                task,
                EventKind::HostUnreachable,
                None,
                serde_json::json!({"host": host, "agents": agents, "since": since}),
                now,
            );
            tracing::warn!(task = %task.name, %host, "host does not answer");
            // Its agents show it (status, task ui, the web page) until it answers.
            if let Err(e) = crate::app::session::mark_reachable(task, spec, false) {
                tracing::warn!(error = %e, "cannot record the host's reachability");
            }
            since
        });
        let silent_for = (now - since).to_std().unwrap_or_default();
        if let Some(after) = self.failover
            && silent_for >= after
            && reported.insert(format!("failover@{host}@{}", since.timestamp()))
        {
            found
                .to_move
                .push((host.to_string(), agents.iter().map(|a| a.to_string()).collect(), since));
        }
        let key = format!("host-down@{host}@{}", since.timestamp());
        if silent_for >= self.timeout && reported.insert(key) {
            let names: Vec<&str> = agents.iter().map(|a| a.as_str()).collect();
            found.signals.push(Signal {
                kind: SignalKind::Blocked,
                agent: names.first().map_or_else(String::new, |a| a.to_string()),
                file: None,
                text: format!(
                    "host {host} has not answered since {} ({} agent(s) there: {}); {}",
                    clock::local_time(since),
                    names.len(),
                    names.join(", "),
                    match self.failover {
                        Some(after) => format!(
                            "failover starts them on another host once it has been silent for {} s",
                            after.as_secs()
                        ),
                        None => "their work comes home when it is back — wait, or stop them and spawn the work again elsewhere".into(),
                    }
                ),
            });
        }
    }

    /// A host that answers: when it had been silent, `host_back` and its agents reachable again.
    fn answering(&self, host: &str, spec: &RemoteSpec, down: &mut Silent) {
        let Some(since) = down.remove(host) else { return };
        event(
            self.task,
            EventKind::HostBack,
            None,
            serde_json::json!({"host": host, "down_since": since}),
            self.now,
        );
        tracing::info!(task = %self.task.name, %host, "host answers again");
        if let Err(e) = crate::app::session::mark_reachable(self.task, spec, true) {
            tracing::warn!(error = %e, "cannot record the host's reachability");
        }
    }

    /// The agent `name` on `host`, as its panes there show it: a dead or gone pane is a
    /// death, marked and reported once.
    fn dead_on(
        &self,
        host: &str,
        name: &str,
        a: &crate::core::model::AgentState,
        panes: &[crate::io::tmux::PaneInfo],
        reported: &mut BTreeSet<String>,
        found: &mut HostLook,
    ) {
        let Some(pane) = &a.pane else { return };
        let detail = match crate::io::tmux::find_pane(panes, pane, a.tmux_server.as_deref()) {
            None => format!("its tmux pane on {host} is gone"),
            Some(p) if p.dead => format!("its pane on {host} exited"),
            _ => return,
        };
        if mark_dead(self.task, name, a, self.writable, Some(host), &detail, reported).is_some() {
            found.signals.push(died(name, &detail));
        }
    }
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
                Err(e) => return Some(Instant::now() + restart_failed(task, died_at, now, &e)),
            }
            None
        }
    }
}

/// A restart that failed: recorded as such and taken off the restarts that count (it ran
/// no PM; if that save fails, it counts, which errs towards calling a human). A human is
/// called once the PM has stayed down too long. Returns when to try again.
fn restart_failed(
    task: &Task,
    died_at: chrono::DateTime<chrono::Utc>,
    tried: chrono::DateTime<chrono::Utc>,
    e: &crate::core::error::Error,
) -> Duration {
    event(
        task,
        EventKind::PmRestartFailed,
        Some("pm"),
        serde_json::json!({"error": e.to_string(), "died_at": died_at}),
        tried,
    );
    tracing::warn!(task = %task.name, error = %e, "PM restart failed");
    update_state(task, "taking back a PM restart that did not start", |st| {
        st.pm_restarts.retain(|t| *t != tried);
    });
    if let Some(reason) = restart_failing_reason(died_at, tried, task.name.as_str()) {
        if let Err(e) = crate::app::escalation::raise(task, &reason, tried) {
            tracing::error!(task = %task.name, error = %e, "cannot call a human about the PM that does not restart");
        }
    }
    retry_failed_restart(died_at, tried)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::AgentState;

    fn running(pane: &str) -> AgentState {
        AgentState {
            status: AgentStatus::Running,
            pane: Some(pane.into()),
            tmux_server: Some("srv".into()),
            ..Default::default()
        }
    }

    fn deaths_on_record(task: &Task) -> usize {
        crate::store::events::read(&crate::store::events::path(task))
            .unwrap()
            .iter()
            .filter(|e| e.kind == "agent_died")
            .count()
    }

    /// A task folder of its own, made now; the folder goes with the first value.
    fn new_task() -> (tempfile::TempDir, Task, chrono::DateTime<chrono::Utc>) {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        let now = chrono::Utc::now();
        crate::store::task::create_or_repair(&task, now).unwrap();
        (d, task, now)
    }

    /// A restart that started no PM is taken back from the restarts that count, so a full
    /// disk for a few seconds cannot use up the budget meant for a PM that keeps dying.
    #[test]
    fn a_failed_restart_is_not_counted_and_is_tried_again() {
        let (_d, task, died) = new_task();
        let (earlier, tried) = (
            died - chrono::Duration::seconds(90),
            died + chrono::Duration::seconds(4),
        );
        task.update_state(died, |st| {
            st.pm_restarts = vec![earlier, tried];
            Ok(())
        })
        .unwrap();
        let e = crate::core::error::Error::BadInput("No space left on device".into());
        assert_eq!(restart_failed(&task, died, tried, &e), Duration::from_secs(2));
        assert_eq!(task.state().unwrap().pm_restarts, vec![earlier]);
        let events = crate::store::events::read(&crate::store::events::path(&task)).unwrap();
        let failed: Vec<_> = events.iter().filter(|e| e.kind == "pm_restart_failed").collect();
        assert_eq!(failed.len(), 1);
        assert!(failed[0].data["error"].as_str().unwrap().contains("No space"));
        assert!(task.state().unwrap().escalations.is_empty(), "no human yet");
        // Down for five minutes: a human is called, once.
        let late = died + chrono::Duration::seconds(301);
        restart_failed(&task, died, late, &e);
        restart_failed(&task, died, late + chrono::Duration::seconds(60), &e);
        assert_eq!(task.state().unwrap().escalations.len(), 1);
    }

    /// The look read the state before a spawn recorded the death and put its new run on
    /// record: the look neither reports the death again nor marks the new run dead.
    #[test]
    fn a_death_is_reported_once_and_never_marks_the_run_that_replaced_it() {
        let (_d, task, now) = new_task();
        let seen = running("%3");
        task.update_state(now, |st| {
            st.agents.insert("dev".into(), running("%4"));
            Ok(())
        })
        .unwrap();
        let mut reported = BTreeSet::new();
        assert_eq!(mark_dead(&task, "dev", &seen, true, None, "gone", &mut reported), None);
        assert_eq!(task.state().unwrap().agents["dev"].status, AgentStatus::Running);
        assert_eq!(deaths_on_record(&task), 0);
        // Its own run still on record: marked and reported, once.
        task.update_state(now, |st| {
            st.agents.insert("dev".into(), running("%3"));
            Ok(())
        })
        .unwrap();
        assert!(mark_dead(&task, "dev", &seen, true, None, "gone", &mut reported).is_some());
        assert_eq!(task.state().unwrap().agents["dev"].status, AgentStatus::Dead);
        assert_eq!(mark_dead(&task, "dev", &seen, true, None, "gone", &mut reported), None);
        assert_eq!(deaths_on_record(&task), 1);
    }
}
