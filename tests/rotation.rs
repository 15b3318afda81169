//! PM rotation, end to end on the demo runtime: the real binary and daemon, a real tmux
//! server on a private socket, an idle demo PM. `rotate_every:` stands in for a context
//! fill (the demo runtime reports none); the real-Claude test of a fill crossing
//! `rotate_at:` is in claude_rotation.rs.

mod common;

use common::*;
use serde_json::Value;

fn pm(w: &World) -> Value {
    w.state("t1")["agents"]["pm"].clone()
}

/// dev hands off COMPLETE; the handoff's file name.
fn dev_completes(w: &World) -> String {
    let dev = w
        .handoff("t1", "dev", "COMPLETE")
        .body("## Summary\nWrote it.\n")
        .write();
    std::path::Path::new(&dev)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string()
}

fn checkin(w: &World) {
    let out = ok(&run(w.task().args(["checkin", "t1", "--json"])));
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["delivery"]["outcome"], "delivered", "{r}");
}

#[test]
fn the_pm_is_rotated_after_rotate_every_check_ins_and_by_hand_and_hears_each_handoff_once() {
    let w = World::new();
    w.start_idle_pm("t1")
        .new_task("rotate_every: 2")
        .env("RUST_LOG", "agent_orchestrator=debug")
        .run();
    std::fs::create_dir_all(w.project.join("tasks/t1/scratchpad/pm")).unwrap();
    std::fs::write(
        w.project.join("tasks/t1/scratchpad/pm/decisions.md"),
        "- chose the pool design: fewer threads\n",
    )
    .unwrap();
    let first = pm(&w)["session_id"].as_str().unwrap().to_string();
    // A spoke's handoff (its check-in goes at once) and a check-in by hand: two reach
    // this PM.
    w.handoff("t1", "explore", "COMPLETE")
        .body("## Summary\nMapped the writer.\n")
        .write();
    wait_for("the handoff's check-in", 30, || {
        w.events_of("t1", "checkin")
            .iter()
            .any(|e| e["data"]["trigger"] == "handoff" && e["data"]["outcome"] == "delivered")
            .then_some(())
    });
    checkin(&w);
    let rotated = wait_until(
        "the rotation",
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(100),
        || w.events_of("t1", "pm_rotated").first().cloned(),
        || format!("{}\n{}", pm(&w), w.daemon_log()),
    );
    assert_eq!(rotated["data"]["trigger"], "every", "{rotated}");
    assert_eq!(rotated["data"]["checkins"], 2, "{rotated}");
    assert_eq!(rotated["data"]["old_session"], first.as_str(), "{rotated}");
    let pm1 = pm(&w);
    let second = pm1["session_id"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    assert_eq!(rotated["data"]["new_session"], second.as_str());
    assert!(
        pm1["past_sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == first.as_str()),
        "{pm1}"
    );
    assert_eq!(
        pm1["checkins"],
        Value::Null,
        "a fresh conversation has had no check-in: {pm1}"
    );
    assert_eq!(w.events_of("t1", "pm_rotated").len(), 1);
    let st: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(st["task"]["rotation"]["every"], 2, "{}", st["task"]["rotation"]);
    assert_eq!(st["task"]["rotation"]["pm_checkins"], 0, "{}", st["task"]["rotation"]);

    // The new PM's first prompt: the preamble, its first instruction replaced by the
    // resume block from the task folder.
    let pane = w.pane("t1", "pm");
    w.wait_demo_prompt(&pane);
    let preambles = newest_preamble(&w);
    assert!(!preambles.contains("Begin now:"), "{preambles}");
    for want in [
        "## You are taking over",
        "it had 2 check-ins",
        "Phase: ",
        "- chose the pool design: fewer threads",
        "explore: explore-",
        "COMPLETE — Mapped the writer.",
        "Continue where the previous PM left off",
    ] {
        assert!(preambles.contains(want), "{want:?} missing:\n{preambles}");
    }
    assert_eq!(
        rotated["data"]["preamble_bytes"].as_u64().unwrap() as usize,
        preambles.len()
    );

    // The next handoff reaches the new PM exactly once.
    let inbox_before = w.inbox("t1", "pm").len();
    let dev = dev_completes(&w);
    wait_for("the check-in naming dev's handoff", 30, || {
        w.inbox("t1", "pm")[inbox_before..]
            .iter()
            .any(|m| m.contains(&dev))
            .then_some(())
    });
    let told: usize = w.inbox("t1", "pm").iter().filter(|m| m.contains(&dev)).count();
    assert_eq!(told, 1);

    // By hand: a spoke is refused; a human rotates at once.
    let o = run(w
        .task()
        .env("TASK_NAME", "t1")
        .env("TASK_AGENT", "dev")
        .env("TASK_ROLE", "spoke")
        .args(["rotate", "t1"]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("for the hub"), "{}", stderr(&o));
    let o = run(w.task().args(["rotate", "t1", "dev"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("only the PM"), "{}", stderr(&o));
    let out = ok(&run(w.task().args(["rotate", "t1", "--json"])));
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["trigger"], "asked", "{r}");
    assert_eq!(r["by"], "a human", "{r}");
    assert_eq!(r["old_session"], second.as_str(), "{r}");
    assert_ne!(pm(&w)["session_id"], second.as_str());
    assert_eq!(w.events_of("t1", "pm_rotated").len(), 2);
    // The PM's restarts are not deaths: nothing was reported dead or restarted.
    assert!(w.events_of("t1", "agent_died").is_empty());
    assert!(w.events_of("t1", "pm_restart").is_empty());
}

/// A check-in never lands in a conversation already due for rotation: a handoff that
/// arrives when the PM is past its point (here two check-ins by hand, which rotate nothing
/// after them) finds it idle, rotates it, and goes to the fresh conversation.
#[test]
fn a_handoff_for_a_pm_due_for_rotation_goes_to_the_fresh_conversation() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("rotate_every: 2").run();
    let first = pm(&w)["session_id"].as_str().unwrap().to_string();
    checkin(&w);
    checkin(&w);
    let dev = dev_completes(&w);
    let told = |e: &Value| {
        e["kind"] == "checkin"
            && e["data"]["files"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == dev.as_str()))
    };
    wait_for("dev's handoff told", 30, || {
        w.events("t1").iter().any(told).then_some(())
    });
    let events = w.events("t1");
    let rotated = events.iter().position(|e| e["kind"] == "pm_rotated");
    let checkin_at = events.iter().position(told).unwrap();
    assert!(
        rotated.is_some_and(|r| r < checkin_at),
        "rotated first: {:?}",
        events
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
    );
    assert_eq!(events[checkin_at]["data"]["outcome"], "delivered");
    assert_ne!(pm(&w)["session_id"], first.as_str());
    assert_eq!(
        pm(&w)["checkins"],
        1,
        "the new conversation's first check-in: {}",
        pm(&w)
    );
    assert_eq!(w.events_of("t1", "pm_rotated").len(), 1);
    // The new conversation's memory holds what the PM was told; dev's handoff is news
    // for the check-in, not something the new PM acts on before it.
    let resume = newest_preamble(&w);
    assert!(resume.contains("## You are taking over"), "{resume}");
    assert!(!resume.contains(dev.as_str()), "{resume}");
}

#[test]
fn a_bad_rotation_setting_is_refused_at_start_and_an_unknown_fill_never_rotates() {
    let w = World::new();
    w.new_task("t1", "rotate_every: often");
    let o = run(w
        .task()
        .env("AO_DEMO_IDLE", "1")
        .args(["start", "t1", "--runtime", "demo"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("rotate_every: \"often\""), "{}", stderr(&o));
    assert!(w.state("t1")["agents"]["pm"].is_null(), "nothing started");

    // The default rotate_at needs a fill; the demo runtime reports none: never rotated.
    let w = World::new();
    w.start_idle_pm("t1")
        .new_task("")
        .env("RUST_LOG", "agent_orchestrator=debug")
        .run();
    let first = pm(&w)["session_id"].clone();
    checkin(&w);
    checkin(&w);
    let looks = || w.daemon_log().matches("looked at the agents' screens").count();
    let seen = looks();
    wait_for("two more looks", 30, || (looks() >= seen + 2).then_some(()));
    assert_eq!(pm(&w)["session_id"], first);
    assert!(w.events_of("t1", "pm_rotated").is_empty());
    // And status says why.
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(
        human.contains("Rotation:      at 60% of the PM's context — off in effect: the PM's context fill is unknown (the demo runtime keeps no usage record we read)"),
        "{human}"
    );
}

/// A rotation that cannot save the new PM's first prompt (here its folder is a file; a
/// full disk in the long-haul run) fails before it ends anything: the old PM runs on in
/// its conversation, and nothing reads as a death.
#[test]
fn a_rotation_that_cannot_save_the_new_prompt_leaves_the_old_pm_running() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let (session, pane) = (pm(&w)["session_id"].clone(), w.pane("t1", "pm"));
    let folder = w.project.join("tasks/t1/scratchpad/pm");
    let aside = w.project.join("tasks/t1/scratchpad/pm.aside");
    std::fs::rename(&folder, &aside).unwrap();
    std::fs::write(&folder, "not a folder").unwrap();
    let o = run(w.task().args(["rotate", "t1"]));
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stderr(&o).contains("scratchpad/pm"), "{}", stderr(&o));
    assert_eq!(pm(&w)["session_id"], session, "the PM's conversation is unchanged");
    assert_eq!(w.pane("t1", "pm"), pane);
    let alive = w.tmux(&["display-message", "-p", "-t", &pane, "#{pane_dead}"]);
    assert_eq!(
        String::from_utf8_lossy(&alive.stdout).trim(),
        "0",
        "the old PM's pane runs on"
    );
    assert!(w.events_of("t1", "pm_rotated").is_empty());

    // Mended, the same rotation goes through.
    std::fs::remove_file(&folder).unwrap();
    std::fs::rename(&aside, &folder).unwrap();
    ok(&run(w.task().args(["rotate", "t1"])));
    assert_ne!(pm(&w)["session_id"], session);
    assert_eq!(w.events_of("t1", "pm_rotated").len(), 1);
    assert!(w.events_of("t1", "agent_died").is_empty());
    assert!(w.events_of("t1", "pm_restart").is_empty());
}

/// A rotation whose new session tmux refuses after the old one ended (here a session of
/// the PM's name appears in that window, so tmux answers "duplicate session") leaves no PM
/// behind it: the PM is started again at once, with no death in the record, and the
/// rotation's error says so.
#[test]
fn a_rotation_whose_new_session_is_refused_starts_the_pm_again_without_a_death() {
    let w = World::new();
    let gate = w.dir.path().join("start-replaced");
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_TEST_PAUSE_START_REPLACED", gate.to_str().unwrap())
        .run();
    let (session_name, pane) = (pm(&w)["session"].as_str().unwrap().to_string(), w.pane("t1", "pm"));
    // The daemon's actor rotates its task: it waits in the window with the old session ended.
    let rotating = w
        .task()
        .args(["rotate", "t1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mark = w.dir.path().join("start-replaced.reached");
    wait_for("the rotation to end the old session", 20, || {
        mark.exists().then_some(())
    });
    let taken = w.tmux(&["new-session", "-d", "-s", &session_name, "sleep 600"]);
    assert!(taken.status.success(), "{}", String::from_utf8_lossy(&taken.stderr));
    std::fs::write(&gate, "").unwrap();
    let o = rotating.wait_with_output().unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stderr(&o).contains("duplicate session"), "{}", stderr(&o));
    assert!(stderr(&o).contains("the PM was started again"), "{}", stderr(&o));

    let now = w.pane("t1", "pm");
    assert_ne!(now, pane, "a new pane holds the PM");
    let alive = w.tmux(&[
        "display-message",
        "-p",
        "-t",
        &now,
        "#{pane_dead} #{pane_current_command}",
    ]);
    let alive = String::from_utf8_lossy(&alive.stdout).trim().to_string();
    assert!(
        alive.starts_with("0 ") && !alive.ends_with("sleep"),
        "the PM runs in it: {alive}"
    );
    assert!(w.events_of("t1", "pm_rotated").is_empty());
    assert!(w.events_of("t1", "agent_died").is_empty());
    assert_eq!(
        w.state("t1")["pm_restarts"],
        serde_json::json!([]),
        "no death was counted"
    );
}

fn newest_preamble(w: &World) -> String {
    let dir = w.project.join("tasks/t1/scratchpad/pm");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("preamble-"))
        .collect();
    files.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    std::fs::read_to_string(files.last().unwrap()).unwrap()
}
