//! Agents that cannot go on by themselves: a dialog that needs a human, or a
//! usage limit that only needs time.
//!
//! Every agent's pane is looked at by the daemon's liveness tick and by every
//! check-in (cron mode included), through [`tend`]. What the screen shows
//! ([`observe`], pure) and the agent's previous *episode* (kept per agent in
//! pm_state.json, so a restarted daemon neither repeats nor forgets) go into
//! [`decide`] (pure), which returns the new episode and the actions to take;
//! `tend` only does the I/O those actions name.
//!
//! - **needs a human**: the screen matches the runtime's `dialog` patterns. After
//!   `attention_after:` (task.md, default 2 min — a prompt a PM answers by itself
//!   or that goes away on its own is not worth a page) it is escalated once per
//!   episode: event, notify command, progress.md, status and the PM's next check-in.
//! - **paused**: the screen matches `usage_limit`. The reset time is read from the
//!   matching line ([`parse_reset`]); at the reset plus `resume_delay:` (default
//!   1 min, since Claude Code prints the reset to the minute, rounded down) the
//!   agent is sent templates/resume.md with verified delivery. Only a pause that
//!   outlives its reset by [`PAUSE_ESCALATE_AFTER`] calls a human.
//!
//! An episode ends when the screen no longer shows what started it
//! (`attention_cleared`); the next one can escalate again.

use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::core::screen::{self, Patterns, Screen};

/// Default grace before a dialog is escalated (task.md `attention_after:`).
pub const ATTENTION_AFTER: Duration = Duration::from_secs(120);
/// Default wait after a usage limit's reset before the agent is nudged (task.md `resume_delay:`).
pub const RESUME_DELAY: Duration = Duration::from_secs(60);
/// A pause still on screen this long after its reset needs a human.
pub const PAUSE_ESCALATE_AFTER: Duration = Duration::from_secs(15 * 60);
/// The pause assumed when the reset time cannot be read from the screen: Claude Code's
/// session limits reset on the hour, and an API rate limit (per minute) has long lifted by
/// then; a wrong guess costs one "continue" and, 15 minutes later, a human.
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(3600);
/// A reset read from the screen may lie this far before the moment the pause was first
/// seen and still count (minute rounding, a look a few seconds late); older means the
/// text is stale and the default pause applies.
pub const RESET_TOLERANCE: Duration = Duration::from_secs(5 * 60);
/// A limit seen this soon after a confirmed resume, with no episode open, is not believed
/// yet: a look may show a screen from before the resume (a shared pane listing up to a
/// second old and the capture kept with it), and the resume's time is taken when its look
/// began, up to the delivery's ready timeout earlier. A limit really back is still on
/// screen at the next look after this.
pub const RESUME_SETTLE: Duration = Duration::from_secs(15);
/// A usage-limit line counts only with fewer than this many non-empty lines below it: the
/// hint, the options menu (about 8 lines) and the input box with its footer.
pub const LIMIT_WINDOW: usize = 16;

/// The message that wakes a paused agent (a template, so it reads like the other prompts).
pub const RESUME_TEMPLATE: &str = include_str!("../../templates/resume.md");

/// What kind of episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A dialog waits for a human.
    NeedsHuman,
    /// A usage or rate limit; resumes by itself.
    Paused,
}

/// One episode of an agent not being able to go on, as kept in pm_state.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attention {
    /// needs_human or paused.
    pub kind: Kind,
    /// What it is: `permission prompt`, `trust prompt`, `API key prompt`, `login`, `dialog`, `usage limit`.
    pub reason: String,
    /// The matching screen line, control characters stripped.
    pub line: String,
    /// When it was first seen.
    pub since: DateTime<Utc>,
    /// When a human was called (once per episode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_at: Option<DateTime<Utc>>,
    /// Paused: when the limit lifts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<DateTime<Utc>>,
    /// Paused: whether `resets_at` was read from the screen (false: the default pause).
    #[serde(default)]
    pub reset_parsed: bool,
    /// Paused: when the resume message was confirmed delivered. Only in state written by
    /// earlier versions: a confirmed resume now ends the episode (see `app::attend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<DateTime<Utc>>,
    /// Whether a delivered check-in has told the PM.
    #[serde(default)]
    pub announced: bool,
}

impl Attention {
    /// When the resume message is due (paused episodes only).
    pub fn resume_due(&self, t: &Timing, last_resume: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
        let reset = self.resets_at?;
        let due = reset + chrono_dur(t.resume_delay);
        // A limit that comes straight back after a resume is not nudged again at once.
        Some(match last_resume {
            Some(r) => due.max(r + chrono_dur(PAUSE_ESCALATE_AFTER)),
            None => due,
        })
    }

    /// One line for check-ins and status.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::NeedsHuman => format!(
                "needs a human: {} since {}",
                self.reason,
                crate::core::clock::local_time(self.since)
            ),
            Kind::Paused => format!(
                "paused by a usage limit until {}{}",
                self.resets_at
                    .map(crate::core::clock::local_time)
                    .unwrap_or_else(|| "?".into()),
                if self.resumed_at.is_some() { ", resumed" } else { "" }
            ),
        }
    }
}

fn chrono_dur(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The durations, from task.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// `attention_after:`.
    pub attention_after: Duration,
    /// `resume_delay:`.
    pub resume_delay: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            attention_after: ATTENTION_AFTER,
            resume_delay: RESUME_DELAY,
        }
    }
}

impl Timing {
    /// From task.md's Agent Config (`attention_after:`, `resume_delay:`), parsed like the
    /// other durations; a missing or unreadable value is the default.
    pub fn from_spec(spec: Option<&crate::core::model::taskmd::TaskSpec>) -> Timing {
        let get = |k: &str, d: Duration| {
            spec.and_then(|s| s.setting(k))
                .and_then(crate::core::clock::parse_duration)
                .unwrap_or(d)
        };
        Timing {
            attention_after: get("attention_after", ATTENTION_AFTER),
            resume_delay: get("resume_delay", RESUME_DELAY),
        }
    }
}

/// What one look at a pane found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Seen {
    /// Nothing that stops the agent.
    #[default]
    Clear,
    /// A dialog; its line.
    Dialog(String),
    /// A usage or rate limit is the latest thing on screen; its line.
    UsageLimit(String),
    /// The pane is dead or gone: whatever it showed no longer matters.
    Gone,
    /// Could not look (host unreachable, capture failed): keep what was known.
    Unknown,
}

/// One screen line fit for status, events and messages: control characters stripped,
/// whitespace collapsed, at most 200 characters.
pub fn clean_line(s: &str) -> String {
    let s = screen::sanitize(s);
    let s = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Judge a screen. A usage limit counts only while it is the latest thing on screen:
/// once the resume message (`resume_marker`, its first line) shows below it, the agent
/// has been given its turn back, and a new limit would print a new line below that.
///
/// Two more guards keep a limit *quoted* on screen (an agent reading these docs, a log
/// scrolled by) from pausing a working agent: the line must be among the bottom
/// [`LIMIT_WINDOW`] non-empty lines (Claude Code prints it just above its input box), and
/// the screen must not show the runtime's `busy` patterns (a limit Claude Code is still
/// retrying on shows `Retrying in 5s · attempt 3/10` with `esc to interrupt`).
pub fn observe(screen: &str, p: &Patterns, resume_marker: &str) -> Seen {
    if let Some((end, line)) = p.last_usage_limit(screen) {
        let marker = resume_marker.trim();
        let below = screen[end..].lines().filter(|l| !l.trim().is_empty()).count();
        let resumed = !marker.is_empty() && screen[end..].contains(marker);
        if !resumed && below < LIMIT_WINDOW && !p.is_busy(screen) {
            return Seen::UsageLimit(clean_line(line));
        }
    }
    match screen::assess(screen, p) {
        Screen::Dialog(line) => Seen::Dialog(clean_line(&line)),
        _ => Seen::Clear,
    }
}

/// Name the kind of dialog from its line, for a human deciding whether to get up.
pub fn classify(line: &str) -> &'static str {
    let l = line.to_lowercase();
    if l.contains("trust") {
        "trust prompt"
    } else if l.contains("api key") {
        "API key prompt"
    } else if l.contains("log in") || l.contains("login") || l.contains("sign in") || l.contains("connect") {
        "login"
    } else if l.contains("do you want to") || l.contains("allow") || l.contains("approv") || l.contains("permission") {
        "permission prompt"
    } else {
        "dialog"
    }
}

/// What [`tend`] must do after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A new episode: log it (`needs_human` or `paused`).
    Began,
    /// Call a human (once per episode).
    Escalate,
    /// Send the resume message.
    Resume,
    /// The episode ended: log `attention_cleared`, close its escalation.
    Cleared,
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The episode after this look.
    pub next: Option<Attention>,
    /// What to do, in order.
    pub actions: Vec<Action>,
}

/// Decide from one look, the previous episode and the clock. Pure.
///
/// `last_resume` is the agent's last confirmed resume (any episode): a limit that is back
/// right after a resume waits [`PAUSE_ESCALATE_AFTER`] before the next nudge, so a wrong
/// reset time cannot turn into a message loop.
pub fn decide(
    prev: Option<&Attention>,
    seen: &Seen,
    last_resume: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    t: &Timing,
) -> Decision {
    let want = match seen {
        Seen::Unknown => {
            return Decision {
                next: prev.cloned(),
                actions: Vec::new(),
            };
        }
        Seen::Clear | Seen::Gone => None,
        Seen::Dialog(line) => Some((Kind::NeedsHuman, line)),
        Seen::UsageLimit(_) if prev.is_none() && last_resume.is_some_and(|r| now < r + chrono_dur(RESUME_SETTLE)) => {
            return Decision {
                next: None,
                actions: Vec::new(),
            };
        }
        Seen::UsageLimit(line) => Some((Kind::Paused, line)),
    };
    let mut actions = Vec::new();
    let mut ep = match (prev, want) {
        (None, None) => {
            return Decision { next: None, actions };
        }
        (Some(_), None) => {
            return Decision {
                next: None,
                actions: vec![Action::Cleared],
            };
        }
        (Some(p), Some((kind, _))) if p.kind == kind => p.clone(),
        (p, Some((kind, line))) => {
            if p.is_some() {
                actions.push(Action::Cleared);
            }
            actions.push(Action::Began);
            let (resets_at, reset_parsed) = if kind == Kind::Paused {
                match parse_reset(line, now, None).filter(|r| *r >= now - chrono_dur(RESET_TOLERANCE)) {
                    Some(r) => (Some(r), true),
                    None => (Some(now + chrono_dur(DEFAULT_PAUSE)), false),
                }
            } else {
                (None, false)
            };
            Attention {
                kind,
                reason: match kind {
                    Kind::NeedsHuman => classify(line).to_string(),
                    Kind::Paused => "usage limit".to_string(),
                },
                line: line.clone(),
                since: now,
                escalated_at: None,
                resets_at,
                reset_parsed,
                resumed_at: None,
                announced: false,
            }
        }
    };
    match ep.kind {
        Kind::NeedsHuman => {
            if ep.escalated_at.is_none() && now >= ep.since + chrono_dur(t.attention_after) {
                ep.escalated_at = Some(now);
                actions.push(Action::Escalate);
            }
        }
        Kind::Paused => {
            if ep.resumed_at.is_none() && ep.resume_due(t, last_resume).is_some_and(|d| now >= d) {
                actions.push(Action::Resume);
            }
            let late = ep
                .resets_at
                .is_some_and(|r| now >= r + chrono_dur(PAUSE_ESCALATE_AFTER));
            if ep.escalated_at.is_none() && late {
                ep.escalated_at = Some(now);
                actions.push(Action::Escalate);
            }
        }
    }
    Decision {
        next: Some(ep),
        actions,
    }
}

/// What a check-in tells the PM about an episode. The dialog's line is quoted only when
/// the quote cannot make the PM's own screen look like a dialog or a usage limit (its
/// runtime's patterns, `pm`): the PM must never be paused by reading about another agent.
pub fn mention(task: &str, agent: &str, a: &Attention, pm: Option<&Patterns>) -> String {
    match a.kind {
        Kind::NeedsHuman => {
            let quoted = format!("{} \"{}\"", a.reason, a.line);
            let safe = pm.is_none_or(|p| observe(&quoted, p, "") == Seen::Clear);
            format!(
                "{} since {}; a human was called (`task attach {task} {agent}` to see it)",
                if safe { quoted } else { a.reason.clone() },
                crate::core::clock::local_time(a.since)
            )
        }
        Kind::Paused => format!(
            "paused by a usage limit until {}{}; the supervisor tells it to continue then",
            a.resets_at
                .map(crate::core::clock::local_time)
                .unwrap_or_else(|| "?".into()),
            if a.reset_parsed {
                ""
            } else {
                " (reset time not shown; a default wait)"
            }
        ),
    }
}

/// How an episode's escalation text starts: an agent has at most one episode, so this finds
/// its escalation again when the episode ends, whichever process (with whichever time zone)
/// wrote it.
pub fn escalation_prefix(agent: &str, kind: Kind) -> String {
    match kind {
        Kind::NeedsHuman => format!("{agent} needs a human: "),
        Kind::Paused => format!("{agent} is still stopped by a usage limit "),
    }
}

/// The escalation text of an episode (it starts with [`escalation_prefix`]).
pub fn escalation_reason(task: &str, agent: &str, a: &Attention) -> String {
    match a.kind {
        Kind::NeedsHuman => format!(
            "{agent} needs a human: {} \"{}\" since {}; answer it with `task attach {task} {agent}`",
            a.reason,
            a.line,
            crate::core::clock::local_time(a.since)
        ),
        Kind::Paused => format!(
            "{agent} is still stopped by a usage limit {} minutes after its reset at {} (\"{}\"); look with `task attach {task} {agent}`",
            PAUSE_ESCALATE_AFTER.as_secs() / 60,
            a.resets_at
                .map(crate::core::clock::local_time)
                .unwrap_or_else(|| "?".into()),
            a.line
        ),
    }
}

/// Read the reset time from a usage-limit line. Pure apart from the zone database.
///
/// Claude Code 2.1 prints the reset with `Intl` en-US formatting (its `Vee` helper) and the
/// machine's IANA zone in parentheses:
/// - within 24 h: `resets 3pm (Europe/London)`, `resets 3:30pm (UTC)`;
/// - later: `resets Nov 28, 3pm (UTC)`, `resets Nov 28, 3:30pm (Asia/Tokyo)`;
/// - another year: `resets Jan 2, 2027, 3pm (UTC)`.
///
/// Newer ICU data puts a NARROW NO-BREAK SPACE before `PM` and Claude Code's lower-casing
/// regex then leaves `3:30 PM`, so a space and upper case are accepted too. Older builds
/// said `reset at 3pm`. Relative forms (`resets in 2h 30m`, `in 45 minutes`, as its fast
/// mode prints) count from `since`. A time of day is the first such moment not more than
/// [`RESET_TOLERANCE`] before `since`. Without a zone, `zone` (else the local zone) applies;
/// an unknown zone name is `None`, not a guess.
pub fn parse_reset(line: &str, since: DateTime<Utc>, zone: Option<chrono_tz::Tz>) -> Option<DateTime<Utc>> {
    static ABS: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    static REL: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let rel = REL.get_or_init(|| {
        Regex::new(r"(?i)\breset(?:s|ting)?\s+(?:at\s+)?in\s+((?:\d+\s*(?:d|days?|h|hrs?|hours?|m|mins?|minutes?|s|secs?|seconds?)[\s,]*(?:and\s+)?)+)").unwrap()
    });
    if let Some(c) = rel.captures(line) {
        let unit = Regex::new(r"(?i)(\d+)\s*(d|h|m|s)").unwrap();
        let mut secs: i64 = 0;
        for u in unit.captures_iter(&c[1]) {
            let n: i64 = u[1].parse().ok()?;
            secs += n * match u[2].to_ascii_lowercase().as_str() {
                "d" => 86400,
                "h" => 3600,
                "m" => 60,
                _ => 1,
            };
        }
        return (secs > 0).then(|| since + chrono::Duration::seconds(secs));
    }
    let abs = ABS.get_or_init(|| {
        Regex::new(
            r"(?i)\breset(?:s)?\s+(?:at\s+|on\s+)?(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2}),?\s+(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s?(?P<ap>[ap])\.?m\.?(?:\s*\((?P<tz>[^)]+)\))?",
        )
        .unwrap()
    });
    let c = abs.captures(line)?;
    let tz = match c.name("tz") {
        Some(z) => Some(z.as_str().trim().parse::<chrono_tz::Tz>().ok()?),
        None => zone,
    };
    let mut h: u32 = c["h"].parse().ok()?;
    if !(1..=12).contains(&h) {
        return None;
    }
    let m: u32 = c.name("m").map_or(Some(0), |m| m.as_str().parse().ok())?;
    let pm = c["ap"].eq_ignore_ascii_case("p");
    h = (h % 12) + if pm { 12 } else { 0 };
    let time = NaiveTime::from_hms_opt(h, m, 0)?;
    let to_utc = |naive: NaiveDateTime| -> Option<DateTime<Utc>> {
        match tz {
            Some(z) => z.from_local_datetime(&naive).earliest().map(|t| t.with_timezone(&Utc)),
            None => chrono::Local
                .from_local_datetime(&naive)
                .earliest()
                .map(|t| t.with_timezone(&Utc)),
        }
    };
    let since_local = match tz {
        Some(z) => since.with_timezone(&z).date_naive(),
        None => since.with_timezone(&chrono::Local).date_naive(),
    };
    if let Some(mon) = c.name("mon") {
        let month = [
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ]
        .iter()
        .position(|x| mon.as_str().to_ascii_lowercase().starts_with(x))? as u32
            + 1;
        let day: u32 = c["day"].parse().ok()?;
        let year: i32 = match c.name("year") {
            Some(y) => y.as_str().parse().ok()?,
            None => since_local.year(),
        };
        return to_utc(NaiveDate::from_ymd_opt(year, month, day)?.and_time(time));
    }
    let earliest = since - chrono_dur(RESET_TOLERANCE);
    let mut day = since_local.pred_opt()?;
    for _ in 0..3 {
        if let Some(t) = to_utc(day.and_time(time)) {
            if t >= earliest {
                return Some(t);
            }
        }
        day = day.succ_opt()?;
    }
    None
}

#[cfg(test)]
mod tests;
