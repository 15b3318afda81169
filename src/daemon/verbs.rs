//! The verbs the daemon runs for the CLI (`task spawn`, `task send`, `task stop`):
//! the same library calls the CLI makes without a daemon, so the two modes
//! cannot drift apart.

use std::path::{Path, PathBuf};

use crate::app::session::Ctx;
use crate::core::clock;
use crate::core::error::{Error, Result};
use crate::core::names::{AgentName, TaskName};
use crate::store::task::Task;

use crate::core::wire::{Request, Response};

/// Run one verb request from the process `peer` (the socket's peer credentials) and
/// answer it: its report, a refusal with its reason, or an error. Spawn and send pass the
/// spawn gate here too, with the caller found from `peer` rather than from the request:
/// a spoke writing to the socket itself is refused as through the CLI.
pub async fn run(req: Request, peer: Option<u32>) -> Response {
    verb(req, peer).await.unwrap_or_else(|e| Response::error(&e))
}

async fn gate(ctx: &Ctx, t: &Task, agent: &AgentName, verb: &str, peer: Option<u32>) -> Result<()> {
    let caller = crate::app::gate::caller_of(ctx, peer).await;
    crate::app::gate::check_caller(t, &caller, agent.as_str(), verb)
}

/// Who asks for a PM rotation (the caller behind `peer`), once the gate lets them: the
/// agent's name, or "a human".
pub async fn rotation_caller(s: &crate::core::wire::Supervised, peer: Option<u32>) -> Result<String> {
    let t = task(&s.project, &s.task)?;
    let ctx = Ctx::from_env()?;
    let caller = crate::app::gate::caller_of(&ctx, peer).await;
    crate::app::gate::check_caller(&t, &caller, "pm", "rotate")?;
    Ok(caller.agent.unwrap_or_else(|| "a human".into()))
}

fn task(project: &str, task: &str) -> Result<Task> {
    let name: TaskName = task.parse()?;
    let t = Task::new(Path::new(project), name)?;
    t.require()?;
    Ok(t)
}

/// The daemon's tmux context, refused when the CLI was pointed at another server.
fn ctx(wanted: &str) -> Result<Ctx> {
    let ctx = Ctx::from_env()?;
    if ctx.id() != wanted {
        return Err(Error::BadInput(format!(
            "the daemon drives {} but this command was asked for {wanted}; run `task shutdown` and start the daemon with the same AO_TMUX_SOCKET / AO_SESSION_PREFIX",
            ctx.id()
        )));
    }
    Ok(ctx)
}

async fn verb(req: Request, peer: Option<u32>) -> Result<Response> {
    match req {
        Request::Spawn {
            project,
            task: name,
            agent,
            handoff,
            runtime,
            queue,
            worktree,
            tmux,
        } => {
            let (ctx, t) = (ctx(&tmux)?, task(&project, &name)?);
            let agent: AgentName = agent.parse()?;
            gate(&ctx, &t, &agent, "spawn", peer).await?;
            let mode = if queue {
                crate::app::session::SpawnMode::Queue
            } else {
                crate::app::session::SpawnMode::Start
            };
            let started = crate::app::session::spawn_with(
                &ctx,
                &t,
                &agent,
                &PathBuf::from(handoff),
                &crate::core::protocol::lane::SpawnFlags {
                    runtime,
                    isolation: worktree,
                },
                mode,
                clock::now(),
            )
            .await?;
            Ok(Response::Spawned {
                report: Box::new(started),
            })
        }
        Request::Send {
            project,
            task: name,
            agent,
            text,
            tmux,
        } => {
            let (ctx, t) = (ctx(&tmux)?, task(&project, &name)?);
            let agent: AgentName = agent.parse()?;
            gate(&ctx, &t, &agent, "send", peer).await?;
            let report = crate::app::session::send(&ctx, &t, agent.as_str(), &text).await?;
            Ok(Response::Sent { report })
        }
        Request::Stop {
            project,
            task: name,
            tmux,
        } => {
            let (ctx, t) = (ctx(&tmux)?, task(&project, &name)?);
            let stopped = crate::app::session::stop(&ctx, &t, clock::now()).await?;
            Ok(Response::Stopped { stopped })
        }
        other => Err(Error::Environment(format!("not a verb request: {other:?}"))),
    }
}
