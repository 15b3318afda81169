//! The verbs a hub or a human asks of a task's agents — spawn, send, stop, rotate (and of
//! the daemon: shutdown) — one module each, holding everything the verb decides: the request it builds (its type is on
//! the wire, [`crate::core::wire`]), the gate, and the work. The CLI (`cli/commands/<verb>`)
//! reads arguments and prints; [`crate::app::dispatch`] sends the request to the daemon
//! when one runs, and otherwise the CLI serves it itself with the same function; the
//! daemon serves it through [`answer`]. The mechanics (a pane started, a message typed)
//! stay in [`crate::app::session`].
//!
//! Who asks is never taken from a request. The CLI finds its caller in its own
//! environment; the daemon finds it from the connection (the peer's pid, its pane and the
//! environment it started with: [`crate::app::gate::caller_of`]), so a spoke that writes
//! to the socket itself is refused like one that runs `task spawn`.

pub(crate) mod rotate;
pub(crate) mod send;
pub(crate) mod shutdown;
pub(crate) mod spawn;
pub(crate) mod stop;
pub(crate) mod web;

use std::path::Path;

use crate::app::gate::Permit;
use crate::app::session::Ctx;
use crate::core::error::{Error, Result};
use crate::core::names::{AgentName, TaskName};
use crate::core::protocol::gate::Verb;
use crate::core::wire::{Request, Response};
use crate::store::task::Task;

/// Serve a spawn or send request from the process `peer` (the socket's peer credentials)
/// in the daemon, and answer it: its report, a refusal with its reason, or an error. A
/// stop ends supervision between its gate and its work: [`stop::answer`].
pub async fn answer(req: Request, peer: Option<u32>) -> Response {
    let answered = match req {
        Request::Spawn(r) => spawn::answer(r, peer).await.map(|report| Response::Spawned {
            report: Box::new(report),
        }),
        Request::Send(r) => send::answer(r, peer).await.map(|report| Response::Sent { report }),
        other => Err(Error::Environment(format!("not a verb request: {other:?}"))),
    };
    answered.unwrap_or_else(|e| Response::error(&e))
}

/// The task a request names; it must exist.
fn task(project: &str, name: &TaskName) -> Result<Task> {
    let t = Task::new(Path::new(project), name.clone())?;
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

/// The gate for a request the daemon serves: the caller found from the process `peer`.
async fn gate(ctx: &Ctx, t: &Task, agent: Option<&AgentName>, verb: Verb, peer: Option<u32>) -> Result<Permit> {
    let caller = crate::app::gate::caller_of(ctx, peer).await;
    crate::app::gate::check_caller(t, &caller, agent.map(AgentName::as_str), verb)
}
