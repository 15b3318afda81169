//! `task checkin`: one check-in now (what cron's line runs); exit 5 when the PM did not
//! get it (the handoffs then stay new).

use std::path::Path;

use crate::app::{
    self,
    checkin::{ByDaemon, Checkin},
};
use crate::delivery::Outcome;
use crate::error::{EXIT_UNDELIVERED, Exit};
use crate::names::TaskName;
use crate::session::Ctx;

use crate::cli::output::{outcome_word, print_checkin, print_json};

/// Check task `name` in, by the daemon when it supervises the task, else here.
pub(crate) async fn run(project: Option<&Path>, name: &TaskName, json: bool) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let ctx = Ctx::from_env()?;
    match app::checkin::checkin(&t, &ctx).await? {
        Checkin::ByDaemon(c) => by_daemon(name, &c, json),
        Checkin::Here(report) => {
            if json {
                print_json(&report)?;
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
    }
}

/// Render the report of a check-in the daemon ran (`--json`: its JSON, as it sent it).
fn by_daemon(name: &TaskName, c: &ByDaemon, json: bool) -> anyhow::Result<()> {
    let s = &c.summary;
    if json {
        print_json(&c.report)?;
    } else {
        let delivery = match (&s.skip_reason, &s.delivery) {
            (Some(why), _) => format!("not sent: {why}"),
            (None, Some(d)) => outcome_word(d.outcome),
            (None, None) => "none".to_string(),
        };
        println!(
            "{name}: check-in by the daemon: {} new handoff(s); delivery {delivery}",
            s.new_handoffs.len(),
        );
    }
    if s.delivered() {
        return Ok(());
    }
    let reason = s.delivery.as_ref().map_or("?", |d| d.reason.as_str());
    Err(Exit::new(
        EXIT_UNDELIVERED,
        format!("check-in not delivered ({reason}); the handoffs stay new"),
    )
    .into())
}
