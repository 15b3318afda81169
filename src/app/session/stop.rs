//! `task stop`: every session of the task ended, here and on remote hosts; files stay.

use chrono::{DateTime, Utc};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Ctx;
use crate::core::attention::Attention;
use crate::core::error::Result;
use crate::core::model::{AgentState, AgentStatus, PmState};
use crate::core::report::Stopped;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// End every session of the task recorded in its state; keep every file, so the work
/// can be read and the task started again. Idempotent: stopping twice is safe.
pub async fn stop(ctx: &Ctx, task: &Task, now: DateTime<Utc>) -> Result<Stopped> {
    if !task.dir().is_dir() {
        let out = stop_orphans(ctx, task).await?;
        if out.ended.is_empty() {
            task.require()?; // nothing of it runs either: say there is no such task
        }
        return Ok(out);
    }
    task.require()?;
    if !writable(&task.dir()) {
        return stop_read_only(ctx, task).await;
    }
    // The state's lock is taken to read the sessions and to record them ended, never
    // while they are ended: an unreachable host takes seconds, and the daemon runs on one
    // thread, where a request for this task waiting on the lock would wait on that thread.
    // Read again after each round, so an agent started meanwhile is ended too.
    let mut out = Stopped::default();
    let mut handled = BTreeSet::new();
    let mut ended_episodes = Vec::new();
    for _ in 0..ROUNDS {
        let sessions = task.update_state(now, |st| Ok(to_end(st, &handled)))?;
        if sessions.is_empty() {
            break;
        }
        let mut stopped = Vec::new();
        let mut failed = None;
        for end in sessions {
            handled.insert(end.run.clone());
            let reached = match &end.remote {
                // An unreachable host must not keep the local sessions running: report and go on.
                Some(r) => kill_remote(r, &end.run.1, &mut out).await,
                None => match kill_local(ctx, &end.run.1, &mut out).await {
                    Ok(()) => true,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                },
            };
            if reached {
                stopped.push(end.run);
            }
        }
        // What was ended is recorded even when ending the next one failed.
        ended_episodes.extend(task.update_state(now, |st| Ok(record_stopped(st, &stopped)))?);
        if let Some(e) = failed {
            return Err(e);
        }
    }
    for (name, at) in &ended_episodes {
        crate::store::events::append(
            task,
            EventKind::AttentionCleared,
            Some(name),
            serde_json::json!({"kind": at.kind, "reason": at.reason, "since": at.since, "resumed": at.resumed_at.is_some(), "stopped": true}),
            now,
        )?;
    }
    if ended_episodes.iter().any(|(_, at)| at.escalated_at.is_some()) {
        crate::app::escalation::refresh_progress(task, now)?;
    }
    // Every lane comes free and nothing queued starts later; the handoff files stay.
    crate::app::lanes::release_all(task, now)?;
    if let Err(e) = ctx.tmux.end_if_empty().await {
        tracing::debug!(error = %e, "could not end the empty tmux server");
    }
    Ok(out)
}

/// How many times the sessions are read and ended: an agent started while the others were
/// ended is found by the next read; one started after every round is past a stop.
const ROUNDS: usize = 3;

/// One run of an agent: its name, its session, when it was started (a session name comes
/// back when the agent is started again; its start time does not).
type Run = (String, String, Option<DateTime<Utc>>);

/// A session to end, and its host when remote.
struct End {
    run: Run,
    remote: Option<crate::core::model::RemoteSpec>,
}

/// The agent's run as the state records it, when it has a session (pure).
fn run_of(name: &str, a: &AgentState) -> Option<Run> {
    Some((name.to_string(), a.session.clone()?, a.started_at))
}

/// The sessions the state names that this stop has not ended yet (pure).
fn to_end(st: &PmState, handled: &BTreeSet<Run>) -> Vec<End> {
    st.agents
        .iter()
        .filter_map(|(name, a)| {
            let run = run_of(name, a)?;
            (!handled.contains(&run)).then(|| End {
                run,
                remote: a.host.remote().cloned(),
            })
        })
        .collect()
}

/// Record the agents whose sessions were ended (or found gone) as stopped, unless the
/// agent has been started again meanwhile; their calls for a human end with their panes.
/// Returns the episodes that ended (pure).
fn record_stopped(st: &mut PmState, stopped: &[Run]) -> Vec<(String, Attention)> {
    let mut ended = Vec::new();
    for run in stopped {
        let name = &run.0;
        let Some(a) = st.agents.get_mut(name) else { continue };
        if run_of(name, a).as_ref() != Some(run) {
            continue;
        }
        if let Some(at) = a.attention.take() {
            ended.push((name.clone(), at));
        }
        if a.host.remote().is_some() || matches!(a.status, AgentStatus::Running | AgentStatus::Unknown) {
            a.status = AgentStatus::Stopped;
        }
    }
    for (name, at) in &ended {
        st.close_attention_escalation(name, at);
    }
    ended
}

/// Whether this process may create files in `dir` (a read-only mount or an immutable
/// folder says no, even to root — unlike the permission bits).
pub(crate) fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access on a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// The task folder an agent's session was started for (its `TASK_DIR`), so a session is
/// only ever matched to the task that started it, never to a same-named task elsewhere.
pub(crate) async fn session_task_dir(tmux: &crate::io::tmux::Tmux, session: &str) -> Option<PathBuf> {
    let target = format!("={session}");
    let out = tmux
        .run(
            "read a session's TASK_DIR",
            &["show-environment", "-t", &target, "TASK_DIR"],
        )
        .await
        .ok()?;
    out.trim().strip_prefix("TASK_DIR=").map(PathBuf::from)
}

async fn kill_local(ctx: &Ctx, session: &str, out: &mut Stopped) -> Result<()> {
    if ctx.tmux.kill_session(session).await? {
        out.ended.push(session.to_string());
    } else {
        out.already_gone.push(session.to_string());
    }
    Ok(())
}

/// The task folder is gone, so there is no state to say which sessions it had: end the
/// sessions of this server whose name fits the task and whose `TASK_DIR` is this task's
/// folder (a same-named task of another project is left alone).
async fn stop_orphans(ctx: &Ctx, task: &Task) -> Result<Stopped> {
    let prefix = ctx.session_name(task, "");
    let mut sessions: Vec<String> = ctx
        .tmux
        .list_panes()
        .await?
        .into_iter()
        .map(|p| p.session)
        .filter(|s| s.starts_with(&prefix))
        .collect();
    sessions.sort();
    sessions.dedup();
    let mut out = Stopped::default();
    for session in sessions {
        if session_task_dir(&ctx.tmux, &session).await.as_deref() == Some(task.dir().as_path()) {
            tracing::info!(session = %session, dir = %task.dir().display(), "ending a session of a deleted task folder");
            kill_local(ctx, &session, &mut out).await?;
        }
    }
    Ok(out)
}

/// End `session` on the remote host `r`, noting the outcome in `out`; `false` when the
/// host could not be reached (the session may still run there).
async fn kill_remote(r: &crate::core::model::RemoteSpec, session: &str, out: &mut Stopped) -> bool {
    let ended = async {
        crate::io::remote::Host::connect(r)
            .await?
            .tmux()?
            .kill_session(session)
            .await
    }
    .await;
    match ended {
        Ok(true) => out.ended.push(format!("{session}@{}", r.destination())),
        Ok(false) => out.already_gone.push(format!("{session}@{}", r.destination())),
        Err(e) => {
            tracing::warn!(host = %r.destination(), error = %e, "cannot stop a remote agent");
            out.unreachable.push(format!("{session}@{}", r.destination()));
            return false;
        }
    }
    true
}

/// The project is read-only: end the sessions its state names, and write nothing (no
/// state, events or lanes; nobody else can change a read-only state meanwhile either).
async fn stop_read_only(ctx: &Ctx, task: &Task) -> Result<Stopped> {
    tracing::warn!(dir = %task.dir().display(), "the task folder is read-only; ending its sessions without recording it");
    let st = task.state()?;
    let mut out = Stopped::default();
    for a in st.agents.values() {
        let Some(session) = a.session.as_deref() else { continue };
        if let Some(r) = a.host.remote() {
            kill_remote(r, session, &mut out).await;
            continue;
        }
        kill_local(ctx, session, &mut out).await?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(agents: serde_json::Value) -> PmState {
        PmState {
            agents: serde_json::from_value(agents).unwrap(),
            ..PmState::default()
        }
    }

    fn at(s: &str) -> Option<DateTime<Utc>> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn each_run_with_a_session_is_ended_once_and_a_run_started_again_is_ended_too() {
        let st = state(serde_json::json!({
            "pm": {"session": "ao-t-pm", "started_at": "2026-11-29T04:00:00Z", "status": "running"},
            "dev": {"session": "ao-t-dev", "started_at": "2026-11-29T04:01:00Z", "host": "alice@build:/srv/w"},
            "idle": {"status": "stopped"}
        }));
        let first = to_end(&st, &BTreeSet::new());
        let names: Vec<&str> = first.iter().map(|e| e.run.0.as_str()).collect();
        assert_eq!(names, ["dev", "pm"], "agents without a session have nothing to end");
        assert!(first[0].remote.is_some() && first[1].remote.is_none());
        let handled: BTreeSet<Run> = first.into_iter().map(|e| e.run).collect();
        assert!(to_end(&st, &handled).is_empty(), "nothing is ended twice");
        // The PM started again under the same session name while the stop ran: a new run.
        let mut again = st.clone();
        again.agents.get_mut("pm").unwrap().started_at = at("2026-11-29T04:05:00Z");
        let second = to_end(&again, &handled);
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].run.0, "pm");
    }

    #[test]
    fn only_the_runs_ended_are_recorded_stopped_and_their_calls_for_a_human_end() {
        let mut st = state(serde_json::json!({
            "pm": {"session": "ao-t-pm", "started_at": "2026-11-29T04:00:00Z", "status": "running",
                   "attention": {"kind": "needs_human", "reason": "dialog", "line": "Allow?", "since": "2026-11-29T04:02:00Z"}},
            "dev": {"session": "ao-t-dev", "started_at": "2026-11-29T04:01:00Z", "status": "done"},
            "qa": {"session": "ao-t-qa", "started_at": "2026-11-29T04:01:00Z", "status": "running"},
            "far": {"session": "ao-t-far", "started_at": "2026-11-29T04:01:00Z", "status": "dead", "host": "alice@build:/srv/w"}
        }));
        let run = |n: &str, s: &str, t: &str| (n.to_string(), s.to_string(), at(t));
        let ended = record_stopped(
            &mut st,
            &[
                run("pm", "ao-t-pm", "2026-11-29T04:00:00Z"),
                run("dev", "ao-t-dev", "2026-11-29T04:01:00Z"),
                // Started again since this run was ended: left as it is.
                run("qa", "ao-t-qa", "2026-11-29T03:00:00Z"),
                run("far", "ao-t-far", "2026-11-29T04:01:00Z"),
            ],
        );
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].0, "pm");
        assert!(st.agents["pm"].attention.is_none());
        assert_eq!(st.agents["pm"].status, AgentStatus::Stopped);
        assert_eq!(
            st.agents["dev"].status,
            AgentStatus::Done,
            "a finished agent stays done"
        );
        assert_eq!(
            st.agents["qa"].status,
            AgentStatus::Running,
            "a newer run is not touched"
        );
        assert_eq!(
            st.agents["far"].status,
            AgentStatus::Stopped,
            "a remote run reached is stopped"
        );
    }
}
