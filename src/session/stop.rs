//! `task stop`: every session of the task ended, here and on remote hosts; files stay.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ctx;
use crate::error::Result;
use crate::task::{CwdSpec, Task};
/// What `task stop` did, split so that a session still running on an unreachable host
/// is never reported as ended.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Stopped {
    /// Sessions ended.
    pub ended: Vec<String>,
    /// Sessions that were already gone.
    pub already_gone: Vec<String>,
    /// Remote sessions that could not be reached (still running there; retry `task stop`).
    #[serde(default)]
    pub unreachable: Vec<String>,
}

/// End every session of the task recorded in its state; keep every file, so the work
/// can be read and the task started again. Idempotent: stopping twice is safe.
pub async fn stop(ctx: &Ctx, task: &Task, now: DateTime<Utc>) -> Result<Stopped> {
    task.require()?;
    let _l = task.lock_state()?;
    let mut st = task.state_for_update(now)?;
    let mut out = Stopped::default();
    let mut ended_episodes = Vec::new();
    for (name, a) in st.agents.iter_mut() {
        let Some(session) = a.session.clone() else { continue };
        if let Ok(CwdSpec::Remote(r)) = crate::task::taskmd::parse_cwd(&a.host) {
            // An unreachable host must not keep the local sessions running: report and go on.
            let ended = async {
                crate::remote::Host::connect(&r)
                    .await?
                    .tmux()?
                    .kill_session(&session)
                    .await
            }
            .await;
            match ended {
                Ok(true) => out.ended.push(format!("{session}@{}", r.destination())),
                Ok(false) => out.already_gone.push(format!("{session}@{}", r.destination())),
                Err(e) => {
                    tracing::warn!(host = %r.destination(), error = %e, "cannot stop a remote agent");
                    out.unreachable.push(format!("{session}@{}", r.destination()));
                    continue;
                }
            }
            a.status = "stopped".into();
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
        if a.status == "running" || a.status.is_empty() {
            a.status = "stopped".into();
        }
    }
    for (name, at) in &ended_episodes {
        st.close_attention_escalation(name, at);
    }
    task.save_state(&st)?;
    drop(_l);
    for (name, at) in &ended_episodes {
        crate::events::append(
            task,
            "attention_cleared",
            Some(name),
            serde_json::json!({"kind": at.kind, "reason": at.reason, "since": at.since, "resumed": at.resumed_at.is_some(), "stopped": true}),
            now,
        )?;
    }
    if ended_episodes.iter().any(|(_, at)| at.escalated_at.is_some()) {
        crate::escalation::refresh_progress(task, now)?;
    }
    // Every lane comes free and nothing queued starts later; the handoff files stay.
    crate::lanes::release_all(task, now)?;
    if let Err(e) = ctx.tmux.end_if_empty().await {
        tracing::debug!(error = %e, "could not end the empty tmux server");
    }
    Ok(out)
}
