//! `task checkin`: one check-in now (what cron's line runs); exit 5 when the PM did not
//! get it (the handoffs then stay new).

use std::path::Path;

use crate::app::session::Ctx;
use crate::app::{self, checkin::Checkin};
use crate::core::error::{EXIT_UNDELIVERED, Exit};
use crate::core::names::TaskName;
use crate::core::report::CheckinReport;
use crate::core::report::Outcome;

use crate::cli::output::{outcome_word, print_checkin, print_json};

/// Check task `name` in, by the daemon when it supervises the task, else here.
pub(crate) async fn run(project: Option<&Path>, name: &TaskName, json: bool) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let ctx = Ctx::from_env()?;
    let (report, by_daemon) = match app::checkin::checkin(&t, &ctx).await? {
        Checkin::ByDaemon(r) => (r, true),
        Checkin::Here(r) => (r, false),
    };
    if json {
        print_json(&report)?;
    } else if by_daemon {
        print_by_daemon(name, &report);
    } else {
        print_checkin(&report);
    }
    match &report.delivery {
        None => Ok(()),
        Some(d) if d.outcome == Outcome::Delivered => Ok(()),
        Some(d) => Err(Exit::new(
            EXIT_UNDELIVERED,
            format!(
                "check-in not delivered ({}); the handoffs stay new for the next check-in",
                d.reason
            ),
        )
        .into()),
    }
}

/// The one line for a check-in the daemon ran (its own log has the rest).
fn print_by_daemon(name: &TaskName, r: &CheckinReport) {
    let delivery = match (&r.skip_reason, &r.delivery) {
        (Some(why), _) => format!("not sent: {why}"),
        (None, Some(d)) => outcome_word(d.outcome),
        (None, None) => "none".to_string(),
    };
    println!(
        "{name}: check-in by the daemon: {} new handoff(s); delivery {delivery}",
        r.new_handoffs.len(),
    );
}
