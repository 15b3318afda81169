//! Edges of delivery and stop (issue 13): one delivery at a time per pane whoever sends
//! it, and `task stop` / `task start` where the project is unusual. Real tmux on a
//! private socket, the real `task` binary and daemon, the demo agent as the receiver.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;

fn spawn_quiet(c: &mut Command) -> Child {
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn task")
}

/// Every child's exit, with its output for the failure message.
fn finish(children: Vec<Child>) -> Vec<(Option<i32>, String)> {
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            (o.status.code(), format!("{}{}", stdout(&o), stderr(&o)))
        })
        .collect()
}

fn files_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn twenty_concurrent_sends_arrive_as_twenty_separate_submissions() {
    let w = World::new();
    let pane = w.start_idle_pm("t1").arg("--no-cron").run().0;
    let children: Vec<Child> = (1..=20)
        .map(|i| {
            spawn_quiet(
                w.task()
                    .args(["send", "t1", "pm", "--message", &format!("edge-msg-{i}")]),
            )
        })
        .collect();
    for (code, out) in finish(children) {
        assert_eq!(code, Some(0), "every send is confirmed: {out}");
    }
    let mut got = w.inbox("t1", "pm");
    got.sort_by_key(|m| m.trim_start_matches("edge-msg-").parse::<u32>().unwrap_or(0));
    let want: Vec<String> = (1..=20).map(|i| format!("edge-msg-{i}")).collect();
    assert_eq!(
        got,
        want,
        "each submission is exactly one message\n{}",
        w.capture(&pane)
    );
}

#[test]
fn sends_during_a_checkin_wait_for_it_and_are_not_merged_into_it() {
    let w = World::new();
    let pane = w.start_idle_pm("t1").arg("--no-cron").arg("--no-daemon").run().0;
    w.handoff("t1", "explore", "COMPLETE")
        .body("## Completed Work\nexplore work done.\n")
        .write();
    let hooks = w.dir.path().join("hooks");
    let queued = hooks.join("queued");
    std::fs::create_dir_all(&queued).unwrap();
    let go = hooks.join("go");

    // The check-in pastes, then is held before its Enter — with the pane lock held.
    let checkin = spawn_quiet(
        w.task()
            .env("AO_TEST_PAUSE_DELIVERY_ENTER", &go)
            .args(["checkin", "t1", "--json"]),
    );
    wait_for("the check-in to stop between paste and Enter", 30, || {
        hooks.join("go.waiting").exists().then_some(())
    });
    let sends: Vec<Child> = (1..=5)
        .map(|i| {
            spawn_quiet(w.task().env("AO_TEST_PANE_LOCK_WAITING", &queued).args([
                "send",
                "t1",
                "pm",
                "--message",
                &format!("edge-msg-{i}"),
            ]))
        })
        .collect();
    wait_for("all five sends to queue behind the check-in", 30, || {
        (files_in(&queued) >= 5).then_some(())
    });
    assert!(
        w.inbox("t1", "pm").is_empty(),
        "nothing submitted while the check-in is held"
    );
    std::fs::write(&go, b"").unwrap();

    let (code, out) = finish(vec![checkin]).remove(0);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("\"delivered\""), "{out}");
    for (code, out) in finish(sends) {
        assert_eq!(code, Some(0), "{out}");
    }
    let inbox = w.inbox("t1", "pm");
    assert_eq!(inbox.len(), 6, "{inbox:#?}\n{}", w.capture(&pane));
    assert!(inbox[0].starts_with("Check-in for task t1"), "{}", inbox[0]);
    assert!(
        !inbox[0].contains("edge-msg"),
        "the check-in holds only its own text: {}",
        inbox[0]
    );
    let mut rest = inbox[1..].to_vec();
    rest.sort();
    assert_eq!(rest, (1..=5).map(|i| format!("edge-msg-{i}")).collect::<Vec<_>>());
}

/// The project bind-mounted read-only over itself for the guard's life (root only: a
/// read-only mount stops even root, unlike permission bits).
struct ReadOnly(std::path::PathBuf);

impl ReadOnly {
    fn mount(dir: &Path) -> ReadOnly {
        let sh = |args: &[&str]| {
            let o = Command::new("mount").args(args).output().expect("run mount");
            assert!(o.status.success(), "mount {args:?}: {}", stderr(&o));
        };
        let d = dir.to_str().unwrap();
        sh(&["--bind", d, d]);
        let guard = ReadOnly(dir.to_path_buf());
        sh(&["-o", "remount,bind,ro", d]);
        guard
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

#[test]
fn stop_works_on_a_read_only_project() {
    let w = World::new();
    w.start_idle_pm("t1").arg("--no-cron").arg("--no-daemon").run();
    assert_eq!(w.sessions(), ["aot-t1-pm"]);
    let _ro = ReadOnly::mount(&w.project);
    assert!(
        std::fs::write(w.project.join("tasks/t1/probe"), b"").is_err(),
        "the project is read-only"
    );
    let out = ok(&run(w.task().args(["stop", "t1"])));
    assert!(out.contains("aot-t1-pm"), "{out}");
    wait_for("the PM's session to end", 10, || w.sessions().is_empty().then_some(()));
}

#[test]
fn stop_ends_the_sessions_of_a_task_whose_folder_was_deleted() {
    let w = World::new();
    w.start_idle_pm("t1").arg("--no-cron").arg("--no-daemon").run();
    assert_eq!(w.sessions(), ["aot-t1-pm"]);
    std::fs::remove_dir_all(w.project.join("tasks/t1")).unwrap();
    let out = ok(&run(w.task().args(["stop", "t1"])));
    assert!(out.contains("aot-t1-pm"), "{out}");
    wait_for("the PM's session to end", 10, || w.sessions().is_empty().then_some(()));
    // A task that never existed is still "no such task", not a silent success.
    let o = run(w.task().args(["stop", "t9"]));
    assert!(!o.status.success(), "{}", stdout(&o));
}

#[test]
fn a_start_refused_by_another_projects_task_of_the_same_name_says_so() {
    let w = World::new();
    w.start_idle_pm("t1").arg("--no-cron").arg("--no-daemon").run();
    let other = w.dir.path().join("proj2");
    std::fs::create_dir_all(&other).unwrap();
    let o = run(w.task().current_dir(&other).env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
        "--no-cron",
        "--no-daemon",
    ]));
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("another project"), "{err}");
    assert!(
        err.contains(&w.project.display().to_string()),
        "names the other project: {err}"
    );
    assert!(err.contains("task stop t1 --project"), "says what to do: {err}");
    assert_eq!(w.sessions(), ["aot-t1-pm"], "the other project's PM runs on");
}

#[test]
fn a_send_that_waits_too_long_for_the_pane_is_not_delivered_and_names_the_holder() {
    let w = World::new();
    w.start_idle_pm("t1").arg("--no-cron").arg("--no-daemon").run();
    w.handoff("t1", "explore", "COMPLETE").write();
    let go = w.dir.path().join("go");
    let checkin = spawn_quiet(
        w.task()
            .env("AO_TEST_PAUSE_DELIVERY_ENTER", &go)
            .args(["checkin", "t1"]),
    );
    wait_for("the check-in to hold the pane", 30, || {
        w.dir.path().join("go.waiting").exists().then_some(())
    });
    let o = run(w.task().env("AO_TEST_PANE_LOCK_TIMEOUT_MS", "300").args([
        "send",
        "t1",
        "pm",
        "--message",
        "edge-msg-late",
    ]));
    std::fs::write(&go, b"").unwrap();
    assert_eq!(o.status.code(), Some(5), "not delivered: {}{}", stdout(&o), stderr(&o));
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(said.contains("stayed locked by process"), "{said}");
    assert!(said.contains("task checkin t1"), "names the holder: {said}");
    let (code, out) = finish(vec![checkin]).remove(0);
    assert_eq!(code, Some(0), "{out}");
    let inbox = w.inbox("t1", "pm");
    assert_eq!(inbox.len(), 1, "only the check-in arrived: {inbox:#?}");
    assert!(!inbox[0].contains("edge-msg-late"), "{}", inbox[0]);
}

/// Issue 27, item 5: a send the daemon carries out for longer than the client's silence
/// limit (here 5 s; a delivery can wait minutes for the agent's input area and its pane
/// lock) is still answered: the daemon says it is at work every 2 s, and the client waits
/// for the outcome instead of reporting a failure for a message that then arrives.
#[test]
fn a_send_the_daemon_works_on_past_the_clients_silence_limit_is_still_answered() {
    let w = World::new();
    let go = w.dir.path().join("go");
    w.start_idle_pm("t1")
        .arg("--no-cron")
        .env("AO_TEST_PAUSE_DELIVERY_ENTER", go.to_str().unwrap())
        .run();
    let send = spawn_quiet(w.task().env("AO_TEST_CONTROL_QUIET_SECS", "5").args([
        "send",
        "t1",
        "pm",
        "--message",
        "outlasting",
    ]));
    wait_for("the daemon's delivery held before Enter", 30, || {
        w.dir.path().join("go.waiting").exists().then_some(())
    });
    // The request outlasts the client's limit twice over, held by the hook.
    std::thread::sleep(std::time::Duration::from_secs(12));
    std::fs::write(&go, b"").unwrap();
    let out = send.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("delivered"), "{text}");
    assert_eq!(w.inbox("t1", "pm"), ["outlasting"]);
}

/// An agent at work (its screen moving) that takes a paste in only a while after it ended,
/// while an Enter acts at once on whatever the input holds: what Claude Code did mid-turn,
/// where a message was reported delivered while it sat unsent in the input. Delivery
/// presses Enter only once the text shows in the input, and the message arrives once.
#[test]
fn a_paste_a_working_agent_takes_in_late_is_submitted_once_it_shows() {
    // Within delivery's look for the paste, and later than it (Enter already pressed).
    for lag in ["700", "2600"] {
        a_late_paste_is_submitted_once(lag, false);
    }
}

/// The same into an agent that looks idle but whose screen moves: a Claude Code PM just
/// started, its first turn beginning to draw as a check-in goes in. A change on its screen
/// is not the paste landing (taken so, the Enter met an empty input and the check-in sat
/// unsent in a long run's PM while it was recorded delivered).
#[test]
fn a_paste_an_idle_agent_with_a_moving_screen_takes_in_late_is_submitted_once_it_shows() {
    for lag in ["700", "2600"] {
        a_late_paste_is_submitted_once(lag, true);
    }
}

fn a_late_paste_is_submitted_once(lag: &str, idle: bool) {
    let w = World::new();
    let mut start = w.start_idle_pm("t1").env("AO_DEMO_LATE_PASTE_MS", lag).arg("--no-cron");
    if idle {
        start = start.env("AO_DEMO_LATE_PASTE_IDLE", "1");
    }
    let pane = start.run().0;
    let moving = if idle { "demo: tick" } else { "demo: working…" };
    wait_for("the PM's screen moving", 30, || {
        w.capture(&pane).contains(moving).then_some(())
    });
    let o = run(w
        .task()
        .args(["send", "t1", "pm", "--message", "late-paste-probe", "--json"]));
    let report: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    assert_eq!(
        report["outcome"],
        "delivered",
        "lag {lag}: {report}\n{}",
        w.capture(&pane)
    );
    // Reported delivered: it is in the agent's inbox, once, and not left in its input.
    wait_for("the message in the inbox", 10, || {
        (w.inbox("t1", "pm") == ["late-paste-probe"]).then_some(())
    });
    assert!(
        !w.capture(&pane).contains("[pasted"),
        "nothing left unsent: {}",
        w.capture(&pane)
    );
}
