//! Unit tests of the check-in's pure parts.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::*;
use crate::core::checkin::SignalKind;
use crate::core::handoff::{Loaded, Status};
use crate::core::model::{self, AgentStatus, Phase, PmState};
use crate::core::protocol::roster::Roster;
use crate::store::task::Task;

fn l(file: &str, text: &str) -> Loaded {
    Loaded::from_text(file, text)
}

fn kinds(ev: &Evaluation) -> Vec<SignalKind> {
    ev.signals.iter().map(|s| s.kind).collect()
}

#[test]
fn appendix_b_sequence_moves_the_phase() {
    let mut st = PmState::default();
    let steps: Vec<(Loaded, Phase, Vec<SignalKind>)> = vec![
        (
            l(
                "pm-20251127-090000.md",
                "# Handoff: pm\n**Target:** explore\n**Status:** IN_PROGRESS\n",
            ),
            Phase::Exploring,
            vec![],
        ),
        (
            l(
                "explore-20251127-093000.md",
                "# Handoff: explore\n**Status:** COMPLETE\n## Completed Work\nFound 3 modules\n",
            ),
            Phase::Exploring,
            vec![SignalKind::Completed],
        ),
        (
            l(
                "pm-20251127-103500.md",
                "# Handoff: pm\n**Target:** dev\n**Status:** IN_PROGRESS\n",
            ),
            Phase::Developing,
            vec![],
        ),
        (
            l("dev-20251127-113000.md", "# Handoff: dev\n**Status:** NEEDS_REVIEW\n"),
            Phase::Developing,
            vec![SignalKind::ReviewRequested],
        ),
        (
            l(
                "pm-20251127-113500.md",
                "# Handoff: pm\n**Target:** review\n**Status:** IN_PROGRESS\n",
            ),
            Phase::Reviewing,
            vec![],
        ),
        (
            l(
                "review-20251127-120000.md",
                "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** REJECTED\n**Recommended Next:** dev\n",
            ),
            Phase::Iterate,
            vec![SignalKind::ReviewRejected],
        ),
        (
            l(
                "pm-20251127-120500.md",
                "# Handoff: pm\n**Target:** dev\n**Status:** IN_PROGRESS\n",
            ),
            Phase::Developing,
            vec![],
        ),
        (
            l(
                "pm-20251127-123000.md",
                "# Handoff: pm\n**Target:** review\n**Status:** IN_PROGRESS\n",
            ),
            Phase::Reviewing,
            vec![],
        ),
        (
            l(
                "review-20251127-125000.md",
                "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** APPROVED\n",
            ),
            Phase::Reviewing,
            vec![SignalKind::Completed],
        ),
        (
            l("pm-20251127-130000.md", "# Handoff: pm\n**Status:** COMPLETE\n"),
            Phase::Complete,
            vec![],
        ),
    ];
    for (h, phase, sigs) in steps {
        let ev = evaluate(
            &st,
            &Roster::builtin("default").unwrap(),
            std::slice::from_ref(&h),
            None,
            Duration::from_secs(1800),
        );
        assert_eq!(ev.phase, phase, "after {}", h.file);
        assert_eq!(kinds(&ev), sigs, "after {}", h.file);
        assert!(ev.refused_moves.is_empty(), "{:?}", ev.refused_moves);
        st.phase = ev.phase;
        st.review_rejections = ev.rejections;
    }
}

#[test]
fn three_rejections_escalate() {
    let mut st = PmState {
        phase: Phase::Reviewing,
        ..Default::default()
    };
    let rej = l(
        "review-20251127-120000.md",
        "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** REJECTED\n**Recommended Next:** dev\n",
    );
    for n in 1..=3 {
        let ev = evaluate(
            &st,
            &Roster::builtin("default").unwrap(),
            std::slice::from_ref(&rej),
            None,
            Duration::from_secs(1800),
        );
        assert_eq!(ev.rejections["dev"], n);
        assert_eq!(
            ev.signals.iter().any(|s| s.kind == SignalKind::RepeatedRejections),
            n >= 3
        );
        st.review_rejections = ev.rejections;
        st.phase = Phase::Reviewing;
    }
}

#[test]
fn blocked_gate_and_no_progress() {
    let st = PmState::default();
    let b = l(
        "dev-20251127-113000.md",
        "# Handoff: dev\n**Status:** BLOCKED\n## Blockers\nNo board.\n## Gates Honored\n- build: FAIL\n",
    );
    let ev = evaluate(
        &st,
        &Roster::builtin("default").unwrap(),
        &[b],
        None,
        Duration::from_secs(1800),
    );
    assert_eq!(kinds(&ev), vec![SignalKind::GateFailed, SignalKind::Blocked]);
    assert_eq!(ev.signals[1].text, "No board.");
    let ev = evaluate(
        &st,
        &Roster::builtin("default").unwrap(),
        &[],
        Some(Duration::from_secs(31 * 60)),
        Duration::from_secs(1800),
    );
    assert_eq!(kinds(&ev), vec![SignalKind::NoProgress]);
    let ev = evaluate(
        &st,
        &Roster::builtin("default").unwrap(),
        &[],
        Some(Duration::from_secs(29 * 60)),
        Duration::from_secs(1800),
    );
    assert!(ev.signals.is_empty());
}

#[test]
fn the_pm_is_told_of_a_called_human_and_a_paused_spoke_once_and_never_quoted_into_a_dialog() {
    use crate::core::attention::{Attention, Kind};
    let t0: DateTime<Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
    let ep = |kind, reason: &str, line: &str, escalated: bool| Attention {
        kind,
        reason: reason.into(),
        line: line.into(),
        since: t0,
        escalated_at: escalated.then_some(t0),
        resets_at: (kind == Kind::Paused).then_some(t0),
        reset_parsed: true,
        resumed_at: None,
        announced: false,
    };
    let mut st = PmState::default();
    for (name, at) in [
        (
            "dev",
            ep(Kind::NeedsHuman, "permission prompt", "Do you want to proceed?", true),
        ),
        (
            "test",
            ep(Kind::NeedsHuman, "trust prompt", "❯ 1. Yes, I trust this folder", true),
        ),
        (
            "review",
            ep(Kind::NeedsHuman, "permission prompt", "Do you want to proceed?", false),
        ),
        (
            "explore",
            ep(Kind::Paused, "usage limit", "You've hit your session limit", false),
        ),
        (
            "pm",
            ep(Kind::Paused, "usage limit", "You've hit your session limit", false),
        ),
    ] {
        st.agents.insert(
            name.into(),
            model::AgentState {
                status: "running".into(),
                attention: Some(at),
                ..Default::default()
            },
        );
    }
    let d = tempfile::tempdir().unwrap();
    let tk = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
    let claude = crate::io::runtime::resolve_builtin("claude").unwrap().patterns;
    let sigs = attention_signals(tk.name.as_str(), &st, Some(&claude));
    let got: Vec<(&str, SignalKind)> = sigs.iter().map(|s| (s.agent.as_str(), s.kind)).collect();
    // Not review (still within its grace), not the PM (it cannot be told while paused).
    assert_eq!(
        got,
        vec![
            ("dev", SignalKind::NeedsHuman),
            ("explore", SignalKind::Paused),
            ("test", SignalKind::NeedsHuman)
        ]
    );
    assert!(
        sigs[0]
            .text
            .starts_with("permission prompt \"Do you want to proceed?\" since"),
        "{}",
        sigs[0].text
    );
    // Quoting this line into the PM's pane would make the PM look like it is at a dialog.
    assert!(sigs[2].text.starts_with("trust prompt since"), "{}", sigs[2].text);
    assert!(
        !sigs[1].text.contains("You've hit"),
        "never quote a limit: {}",
        sigs[1].text
    );
    let ev = Evaluation {
        signals: sigs.clone(),
        phase: Phase::Planning,
        refused_moves: Vec::new(),
        rejections: Default::default(),
    };
    let msg = render(&tk, &st, &[], &ev, t0);
    assert!(msg.contains("- needs a human: dev — permission prompt"), "{msg}");
    assert!(msg.contains("explore running [paused by a usage limit until"), "{msg}");
    for line in msg.lines() {
        assert_eq!(
            crate::core::attention::observe(line, &claude, ""),
            crate::core::attention::Seen::Clear,
            "the check-in must not look like a dialog or a limit: {line}"
        );
    }
    record(&mut st, &[], &ev, t0);
    assert!(
        attention_signals(tk.name.as_str(), &st, Some(&claude)).is_empty(),
        "told once per episode"
    );
}

#[test]
fn a_terminal_handoff_ends_a_spokes_run() {
    let after = |agent: &str, current: &str, status: Status| status_after(agent, &current.into(), status);
    assert_eq!(after("explore", "running", Status::Complete), Some(AgentStatus::Done));
    assert_eq!(after("test", "running", Status::Blocked), Some(AgentStatus::Blocked));
    assert_eq!(
        after("dev", "unknown", Status::NeedsReview),
        Some(AgentStatus::NeedsReview)
    );
    assert_eq!(
        after("dev", "", Status::Complete),
        Some(AgentStatus::Done),
        "an old file's empty status"
    );
    assert_eq!(after("dev", "running", Status::InProgress), None);
    assert_eq!(after("dev", "dead", Status::Complete), None, "a death stays visible");
    assert_eq!(after("dev", "stopped", Status::Complete), None);
    assert_eq!(after("pm", "running", Status::Complete), None, "the PM is not a spoke");
}

#[test]
fn the_agent_list_reflects_the_handoffs_it_reports() {
    let t0: DateTime<Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
    let mut st = PmState::default();
    for (name, role) in [("pm", "hub"), ("explore", "spoke"), ("dev", "spoke")] {
        st.agents.insert(
            name.into(),
            model::AgentState {
                role: role.into(),
                status: "running".into(),
                started_at: Some(t0),
                ..Default::default()
            },
        );
    }
    let mut explore = l(
        "explore-20251127-093000.md",
        "# Handoff: explore\n**Status:** COMPLETE\n## Completed Work\nFound 3 modules\n",
    );
    explore.mtime_ns = (t0 + chrono::Duration::minutes(30)).timestamp_nanos_opt().unwrap();
    // dev was spawned again at 09:40: its 09:35 report belongs to the run before.
    st.agents.get_mut("dev").unwrap().started_at = Some(t0 + chrono::Duration::minutes(40));
    let mut dev = l("dev-20251127-093500.md", "# Handoff: dev\n**Status:** COMPLETE\n");
    dev.mtime_ns = (t0 + chrono::Duration::minutes(35)).timestamp_nanos_opt().unwrap();
    let new = vec![explore, dev];
    apply_handoffs(&mut st, &new, t0 + chrono::Duration::minutes(45));
    assert_eq!(st.agents["explore"].status, AgentStatus::Done);
    assert_eq!(st.agents["explore"].last_status, Some(Status::Complete));
    assert_eq!(st.agents["dev"].status, AgentStatus::Running, "the new run goes on");
    assert_eq!(st.agents["pm"].status, AgentStatus::Running);

    let d = tempfile::tempdir().unwrap();
    let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
    let ev = evaluate(
        &st,
        &Roster::builtin("default").unwrap(),
        &new,
        None,
        Duration::from_secs(1800),
    );
    let msg = render(&task, &st, &new, &ev, t0);
    let agents = msg.lines().find(|l| l.starts_with("Agents:")).unwrap();
    assert_eq!(
        agents, "Agents: dev running (last handoff COMPLETE), explore done, pm running",
        "{msg}"
    );
}

#[test]
fn a_handoff_gets_one_lineage_record_however_often_its_amended_file_is_recorded() {
    use crate::core::handoff::{Candidate, Seen};
    let t0: DateTime<Utc> = "2025-11-27T11:30:00Z".parse().unwrap();
    let t1 = t0 + chrono::Duration::minutes(10);
    let ev = Evaluation {
        signals: Vec::new(),
        phase: Phase::Developing,
        refused_moves: Vec::new(),
        rejections: Default::default(),
    };
    let cand = |l: Loaded, seen| Candidate {
        sha256: l.sha256.clone(),
        loaded: l,
        seen,
    };
    let files = |st: &PmState| st.lineage.iter().map(|e| e.file.clone()).collect::<Vec<_>>();
    let mut st = PmState::default();
    let first = l("dev-20251127-113000.md", "# Handoff: dev\n**Status:** IN_PROGRESS\n");
    record(&mut st, &[cand(first, Seen::New)], &ev, t0);
    assert_eq!(files(&st), ["dev-20251127-113000.md"], "a new handoff is added");
    let added = st.lineage.last().unwrap().clone();
    assert_eq!((added.status, added.time), (Status::InProgress, t0));

    // The same file amended: the ledger records its new content, the lineage keeps its one
    // record (as first recorded, not updated in place).
    let amended = l(
        "dev-20251127-113000.md",
        "# Handoff: dev\n**Status:** NEEDS_REVIEW\n## Completed Work\nThe parser.\n",
    );
    let size = amended.size;
    record(&mut st, &[cand(amended, Seen::Changed)], &ev, t1);
    assert_eq!(st.ledger.get("dev-20251127-113000.md").unwrap().size, size);
    assert_eq!(files(&st), ["dev-20251127-113000.md"], "no second record for it");
    assert_eq!(st.lineage.last(), Some(&added));

    // A file the ledger knew whose lineage record is missing still gets one.
    let known = l("review-20251127-120000.md", "# Handoff: review\n**Status:** COMPLETE\n");
    std::sync::Arc::make_mut(&mut st.ledger).record_candidate(&cand(known.clone(), Seen::New), "x");
    record(&mut st, &[cand(known, Seen::Changed)], &ev, t1);
    assert_eq!(files(&st), ["dev-20251127-113000.md", "review-20251127-120000.md"]);
}

#[test]
fn nothing_is_sent_after_the_pms_complete_unless_an_agent_reports_something_it_was_not_told() {
    let pm_done = l("pm-20251127-130000.md", "# Handoff: pm\n**Status:** COMPLETE\n");
    let pm_blocked = l("pm-20251127-130000.md", "# Handoff: pm\n**Status:** BLOCKED\n");
    let review = l("review-20251127-125000.md", "# Handoff: review\n**Status:** COMPLETE\n");
    let late = l("test-20251127-130500.md", "# Handoff: test\n**Status:** COMPLETE\n");
    assert_eq!(undeliverable(std::slice::from_ref(&review), Phase::Reviewing), None);
    let why = undeliverable(std::slice::from_ref(&pm_done), Phase::Complete).unwrap();
    assert!(
        why.contains("COMPLETE") && why.contains("pm-20251127-130000.md"),
        "{why}"
    );
    assert!(undeliverable(std::slice::from_ref(&pm_blocked), Phase::Blocked).is_some());
    // A review written before the COMPLETE but never told: the PM declared it without
    // hearing of it, so it is told (a rejection it missed would matter).
    assert_eq!(undeliverable(&[review.clone(), pm_done.clone()], Phase::Complete), None);
    // An agent reporting after the COMPLETE is news.
    assert_eq!(undeliverable(&[pm_done.clone(), late.clone()], Phase::Complete), None);
    // Later check-ins of a finished task: silent, unless an agent reported.
    assert!(
        undeliverable(&[], Phase::Complete)
            .unwrap()
            .contains("no agent has reported")
    );
    assert_eq!(undeliverable(&[late], Phase::Blocked), None);
    // The PM moving on from BLOCKED is an ordinary check-in.
    assert_eq!(undeliverable(&[], Phase::Developing), None);
}

/// [`render_message`] for a task folder.
fn render(t: &Task, st: &PmState, new: &[crate::core::handoff::Loaded], ev: &Evaluation, now: DateTime<Utc>) -> String {
    let (progress, handoffs) = (t.progress_path(), t.handoffs());
    let place = crate::core::checkin::message::Place {
        name: t.name.as_str(),
        progress: &progress,
        handoffs: &handoffs,
        cost: "",
    };
    render_message(&place, st, new, ev, now)
}
