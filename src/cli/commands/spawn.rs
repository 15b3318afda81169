//! `task spawn`: start an agent with the PM's handoff (or hold it in its lane).

use std::path::Path;

use crate::app;
use crate::app::session::Ctx;
use crate::core::names::{AgentName, TaskName};
use crate::core::protocol::lane::Reason;

use crate::cli::output::print_json;

/// What to spawn, as given on the command line.
pub(crate) struct Args<'a> {
    /// The agent to start.
    pub agent: &'a AgentName,
    /// The PM's handoff (path, or a name in handoffs/).
    pub handoff: &'a Path,
    /// `--runtime` and `--worktree`.
    pub flags: crate::core::protocol::lane::SpawnFlags,
    /// Wait in a busy lane instead of being refused.
    pub queue: bool,
    /// Start even though a budget is used up (a human's decision).
    pub over_budget: bool,
}

/// Spawn and say what happened: started, queued (and who will start it), or refused.
pub(crate) async fn run(project: Option<&Path>, name: &TaskName, args: Args<'_>, json: bool) -> anyhow::Result<()> {
    let Args {
        agent,
        handoff,
        flags,
        queue,
        over_budget,
    } = args;
    let t = app::locate(project, name)?;
    let ctx = Ctx::from_env()?;
    let report = match app::verbs::spawn::spawn(&t, &ctx, agent, handoff, &flags, queue, over_budget).await {
        Ok(v) => v,
        Err(e) => {
            // A refusal is an answer scripts read: with --json it goes to stdout with its code.
            let msg = format!("{e:#}");
            if let (true, Some(reason)) = (json, app::dispatch::refusal_reason(&e)) {
                print_json(&serde_json::json!({"reason": reason, "agent": agent.as_str(), "error": msg}))?;
            }
            return Err(e);
        }
    };
    let queue_note = if report.reason == Reason::SpawnQueued {
        Some(app::verbs::spawn::who_starts_the_queue(&t)?)
    } else {
        None
    };
    if json {
        let mut out = report.to_json();
        if let Some(n) = &queue_note {
            out["starts_when"] = serde_json::json!(n.when);
            out["supervisor"] = serde_json::json!(n.started_daemon);
        }
        return print_json(&out);
    }
    if let Some(n) = &queue_note {
        println!(
            "SPAWN_QUEUED: {agent}'s lane is busy ({}); this spawn {} (watch with `task status {name}`)",
            report.waiting_for.as_deref().unwrap_or("held"),
            n.when
        );
        if let Some(d) = &n.started_daemon {
            println!("Supervisor: {d}.");
        }
    } else if let Some(st) = &report.started {
        println!(
            "{}: started {agent} for task '{name}' in tmux session {} (pane {}); preamble saved to {}",
            report.reason,
            st.session,
            st.pane,
            st.preamble.display()
        );
        match (st.sandbox.as_str(), &st.sandbox_why) {
            ("on", _) => println!("Sandbox: on; {agent}'s commands run without asking, confined to its folders."),
            (_, Some(why)) => println!("Sandbox: not on for {agent}: {why}."),
            _ => {}
        }
    }
    for n in &report.notes {
        println!("note: {n}");
    }
    Ok(())
}
