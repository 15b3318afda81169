//! What an agent's own client says about its turn, through the hooks the supervisor sets
//! (Claude Code's `UserPromptSubmit`, `Stop`, `StopFailure`, `Notification`), weighed
//! against what its screen shows.
//!
//! The screen alone learns late and can be fooled: a usage-limit banner that has scrolled
//! away, a dialog whose wording a new client version changed, a permission prompt seen
//! only at the next look. A hook is told at the moment it happens. But a hook can also be
//! silent (Claude Code runs no `Stop` hook when a human interrupts a turn) or stale (a
//! report from before the agent was restarted or resumed), so the screen stays the check:
//! [`weigh`] lets a fresh report speak where the screen says nothing, and corrects a report
//! the screen contradicts, once, with the reason logged.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::attention::{Seen, clean_line};

/// A report newer than this may not be on screen yet (the client draws after the hook),
/// so the screen cannot contradict it.
pub const SETTLE: Duration = Duration::from_secs(10);

/// What the client said last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Said {
    /// A prompt was submitted: the agent is working on a turn.
    Working,
    /// The turn ended, and the agent waits for its next prompt.
    Ended,
    /// The turn ended on an error (`rate_limit`, `authentication_failed`, `billing_error`,
    /// `server_error`, …), with the client's own words for it.
    Failed { error: String, text: String },
    /// The client shows something that waits for an answer (`permission_prompt`,
    /// `elicitation_dialog`), with its message.
    Waiting { what: String, text: String },
}

/// One report, as kept per agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    #[serde(flatten)]
    pub said: Said,
    /// When the hook ran.
    pub at: DateTime<Utc>,
    /// The client's conversation id, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// The hook events the supervisor asks for, by the name `task hook` is given, with the
/// client's own event name.
pub const EVENTS: [(&str, &str); 4] = [
    ("prompt-submit", "UserPromptSubmit"),
    ("stop", "Stop"),
    ("stop-failure", "StopFailure"),
    ("notification", "Notification"),
];

/// The most of a client's text kept in a report.
const TEXT_MAX: usize = 2000;

fn text_of(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    s.chars().take(TEXT_MAX).collect()
}

/// The report for one hook (`event` as `task hook` is given it), from its JSON input. None
/// for what says nothing about the turn (an `auth_success` notification, an unknown event).
pub fn from_hook(event: &str, input: &Value, now: DateTime<Utc>) -> Option<Report> {
    let said = match event {
        "prompt-submit" => Said::Working,
        "stop" => Said::Ended,
        "stop-failure" => {
            let details = text_of(&input["error_details"]);
            let last = text_of(&input["last_assistant_message"]);
            Said::Failed {
                error: input["error"].as_str().unwrap_or("unknown").to_string(),
                text: [details, last]
                    .into_iter()
                    .filter(|s| !s.trim().is_empty())
                    .collect::<Vec<_>>()
                    .join("\n"),
            }
        }
        "notification" => match input["notification_type"].as_str().unwrap_or("") {
            "permission_prompt" | "elicitation_dialog" => Said::Waiting {
                what: input["notification_type"].as_str().unwrap_or("").to_string(),
                text: text_of(&input["message"]),
            },
            // "Claude is waiting for your input": the turn has ended (the Stop came first).
            "idle_prompt" => Said::Ended,
            _ => return None,
        },
        _ => return None,
    };
    Some(Report {
        said,
        at: now,
        session: input["session_id"].as_str().map(str::to_string),
    })
}

/// Whether a new report should wake the supervisor at once (the agent cannot go on by
/// itself), rather than wait for its next look.
pub fn urgent(r: &Report) -> bool {
    matches!(r.said, Said::Failed { .. } | Said::Waiting { .. })
}

/// A failure that waits for time, not a human: Claude Code's usage and rate limits.
fn is_limit(error: &str) -> bool {
    error == "rate_limit"
}

/// A failure only a human can fix.
fn needs_human(error: &str) -> Option<&'static str> {
    match error {
        "authentication_failed" => Some("login"),
        "billing_error" => Some("billing"),
        _ => None,
    }
}

/// The line a failure or a wait stands for: the client's first non-empty line that says
/// most (a limit's line carries its reset time), or a plain description.
fn line_of(text: &str, fallback: &str) -> String {
    let pick = text
        .lines()
        .find(|l| l.contains("resets") || l.contains("reset at") || l.contains("limit"))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()));
    match pick {
        Some(l) => clean_line(l),
        None => fallback.to_string(),
    }
}

/// What the client is doing, as its screen shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Working on a turn (`esc to interrupt`).
    Busy,
    /// Not working, its input box ready: no dialog is showing (a dialog replaces the box).
    Idle,
    /// Neither recognised.
    Other,
}

/// The activity a screen shows: busy by the runtime's `busy` patterns, idle when its input
/// box is ready. Pure.
pub fn activity(busy: bool, assessed: &crate::core::screen::Screen) -> Activity {
    match (busy, assessed) {
        (true, _) => Activity::Busy,
        (false, crate::core::screen::Screen::Ready) => Activity::Idle,
        _ => Activity::Other,
    }
}

/// What one look at the agent's pane showed, for [`weigh`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub seen: Seen,
    /// None when the pane was not looked at.
    pub activity: Option<Activity>,
}

/// What the supervisor knows of the agent, for [`weigh`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known<'a> {
    /// When it was last started or given its turn back (a resume): a report from before
    /// then is stale.
    pub since: Option<DateTime<Utc>>,
    /// Its conversation id.
    pub session: Option<&'a str>,
    /// The time of a report already set aside (kept in the agent's state).
    pub set_aside: Option<DateTime<Utc>>,
}

/// A report that no longer counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correction {
    pub why: String,
    /// The screen contradicts the report (logged as a warning and an event), rather than
    /// showing a wait that was simply answered.
    pub contradiction: bool,
}

/// The outcome of [`weigh`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weighed {
    /// What the attention decision goes on.
    pub seen: Seen,
    /// The report is set aside from now on, and why.
    pub correction: Option<Correction>,
}

/// Weigh the agent's last report against its screen. Pure.
///
/// - The screen's own finding (a dialog, a limit, the pane gone, no look) stands.
/// - A clear screen with a fresh report of a failure or a wait: the report speaks (a limit
///   whose banner scrolled away, a dialog the patterns do not know).
/// - A report the screen contradicts once settled — a failure with the client busy again,
///   a wait with the input box back, a turn said to be working while the screen is idle
///   (an interrupt runs no `Stop` hook), a turn said to be over while the client is busy —
///   is set aside. A wait followed by work was answered: set aside quietly.
pub fn weigh(report: Option<&Report>, look: &Look, known: &Known<'_>, now: DateTime<Utc>) -> Weighed {
    let keep = Weighed {
        seen: look.seen.clone(),
        correction: None,
    };
    let Some(r) = report.filter(|r| known.set_aside != Some(r.at)) else {
        return keep;
    };
    let set_aside = |why: &str, contradiction: bool| Weighed {
        seen: look.seen.clone(),
        correction: Some(Correction {
            why: why.to_string(),
            contradiction,
        }),
    };
    let correct = |why: &str| set_aside(why, true);
    if known.since.is_some_and(|s| r.at < s) {
        return correct("stale: from before the agent was last started or resumed");
    }
    if let (Some(mine), Some(theirs)) = (known.session, r.session.as_deref()) {
        if mine != theirs {
            return correct("stale: from another conversation than the agent's");
        }
    }
    if look.seen != Seen::Clear {
        return keep;
    }
    let settled = now - r.at >= chrono::Duration::from_std(SETTLE).unwrap_or_default();
    match (&r.said, look.activity) {
        (Said::Waiting { what, .. }, Some(Activity::Busy)) => set_aside(
            &format!("answered: the agent works again after its {}", what.replace('_', " ")),
            false,
        ),
        (Said::Failed { error, .. }, Some(Activity::Busy)) if settled => {
            correct(&format!("the screen shows the agent working again after {error}"))
        }
        (Said::Failed { error, text }, _) if is_limit(error) => Weighed {
            seen: Seen::UsageLimit(line_of(text, "usage limit (told by the client's StopFailure hook)")),
            correction: None,
        },
        (Said::Failed { error, text }, _) if needs_human(error).is_some() => Weighed {
            seen: Seen::Dialog(line_of(
                text,
                &format!("{} needed ({error})", needs_human(error).unwrap_or("")),
            )),
            correction: None,
        },
        (Said::Waiting { what, .. }, Some(Activity::Idle)) if settled => correct(&format!(
            "the screen shows the input ready, no {} dialog",
            what.replace('_', " ")
        )),
        (Said::Waiting { text, .. }, _) => Weighed {
            seen: Seen::Dialog(line_of(text, "a dialog (told by the client's Notification hook)")),
            correction: None,
        },
        (Said::Working, Some(Activity::Idle)) if settled => {
            correct("the screen shows the agent idle (an interrupt runs no Stop hook)")
        }
        (Said::Ended, Some(Activity::Busy)) if settled => {
            correct("the screen shows the agent working (a prompt no hook reported)")
        }
        _ => keep,
    }
}

/// One phrase for status (a column of its own): what the client said and how long ago,
/// and whether the screen's contradiction set it aside.
pub fn describe(r: &Report, set_aside: bool, now: DateTime<Utc>) -> String {
    let ago = format!("{} ago", crate::core::clock::ago((now - r.at).num_seconds()));
    let what = match &r.said {
        Said::Working => "working".to_string(),
        Said::Ended => "ended".to_string(),
        Said::Failed { error, .. } => format!("failed ({error})"),
        Said::Waiting { what, .. } => format!("waiting ({})", what.replace('_', " ")),
    };
    if set_aside {
        format!("{what} {ago}, set aside")
    } else {
        format!("{what} {ago}")
    }
}

#[cfg(test)]
mod tests;
