//! One check-in on demand (`task checkin`, cron's line): by the daemon's actor when the
//! daemon supervises the task (it serialises check-ins), else here.

use serde::Deserialize;

use crate::checkin::{CheckinReport, Trigger};
use crate::clock;
use crate::daemon::{
    client,
    protocol::{Request, Response},
};
use crate::delivery::{Outcome, Report};
use crate::error::Error;
use crate::schedule::Schedule;
use crate::session::Ctx;
use crate::task::Task;

use super::dispatch::supervised;

/// Who ran the check-in, and its report.
pub(crate) enum Checkin {
    /// The daemon's actor ran it.
    ByDaemon(ByDaemon),
    /// It ran in this process.
    Here(CheckinReport),
}

/// A check-in the daemon ran: its report as sent (what `--json` prints), and what the
/// CLI reads from it, typed.
#[derive(Debug, Clone)]
pub(crate) struct ByDaemon {
    /// The report as the daemon sent it.
    pub report: serde_json::Value,
    /// The part of it the CLI reads.
    pub summary: Summary,
}

/// What the CLI reads from a check-in report that crossed the socket.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Summary {
    /// New handoffs taken from the ledger.
    #[serde(default)]
    pub new_handoffs: Vec<String>,
    /// Why it was not sent, when it was not.
    #[serde(default)]
    pub skip_reason: Option<String>,
    /// Delivery to the PM (`None`: nothing was sent).
    #[serde(default)]
    pub delivery: Option<Report>,
}

impl Summary {
    /// Whether the PM got it (or nothing was to be sent).
    pub fn delivered(&self) -> bool {
        self.delivery.as_ref().is_none_or(|d| d.outcome == Outcome::Delivered)
    }
}

/// Run one check-in now. A daemon that does not supervise the task (or does not
/// answer) leaves it to this process.
pub(crate) async fn checkin(t: &Task, ctx: &Ctx) -> anyhow::Result<Checkin> {
    let s = supervised(t);
    if let Ok(Some(Response::Checkin { report })) = client::request(&Request::Checkin {
        project: s.project,
        task: s.task,
    }) {
        let summary = serde_json::from_value(report.clone()).map_err(|e| {
            Error::Environment(format!(
                "the daemon's check-in report is unreadable ({e}); is it the same version? (`task shutdown`, then retry)"
            ))
        })?;
        return Ok(Checkin::ByDaemon(ByDaemon { report, summary }));
    }
    // Without a daemon, the task's crontab line (when there is one) is its schedule.
    let sched = cron_schedule(t);
    let report = crate::checkin::run(t, &ctx.tmux, clock::now(), Trigger::Manual, Vec::new(), sched.as_ref()).await?;
    Ok(Checkin::Here(report))
}

/// The schedule of a task in cron mode: its crontab line's, when one is installed.
fn cron_schedule(t: &Task) -> Option<Schedule> {
    if !crate::cron::installed(&crate::cron::marker(&t.project, t.name.as_str())) {
        return None;
    }
    let spec = t.spec().ok()?;
    Schedule::crontab(spec.setting("checkin")).ok()
}
