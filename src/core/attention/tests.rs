//! Unit tests of the attention decisions and the reset-time parser.

use super::*;
use crate::core::screen::PatternSpec;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn claude() -> Patterns {
    crate::io::runtime::resolve_builtin("claude").unwrap().patterns
}

fn secs(n: u64) -> Timing {
    Timing {
        attention_after: Duration::from_secs(n),
        resume_delay: Duration::from_secs(60),
    }
}

#[test]
fn claude_code_reset_formats_are_read() {
    let since = t("2026-11-23T13:10:00Z");
    let utc = Some(chrono_tz::UTC);
    for (line, want) in [
        (
            "You've hit your session limit · resets 3pm (UTC)",
            "2026-11-23T15:00:00Z",
        ),
        (
            "You've hit your session limit · resets 3:30pm (UTC)",
            "2026-11-23T15:30:00Z",
        ),
        // London is UTC+0 in November; New York UTC-5; Tokyo UTC+9 (next morning).
        (
            "You've hit your usage limit · resets 3pm (Europe/London)",
            "2026-11-23T15:00:00Z",
        ),
        (
            "You've hit your usage limit · resets 9:45am (America/New_York)",
            "2026-11-23T14:45:00Z",
        ),
        (
            "You've hit your weekly limit · resets 8am (Asia/Tokyo)",
            "2026-11-23T23:00:00Z",
        ),
        (
            "You've hit your weekly limit · resets Nov 28, 3pm (UTC)",
            "2026-11-28T15:00:00Z",
        ),
        (
            "You've hit your Opus limit · resets Nov 28, 3:30pm (Asia/Tokyo)",
            "2026-11-28T06:30:00Z",
        ),
        (
            "You've hit your weekly limit · resets Jan 2, 2027, 3pm (UTC)",
            "2027-01-02T15:00:00Z",
        ),
        // ICU's narrow no-break space and upper case survive Claude Code's lower-casing.
        (
            "You've hit your session limit · resets 3:30\u{202f}PM (UTC)",
            "2026-11-23T15:30:00Z",
        ),
        (
            "You've hit your session limit · resets 3 PM (UTC)",
            "2026-11-23T15:00:00Z",
        ),
        // The wording of older Claude Code builds.
        (
            "Claude usage limit reached. Your limit will reset at 5pm (UTC).",
            "2026-11-23T17:00:00Z",
        ),
        // Relative forms.
        (
            "Fast limit reached and temporarily disabled · resets in 2h 30m",
            "2026-11-23T15:40:00Z",
        ),
        ("limit resets in 45 minutes", "2026-11-23T13:55:00Z"),
        // A time of day just passed (printed to the minute, seen a little late) is now, not tomorrow.
        (
            "You've hit your session limit · resets 1:07pm (UTC)",
            "2026-11-23T13:07:00Z",
        ),
        // Earlier than that is tomorrow.
        (
            "You've hit your session limit · resets 1pm (UTC)",
            "2026-11-24T13:00:00Z",
        ),
    ] {
        assert_eq!(parse_reset(line, since, utc), Some(t(want)), "{line}");
    }
    // No zone printed: the given zone (the local one in production) applies.
    assert_eq!(
        parse_reset("resets 3pm", since, Some(chrono_tz::Asia::Tokyo)),
        Some(t("2026-11-24T06:00:00Z"))
    );
    for bad in [
        "API Error: Request rejected (429) · this may be a temporary capacity issue.",
        "You've hit your session limit · resets 3pm (Mars/Olympus)",
        "resets 13pm (UTC)",
        "You've hit your monthly spend limit",
    ] {
        assert_eq!(parse_reset(bad, since, utc), None, "{bad}");
    }
}

#[test]
fn a_usage_limit_is_current_until_the_resume_message_shows_below_it() {
    let p = claude();
    let marker = RESUME_TEMPLATE.trim();
    let limited = "● Working on it\n  ⎿  You've hit your session limit · resets 3pm (Europe/London)\n     /upgrade to increase your usage limit.\n\n────\n❯\u{a0}\n────\n";
    assert_eq!(
        observe(limited, &p, marker),
        Seen::UsageLimit("⎿ You've hit your session limit · resets 3pm (Europe/London)".into())
    );
    let resumed = format!("{limited}> {marker}\n● Carrying on\n❯\u{a0}\n");
    assert_eq!(observe(&resumed, &p, marker), Seen::Clear);
    let again = format!("{resumed}  ⎿  You've hit your weekly limit · resets Nov 28, 3pm (UTC)\n❯\u{a0}\n");
    assert!(matches!(observe(&again, &p, marker), Seen::UsageLimit(l) if l.contains("weekly")));
    let api = "  ⎿  API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit\n❯\u{a0}\n";
    assert!(matches!(observe(api, &p, marker), Seen::UsageLimit(l) if l.starts_with("⎿ API Error")));
    // As Claude Code 2.1.197 draws it: a blank line before the question.
    let dialog = " Bash command\n\n   curl -s http://127.0.0.1:9/\n\n This command requires approval\n\n Do you want to proceed?\n ❯ 1. Yes\n\n Esc to cancel · Tab to amend · ctrl+e to explain\n";
    assert_eq!(
        observe(dialog, &p, marker),
        Seen::Dialog("Do you want to proceed?".into())
    );
    assert_eq!(classify("Do you want to proceed?"), "permission prompt");
    assert_eq!(classify("❯ 1. Yes, I trust this folder"), "trust prompt");
    assert_eq!(
        classify("Detected a custom API key in your environment"),
        "API key prompt"
    );
    assert_eq!(observe("❯\u{a0}\n", &p, marker), Seen::Clear);
    // Quoted far up the screen, or while the agent works, a limit is not a pause.
    let scrolled = format!("{limited}{}", "● more output\n".repeat(LIMIT_WINDOW));
    assert_eq!(observe(&scrolled, &p, marker), Seen::Clear);
    let retrying = format!("{limited}✻ Retrying in 5s · attempt 3/10 (esc to interrupt)\n");
    assert_eq!(observe(&retrying, &p, marker), Seen::Clear);
    let menu = format!(
        "{}\n What do you want to do?\n ❯ 1. Stop and wait for limit to reset\n   2. Upgrade your plan\n",
        limited.trim_end()
    );
    assert!(matches!(observe(&menu, &p, marker), Seen::UsageLimit(_)));
    assert!(p.usage_limit_menu(&menu) && !p.usage_limit_menu(limited));
    let none = PatternSpec::default().compile().unwrap();
    assert_eq!(
        observe(limited, &none, marker),
        Seen::Clear,
        "a runtime without patterns never pauses"
    );
}

#[test]
fn control_characters_never_reach_the_line() {
    assert_eq!(
        clean_line("\u{1b}[31mDo you\twant to proceed?\u{7}\nsecond"),
        "[31mDo you want to proceed?"
    );
}

#[test]
fn a_dialog_escalates_once_after_the_grace_then_clears_and_can_escalate_again() {
    let t0 = t("2026-11-23T09:00:00Z");
    let s = |n: i64| t0 + chrono::Duration::seconds(n);
    let dialog = Seen::Dialog("Do you want to proceed?".into());
    let tm = secs(120);
    let d = decide(None, &dialog, None, s(0), &tm);
    assert_eq!(d.actions, vec![Action::Began]);
    let ep = d.next.unwrap();
    assert_eq!(
        (ep.kind, ep.reason.as_str(), ep.since),
        (Kind::NeedsHuman, "permission prompt", s(0))
    );
    let d = decide(Some(&ep), &dialog, None, s(119), &tm);
    assert!(d.actions.is_empty(), "within the grace");
    let d = decide(Some(&ep), &dialog, None, s(120), &tm);
    assert_eq!(d.actions, vec![Action::Escalate]);
    let ep = d.next.unwrap();
    assert_eq!(ep.escalated_at, Some(s(120)));
    for n in [125, 600, 86400] {
        let d = decide(Some(&ep), &dialog, None, s(n), &tm);
        assert!(d.actions.is_empty(), "once per episode");
        assert_eq!(d.next.as_ref(), Some(&ep));
    }
    let d = decide(Some(&ep), &Seen::Unknown, None, s(900), &tm);
    assert_eq!(
        (d.next.as_ref(), d.actions.len()),
        (Some(&ep), 0),
        "an unreachable host forgets nothing"
    );
    let d = decide(Some(&ep), &Seen::Clear, None, s(901), &tm);
    assert_eq!((d.next, d.actions), (None, vec![Action::Cleared]));
    let d = decide(None, &dialog, None, s(1000), &tm);
    let ep2 = d.next.unwrap();
    let d = decide(Some(&ep2), &dialog, None, s(1120), &tm);
    assert_eq!(d.actions, vec![Action::Escalate], "a new episode escalates again");
    let d = decide(Some(&ep2), &Seen::Gone, None, s(1121), &tm);
    assert_eq!(d.actions, vec![Action::Cleared], "a dead pane ends it");
    assert_eq!(decide(None, &Seen::Clear, None, s(0), &tm).next, None);
}

#[test]
fn a_usage_limit_pauses_resumes_after_its_reset_and_escalates_only_when_it_outlives_it() {
    let t0 = t("2026-11-23T14:20:00Z");
    let m = |n: i64| t0 + chrono::Duration::minutes(n);
    let tm = secs(120);
    let seen = Seen::UsageLimit("You've hit your session limit · resets 3pm (UTC)".into());
    let d = decide(None, &seen, None, m(0), &tm);
    assert_eq!(d.actions, vec![Action::Began]);
    let ep = d.next.unwrap();
    assert_eq!(
        (ep.kind, ep.resets_at, ep.reset_parsed),
        (Kind::Paused, Some(t("2026-11-23T15:00:00Z")), true)
    );
    // Paused: no escalation however long the grace for dialogs is exceeded.
    assert!(decide(Some(&ep), &seen, None, m(40), &tm).actions.is_empty());
    // The reset plus a minute: resume (again each look until delivered).
    assert_eq!(decide(Some(&ep), &seen, None, m(41), &tm).actions, vec![Action::Resume]);
    let mut resumed = ep.clone();
    resumed.resumed_at = Some(m(41));
    assert!(
        decide(Some(&resumed), &seen, Some(m(41)), m(50), &tm)
            .actions
            .is_empty()
    );
    // Still limited 15 minutes after the reset: a human.
    let d = decide(Some(&resumed), &seen, Some(m(41)), m(55), &tm);
    assert_eq!(d.actions, vec![Action::Escalate]);
    assert!(
        decide(d.next.as_ref(), &seen, Some(m(41)), m(90), &tm)
            .actions
            .is_empty()
    );
    // Resumed and gone: the episode ends.
    assert_eq!(
        decide(Some(&resumed), &Seen::Clear, Some(m(41)), m(42), &tm).actions,
        vec![Action::Cleared]
    );
}

#[test]
fn an_unreadable_reset_is_the_default_pause_and_a_limit_back_at_once_is_not_nudged_at_once() {
    let t0 = t("2026-11-23T14:20:00Z");
    let m = |n: i64| t0 + chrono::Duration::minutes(n);
    let tm = secs(120);
    let api = Seen::UsageLimit("API Error: Request rejected (429) · rate limited".into());
    let ep = decide(None, &api, None, m(0), &tm).next.unwrap();
    assert_eq!((ep.resets_at, ep.reset_parsed), (Some(m(60)), false));
    assert!(decide(Some(&ep), &api, None, m(60), &tm).actions.is_empty());
    assert_eq!(decide(Some(&ep), &api, None, m(61), &tm).actions, vec![Action::Resume]);
    // A stale reset (long past when first seen) is not believed.
    let stale = Seen::UsageLimit("You've hit your weekly limit · resets Nov 20, 3pm (UTC)".into());
    let ep = decide(None, &stale, None, m(0), &tm).next.unwrap();
    assert_eq!((ep.resets_at, ep.reset_parsed), (Some(m(60)), false));
    // A limit on screen right after a resume (the look may be older than the resume) is
    // not a new episode yet; the same look after the settle time is.
    let seen = Seen::UsageLimit("You've hit your session limit · resets 2:20pm (UTC)".into());
    let settle = chrono::Duration::from_std(RESUME_SETTLE).unwrap();
    let early = decide(
        None,
        &seen,
        Some(m(0)),
        m(0) + settle - chrono::Duration::seconds(1),
        &tm,
    );
    assert_eq!((early.next, early.actions), (None, vec![]));
    assert_eq!(
        decide(None, &seen, Some(m(0)), m(0) + settle, &tm).actions,
        vec![Action::Began]
    );
    // The limit came straight back after a resume at m(0): the next nudge waits 15 minutes.
    let ep = decide(None, &seen, Some(m(0)), m(1), &tm).next.unwrap();
    assert_eq!(ep.resets_at, Some(m(0)));
    assert!(decide(Some(&ep), &seen, Some(m(0)), m(5), &tm).actions.is_empty());
    assert_eq!(
        decide(Some(&ep), &seen, Some(m(0)), m(15), &tm).actions,
        vec![Action::Resume, Action::Escalate]
    );
}

#[test]
fn a_dialog_replacing_a_pause_is_a_new_episode() {
    let t0 = t("2026-11-23T14:20:00Z");
    let tm = secs(0);
    let ep = decide(None, &Seen::UsageLimit("usage limit reached".into()), None, t0, &tm)
        .next
        .unwrap();
    let d = decide(
        Some(&ep),
        &Seen::Dialog("Do you want to proceed?".into()),
        None,
        t0,
        &tm,
    );
    assert_eq!(d.actions, vec![Action::Cleared, Action::Began, Action::Escalate]);
    assert_eq!(d.next.unwrap().kind, Kind::NeedsHuman);
}

#[test]
fn old_state_files_load_without_episodes() {
    let a: crate::core::model::AgentState = serde_json::from_str(r#"{"role":"spoke","status":"running"}"#).unwrap();
    assert_eq!((a.attention, a.last_resume), (None, None));
}
