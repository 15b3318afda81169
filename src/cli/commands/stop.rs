//! `task stop`: end the task's sessions and its crontab line; keep every file.

use std::path::Path;

use crate::app;
use crate::app::session::Ctx;
use crate::core::names::TaskName;

use crate::cli::output::print_json;

/// Stop task `name` and say what was ended.
pub(crate) async fn run(project: Option<&Path>, name: &TaskName, json: bool) -> anyhow::Result<()> {
    // Not `app::locate`: a task whose folder was deleted still has sessions to end.
    let t = crate::store::task::Task::new(&crate::store::task::find_project(project, name)?, name.clone())?;
    let ctx = Ctx::from_env()?;
    let app::verbs::stop::Stop { stopped, cron_removed } = app::verbs::stop::stop(&t, &ctx).await?;
    if json {
        return print_json(&serde_json::json!({ "stopped": stopped, "cron_removed": cron_removed }));
    }
    if stopped.ended.is_empty() {
        println!("Task '{name}' had no running sessions; nothing to stop. Files are untouched.");
    } else {
        println!(
            "Stopped {} session(s) of task '{name}': {}. Files are kept.",
            stopped.ended.len(),
            stopped.ended.join(", ")
        );
    }
    if cron_removed {
        println!("Removed its crontab line.");
    }
    Ok(())
}
