//! Type a message into a running agent, through the daemon when one runs.

use std::path::PathBuf;

use crate::app::session::{self, Ctx};
use crate::core::error::Error;
use crate::core::names::AgentName;
use crate::core::report::Report;
use crate::core::wire::Request;
use crate::store::task::Task;

use super::dispatch::{daemon_or_here, supervised};

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
    super::gate::check(t, ctx, agent.as_str(), "send")?;
    let s = supervised(t);
    let req = Request::Send {
        project: s.project,
        task: s.task,
        agent: agent.to_string(),
        text: text.to_string(),
        tmux: ctx.id(),
    };
    daemon_or_here(&req, "reading the daemon's delivery report", async {
        Ok(session::send(ctx, t, agent.as_str(), text).await?)
    })
    .await
}
