//! Handoffs are final only when complete and quiet (issue 13): the real daemon, a real
//! tmux server on a private socket, an idle demo agent as the PM whose inbox records every
//! check-in it is given.
//!
//! "Exactly one check-in" is checked with a barrier, not a sleep: after the handoff under
//! test is announced, a sentinel handoff is renamed in (final at once) and the test waits
//! for its check-in; every check-in before it is then in the inbox to count.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use common::*;
use serde_json::Value;

fn handoffs(w: &World, task: &str) -> PathBuf {
    w.project.join("tasks").join(task).join("handoffs")
}

/// One `printf … >> file`: open for appending, write, close.
fn append(path: &std::path::Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// A complete handoff written aside and renamed in (as `task handoff` does): final at once.
fn rename_in(w: &World, task: &str, file: &str, status: &str) {
    let dir = handoffs(w, task);
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(
        &tmp,
        format!("# Handoff: test\n**Status:** {status}\n\n## Completed Work\nsentinel\n"),
    )
    .unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

/// Wait until a check-in names `file`.
fn announced(w: &World, task: &str, file: &str) {
    wait_until(
        &format!("a check-in naming {file}"),
        Duration::from_secs(20),
        Duration::from_millis(50),
        || w.inbox(task, "pm").iter().any(|m| m.contains(file)).then_some(()),
        || format!("inbox: {:?}\n--- daemon log\n{}", w.inbox(task, "pm"), w.daemon_log()),
    );
}

/// After what is under test was announced: rename in a sentinel and wait for its
/// check-in; every check-in before it is in the inbox then.
fn inbox_through(w: &World, task: &str, sentinel: &str) -> Vec<String> {
    rename_in(w, task, sentinel, "COMPLETE");
    let inbox = wait_until(
        &format!("the check-in of {sentinel}"),
        Duration::from_secs(20),
        Duration::from_millis(50),
        || {
            let i = w.inbox(task, "pm");
            i.iter().any(|m| m.contains(sentinel)).then_some(i)
        },
        || format!("inbox: {:?}\n--- daemon log\n{}", w.inbox(task, "pm"), w.daemon_log()),
    );
    let last = inbox.last().unwrap();
    assert!(last.contains(sentinel) && last.contains("New handoffs (1):"), "{last}");
    inbox
}

const CHUNKS: [&str; 5] = [
    "# Handoff: dev\n",
    "**Status:** COMPLETE\n",
    "\n## Completed Work\n",
    "Wrote the parser and its tests.\n",
    "- all 12 tests pass\n",
];

#[test]
fn appended_and_slowly_written_handoffs_are_announced_once_whole_and_a_change_as_amended() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let dir = handoffs(&w, "t1");

    // Five appends in a row, as `printf … >> f` five times.
    let fast = "dev-20261123-100000.md";
    for c in CHUNKS {
        append(&dir.join(fast), c);
    }
    announced(&w, "t1", fast);
    let inbox = inbox_through(&w, "t1", "test-20261123-100001.md");
    assert_eq!(inbox.len(), 2, "one check-in for the appended handoff: {inbox:#?}");
    assert!(
        inbox[0].contains(&format!("New handoffs (1):\n- {fast}: COMPLETE — Wrote the parser")),
        "announced whole: {}",
        inbox[0]
    );

    // Three writes with pauses, as an agent running one shell command after another.
    let slow = "dev-20261123-100100.md";
    for (i, c) in [
        "# Handoff: dev\n**Status:** NEEDS_REVIEW\n",
        "\n## Completed Work\n",
        "Fixed the lexer.\n",
    ]
    .iter()
    .enumerate()
    {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(300)); // the scenario: an agent's pace
        }
        append(&dir.join(slow), c);
    }
    announced(&w, "t1", slow);
    let inbox = inbox_through(&w, "t1", "test-20261123-100101.md");
    assert_eq!(inbox.len(), 4, "one check-in for the slow handoff: {inbox:#?}");
    assert!(
        inbox[2].contains(&format!("- {slow}: NEEDS_REVIEW — Fixed the lexer.")),
        "announced whole: {}",
        inbox[2]
    );

    // A change after the announcement: announced once more, as amended, never as new.
    append(&dir.join(fast), "- and the docs\n");
    wait_until(
        "the amendment's check-in",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || (w.inbox("t1", "pm").len() > 4).then_some(()),
        || w.daemon_log(),
    );
    let inbox = inbox_through(&w, "t1", "test-20261123-100201.md");
    assert_eq!(inbox.len(), 6, "one check-in for the amendment: {inbox:#?}");
    assert!(
        inbox[4].contains(&format!(
            "Amended handoffs (changed after they were announced) (1):\n- {fast}: AMENDED, now COMPLETE"
        )),
        "{}",
        inbox[4]
    );
    assert!(!inbox[4].contains("New handoffs"), "{}", inbox[4]);
    // The ledger knows it by name: still five entries once the last check-in is recorded
    // (recorded after delivery, so waited for).
    wait_for("the last check-in recorded in the ledger", 10, || {
        let ledger = w.state("t1")["ledger"].clone();
        ledger
            .get("test-20261123-100201.md")
            .map(|_| assert_eq!(ledger.as_object().unwrap().len(), 5, "{ledger}"))
    });
}

#[test]
fn skewed_mtimes_written_while_the_daemon_is_down_or_pulled_by_rsync_are_seen_once() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let pid = w.daemon_pid().expect("task start started a daemon");
    // SAFETY: the daemon this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_for("the daemon to die", 10, || w.daemon_pid().is_none().then_some(()));

    // A remote host whose clock is years ahead, and rsync keeping its mtime.
    let file = "dev-20261123-110000.md";
    let path = handoffs(&w, "t1").join(file);
    std::fs::write(
        &path,
        "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nFrom the future.\n",
    )
    .unwrap();
    let y2035 = std::time::UNIX_EPOCH + Duration::from_secs(2_051_222_400); // 2035-01-01
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(y2035)
        .unwrap();

    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(w.dir.path().join("state/agent-orchestrator/daemon.log"))
        .unwrap();
    let mut child = w
        .task()
        .arg("daemon")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_for("the new daemon", 10, || w.daemon_pid());

    announced(&w, "t1", file);
    let inbox = inbox_through(&w, "t1", "test-20261123-110001.md");
    let with_it: Vec<&String> = inbox.iter().filter(|m| m.contains(file)).collect();
    assert_eq!(with_it.len(), 1, "seen exactly once: {inbox:#?}");
    assert!(with_it[0].contains("From the future."), "{}", with_it[0]);

    // Pulled from a remote host while the daemon runs: rsync with the pull's own flags
    // (mtimes kept, temp files outside, renamed into place), one far ahead, one far behind.
    let remote = w.dir.path().join("remote/handoffs");
    std::fs::create_dir_all(&remote).unwrap();
    let tdir = w.project.join("tasks/t1");
    let pulled = [
        ("dev-20261123-110100.md", y2035),
        (
            "dev-20261123-110200.md",
            std::time::UNIX_EPOCH + Duration::from_secs(978_307_200),
        ),
    ];
    for (f, mtime) in pulled {
        let p = remote.join(f);
        std::fs::write(
            &p,
            format!("# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nPulled {f}.\n"),
        )
        .unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
    }
    let partial = tdir.join(".pull-partial");
    std::fs::create_dir_all(partial.join("keep")).unwrap();
    std::fs::create_dir_all(partial.join("tmp")).unwrap();
    let out = std::process::Command::new("rsync")
        .args(["-a", "--safe-links", "--delay-updates", "--exclude=.*"])
        .arg(format!("--partial-dir={}", partial.join("keep").display()))
        .arg(format!("--temp-dir={}", partial.join("tmp").display()))
        .arg("--")
        .arg(&remote)
        .arg(format!("{}/", tdir.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (f, _) in pulled {
        announced(&w, "t1", f);
    }
    let inbox = inbox_through(&w, "t1", "test-20261123-110300.md");
    for (f, _) in pulled {
        let n = inbox
            .iter()
            .filter(|m| m.contains(&format!("- {f}: COMPLETE — Pulled")))
            .count();
        assert_eq!(n, 1, "{f} announced once: {inbox:#?}");
    }
    // SAFETY: the daemon this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
}

#[test]
fn a_watcher_queue_overflow_is_warned_counted_and_its_checkin_stays_under_the_cap() {
    let w = World::new();
    // The hook stops the daemon's watcher thread at its first event until `release` exists,
    // so the kernel's queue (fs.inotify.max_queued_events, 16384 here) really overflows.
    let release = w.dir.path().join("release-watcher");
    let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_TEST_PAUSE_WATCHER", release.to_str().unwrap())
        .run();
    let dir = handoffs(&w, "t1");
    // The watcher's first event: it pauses there.
    std::fs::write(dir.join("wake.txt"), "x").unwrap();

    // 200 reports renamed in at once (a big pull), each line ~70 bytes: far over 4 KB listed.
    let aside = w.project.join("tasks/t1/scratchpad/burst");
    std::fs::create_dir_all(&aside).unwrap();
    for i in 0..200 {
        let f = format!("dev-20261123-12{:02}{:02}.md", i / 60, i % 60);
        std::fs::write(
            aside.join(&f),
            format!("# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nStep {i} done.\n"),
        )
        .unwrap();
    }
    for e in std::fs::read_dir(&aside).unwrap() {
        let e = e.unwrap();
        std::fs::rename(e.path(), dir.join(e.file_name())).unwrap();
    }
    // Enough events to overflow the queue: each append is a modify and a close.
    for _ in 0..max {
        append(&dir.join("noise.txt"), "n");
    }
    std::fs::write(&release, "").unwrap();

    wait_until(
        "the overflow warning in the daemon log",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || {
            w.daemon_log()
                .lines()
                .any(|l| l.contains("WARN") && l.contains("overflowed"))
                .then_some(())
        },
        || w.daemon_log(),
    );
    let status: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    let overflows = status["task"]["watcher"]["overflows"]
        .as_u64()
        .or_else(|| status["watcher"]["overflows"].as_u64());
    assert!(overflows >= Some(1), "{status:#}");
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(human.contains("event queue overflow"), "{human}");

    let inbox = wait_until(
        "the check-in of the 200 reports",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || {
            let i = w.inbox("t1", "pm");
            i.iter().any(|m| m.contains("more handoffs not listed")).then_some(i)
        },
        || format!("inbox: {:?}\n--- daemon log\n{}", w.inbox("t1", "pm"), w.daemon_log()),
    );
    for m in &inbox {
        assert!(m.len() <= 4096, "{} bytes: {m}", m.len());
    }
    let big = inbox.iter().find(|m| m.contains("more handoffs not listed")).unwrap();
    assert!(big.contains("New handoffs ("), "{big}");
    assert!(big.contains("progress.md") && big.contains("`task log t1`"), "{big}");
}

#[test]
fn events_the_busy_daemon_drops_are_counted_and_every_handoff_is_still_recorded_once() {
    let w = World::new();
    // The hook stops the daemon's main loop at the first event until `release` exists,
    // so the watcher's events fill the daemon's queue (256) and the rest are dropped.
    let release = w.dir.path().join("release-supervisor");
    w.start_idle_pm("t1")
        .new_task("")
        .env("AO_TEST_PAUSE_SUPERVISOR", release.to_str().unwrap())
        .run();
    let dir = handoffs(&w, "t1");
    std::fs::write(dir.join("wake.txt"), "x").unwrap();
    let aside = w.project.join("tasks/t1/scratchpad/burst");
    std::fs::create_dir_all(&aside).unwrap();
    let names: Vec<String> = (0..400)
        .map(|i| format!("dev-20261124-12{:02}{:02}.md", i / 60, i % 60))
        .collect();
    for (i, f) in names.iter().enumerate() {
        std::fs::write(
            aside.join(f),
            format!("# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nStep {i} done.\n"),
        )
        .unwrap();
    }
    for f in &names {
        std::fs::rename(aside.join(f), dir.join(f)).unwrap();
    }
    let dropped = |at_least: u64| {
        wait_until(
            "the dropped events counted",
            Duration::from_secs(20),
            Duration::from_millis(50),
            || {
                let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).ok()?;
                let watcher = v["task"]["watcher"].clone();
                let watcher = if watcher.is_null() {
                    v["watcher"].clone()
                } else {
                    watcher
                };
                (watcher["dropped"].as_u64() >= Some(at_least)).then_some(watcher)
            },
            || w.daemon_log(),
        )
    };
    // The first drop is told at once, while the daemon is still stuck.
    dropped(1);
    std::fs::write(&release, "").unwrap();
    // The rest of the burst's count is saved at the daemon's next tick: 400 events for a
    // queue of 256, so over a hundred were dropped.
    dropped(100);
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(human.contains("dropped while the daemon was busy"), "{human}");
    assert!(
        w.daemon_log()
            .lines()
            .any(|l| l.contains("WARN") && l.contains("too busy")),
        "{}",
        w.daemon_log()
    );

    // Every handoff is recorded, once, by the rescans.
    wait_until(
        "all 400 handoffs in the ledger",
        Duration::from_secs(40),
        Duration::from_millis(100),
        || {
            let ledger = w.state("t1")["ledger"].clone();
            names.iter().all(|n| ledger.get(n).is_some()).then_some(())
        },
        || {
            format!(
                "{} in the ledger\n{}",
                w.state("t1")["ledger"].as_object().map_or(0, |m| m.len()),
                w.daemon_log()
            )
        },
    );
    let inbox = w.inbox("t1", "pm");
    for n in &names {
        let told = inbox.iter().filter(|m| m.contains(n.as_str())).count();
        assert!(told <= 1, "{n} told {told} times");
    }
}

#[test]
fn a_status_line_without_a_body_is_not_announced_when_the_body_follows_after_a_pause() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let file = "dev-20261123-130000.md";
    let path = handoffs(&w, "t1").join(file);
    append(&path, "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\n");
    // The scenario: an agent thinking between its status line and its body, longer than
    // the quiet time of a handoff that reads complete.
    std::thread::sleep(handoff_quiet() * 2);
    append(&path, "Ported the lexer.\n");
    announced(&w, "t1", file);
    let inbox = inbox_through(&w, "t1", "test-20261123-130001.md");
    assert_eq!(inbox.len(), 2, "one check-in for the handoff: {inbox:#?}");
    assert!(
        inbox[0].contains(&format!("- {file}: COMPLETE — Ported the lexer.")),
        "{}",
        inbox[0]
    );
}

/// The daemon's quiet time for a handoff that reads complete.
fn handoff_quiet() -> Duration {
    agent_orchestrator::store::handoffs::QUIET
}

/// Issue 31: a handoff that lands while no daemon watches (down, or starting and not yet
/// watching) is announced by no event; the check-in that follows the restart still lists it.
#[test]
fn handoffs_written_while_the_daemon_is_down_or_starting_are_in_the_next_checkin() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    w.kill_daemon(None);
    let dir = handoffs(&w, "t1");
    let in_progress = |file: &str, how: &str| {
        std::fs::write(
            dir.join(file),
            format!("# Handoff: dev\n**Status:** IN_PROGRESS\n\n## Completed Work\n{how}\n"),
        )
        .unwrap();
    };
    in_progress("dev-20261127-010000.md", "written while no daemon ran");
    rename_in(&w, "t1", "test-20261127-010001.md", "IN_PROGRESS");

    // The next daemon holds its lock and socket but watches nothing yet: more land then.
    let gate = w.dir.path().join("daemon-start");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(w.dir.path().join("state/agent-orchestrator/daemon.log"))
        .unwrap();
    let mut child = w
        .task()
        .args(["daemon", "-v"])
        .env("AO_TEST_PAUSE_DAEMON_START", &gate)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let reached = w.dir.path().join("daemon-start.reached");
    wait_for("the daemon in its start window", 10, || reached.exists().then_some(()));
    in_progress("review-20261127-010002.md", "written while the daemon started");
    rename_in(&w, "t1", "dev-20261127-010003.md", "IN_PROGRESS");
    std::fs::write(&gate, "").unwrap();
    wait_for("the new daemon", 10, || w.daemon_pid());

    // At once a spoke finishes: its check-in lists every handoff written before it.
    let last = "test-20261127-010004.md";
    rename_in(&w, "t1", last, "COMPLETE");
    announced(&w, "t1", last);
    let inbox = w.inbox("t1", "pm");
    assert_eq!(inbox.len(), 1, "one check-in: {inbox:#?}");
    assert!(inbox[0].contains("New handoffs (5):"), "{}", inbox[0]);
    for f in [
        "dev-20261127-010000.md",
        "test-20261127-010001.md",
        "review-20261127-010002.md",
        "dev-20261127-010003.md",
    ] {
        assert!(inbox[0].contains(f), "{f} in the check-in: {}", inbox[0]);
    }
    // Delivered, then recorded: every one of them in the ledger.
    wait_for("the check-in recorded", 10, || {
        let status = ok(&run(w.task().args(["status", "t1"])));
        status.contains("(0 not yet checked in").then_some(())
    });
    // SAFETY: the daemon this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Issue 31: a handoffs/ removed or moved away and made again is watched again, and a
/// handoff written in the new folder reaches the PM.
#[test]
fn a_handoffs_folder_moved_or_removed_and_made_again_is_watched_again() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let dir = handoffs(&w, "t1");
    rename_in(&w, "t1", "dev-20261127-030000.md", "COMPLETE");
    announced(&w, "t1", "dev-20261127-030000.md");
    let count = |needle: &str| w.daemon_log().lines().filter(|l| l.contains(needle)).count();
    let lost = "handoffs folder was removed or moved away";
    let back = "watching the task's handoffs folder again";
    for (round, gone) in ["moved", "removed"].into_iter().enumerate() {
        if gone == "moved" {
            std::fs::rename(&dir, dir.with_file_name("handoffs.old")).unwrap();
        } else {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        std::fs::create_dir(&dir).unwrap();
        wait_until(
            &format!("the folder {gone} and watched again"),
            Duration::from_secs(20),
            Duration::from_millis(50),
            || (count(lost) > round && count(back) > round).then_some(()),
            || w.daemon_log(),
        );
        let file = format!("test-20261127-03010{round}.md");
        rename_in(&w, "t1", &file, "COMPLETE");
        announced(&w, "t1", &file);
    }
    assert_eq!(count(lost), 2, "{}", w.daemon_log());
    assert_eq!(count(back), 2, "{}", w.daemon_log());
}
