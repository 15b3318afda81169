//! Real Claude Code as the PM and every spoke, offline: the model behind it is the
//! scripted server in common/model.rs, and nothing else is a stand-in. The project is
//! set up only with what `task setup-agents --runtime claude` writes.
//!
//! Claude Code comes from npm, pinned in tests/claude-code.version; scripts/test
//! installs it into target/ and sets AO_TEST_CLAUDE.

mod common;

use std::time::Duration;

use common::claude::*;
use common::model::ROUTE;
use common::*;

/// The example task runs to COMPLETE with real Claude Code everywhere, with nothing set up
/// but `task setup-agents`; every spoke's handoff reaches the PM exactly once, including
/// the ones that land while the PM is still in the middle of a turn.
#[test]
fn the_example_task_completes_with_real_claude_code_and_every_handoff_reaches_the_pm_once() {
    let cc = Cc::new();
    // The PM's answer after spawning explore is held until explore's check-in waits in
    // Claude Code's queue: that check-in is typed into a PM that is provably mid-turn (and
    // its delivery is confirmed only once the PM takes it, after this answer).
    let sock = cc.w.sock.clone();
    cc.model.hold_until("pm", "text: Started explore", move || {
        let o = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(["capture-pane", "-p", "-t", &format!("=aot-{TASK}-pm:")])
            .output();
        o.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Press up to edit queued messages"))
    });
    cc.start_example();
    let settings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cc.w.project.join(".claude/settings.json")).unwrap()).unwrap();
    let allow = settings["permissions"]["allow"].to_string();
    assert!(
        allow.contains("Bash(task handoff:*)") && !allow.contains("spawn"),
        "{allow}"
    );
    cc.wait_phase("COMPLETE", 240);
    cc.assert_each_handoff_told_once();
    let pm = cc.model.seen();
    let busy = pm
        .iter()
        .find(|s| s.agent.as_deref() == Some("pm") && s.answer.starts_with("text: Started explore"))
        .expect("the PM's answer after spawning explore");
    let (from, to) = (busy.at, busy.at + busy.held.expect("held"));
    let explore_checkin = events(&cc.task_dir(), "checkin")
        .into_iter()
        .find(|e| e["data"]["files"].to_string().contains("explore-"))
        .expect("a check-in with explore's handoff");
    assert_eq!(explore_checkin["data"]["outcome"], "delivered", "{explore_checkin}");
    let t: chrono::DateTime<chrono::Utc> = explore_checkin["time"].as_str().unwrap().parse().unwrap();
    let t = std::time::SystemTime::from(t);
    assert!(
        from < t && t < to,
        "explore's check-in landed while the PM was busy
{}",
        cc.dump()
    );
    // The PM's own COMPLETE was recorded, and no check-in spent a PM turn on it.
    assert!(
        !cc.model.turns("pm").iter().any(|t| t
            .said
            .lines()
            .any(|l| l.starts_with("- pm-") && l.contains(": COMPLETE"))),
        "{}",
        cc.dump()
    );
    assert!(!events(&cc.task_dir(), "checkin_skipped").is_empty(), "{}", cc.dump());
    // A message typed in by `task send` arrives literally, once, as its own turn.
    let msg = "hello from the test; $(not executed) `nor this` 'quoted' \"too\"";
    let out = cc.ok(&["send", TASK, "pm", "--message", msg]);
    assert!(out.starts_with("delivered"), "{out}");
    wait_for("the message at the model", 30, || {
        cc.model.reached("pm", msg).then_some(())
    });
    assert_eq!(cc.model.turns_saying("pm", msg).len(), 1);
    // Every agent ran as Claude Code, in the permission mode the profile sets.
    let st = cc.state();
    for a in ROUTE.iter().chain(["pm"].iter()) {
        assert_eq!(st["agents"][a]["runtime"], "claude", "{a}");
    }
    let spawns = events(&cc.task_dir(), "spawn");
    assert_eq!(spawns.len(), ROUTE.len() + 1, "{spawns:?}");
    let pre = std::fs::read_dir(cc.task_dir().join("scratchpad/pm")).unwrap().count();
    assert!(pre >= 1);
    // No agent ever stopped at a prompt: every tool call got a result from `task`.
    for s in cc.model.seen().iter().filter(|s| s.main && !s.new_turn) {
        assert!(
            !s.last_user.contains("requires approval") && !s.last_user.contains("permission"),
            "{}",
            s.last_user
        );
    }
}

/// A PM killed mid-task is restarted into its own conversation (`--resume`), hears the
/// check-ins it missed, and the task still completes with each handoff told once.
#[test]
fn a_killed_pm_is_resumed_with_its_conversation_and_the_task_completes() {
    let cc = Cc::new();
    // Hold explore's answer so the PM can be killed while explore works.
    cc.model.hold("explore", Duration::from_secs(4), 1);
    cc.start_example();
    wait_for("explore to start", 90, || {
        (!cc.model.turns("explore").is_empty()).then_some(())
    });
    let st = cc.state();
    let session_id = st["agents"]["pm"]["session_id"].as_str().unwrap().to_string();
    let pid = pane_pid(&cc.w, st["agents"]["pm"]["session"].as_str().unwrap());
    // SAFETY: killing the Claude Code process this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let killed = std::time::SystemTime::now();
    wait_for("the PM to be restarted", 60, || {
        (!events(&cc.task_dir(), "pm_restart").is_empty()).then_some(())
    });
    cc.wait_phase("COMPLETE", 240);
    let st = cc.state();
    assert_eq!(
        st["agents"]["pm"]["session_id"],
        session_id.as_str(),
        "the same conversation"
    );
    // Requests after the restart still carry the PM's preamble: the conversation was resumed.
    let restart_at = cc.model.seen().iter().filter(|s| s.agent.is_none() && s.main).count();
    assert_eq!(
        restart_at,
        0,
        "every main request names its agent from the history\n{}",
        cc.dump()
    );
    cc.assert_each_handoff_told_once();
    // Explore's report, written while the PM was dead, reached the resumed PM.
    let told = cc.model.turns_saying("pm", "explore-");
    let explore = told
        .first()
        .unwrap_or_else(|| panic!("explore's check-in never reached the PM\n{}", cc.dump()));
    assert!(explore.at > killed, "explore's check-in went to the resumed PM");
}

#[test]
fn runtime_check_proves_claude_code_step_by_step_and_leaves_nothing_running() {
    Cc::new().assert_runtime_check_passes();
}

/// A message sent while Claude Code is mid-turn waits in Claude Code's own queue ("Press up
/// to edit queued messages"), and Up hands a queued message back into the input box, where
/// it sits unsent (issue 13). `task send` must not call it delivered while it is queued: it
/// keeps watching, submits it again when it is handed back, and reports delivered only once
/// Claude Code has taken it; the model then receives it exactly once.
#[test]
fn a_message_queued_behind_a_running_turn_is_reported_delivered_only_once_taken() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cc = Cc::new();
    // The PM's first answer is held until the test lets it go: the PM is provably mid-turn.
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    cc.model
        .hold_until("pm", "tool: task handoff", move || r.load(Ordering::SeqCst));
    cc.start_example();
    wait_for("the PM's first answer held at the model", 90, || {
        cc.model.hold_taken("pm").then_some(())
    });
    let pane = format!("={}:", cc.state()["agents"]["pm"]["session"].as_str().unwrap());
    let msg = "queued-probe: a message typed while the PM is mid-turn";
    let send = cc
        .task(&["send", TASK, "pm", "--message", msg, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !cc.w.capture(&pane).contains("Press up to edit queued messages") {
        if std::time::Instant::now() > deadline {
            // What delivery made of it says why (its wait ends within its queued timeout).
            release.store(true, Ordering::SeqCst);
            let o = send.wait_with_output().unwrap();
            panic!(
                "the message was not queued behind the running turn within 30 s; task send said: {}{}\n{}",
                stdout(&o),
                stderr(&o),
                cc.dump()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Up hands queued messages back into the input box for editing (what the hint offers a
    // human at the pane); the turn goes on and the text would sit there unsent.
    cc.w.tmux(&["send-keys", "-t", &pane, "Up"]);
    release.store(true, Ordering::SeqCst);
    let o = send.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}\n{}", stdout(&o), stderr(&o), cc.dump()));
    assert_eq!(report["outcome"], "delivered", "{report}\n{}", cc.dump());
    // Reported delivered: the model has it (taken into the running turn or as a turn of
    // its own), and once the task is done it still had it only once.
    wait_until(
        "the delivered message at the model",
        Duration::from_secs(60),
        Duration::from_millis(100),
        || (cc.model.received("pm", msg) > 0).then_some(()),
        || format!("{report}\n{}", cc.dump()),
    );
    // It came back into the input once, and was submitted again from there.
    assert!(
        report["enters"].as_u64() >= Some(2),
        "submitted again when handed back: {report}"
    );
    cc.wait_phase("COMPLETE", 240);
    assert_eq!(cc.model.received("pm", msg), 1, "{}", cc.dump());
}

/// A check-in still waiting in Claude Code's queue when its delivery's wait ends was
/// accepted (issue 13): Claude Code takes it at the turn's next tool call or when the turn
/// ends. It is recorded as delivered at once, and the PM gets it exactly once. (Reported
/// "unconfirmed", such a message was sent again — the budget wrap-up at every check-in —
/// and the agent got it twice once its queue drained.) The claude profile's wait is cut to
/// 12 s through the user's config so the PM's turn can outlast it.
#[test]
fn a_checkin_still_queued_when_the_wait_ends_is_recorded_delivered_and_reaches_the_pm_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cc = Cc::new();
    let cfg = cc.w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    let profile = std::fs::read_to_string(repo().join("templates/runtimes/claude.toml"))
        .unwrap()
        .replace("ready_timeout_secs = 90", "ready_timeout_secs = 12")
        .replace("[patterns]", "[runtimes.claude.patterns]");
    std::fs::write(cfg.join("config.toml"), format!("[runtimes.claude]\n{profile}")).unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    cc.model
        .hold_until("pm", "tool: task handoff", move || r.load(Ordering::SeqCst));
    cc.start_example();
    wait_for("the PM's first answer held at the model", 90, || {
        cc.model.hold_taken("pm").then_some(())
    });
    // And busy on its screen, so what is typed now waits in Claude Code's queue.
    let pane = format!("={}:", cc.state()["agents"]["pm"]["session"].as_str().unwrap());
    wait_for("the PM busy on screen", 30, || {
        cc.w.capture(&pane).contains("esc to interrupt").then_some(())
    });
    let o = run(&mut cc.task(&["checkin", TASK, "--json"]));
    release.store(true, Ordering::SeqCst);
    let report: serde_json::Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}\n{}", stdout(&o), stderr(&o), cc.dump()));
    let d = &report["delivery"];
    assert_eq!(d["outcome"], "delivered", "{report}\n{}", cc.dump());
    assert!(d["reason"].as_str().unwrap().starts_with("queued:"), "{report}");
    assert_eq!(report["recorded"], true, "{report}");
    assert!(
        std::fs::read(cc.task_dir().join(".checkin-intent.json"))
            .map_or(true, |b| b.iter().all(u8::is_ascii_whitespace)),
        "the intent is finished (blanked)"
    );
    let tag = wait_for("the check-in's tag at the model", 60, || {
        cc.model
            .seen()
            .iter()
            .flat_map(|s| s.prompts.clone())
            .find_map(|p| p.lines().find(|l| l.starts_with("[checkin c-")).map(str::to_string))
    });
    // The PM goes on with its work; no check-in repeated the one it took from its queue.
    wait_for("explore started by the PM", 90, || {
        (!cc.model.turns("explore").is_empty()).then_some(())
    });
    assert_eq!(cc.model.received("pm", &tag), 1, "{}", cc.dump());
}
