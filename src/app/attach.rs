//! Attach the user's terminal to an agent's tmux session: `tmux attach` (switch-client
//! inside tmux) here, `ssh -t` for an agent on a remote host.

use std::convert::Infallible;

use crate::app::session::Ctx;
use crate::core::error::Error;
use crate::store::task::Task;

/// Replace this process with the attach to `agent`'s session; returns only on failure
/// (no such session, or the exec failed).
pub(crate) fn attach(t: &Task, agent: &str) -> anyhow::Result<Infallible> {
    let name = &t.name;
    let ctx = Ctx::from_env()?;
    let session = ctx.session_name(t, agent);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let host = t
        .state()
        .ok()
        .and_then(|st| st.agents.get(agent).and_then(|a| a.host.remote().cloned()));
    if let Some(r) = host {
        // `ssh -t <host> tmux … attach`, every word quoted for the remote shell.
        let tmux = rt.block_on(crate::io::remote::Host::connect(&r))?.tmux()?;
        if !rt.block_on(tmux.has_session(&session))? {
            return Err(Error::NotRunning(format!(
                "agent '{agent}' of task '{name}' is not running on {} (no tmux session {session} there)",
                r.destination()
            ))
            .into());
        }
        return Err(crate::io::remote::attach_exec(&r, &tmux, &session).into());
    }
    if !rt.block_on(ctx.tmux.has_session(&session))? {
        return Err(Error::NotRunning(format!(
            "agent '{agent}' of task '{name}' is not running (no tmux session {session} on server {}); start it with `task start {name}`",
            ctx.tmux.socket().flags()
        ))
        .into());
    }
    Err(ctx.tmux.attach_exec(&session).into())
}
