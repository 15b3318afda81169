//! When the next scheduled check-in is due: pure computation from task.md's
//! `checkin:` setting, the time of the last check-in and the saved
//! `next_checkin`.
//!
//! The time is saved in pm_state.json (not held in a timer of the daemon), so a
//! daemon restarted at any moment schedules from what was saved: a check-in
//! missed while it was down runs at once, and one not yet due is neither
//! pushed back nor doubled.

use std::time::Duration;

use chrono::{DateTime, Local, Utc};

/// The default schedule: every 10 minutes (docs/protocol.md#check-ins).
pub const DEFAULT_EVERY: Duration = Duration::from_secs(600);

/// A task's check-in schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// `checkin: 10m` (also `90s`, `2h`): this long after the last check-in.
    Every(Duration),
    /// A 5-field cron expression, in local time as crontab reads it.
    Cron(Box<croner::Cron>),
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Schedule::Every(a), Schedule::Every(b)) => a == b,
            (Schedule::Cron(a), Schedule::Cron(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

fn cron(expr: &str) -> Result<Schedule, String> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .build()
        .parse(expr)
        .map(|c| Schedule::Cron(Box::new(c)))
        .map_err(|e| format!("checkin: {expr:?} is not a valid cron expression ({e})"))
}

impl Schedule {
    /// The daemon's schedule for a `checkin:` setting (`None`: every 10 minutes).
    /// A duration counts from the last check-in; five fields are a cron expression.
    pub fn parse(setting: Option<&str>) -> Result<Schedule, String> {
        let Some(s) = setting.map(str::trim) else {
            return Ok(Schedule::Every(DEFAULT_EVERY));
        };
        if s.split_whitespace().count() == 5 {
            return cron(s);
        }
        crate::core::clock::parse_duration(s)
            .map(Schedule::Every)
            .ok_or_else(|| format!("checkin: {s:?} is neither a duration like 10m nor a 5-field cron expression"))
    }

    /// The schedule of cron mode, where the crontab line (see [`crate::io::cron::schedule`])
    /// decides when `task checkin` runs, whatever the last check-in was.
    pub fn crontab(setting: Option<&str>) -> Result<Schedule, String> {
        cron(&crate::io::cron::schedule(setting)?)
    }

    /// The first check-in time after a check-in at `at`.
    pub fn next_after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Every(d) => Some(at + chrono::Duration::from_std(*d).ok()?),
            Schedule::Cron(c) => c
                .find_next_occurrence(&at.with_timezone(&Local), false)
                .ok()
                .map(|t| t.with_timezone(&Utc)),
        }
    }

    /// When the next check-in is due for a supervisor (re)starting at `now`:
    /// the `saved` time when there is one (never later than a fresh computation
    /// from `now`, so a schedule shortened in task.md applies at once); else
    /// from the last check-in; a time already past is due `now`, so a check-in
    /// missed while no one was watching runs at once, and only once.
    pub fn resume(
        &self,
        saved: Option<DateTime<Utc>>,
        last_checkin: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let fresh = self.next_after(now);
        let due = match (saved, last_checkin) {
            (Some(s), _) => Some(fresh.map_or(s, |f| f.min(s))),
            (None, Some(last)) => self.next_after(last),
            (None, None) => fresh,
        }?;
        Some(due.max(now))
    }
}

/// How long from `now` until `due` (zero when it is past).
pub fn until(due: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    due.signed_duration_since(now).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn parses_durations_and_cron_and_refuses_the_rest() {
        assert_eq!(Schedule::parse(None).unwrap(), Schedule::Every(DEFAULT_EVERY));
        assert_eq!(
            Schedule::parse(Some("90s")).unwrap(),
            Schedule::Every(Duration::from_secs(90))
        );
        assert!(matches!(
            Schedule::parse(Some("*/10 9-18 * * 1-5")).unwrap(),
            Schedule::Cron(_)
        ));
        assert!(Schedule::parse(Some("soon")).unwrap_err().contains("soon"));
        assert!(Schedule::parse(Some("99 * * * *")).unwrap_err().contains("cron"));
        assert!(Schedule::parse(Some("0 */10 * * * *")).is_err(), "six fields");
    }

    #[test]
    fn an_interval_counts_from_the_check_in() {
        let s = Schedule::parse(Some("10m")).unwrap();
        assert_eq!(s.next_after(t("2025-11-27T09:03:20Z")), Some(t("2025-11-27T09:13:20Z")));
    }

    #[test]
    fn a_cron_expression_gives_its_next_match() {
        // The test binary runs with the machine's zone; UTC-aligned minutes are the same in
        // every zone whose offset is a multiple of 10 minutes, and `*/10` is what is tested.
        let s = Schedule::parse(Some("*/10 * * * *")).unwrap();
        let next = s.next_after(t("2025-11-27T09:03:20Z")).unwrap();
        assert_eq!(next.timestamp() % 60, 0);
        assert!(next > t("2025-11-27T09:03:20Z") && next <= t("2025-11-27T09:13:20Z"));
        let again = s.next_after(next).unwrap();
        assert_eq!(again - next, chrono::Duration::minutes(10), "strictly after");
        let cm = Schedule::crontab(Some("5m")).unwrap();
        let n = cm.next_after(t("2025-11-27T09:03:20Z")).unwrap();
        assert!(n - t("2025-11-27T09:03:20Z") <= chrono::Duration::minutes(5));
    }

    #[test]
    fn a_restart_keeps_the_saved_time_and_runs_a_missed_one_at_once() {
        let s = Schedule::Every(Duration::from_secs(600));
        let last = t("2025-11-27T09:00:00Z");
        let saved = Some(t("2025-11-27T09:10:00Z"));
        // Restarted at 09:05: still 09:10, not 09:15.
        assert_eq!(
            s.resume(saved, Some(last), t("2025-11-27T09:05:00Z")),
            Some(t("2025-11-27T09:10:00Z"))
        );
        // Restarted at 09:12, after it was missed: at once.
        assert_eq!(
            s.resume(saved, Some(last), t("2025-11-27T09:12:00Z")),
            Some(t("2025-11-27T09:12:00Z"))
        );
        // Nothing saved (a state from an older build): from the last check-in.
        assert_eq!(
            s.resume(None, Some(last), t("2025-11-27T09:04:00Z")),
            Some(t("2025-11-27T09:10:00Z"))
        );
        // Never checked in: one interval from now.
        assert_eq!(
            s.resume(None, None, t("2025-11-27T09:04:00Z")),
            Some(t("2025-11-27T09:14:00Z"))
        );
        // task.md now says 1m: the saved 09:10 is too far; 09:06 it is.
        assert_eq!(
            Schedule::Every(Duration::from_secs(60)).resume(saved, Some(last), t("2025-11-27T09:05:00Z")),
            Some(t("2025-11-27T09:06:00Z"))
        );
    }

    #[test]
    fn until_is_never_negative() {
        assert_eq!(
            until(t("2025-11-27T09:10:00Z"), t("2025-11-27T09:09:58Z")),
            Duration::from_secs(2)
        );
        assert_eq!(
            until(t("2025-11-27T09:10:00Z"), t("2025-11-27T09:11:00Z")),
            Duration::ZERO
        );
    }
}
