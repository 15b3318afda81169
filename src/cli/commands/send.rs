//! `task send`: type a message into a running agent; exit 5 unless it was confirmed.

use std::path::Path;

use crate::app::session::Ctx;
use crate::app::{self, verbs::send::What};
use crate::core::error::{EXIT_UNDELIVERED, Exit};
use crate::core::names::{AgentName, TaskName};

use crate::cli::output::{outcome_word, print_json};

/// Send `what` to `agent` and print the delivery report.
pub(crate) async fn run(
    project: Option<&Path>,
    name: &TaskName,
    agent: &AgentName,
    what: Option<What>,
    json: bool,
) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let text = app::verbs::send::text(&t, what)?;
    let ctx = Ctx::from_env()?;
    let report = app::verbs::send::send(&t, &ctx, agent, &text).await?;
    if json {
        print_json(&report)?;
    } else {
        println!(
            "{}: {} ({} bytes, {} Enter)",
            outcome_word(report.outcome),
            report.reason,
            report.bytes,
            report.enters
        );
    }
    if report.outcome != crate::core::report::Outcome::Delivered {
        return Err(Exit::new(
            EXIT_UNDELIVERED,
            format!("message to {agent} not confirmed: {}", report.reason),
        )
        .into());
    }
    Ok(())
}
