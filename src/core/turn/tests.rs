use super::*;
use chrono::TimeZone;
use serde_json::json;

fn t(s: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
}

fn report(said: Said, at: i64) -> Report {
    Report {
        said,
        at: t(at),
        session: Some("s1".into()),
    }
}

fn look(seen: Seen, activity: Activity) -> Look {
    Look {
        seen,
        activity: Some(activity),
    }
}

fn none() -> Known<'static> {
    Known::default()
}

fn limit() -> Said {
    Said::Failed {
        error: "rate_limit".into(),
        text: "API Error: 429\nYou've hit your session limit · resets 3pm (UTC)".into(),
    }
}

#[test]
fn hooks_become_reports() {
    let r = from_hook("stop", &json!({"session_id": "s1"}), t(0)).unwrap();
    assert_eq!(r.said, Said::Ended);
    assert_eq!(r.session.as_deref(), Some("s1"));
    assert_eq!(
        from_hook("prompt-submit", &json!({}), t(0)).unwrap().said,
        Said::Working
    );
    let f = from_hook(
        "stop-failure",
        &json!({"error": "rate_limit", "error_details": "429", "last_assistant_message": "You've hit your limit"}),
        t(0),
    )
    .unwrap();
    assert_eq!(
        f.said,
        Said::Failed {
            error: "rate_limit".into(),
            text: "429\nYou've hit your limit".into()
        }
    );
    let w = from_hook(
        "notification",
        &json!({"notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"}),
        t(0),
    )
    .unwrap();
    assert!(matches!(w.said, Said::Waiting { ref what, .. } if what == "permission_prompt"));
    assert_eq!(
        from_hook("notification", &json!({"notification_type": "idle_prompt"}), t(0))
            .unwrap()
            .said,
        Said::Ended
    );
    assert!(from_hook("notification", &json!({"notification_type": "auth_success"}), t(0)).is_none());
    assert!(from_hook("bogus", &json!({}), t(0)).is_none());
    // A huge or odd text is cut, never refused.
    let big = "x".repeat(100_000);
    let f = from_hook(
        "stop-failure",
        &json!({"error_details": big, "last_assistant_message": 7}),
        t(0),
    )
    .unwrap();
    let Said::Failed { error, text } = f.said else { panic!() };
    assert_eq!(error, "unknown");
    assert!(text.len() < 3000, "{}", text.len());
}

#[test]
fn a_limit_whose_banner_scrolled_away_still_pauses() {
    let r = report(limit(), 0);
    let w = weigh(
        Some(&r),
        &look(Seen::Clear, Activity::Idle),
        &Known {
            since: Some(t(-60)),
            session: Some("s1"),
            set_aside: None,
        },
        t(30),
    );
    assert_eq!(
        w.seen,
        Seen::UsageLimit("You've hit your session limit · resets 3pm (UTC)".into())
    );
    assert_eq!(w.correction, None);
    // The screen's own finding stands when it has one.
    let seen = Seen::UsageLimit("You've hit your limit · resets 4pm".into());
    let w = weigh(Some(&r), &look(seen.clone(), Activity::Idle), &none(), t(30));
    assert_eq!(w.seen, seen);
}

#[test]
fn a_wait_is_a_dialog_at_once_and_corrected_when_the_input_is_back() {
    let r = report(
        Said::Waiting {
            what: "permission_prompt".into(),
            text: "Claude needs your permission to use Bash".into(),
        },
        0,
    );
    // Right away, even if the screen has not drawn it yet.
    let w = weigh(Some(&r), &look(Seen::Clear, Activity::Idle), &none(), t(1));
    assert_eq!(w.seen, Seen::Dialog("Claude needs your permission to use Bash".into()));
    // Settled, with the input box back: the dialog is gone (answered, or interrupted).
    let w = weigh(Some(&r), &look(Seen::Clear, Activity::Idle), &none(), t(30));
    assert_eq!(w.seen, Seen::Clear);
    assert!(w.correction.unwrap().why.contains("no permission prompt dialog"));
    // Work after a wait: it was answered, not contradicted.
    let w = weigh(Some(&r), &look(Seen::Clear, Activity::Busy), &none(), t(2));
    assert_eq!(w.correction.map(|c| c.contradiction), Some(false));
    // An unknown screen (a dialog the patterns do not know) keeps it.
    let w = weigh(Some(&r), &look(Seen::Clear, Activity::Other), &none(), t(300));
    assert!(matches!(w.seen, Seen::Dialog(_)));
}

#[test]
fn contradictions_are_corrected_once_settled() {
    let working = report(Said::Working, 0);
    let idle = look(Seen::Clear, Activity::Idle);
    assert_eq!(weigh(Some(&working), &idle, &none(), t(2)).correction, None);
    let w = weigh(Some(&working), &idle, &none(), t(11));
    let c = w.correction.unwrap();
    assert!(c.why.contains("interrupt") && c.contradiction, "{c:?}");
    let ended = report(Said::Ended, 0);
    let busy = look(Seen::Clear, Activity::Busy);
    assert!(weigh(Some(&ended), &busy, &none(), t(11)).correction.is_some());
    assert!(
        weigh(Some(&report(limit(), 0)), &busy, &none(), t(11))
            .correction
            .is_some()
    );
    // Agreement is no correction.
    assert_eq!(weigh(Some(&ended), &idle, &none(), t(100)).correction, None);
    assert_eq!(weigh(Some(&working), &busy, &none(), t(100)).correction, None);
    // A report set aside no longer speaks.
    let c = report(limit(), 0);
    let known = Known {
        set_aside: Some(t(0)),
        ..Known::default()
    };
    assert_eq!(
        weigh(Some(&c), &idle, &known, t(100)),
        Weighed {
            seen: Seen::Clear,
            correction: None
        }
    );
}

#[test]
fn stale_reports_are_set_aside() {
    let r = report(limit(), 0);
    let idle = look(Seen::Clear, Activity::Idle);
    let w = weigh(
        Some(&r),
        &idle,
        &Known {
            since: Some(t(5)),
            session: Some("s1"),
            set_aside: None,
        },
        t(6),
    );
    assert_eq!(w.seen, Seen::Clear);
    assert!(w.correction.unwrap().why.starts_with("stale"));
    let w = weigh(
        Some(&r),
        &idle,
        &Known {
            since: None,
            session: Some("s2"),
            set_aside: None,
        },
        t(6),
    );
    assert!(w.correction.unwrap().why.contains("another conversation"));
}

#[test]
fn a_login_failure_needs_a_human() {
    let r = report(
        Said::Failed {
            error: "authentication_failed".into(),
            text: String::new(),
        },
        0,
    );
    let w = weigh(Some(&r), &look(Seen::Clear, Activity::Idle), &none(), t(1));
    assert_eq!(w.seen, Seen::Dialog("login needed (authentication_failed)".into()));
    let other = report(
        Said::Failed {
            error: "server_error".into(),
            text: "x".into(),
        },
        0,
    );
    assert_eq!(
        weigh(Some(&other), &look(Seen::Clear, Activity::Idle), &none(), t(1)).seen,
        Seen::Clear
    );
}

#[test]
fn described_for_status() {
    let r = report(Said::Ended, 0);
    assert_eq!(describe(&r, false, t(12)), "ended 12s ago");
    assert_eq!(
        describe(&report(Said::Working, 0), true, t(120)),
        "working 2m ago, set aside"
    );
}
