//! Edges of delivery and stop (issue 13): one delivery at a time per pane whoever sends
//! it, and `task stop` / `task start` where the project is unusual. Real tmux on a
//! private socket, the real `task` binary and daemon, the demo agent as the receiver.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;

/// Start task `t1` with an idle demo PM (through a daemon unless `no_daemon`); its pane.
fn start_idle_pm(w: &World, no_daemon: bool) -> String {
    let mut c = w.task();
    c.env("AO_DEMO_IDLE", "1")
        .args(["start", "t1", "--runtime", "demo", "--no-cron"]);
    if no_daemon {
        c.arg("--no-daemon");
    }
    ok(&run(&mut c));
    let pane = w.pane("t1", "pm");
    w.wait_demo_prompt(&pane);
    pane
}

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
    let pane = start_idle_pm(&w, false);
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
    let pane = start_idle_pm(&w, true);
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
