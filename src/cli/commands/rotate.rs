//! `task rotate <task> [agent]`: replace the PM's conversation by a fresh one now
//! ([`app::rotate`]), by the daemon's actor when one supervises the task (so it falls
//! between its check-ins), else here. Refused to spokes, like spawn and send.

use std::path::Path;

use crate::app;
use crate::app::session::Ctx;
use crate::core::names::{AgentName, TaskName};
use crate::core::wire::Request;

use crate::cli::output::print_json;

pub(crate) async fn run(project: Option<&Path>, name: &TaskName, agent: &AgentName, json: bool) -> anyhow::Result<()> {
    if agent.as_str() != "pm" {
        return Err(crate::core::error::Error::BadInput(format!(
            "only the PM's conversation is rotated by hand, not {agent}'s; a spoke is asked for a \
             checkpoint and continued in a fresh session by the supervisor once its context passes \
             rotate_at: (task.md)"
        ))
        .into());
    }
    let t = app::locate(project, name)?;
    let ctx = Ctx::from_env()?;
    let s = app::dispatch::supervised(&t);
    let req = Request::Rotate {
        project: s.project,
        task: s.task,
    };
    let r = match app::dispatch::via_daemon::<crate::core::rotation::Rotated>(&req, "task rotate")? {
        Some(r) => r,
        None => {
            app::gate::check(&t, &ctx, Some("pm"), crate::core::protocol::gate::Verb::Rotate)?;
            let by = std::env::var("TASK_AGENT").unwrap_or_else(|_| "a human".into());
            app::rotate::asked(&ctx, &t, &by).await?
        }
    };
    if json {
        print_json(&r)?;
    } else {
        println!(
            "Rotated the PM of task '{}': a fresh conversation ({}) in session {}, first prompt {} bytes; the old one ({}) is kept and still counted.",
            r.task,
            r.new_session.as_deref().unwrap_or("?"),
            r.session,
            r.preamble_bytes,
            r.old_session.as_deref().unwrap_or("?")
        );
    }
    Ok(())
}
