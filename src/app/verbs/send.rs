//! `task send`: type a message into a running agent, for a hub or a human only, with
//! verified delivery.

use std::path::PathBuf;

use crate::app::dispatch::{daemon_or_here, supervised};
use crate::app::session::{self, Ctx};
use crate::core::error::{Error, Result};
use crate::core::names::AgentName;
use crate::core::protocol::gate::Verb;
use crate::core::report::Report;
use crate::core::wire::{Request, SendRequest};
use crate::store::task::Task;

/// What to send: the text itself, a file's contents, or a pointer to a handoff.
pub(crate) enum What {
    /// This text.
    Message(String),
    /// The contents of this file (UTF-8).
    File(PathBuf),
    /// "Read your instructions in …" for this handoff (path, or a name in handoffs/).
    Handoff(PathBuf),
}

/// The text to type for `what`; `None` (nothing said) is bad input.
pub(crate) fn text(t: &Task, what: Option<What>) -> anyhow::Result<String> {
    Ok(match what {
        Some(What::Message(m)) => m,
        Some(What::File(f)) => {
            let bytes = std::fs::read(&f).map_err(|e| Error::io("read", &f, e))?;
            String::from_utf8(bytes)
                .map_err(|_| Error::BadInput(format!("{} is not valid UTF-8; nothing was sent", f.display())))?
        }
        Some(What::Handoff(h)) => {
            let p = session::find_handoff(t, &h)?;
            format!("New instructions from the PM: read {} and follow them.", p.display())
        }
        None => {
            return Err(
                Error::BadInput("say what to send: --message TEXT, --file FILE or --handoff FILE".into()).into(),
            );
        }
    })
}

/// Send `text` to `agent` after the gate (a spoke may not message agents); the delivery
/// report says whether the agent's screen confirmed it was submitted.
pub(crate) async fn send(t: &Task, ctx: &Ctx, agent: &AgentName, text: &str) -> anyhow::Result<Report> {
    crate::app::gate::check(t, ctx, Some(agent.as_str()), Verb::Send)?;
    let req = SendRequest {
        project: supervised(t).project,
        task: t.name.clone(),
        agent: agent.clone(),
        text: text.to_string(),
        tmux: ctx.id(),
    };
    daemon_or_here(
        &Request::Send(req.clone()),
        "reading the daemon's delivery report",
        async { Ok(serve(ctx, t, &req).await?) },
    )
    .await
}

/// In the daemon: the gate, with the caller found from the connection, then the delivery.
pub(super) async fn answer(req: SendRequest, peer: Option<u32>) -> Result<Report> {
    let (ctx, t) = (super::ctx(&req.tmux)?, super::task(&req.project, &req.task)?);
    super::gate(&ctx, &t, Some(&req.agent), Verb::Send, peer).await?;
    serve(&ctx, &t, &req).await
}

/// The delivery itself, wherever it runs.
async fn serve(ctx: &Ctx, t: &Task, req: &SendRequest) -> Result<Report> {
    session::send(ctx, t, req.agent.as_str(), &req.text).await
}
