//! Launching an agent on this machine: its environment, its tmux session, its record.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::preamble::save_preamble;
use super::{Ctx, Launch, require_cwd};
use crate::core::error::{Error, Result};
use crate::core::model::AgentState;
use crate::core::report::Started;
use crate::io::runtime::Runtime;
use crate::io::tmux::{SessionSpec, Socket};
use crate::store::task::Task;

/// The environment every agent pane gets.
fn agent_env(ctx: &Ctx, task: &Task, agent: &str, role: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("TASK_NAME".into(), task.name.to_string()),
        ("TASK_DIR".into(), task.dir().display().to_string()),
        ("TASK_AGENT".into(), agent.to_string()),
        ("TASK_ROLE".into(), role.to_string()),
        ("AO_SESSION_PREFIX".into(), ctx.prefix.clone()),
        (
            "AO_TMUX_SOCKET".into(),
            match ctx.tmux.socket() {
                Socket::Name(n) => n.clone(),
                Socket::Path(p) => p.display().to_string(),
            },
        ),
    ];
    for k in [
        "AO_TMUX_GUARD_DIR",
        "AO_DEMO_PAUSE_MS",
        "AO_DEMO_IDLE",
        "AO_DEMO_SHOW_PASTE",
        "AO_DEMO_LATE_PASTE_MS",
        "AO_DEMO_LATE_PASTE_IDLE",
        "XDG_CONFIG_HOME",
        "HOME",
        "TMPDIR",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    // Preambles teach plain `task …` commands (what the permission rules allow), so this
    // binary's folder comes first on the agent's PATH.
    let mut path: Vec<PathBuf> = ctx.task_bin.parent().map(Path::to_path_buf).into_iter().collect();
    path.extend(std::env::var_os("PATH").iter().flat_map(std::env::split_paths));
    if let Ok(joined) = std::env::join_paths(path) {
        env.push(("PATH".into(), joined.to_string_lossy().into_owned()));
    }
    env
}

/// Which conversation a start begins, and what it does with a session of the same name.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Begin<'a> {
    /// A new conversation. A PM's session already there is refused (`task start` must not
    /// double a running PM); a spoke's is replaced (its lane was free, so its turn is over).
    New,
    /// The PM's session replaced, by its conversation `resume` resumed or (None) a new one:
    /// a restart or a rotation. The old session goes only once the new start's preamble is
    /// saved, so a start that cannot write it (a full disk) leaves the old PM running.
    Replace { resume: Option<&'a str> },
}

/// Start `agent` in a new local tmux session and record it in the state. Everything that
/// can fail is checked before anything is created, so a refused start leaves no session.
#[allow(clippy::too_many_arguments)] // called by start, restart and the local spawn; a struct would only rename them
pub(crate) async fn start_agent(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    role: &str,
    rt: &Runtime,
    preamble_text: &str,
    cwd: &Path,
    now: DateTime<Utc>,
    begin: Begin<'_>,
) -> Result<Started> {
    let session = ctx.session_name(task, agent);
    let resume = match begin {
        Begin::New => None,
        Begin::Replace { resume } => resume,
    };
    let session_id = resume
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let task_dir = task.dir().display().to_string();
    let launch = Launch {
        task,
        agent,
        session: &session,
        session_id: &session_id,
        task_dir: &task_dir,
        remote: false,
    };
    // Check everything that can fail before anything is created.
    launch.argv(ctx, rt, preamble_text, Path::new("/dev/null"))?;
    require_cwd(task, cwd)?;
    let existing = ctx.tmux.has_session(&session).await?;
    if existing && agent == "pm" && matches!(begin, Begin::New) {
        return Err(Error::BadInput(format!(
            "the PM of task '{}' is already running in tmux session {session}; look with `task attach {}`",
            task.name, task.name
        )));
    }
    let prompt_file = save_preamble(task, agent, preamble_text, now)?;
    if existing {
        tracing::info!(agent, session = %session, "replacing the agent's previous session");
        ctx.tmux.kill_session(&session).await?;
        crate::io::hooks::pause(crate::io::hooks::Point::StartReplaced).await;
    }
    let built = launch.argv(ctx, rt, preamble_text, &prompt_file)?;
    let argv = built.argv;
    let mut env = agent_env(ctx, task, agent, role);
    if built.sandbox == crate::core::sandbox::State::On
        && rt.sandbox_kind() == Some(crate::io::runtime::SandboxKind::Codex)
    {
        // Codex's sandbox keeps /tmp read-only (another task's files may be there); the
        // agent's temp files go to a folder of its own, which it may write.
        let tmp = task.scratchpad().join(agent).join("tmp");
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), tmp.display().to_string()));
    }
    let pane = ctx
        .tmux
        .new_session(&SessionSpec {
            name: &session,
            cwd,
            env,
            argv: argv.clone(),
        })
        .await?;
    tracing::info!(agent, session = %session, pane = %pane, runtime = %rt.name, preamble_bytes = preamble_text.len(), "agent started");
    let started = Started {
        agent: agent.into(),
        session,
        pane,
        runtime: rt.name.clone(),
        preamble: prompt_file,
        argv,
        host: "local".into(),
        sandbox: built.sandbox.as_str().into(),
        sandbox_why: built.sandbox.why(),
    };
    // The pane id alone is reused by the next server; the record names the server too.
    let server = match ctx.tmux.server_id(&started.pane).await {
        Ok(s) => Some(s.0),
        Err(e) => {
            tracing::warn!(agent, pane = %started.pane, error = %e, "cannot ask tmux which server holds the pane; its id is recorded alone");
            None
        }
    };
    record_start(
        task,
        &started,
        role,
        crate::core::model::AgentHost::Local,
        session_id,
        server,
        now,
    )?;
    Ok(started)
}

/// Write a just-started agent into the state: the one place a start is recorded, so a local
/// and a remote start leave the same record (`host` is `local` or the remote spec).
pub(super) fn record_start(
    task: &Task,
    started: &Started,
    role: &str,
    host: crate::core::model::AgentHost,
    session_id: String,
    tmux_server: Option<String>,
    now: DateTime<Utc>,
) -> Result<()> {
    task.update_state(now, |st| {
        let a = st
            .agents
            .entry(started.agent.clone())
            .or_insert_with(AgentState::default);
        a.role = role.into();
        a.host = host;
        a.session = Some(started.session.clone());
        a.pane = Some(started.pane.clone());
        a.tmux_server = tmux_server;
        a.status = crate::core::model::AgentStatus::Running;
        a.runtime = Some(started.runtime.clone());
        if let Some(old) = a.session_id.take().filter(|o| *o != session_id) {
            if !a.past_sessions.contains(&old) {
                a.past_sessions.push(old);
            }
        }
        a.session_id = Some(session_id);
        a.started_at = Some(now);
        a.checkins = 0;
        a.last_activity = Some(now);
        Ok(())
    })
}
