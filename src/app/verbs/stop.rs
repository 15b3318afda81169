//! `task stop`: end a task's sessions (through the daemon when one runs, which also stops
//! supervising it) and remove its crontab line; every file is kept. The hub's or a human's
//! call: a spoke that asks is refused like one that asks to spawn.

use crate::app::dispatch::{daemon_or_here, supervised};
use crate::app::session::{self, Ctx};
use crate::core::clock;
use crate::core::error::Result;
use crate::core::protocol::gate::Verb;
use crate::core::report::Stopped;
use crate::core::wire::{Request, StopRequest};
use crate::store::task::Task;

/// What `task stop` did.
pub(crate) struct Stop {
    /// The sessions ended, already gone, or unreachable.
    pub stopped: Stopped,
    /// Whether the task's crontab line was there and is now removed.
    pub cron_removed: bool,
}

/// End every session of the task and take it off cron.
pub(crate) async fn stop(t: &Task, ctx: &Ctx) -> anyhow::Result<Stop> {
    if t.exists() {
        crate::app::gate::check(t, ctx, None, Verb::Stop)?;
    }
    let req = Request::Stop(StopRequest {
        project: supervised(t).project,
        task: t.name.clone(),
        tmux: ctx.id(),
    });
    // A deleted task folder is stopped here: the daemon's verbs expect a task folder.
    let stopped = if !t.exists() {
        session::stop(ctx, t, clock::now()).await?
    } else {
        daemon_or_here(&req, "reading the daemon's report", async {
            Ok(session::stop(ctx, t, clock::now()).await?)
        })
        .await?
    };
    let cron_removed = if crate::io::cron::available() {
        crate::io::cron::uninstall(&crate::io::cron::marker(&t.project, t.name.as_str()))?
    } else {
        false
    };
    Ok(Stop { stopped, cron_removed })
}

/// In the daemon: the gate, with the caller found from the connection; then `unsupervise`
/// (the daemon stops supervising the task, so no check-in or restart races the stop); then
/// the sessions ended.
pub async fn answer(req: StopRequest, peer: Option<u32>, unsupervise: impl Future<Output = ()>) -> Result<Stopped> {
    let (ctx, t) = (super::ctx(&req.tmux)?, super::task(&req.project, &req.task)?);
    super::gate(&ctx, &t, None, Verb::Stop, peer).await?;
    unsupervise.await;
    session::stop(&ctx, &t, clock::now()).await
}
