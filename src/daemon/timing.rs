//! When the actor acts: the pure decisions of time behind it — how long a hint waits,
//! when a final handoff's check-in may start, how long a check-in waits for handoffs still
//! settling, and when a dead PM is restarted or given up on. No I/O: the actor asks,
//! these answer, the unit tests below pin them.

use std::time::Duration;

use tokio::time::Instant;

use crate::store::handoffs;

/// Debounce between a hint (a rescan, a pull) and the scan it causes: nothing waits on
/// those, and a burst of them becomes one scan.
pub(super) const DEBOUNCE: Duration = Duration::from_millis(150);

/// How long after a handoff's check-in began the next one waits. A handoff that is final
/// is checked in at once; those that land while a check-in is being delivered go into the
/// next one, which starts when that one is done but not before this window has passed
/// since it began: a burst of handoffs costs at most two check-ins, never one per file.
pub(super) const COALESCE: Duration = Duration::from_millis(150);

/// PM restarts allowed within [`RESTART_WINDOW`] before the task is BLOCKED and a human called.
pub const MAX_PM_RESTARTS: usize = 3;

/// How often the actor looks at its task (the state's health, lanes, deaths, attention),
/// and how soon a death or a restart whose save failed is tried again.
pub const LIVENESS_EVERY: Duration = Duration::from_secs(5);

/// The window for [`MAX_PM_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(600);

/// Whether the periodic remote pull is passed over: a clean pull began within its period
/// (`fresh`), and the last one was not passed over already, so a missed watch event is
/// still pulled within two periods. Pure.
pub(super) fn pass_over_pull(passed_over_last: bool, fresh: bool) -> bool {
    fresh && !passed_over_last
}

/// What to do about a dead PM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Restart it now.
    Now,
    /// Back off this long first (1 s, 2 s, 4 s… after each recent restart).
    After(Duration),
    /// Too many restarts in the window: stop and escalate.
    GiveUp,
}

/// Decide whether to restart a PM that was seen dead at `died_at`, from the restarts
/// before it. Pure. The n-th recent restart (n = 0, 1, 2) waits 1, 2, 4 s counted from
/// the death, as README promises; with [`MAX_PM_RESTARTS`] restarts in the window already,
/// this death is one too many.
pub fn restart_decision(
    restarts: &[chrono::DateTime<chrono::Utc>],
    died_at: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Restart {
    let n = recent_restarts(restarts, died_at);
    if n >= MAX_PM_RESTARTS {
        return Restart::GiveUp;
    }
    let due = died_at + chrono::Duration::seconds(1 << n.min(6));
    match (due - now).to_std() {
        Ok(wait) if !wait.is_zero() => Restart::After(wait),
        _ => Restart::Now,
    }
}

/// How many restarts fall in the [`RESTART_WINDOW`] before `at`. Pure.
pub(super) fn recent_restarts(restarts: &[chrono::DateTime<chrono::Utc>], at: chrono::DateTime<chrono::Utc>) -> usize {
    let window = chrono::Duration::from_std(RESTART_WINDOW).expect("fits");
    restarts.iter().filter(|t| at - **t < window).count()
}

/// How long a dead PM may stay down with every restart failing before a human is called.
pub const RESTART_FAILING_FOR: Duration = Duration::from_secs(300);

/// When a failed restart of the PM that died at `died_at` is tried again. The attempt ran
/// no PM (say the disk was full), so it is no death to count against [`MAX_PM_RESTARTS`]:
/// a condition that passes in seconds must not use up the budget meant for a PM that
/// keeps dying. The tries thin out as the failure lasts: half the time since the death,
/// at least a second and at most a minute. Pure.
pub fn retry_failed_restart(died_at: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> Duration {
    let down = (now - died_at).to_std().unwrap_or_default();
    (down / 2).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// The escalation when the PM that died at `died_at` has not come back for
/// [`RESTART_FAILING_FOR`], every restart failing: `None` before then. Raised once per
/// reason, so it names the death and not the last error (see the `pm_restart_failed`
/// events for those). Pure.
pub fn restart_failing_reason(
    died_at: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
    task: &str,
) -> Option<String> {
    let down = (now - died_at).to_std().ok()?;
    (down >= RESTART_FAILING_FOR).then(|| {
        format!(
            "the PM died at {} and every restart since has failed (see the pm_restart_failed events in `task log {task}`); the supervisor keeps trying: fix what they say, or start it with `task start {task}`",
            crate::core::clock::local_time(died_at)
        )
    })
}

/// The escalation after the PM died once more than it may be restarted: every restart
/// followed a death, and this death is the one not restarted. Pure.
pub fn give_up_reason(
    restarts: &[chrono::DateTime<chrono::Utc>],
    died_at: chrono::DateTime<chrono::Utc>,
    task: &str,
) -> String {
    format!(
        "the PM died {} times within {} minutes and is not restarted again; look with `task attach {task}` and start it with `task start {task}`",
        recent_restarts(restarts, died_at) + 1,
        RESTART_WINDOW.as_secs() / 60,
    )
}

/// When a final handoff's check-in may start (`due` is the one already set, if any): at
/// once, unless the last handoff check-in began less than [`COALESCE`] ago. Pure.
pub(super) fn handoff_due(now: Instant, last_start: Option<Instant>, due: Option<Instant>) -> Instant {
    let at = last_start.map_or(now, |l| (l + COALESCE).max(now));
    due.map_or(at, |d| d.min(at))
}

/// When to hold a check-in the PM must hear of, so that handoffs still settling are in it;
/// `None` to run it now. Pure. A handoff found by a scan with no event (written while no
/// daemon watched) settles [`handoffs::QUIET`] after it was first seen; a check-in a moment
/// earlier leaves it out, and a handoff that wakes no one then waits for the schedule (ten
/// minutes by default). So the check-in waits for those, once (`held`) and at most QUIET:
/// a file still changing after that is a handoff being written, and comes later.
pub(super) fn hold_until(settling: &[Instant], now: Instant, held: bool) -> Option<Instant> {
    if held {
        return None;
    }
    settling
        .iter()
        .copied()
        .filter(|t| *t > now && *t <= now + handoffs::QUIET)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_pull_is_passed_over_after_a_fresh_one_but_never_twice_in_a_row() {
        assert!(pass_over_pull(false, true), "a pull began within the period");
        assert!(!pass_over_pull(false, false), "none did: the fallback pulls");
        assert!(!pass_over_pull(true, true), "passed over last time: pulls now");
        let mut passed = false;
        let pulls: Vec<bool> = (0..4)
            .map(|_| {
                passed = pass_over_pull(passed, true);
                !passed
            })
            .collect();
        assert_eq!(
            pulls,
            [false, true, false, true],
            "every other tick while pulls stay fresh"
        );
    }

    #[test]
    fn restarts_back_off_from_the_death_then_give_up() {
        let t0: chrono::DateTime<chrono::Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        let s = |secs: i64| t0 + chrono::Duration::seconds(secs);
        let ms = |m: i64| t0 + chrono::Duration::milliseconds(m);
        // First death at 0: 1 s from the death, not at once.
        assert_eq!(
            restart_decision(&[], s(0), ms(30)),
            Restart::After(Duration::from_millis(970))
        );
        assert_eq!(restart_decision(&[], s(0), s(1)), Restart::Now);
        // Second death at 10 (one restart at 1): 2 s from the death.
        assert_eq!(
            restart_decision(&[s(1)], s(10), s(10)),
            Restart::After(Duration::from_secs(2))
        );
        assert_eq!(restart_decision(&[s(1)], s(10), s(12)), Restart::Now);
        // Third: 4 s.
        assert_eq!(
            restart_decision(&[s(1), s(12)], s(20), s(23)),
            Restart::After(Duration::from_secs(1))
        );
        assert_eq!(restart_decision(&[s(1), s(12)], s(20), s(24)), Restart::Now);
        // Fourth death: give up.
        assert_eq!(restart_decision(&[s(1), s(12), s(24)], s(30), s(30)), Restart::GiveUp);
        // Old restarts fall out of the window.
        assert_eq!(restart_decision(&[s(1), s(12), s(24)], s(700), s(701)), Restart::Now);
    }

    #[test]
    fn a_failed_restart_is_tried_again_less_often_and_calls_a_human_after_five_minutes() {
        let t0: chrono::DateTime<chrono::Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        let s = |secs: i64| t0 + chrono::Duration::seconds(secs);
        let retry = |at: i64| retry_failed_restart(s(0), s(at));
        assert_eq!(retry(1), Duration::from_secs(1), "at least a second");
        assert_eq!(retry(6), Duration::from_secs(3));
        assert_eq!(retry(600), Duration::from_secs(60), "at most a minute");
        assert_eq!(
            retry_failed_restart(s(5), s(0)),
            Duration::from_secs(1),
            "a clock step back"
        );
        assert_eq!(restart_failing_reason(s(0), s(299), "t1"), None);
        let said = restart_failing_reason(s(0), s(300), "t1").unwrap();
        assert!(said.contains("every restart since has failed"), "{said}");
        assert!(
            said.contains("`task log t1`") && said.contains("`task start t1`"),
            "{said}"
        );
        assert_eq!(
            restart_failing_reason(s(0), s(900), "t1").as_deref(),
            Some(said.as_str()),
            "one reason for the death, however long it lasts: raised once"
        );
    }

    #[test]
    fn a_checkin_waits_once_for_handoffs_about_to_settle() {
        let now = Instant::now();
        let q = handoffs::QUIET;
        let ms = |m: u64| now + Duration::from_millis(m);
        assert_eq!(hold_until(&[], now, false), None, "nothing settling: at once");
        assert_eq!(
            hold_until(&[ms(100), ms(600)], now, false),
            Some(ms(600)),
            "until the last one"
        );
        assert_eq!(hold_until(&[ms(600)], now, true), None, "only once");
        assert_eq!(hold_until(&[now], now, false), None, "already due");
        // A file that reads as incomplete settles later than QUIET: not waited for.
        assert_eq!(hold_until(&[now + q + Duration::from_millis(1)], now, false), None);
        assert_eq!(hold_until(&[ms(200), now + 2 * q], now, false), Some(ms(200)));
    }

    #[test]
    fn a_final_handoff_is_checked_in_at_once_unless_one_just_began() {
        let now = Instant::now();
        let ms = |m: u64| now + Duration::from_millis(m);
        assert_eq!(handoff_due(now, None, None), now, "nothing before: at once");
        assert_eq!(handoff_due(ms(500), Some(now), None), ms(500), "the last one long ago");
        assert_eq!(
            handoff_due(ms(40), Some(now), None),
            now + COALESCE,
            "one began 40 ms ago: this waits for the rest of the window"
        );
        assert_eq!(
            handoff_due(ms(40), Some(now), Some(ms(60))),
            ms(60),
            "an earlier time stays"
        );
        assert_eq!(
            handoff_due(now, None, Some(ms(5000))),
            now,
            "a later retry does not hold it"
        );
    }

    #[test]
    fn the_escalation_counts_the_deaths() {
        let t0: chrono::DateTime<chrono::Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        let s = |secs: i64| t0 + chrono::Duration::seconds(secs);
        let r = give_up_reason(&[s(1), s(12), s(24)], s(30), "t1");
        assert!(r.starts_with("the PM died 4 times within 10 minutes"), "{r}");
        assert!(r.contains("`task start t1`"), "{r}");
    }
}
