//! `task watch`: check-ins in the foreground, for people who want neither the daemon nor
//! cron — at once when a handoff lands, and on the task's interval.

use std::time::{Duration, Instant};

use crate::app::session::Ctx;
use crate::core::clock;
use crate::core::model::Phase;
use crate::core::report::Outcome;
use crate::core::report::{CheckinReport, Trigger};
use crate::io::schedule::Schedule;
use crate::store::handoffs;
use crate::store::task::Task;

/// How a watch ended (other than by an error).
pub(crate) enum End {
    /// The task reached COMPLETE or BLOCKED.
    Finished(Phase),
    /// `timeout` seconds passed first; the task's phase then.
    GaveUp(Phase),
}

/// The interval between scheduled check-ins: task.md's `checkin:` as a duration, else 10 min.
pub(crate) fn interval(t: &Task) -> Duration {
    t.spec()
        .ok()
        .and_then(|s| s.setting("checkin").and_then(crate::core::clock::parse_duration))
        .unwrap_or(Duration::from_secs(600))
}

/// Look for new handoffs every `poll`, check in when one is there or `every` has passed,
/// and hand each check-in's report to `on_checkin`; end when the task is finished, or
/// after `timeout` seconds (0: never).
pub(crate) async fn watch(
    t: &Task,
    ctx: &Ctx,
    every: Duration,
    poll: Duration,
    timeout: u64,
    mut on_checkin: impl FnMut(&CheckinReport),
) -> anyhow::Result<End> {
    let started = Instant::now();
    let mut last_checkin = Instant::now();
    // What this loop's check-ins did lately (a failed save backs the next ones off).
    let lately = crate::app::recent::Lately::default();
    loop {
        let st = t.state()?;
        if matches!(st.phase, Phase::Complete | Phase::Blocked) {
            return Ok(End::Finished(st.phase));
        }
        let (names, _) = handoffs::list(&t.handoffs())?;
        let (cands, _) = crate::store::handoffs::scan(&st.ledger, &t.handoffs(), &names)?;
        let due = last_checkin.elapsed() >= every;
        if !cands.is_empty() || due {
            let sched = Schedule::Every(every);
            let r = crate::app::checkin::run_with(
                t,
                &ctx.tmux,
                clock::now(),
                Trigger::Manual,
                Vec::new(),
                crate::store::handoffs::Ready::All,
                &lately,
                Some(&sched),
            )
            .await?;
            on_checkin(&r);
            last_checkin = Instant::now();
            if r.delivery.as_ref().is_some_and(|d| d.outcome != Outcome::Delivered) {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        if timeout > 0 && started.elapsed().as_secs() >= timeout {
            return Ok(End::GaveUp(st.phase));
        }
        tokio::time::sleep(poll).await;
    }
}
