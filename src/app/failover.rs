//! Failover (task.md `failover: on`): an agent on a host silent for longer than
//! `failover_after:` is started again on another host of the fleet, in the lane it holds,
//! from the PM's handoff that started it and what of its work had come home; the PM is
//! told. The run it leaves behind is recorded first (`left_behind` in the state), and
//! stopped the moment its host answers again — never left running beside its successor —
//! and whatever it wrote there meanwhile is pulled home then.
//!
//! The decision of when is the actor's look at its hosts (`daemon::deaths`); the wait and
//! the switch are `core::fleet::failover`'s.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::app::session::Ctx;
use crate::core::checkin::signals::{Signal, SignalKind};
use crate::core::clock;
use crate::core::model::{AgentHost, LeftBehind, RemoteSpec};
use crate::store::events::{self, Kind};
use crate::store::task::Task;

/// What the new run is told after its PM's handoff.
const TEMPLATE: &str = include_str!("../../templates/failover.md");

/// How long the task lets a host be silent before moving its agents; `None` when failover
/// is off, or task.md cannot be read or says something wrong (logged: nothing is moved).
pub fn wait(task: &Task) -> Option<Duration> {
    let spec = task.spec().ok()?;
    match crate::core::fleet::failover(spec.setting("failover"), spec.setting("failover_after")) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(task = %task.name, error = %e, "failover is off: task.md's setting is wrong");
            None
        }
    }
}

/// The agent's handoffs that came home, newest last (at most the last five).
fn came_home(task: &Task, agent: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(task.dir().join("handoffs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.strip_prefix(agent).is_some_and(|r| r.starts_with('-')) && n.ends_with(".md"))
        .collect();
    names.sort();
    let skip = names.len().saturating_sub(5);
    names.split_off(skip)
}

/// Move each of `agents` off `host` (silent since `since`): record the run left behind,
/// start it on another host, tell the PM. One signal per agent, moved or not.
pub async fn move_off(
    ctx: &Ctx,
    task: &Task,
    host: &str,
    agents: &[String],
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<Signal> {
    let mut out = Vec::new();
    for agent in agents {
        let text = match move_one(ctx, task, agent, host, since, now).await {
            Ok((to, why, handoffs)) => {
                let _ = events::append(
                    task,
                    Kind::AgentMoved,
                    Some(agent),
                    serde_json::json!({"from": host, "to": to, "silent_since": since, "why": why}),
                    now,
                );
                tracing::warn!(task = %task.name, %agent, from = %host, %to, "agent moved off a silent host");
                format!(
                    "{agent} was started again on host {to} ({why}): host {host} has not answered since {}. It goes on from your handoff and its own handoffs that came home ({handoffs}); what it wrote on {host} after that is not here yet — it comes home, and the old run is stopped, when {host} answers",
                    clock::local_time(since)
                )
            }
            Err(e) => {
                tracing::warn!(task = %task.name, %agent, from = %host, error = %e, "agent not moved");
                format!(
                    "{agent} could not be moved off host {host} (silent since {}): {e}. It stays recorded there; stop it and spawn the work again, or wait for the host",
                    clock::local_time(since)
                )
            }
        };
        out.push(Signal {
            kind: SignalKind::Moved,
            agent: agent.clone(),
            file: None,
            text,
        });
    }
    out
}

/// One agent moved: (the new host's name, why there, its handoffs that came home).
async fn move_one(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    host: &str,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> crate::core::error::Result<(String, String, String)> {
    // The intent first: a crash after the new start still stops the old run on heal.
    let mut recorded = false;
    let mut branch = None;
    task.update_state(now, |st| {
        if let Some(a) = st.agents.get_mut(agent)
            && a.host.to_string() == host
            && let Some(session) = a.session.clone()
        {
            branch = a.worktree.as_ref().and_then(|w| w.branch.clone());
            a.left_behind.push(LeftBehind {
                host: a.host.clone(),
                session,
                pane: a.pane.clone(),
                tmux_server: a.tmux_server.clone(),
                silent_since: since,
                moved_at: now,
            });
            recorded = true;
        }
        Ok(())
    })?;
    if !recorded {
        return Err(crate::core::error::Error::BadInput(format!(
            "{agent} is no longer recorded on {host}"
        )));
    }
    let handoffs = came_home(task, agent);
    let handoffs = if handoffs.is_empty() {
        "none".to_string()
    } else {
        handoffs.join(", ")
    };
    let since_s = clock::local_time(since).to_string();
    let started = crate::app::session::start_elsewhere(
        ctx,
        task,
        agent,
        &crate::core::preamble::fill(
            TEMPLATE,
            &[
                ("agent", agent),
                ("host", host),
                ("since", &since_s),
                ("new_host", "another host"),
                ("handoffs", &handoffs),
            ],
        ),
        now,
    )
    .await;
    // A worktree agent's commits live on its branch there: name what did not come home.
    let handoffs = match branch {
        Some(b) => format!("{handoffs}; its branch {b} stays on {host} with whatever it had not merged"),
        None => handoffs,
    };
    match started {
        Ok((_, choice)) => Ok((choice.host, choice.why, handoffs)),
        Err(e) => {
            // Not moved: the run on the silent host is still the agent's.
            let _ = task.update_state(clock::now(), |st| {
                if let Some(a) = st.agents.get_mut(agent) {
                    a.left_behind
                        .retain(|l| l.moved_at != now || l.host.to_string() != host);
                }
                Ok(())
            });
            Err(e)
        }
    }
}

/// The hosts where some agent of the task left a run behind.
pub fn left_behind_hosts(st: &crate::core::model::PmState) -> Vec<RemoteSpec> {
    let mut out: Vec<RemoteSpec> = Vec::new();
    for l in st.agents.values().flat_map(|a| &a.left_behind) {
        if let Some(r) = l.host.remote()
            && !out.contains(r)
        {
            out.push(r.clone());
        }
    }
    out
}

/// `spec`'s host answers again: every run left behind there is stopped (unless it is the
/// agent's current run: a move that never started), whatever it wrote there is pulled
/// home, and the record is dropped. A stop that fails keeps the record (tried again).
pub async fn stop_left_behind(task: &Task, spec: &RemoteSpec, now: DateTime<Utc>) -> Vec<Signal> {
    let Ok(st) = task.state() else { return Vec::new() };
    let host = AgentHost::Remote(spec.clone());
    let mut stopped: Vec<(String, LeftBehind)> = Vec::new();
    let Ok(h) = crate::io::remote::Host::connect_backoff(spec).await else {
        return Vec::new();
    };
    let Ok(tmux) = h.tmux() else { return Vec::new() };
    for (agent, a) in &st.agents {
        for l in a.left_behind.iter().filter(|l| l.host == host) {
            if a.host == host {
                stopped.push((agent.clone(), l.clone()));
                continue;
            }
            match tmux.kill_session(&l.session).await {
                Ok(_) => stopped.push((agent.clone(), l.clone())),
                Err(e) => {
                    tracing::warn!(task = %task.name, %agent, host = %host, error = %e, "cannot stop the run left behind; tried again")
                }
            }
        }
    }
    if stopped.is_empty() {
        return Vec::new();
    }
    // What the old runs wrote while their host was silent comes home now (and is told as
    // any handoff is, by the scan that follows).
    if let Err(e) = crate::app::session::pull_from(task, spec).await {
        tracing::warn!(task = %task.name, host = %host, error = %e, "cannot pull the host that came back");
    }
    let _ = task.update_state(now, |st| {
        for (agent, l) in &stopped {
            if let Some(a) = st.agents.get_mut(agent) {
                a.left_behind.retain(|x| x != l);
            }
        }
        Ok(())
    });
    let mut out = Vec::new();
    for (agent, l) in stopped {
        if a_current(&st, &agent, &host) {
            continue;
        }
        let _ = events::append(
            task,
            Kind::AgentStopped,
            Some(&agent),
            serde_json::json!({"by": "failover", "host": host.to_string(), "session": l.session}),
            now,
        );
        tracing::info!(task = %task.name, %agent, host = %host, "run left behind stopped");
        out.push(Signal {
            kind: SignalKind::Moved,
            agent: agent.clone(),
            file: None,
            text: format!(
                "host {host} answers again: the run of {agent} left there was stopped (its successor goes on); what it wrote there meanwhile was pulled home"
            ),
        });
    }
    out
}

fn a_current(st: &crate::core::model::PmState, agent: &str, host: &AgentHost) -> bool {
    st.agents.get(agent).is_some_and(|a| &a.host == host)
}
