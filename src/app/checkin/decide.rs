//! The decision, the check-in's pure middle: from what the locked evaluation found, skip,
//! record without telling anyone, or deliver; and, when it delivers, whether the PM can
//! take a message at all.

use crate::core::attention::Kind;
use crate::core::checkin::signals::Evaluation;
use crate::core::handoff::Loaded;
use crate::core::report::{Outcome, Report, Trigger};

use super::snapshot::PmPane;

/// What a check-in does with its plan.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Decision {
    /// A scheduled check-in with nothing to say: not sent, not recorded (the next time is
    /// saved).
    Skip(&'static str),
    /// The PM has finished (COMPLETE or BLOCKED) and no agent reported since: record
    /// everything, tell no one.
    RecordOnly(String),
    /// Tell the PM.
    Deliver,
}

/// Decide from the trigger, whether the schedule may stay quiet, the new handoffs and the
/// evaluation. Pure.
pub(super) fn decide(trigger: Trigger, quiet: bool, new: &[Loaded], ev: &Evaluation) -> Decision {
    if trigger == Trigger::Schedule && quiet && new.is_empty() && ev.signals.is_empty() {
        return Decision::Skip("nothing new");
    }
    match super::undeliverable(new, ev.phase) {
        Some(why) => Decision::RecordOnly(why),
        None => Decision::Deliver,
    }
}

/// The PM's pane and runtime when it can take a check-in now; else why not, as the
/// delivery's report (nothing is typed): not running, paused by a usage limit (it would
/// spend the message on another refusal, and hears everything once resumed), or at a
/// dialog only a human can answer. Pure.
pub(super) fn pm_pane<'a>(
    pm: &'a Option<PmPane>,
    task: &str,
    bytes: usize,
) -> std::result::Result<(&'a str, Option<&'a str>), Report> {
    let reason = match pm {
        None => format!("the PM is not running; start it with `task start {task}`"),
        Some((_, _, Some(at))) if at.resumed_at.is_none() => match at.kind {
            Kind::Paused => format!(
                "the PM is paused by a usage limit until {}; the check-in waits for it to resume",
                at.resets_at
                    .map(crate::core::clock::local_time)
                    .unwrap_or_else(|| "?".into())
            ),
            Kind::NeedsHuman => format!(
                "the PM waits for a human ({} \"{}\"); the check-in is delivered once that is answered",
                at.reason, at.line
            ),
        },
        Some((pane, runtime, _)) => return Ok((pane, runtime.as_deref())),
    };
    Err(Report {
        outcome: Outcome::Failed,
        reason,
        enters: 0,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::attention::Attention;
    use crate::core::checkin::signals::{Signal, SignalKind};
    use crate::core::model::Phase;

    fn ev(phase: Phase, signals: usize) -> Evaluation {
        Evaluation {
            signals: (0..signals)
                .map(|_| Signal {
                    kind: SignalKind::Blocked,
                    agent: "dev".into(),
                    file: None,
                    text: "agent died".into(),
                })
                .collect(),
            phase,
            refused_moves: Vec::new(),
            rejections: Default::default(),
        }
    }

    #[test]
    fn a_quiet_schedule_skips_a_finished_task_records_and_anything_else_is_told() {
        let working = ev(Phase::Developing, 0);
        assert_eq!(
            decide(Trigger::Schedule, true, &[], &working),
            Decision::Skip("nothing new")
        );
        assert_eq!(
            decide(Trigger::Schedule, false, &[], &working),
            Decision::Deliver,
            "quiet_checkins: false"
        );
        assert_eq!(
            decide(Trigger::Manual, true, &[], &working),
            Decision::Deliver,
            "asked for"
        );
        assert_eq!(
            decide(Trigger::Schedule, true, &[], &ev(Phase::Developing, 1)),
            Decision::Deliver,
            "a signal is news"
        );
        assert!(matches!(
            decide(Trigger::Schedule, false, &[], &ev(Phase::Complete, 0)),
            Decision::RecordOnly(_)
        ));
    }

    #[test]
    fn a_pm_not_running_paused_or_at_a_dialog_gets_nothing_typed() {
        let at = |kind: Kind, resumed: bool| Attention {
            kind,
            reason: "permission prompt".into(),
            line: "Do you want to proceed?".into(),
            since: chrono::Utc::now(),
            escalated_at: None,
            resets_at: None,
            reset_parsed: false,
            resumed_at: resumed.then(chrono::Utc::now),
            announced: false,
        };
        let none: Option<PmPane> = None;
        let r = pm_pane(&none, "t1", 10).unwrap_err();
        assert!(
            r.reason.contains("task start t1") && r.outcome == Outcome::Failed && r.bytes == 10,
            "{r:?}"
        );
        let paused = Some(("%1".to_string(), None, Some(at(Kind::Paused, false))));
        assert!(pm_pane(&paused, "t1", 1).unwrap_err().reason.contains("usage limit"));
        let dialog = Some(("%1".to_string(), None, Some(at(Kind::NeedsHuman, false))));
        assert!(
            pm_pane(&dialog, "t1", 1)
                .unwrap_err()
                .reason
                .contains("waits for a human")
        );
        let resumed = Some((
            "%1".to_string(),
            Some("claude".to_string()),
            Some(at(Kind::Paused, true)),
        ));
        assert_eq!(pm_pane(&resumed, "t1", 1).unwrap(), ("%1", Some("claude")));
    }
}
