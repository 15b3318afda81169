//! The supervisor daemon, end to end: the real binary as a background daemon,
//! a real tmux server on a private socket, demo agents as the PM.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn start_idle_pm(w: &World, task: &str, extra_md: &str) {
    ok(&run(w.task().args(["new", task])));
    if !extra_md.is_empty() {
        let p = w.project.join("tasks").join(task).join("task.md");
        std::fs::write(&p, format!("# Task: {task}\n\n## Agent Config\n{extra_md}\n")).unwrap();
    }
    let out = ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        task,
        "--runtime",
        "demo",
    ])));
    assert!(out.contains("Supervisor:") || out.contains("daemon"), "{out}");
    let pane = w.state(task)["agents"]["pm"]["pane"].as_str().unwrap().to_string();
    wait_for("the PM prompt", 20, || {
        w.capture(&pane).contains("demo> ").then_some(())
    });
}

fn handoff(w: &World, task: &str, agent: &str, status: &str) -> String {
    ok(&run_with_stdin(
        w.task()
            .args(["handoff", task, "--from", agent, "--status", status, "--body-file", "-"]),
        format!("## Completed Work\n{agent} finished.\n").as_bytes(),
    ))
    .trim()
    .to_string()
}

fn raw_request(w: &World, bytes: &[u8]) -> Value {
    let mut s = UnixStream::connect(w.daemon_socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or(Value::Null)
}

#[test]
fn a_handoff_wakes_the_pm_and_a_burst_is_one_checkin() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let t0 = Instant::now();
    handoff(&w, "t1", "dev", "NEEDS_REVIEW");
    let inbox = wait_for("the check-in in the PM pane", 10, || {
        let i = w.inbox("t1", "pm");
        (!i.is_empty()).then_some(i)
    });
    eprintln!("handoff → check-in in {:?}", t0.elapsed());
    assert_eq!(inbox.len(), 1);
    assert!(
        inbox[0].contains("New handoffs (1):") && inbox[0].contains("review requested: dev"),
        "{}",
        inbox[0]
    );

    // Ten handoffs within ~100 ms become one check-in listing all ten.
    let task = agent_orchestrator::task::Task::new(&w.project, "t1".parse().unwrap()).unwrap();
    let from: agent_orchestrator::names::AgentName = "test".parse().unwrap();
    for _ in 0..10 {
        agent_orchestrator::handoff::write(
            &task.handoffs(),
            &agent_orchestrator::handoff::NewHandoff {
                from: &from,
                status: agent_orchestrator::handoff::Status::Complete,
                target: None,
                next: None,
                body: "## Completed Work\nran a test\n",
                now: chrono::Local::now(),
            },
        )
        .unwrap();
    }
    let inbox = wait_for("the burst check-in", 10, || {
        let i = w.inbox("t1", "pm");
        (i.len() >= 2).then_some(i)
    });
    std::thread::sleep(Duration::from_millis(800));
    let inbox_after = w.inbox("t1", "pm");
    assert_eq!(inbox_after.len(), 2, "exactly one more check-in: {inbox_after:?}");
    assert!(inbox[1].contains("New handoffs (10):"), "{}", inbox[1]);
    assert_eq!(w.state("t1")["ledger"].as_object().unwrap().len(), 11);

    let log = ok(&run(w.task().args(["log", "t1", "--json"])));
    let kinds: Vec<String> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "checkin").count(), 2, "{kinds:?}");
    assert!(kinds.contains(&"spawn".to_string()));

    // The PM's own COMPLETE is checked in at once too: that is what records the phase.
    handoff(&w, "t1", "pm", "COMPLETE");
    wait_for("the check-in after the PM's COMPLETE", 10, || {
        (w.inbox("t1", "pm").len() == 3).then_some(())
    });
}

#[test]
fn socket_permissions_single_instance_and_bad_requests() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let sock = w.daemon_socket();
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(sock.parent().unwrap()).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let pid = w.daemon_pid().unwrap();

    // A second daemon is refused and leaves the live socket alone.
    let o = run(w.task().args(["daemon"]));
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("already running"), "{}", stderr(&o));
    assert_eq!(w.daemon_pid(), Some(pid));

    // Garbage, a wrong version and a 10 MB line get error responses; the daemon keeps serving.
    assert_eq!(raw_request(&w, b"this is not json\n")["kind"], "error");
    assert_eq!(raw_request(&w, b"{\"v\":99,\"cmd\":\"ping\"}\n")["kind"], "error");
    let big = vec![b'x'; 10 * 1024 * 1024];
    let r = raw_request(&w, &big);
    assert!(r["kind"] == "error" || r.is_null(), "{r}");
    assert_eq!(raw_request(&w, b"{\"v\":1,\"cmd\":\"ping\"}\n")["kind"], "pong");
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"]["task"], "t1");

    // kill -9 leaves a stale socket; the next daemon replaces it.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_for("the daemon to die", 10, || (w.daemon_pid().is_none()).then_some(()));
    assert!(sock.exists(), "a stale socket is left behind");
    let mut child = w
        .task()
        .args(["daemon"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let new_pid = wait_for("the new daemon", 10, || w.daemon_pid());
    assert_eq!(new_pid as u32, child.id());
    let out = ok(&run(w.task().args(["shutdown"])));
    assert!(out.contains("stopped"), "{out}");
    assert!(child.wait().unwrap().success());
    assert!(!sock.exists(), "a clean shutdown removes the socket");
}

#[test]
fn kill_9_loses_and_repeats_nothing_and_keeps_the_panes() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let pane = w.state("t1")["agents"]["pm"]["pane"].as_str().unwrap().to_string();
    let mut written = Vec::new();
    let mut child: Option<std::process::Child> = None;
    for round in 0..20 {
        // Kill whichever daemon is running at a moment that varies by round.
        std::thread::sleep(Duration::from_millis(40 + (round * 37) % 200));
        if let Some(pid) = w.daemon_pid() {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if let Some(mut c) = child.take() {
            let _ = c.wait();
        }
        let st: Value = serde_json::from_slice(&std::fs::read(w.project.join("tasks/t1/pm_state.json")).unwrap())
            .expect("pm_state.json is valid JSON after every kill");
        assert_eq!(st["version"], 2);
        // Handoffs keep arriving while no daemon runs.
        written.push(handoff(&w, "t1", "dev", "COMPLETE"));
        let log = std::fs::File::create(w.dir.path().join(format!("daemon-{round}.log"))).unwrap();
        child = Some(
            w.task()
                .args(["daemon", "-v"])
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.daemon_pid().is_none() {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(w.dir.path().join(format!("daemon-{round}.log"))).unwrap_or_default();
                panic!("round {round}: the restarted daemon does not answer; its log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        written.push(handoff(&w, "t1", "test", "COMPLETE"));
    }
    let names: Vec<String> = written
        .iter()
        .map(|p| {
            std::path::Path::new(p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        let st = w.state("t1");
        if names.iter().all(|n| st["ledger"].get(n).is_some()) {
            break st;
        }
        if Instant::now() > deadline {
            let events = std::fs::read_to_string(w.project.join("tasks/t1/events.jsonl")).unwrap_or_default();
            let tail: Vec<&str> = events.lines().rev().take(8).collect();
            panic!(
                "not every handoff reached the ledger; last events: {tail:#?}\nPM screen:\n{}",
                w.capture(&pane)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let lineage: Vec<&str> = st["lineage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    let mut dedup = lineage.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), lineage.len(), "no handoff processed twice");
    for n in &names {
        assert!(lineage.contains(&n.as_str()), "{n} processed");
    }
    assert_eq!(
        w.state("t1")["agents"]["pm"]["pane"],
        pane.as_str(),
        "the same PM pane after restarts"
    );
    assert!(w.capture(&pane).contains("demo> "), "the PM survived every daemon kill");
    if let Some(mut c) = child {
        let _ = run(w.task().args(["shutdown"]));
        let _ = c.wait();
    }
}

#[test]
fn scheduled_checkins_fire_and_are_skipped_when_nothing_changed() {
    let w = World::new();
    start_idle_pm(&w, "t1", "checkin: 1s");
    wait_for("a skipped scheduled check-in", 15, || {
        let log = std::fs::read_to_string(w.project.join("tasks/t1/events.jsonl")).unwrap_or_default();
        log.contains("\"checkin_skipped\"").then_some(())
    });
    assert!(w.inbox("t1", "pm").is_empty(), "nothing was sent to the PM");
}

#[test]
fn a_dead_agent_becomes_a_signal_to_the_pm() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let h = handoff(&w, "t1", "pm", "IN_PROGRESS");
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
    ])));
    let dpane = w.state("t1")["agents"]["dev"]["pane"].as_str().unwrap().to_string();
    wait_for("dev's prompt", 20, || {
        w.capture(&dpane).contains("demo> ").then_some(())
    });
    let o = w.tmux(&["display-message", "-p", "-t", &dpane, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let inbox = wait_for("the death signal in the PM pane", 15, || {
        let i = w.inbox("t1", "pm");
        i.iter().find(|m| m.contains("agent died")).cloned()
    });
    assert!(inbox.contains("dev"), "{inbox}");
    assert_eq!(w.state("t1")["agents"]["dev"]["status"], "dead");
}

#[test]
fn a_dead_pm_is_restarted_with_backoff_then_the_task_is_blocked_and_a_human_notified() {
    let w = World::new();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "notify = [\"touch\", \"{dir}/NOTIFIED\"]\n").unwrap();
    start_idle_pm(&w, "t1", "");
    let kill_pm = |w: &World| {
        let pane = w.state("t1")["agents"]["pm"]["pane"].as_str().unwrap().to_string();
        wait_for("the PM prompt", 20, || {
            w.capture(&pane).contains("demo> ").then_some(())
        });
        let o = w.tmux(&["display-message", "-p", "-t", &pane, "#{pane_pid}"]);
        let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        pane
    };
    let mut panes = Vec::new();
    for n in 1..=3 {
        panes.push(kill_pm(&w));
        wait_for("a restart", 30, || {
            let st = w.state("t1");
            (st["pm_restarts"].as_array().unwrap().len() == n && st["agents"]["pm"]["status"] == "running")
                .then_some(())
        });
    }
    let restarts: Vec<chrono::DateTime<chrono::Utc>> =
        serde_json::from_value(w.state("t1")["pm_restarts"].clone()).unwrap();
    assert!(
        restarts[2] - restarts[1] >= chrono::Duration::milliseconds(1900),
        "backoff grows: {restarts:?}"
    );
    let new_pane = w.state("t1")["agents"]["pm"]["pane"].as_str().unwrap().to_string();
    assert!(!panes.contains(&new_pane), "a fresh pane each time");
    kill_pm(&w);
    wait_for("the task to be BLOCKED", 30, || {
        (w.state("t1")["phase"] == "BLOCKED").then_some(())
    });
    wait_for("the notify command", 10, || {
        w.project.join("tasks/t1/NOTIFIED").exists().then_some(())
    });
    let st = w.state("t1");
    assert_eq!(st["pm_restarts"].as_array().unwrap().len(), 3, "no restart storm");
    assert!(st["escalations"][0]["reason"].as_str().unwrap().contains("PM died"));
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(human.contains("NEEDS A HUMAN: the PM died"), "{human}");
    let progress = std::fs::read_to_string(w.project.join("tasks/t1/progress.md")).unwrap();
    assert!(progress.contains("## Needs a Human\n- the PM died"), "{progress}");
}

#[test]
fn the_systemd_unit_installs_and_verifies() {
    let w = World::new();
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["service", "install", "--json"])))).unwrap();
    let unit = std::path::PathBuf::from(v["unit"].as_str().unwrap());
    assert!(unit.starts_with(w.dir.path().join("config/systemd/user")), "{unit:?}");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(&format!("ExecStart={} daemon", bin().display())),
        "{text}"
    );
    for needle in [
        "Restart=on-failure",
        "KillMode=process",
        "StartLimitBurst=",
        "SSH_AUTH_SOCK",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => eprintln!("systemd-analyze not installed; scripts/test installs it"),
    }
    let out = ok(&run(w.task().args(["service", "status"])));
    assert!(out.contains(&unit.display().to_string()), "{out}");
    ok(&run(w.task().args(["service", "uninstall"])));
    assert!(!unit.exists());
}

#[test]
fn killing_the_daemons_whole_process_group_never_kills_an_agent() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let pane = w.state("t1")["agents"]["pm"]["pane"].as_str().unwrap().to_string();
    let pid = w.daemon_pid().unwrap();
    let pgid = unsafe { libc::getpgid(pid) };
    assert!(pgid > 0);
    assert_ne!(
        pgid,
        unsafe { libc::getpgid(0) },
        "the daemon has its own process group"
    );
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    wait_for("the daemon to die", 10, || w.daemon_pid().is_none().then_some(()));
    assert!(
        w.capture(&pane).contains("demo> "),
        "the PM is alive after the daemon's group was killed"
    );
    // A new daemon re-adopts the same pane and supervises it.
    let mut child = w
        .task()
        .args(["daemon"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the new daemon", 10, || w.daemon_pid());
    handoff(&w, "t1", "dev", "COMPLETE");
    wait_for("a check-in through the re-adopted pane", 10, || {
        (!w.inbox("t1", "pm").is_empty()).then_some(())
    });
    assert_eq!(w.state("t1")["agents"]["pm"]["pane"], pane.as_str());
    ok(&run(w.task().args(["shutdown"])));
    let _ = child.wait();
}

/// Recorded check-ins' handoff file names, in order (from events.jsonl).
fn checked_in_files(w: &World, task: &str) -> Vec<String> {
    let log = std::fs::read_to_string(w.project.join("tasks").join(task).join("events.jsonl")).unwrap_or_default();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "checkin" && e["data"]["recorded"] == true)
        .flat_map(|e| {
            e["data"]["files"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|f| f.as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn odd_handoff_files_are_handled_by_the_file_rules_and_never_block_the_daemon() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let dir = w.project.join("tasks/t1/handoffs");
    let body = |agent: &str, status: &str| {
        format!("# Handoff: {agent}\n**Status:** {status}\n\n## Completed Work\n{agent} done.\n")
    };

    // A symlink to a secret and a FIFO: never read, never block.
    let secret = w.dir.path().join("id_secret");
    std::fs::write(&secret, "# Handoff: dev\n**Status:** COMPLETE\nPRIVATE-KEY-MATERIAL\n").unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("dev-20251127-090001.md")).unwrap();
    let fifo = dir.join("test-20251127-090002.md");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    // A handoff with a 2001 mtime (rsync keeps mtimes; clocks differ).
    let old = dir.join("plan-20010101-000000.md");
    std::fs::write(&old, body("plan", "COMPLETE")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(978_307_200))
        .unwrap();
    wait_for("the old-mtime handoff checked in", 15, || {
        checked_in_files(&w, "t1")
            .contains(&"plan-20010101-000000.md".to_string())
            .then_some(())
    });

    // One written slowly in chunks, with another handoff landing mid-write:
    // the check-in it causes must not take the half-written file.
    let slow = dir.join("explore-20251127-090003.md");
    let mut f = std::fs::File::create(&slow).unwrap();
    f.write_all(b"# Handoff: explore\n").unwrap();
    f.sync_all().unwrap();
    let mid = handoff(&w, "t1", "architect", "COMPLETE");
    let mid = std::path::Path::new(&mid)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    wait_for("the mid-write handoff checked in", 15, || {
        checked_in_files(&w, "t1").contains(&mid).then_some(())
    });
    assert!(
        !checked_in_files(&w, "t1").contains(&"explore-20251127-090003.md".to_string()),
        "a half-written handoff was taken"
    );
    f.write_all(b"**Status:** NEEDS_REVIEW\n\n## Completed Work\nexplored slowly.\n")
        .unwrap();
    drop(f);

    // One written to a dot-temp name and renamed into place.
    let tmp = dir.join(".review-20251127-090004.md.tmp");
    std::fs::write(&tmp, body("review", "COMPLETE")).unwrap();
    std::fs::rename(&tmp, dir.join("review-20251127-090004.md")).unwrap();

    wait_for("the slow and the renamed handoffs checked in", 15, || {
        let f = checked_in_files(&w, "t1");
        (f.contains(&"explore-20251127-090003.md".to_string()) && f.contains(&"review-20251127-090004.md".to_string()))
            .then_some(())
    });
    let st = w.state("t1");
    let slow_entry = &st["ledger"]["explore-20251127-090003.md"];
    assert_eq!(
        slow_entry["size"].as_u64().unwrap(),
        std::fs::metadata(&slow).unwrap().len(),
        "the ledger holds the complete file: {slow_entry}"
    );

    // The daemon still answers, and no file was taken twice or at all when it must not be.
    assert_eq!(raw_request(&w, b"{\"v\":1,\"cmd\":\"ping\"}\n")["kind"], "pong");
    std::thread::sleep(Duration::from_millis(600));
    let files = checked_in_files(&w, "t1");
    let mut sorted = files.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), files.len(), "a handoff was checked in twice: {files:?}");
    assert!(
        !files.iter().any(|f| f.starts_with("dev-") || f.starts_with("test-")),
        "{files:?}"
    );
    assert!(st["ledger"].get("dev-20251127-090001.md").is_none());
    assert!(st["ledger"].get("test-20251127-090002.md").is_none());
    assert!(!w.inbox("t1", "pm").iter().any(|m| m.contains("PRIVATE-KEY")));
    let status = ok(&run(w.task().args(["status", "t1", "--json"])));
    assert!(status.contains("\"phase\""), "{status}");
}

#[test]
fn spawn_send_and_stop_go_through_the_daemon_and_work_without_one() {
    let w = World::new();
    start_idle_pm(&w, "t1", "");
    let h = handoff(&w, "t1", "pm", "IN_PROGRESS");

    // A CLI pointed at other sessions than the daemon's is refused by the daemon, not half-served.
    let o = run(w
        .task()
        .env("AO_SESSION_PREFIX", "other")
        .args(["spawn", "t1", "dev", "--handoff", &h]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("the daemon drives"), "{}", stderr(&o));
    assert!(!w.sessions().iter().any(|s| s.contains("dev")), "{:?}", w.sessions());

    let v: Value = serde_json::from_str(&ok(&run(w.task().args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["session"], "aot-t1-dev");
    let pane = v["pane"].as_str().unwrap().to_string();
    wait_for("dev's prompt", 20, || w.capture(&pane).contains("demo> ").then_some(()));
    let v: Value = serde_json::from_str(&ok(&run(w.task().args([
        "send",
        "t1",
        "dev",
        "--message",
        "-rf; echo hi",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["outcome"], "delivered", "{v}");
    assert_eq!(w.inbox("t1", "dev").last().map(String::as_str), Some("-rf; echo hi"));
    // A daemon-side error keeps its exit code: an agent that was never started is "not found".
    let o = run(w.task().args(["send", "t1", "review", "--message", "hello"]));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));

    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["stop", "t1", "--json"])))).unwrap();
    let ended: Vec<&str> = v["stopped"]["ended"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(ended.contains(&"aot-t1-pm") && ended.contains(&"aot-t1-dev"), "{v}");
    let tasks = raw_request(&w, b"{\"v\":1,\"cmd\":\"tasks\"}\n");
    assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(0), "{tasks}");

    // Without a daemon the same verbs run in the CLI.
    ok(&run(w.task().arg("shutdown")));
    let v: Value = serde_json::from_str(&ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["session"], "aot-t1-dev");
    assert!(w.daemon_pid().is_none(), "spawn must not start a daemon");
}
