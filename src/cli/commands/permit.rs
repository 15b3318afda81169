//! `task permit`: answer a permission request the broker is waiting on.

use std::path::Path;

use crate::app;
use crate::core::error::{EXIT_REFUSED, Exit};
use crate::core::names::TaskName;

use crate::cli::output::print_json;

/// Who answers: a human at a terminal (no agent session), or the task's hub. Any other
/// agent — a spoke, another task's PM — is refused: approving requests is the hub's job.
fn answerer(task: &TaskName, hub: &str) -> Result<&'static str, String> {
    match (std::env::var("TASK_AGENT").ok(), std::env::var("TASK_NAME").ok()) {
        (None, _) => Ok("human"),
        (Some(a), Some(t)) if a == hub && t == task.as_str() => Ok("pm"),
        (Some(a), t) => Err(format!(
            "{a} (of task '{}') may not answer task '{task}''s permission requests: only its hub ({hub}) or a human can",
            t.unwrap_or_default()
        )),
    }
}

pub(crate) fn run(
    project: Option<&Path>,
    name: &TaskName,
    id: &str,
    allow: bool,
    always: bool,
    reason: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let hub = crate::store::roster::for_task(&t)?.primary_hub.clone();
    let by = answerer(name, &hub).map_err(|m| Exit::new(EXIT_REFUSED, m))?;
    let (stands, ours) = app::broker::permit(&t, id, allow, always, reason, by)?;
    if json {
        return print_json(&serde_json::json!({"decision": stands, "recorded": ours}));
    }
    if ours {
        println!(
            "{id}: {} by {}{}; the agent goes on at once.",
            stands.decision,
            stands.by,
            if stands.always { " (always, for that agent)" } else { "" }
        );
        Ok(())
    } else {
        Err(Exit::new(
            crate::core::error::EXIT_FAILURE,
            format!(
                "{id} was already decided: {} by {} at {}; nothing changed",
                stands.decision,
                stands.by,
                crate::core::clock::local_time(stands.at)
            ),
        )
        .into())
    }
}
