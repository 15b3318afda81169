//! Exactly-once check-ins across a crash and a full disk (issue 13, items 1 and 4): the
//! real daemon, a real tmux server, an idle demo PM whose inbox records every message it
//! received. Crash windows are hit with the daemon's test hooks (src/io/hooks.rs).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

fn file_name(p: &str) -> String {
    Path::new(p).file_name().unwrap().to_string_lossy().into_owned()
}

fn reached(gate: &Path) -> PathBuf {
    PathBuf::from(format!("{}.reached", gate.display()))
}

fn in_ledger(w: &World, task: &str, file: &str) -> bool {
    w.state(task)["ledger"].get(file).is_some()
}

fn kill_daemon(w: &World) {
    let pid = w.daemon_pid().expect("a daemon runs");
    // SAFETY: signalling the daemon this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_for("the daemon to die", 10, || w.daemon_pid().is_none().then_some(()));
}

fn start_daemon(w: &World) -> std::process::Child {
    let child = w
        .task()
        .args(["daemon"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the new daemon", 10, || w.daemon_pid());
    child
}

/// The PM's inbox once it holds `n` messages.
fn inbox_of(w: &World, n: usize) -> Vec<String> {
    wait_for(&format!("{n} message(s) in the PM's inbox"), 20, || {
        let i = w.inbox("t1", "pm");
        (i.len() >= n).then_some(i)
    })
}

/// After the interrupted check-in is settled, one more handoff gets one more check-in: the
/// PM has then heard `first` exactly once, and nothing was delivered in between.
fn then_exactly_once(w: &World, first: &str) {
    let second = file_name(&w.handoff("t1", "test", "COMPLETE").write());
    let inbox = inbox_of(w, 2);
    assert_eq!(inbox.len(), 2, "{inbox:#?}");
    assert!(inbox[0].contains(first), "{}", inbox[0]);
    assert!(
        !inbox[1].contains(first) && inbox[1].contains(&second),
        "told again: {}",
        inbox[1]
    );
}

#[test]
fn a_kill_after_the_paste_is_settled_from_what_the_pm_received_not_delivered_again() {
    let w = World::new();
    let gate = w.dir.path().join("after-deliver");
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_TEST_PAUSE_AFTER_DELIVER", gate.to_str().unwrap())
        .run();
    let h = file_name(&w.handoff("t1", "dev", "COMPLETE").write());
    wait_for("the daemon at the delivery window", 20, || {
        reached(&gate).exists().then_some(())
    });
    let inbox = inbox_of(&w, 1);
    assert!(
        inbox[0].contains(&h) && inbox[0].contains("[checkin c-"),
        "{}",
        inbox[0]
    );
    kill_daemon(&w);
    assert!(!in_ledger(&w, "t1", &h), "killed before the record");

    let mut d = start_daemon(&w);
    wait_for("the handoff recorded by the new daemon", 20, || {
        in_ledger(&w, "t1", &h).then_some(())
    });
    let settled = w.events_of("t1", "checkin_settled");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["data"]["found"], true, "{settled:?}");
    then_exactly_once(&w, &h);
    let _ = run(w.task().args(["shutdown"]));
    let _ = d.wait();
}

#[test]
fn a_kill_after_the_intent_before_the_paste_delivers_once_after_the_restart() {
    let w = World::new();
    let gate = w.dir.path().join("before-deliver");
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_TEST_PAUSE_BEFORE_DELIVER", gate.to_str().unwrap())
        .run();
    let h = file_name(&w.handoff("t1", "dev", "COMPLETE").write());
    wait_for("the daemon before the paste", 20, || {
        reached(&gate).exists().then_some(())
    });
    kill_daemon(&w);
    assert!(w.inbox("t1", "pm").is_empty(), "nothing pasted yet");
    let intent = std::fs::read_to_string(w.project.join("tasks/t1/.checkin-intent.json")).unwrap();
    assert!(
        intent.contains(&h),
        "the intent names the handoff before anything is pasted: {intent}"
    );

    let mut d = start_daemon(&w);
    let inbox = inbox_of(&w, 1);
    assert!(inbox[0].contains(&h), "{}", inbox[0]);
    wait_for("the handoff recorded", 20, || in_ledger(&w, "t1", &h).then_some(()));
    let settled = w.events_of("t1", "checkin_settled");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["data"]["found"], false, "{settled:?}");
    then_exactly_once(&w, &h);
    let _ = run(w.task().args(["shutdown"]));
    let _ = d.wait();
}

/// Killed between the paste and the Enter (issue 13, item 3 of the crash windows): the
/// check-in sits in the PM's input with its id on screen, never submitted. Counting that as
/// received would lose it; pasting it again would glue a second copy onto it. The PM here
/// draws a paste as its text (AO_DEMO_SHOW_PASTE, as Codex, Gemini and Kiro do), so the id
/// is visible in the input; the new daemon must press Enter on it, once.
#[test]
fn a_kill_between_the_paste_and_the_enter_submits_the_unsent_checkin_once() {
    let w = World::new();
    let gate = w.dir.path().join("before-enter");
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_DEMO_SHOW_PASTE", "1")
        .env("AO_TEST_PAUSE_DELIVERY_ENTER", gate.to_str().unwrap())
        .run();
    let h = file_name(&w.handoff("t1", "dev", "COMPLETE").write());
    wait_for("the daemon between the paste and the Enter", 20, || {
        PathBuf::from(format!("{}.waiting", gate.display()))
            .exists()
            .then_some(())
    });
    let pane = w.pane("t1", "pm");
    let screen = wait_for("the check-in's tag in the PM's input", 10, || {
        let s = w.capture(&pane);
        s.lines()
            .any(|l| l.starts_with("demo> ") && l.contains("[checkin c-"))
            .then_some(s)
    });
    kill_daemon(&w);
    assert!(w.inbox("t1", "pm").is_empty(), "not submitted yet: {screen}");
    assert!(!in_ledger(&w, "t1", &h), "killed before the record");

    let mut d = start_daemon(&w);
    let inbox = inbox_of(&w, 1);
    assert!(inbox[0].contains(&h), "{}", inbox[0]);
    assert_eq!(
        inbox[0].matches("[checkin c-").count(),
        1,
        "submitted as pasted, not pasted again: {}",
        inbox[0]
    );
    wait_for("the handoff recorded", 20, || in_ledger(&w, "t1", &h).then_some(()));
    let settled = w.events_of("t1", "checkin_settled");
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["data"]["seen"], "unsent", "{settled:?}");
    assert_eq!(settled[0]["data"]["found"], true, "{settled:?}");
    then_exactly_once(&w, &h);
    let _ = run(w.task().args(["shutdown"]));
    let _ = d.wait();
}

/// A small tmpfs over the task folder, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount a tmpfs (run as root): {}", stderr(&o));
        Tmpfs(at.to_path_buf())
    }

    /// Fill it to the last byte; the filler's path.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let p = self.0.join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        p
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// Configure the world's notify command to append each call's reason to a file; its path.
fn notify_into_file(w: &World) -> PathBuf {
    let notified = w.dir.path().join("notified.txt");
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "notify = [\"sh\", \"-c\", \"printf '%s\\\\n' \\\"$1\\\" >> {}\", \"sh\", \"{{reason}}\"]\n",
            notified.display()
        ),
    )
    .unwrap();
    notified
}

#[test]
fn a_full_disk_repeats_nothing_calls_a_human_once_and_resumes_by_itself() {
    let w = World::new();
    let disk = Tmpfs::mount(&w.project.join("tasks/t1"), "4m");
    let notified = notify_into_file(&w);
    let gate = w.dir.path().join("after-deliver");
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_TEST_PAUSE_AFTER_DELIVER", gate.to_str().unwrap())
        .run();
    let h = file_name(&w.handoff("t1", "dev", "COMPLETE").write());
    wait_for("the daemon at the delivery window", 20, || {
        reached(&gate).exists().then_some(())
    });
    inbox_of(&w, 1);
    // The disk fills after the paste, before the record: pm_state.json cannot be saved.
    let filler = disk.fill();
    std::fs::write(&gate, b"").unwrap();
    let log = wait_for("the daemon's log", 10, || {
        walk(&w.dir.path().join("state"))
            .into_iter()
            .find(|p| p.ends_with("daemon.log"))
    });
    wait_until(
        "three failed attempts to save the state",
        Duration::from_secs(40),
        Duration::from_millis(100),
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            (text.matches("check-ins stopped").count() >= 3).then_some(())
        },
        || std::fs::read_to_string(&log).unwrap_or_default(),
    );
    let calls = std::fs::read_to_string(&notified).unwrap_or_default();
    assert_eq!(calls.lines().count(), 1, "one call to a human: {calls}");
    assert!(calls.contains("No space left on device"), "{calls}");
    assert_eq!(
        w.inbox("t1", "pm").len(),
        1,
        "no check-in repeated while the disk is full"
    );

    std::fs::remove_file(&filler).unwrap();
    wait_for("the handoff recorded once space is back", 40, || {
        in_ledger(&w, "t1", &h).then_some(())
    });
    then_exactly_once(&w, &h);
    let calls = std::fs::read_to_string(&notified).unwrap_or_default();
    assert_eq!(calls.lines().count(), 1, "still one call: {calls}");
    let open = w.state("t1")["escalations"].to_string();
    assert!(!open.contains("cannot be saved"), "closed on recovery: {open}");
    let _ = run(w.task().args(["shutdown"]));
}

#[test]
fn cron_mode_on_a_full_disk_calls_a_human_once_across_runs_and_recovers() {
    let w = World::new();
    let disk = Tmpfs::mount(&w.project.join("tasks/t1"), "4m");
    let notified = notify_into_file(&w);
    w.new_task("t1", "");
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
        "--no-daemon",
    ])));
    w.wait_demo_prompt(&w.pane("t1", "pm"));
    let h = file_name(&w.handoff("t1", "dev", "COMPLETE").write());
    let filler = disk.fill();
    // Three cron runs, a process each, while nothing can be saved.
    for i in 0..3 {
        let o = run(w.task().args(["checkin", "t1"]));
        assert!(
            !o.status.success(),
            "run {i}: a check-in that saved nothing says so: {}",
            stderr(&o)
        );
    }
    // The notify command runs in the background of the run that called it: polled.
    let calls_at_least = |n: usize| {
        wait_for("the notify command's calls", 10, || {
            let calls = std::fs::read_to_string(&notified).unwrap_or_default();
            (calls.lines().count() >= n).then_some(calls)
        })
    };
    let calls = calls_at_least(1);
    assert_eq!(
        calls.lines().count(),
        1,
        "one call to a human across three runs: {calls}"
    );
    assert!(calls.contains("No space left on device"), "{calls}");
    assert!(
        w.inbox("t1", "pm").is_empty(),
        "nothing delivered without its intent saved"
    );

    std::fs::remove_file(&filler).unwrap();
    ok(&run(w.task().args(["checkin", "t1"])));
    assert!(in_ledger(&w, "t1", &h));
    let inbox = inbox_of(&w, 1);
    assert!(inbox[0].contains(&h), "{}", inbox[0]);
    let open = w.state("t1")["escalations"].to_string();
    assert!(!open.contains("cannot be saved"), "closed on recovery: {open}");
    assert_eq!(w.events_of("t1", "storage_recovered").len(), 1);
    // A later episode is a new one: the human is called again.
    let filler = disk.fill();
    let _ = run(w.task().args(["checkin", "t1"]));
    std::fs::remove_file(&filler).unwrap();
    let calls = calls_at_least(2);
    assert_eq!(calls.lines().count(), 2, "a new episode, a new call: {calls}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn cron_mode_checkins_settle_a_killed_one_the_same_way() {
    let w = World::new();
    w.new_task("t1", "");
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
        "--no-daemon",
    ])));
    w.wait_demo_prompt(&w.pane("t1", "pm"));
    assert!(w.daemon_pid().is_none(), "cron mode: no daemon");
    let h = file_name(&w.handoff("t1", "dev", "COMPLETE").write());
    let gate = w.dir.path().join("after-deliver");
    let mut cron = w
        .task()
        .env("AO_TEST_PAUSE_AFTER_DELIVER", &gate)
        .args(["checkin", "t1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("task checkin at the delivery window", 20, || {
        reached(&gate).exists().then_some(())
    });
    assert_eq!(inbox_of(&w, 1).len(), 1);
    cron.kill().unwrap();
    let _ = cron.wait();
    assert!(!in_ledger(&w, "t1", &h), "killed before the record");

    // The next cron run settles it from what the PM received, and sends nothing.
    ok(&run(w.task().args(["checkin", "t1"])));
    assert!(in_ledger(&w, "t1", &h));
    assert_eq!(w.inbox("t1", "pm").len(), 1, "{:#?}", w.inbox("t1", "pm"));
    let second = file_name(&w.handoff("t1", "test", "COMPLETE").write());
    ok(&run(w.task().args(["checkin", "t1"])));
    let inbox = inbox_of(&w, 2);
    assert_eq!(inbox.len(), 2, "{inbox:#?}");
    assert!(!inbox[1].contains(&h) && inbox[1].contains(&second), "{}", inbox[1]);
}
