//! `task stop`: every session of the task ended, here and on remote hosts; files stay.

use chrono::{DateTime, Utc};

use std::path::{Path, PathBuf};

use super::Ctx;
use crate::core::error::Result;
use crate::core::model::AgentStatus;
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
    let _l = task.lock_state()?;
    let mut st = task.state_for_update(now)?;
    let mut out = Stopped::default();
    let mut ended_episodes = Vec::new();
    for (name, a) in st.agents.iter_mut() {
        let Some(session) = a.session.clone() else { continue };
        if let Some(r) = a.host.remote().cloned() {
            // An unreachable host must not keep the local sessions running: report and go on.
            if !kill_remote(&r, &session, &mut out).await {
                continue;
            }
            a.status = AgentStatus::Stopped;
            if let Some(at) = a.attention.take() {
                ended_episodes.push((name.clone(), at));
            }
            continue;
        }
        if ctx.tmux.kill_session(&session).await? {
            out.ended.push(session);
        } else {
            out.already_gone.push(session);
        }
        // No pane, no dialog: a stopped agent's episode and its call for a human end here.
        if let Some(at) = a.attention.take() {
            ended_episodes.push((name.clone(), at));
        }
        if matches!(a.status, AgentStatus::Running | AgentStatus::Unknown) {
            a.status = AgentStatus::Stopped;
        }
    }
    for (name, at) in &ended_episodes {
        st.close_attention_escalation(name, at);
    }
    task.save_state(&st)?;
    drop(_l);
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
