//! The view model: each kind of Needs-you row, its order, seen items, rows and filter.

use super::*;
use crate::core::attention::Attention;
use crate::core::status::{AgentRow, Blocker, LaneRow};

pub(crate) fn t0() -> DateTime<Utc> {
    "2025-11-27T12:00:00Z".parse().unwrap()
}

pub(crate) fn agent(name: &str, state: &str) -> AgentRow {
    AgentRow {
        name: name.into(),
        last_status: None,
        last_handoff: None,
        last_handoff_time: None,
        recommended_next: None,
        state: state.into(),
        host: "local".into(),
        session: Some(format!("ao-t-{name}")),
        pane: Some(PaneState::Alive),
        exit_status: None,
        exit_signal: None,
        idle_secs: Some(5),
        waiting_for_human: false,
        unreachable_since: None,
        attention: None,
        worktree: None,
        turn: None,
        left_behind: Vec::new(),
        placed: None,
    }
}

pub(crate) fn task(name: &str, agents: Vec<AgentRow>) -> TaskView {
    TaskView {
        status: TaskStatus {
            task: name.into(),
            title: None,
            dir: format!("/p/tasks/{name}"),
            phase: Default::default(),
            last_checkin: Some(t0() - chrono::Duration::minutes(3)),
            next_checkin: Some(t0() + chrono::Duration::minutes(7)),
            agents,
            blockers: Vec::new(),
            handoffs: 0,
            handoffs_unprocessed: 0,
            handoffs_skipped: 0,
            artifacts: 0,
            escalations: Vec::new(),
            permissions: Vec::new(),
            roster: "default".into(),
            lanes: Vec::new(),
            problems: Vec::new(),
            watcher: None,
            rotation: None,
            cost: None,
            git: None,
        },
        events: Vec::new(),
    }
}

pub(crate) fn episode(kind: Kind, reason: &str, since: DateTime<Utc>) -> Attention {
    Attention {
        kind,
        reason: reason.into(),
        line: "Do you want to proceed? 1. Yes".into(),
        since,
        escalated_at: None,
        resets_at: (kind == Kind::Paused).then(|| since + chrono::Duration::hours(2)),
        reset_parsed: true,
        resumed_at: None,
        announced: false,
    }
}

pub(crate) fn lane(agent: &str, state: LaneState, idle: i64) -> LaneRow {
    LaneRow {
        agent: agent.into(),
        state,
        since: Some(t0() - chrono::Duration::hours(1)),
        handoff: Some("pm-20251127-110000.md".into()),
        queued: None,
        last_reason: None,
        released: None,
        idle_secs: Some(idle),
        stale_after_secs: 1800,
    }
}

/// A task with one of every kind of Needs-you item.
pub(crate) fn everything() -> Vec<TaskView> {
    let mut dialog = agent("dev", "running");
    dialog.attention = Some(episode(
        Kind::NeedsHuman,
        "permission prompt",
        t0() - chrono::Duration::minutes(4),
    ));
    let mut paused = agent("test", "running");
    paused.attention = Some(episode(
        Kind::Paused,
        "usage limit",
        t0() - chrono::Duration::minutes(30),
    ));
    let mut dead = agent("review", "running");
    dead.pane = Some(PaneState::Dead);
    dead.exit_signal = Some(9);
    let mut blocked = agent("explore", "blocked");
    blocked.last_status = Some(crate::core::handoff::Status::Blocked);
    blocked.last_handoff_time = Some("2025-11-27 11:50:00".into());
    let mut far = agent("architect", "running");
    far.host = "me@far:/w".into();
    far.pane = Some(PaneState::Unreachable);
    far.unreachable_since = Some(t0() - chrono::Duration::minutes(2));
    let mut t = task("t1", vec![dialog, paused, dead, blocked, far, agent("plan", "running")]);
    t.status.blockers.push(Blocker {
        agent: "explore".into(),
        handoff: "explore-20251127-115000.md".into(),
        text: "needs database credentials".into(),
    });
    t.status.escalations.push(crate::core::model::Escalation {
        time: t0() - chrono::Duration::minutes(10),
        reason: "PM died 3 times in 10 minutes; restarts stopped".into(),
    });
    t.status.lanes.push(lane("plan", LaneState::Stale, 2400));
    vec![t, task("t2", vec![agent("pm", "running")])]
}

#[test]
fn every_kind_of_need_is_listed_most_urgent_first() {
    let n = needs(&everything(), &BTreeSet::new());
    let order: Vec<(Why, Option<&str>)> = n.iter().map(|n| (n.why, n.agent.as_deref())).collect();
    assert_eq!(
        order,
        vec![
            (Why::Dialog, Some("dev")),
            (Why::Escalation, None),
            (Why::Dead, Some("review")),
            (Why::Blocked, Some("explore")),
            (Why::Unreachable, Some("architect")),
            (Why::StaleLane, Some("plan")),
            (Why::Paused, Some("test")),
        ]
    );
    assert!(n[0].text.contains("permission prompt"), "{}", n[0].text);
    assert!(n[2].text.contains("signal 9"), "{}", n[2].text);
    assert_eq!(n[3].text, "BLOCKED: needs database credentials");
    assert_eq!(n[3].since, Some("2025-11-27T11:50:00Z".parse().unwrap()));
    assert!(n[4].text.contains("me@far:/w"));
    assert!(n[5].text.contains("40m"), "{}", n[5].text);
    assert!(n[6].text.contains("resumes"), "{}", n[6].text);
}

#[test]
fn a_seen_item_hides_until_it_changes() {
    let tasks = everything();
    let all = needs(&tasks, &BTreeSet::new());
    let seen: BTreeSet<String> = [all[0].key()].into();
    let n = needs(&tasks, &seen);
    assert_eq!(n.len(), all.len() - 1);
    assert_eq!(n[0].why, Why::Escalation);
    // Another episode (a later since) is another item.
    let mut later = tasks.clone();
    later[0].status.agents[0].attention.as_mut().unwrap().since = t0();
    assert_eq!(needs(&later, &seen)[0].why, Why::Dialog);
}

#[test]
fn stopped_and_finished_agents_without_panes_need_nobody() {
    let mut a = agent("dev", "stopped");
    a.pane = Some(PaneState::Gone);
    let mut b = agent("test", "done");
    b.pane = Some(PaneState::Gone);
    let mut c = agent("pm", "dead");
    c.pane = Some(PaneState::Gone);
    let n = needs(&[task("t", vec![a, b, c])], &BTreeSet::new());
    assert_eq!(n.len(), 1);
    assert_eq!((n[0].why, n[0].agent.as_deref()), (Why::Dead, Some("pm")));
}

#[test]
fn rows_follow_tasks_and_the_filter_keeps_matching_agents() {
    let tasks = everything();
    assert_eq!(rows(&tasks, "").len(), 2 + 6 + 1);
    assert_eq!(rows(&tasks, "REV"), vec![Row::Task(0), Row::Agent(0, 2)]);
    assert_eq!(rows(&tasks, "t2"), vec![Row::Task(1), Row::Agent(1, 0)]);
    assert!(rows(&tasks, "nothing-like-this").is_empty());
}

#[test]
fn durations_read_like_people_say_them() {
    assert_eq!(ago(45), "45s");
    assert_eq!(ago(720), "12m");
    assert_eq!(ago(3 * 3600 + 5), "3h");
    assert_eq!(ago(-5), "0s");
    assert_eq!(since(None, t0()), "-");
}

#[test]
fn events_are_newest_first_and_name_their_handoff() {
    let mut t = task("t", vec![]);
    for (i, kind) in ["spawn", "checkin", "handoff"].iter().enumerate() {
        t.events.push(crate::store::events::Event {
            time: t0() + chrono::Duration::seconds(i as i64),
            kind: kind.to_string(),
            agent: Some("dev".into()),
            data: serde_json::json!({"handoff": "dev-20251127-120002.md"}),
        });
    }
    let e = events(&t, "");
    assert_eq!(e[0].kind, "handoff");
    assert_eq!(event_handoff(e[0]).as_deref(), Some("dev-20251127-120002.md"));
    assert_eq!(events(&t, "checkin").len(), 1);
}

#[test]
fn a_dead_agent_is_dated_by_the_supervisors_record_of_its_death() {
    let mut t = task("t", vec![agent("dev", "dead")]);
    let died = t0() - chrono::Duration::minutes(2);
    t.events.push(crate::store::events::Event {
        time: died,
        kind: "agent_died".into(),
        agent: Some("dev".into()),
        data: serde_json::json!({"detail": "it was killed by signal 9"}),
    });
    let n = needs(&[t], &BTreeSet::new());
    assert_eq!((n[0].why, n[0].since), (Why::Dead, Some(died)));
}

#[test]
fn a_permission_request_is_one_row_with_its_id_and_its_escalation_is_not_repeated() {
    let mut t = task("t1", vec![agent("pm", "running"), agent("dev", "running")]);
    t.status.permissions.push(crate::core::status::PermissionRow {
        id: "p-0123abcd".into(),
        agent: "dev".into(),
        tool: "Bash".into(),
        command: "pip install -e .".into(),
        why: "no rule allows `pip install -e .`".into(),
        since: t0() - chrono::Duration::minutes(6),
    });
    t.status.escalations.push(crate::core::model::Escalation {
        time: t0() - chrono::Duration::minutes(1),
        reason: "dev asks permission (p-0123abcd): `pip install -e .`; answer with `task permit t1 p-0123abcd allow`"
            .into(),
    });
    t.status.escalations.push(crate::core::model::Escalation {
        time: t0(),
        reason: "the PM died 4 times".into(),
    });
    let other = task("t2", Vec::new());
    let n = needs(&[other, t], &BTreeSet::new());
    assert_eq!(n.len(), 2, "{n:#?}");
    assert_eq!(n[0].why, Why::Permit);
    assert_eq!(
        n[0].permit,
        Some((1, "p-0123abcd".to_string())),
        "the task's index and the id"
    );
    assert_eq!(n[0].agent.as_deref(), Some("dev"));
    assert!(
        n[0].text.starts_with("wants to run \"pip install -e .\""),
        "{}",
        n[0].text
    );
    assert!(n[0].text.ends_with("a allow, d deny"), "{}", n[0].text);
    assert_eq!((n[1].why, n[1].text.as_str()), (Why::Escalation, "the PM died 4 times"));
}
