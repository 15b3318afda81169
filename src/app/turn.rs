//! `task hook prompt-submit|stop|stop-failure|notification`: an agent's client reports on
//! its turn ([`crate::core::turn`]). The report is kept for whoever looks at the agents
//! next (the daemon's tick, a check-in, `task status`); a failure or a wait is acted on at
//! once, in the hook: the agents are looked at ([`crate::app::attend::tend`]), so a usage
//! limit pauses the agent and a dialog starts its episode the moment the client knows,
//! and the PM hears of a paused spoke or a called human in a check-in straight away.

use chrono::{DateTime, Utc};

use crate::core::error::Result;
use crate::core::turn::{self, Said};
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// Record what `agent`'s client said in hook `event` (its JSON `input`); act on it when
/// urgent and a tmux server is at hand (`ctx`).
pub async fn record(
    task: &Task,
    agent: &str,
    event: &str,
    input: &serde_json::Value,
    ctx: Option<&crate::app::session::Ctx>,
    now: DateTime<Utc>,
) -> Result<()> {
    let Some(report) = turn::from_hook(event, input, now) else {
        tracing::debug!(task = %task.name, agent, event, "hook says nothing about the turn");
        return Ok(());
    };
    if !crate::store::turns::write(task, agent, &report)? {
        return Ok(());
    }
    if let Said::Failed { error, text } = &report.said {
        let (shown, cut) = crate::store::permits::shown(text);
        crate::store::events::append(
            task,
            EventKind::TurnFailed,
            Some(agent),
            serde_json::json!({"error": error, "text": shown, "cut": cut}),
            now,
        )?;
        tracing::warn!(task = %task.name, agent, error, "the agent's turn failed");
    }
    if !turn::urgent(&report) {
        return Ok(());
    }
    let Some(ctx) = ctx else {
        return Ok(());
    };
    let tended = crate::app::attend::tend(ctx, task, now).await?;
    if tended.worth_a_checkin() {
        if let Err(e) = crate::app::checkin::checkin(task, ctx).await {
            tracing::warn!(task = %task.name, error = %e, "the check-in telling the PM failed; it waits for the next one");
        }
    }
    Ok(())
}
