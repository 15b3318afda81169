//! What the UI's keys do to agents, through the same code paths as the CLI verbs
//! (`task send`, `task checkin`, `task attach`), so the UI never has its own way of
//! typing into a pane. Each returns the one line shown on the bottom of the screen.

use std::path::Path;
use std::process::Command;

use crate::app;
use crate::app::session::Ctx;
use crate::core::model::AgentStatus;
use crate::core::names::AgentName;
use crate::core::report::Outcome;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// Send `text` to `agent` with verified delivery (through the daemon when one runs).
pub(crate) async fn send(t: &Task, ctx: &Ctx, agent: &str, text: &str) -> String {
    let name: AgentName = match agent.parse() {
        Ok(n) => n,
        Err(e) => return format!("not sent: {e}"),
    };
    match app::verbs::send::send(t, ctx, &name, text).await {
        Ok(r) => match r.outcome {
            Outcome::Delivered => format!("delivered to {}/{agent}", t.name),
            _ => format!(
                "NOT confirmed by {}/{agent}: {} (it was not repeated)",
                t.name, r.reason
            ),
        },
        Err(e) => format!("not sent to {}/{agent}: {e:#}", t.name),
    }
}

/// Run a check-in of `t` now (by the daemon's actor when it supervises the task).
pub(crate) async fn checkin(t: &Task, ctx: &Ctx) -> String {
    match app::checkin::checkin(t, ctx).await {
        Ok(app::checkin::Checkin::ByDaemon(r) | app::checkin::Checkin::Here(r)) => {
            let what = match (&r.skip_reason, &r.delivery) {
                (Some(why), _) => format!("not sent ({why})"),
                (None, Some(d)) if d.outcome == Outcome::Delivered => "delivered to the PM".to_string(),
                (None, Some(d)) => format!("NOT confirmed by the PM: {}", d.reason),
                (None, None) => "another check-in was running".to_string(),
            };
            format!(
                "check-in of {}: {what}; {} new handoff(s)",
                t.name,
                r.new_handoffs.len()
            )
        }
        Err(e) => format!("check-in of {} failed: {e:#}", t.name),
    }
}

/// Answer permission request `id` of `t` as a human (what `task permit` does without
/// `TASK_AGENT`); the hook waiting on it goes on at once.
pub(super) fn permit(t: &Task, id: &str, allow: bool) -> String {
    match app::broker::permit(t, id, allow, false, None, "human") {
        Ok((d, true)) => format!("{}/{id}: {} (by you)", t.name, d.decision),
        Ok((d, false)) => format!("{}/{id} was already decided: {} by {}", t.name, d.decision, d.by),
        Err(e) => format!("could not answer {}/{id}: {e}", t.name),
    }
}

/// Stop one agent: end its session, mark it stopped, free its lane; its files stay.
/// (`task stop` ends the whole task; the UI's `x` is about the one agent selected.) `by`
/// names who asked in the `agent_stopped` event (`task ui`, a web session).
pub(crate) async fn stop_agent(t: &Task, ctx: &Ctx, agent: &str, by: &str) -> String {
    let now = crate::core::clock::now();
    let session = ctx.session_name(t, agent);
    let remote = t
        .state()
        .ok()
        .and_then(|st| st.agents.get(agent).and_then(|a| a.host.remote().cloned()));
    if remote.is_some() {
        return format!("{agent} runs on a remote host; stop it with `task stop {}`", t.name);
    }
    let ended = match ctx.tmux.kill_session(&session).await {
        Ok(e) => e,
        Err(e) => return format!("could not stop {}/{agent}: {e}", t.name),
    };
    let marked = t.update_state(now, |st| {
        let episode = st.agents.get_mut(agent).and_then(|a| {
            if matches!(
                a.status,
                AgentStatus::Running | AgentStatus::Unknown | AgentStatus::Dead
            ) {
                a.status = AgentStatus::Stopped;
            }
            a.attention.take()
        });
        if let Some(at) = &episode {
            st.close_attention_escalation(agent, at);
        }
        Ok(())
    });
    if let Err(e) = marked {
        return format!("ended {session} but could not record it: {e}");
    }
    if let Err(e) = crate::app::lanes::release(
        t,
        agent,
        None,
        crate::core::protocol::lane::ReleaseReason::Stopped,
        None,
        now,
    ) {
        tracing::warn!(task = %t.name, agent, error = %e, "could not free the lane");
    }
    let _ = crate::store::events::append(
        t,
        EventKind::AgentStopped,
        Some(agent),
        serde_json::json!({"by": by, "session": session}),
        now,
    );
    if ended {
        format!("stopped {}/{agent}", t.name)
    } else {
        format!("{}/{agent} was not running (marked stopped)", t.name)
    }
}

/// Whether `$TMUX` names the tmux server the agents run on (then attach switches client).
pub(super) fn inside_same_tmux(ctx: &Ctx) -> bool {
    std::env::var("TMUX")
        .ok()
        .and_then(|v| v.split(',').next().map(str::to_string))
        .is_some_and(|sock| Path::new(&sock) == ctx.tmux.socket().path())
}

/// The `task attach` command for `agent` (this binary, so remote agents work the same).
/// Outside the agents' tmux server `$TMUX` is removed so a nested attach is allowed.
pub(super) fn attach_command(t: &Task, agent: &str, same_tmux: bool) -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "task".into());
    let mut c = Command::new(exe);
    c.arg("attach")
        .arg(t.name.as_str())
        .arg(agent)
        .arg("--project")
        .arg(&t.project);
    if !same_tmux {
        c.env_remove("TMUX");
    }
    c
}

/// `$PAGER` (default `less`) on `file`.
pub(super) fn pager_command(file: &Path) -> Command {
    let pager = std::env::var("PAGER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "less".into());
    let mut words = shlex::split(&pager).unwrap_or_else(|| vec![pager.clone()]);
    let mut c = Command::new(words.remove(0));
    c.args(words).arg(file);
    c
}
