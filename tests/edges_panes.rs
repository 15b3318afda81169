//! Edges of pane identity, corrupt state and PM restarts (issue 13): the real binary and
//! daemon, a real tmux server on a private socket, demo agents as the PM.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use serde_json::Value;

fn time_of(e: &Value) -> DateTime<Utc> {
    e["time"].as_str().unwrap().parse().unwrap()
}

/// Everything worth seeing when a wait fails: the events, the daemon's log, and the
/// processes of this world with their children and open files (a tmux server still going
/// away, the clients it waits for).
fn dump(w: &World, task: &str) -> String {
    let events = std::fs::read_to_string(w.project.join("tasks").join(task).join("events.jsonl")).unwrap_or_default();
    let ps = std::process::Command::new("ps")
        .args(["-eo", "pid,ppid,stat,etime,args"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let dir = w.dir.path().to_string_lossy();
    let mine: Vec<&str> = ps.lines().filter(|l| l.contains(dir.as_ref())).collect();
    let pids: Vec<&str> = mine.iter().filter_map(|l| l.split_whitespace().next()).collect();
    let children: Vec<&str> = ps
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|pp| pids.contains(&pp)))
        .collect();
    let files: Vec<String> = pids
        .iter()
        .map(|p| {
            let fds: Vec<String> = std::fs::read_dir(format!("/proc/{p}/fd"))
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| std::fs::read_link(e.path()).ok())
                        .map(|l| l.display().to_string())
                        .collect()
                })
                .unwrap_or_default();
            format!("{p}: {}", fds.join(" "))
        })
        .collect();
    format!(
        "events:\n{events}\ndaemon log:\n{}\nprocesses:\n{}\nchildren:\n{}\nopen files:\n{}",
        w.daemon_log(),
        mine.join("\n"),
        children.join("\n"),
        files.join("\n")
    )
}

/// Wait until the PM was restarted `n` times in all and runs again.
fn wait_pm_restarted(w: &World, n: usize, what: &str) {
    wait_until(
        what,
        Duration::from_secs(40),
        Duration::from_millis(100),
        || {
            (w.events_of("t1", "pm_restart").len() == n && w.state("t1")["agents"]["pm"]["status"] == "running")
                .then_some(())
        },
        || dump(w, "t1"),
    );
}

#[test]
fn a_death_after_each_tmux_server_restart_is_reported_and_the_pm_restarted() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").env("RUST_LOG", "info").run();
    let mut servers = vec![w.state("t1")["agents"]["pm"]["tmux_server"].clone()];
    for round in 1..=2usize {
        let before = w.state("t1")["agents"]["pm"].clone();
        wait_control_attached(&w);
        // The whole server goes (a reboot, `tmux kill-server`): the PM with it.
        w.tmux(&["kill-server"]);
        wait_pm_restarted(
            &w,
            round,
            &format!("round {round}: the death reported and the PM restarted"),
        );
        assert_eq!(w.events_of("t1", "agent_died").len(), round, "{}", dump(&w, "t1"));
        let after = w.state("t1")["agents"]["pm"].clone();
        // The case that was missed: the new server hands out the same pane id again.
        assert_eq!(after["pane"], before["pane"], "the new server reuses the pane id");
        servers.push(after["tmux_server"].clone());
        w.wait_demo_prompt(&w.pane("t1", "pm"));
    }
    // Each record names its server, and each server is another one.
    assert!(
        servers.iter().all(|s| s.as_str().is_some_and(|s| !s.is_empty())),
        "{servers:?}"
    );
    assert!(servers[0] != servers[1] && servers[1] != servers[2], "{servers:?}");
    let died = w.events_of("t1", "agent_died");
    assert!(died.iter().all(|e| e["agent"] == "pm"), "{died:?}");
    assert_ne!(died[0]["data"]["server"], died[1]["data"]["server"], "{died:?}");
}

/// Wait until the daemon's tmux control client is attached: a client still identifying
/// when a session closes crashes tmux < 3.7 (its issue 4980), which is not what these
/// tests are about.
fn wait_control_attached(w: &World) {
    wait_for("the daemon's control client attached", 20, || {
        let o = w.tmux(&["list-clients", "-F", "#{client_session}"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l == "_ao-control")
            .then_some(())
    });
}

#[test]
fn a_server_that_never_finishes_going_away_is_asked_to_and_the_pm_restarted() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").env("RUST_LOG", "info").run();
    wait_control_attached(&w);
    let old = w.state("t1")["agents"]["pm"]["tmux_server"].clone();
    // What a `new-session` whose client connected just before a `kill-server` does: a
    // session made after the server began to exit. tmux then never exits, keeps the
    // socket and refuses every new client.
    w.tmux(&[
        "set-hook",
        "-g",
        "session-closed",
        "set-hook -gu session-closed ; new-session -d -s late sleep 1000",
    ]);
    w.tmux(&["kill-server"]);
    wait_pm_restarted(&w, 1, "the PM restarted on a new server");
    assert!(
        w.events_of("t1", "pm_restart_failed").is_empty(),
        "the stuck server was asked to finish, not counted as a failed restart\n{}",
        dump(&w, "t1")
    );
    assert!(w.daemon_log().contains("asked it to finish"), "{}", dump(&w, "t1"));
    assert_ne!(w.state("t1")["agents"]["pm"]["tmux_server"], old, "another server");
    assert!(!w.sessions().iter().any(|s| s == "late"), "{:?}", w.sessions());
    w.wait_demo_prompt(&w.pane("t1", "pm"));
}

#[test]
fn two_corruptions_in_a_row_leave_two_copies_that_start_and_status_name() {
    let w = World::new();
    w.new_task("t1", "");
    let dir = w.project.join("tasks/t1");
    let mut said = Vec::new();
    for (round, junk) in [&b"{\"version\": 2, \"phase\": "[..], &b"not json at all"[..]]
        .into_iter()
        .enumerate()
    {
        std::fs::write(dir.join("pm_state.json"), junk).unwrap();
        let o = run(w.task().env("AO_DEMO_IDLE", "1").args([
            "start",
            "t1",
            "--runtime",
            "demo",
            "--no-daemon",
            "--no-cron",
            "--json",
        ]));
        let out = ok(&o);
        let v: Value = serde_json::from_str(&out).unwrap();
        let aside = v["state_set_aside"]
            .as_str()
            .unwrap_or_else(|| panic!("round {round}: the JSON names no set-aside copy: {out}"))
            .to_string();
        assert!(
            stderr(&o).contains("was corrupt") && stderr(&o).contains(&aside),
            "round {round}: start says so on stderr: {}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read(&aside).unwrap(),
            junk,
            "round {round}: the copy holds what was there"
        );
        said.push(aside);
        ok(&run(w.task().args(["stop", "t1"])));
    }
    assert_ne!(said[0], said[1], "a second corruption never overwrites the first copy");
    let copies: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pm_state.json.corrupt-"))
        .collect();
    assert_eq!(copies.len(), 2, "{copies:?}");
    let text = ok(&run(w.task().args(["status", "t1"])));
    for a in &said {
        assert!(text.contains(a.as_str()), "status names {a}:\n{text}");
    }
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["state_set_aside"], serde_json::json!(said), "{v}");
}

/// SIGKILL the process in `task`'s PM pane (once it shows its prompt).
fn kill_pm(w: &World, task: &str) {
    let pane = w.pane(task, "pm");
    w.wait_demo_prompt(&pane);
    let o = w.tmux(&["display-message", "-p", "-t", &pane, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    // SAFETY: signalling the demo agent this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[test]
fn pm_restarts_wait_1_2_4_s_from_each_death_and_the_fourth_death_is_counted() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").env("RUST_LOG", "info").run();
    for n in 1..=3usize {
        kill_pm(&w, "t1");
        wait_pm_restarted(&w, n, &format!("restart {n}"));
    }
    let died = w.events_of("t1", "agent_died");
    let restarted = w.events_of("t1", "pm_restart");
    assert_eq!(died.len(), 3, "{died:?}");
    for (i, want) in [1000i64, 2000, 4000].into_iter().enumerate() {
        let gap = time_of(&restarted[i]) - time_of(&died[i]);
        assert!(
            gap >= chrono::Duration::milliseconds(want),
            "restart {} came {gap} after its death, before the promised {want} ms\n{}",
            i + 1,
            dump(&w, "t1")
        );
    }
    kill_pm(&w, "t1");
    let reason = wait_until(
        "the escalation after the fourth death",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            w.events_of("t1", "escalation")
                .into_iter()
                .find_map(|e| e["data"]["reason"].as_str().map(str::to_string))
        },
        || dump(&w, "t1"),
    );
    assert!(reason.starts_with("the PM died 4 times within 10 minutes"), "{reason}");
    assert_eq!(w.events_of("t1", "pm_restart").len(), 3, "no fourth restart");
    assert_eq!(w.state("t1")["phase"], "BLOCKED");
}

/// Wait until the daemon supervises `task` (its guard has read the state by then).
fn wait_supervised(w: &World) {
    wait_for("the daemon to supervise the task", 20, || {
        std::fs::read_to_string(w.dir.path().join("state/agent-orchestrator/daemon.log"))
            .unwrap_or_default()
            .contains("supervising")
            .then_some(())
    });
}

#[test]
fn a_corrupt_state_under_the_daemon_is_set_aside_reported_and_supervision_goes_on() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").env("RUST_LOG", "info").run();
    wait_supervised(&w);
    let dir = w.project.join("tasks/t1");
    std::fs::write(dir.join("pm_state.json"), b"{\"version\": 2, \"phase\": \"PLAN").unwrap();
    let ev = wait_until(
        "the corrupt state set aside and reported",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || w.events_of("t1", "state_set_aside").into_iter().next(),
        || dump(&w, "t1"),
    );
    let copy = ev["data"]["copy"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(&copy).unwrap(), b"{\"version\": 2, \"phase\": \"PLAN");
    assert_eq!(ev["data"]["restored"], true, "{ev}");
    assert!(
        w.daemon_log().contains("pm_state.json was corrupt"),
        "{}",
        w.daemon_log()
    );
    // The escalation is appended after the set-aside's event: waited for, not read at once.
    wait_for("the escalation naming the copy", 20, || {
        w.events_of("t1", "escalation")
            .iter()
            .any(|e| e["data"]["reason"].as_str().unwrap().contains(&copy))
            .then_some(())
    });
    let st = w.state("t1");
    assert_eq!(st["agents"]["pm"]["status"], "running", "the PM is still known: {st}");

    // Check-ins go on: a report wakes the PM.
    w.handoff("t1", "dev", "NEEDS_REVIEW")
        .body("## Completed Work\ndev finished.\n")
        .write();
    wait_until(
        "a check-in after the corruption",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            w.inbox("t1", "pm")
                .iter()
                .any(|m| m.contains("review requested: dev"))
                .then_some(())
        },
        || dump(&w, "t1"),
    );
    // And so does the death watch.
    kill_pm(&w, "t1");
    wait_until(
        "the PM's death seen and the PM restarted",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || (w.events_of("t1", "pm_restart").len() == 1).then_some(()),
        || dump(&w, "t1"),
    );
    assert_eq!(w.events_of("t1", "agent_died").len(), 1);
}

#[test]
fn a_newer_versions_state_is_never_rewritten_escalated_once_and_deaths_still_seen() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").env("RUST_LOG", "info").run();
    wait_supervised(&w);
    let path = w.project.join("tasks/t1/pm_state.json");
    let mut st = w.state("t1");
    st["version"] = 99.into();
    st["from_the_future"] = true.into();
    let bytes = serde_json::to_vec_pretty(&st).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let reason = wait_until(
        "the escalation about the newer state",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || {
            w.events_of("t1", "escalation")
                .into_iter()
                .find_map(|e| e["data"]["reason"].as_str().map(str::to_string))
        },
        || dump(&w, "t1"),
    );
    assert!(reason.contains("newer") && reason.contains("99"), "{reason}");
    kill_pm(&w, "t1");
    wait_until(
        "the PM's death reported from the last good state",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || w.events_of("t1", "agent_died").into_iter().next(),
        || dump(&w, "t1"),
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "never rewritten");
    assert_eq!(w.events_of("t1", "escalation").len(), 1, "escalated once");
    assert!(w.daemon_log().contains("newer version"), "{}", w.daemon_log());
}

#[test]
fn a_pane_id_reused_by_a_new_server_is_never_taken_for_the_agents_pane() {
    let w = World::new();
    let pane = w.new_task_with_idle_demo("t1", "dev");
    w.wait_demo_prompt(&pane);
    w.tmux(&["kill-server"]);
    // A new server, with panes up to the dev's old id: someone else's shell.
    // (The old server may still be on its way out: a start is retried until one takes.)
    let num = |id: &str| id.trim_start_matches('%').parse::<u32>().unwrap();
    let mut last = String::from("%-");
    while last == "%-" || num(&last) < num(&pane) {
        last = wait_for("a session on a new server", 10, || {
            let o = w.tmux(&["new-session", "-d", "-P", "-F", "#{pane_id}", "cat"]);
            let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
            id.starts_with('%').then_some(id)
        });
    }
    assert_eq!(last, pane, "the new server handed out the dev's old pane id");
    let o = run(w.task().args(["send", "t1", "dev", "--message", "secret for dev"]));
    assert!(!o.status.success(), "sent into a stranger's pane: {}", stdout(&o));
    assert!(stderr(&o).contains("not running"), "{}", stderr(&o));
    assert!(!w.capture(&pane).contains("secret for dev"), "{}", w.capture(&pane));
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    let dev = v["task"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "dev")
        .unwrap()
        .clone();
    assert_eq!(dev["pane"], "gone", "{v}");
}
