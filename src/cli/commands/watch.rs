//! `task watch`: check-ins in the foreground until the task is COMPLETE or BLOCKED.

use std::path::Path;
use std::time::Duration;

use crate::app::session::Ctx;
use crate::app::{self, watch::End};
use crate::core::error::{EXIT_FAILURE, Exit};
use crate::core::model::Phase;
use crate::core::names::TaskName;

use crate::cli::output::print_checkin;

/// Watch task `name`, printing each check-in; exit 0 when it completes, 1 when it is
/// BLOCKED or `timeout` seconds pass first.
pub(crate) async fn run(project: Option<&Path>, name: &TaskName, poll_ms: u64, timeout: u64) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let ctx = Ctx::from_env()?;
    let every = app::watch::interval(&t);
    println!(
        "Watching task '{name}': a check-in on every new handoff, and every {}s.",
        every.as_secs()
    );
    let poll = Duration::from_millis(poll_ms);
    match app::watch::watch(&t, &ctx, every, poll, timeout, print_checkin).await? {
        End::Finished(phase) => {
            println!("Task '{name}' is {phase}.");
            if phase == Phase::Complete {
                Ok(())
            } else {
                Err(Exit::new(
                    EXIT_FAILURE,
                    format!("task '{name}' is BLOCKED; see `task status {name}`"),
                )
                .into())
            }
        }
        End::GaveUp(phase) => {
            Err(Exit::new(EXIT_FAILURE, format!("gave up after {timeout}s; the task is {phase}")).into())
        }
    }
}
