//! One check-in on demand (`task checkin`, cron's line): by the daemon's actor when the
//! daemon supervises the task (it serialises check-ins), else here.

use crate::app::session::Ctx;
use crate::core::clock;
use crate::core::report::{CheckinReport, Trigger};
use crate::core::wire::{Request, Response};
use crate::io::control;
use crate::io::schedule::Schedule;
use crate::store::task::Task;

use crate::app::dispatch::supervised;

/// Who ran the check-in, and its report (the same type from either side).
pub(crate) enum Checkin {
    /// The daemon's actor ran it.
    ByDaemon(CheckinReport),
    /// It ran in this process.
    Here(CheckinReport),
}

/// Run one check-in now. A daemon that does not supervise the task (or does not
/// answer) leaves it to this process.
pub(crate) async fn checkin(t: &Task, ctx: &Ctx) -> anyhow::Result<Checkin> {
    let s = supervised(t);
    if let Ok(Some(Response::Checkin { report })) = control::request(&Request::Checkin {
        project: s.project,
        task: s.task,
    }) {
        return Ok(Checkin::ByDaemon(*report));
    }
    // Without a daemon, the task's crontab line (when there is one) is its schedule.
    let sched = cron_schedule(t);
    let report =
        crate::app::checkin::run(t, &ctx.tmux, clock::now(), Trigger::Manual, Vec::new(), sched.as_ref()).await?;
    Ok(Checkin::Here(report))
}

/// The schedule of a task in cron mode: its crontab line's, when one is installed.
fn cron_schedule(t: &Task) -> Option<Schedule> {
    if !crate::io::cron::installed(&crate::io::cron::marker(&t.project, t.name.as_str())) {
        return None;
    }
    let spec = t.spec().ok()?;
    Schedule::crontab(spec.setting("checkin")).ok()
}
