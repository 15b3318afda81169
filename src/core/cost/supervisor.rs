//! The supervisor's own spend (pure): every check-in and message it delivers goes into
//! the PM's (or an agent's) context, so its bytes are counted — as tokens, estimated at
//! [`BYTES_PER_TOKEN`] bytes each, since the supervisor never sees the model's count —
//! with how often it checked in and how many scheduled check-ins it kept quiet. Counted
//! from events.jsonl incrementally ([`Tally`], saved with the read offset), because the
//! log grows with every check-in and is read at every check-in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bytes per token for the estimate (English text and markdown run ~4).
pub const BYTES_PER_TOKEN: u64 = 4;

/// One delivery or skip by the supervisor, as the event log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// A check-in delivered: its bytes, the PM's tokens before it, and the PM's context
    /// (its current conversation's tokens) before it, when known.
    Checkin(u64, Option<u64>, Option<u64>),
    /// Another message delivered, with its bytes.
    Message(u64),
    /// A scheduled check-in skipped as quiet.
    SkippedQuiet,
}

impl Sent {
    /// Whether an event of `kind` can say anything here: the log is mostly other kinds,
    /// whose details need not be read at all.
    pub fn counts(kind: &str) -> bool {
        matches!(kind, "checkin" | "supervisor_message" | "resumed" | "checkin_skipped")
    }

    /// What an event of `kind` with `data` says, if it is one of these.
    pub fn from_event(kind: &str, data: &Value) -> Option<Sent> {
        Sent::from_figures(kind, &Figures::of(data))
    }

    /// What an event of `kind` whose details say `f` says, if it is one of these.
    pub fn from_figures(kind: &str, f: &Figures) -> Option<Sent> {
        let bytes = f.bytes.unwrap_or(0);
        let delivered = f.outcome.as_deref() == Some("delivered");
        Some(match kind {
            "checkin" if delivered => Sent::Checkin(bytes, f.pm_tokens, f.pm_context),
            // Budget wrap-ups, and the resume message after a usage limit.
            "supervisor_message" | "resumed" if delivered => Sent::Message(bytes),
            "checkin_skipped" if f.why.as_deref() == Some("nothing new") => Sent::SkippedQuiet,
            _ => return None,
        })
    }
}

/// The details of an event that [`Sent`] reads, and nothing else: the log is read at every
/// check-in, and a check-in event's file and signal lists need not be built to be skipped.
#[derive(Debug, Default, Deserialize)]
pub struct Figures<'a> {
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default, borrow)]
    outcome: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    pm_tokens: Option<u64>,
    #[serde(default)]
    pm_context: Option<u64>,
    #[serde(default, borrow)]
    why: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Figures<'a> {
    /// Read from an event's details already parsed; a field of another type is absent.
    pub fn of(data: &'a Value) -> Figures<'a> {
        let text = |k: &str| data[k].as_str().map(std::borrow::Cow::Borrowed);
        Figures {
            bytes: data["bytes"].as_u64(),
            outcome: text("outcome"),
            pm_tokens: data["pm_tokens"].as_u64(),
            pm_context: data["pm_context"].as_u64(),
            why: text("why"),
        }
    }
}

/// Running counts from the event log, with how far it was read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Bytes of events.jsonl counted (always at a line end).
    pub offset: u64,
    /// Check-ins delivered.
    pub checkins: u64,
    /// Their bytes.
    pub checkin_bytes: u64,
    /// Other messages delivered.
    pub messages: u64,
    /// Their bytes.
    pub message_bytes: u64,
    /// Scheduled check-ins skipped as quiet.
    pub skipped_quiet: u64,
    /// When the first check-in was delivered.
    pub first_checkin: Option<DateTime<Utc>>,
    /// The PM's tokens when it was.
    pub pm_at_first: Option<u64>,
    /// The PM's context at each check-in delivered (where known), oldest first; at most
    /// [`CONTEXTS_KEPT`], halved by keeping every other one when full, so a long run's
    /// shape stays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pm_contexts: Vec<u64>,
}

/// How many PM context figures a tally keeps.
pub const CONTEXTS_KEPT: usize = 512;

/// The PM's context per check-in, early in the run and lately: the mean of the first and
/// of the last tenth of the figures (at least one each), and their ratio. A PM whose
/// conversation only grows shows a ratio that grows with the run; rotation keeps it near
/// one. `None` with fewer than two figures. Pure.
pub fn context_trend(contexts: &[u64]) -> Option<(u64, u64, f64)> {
    if contexts.len() < 2 {
        return None;
    }
    let n = (contexts.len() / 10).max(1);
    let mean = |xs: &[u64]| xs.iter().sum::<u64>() / xs.len() as u64;
    let first = mean(&contexts[..n]);
    let last = mean(&contexts[contexts.len() - n..]);
    Some((first, last, last as f64 / first.max(1) as f64))
}

impl Tally {
    /// Count one.
    pub fn add(&mut self, at: DateTime<Utc>, s: Sent) {
        match s {
            Sent::Checkin(b, pm, context) => {
                if self.first_checkin.is_none() {
                    self.first_checkin = Some(at);
                    self.pm_at_first = pm;
                }
                self.checkins += 1;
                self.checkin_bytes += b;
                if let Some(c) = context {
                    if self.pm_contexts.len() >= CONTEXTS_KEPT {
                        let halved: Vec<u64> = self.pm_contexts.iter().copied().step_by(2).collect();
                        self.pm_contexts = halved;
                    }
                    self.pm_contexts.push(c);
                }
            }
            Sent::Message(b) => {
                self.messages += 1;
                self.message_bytes += b;
            }
            Sent::SkippedQuiet => self.skipped_quiet += 1,
        }
    }

    /// The figures as shown, at `now`, with the PM's tokens now (when known).
    pub fn spend(&self, now: DateTime<Utc>, pm_now: Option<u64>) -> SupervisorSpend {
        SupervisorSpend {
            checkins_delivered: self.checkins,
            checkin_bytes: self.checkin_bytes,
            messages_delivered: self.messages,
            message_bytes: self.message_bytes,
            estimated_tokens: (self.checkin_bytes + self.message_bytes).div_ceil(BYTES_PER_TOKEN),
            skipped_quiet: self.skipped_quiet,
            checkins_per_hour: self.first_checkin.map(|f| {
                // At least a minute: one check-in a moment ago is not 3,600 an hour.
                let hours = (now.signed_duration_since(f).num_seconds().max(60)) as f64 / 3600.0;
                self.checkins as f64 / hours
            }),
            pm_tokens_per_checkin: pm_now.and_then(|n| pm_tokens_per_checkin(self.pm_at_first, n, self.checkins)),
            pm_context_trend: context_trend(&self.pm_contexts).map(|(first, last, ratio)| ContextTrend {
                first,
                last,
                ratio: (ratio * 100.0).round() / 100.0,
            }),
        }
    }
}

/// What the supervisor's own messages cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SupervisorSpend {
    /// Check-ins delivered to the PM.
    pub checkins_delivered: u64,
    /// Their bytes.
    pub checkin_bytes: u64,
    /// Other messages the supervisor delivered (budget wrap-ups, resumes after a usage limit).
    pub messages_delivered: u64,
    /// Their bytes.
    pub message_bytes: u64,
    /// All of it in tokens, estimated at [`BYTES_PER_TOKEN`] bytes a token.
    pub estimated_tokens: u64,
    /// Scheduled check-ins not sent because nothing was new.
    pub skipped_quiet: u64,
    /// Check-ins delivered per hour since the first one (`null` before any).
    pub checkins_per_hour: Option<f64>,
    /// The PM's tokens since the first check-in it was delivered, per check-in: what the
    /// schedule costs in the PM's own answers (`null` when unknown or before any).
    pub pm_tokens_per_checkin: Option<u64>,
    /// The PM's context per check-in, early and lately (`null` before two are known).
    pub pm_context_trend: Option<ContextTrend>,
}

/// See [`context_trend`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextTrend {
    /// Mean PM context (tokens) over the first tenth of the check-ins.
    pub first: u64,
    /// Over the last tenth.
    pub last: u64,
    /// `last / first`, to two decimals.
    pub ratio: f64,
}

/// What each check-in costs in the PM's own tokens: its tokens now less its tokens when
/// the first check-in was delivered (recorded in that check-in's event), per check-in
/// delivered. The PM's start-up is left out: it is not the schedule's cost.
pub fn pm_tokens_per_checkin(at_first: Option<u64>, now: u64, delivered: u64) -> Option<u64> {
    let first = at_first?;
    (delivered > 0).then(|| now.saturating_sub(first) / delivered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_supervisor_spend_counts_bytes_rate_quiet_skips_and_the_pms_share() {
        let t0: DateTime<Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
        let h = chrono::Duration::minutes(30);
        let ev = [
            (
                t0,
                "checkin",
                json!({"outcome": "delivered", "bytes": 400, "pm_tokens": 5000}),
            ),
            (t0, "checkin", json!({"outcome": "failed", "bytes": 400})),
            (t0 + h, "checkin_skipped", json!({"why": "nothing new"})),
            (
                t0 + h,
                "checkin_skipped",
                json!({"why": "the PM declared the task COMPLETE"}),
            ),
            (
                t0 + h,
                "checkin",
                json!({"outcome": "delivered", "bytes": 401, "pm_tokens": 7000}),
            ),
            (
                t0 + h,
                "supervisor_message",
                json!({"outcome": "delivered", "bytes": 99}),
            ),
            (t0 + h, "spawn", json!({})),
        ];
        let mut t = Tally::default();
        for (at, kind, data) in &ev {
            if let Some(s) = Sent::from_event(kind, data) {
                t.add(*at, s);
            }
        }
        let s = t.spend(t0 + h + h, Some(9000));
        assert_eq!(
            (
                s.checkins_delivered,
                s.checkin_bytes,
                s.messages_delivered,
                s.skipped_quiet
            ),
            (2, 801, 1, 1)
        );
        assert_eq!(s.estimated_tokens, 225);
        assert_eq!(s.checkins_per_hour, Some(2.0));
        assert_eq!(s.pm_tokens_per_checkin, Some(2000), "(9000 - 5000) / 2");
        assert_eq!(t.spend(t0, None).pm_tokens_per_checkin, None);
        assert_eq!(
            pm_tokens_per_checkin(None, 9000, 2),
            None,
            "no figure from before it was recorded"
        );
        assert_eq!(pm_tokens_per_checkin(Some(5000), 9000, 0), None);
    }

    #[test]
    fn the_pms_context_per_checkin_is_compared_early_and_late() {
        assert_eq!(context_trend(&[5]), None);
        assert_eq!(context_trend(&[1000, 3000]), Some((1000, 3000, 3.0)));
        // Twenty figures: the first two against the last two.
        let grows: Vec<u64> = (1..=20).map(|i| i * 1000).collect();
        assert_eq!(context_trend(&grows), Some((1500, 19500, 13.0)));
        let mut t = Tally::default();
        let t0: DateTime<Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
        for i in 0..(CONTEXTS_KEPT as u64 + 10) {
            t.add(t0, Sent::Checkin(10, None, Some(i)));
        }
        t.add(t0, Sent::Checkin(10, None, None));
        assert!(t.pm_contexts.len() <= CONTEXTS_KEPT, "{}", t.pm_contexts.len());
        assert_eq!(t.pm_contexts.first(), Some(&0));
        assert_eq!(t.pm_contexts.last(), Some(&(CONTEXTS_KEPT as u64 + 9)));
        let s = t.spend(t0, None);
        assert!(s.pm_context_trend.unwrap().ratio > 5.0);
    }
}
