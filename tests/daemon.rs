//! The supervisor daemon, end to end: the real binary as a background daemon,
//! a real tmux server on a private socket, demo agents as the PM.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn handoff(w: &World, task: &str, agent: &str, status: &str) -> String {
    w.handoff(task, agent, status)
        .body(format!("## Completed Work\n{agent} finished.\n"))
        .write()
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
    let (_, out) = w.start_idle_pm("t1").new_task("").run();
    assert!(out.contains("Supervisor:") || out.contains("daemon"), "{out}");
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

    // Ten handoffs landing within a few ms cost at most two check-ins (the first may go at
    // once, the rest are coalesced into the next), which list each of the ten once. They are
    // written (with their fsyncs) aside and renamed in, so a loaded machine cannot stretch
    // the burst.
    let task = agent_orchestrator::store::task::Task::new(&w.project, "t1".parse().unwrap()).unwrap();
    let from: agent_orchestrator::core::names::AgentName = "test".parse().unwrap();
    let aside = task.dir().join("scratchpad/burst");
    std::fs::create_dir_all(&aside).unwrap();
    for _ in 0..10 {
        agent_orchestrator::store::handoffs::write(
            &aside,
            &agent_orchestrator::core::handoff::NewHandoff {
                from: &from,
                status: agent_orchestrator::core::handoff::Status::Complete,
                target: None,
                next: None,
                body: "## Completed Work\nran a test\n",
                now: chrono::Local::now(),
            },
        )
        .unwrap();
    }
    for e in std::fs::read_dir(&aside).unwrap() {
        let e = e.unwrap();
        std::fs::rename(e.path(), task.handoffs().join(e.file_name())).unwrap();
    }
    let told = |i: &[String]| -> usize {
        i.iter()
            .skip(1)
            .map(|m| m.lines().filter(|l| l.starts_with("- test-")).count())
            .sum()
    };
    wait_for("the burst's check-ins", 10, || {
        (told(&w.inbox("t1", "pm")) >= 10).then_some(())
    });

    // The PM's own COMPLETE is checked in at once too: that is what records the phase. Here
    // PLANNING → COMPLETE is not a move of the state machine, so the PM is told so. Its
    // check-in is also the barrier: a burst split in three would show before it.
    handoff(&w, "t1", "pm", "COMPLETE");
    let inbox = wait_for("the check-in after the PM's COMPLETE", 10, || {
        let i = w.inbox("t1", "pm");
        i.iter().any(|m| m.contains("PLANNING → COMPLETE")).then_some(i)
    });
    let burst = inbox.len() - 2;
    assert!((1..=2).contains(&burst), "the burst cost {burst} check-ins: {inbox:#?}");
    assert_eq!(
        told(&inbox[..inbox.len() - 1]),
        10,
        "each of the ten told once: {inbox:#?}"
    );
    assert!(
        inbox[inbox.len() - 1].contains("PLANNING → COMPLETE"),
        "{}",
        inbox[inbox.len() - 1]
    );
    // Delivered, then recorded: the ledger and the log catch up a moment later.
    let kinds = wait_for("every check-in recorded", 10, || {
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
        let ledger = w.state("t1")["ledger"].as_object().unwrap().len();
        (ledger == 12 && kinds.iter().filter(|k| *k == "checkin").count() == inbox.len()).then_some(kinds)
    });
    assert!(kinds.contains(&"spawn".to_string()));
}

/// The events of a task, parsed.
/// The `Agents:` line of a check-in message.
fn agents_line(msg: &str) -> &str {
    msg.lines().find(|l| l.starts_with("Agents:")).unwrap_or("")
}

#[test]
fn checkins_list_agents_as_their_handoffs_say_and_nothing_is_sent_after_the_pms_complete() {
    let w = World::new();
    ok(&run(w.task().args(["new", "t1"])));
    ok(&run(w.task().args(["start", "t1", "--runtime", "demo"])));
    wait_for("the demo task to finish", 120, || {
        w.events("t1")
            .into_iter()
            .find(|e| {
                e["kind"] == "checkin_skipped" && e["data"]["why"].as_str().is_some_and(|w| w.contains("COMPLETE"))
            })
            .map(|_| ())
    });
    let st = w.state("t1");
    assert_eq!(st["phase"], "COMPLETE");
    let inbox = w.inbox("t1", "pm");
    // One check-in per spoke handoff (explore, plan, dev, review, dev, review); none after the PM's COMPLETE.
    assert_eq!(inbox.len(), 6, "{inbox:#?}");
    assert!(
        inbox
            .iter()
            .all(|m| !m.contains("Decide the next step") || !m.contains("phase COMPLETE")),
        "{inbox:#?}"
    );
    let reporting = |agent: &str, n: usize| -> &str {
        inbox
            .iter()
            .filter(|m| m.contains(&format!("- {agent}-")))
            .nth(n)
            .unwrap_or_else(|| panic!("no check-in #{n} reporting {agent}: {inbox:#?}"))
    };
    let m = reporting("explore", 0);
    assert!(
        agents_line(m).contains("explore done") && !agents_line(m).contains("explore running"),
        "{m}"
    );
    assert!(agents_line(reporting("plan", 0)).contains("plan done"));
    assert!(agents_line(reporting("dev", 0)).contains("dev needs review"));
    let approved = reporting("review", 1);
    assert!(
        agents_line(approved).contains("review done") && agents_line(approved).contains("dev needs review"),
        "{approved}"
    );
    for (agent, status) in [
        ("explore", "done"),
        ("plan", "done"),
        ("dev", "needs_review"),
        ("review", "done"),
        ("pm", "running"),
    ] {
        assert_eq!(st["agents"][agent]["status"], status, "{agent}: {}", st["agents"]);
    }
    // The last handoff was checked in (ledger, lineage) though it was not sent.
    let last_pm = st["lineage"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last_pm["from"].as_str(), last_pm["status"].as_str()),
        (Some("pm"), Some("COMPLETE"))
    );
    assert_eq!(st["ledger"].as_object().unwrap().len(), 13);
    let log = ok(&run(w.task().args(["log", "t1"])));
    assert!(
        log.contains("checkin_skipped") && log.contains("the PM declared the task COMPLETE"),
        "{log}"
    );
    let status: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(status["task"]["handoffs_unprocessed"], 0);

    // Scheduled check-ins of a finished task, even with quiet check-ins off, send nothing...
    std::fs::write(
        w.project.join("tasks/t1/task.md"),
        "# Task: t1\n\n## Agent Config\ncheckin: 1s\nquiet_checkins: false\n",
    )
    .unwrap();
    wait_for("a scheduled check-in of the finished task", 30, || {
        w.events("t1")
            .into_iter()
            .find(|e| e["kind"] == "checkin_skipped" && e["data"]["trigger"] == "schedule")
            .map(|_| ())
    });
    assert_eq!(w.inbox("t1", "pm").len(), 6);
    // ...until an agent reports after the PM's COMPLETE: that is news.
    handoff(&w, "t1", "test", "COMPLETE");
    let late = wait_for("the late handoff's check-in", 15, || {
        w.inbox("t1", "pm").get(6).cloned()
    });
    assert!(late.contains("- test-") && late.contains("phase COMPLETE"), "{late}");
    assert!(agents_line(&late).contains("test done"), "{late}");
    ok(&run(w.task().args(["stop", "t1"])));
}

/// Scheduled check-ins (kind checkin or checkin_skipped, trigger schedule): their times.
fn scheduled(w: &World, task: &str) -> Vec<chrono::DateTime<chrono::Utc>> {
    w.events(task)
        .into_iter()
        .filter(|e| e["data"]["trigger"] == "schedule")
        .map(|e| serde_json::from_value(e["time"].clone()).unwrap())
        .collect()
}

fn next_checkin(w: &World, task: &str) -> chrono::DateTime<chrono::Utc> {
    serde_json::from_value(w.state(task)["next_checkin"].clone()).expect("next_checkin is saved")
}

#[test]
fn the_schedule_survives_daemon_restarts() {
    let w = World::new();
    let t0 = chrono::Utc::now();
    w.start_idle_pm("t1").new_task("checkin: 3s").run();
    let every = chrono::Duration::seconds(3);
    let first = next_checkin(&w, "t1");
    assert!(first > t0 && first <= chrono::Utc::now() + every, "{first}");
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"]["next_checkin"], w.state("t1")["next_checkin"]);
    let human = ok(&run(w.task().args(["status", "t1"])));
    let line = human.lines().find(|l| l.starts_with("Next check-in:")).unwrap();
    assert!(!line.ends_with('-'), "{human}");

    // Restarted every 2 s, the daemon still checks in every 3 s: from the saved time, not its start.
    let mut child = None;
    let window = std::time::Instant::now();
    while window.elapsed() < Duration::from_secs(10) {
        w.kill_daemon(child.take());
        child = Some(w.start_daemon(None));
        std::thread::sleep(Duration::from_secs(2));
    }
    let times = scheduled(&w, "t1");
    assert!(times.len() >= 3, "scheduled check-ins in 10 s of restarts: {times:?}");
    let slack = chrono::Duration::milliseconds(1500);
    assert!(
        times[0] - first < slack,
        "the first ran at its saved time {first}: {times:?}"
    );
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] < every + slack,
            "a check-in was pushed back: {times:?}"
        );
        assert!(pair[1] - pair[0] > every - slack, "a check-in was doubled: {times:?}");
    }

    // One missed while no daemon ran runs at once when one is back, and the next follows it.
    assert!(w.daemon_pid().is_some());
    w.kill_daemon(child.take());
    let missed = next_checkin(&w, "t1");
    let before = scheduled(&w, "t1").len();
    wait_for("the saved time to pass", 10, || {
        (chrono::Utc::now() > missed + chrono::Duration::seconds(1)).then_some(())
    });
    let back = chrono::Utc::now();
    let mut c = w
        .task()
        .args(["daemon"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ran = wait_for("the missed check-in", 10, || scheduled(&w, "t1").get(before).copied());
    assert!(
        ran - back < slack,
        "missed check-in ran {} after the restart",
        ran - back
    );
    let next = next_checkin(&w, "t1");
    assert!(next - ran >= every - chrono::Duration::milliseconds(50) && next - ran < every + slack);
    let _ = run(w.task().args(["shutdown"]));
    let _ = c.wait();
}

#[test]
fn socket_permissions_single_instance_and_bad_requests() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
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
    // A verb naming a path for an agent is refused where it arrives, as bad input, and
    // starts nothing.
    let forged = format!(
        "{{\"v\":1,\"cmd\":\"spawn\",\"project\":{:?},\"task\":\"t1\",\"agent\":\"../pm\",\"handoff\":\"/x\",\"runtime\":null,\"tmux\":\"x\"}}\n",
        w.project.display().to_string()
    );
    let r = raw_request(&w, forged.as_bytes());
    assert_eq!(
        (r["kind"].as_str(), r["code"].as_i64()),
        (Some("error"), Some(2)),
        "{r}"
    );
    assert!(r["message"].as_str().unwrap().contains("lower-case"), "{r}");
    assert_eq!(raw_request(&w, b"{\"v\":1,\"cmd\":\"ping\"}\n")["kind"], "pong");
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"]["task"], "t1");

    // kill -9 leaves a stale socket; the next daemon replaces it.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_for("the daemon to die", 10, || (w.daemon_pid().is_none()).then_some(()));
    assert!(sock.exists(), "a stale socket is left behind");
    let mut child = w.start_daemon(None);
    assert_eq!(w.daemon_pid().unwrap() as u32, child.id());
    let out = ok(&run(w.task().args(["shutdown"])));
    assert!(out.contains("stopped"), "{out}");
    assert!(child.wait().unwrap().success());
    assert!(!sock.exists(), "a clean shutdown removes the socket");
}

#[test]
fn kill_9_loses_and_repeats_nothing_and_keeps_the_panes() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let pane = w.pane("t1", "pm");
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
        assert_eq!(st["version"], 4);
        // Handoffs keep arriving while no daemon runs; one that wakes no one (IN_PROGRESS,
        // a raw write in odd rounds) must still be in the check-in that follows (issue 31).
        written.push(handoff(&w, "t1", "dev", "COMPLETE"));
        if round % 2 == 0 {
            written.push(handoff(&w, "t1", "review", "IN_PROGRESS"));
        } else {
            let p = w
                .project
                .join(format!("tasks/t1/handoffs/review-20261127-02{round:02}00.md"));
            std::fs::write(
                &p,
                "# Handoff: review\n**Status:** IN_PROGRESS\n\n## Completed Work\nhalf way\n",
            )
            .unwrap();
            written.push(p.to_string_lossy().into_owned());
        }
        let log = std::fs::File::create(w.dir.path().join(format!("daemon-{round}.log"))).unwrap();
        child = Some(
            w.task()
                .args(["daemon", "-v"])
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        wait_until(
            &format!("round {round}: the restarted daemon to answer"),
            Duration::from_secs(10),
            Duration::from_millis(20),
            || w.daemon_pid(),
            || {
                let log = std::fs::read_to_string(w.dir.path().join(format!("daemon-{round}.log"))).unwrap_or_default();
                format!("its log:\n{log}")
            },
        );
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
    // No manual check-in: the last round's COMPLETE brings every handoff before it.
    let st = wait_until(
        "every handoff in the ledger",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let st = w.state("t1");
            names.iter().all(|n| st["ledger"].get(n).is_some()).then_some(st)
        },
        || {
            let events = std::fs::read_to_string(w.project.join("tasks/t1/events.jsonl")).unwrap_or_default();
            let tail: Vec<&str> = events.lines().rev().take(8).collect();
            format!("last events: {tail:#?}\nPM screen:\n{}", w.capture(&pane))
        },
    );
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
    w.start_idle_pm("t1").new_task("checkin: 1s").run();
    wait_for("a skipped scheduled check-in", 15, || {
        let log = std::fs::read_to_string(w.project.join("tasks/t1/events.jsonl")).unwrap_or_default();
        log.contains("\"checkin_skipped\"").then_some(())
    });
    assert!(w.inbox("t1", "pm").is_empty(), "nothing was sent to the PM");
}

#[test]
fn a_dead_agent_becomes_a_signal_to_the_pm() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let h = handoff(&w, "t1", "pm", "IN_PROGRESS");
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
    ])));
    let dpane = w.pane("t1", "dev");
    w.wait_demo_prompt(&dpane);
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
    w.start_idle_pm("t1").new_task("").run();
    let kill_pm = |w: &World| {
        let pane = w.pane("t1", "pm");
        w.wait_demo_prompt(&pane);
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
    let new_pane = w.pane("t1", "pm");
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
    w.start_idle_pm("t1").new_task("").run();
    let pane = w.pane("t1", "pm");
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
    let mut child = w.start_daemon(None);
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
    w.start_idle_pm("t1").new_task("").run();
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
    // A barrier: once a sentinel renamed in now is checked in, any check-in that could
    // have taken a file twice has run.
    let tmp = dir.join(".plan-20251127-090005.md.tmp");
    std::fs::write(&tmp, body("plan", "COMPLETE")).unwrap();
    std::fs::rename(&tmp, dir.join("plan-20251127-090005.md")).unwrap();
    wait_for("the sentinel checked in", 15, || {
        checked_in_files(&w, "t1")
            .contains(&"plan-20251127-090005.md".to_string())
            .then_some(())
    });
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
    w.start_idle_pm("t1").new_task("").run();
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
    w.wait_demo_prompt(&pane);
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

#[test]
fn next_checkin_follows_the_mode_and_a_bad_schedule_is_reported_at_start() {
    let w = World::new();
    // Cron mode: the crontab line's schedule (*/10, in the tests' UTC), and `task checkin` keeps it.
    ok(&run(w.task().args(["new", "cron1"])));
    let v: Value = serde_json::from_str(&ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "cron1",
        "--runtime",
        "demo",
        "--json",
    ]))))
    .unwrap();
    let next: chrono::DateTime<chrono::Utc> = serde_json::from_value(v["next_checkin"].clone()).unwrap();
    assert_eq!(next.timestamp() % 600, 0, "{next}");
    assert_eq!(w.state("cron1")["next_checkin"], v["next_checkin"]);
    // Without the crontab line nothing schedules it, and status says so.
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "--no-cron",
        "cron2",
        "--runtime",
        "demo",
    ])));
    assert!(w.state("cron2")["next_checkin"].is_null());
    let human = ok(&run(w.task().args(["status", "cron2"])));
    assert!(human.contains("Next check-in: -"), "{human}");

    // Under the daemon, a checkin: that does not parse is reported, not silently dropped.
    ok(&run(w.task().args(["new", "bad"])));
    std::fs::write(
        w.project.join("tasks/bad/task.md"),
        "# Task: bad\n\n## Agent Config\ncheckin: soon\n",
    )
    .unwrap();
    let o = run(w
        .task()
        .env("AO_DEMO_IDLE", "1")
        .args(["start", "bad", "--runtime", "demo"]));
    ok(&o);
    assert!(
        stderr(&o).contains("checkin: \"soon\"") && stderr(&o).contains("scheduled check-ins are off"),
        "{}",
        stderr(&o)
    );
    assert!(w.state("bad")["next_checkin"].is_null());
    let _ = run(w.task().args(["shutdown"]));
}

#[test]
fn the_daemons_answers_keep_the_clis_output_refusals_and_exit_codes() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let h1 = handoff(&w, "t1", "pm", "IN_PROGRESS");
    // In the same second it takes the next suffix: two files all the same.
    let h2 = handoff(&w, "t1", "pm", "IN_PROGRESS");
    assert_ne!(h1, h2);
    let v: Value = serde_json::from_str(&ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h1,
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["reason"], "SPAWN_OK", "{v}");

    // A refusal by the daemon's lanes: exit 6, its reason in --json, its words on stderr.
    let o = run(w.task().args(["spawn", "t1", "dev", "--handoff", &h2, "--json"]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["reason"], "SPAWN_REJECT_ACTIVE_LANE", "{v}");
    assert_eq!(v["agent"], "dev", "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("SPAWN_REJECT_ACTIVE_LANE: "),
        "{v}"
    );
    assert!(
        stderr(&o).contains("error: SPAWN_REJECT_ACTIVE_LANE: dev's lane is busy"),
        "{}",
        stderr(&o)
    );

    // A check-in run by the daemon's actor: its report as --json, one line otherwise.
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["checkin", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"], "t1", "{v}");
    assert!(v["new_handoffs"].is_array(), "{v}");
    let out = ok(&run(w.task().args(["checkin", "t1"])));
    assert!(out.contains("t1: check-in by the daemon: "), "{out}");
    let _ = run(w.task().args(["shutdown"]));
}

/// A permission request pending while the daemon is killed: the hook that asked keeps
/// waiting, the restarted daemon's check-ins still name it, and it is decided exactly once.
#[test]
fn a_permission_request_survives_a_daemon_kill_and_is_decided_once() {
    let w = World::new();
    w.start_idle_pm("t1")
        .new_task("permit_timeout: 60s\npermit_deadline: 120s")
        .run();
    let mut hook = w.permission_hook("t1", "dev", "pip install -e .");
    // The PM is told at once, with the request's id.
    let id = wait_for("the request in the PM's check-in", 20, || {
        w.inbox("t1", "pm").iter().find_map(|m| {
            let at = m.find("task permit t1 p-")? + "task permit t1 ".len();
            Some(m[at..at + 10].to_string())
        })
    });
    w.kill_daemon(None);
    let mut daemon = Some(w.start_daemon(None));
    // Still pending after the restart, and named again by the next check-in.
    let st: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(st["task"]["permissions"][0]["id"], id.as_str(), "{st}");
    ok(&run(w.task().args(["checkin", "t1"])));
    let told = w.inbox("t1", "pm").iter().filter(|m| m.contains(&id)).count();
    assert_eq!(told, 2, "{:?}", w.inbox("t1", "pm"));
    assert!(
        hook.try_wait().unwrap().is_none(),
        "the hook still waits for its answer"
    );

    // Killed again; the PM answers while no daemon runs, then a human tries too.
    w.kill_daemon(daemon.take());
    let permit = |agent: Option<&str>, answer: &str| {
        let mut c = w.task();
        c.args(["permit", "t1", &id, answer]);
        match agent {
            Some(a) => c.env("TASK_AGENT", a).env("TASK_NAME", "t1"),
            None => c.env_remove("TASK_AGENT"),
        };
        run(&mut c)
    };
    ok(&permit(Some("pm"), "allow"));
    assert_eq!(permit(None, "deny").status.code(), Some(1), "decided once");
    let out = hook.wait_with_output().unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{answer}"
    );
    let decided = w.events_of("t1", "permission_decision");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        (&decided[0]["data"]["id"], &decided[0]["data"]["by"]),
        (&id.as_str().into(), &"pm".into())
    );
    // A restarted daemon no longer names it.
    let daemon = w.start_daemon(None);
    let st: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(st["task"]["permissions"].as_array().map(Vec::len), Some(0), "{st}");
    w.kill_daemon(Some(daemon));
}

/// Issue 27, item 4: the daemon applies the spawn gate itself, to the process that
/// connects, not to what the request or the caller's environment says. A spoke whose
/// program clears TASK_AGENT, TASK_ROLE and $TMUX before `task spawn` (or `task stop`, or
/// `task shutdown`)
/// passes the CLI's own check (it looks like a human at a terminal) and is refused by the
/// daemon, which finds the spoke's pane above the calling process.
#[test]
fn a_spoke_that_hides_who_it_is_is_refused_by_the_daemon() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let target = w
        .handoff("t1", "pm", "IN_PROGRESS")
        .target("test")
        .body("## Instructions\nTest it.\n")
        .write();
    let out = w.dir.path().join("forged.txt");
    let stopped = w.dir.path().join("forged-stop.txt");
    let down = w.dir.path().join("forged-shutdown.txt");
    let script = w.dir.path().join("forger.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             env -u TASK_AGENT -u TASK_ROLE -u TMUX -u TMUX_PANE '{task}' spawn t1 test --handoff '{target}' --runtime demo > '{out}.tmp' 2>&1\n\
             echo \"rc=$?\" >> '{out}.tmp'; mv '{out}.tmp' '{out}'\n\
             env -u TASK_AGENT -u TASK_ROLE -u TMUX -u TMUX_PANE '{task}' stop t1 > '{stopped}.tmp' 2>&1\n\
             echo \"rc=$?\" >> '{stopped}.tmp'; mv '{stopped}.tmp' '{stopped}'\n\
             env -u TASK_AGENT -u TASK_ROLE -u TMUX -u TMUX_PANE '{task}' shutdown > '{down}.tmp' 2>&1\n\
             echo \"rc=$?\" >> '{down}.tmp'; mv '{down}.tmp' '{down}'\n\
             while true; do printf 'forger> '; IFS= read -r line || exit 0; done\n",
            task = bin().display(),
            out = out.display(),
            stopped = stopped.display(),
            down = down.display(),
        ),
    )
    .unwrap();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "[runtimes.forger]\nargv = [\"/bin/sh\", \"{}\"]\nready_timeout_secs = 10\n[runtimes.forger.patterns]\nready = ['^forger> $']\npending = ['^forger> \\S']\n",
            script.display()
        ),
    )
    .unwrap();
    let h = w
        .handoff("t1", "pm", "IN_PROGRESS")
        .target("explore")
        .body("## Instructions\nLook around.\n")
        .write();
    w.spawn("t1", "explore", &h, "forger");
    let said = wait_for("the spoke's spawn attempt", 30, || std::fs::read_to_string(&out).ok());
    assert!(said.contains("SPAWN_REJECT_SPOKE_CALLER"), "{said}");
    assert!(said.contains("rc=6"), "{said}");
    assert!(
        w.state("t1")["agents"].get("test").is_none(),
        "the spoke started nobody"
    );
    // Nor may it stop the task: the daemon keeps supervising it and every session runs.
    let said = wait_for("the spoke's stop attempt", 30, || {
        std::fs::read_to_string(&stopped).ok()
    });
    assert!(
        said.contains("SPAWN_REJECT_SPOKE_CALLER") && said.contains("rc=6"),
        "{said}"
    );
    assert!(ok(&run(w.task().args(["list"]))).contains("t1"), "still supervised");
    let sessions = w.sessions();
    assert!(
        sessions.iter().any(|s| s == "aot-t1-pm") && sessions.iter().any(|s| s == "aot-t1-explore"),
        "{sessions:?}"
    );
    // Nor stop the daemon.
    let said = wait_for("the spoke's shutdown attempt", 30, || {
        std::fs::read_to_string(&down).ok()
    });
    assert!(
        said.contains("SPAWN_REJECT_SPOKE_CALLER") && said.contains("rc=6"),
        "{said}"
    );
    assert!(w.daemon_pid().is_some(), "the daemon still runs");
    let refused = w.events_of("t1", "spawn_refused");
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert_eq!(refused[2]["data"]["verb"], "shutdown");
    assert_eq!(refused[0]["agent"], "test");
    assert_eq!(
        (&refused[1]["agent"], &refused[1]["data"]["verb"]),
        (&Value::Null, &"stop".into())
    );
    // A human (this test, under no pane) still may, through the same daemon.
    w.spawn("t1", "test", &target, "demo");
    assert!(w.state("t1")["agents"].get("test").is_some());
    let o = ok(&run(w.task().args(["stop", "t1"])));
    assert!(o.contains("Stopped"), "{o}");
}
