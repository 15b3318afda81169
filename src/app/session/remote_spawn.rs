//! A spawn on another host, when task.md's `cwd:` is remote and the agent's role runs there.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::launch::record_start;
use super::preamble::{Place, handoff_file_name, save_preamble, spoke_preamble};
use super::{Ctx, Launch};
use crate::core::error::{Error, Result};
use crate::core::model::RemoteSpec;
use crate::core::names::AgentName;
use crate::core::protocol::roster::Roster;
use crate::core::report::Started;
use crate::io::remote::Host;
use crate::io::runtime::Runtime;
use crate::io::tmux::SessionSpec;
use crate::store::task::Task;

/// Spawn on a remote host (docs/protocol.md#task-folder): create the task folders there,
/// push the PM's handoff and the preamble, check the runtime is installed there,
/// then start the agent in the host's own tmux server over the ssh master.
#[allow(clippy::too_many_arguments)] // one call site, the spawn; a struct would only rename them
pub(super) async fn spawn_remote(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    roster: &Roster,
    spec: &RemoteSpec,
    rt: &Runtime,
    handoff_path: &Path,
    handoff_text: &str,
    placed: Option<&crate::app::worktree::Placement>,
    now: DateTime<Utc>,
) -> Result<Started> {
    let host = Host::connect(spec).await?;
    let root = working_folder(&host, spec, task).await?;
    // Its own worktree in the host's clone, when it has one.
    let cwd = placed.map_or_else(|| root.clone(), |p| p.cwd.display().to_string());
    let block = placed.map(crate::app::worktree::Placement::preamble_block);
    let destination = spec.destination();
    let place = Place::Remote {
        destination: &destination,
        cwd: &cwd,
        root: &root,
        worktree: block.as_deref(),
    };
    let rdir = place.task_dir(task);
    let session = ctx.session_name(task, agent.as_str());
    let role = roster.role_of(agent.as_str()).as_str();
    let file_name = handoff_file_name(handoff_path);
    let text = spoke_preamble(task, agent.as_str(), roster, &place, handoff_path, handoff_text, now);
    let local_copy = save_preamble(task, agent.as_str(), &text, now)?;
    let prompt_file = format!(
        "{rdir}/scratchpad/{agent}/{}",
        local_copy
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let session_id = uuid::Uuid::new_v4().to_string();
    let built = Launch {
        task,
        agent: agent.as_str(),
        session: &session,
        session_id: &session_id,
        task_dir: &rdir,
        remote: true,
    }
    .argv(ctx, rt, &text, Path::new(&prompt_file))?;
    let mut argv = built.argv;
    argv[0] = program_on_host(&host, ctx, spec, rt, &argv[0]).await?;
    push_task_folder(&host, task, agent, &rdir, handoff_path, &file_name).await?;
    host.put(&prompt_file, text.as_bytes()).await?;
    push_bundle(&host, task, agent, &rdir).await?;

    let tmux = host.tmux()?;
    if tmux.has_session(&session).await? {
        // The lane was free: the old session's turn is over.
        tmux.kill_session(&session).await?;
    }
    let env = session_env(task, agent, &rdir, role);
    let pane = tmux
        .new_session(&SessionSpec {
            name: &session,
            cwd: Path::new(&cwd),
            env,
            argv: argv.clone(),
        })
        .await?;
    tracing::info!(agent = %agent, host = %spec.destination(), session = %session, pane = %pane, "remote agent started");
    let started = Started {
        agent: agent.to_string(),
        session,
        pane,
        runtime: rt.name.clone(),
        preamble: local_copy,
        argv,
        host: spec.destination(),
        sandbox: built.sandbox.as_str().into(),
        sandbox_why: built.sandbox.why(),
    };
    // As for a local agent: the host's next tmux server numbers its panes from %0 again.
    let server = match tmux.server_id(&started.pane).await {
        Ok(s) => Some(s.0),
        Err(e) => {
            tracing::warn!(agent = %agent, pane = %started.pane, error = %e, "cannot ask the host's tmux which server holds the pane; its id is recorded alone");
            None
        }
    };
    record_start(
        task,
        &started,
        role,
        crate::core::model::AgentHost::Remote(spec.clone()),
        session_id,
        server,
        now,
    )?;
    Ok(started)
}

/// The host's working folder (task.md's remote `cwd:`). Like locally, a missing one is a
/// mistake to report, not to create.
async fn working_folder(host: &Host, spec: &RemoteSpec, task: &Task) -> Result<String> {
    let root = host.cwd().await?;
    if host
        .run("look for the working folder", &["test", "-d", &root], None)
        .await
        .is_err()
    {
        return Err(Error::BadInput(format!(
            "the remote working folder {root} does not exist on {}; create it there or fix cwd: in {} — nothing was started",
            spec.destination(),
            task.task_md().display()
        )));
    }
    Ok(root)
}

/// The program the agent runs, as the host has it: it must be installed there, and the
/// built-in demo agent runs the host's own `task`.
async fn program_on_host(host: &Host, ctx: &Ctx, spec: &RemoteSpec, rt: &Runtime, program: &str) -> Result<String> {
    let mut program = program.to_string();
    if program == ctx.task_bin.display().to_string() && !host.has_program(&program).await {
        program = "task".into();
    }
    if !host.has_program(&program).await {
        return Err(Error::BadInput(format!(
            "`{program}` is not installed on {} (runtime {}); install it there or choose another runtime with --runtime — nothing was started",
            spec.destination(),
            rt.name
        )));
    }
    Ok(program)
}

/// The task folder on the host: its folders, task.md (so the agent sees the goal and
/// `task handoff` there finds the task) and the PM's handoff.
async fn push_task_folder(
    host: &Host,
    task: &Task,
    agent: &AgentName,
    rdir: &str,
    handoff_path: &Path,
    file_name: &str,
) -> Result<()> {
    let mut dirs: Vec<String> = ["handoffs", "scratchpad"]
        .iter()
        .map(|d| format!("{rdir}/{d}"))
        .collect();
    dirs.push(format!("{rdir}/artifacts/{agent}"));
    dirs.push(format!("{rdir}/scratchpad/{agent}"));
    for d in crate::store::task::ARTIFACT_KINDS {
        dirs.push(format!("{rdir}/artifacts/{d}"));
    }
    let mut mkdir = vec!["mkdir", "-p", "--"];
    mkdir.extend(dirs.iter().map(String::as_str));
    host.run("create the task folders", &mkdir, None).await?;
    let task_md = std::fs::read(task.task_md()).map_err(|e| Error::io("read", task.task_md(), e))?;
    host.put(&format!("{rdir}/task.md"), &task_md).await?;
    // The file itself (bytes and mtime), so the next pull sees it unchanged and leaves it.
    let raw = std::fs::read(handoff_path).map_err(|e| Error::io("read", handoff_path, e))?;
    let mtime = std::fs::metadata(handoff_path)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    host.put_with_mtime(&format!("{rdir}/handoffs/{file_name}"), &raw, mtime)
        .await?;
    Ok(())
}

/// The agent's context bundle on the host, replacing its earlier copy whole.
async fn push_bundle(host: &Host, task: &Task, agent: &AgentName, rdir: &str) -> Result<()> {
    let bundle = crate::store::bundle::files(task, agent.as_str())?;
    let remote_bundle = format!("{rdir}/active_agents/{agent}");
    host.run(
        "clear the old context bundle",
        &["rm", "-rf", "--", &remote_bundle],
        None,
    )
    .await?;
    let bundle_dirs: std::collections::BTreeSet<String> = bundle
        .iter()
        .filter_map(|(rel, _)| Path::new(rel).parent().map(|p| format!("{rdir}/{}", p.display())))
        .collect();
    if !bundle_dirs.is_empty() {
        let mut mkdir = vec!["mkdir", "-p", "--"];
        mkdir.extend(bundle_dirs.iter().map(String::as_str));
        host.run("create the bundle folders", &mkdir, None).await?;
    }
    for (rel, bytes) in &bundle {
        host.put(&format!("{rdir}/{rel}"), bytes).await?;
    }
    Ok(())
}

/// What the agent's session is started with: who it is, in which task.
fn session_env(task: &Task, agent: &AgentName, rdir: &str, role: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("TASK_NAME".to_string(), task.name.to_string()),
        ("TASK_DIR".into(), rdir.to_string()),
        ("TASK_AGENT".into(), agent.to_string()),
        ("TASK_ROLE".into(), role.to_string()),
    ];
    for k in ["AO_DEMO_PAUSE_MS", "AO_DEMO_IDLE"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    env
}
