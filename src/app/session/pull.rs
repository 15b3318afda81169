//! Bringing remote agents' work home: every remote host's handoffs and artifacts are
//! pulled into the local task folder, which stays the one the supervisor reads.

use std::time::Duration;

use crate::app::recent::Lately;
use crate::core::error::{Error, Result};
use crate::store::task::Task;
/// The remote hosts this task has agents on (from the state): the supervisor pulls only
/// when there is somewhere to pull from.
pub fn remote_hosts(task: &Task) -> Vec<crate::core::model::RemoteSpec> {
    hosts_of(task, |_| true)
}

/// The remote hosts where this task has an agent that may still write (running, or done
/// but able to amend): those worth watching live ([`crate::io::remote::watch`]). A stopped
/// task watches nothing and holds no connection.
pub fn watched_hosts(task: &Task) -> Vec<crate::core::model::RemoteSpec> {
    hosts_of(task, |a| !a.status.is_gone())
}

fn hosts_of(
    task: &Task,
    keep: impl Fn(&crate::core::model::AgentState) -> bool,
) -> Vec<crate::core::model::RemoteSpec> {
    let Ok(st) = task.state() else { return Vec::new() };
    let mut out: Vec<crate::core::model::RemoteSpec> = Vec::new();
    for a in st.agents.values().filter(|a| keep(a)) {
        if let Some(r) = a.host.remote() {
            if !out.contains(r) {
                out.push(r.clone());
            }
        }
    }
    out
}

/// [`pull_remotes`], unless `lately` says a clean pull of the task started less than
/// `within` ago. The daemon pulls the moment a remote handoff is written and then checks
/// in; pulling again before that check-in would only add a round trip to its latency.
pub async fn pull_remotes_unless_fresh(task: &Task, within: Duration, lately: &Lately) -> Pulled {
    if lately.pulled.within(within) {
        tracing::debug!(task = %task.name, "remote hosts pulled moments ago; not again");
        return Pulled::default();
    }
    pull_remotes(task, lately).await
}

/// What a pull of a task's remote hosts did.
#[derive(Debug, Default)]
pub struct Pulled {
    /// What went wrong, one line per host that could not be pulled.
    pub problems: Vec<String>,
    /// The handoffs it brought (names in `handoffs/`), in place and whole: the caller
    /// takes them as renamed in ([`crate::store::handoffs::How::Renamed`]) at once, rather
    /// than when the watcher's event for rsync's rename reaches it.
    pub arrived: Vec<String>,
}

/// Pull every remote host's handoffs and artifacts of this task into the local folder.
/// An unreachable host is reported and skipped; the others are still pulled. A clean
/// pull is noted in `lately`.
pub async fn pull_remotes(task: &Task, lately: &Lately) -> Pulled {
    pull_hosts(task, &remote_hosts(task), lately).await
}

/// [`pull_remotes`] for `hosts` only: those a remote watch said changed. The others have
/// watches of their own (and the periodic pull behind them), so a clean pull of these
/// counts as the task's fresh pull.
pub async fn pull_hosts(task: &Task, hosts: &[crate::core::model::RemoteSpec], lately: &Lately) -> Pulled {
    // Hosts the actor found silent are passed over: its look tries them on every tick.
    let hosts: Vec<_> = hosts
        .iter()
        .filter(|r| !lately.is_silent(&crate::core::model::AgentHost::Remote((*r).clone()).to_string()))
        .cloned()
        .collect();
    // What a pull brings is what existed when it started: freshness counts from here.
    let started = std::time::Instant::now();
    tracing::debug!(task = %task.name, hosts = hosts.len(), "pulling remote hosts");
    // Every host at once: one that is slow or silent holds up no other's handoffs.
    let pulls = futures_util::future::join_all(hosts.iter().map(|spec| pull_from(task, spec))).await;
    let mut out = Pulled::default();
    for (spec, r) in hosts.iter().zip(pulls) {
        if let Err(e) = mark_reachable(task, spec, r.is_ok()) {
            tracing::warn!(error = %e, "cannot record the host's reachability");
        }
        match r {
            Ok(names) => out.arrived.extend(names),
            Err(e) => {
                tracing::warn!(host = %spec.destination(), error = %e, "pull failed");
                out.problems.push(e.to_string());
            }
        }
    }
    tracing::debug!(task = %task.name, problems = out.problems.len(), arrived = out.arrived.len(), "pulled remote hosts");
    if out.problems.is_empty() {
        lately.pulled.done(started);
    } else {
        lately.pulled.failed();
    }
    out
}

/// Pull one host's copy of the task folder (handoffs and artifacts) into the local one;
/// the handoffs it brought.
pub async fn pull_from(task: &Task, spec: &crate::core::model::RemoteSpec) -> Result<Vec<String>> {
    let host = crate::io::remote::Host::connect_backoff(spec).await?;
    let cwd = host.cwd().await?;
    // A pull never holds a check-in hostage: rsync has its own --timeout, SFTP this one.
    tokio::time::timeout(
        Duration::from_secs(120),
        host.pull(&format!("{cwd}/tasks/{}", task.name), &task.dir()),
    )
    .await
    .map_err(|_| {
        Error::Remote(format!(
            "pulling from {} took over 120 s; retried next time",
            spec.destination()
        ))
    })?
}

/// Record (or clear) since when a host's agents cannot be reached; writes only on a change.
/// The pulls say it, and the actor's look when a host's heartbeat goes silent or comes back.
pub fn mark_reachable(task: &Task, spec: &crate::core::model::RemoteSpec, ok: bool) -> Result<()> {
    let on_it = |a: &crate::core::model::AgentState| a.host.remote() == Some(spec);
    let changes = |st: &crate::core::model::PmState| {
        st.agents
            .values()
            .any(|a| on_it(a) && a.unreachable_since.is_some() == ok)
    };
    if !changes(&*task.state()?) {
        return Ok(());
    }
    let now = crate::core::clock::now();
    task.update_state(now, |st| {
        for a in st.agents.values_mut().filter(|a| on_it(a)) {
            match (ok, a.unreachable_since) {
                (true, Some(_)) => a.unreachable_since = None,
                (false, None) => a.unreachable_since = Some(now),
                _ => {}
            }
        }
        Ok(())
    })
}
