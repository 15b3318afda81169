//! Starting the PM: `task start`, and the supervisor's restart of a PM that died.

use chrono::{DateTime, Utc};

use super::launch::{Begin, start_agent};
use super::preamble::pm_preamble;
use super::{Ctx, choose_runtime, spawn_event};
use crate::core::error::{Error, Result};
use crate::core::report::Started;
use crate::io::runtime;
use crate::store::task::Task;

/// Start the task's PM, creating or repairing the task folder first, so that one command
/// takes a bare goal to a running coordinator; a PM already running is refused, not doubled.
pub async fn start(ctx: &Ctx, task: &Task, runtime_flag: Option<&str>, now: DateTime<Utc>) -> Result<Started> {
    crate::store::task::create_or_repair(task, now)?;
    crate::app::rotate::policy(task)
        .map_err(|e| Error::BadInput(format!("task '{}': {e} (task.md, Agent Config)", task.name)))?;
    let text = pm_preamble(task, now)?;
    let rt = choose_runtime(task, "pm", runtime_flag)?;
    rt.ensure_installed(&ctx.task_bin)?;
    // The commit the task starts at: its branch is made from it if agents get worktrees.
    if let Err(e) = crate::app::worktree::record_start(task, &super::local_cwd(task)?, now).await {
        tracing::warn!(task = %task.name, error = %e, "cannot record the commit the task starts at");
    }
    let session = ctx.session_name(task, "pm");
    if ctx.tmux.has_session(&session).await? {
        // Session names hold no project: a same-named task elsewhere must not read as this one.
        if let Some(other) = super::stop::session_task_dir(&ctx.tmux, &session)
            .await
            .filter(|d| *d != task.dir())
        {
            let other_project = other.parent().and_then(|p| p.parent()).unwrap_or(&other);
            return Err(Error::BadInput(format!(
                "cannot start task '{}' of {}: another project's task of the same name is running \
                 (project {}, session {session}), and tasks share session names across projects. \
                 Stop that one with `task stop {} --project {}`, or give this task another name",
                task.name,
                task.project.display(),
                other_project.display(),
                task.name,
                other_project.display()
            )));
        }
        return Err(Error::BadInput(format!(
            "task '{}' is already running (session {}); watch it with `task attach {}` or `task status {}`",
            task.name,
            ctx.session_name(task, "pm"),
            task.name,
            task.name
        )));
    }
    let s = start_agent(ctx, task, "pm", "hub", &rt, &text, &task.project, now, Begin::New).await?;
    spawn_event(task, "pm", "SPAWN_OK", &s, now)?;
    Ok(s)
}

/// Restart a dead PM, so a task never stalls without its coordinator: its dead session is
/// replaced; the conversation is resumed when the runtime has a `resume_argv` and the PM's
/// session id is known (Claude Code `--resume`), so the PM keeps what it knew; else it
/// starts afresh with its preamble.
pub async fn restart_pm(ctx: &Ctx, task: &Task, now: DateTime<Utc>) -> Result<Started> {
    let st = task.state()?;
    let pm = st.agents.get("pm").cloned().unwrap_or_default();
    let mut rt = std::sync::Arc::unwrap_or_clone(runtime::resolve(pm.runtime.as_deref().unwrap_or("claude"))?);
    let resume = match (&rt.profile.resume_argv, &pm.session_id) {
        (Some(argv), Some(id)) if !argv.is_empty() => {
            rt.profile.argv = argv.clone();
            Some(id.clone())
        }
        _ => None,
    };
    // A roster that no longer loads fails here as it would a moment later in the launch
    // (which asks the roster what the PM may run): either way before anything starts.
    let text = pm_preamble(task, now)?;
    replace_pm(ctx, task, &pm, &rt, &text, resume.as_deref(), now).await
}

/// Replace the PM's conversation by a fresh one (a rotation, see [`crate::core::rotation`]):
/// its session ends and a new one starts with the PM preamble whose opening instruction is
/// replaced by `resume_block`, under a new conversation id. The old id stays in the
/// agent's past sessions, so its cost is still counted. Returns the start and the size of
/// the first prompt.
pub async fn rotate_pm(ctx: &Ctx, task: &Task, resume_block: &str, now: DateTime<Utc>) -> Result<(Started, usize)> {
    let st = task.state()?;
    let pm = st.agents.get("pm").cloned().unwrap_or_default();
    let rt = runtime::resolve(pm.runtime.as_deref().unwrap_or("claude"))?;
    let text = crate::core::rotation::resume_preamble(&pm_preamble(task, now)?, resume_block);
    let s = replace_pm(ctx, task, &pm, &rt, &text, None, now).await?;
    Ok((s, text.len()))
}

/// Start the PM in place of its session (`resume` its conversation, or a new one), and
/// record the spawn. A session recorded under another name than the one the start takes
/// (another session prefix) is ended first: the start itself replaces only its own name,
/// once the new prompt is saved.
async fn replace_pm(
    ctx: &Ctx,
    task: &Task,
    pm: &crate::core::model::AgentState,
    rt: &runtime::Runtime,
    text: &str,
    resume: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Started> {
    if let Some(old) = pm.session.as_deref().filter(|o| *o != ctx.session_name(task, "pm")) {
        ctx.tmux.kill_session(old).await?;
    }
    let begin = Begin::Replace { resume };
    let s = start_agent(ctx, task, "pm", "hub", rt, text, &task.project, now, begin).await?;
    spawn_event(task, "pm", "SPAWN_OK", &s, now)?;
    Ok(s)
}
