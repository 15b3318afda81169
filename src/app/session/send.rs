//! `task send`: a message delivered to a running agent, here or on its remote host.

use std::time::Duration;

use super::Ctx;
use crate::core::error::{Error, Result};
use crate::io::delivery;
use crate::io::runtime;
use crate::store::task::Task;
/// Deliver a message to a running agent with verified delivery: a message pasted into a
/// busy or closed screen is lost silently, so it is sent once the input is ready and confirmed.
pub async fn send(ctx: &Ctx, task: &Task, agent: &str, text: &str) -> Result<crate::core::report::Report> {
    send_with(ctx, task, agent, text, None, false).await
}

/// [`send`], waiting at most `ready_timeout` (instead of the runtime's) for the input to
/// be ready and for another delivery to the same pane to end — the supervisor's own
/// nudges must not hold up its tick for a minute and a half — and, with
/// `close_limit_menu`, first closing a usage-limit menu that holds the input (the
/// runtime's `usage_limit_menu_keys`, pressed only while the menu shows).
pub async fn send_with(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    text: &str,
    ready_timeout: Option<Duration>,
    close_limit_menu: bool,
) -> Result<crate::core::report::Report> {
    task.require()?;
    let st = task.state()?;
    let a = st.agents.get(agent).filter(|a| a.pane.is_some()).ok_or_else(|| {
        Error::NotRunning(format!(
            "agent '{agent}' of task '{}' has never been started; start it with `task spawn {} {agent} --handoff FILE`",
            task.name, task.name
        ))
    })?;
    let pane = a.pane.clone().unwrap_or_default();
    let tmux = match a.host.remote() {
        Some(r) => crate::io::remote::Host::connect(r).await?.tmux()?,
        None => ctx.tmux.clone(),
    };
    if tmux.pane_on(&pane, a.tmux_server.as_deref()).await?.is_none() {
        return Err(Error::NotRunning(format!(
            "agent '{agent}' of task '{}' is not running (its pane {pane} is gone); start it again with `task spawn`",
            task.name
        )));
    }
    let rt = runtime::resolve(a.runtime.as_deref().unwrap_or("claude"))?;
    if close_limit_menu && !rt.profile.usage_limit_menu_keys.is_empty() {
        let screen = tmux.capture(&pane).await?;
        if rt.patterns.usage_limit_menu(&screen) {
            tracing::info!(agent, pane = %pane, "closing the usage-limit menu before the resume message");
            for k in &rt.profile.usage_limit_menu_keys {
                tmux.send_key(&pane, k).await?;
            }
        }
    }
    let mut opts = rt.delivery_options();
    if let Some(t) = ready_timeout {
        opts.ready_timeout = opts.ready_timeout.min(t);
        opts.queued_timeout = opts.queued_timeout.min(t);
        opts.lock_timeout = opts.lock_timeout.min(t);
    }
    delivery::deliver(&tmux, &pane, text, &rt.patterns, &opts).await
}
