//! `task spawn`: start an agent with the PM's handoff (or hold it in the agent's lane),
//! for a hub or a human only. Also what a spawn would use (`task prepare`) and who will
//! start a queued one.

use std::path::Path;

use crate::app::dispatch::{daemon_or_here, supervised};
use crate::app::gate::Permit;
use crate::app::session::{self, Ctx, Prepared, SpawnMode};
use crate::core::clock;
use crate::core::error::Result;
use crate::core::names::AgentName;
use crate::core::protocol::gate::Verb;
use crate::core::protocol::lane::SpawnFlags;
use crate::core::report::SpawnReport;
use crate::core::wire::{Request, Response, SpawnRequest};
use crate::io::control;
use crate::store::task::Task;

/// Spawn `agent` with the PM's `handoff`: the gate first, then the spawn in the daemon
/// when one runs, else here; the same typed report from either side. A used-up budget
/// refuses it unless `over_budget` comes from a human; whoever serves it checks.
pub(crate) async fn spawn(
    t: &Task,
    ctx: &Ctx,
    agent: &AgentName,
    handoff: &Path,
    flags: &SpawnFlags,
    queue: bool,
    over_budget: bool,
) -> anyhow::Result<SpawnReport> {
    let permit = crate::app::gate::check(t, ctx, Some(agent.as_str()), Verb::Spawn)?;
    let handoff = session::find_handoff(t, handoff)?;
    let req = SpawnRequest {
        project: supervised(t).project,
        task: t.name.clone(),
        agent: agent.clone(),
        handoff: handoff.display().to_string(),
        runtime: flags.runtime.clone(),
        worktree: flags.isolation,
        queue,
        over_budget,
        tmux: ctx.id(),
    };
    daemon_or_here(
        &Request::Spawn(req.clone()),
        "reading the daemon's spawn report",
        async {
            budget(t, &permit, &req).await?;
            Ok(serve(ctx, t, &req).await?)
        },
    )
    .await
}

/// In the daemon: the gate, with the caller found from the connection, the budget, then
/// the spawn.
pub(super) async fn answer(req: SpawnRequest, peer: Option<u32>) -> Result<SpawnReport> {
    let (ctx, t) = (super::ctx(&req.tmux)?, super::task(&req.project, &req.task)?);
    let permit = super::gate(&ctx, &t, Some(&req.agent), Verb::Spawn, peer).await?;
    budget(&t, &permit, &req).await?;
    serve(&ctx, &t, &req).await
}

/// A used-up budget refuses the spawn (recorded, and escalated to a human), unless a
/// human asked to go over it: an agent's `--over-budget` counts for nothing.
async fn budget(t: &Task, permit: &Permit, req: &SpawnRequest) -> Result<()> {
    if req.over_budget && permit.human {
        return Ok(());
    }
    crate::app::cost::check_spawn(t, req.agent.as_str()).await
}

/// The spawn itself, wherever it runs.
async fn serve(ctx: &Ctx, t: &Task, req: &SpawnRequest) -> Result<SpawnReport> {
    let mode = if req.queue { SpawnMode::Queue } else { SpawnMode::Start };
    let flags = SpawnFlags {
        runtime: req.runtime.clone(),
        isolation: req.worktree,
    };
    session::spawn_with(ctx, t, &req.agent, Path::new(&req.handoff), &flags, mode, clock::now()).await
}

/// Everything a spawn would use, rendered and started nowhere; the gate still applies,
/// so a spoke cannot learn what it may not do.
pub(crate) async fn prepare(
    t: &Task,
    ctx: &Ctx,
    agent: &AgentName,
    handoff: &Path,
    runtime: Option<&str>,
) -> anyhow::Result<Prepared> {
    crate::app::gate::check(t, ctx, Some(agent.as_str()), Verb::Spawn)?;
    Ok(session::prepare(ctx, t, agent, handoff, runtime, clock::now()).await?)
}

/// Who will start a queued spawn, said to the user.
pub(crate) struct QueueNote {
    /// When it starts: "starts as soon as the lane frees", or what must run first.
    pub when: String,
    /// Set when this command started the daemon for it (what was started, and its log).
    pub started_daemon: Option<String>,
}

/// A queued spawn starts only when someone settles the lanes: the daemon (its
/// tick), or a check-in (cron's `task checkin`, `task watch`). Make sure one will,
/// or say exactly what the user must run: a task `task start` put under the
/// daemon gets its daemon back (as `task start` starts it); a task in cron mode
/// is left to its crontab line, or to the user when it has none.
pub(crate) fn who_starts_the_queue(t: &Task) -> anyhow::Result<QueueNote> {
    let s = supervised(t);
    let name = &t.name;
    let supervised_now = matches!(
        control::request(&Request::Tasks)?,
        Some(Response::Tasks { tasks }) if tasks.contains(&s)
    );
    if supervised_now {
        return Ok(QueueNote {
            when: "starts as soon as the lane frees".into(),
            started_daemon: None,
        });
    }
    if crate::store::registry::registered(&s) && !control::running() {
        let log = control::spawn_background()?;
        return Ok(QueueNote {
            when: "starts as soon as the lane frees".into(),
            started_daemon: Some(format!(
                "started the supervisor daemon in the background to supervise task '{name}' (log: {})",
                log.display()
            )),
        });
    }
    let marker = crate::io::cron::marker(&t.project, name.as_str());
    let when = if crate::io::cron::installed(&marker) {
        let sched = t
            .spec()
            .ok()
            .and_then(|sp| crate::io::cron::schedule(sp.setting("checkin")).ok())
            .unwrap_or_else(|| "its schedule".into());
        format!(
            "starts at the first check-in after the lane frees: task '{name}' runs without the daemon, and its crontab line runs `task checkin` on `{sched}`; run `task checkin {name}` to check in now"
        )
    } else {
        format!(
            "starts at the first check-in after the lane frees, and nothing checks task '{name}' in by itself (no daemon supervises it and it has no crontab line): run `task checkin {name}` or `task watch {name}`, or `task start {name}` to put it under the daemon"
        )
    };
    Ok(QueueNote {
        when,
        started_daemon: None,
    })
}
