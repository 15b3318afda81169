//! The hub-and-spoke protocol enforced end to end: lanes (every reason code,
//! every release path followed by a spawn that succeeds, a queued spawn that is
//! really started), rosters, structured results and routing in the check-in.
//! Real binary, real tmux on a private socket, demo agents.

mod common;

use common::*;
use serde_json::Value;

fn pm_handoff(w: &World, task: &str, target: &str, body: &str) -> String {
    w.handoff(task, "pm", "IN_PROGRESS").target(target).body(body).write()
}

fn agent_handoff(w: &World, task: &str, agent: &str, status: &str, body: &str) -> String {
    w.handoff(task, agent, status).body(body).write()
}

/// A task with an idle demo PM and no daemon: check-ins happen when the test says.
fn idle_task(w: &World, task: &str, config: &str) {
    w.new_task(task, config);
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "--no-cron",
        task,
        "--runtime",
        "demo",
    ])));
}

/// `task spawn … --json`: (exit code, the JSON printed).
fn spawn(w: &World, task: &str, agent: &str, handoff: &str, extra: &[&str]) -> (i32, Value) {
    let mut c = w.task();
    c.env("AO_DEMO_IDLE", "1")
        .args([
            "spawn",
            task,
            agent,
            "--handoff",
            handoff,
            "--runtime",
            "demo",
            "--json",
        ])
        .args(extra);
    let o = run(&mut c);
    let v = serde_json::from_str(&stdout(&o)).unwrap_or_else(|_| panic!("no JSON: {}{}", stdout(&o), stderr(&o)));
    (o.status.code().unwrap_or(-1), v)
}

fn lane(w: &World, task: &str, agent: &str) -> Value {
    w.state(task)["lanes"][agent].clone()
}

fn events(w: &World, task: &str) -> String {
    std::fs::read_to_string(w.project.join("tasks").join(task).join("events.jsonl")).unwrap_or_default()
}

fn checkin(w: &World, task: &str) {
    // Delivery to the idle PM is verified; the lanes are settled either way.
    let _ = run(w.task().args(["checkin", task]));
}

#[test]
fn a_busy_lane_refuses_dedupes_queues_and_the_queue_starts_when_the_lane_frees() {
    let w = World::new();
    idle_task(&w, "t1", "");
    let h1 = pm_handoff(
        &w,
        "t1",
        "dev",
        "## Instructions\nfirst\n\n## Scope\nMay modify:\n- src/writer.rs\nMay create:\n- tests/pool/\n",
    );
    let h2 = pm_handoff(&w, "t1", "dev", "## Instructions\nsecond\n");
    let h3 = pm_handoff(&w, "t1", "dev", "## Instructions\nthird\n");

    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_OK")), "{v}");
    // The spoke's preamble carries the anti-spawning rule and the PM's scope.
    let pre = std::fs::read_to_string(v["preamble"].as_str().unwrap()).unwrap();
    assert!(
        pre.contains("Files you may modify:\n- src/writer.rs\nFolders where you may create new files:\n- tests/pool/"),
        "{pre}"
    );
    assert!(
        pre.contains("SCOPE ESCALATION") && pre.contains("SPAWN_REJECT_SPOKE_CALLER"),
        "{pre}"
    );
    let first_pane = v["pane"].as_str().unwrap().to_string();
    assert_eq!(v["role"], "spoke");
    assert_eq!(v["roster"], "default");

    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!((code, v["reason"].as_str()), (6, Some("SPAWN_REJECT_DUPLICATE")), "{v}");
    let (code, v) = spawn(&w, "t1", "dev", &h2, &[]);
    assert_eq!(
        (code, v["reason"].as_str()),
        (6, Some("SPAWN_REJECT_ACTIVE_LANE")),
        "{v}"
    );
    assert!(v["error"].as_str().unwrap().contains("--queue"), "{v}");
    assert_eq!(
        lane(&w, "t1", "dev")["holder"]["pane"],
        first_pane.as_str(),
        "nothing replaced"
    );

    let (code, v) = spawn(&w, "t1", "dev", &h2, &["--queue"]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_QUEUED")), "{v}");
    assert!(v["pane"].is_null(), "a queued spawn starts nothing yet: {v}");
    let (code, v) = spawn(&w, "t1", "dev", &h3, &["--queue"]);
    assert_eq!(
        (code, v["reason"].as_str()),
        (6, Some("SPAWN_REJECT_ACTIVE_LANE")),
        "one pending spawn per lane: {v}"
    );
    let status = ok(&run(w.task().args(["status", "t1"])));
    assert!(
        status.contains("Lanes (roster default") && status.contains("busy"),
        "{status}"
    );

    // Release by terminal handoff: the check-in frees the lane and starts the queued spawn.
    agent_handoff(&w, "t1", "dev", "COMPLETE", "## Completed Work\ndone\n");
    checkin(&w, "t1");
    let l = lane(&w, "t1", "dev");
    assert!(l["holder"]["handoff"].as_str().unwrap().ends_with(&h2), "{l}");
    assert!(l["queued"].is_null(), "{l}");
    assert_eq!(l["last_reason"], "SPAWN_DEQUEUED");
    assert_ne!(l["holder"]["pane"], first_pane.as_str());
    let log = events(&w, "t1");
    assert!(log.contains("\"terminal_handoff\""), "{log}");
    let second_pane = l["holder"]["pane"].as_str().unwrap().to_string();
    w.wait_demo_prompt(&second_pane);

    // Release by pane death: the next spawn finds the pane gone and succeeds. The death
    // is recorded once, by the spawn that replaces the dead run (no daemon looks here, and
    // one that did would find only the new run), and its caller is told.
    w.tmux(&["kill-session", "-t", "aot-t1-dev"]);
    let (code, v) = spawn(&w, "t1", "dev", &h3, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_OK")), "{v}");
    let log = events(&w, "t1");
    assert!(log.contains("\"pane_died\""));
    let deaths: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"agent_died\"") && l.contains("\"agent\":\"dev\""))
        .collect();
    assert_eq!(deaths.len(), 1, "{log}");
    assert!(
        deaths[0].contains(&format!("\"pane\":\"{second_pane}\"")),
        "{}",
        deaths[0]
    );
    assert!(
        v["notes"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.contains("died before handing off")))),
        "{v}"
    );

    // Release by stop: the lane is free afterwards and a spawn succeeds.
    let (code, _) = spawn(&w, "t1", "dev", &h1, &["--queue"]);
    assert_eq!(code, 0);
    ok(&run(w.task().args(["stop", "t1"])));
    let l = lane(&w, "t1", "dev");
    assert!(
        l["holder"].is_null() && l["queued"].is_null(),
        "stop frees and drops: {l}"
    );
    assert!(events(&w, "t1").contains("spawn_queue_dropped"));
    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_OK")), "{v}");

    let log = events(&w, "t1");
    for code in [
        "SPAWN_OK",
        "SPAWN_QUEUED",
        "SPAWN_DEQUEUED",
        "SPAWN_REJECT_ACTIVE_LANE",
        "SPAWN_REJECT_DUPLICATE",
    ] {
        assert!(log.contains(code), "{code} missing from events.jsonl:\n{log}");
    }
    let status = ok(&run(w.task().args(["status", "t1"])));
    assert!(status.contains("SPAWN_OK"), "{status}");
    let human = run(w
        .task()
        .env("AO_DEMO_IDLE", "1")
        .args(["spawn", "t1", "dev", "--handoff", &h2]));
    assert_eq!(human.status.code(), Some(6));
    assert!(
        stderr(&human).contains("SPAWN_REJECT_ACTIVE_LANE"),
        "{}",
        stderr(&human)
    );
}

#[test]
fn a_silent_agent_is_reclaimed_as_stale_and_a_queued_spawn_then_starts() {
    let w = World::new();
    idle_task(&w, "t1", "lane_stale: 3s\n");
    let h1 = pm_handoff(&w, "t1", "dev", "## Instructions\nfirst\n");
    let h2 = pm_handoff(&w, "t1", "dev", "## Instructions\nsecond\n");
    let h3 = pm_handoff(&w, "t1", "dev", "## Instructions\nthird\n");
    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!(code, 0, "{v}");
    // A stale lane is shown as such and left alone while nobody needs it.
    wait_for("the lane to show stale", 20, || {
        let s: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).ok()?;
        (s["task"]["lanes"][0]["state"] == "stale").then_some(())
    });
    checkin(&w, "t1");
    assert!(!lane(&w, "t1", "dev")["holder"].is_null(), "nobody waits: not released");
    // The hub reclaims it.
    let (code, v) = spawn(&w, "t1", "dev", &h2, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_RECOVERED_STALE")), "{v}");
    assert!(v["notes"][0].as_str().unwrap().contains("reclaimed"), "{v}");
    // A queued spawn behind a holder that goes silent is started by the next settle.
    let (code, v) = spawn(&w, "t1", "dev", &h3, &["--queue"]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_QUEUED")), "{v}");
    wait_for("the queued spawn to start after the holder went stale", 30, || {
        checkin(&w, "t1");
        let l = lane(&w, "t1", "dev");
        l["holder"]["handoff"].as_str()?.ends_with(&h3).then_some(())
    });
    let log = events(&w, "t1");
    assert!(
        log.contains("SPAWN_RECOVERED_STALE") && log.contains("SPAWN_DEQUEUED"),
        "{log}"
    );
    assert!(log.contains("\"stale\""), "{log}");
}

#[test]
fn the_daemon_starts_a_queued_spawn_when_the_agent_hands_off() {
    let w = World::new();
    ok(&run(w.task().args(["new", "t1"])));
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
    ])));
    let h1 = pm_handoff(&w, "t1", "dev", "## Instructions\nfirst\n");
    let h2 = pm_handoff(&w, "t1", "dev", "## Instructions\nsecond\n");
    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = spawn(&w, "t1", "dev", &h2, &["--queue"]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_QUEUED")), "{v}");
    agent_handoff(&w, "t1", "dev", "NEEDS_REVIEW", "## Completed Work\ndone\n");
    wait_for("the daemon to start the queued dev", 30, || {
        let l = lane(&w, "t1", "dev");
        (l["last_reason"] == "SPAWN_DEQUEUED" && l["holder"]["pane"].is_string()).then_some(())
    });
    ok(&run(w.task().args(["stop", "t1"])));
}

#[test]
fn roster_routing_results_and_limit_flags_reach_the_pm() {
    let w = World::new();
    idle_task(&w, "t1", "roster: hub-and-spoke\n");
    let pm_dir = w.project.join("tasks/t1/scratchpad/pm");
    let pm_pre = std::fs::read_dir(&pm_dir)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .find(|t| t.contains("# Agent: pm"))
        .unwrap();
    assert!(
        pm_pre.contains("Roster 'hub-and-spoke'") && pm_pre.contains("coordinator (you, the PM): hub"),
        "{pm_pre}"
    );
    assert!(pm_pre.contains("revisionist: spoke (may spawn)"), "{pm_pre}");
    // Seed 001's roster: the second hub may spawn, a worker may not.
    let h = pm_handoff(&w, "t1", "executor", "## Instructions\nbuild it\n");
    let o = run(w.task().env("TASK_AGENT", "worker").env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "executor",
        "--handoff",
        &h,
        "--runtime",
        "demo",
    ]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let (code, v) = {
        let mut c = w.task();
        c.env("TASK_AGENT", "analyst").env("AO_DEMO_IDLE", "1").args([
            "spawn",
            "t1",
            "executor",
            "--handoff",
            &h,
            "--runtime",
            "demo",
            "--json",
        ]);
        let o = run(&mut c);
        (o.status.code(), serde_json::from_str::<Value>(&stdout(&o)).unwrap())
    };
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["roster"], "hub-and-spoke");

    // Handoffs the check-in must flag.
    w.handoff("t1", "executor", "COMPLETE")
        .next("archivist")
        .body("Cycle Result: FAIL\n\n## Completed Work\nhalf\n\n## Next Action\nawait_operator\n")
        .write();
    w.handoff("t1", "worker", "BLOCKED")
        .body("## Blockers\nran out of steps\n\nbudget_exceeded: true\nscope_escalation: true\n")
        .write();
    let o = run(w.task().args(["checkin", "t1", "--json"]));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let kinds: Vec<&str> = r["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    for k in [
        "gate_failed",
        "governance_warning",
        "routing",
        "budget_exceeded",
        "scope_escalation",
    ] {
        assert!(kinds.contains(&k), "{k} missing: {r}");
    }
    let pm_pane = w.pane("t1", "pm");
    wait_for("the check-in in the PM's inbox", 20, || {
        let inbox = w.inbox("t1", "pm");
        let msg = inbox.iter().find(|m| m.contains("archivist"))?.clone();
        Some(msg)
    });
    let msg = w
        .inbox("t1", "pm")
        .into_iter()
        .find(|m| m.contains("archivist"))
        .unwrap();
    assert!(msg.contains("does not allow after executor"), "{msg}");
    assert!(msg.contains("Recommended next"), "{msg}");
    assert!(msg.contains("next action: await_operator"), "{msg}");
    let _ = pm_pane;
}

#[test]
fn a_spoke_running_task_spawn_in_its_own_tmux_session_is_refused() {
    let w = World::new();
    idle_task(&w, "t1", "");
    let h = pm_handoff(&w, "t1", "dev", "## Instructions\nwork\n");
    let (code, _) = spawn(&w, "t1", "dev", &h, &[]);
    assert_eq!(code, 0);
    // A shell in dev's own session inherits its environment, as the agent's own commands do.
    let out = w.dir.path().join("spoke-spawn.txt");
    let script = format!(
        "{} spawn t1 test --handoff {} --runtime demo >{} 2>&1; echo \"exit=$?\" >>{}",
        bin().display(),
        h,
        out.display(),
        out.display()
    );
    let o = w.tmux(&["new-window", "-t", "=aot-t1-dev", "-d", "sh", "-c", &script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = wait_for("the spoke's spawn to finish", 20, || {
        let t = std::fs::read_to_string(&out).ok()?;
        t.contains("exit=").then_some(t)
    });
    assert!(
        text.contains("SPAWN_REJECT_SPOKE_CALLER") && text.contains("exit=6"),
        "{text}"
    );
    assert!(!w.sessions().iter().any(|s| s == "aot-t1-test"), "{:?}", w.sessions());
    // The hub's own session may.
    let out = w.dir.path().join("hub-spawn.txt");
    let script = format!(
        "AO_DEMO_IDLE=1 {} spawn t1 test --handoff {} --runtime demo >{} 2>&1; echo \"exit=$?\" >>{}",
        bin().display(),
        h,
        out.display(),
        out.display()
    );
    w.tmux(&["new-window", "-t", "=aot-t1-pm", "-d", "sh", "-c", &script]);
    let text = wait_for("the hub's spawn to finish", 20, || {
        let t = std::fs::read_to_string(&out).ok()?;
        t.contains("exit=").then_some(t)
    });
    assert!(text.contains("SPAWN_OK") && text.contains("exit=0"), "{text}");
}

fn reviewed(w: &World, task: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(w.project.join("tasks").join(task).join("reviewed_queue"))
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn bundles_are_deployed_on_spawn_put_away_once_and_a_failing_cleanup_blocks_nothing() {
    let w = World::new();
    idle_task(&w, "t1", "");
    let t = w.project.join("tasks/t1");
    std::fs::create_dir_all(t.join("research_notes")).unwrap();
    std::fs::write(t.join("research_notes/modules.md"), "three writer modules").unwrap();
    std::fs::create_dir_all(w.project.join("context/instructions")).unwrap();
    std::fs::write(
        w.project.join("context/instructions/rust.md"),
        "---\napplyTo: \"src/**/*.rs\"\n---\nuse anyhow\n",
    )
    .unwrap();
    let h1 = pm_handoff(
        &w,
        "t1",
        "dev",
        "## Instructions\nwork\n\n## Scope\nMay modify:\n- src/pool/writer.rs\n",
    );
    // --prepare shows the bundle and writes none of it.
    let p: Value = serde_json::from_str(&ok(&run(w.task().args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h1,
        "--runtime",
        "demo",
        "--prepare",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(
        p["bundle"]["bundle"]["research"][0]["text"], "three writer modules",
        "{p}"
    );
    assert_eq!(p["bundle"]["manifest"]["instructions"][0], "rust.md");
    assert!(!t.join("active_agents").exists(), "prepare wrote a bundle");

    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!(code, 0, "{v}");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(t.join("active_agents/dev/manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["sources"]["research"]["present"], true);
    assert_eq!(manifest["sources"]["knowledge"]["present"], false);
    assert!(t.join("active_agents/dev/instructions/rust.md").is_file());
    assert!(t.join("active_agents/dev/dev.agent.md").is_file());
    let pre = std::fs::read_to_string(v["preamble"].as_str().unwrap()).unwrap();
    assert!(pre.contains("active_agents/dev/"), "{pre}");

    // Terminal handoff, then the pane ends too: put away exactly once.
    let done = agent_handoff(
        &w,
        "t1",
        "dev",
        "COMPLETE",
        "## Completed Work\ndone\n\n## Execution Notes\nflaky board\n",
    );
    w.tmux(&["kill-session", "-t", "aot-t1-dev"]);
    checkin(&w, "t1");
    checkin(&w, "t1");
    let q = reviewed(&w, "t1");
    assert_eq!(q.len(), 1, "{q:?}");
    assert!(q[0].starts_with("dev_"), "{q:?}");
    let notes: Value = serde_json::from_slice(
        &std::fs::read(t.join("reviewed_queue").join(&q[0]).join("execution_notes.json")).unwrap(),
    )
    .unwrap();
    assert!(done.ends_with(notes["handoff"].as_str().unwrap()), "{notes}");
    assert_eq!(notes["notes"]["execution_notes"], "flaky board");
    assert!(!t.join("active_agents/dev").exists());

    // A cleanup that fails (reviewed_queue is not a folder) blocks neither the handoff nor the lane.
    let h2 = pm_handoff(&w, "t1", "review", "## Instructions\nreview it\n");
    let (code, _) = spawn(&w, "t1", "review", &h2, &[]);
    assert_eq!(code, 0);
    std::fs::rename(t.join("reviewed_queue"), t.join("reviewed_queue.keep")).unwrap();
    std::fs::write(t.join("reviewed_queue"), "in the way").unwrap();
    let r = agent_handoff(&w, "t1", "review", "NEEDS_REVIEW", "## Completed Work\nlooked\n");
    let o = run(w.task().args(["checkin", "t1", "--json"]));
    let report: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        report["new_handoffs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| r.ends_with(f.as_str().unwrap())),
        "{report}"
    );
    assert!(lane(&w, "t1", "review")["holder"].is_null(), "the lane was released");
    assert!(events(&w, "t1").contains("bundle_cleanup_failed"));
    let (code, v) = spawn(&w, "t1", "review", &h2, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_OK")), "{v}");
}

#[test]
fn a_custom_roster_from_the_config_folder_is_used_and_a_bad_one_is_refused_clearly() {
    let w = World::new();
    let dir = w.dir.path().join("config/agent-orchestrator/rosters");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("pair.toml"),
        "name = \"pair\"\nprimary_hub = \"lead\"\n\n[agents.lead]\nrole = \"hub\"\n\n[agents.coder]\nrole = \"spoke\"\nphase = \"DEVELOPING\"\nnext = [\"checker\"]\n\n[agents.checker]\nrole = \"spoke\"\nphase = \"REVIEWING\"\nnext = [\"coder\"]\nrequires_gates = true\n",
    )
    .unwrap();
    idle_task(&w, "t1", "roster: pair\n");
    let h = pm_handoff(&w, "t1", "coder", "## Instructions\ncode\n");
    let (code, v) = spawn(&w, "t1", "coder", &h, &[]);
    assert_eq!(
        (code, v["roster"].as_str(), v["role"].as_str()),
        (0, Some("pair"), Some("spoke")),
        "{v}"
    );
    let status = ok(&run(w.task().args(["status", "t1"])));
    assert!(status.contains("roster pair"), "{status}");
    // Broken mid-task: check-ins go on with the default roster and tell the PM why.
    std::fs::write(dir.join("pair.toml"), "name = \"pair\"\n[agents").unwrap();
    ok(&run(w.task().args(["checkin", "t1"])));
    let msg = wait_for("the check-in in the PM's inbox", 20, || {
        w.inbox("t1", "pm")
            .into_iter()
            .find(|m| m.contains("roster cannot be used"))
    });
    assert!(msg.contains("pair.toml"), "{msg}");
    ok(&run(w.task().args(["stop", "t1"])));

    // A roster that names an agent it does not have: every command that needs it says so.
    std::fs::write(
        dir.join("broken.toml"),
        "name = \"broken\"\nprimary_hub = \"lead\"\n[agents.lead]\nrole = \"hub\"\nnext = [\"ghost\"]\n",
    )
    .unwrap();
    ok(&run(w.task().args(["new", "t2"])));
    let start_with = |roster: &str| {
        std::fs::write(
            w.project.join("tasks/t2/task.md"),
            format!("# Task: t2\n\n## Agent Config\nroster: {roster}\n"),
        )
        .unwrap();
        let o = run(w.task().env("AO_DEMO_IDLE", "1").args([
            "start",
            "--no-daemon",
            "--no-cron",
            "t2",
            "--runtime",
            "demo",
        ]));
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(!w.sessions().iter().any(|s| s == "aot-t2-pm"), "nothing started");
        stderr(&o)
    };
    let e = start_with("broken");
    assert!(e.contains("ghost") && e.contains("broken.toml"), "{e}");
    let e = start_with("nowhere");
    assert!(
        e.contains("unknown roster 'nowhere'") && e.contains("hub-and-spoke"),
        "{e}"
    );
}

#[test]
fn a_spawn_queued_behind_a_run_that_died_records_the_death_once_when_it_starts() {
    let w = World::new();
    idle_task(&w, "t1", "");
    let h1 = pm_handoff(&w, "t1", "dev", "## Instructions\nfirst\n");
    let h2 = pm_handoff(&w, "t1", "dev", "## Instructions\nsecond\n");
    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_OK")), "{v}");
    let dead_pane = v["pane"].as_str().unwrap().to_string();
    let (code, v) = spawn(&w, "t1", "dev", &h2, &["--queue"]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_QUEUED")), "{v}");
    w.tmux(&["kill-session", "-t", "aot-t1-dev"]);
    // No daemon: the check-in's settle finds the pane dead and starts the queued spawn.
    checkin(&w, "t1");
    let l = lane(&w, "t1", "dev");
    assert_eq!(l["last_reason"], "SPAWN_DEQUEUED", "{l}");
    let log = events(&w, "t1");
    let deaths: Vec<&str> = log.lines().filter(|l| l.contains("\"agent_died\"")).collect();
    assert_eq!(deaths.len(), 1, "{log}");
    assert!(
        deaths[0].contains(&format!("\"pane\":\"{dead_pane}\"")),
        "{}",
        deaths[0]
    );
    checkin(&w, "t1");
    assert_eq!(
        events(&w, "t1").matches("\"agent_died\"").count(),
        1,
        "recorded once, the new run alive"
    );
}

#[test]
fn a_lane_left_by_a_spawn_that_died_half_way_is_released() {
    // A daemon killed between taking the lane and starting the agent leaves a holder
    // without a pane; once the start grace has passed, the next spawn frees it.
    let w = World::new();
    idle_task(&w, "t1", "");
    let h = pm_handoff(&w, "t1", "dev", "## Instructions\nwork\n");
    let state = w.project.join("tasks/t1/pm_state.json");
    let mut st: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    st["lanes"] = serde_json::json!({
        "dev": {"holder": {"since": "2020-01-01T00:00:00Z", "handoff": "/gone/pm-20200101-000000.md"}}
    });
    std::fs::write(&state, serde_json::to_vec_pretty(&st).unwrap()).unwrap();
    let (code, v) = spawn(&w, "t1", "dev", &h, &[]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_OK")), "{v}");
    assert!(events(&w, "t1").contains("\"pane_died\""));
}

/// `task spawn --queue` promises a start when the lane frees, so something must be there
/// to start it: a task `task start` put under the daemon gets its daemon back; a task in
/// cron mode is told its crontab line does it; one with neither is told what to run.
#[test]
fn a_queued_spawn_without_a_supervisor_starts_the_daemon_or_says_who_will_start_it() {
    // Under the daemon, which was stopped since.
    let w = World::new();
    ok(&run(w.task().args(["new", "t1"])));
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
    ])));
    let h1 = pm_handoff(&w, "t1", "dev", "## Instructions\nfirst\n");
    let h2 = pm_handoff(&w, "t1", "dev", "## Instructions\nsecond\n");
    let (code, v) = spawn(&w, "t1", "dev", &h1, &[]);
    assert_eq!(code, 0, "{v}");
    ok(&run(w.task().args(["shutdown"])));
    assert!(w.daemon_pid().is_none());
    let out = ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h2,
        "--runtime",
        "demo",
        "--queue",
    ])));
    assert!(
        out.contains("SPAWN_QUEUED") && out.contains("starts as soon as the lane frees"),
        "{out}"
    );
    assert!(
        out.contains("Supervisor: started the supervisor daemon in the background"),
        "{out}"
    );
    assert!(w.daemon_pid().is_some(), "the daemon runs again");
    agent_handoff(&w, "t1", "dev", "NEEDS_REVIEW", "## Completed Work\ndone\n");
    wait_for("the restarted daemon to start the queued dev", 30, || {
        let l = lane(&w, "t1", "dev");
        (l["last_reason"] == "SPAWN_DEQUEUED" && l["holder"]["handoff"].as_str()?.ends_with(&h2)).then_some(())
    });
    ok(&run(w.task().args(["stop", "t1"])));

    // Cron mode: the crontab line's check-ins start it; no daemon is started.
    let w = World::new();
    ok(&run(w.task().args(["new", "t2"])));
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t2",
        "--runtime",
        "demo",
    ])));
    let h1 = pm_handoff(&w, "t2", "dev", "## Instructions\nfirst\n");
    let h2 = pm_handoff(&w, "t2", "dev", "## Instructions\nsecond\n");
    assert_eq!(spawn(&w, "t2", "dev", &h1, &[]).0, 0);
    let (code, v) = spawn(&w, "t2", "dev", &h2, &["--queue"]);
    assert_eq!((code, v["reason"].as_str()), (0, Some("SPAWN_QUEUED")), "{v}");
    let when = v["starts_when"].as_str().unwrap();
    assert!(
        when.contains("crontab line runs `task checkin` on `*/10 * * * *`") && when.contains("task checkin t2"),
        "{when}"
    );
    assert!(v["supervisor"].is_null(), "{v}");
    assert!(w.daemon_pid().is_none(), "cron mode stays without a daemon");

    // Neither daemon nor crontab line: the user is told exactly what to run.
    idle_task(&w, "t3", "");
    let h1 = pm_handoff(&w, "t3", "dev", "## Instructions\nfirst\n");
    let h2 = pm_handoff(&w, "t3", "dev", "## Instructions\nsecond\n");
    assert_eq!(spawn(&w, "t3", "dev", &h1, &[]).0, 0);
    let (code, v) = spawn(&w, "t3", "dev", &h2, &["--queue"]);
    assert_eq!(code, 0, "{v}");
    let when = v["starts_when"].as_str().unwrap();
    assert!(
        when.contains("nothing checks task 't3' in by itself")
            && when.contains("`task checkin t3`")
            && when.contains("`task start t3`"),
        "{when}"
    );
    assert!(w.daemon_pid().is_none());
    // And what it says works: the check-in starts the queued spawn once the lane frees.
    agent_handoff(&w, "t3", "dev", "COMPLETE", "## Completed Work\ndone\n");
    checkin(&w, "t3");
    assert_eq!(lane(&w, "t3", "dev")["last_reason"], "SPAWN_DEQUEUED");
}
