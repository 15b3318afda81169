//! Agents in tmux, end to end: the real binary, a real tmux server on a
//! private socket, and the built-in demo agent standing in for the LLM.

mod common;

use common::*;
use serde_json::Value;

fn environ(w: &World, pane: &str) -> String {
    let o = w.tmux(&["display-message", "-p", "-t", pane, "#{pane_pid}"]);
    let pid = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    String::from_utf8_lossy(&raw).replace('\0', "\n")
}

#[test]
fn start_spawn_and_refuse_a_second_start() {
    let w = World::new();
    let v: Value = serde_json::from_str(&ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t1",
        "--runtime",
        "demo",
        "--no-cron",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["started"]["session"], "aot-t1-pm");
    let pane = w.pane("t1", "pm");
    assert_eq!(v["started"]["pane"], pane.as_str());
    let env = environ(&w, &pane);
    for kv in ["TASK_NAME=t1", "TASK_AGENT=pm", "TASK_ROLE=hub"] {
        assert!(env.lines().any(|l| l == kv), "{kv} missing from the PM's environment");
    }
    assert!(
        env.lines()
            .any(|l| l == format!("TASK_DIR={}", w.project.join("tasks/t1").display()))
    );
    w.wait_demo_prompt(&pane);
    let pre = std::fs::read_to_string(v["started"]["preamble"].as_str().unwrap()).unwrap();
    assert!(
        pre.contains("# Agent: pm") && pre.contains("task spawn t1 <agent> --handoff")
            || pre.contains("spawn t1 <agent> --handoff"),
        "{pre}"
    );
    assert!(
        pre.contains("| review rejected |"),
        "the signal table is in the PM preamble"
    );

    let o = run(w
        .task()
        .args(["start", "--no-daemon", "t1", "--runtime", "demo", "--no-cron"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("already running") && stderr(&o).contains("task attach t1"),
        "{}",
        stderr(&o)
    );

    // Spawn an agent with a PM handoff.
    let h = w
        .handoff("t1", "pm", "IN_PROGRESS")
        .target("explore")
        .body("## Instructions\nMap the modules; quote \"this\" and $(keep) it.\n")
        .write();
    let v: Value = serde_json::from_str(&ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "explore",
        "--handoff",
        h.trim(),
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["session"], "aot-t1-explore");
    let pre = std::fs::read_to_string(v["preamble"].as_str().unwrap()).unwrap();
    assert!(pre.starts_with("# Agent: explore\n**Task:** t1\n"), "{pre}");
    assert!(
        pre.contains("Map the modules; quote \"this\" and $(keep) it."),
        "handoff contents follow the preamble"
    );
    assert!(pre.contains("handoffs/explore-{YYYYMMDD}-{HHMMSS}.md"));
    assert!(
        v["preamble"]
            .as_str()
            .unwrap()
            .contains("/scratchpad/explore/preamble-")
    );
    let epane = v["pane"].as_str().unwrap().to_string();
    assert!(environ(&w, &epane).lines().any(|l| l == "TASK_ROLE=spoke"));
    let screen = wait_for("the agent to read its preamble", 20, || {
        let s = w.capture(&epane);
        s.contains("demo> ").then_some(s)
    });
    assert!(
        screen.contains(&format!("read {} bytes of preamble", pre.len())),
        "{screen}"
    );
    assert_eq!(
        w.sessions(),
        vec!["aot-t1-explore".to_string(), "aot-t1-pm".to_string()]
    );
}

#[test]
fn missing_runtime_binary_fails_before_any_session() {
    let w = World::new();
    ok(&run(w.task().args(["new", "t1"])));
    let o =
        run(w
            .task()
            .env("PATH", &w.bin_dir)
            .args(["start", "--no-daemon", "t1", "--runtime", "claude", "--no-cron"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'claude'") && stderr(&o).contains("npm install"),
        "{}",
        stderr(&o)
    );
    assert!(w.sessions().is_empty());
    assert!(
        w.state("t1")["agents"].as_object().unwrap().is_empty(),
        "nothing recorded as running"
    );
}

#[test]
fn hostile_messages_arrive_literally_exactly_once() {
    let w = World::new();
    w.new_task_with_idle_demo("t1", "echo");
    let unicode: String = "日本語テキスト — ünïcödé ✓ ".repeat(700);
    let messages: Vec<String> = vec![
        "plain".into(),
        "quotes ' \" and `backticks`".into(),
        "$(touch /tmp/ao-pwned) and ; rm -rf ~".into(),
        "trailing semicolon;".into(),
        "-n leading dash".into(),
        "line one\nline two\nline three".into(),
        "C-c".into(),
        "Enter".into(),
        "paste end \u{1b}[201~ then more".into(),
        unicode,
    ];
    for m in &messages {
        let o = run(w.task().args(["send", "t1", "echo", "--message", m]));
        ok(&o);
        assert!(stdout(&o).starts_with("delivered"), "{}", stdout(&o));
    }
    let inbox = w.inbox("t1", "echo");
    let expected: Vec<String> = messages
        .iter()
        .map(|m| agent_orchestrator::core::screen::sanitize(m))
        .collect();
    assert_eq!(inbox.len(), expected.len(), "each message exactly once");
    for (i, (got, want)) in inbox.iter().zip(&expected).enumerate() {
        assert!(
            got == want,
            "message {i} differs: {} bytes received, {} sent",
            got.len(),
            want.len()
        );
    }
    assert!(!std::path::Path::new("/tmp/ao-pwned").exists(), "nothing was executed");
}

#[test]
fn checkin_lists_exactly_the_new_handoffs_and_retries_undelivered() {
    let w = World::new();
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t1",
        "--runtime",
        "demo",
        "--no-cron",
    ])));
    for (agent, status) in [("explore", "COMPLETE"), ("dev", "NEEDS_REVIEW")] {
        w.handoff("t1", agent, status)
            .body(format!("## Completed Work\n{agent} work done.\n"))
            .write();
    }
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["checkin", "t1", "--json"])))).unwrap();
    assert_eq!(v["recorded"], true);
    assert_eq!(v["delivery"]["outcome"], "delivered");
    assert_eq!(v["new_handoffs"].as_array().unwrap().len(), 2);
    let inbox = w.inbox("t1", "pm");
    assert_eq!(inbox.len(), 1);
    assert!(inbox[0].starts_with("Check-in for task t1"), "{}", inbox[0]);
    assert!(inbox[0].contains("New handoffs (2):"), "{}", inbox[0]);
    assert!(inbox[0].contains("review requested: dev"), "{}", inbox[0]);
    assert_eq!(w.state("t1")["ledger"].as_object().unwrap().len(), 2);
    let progress = std::fs::read_to_string(w.project.join("tasks/t1/progress.md")).unwrap();
    assert!(progress.contains("| dev | NEEDS_REVIEW |"), "{progress}");

    let out = ok(&run(w.task().args(["checkin", "t1"])));
    assert!(out.contains("nothing new"), "{out}");
    let inbox = w.inbox("t1", "pm");
    assert_eq!(inbox.len(), 2);
    assert!(
        inbox[1].contains("Nothing new since the last check-in."),
        "{}",
        inbox[1]
    );

    // PM gone: the check-in fails, the new handoff stays new.
    ok(&run(w.task().args(["stop", "t1"])));
    w.handoff("t1", "review", "COMPLETE").write();
    let o = run(w.task().args(["checkin", "t1"]));
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("not delivered"), "{}", stderr(&o));
    assert_eq!(
        w.state("t1")["ledger"].as_object().unwrap().len(),
        2,
        "nothing recorded"
    );
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"]["handoffs_unprocessed"], 1);
}

#[test]
fn stop_is_idempotent_keeps_files_and_never_confuses_prefixes() {
    let w = World::new();
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t1",
        "--runtime",
        "demo",
        "--no-cron",
    ])));
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t10",
        "--runtime",
        "demo",
        "--no-cron",
    ])));
    let before = snapshot(&w.project.join("tasks/t1/handoffs"));
    let out = ok(&run(w.task().args(["stop", "t1"])));
    assert!(out.contains("aot-t1-pm"), "{out}");
    assert_eq!(w.sessions(), vec!["aot-t10-pm".to_string()], "t10 untouched");
    assert_eq!(snapshot(&w.project.join("tasks/t1/handoffs")), before);
    assert!(w.project.join("tasks/t1/task.md").exists());
    assert_eq!(w.state("t1")["agents"]["pm"]["status"], "stopped");
    let out = ok(&run(w.task().args(["stop", "t1"])));
    assert!(out.contains("nothing to stop"), "{out}");

    let o = run(w.task().args(["attach", "t1"]));
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("not running"), "{}", stderr(&o));
    let o = run(w.task().args(["send", "t1", "pm", "--message", "hi"]));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = run(w.task().args(["stop", "nosuch"]));
    assert_eq!(o.status.code(), Some(3));

    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"]["agents"][0]["pane"], "gone");
    let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t10", "--json"])))).unwrap();
    assert_eq!(v["task"]["agents"][0]["pane"], "alive");
}

#[test]
fn dead_agents_show_their_exit_status() {
    let w = World::new();
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t1",
        "--runtime",
        "demo",
        "--no-cron",
    ])));
    let pane = w.pane("t1", "pm");
    w.wait_demo_prompt(&pane);
    let o = w.tmux(&["display-message", "-p", "-t", &pane, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    wait_for("status to show the death", 10, || {
        let v: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
        (v["task"]["agents"][0]["pane"] == "dead").then_some(v)
    });
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(human.contains("dead"), "{human}");
}

#[test]
fn cron_line_installed_once_and_removed_on_stop() {
    let w = World::new();
    std::fs::write(w.crontab_file(), "0 3 * * * backup # mine\n").unwrap();
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t1",
        "--runtime",
        "demo",
    ])));
    let table = std::fs::read_to_string(w.crontab_file()).unwrap();
    assert_eq!(table.lines().count(), 2, "{table}");
    let line = table
        .lines()
        .find(|l| l.contains("agent-orchestrator checkin t1"))
        .unwrap();
    assert!(
        line.starts_with("*/10 * * * * ") && line.contains(" checkin t1 --project "),
        "{line}"
    );
    ok(&run(w.task().args(["stop", "t1"])));
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t1",
        "--runtime",
        "demo",
    ])));
    let o = run(w
        .task()
        .env("AO_DEMO_IDLE", "1")
        .args(["start", "--no-daemon", "t1", "--runtime", "demo"]));
    assert_eq!(o.status.code(), Some(2), "a running task is not started twice");
    let table = std::fs::read_to_string(w.crontab_file()).unwrap();
    assert_eq!(table.lines().filter(|l| l.contains("checkin t1")).count(), 1, "{table}");
    ok(&run(w.task().args(["stop", "t1"])));
    assert_eq!(
        std::fs::read_to_string(w.crontab_file()).unwrap(),
        "0 3 * * * backup # mine\n"
    );

    // Without crontab on PATH (only tmux), the line is printed for the user and nothing is installed.
    let only_tmux = w.dir.path().join("only-tmux");
    std::fs::create_dir_all(&only_tmux).unwrap();
    let tmux_bin = agent_orchestrator::io::program::which("tmux").expect("tmux on PATH");
    std::os::unix::fs::symlink(tmux_bin, only_tmux.join("tmux")).unwrap();
    let before = std::fs::read_to_string(w.crontab_file()).unwrap();
    let o = run(w.task().env("PATH", &only_tmux).env("AO_DEMO_IDLE", "1").args([
        "start",
        "--no-daemon",
        "t2",
        "--runtime",
        "demo",
    ]));
    let out = ok(&o);
    assert!(
        out.contains("crontab is not installed") && out.contains("checkin t2"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(w.crontab_file()).unwrap(), before);
}

#[test]
fn the_demo_task_runs_to_complete() {
    let w = World::new();
    copy_example(&w.project, "dds-writer-pool");
    std::fs::remove_dir_all(w.project.join("tasks/dds-writer-pool/handoffs")).unwrap();
    ok(&run(w.task().args([
        "start",
        "--no-daemon",
        "dds-writer-pool",
        "--runtime",
        "demo",
        "--no-cron",
    ])));
    let o = run(w
        .task()
        .args(["watch", "dds-writer-pool", "--timeout", "240", "--poll-ms", "200"]));
    let out = ok(&o);
    assert!(out.contains("is COMPLETE"), "{out}");
    let (names, _) =
        agent_orchestrator::store::handoffs::list(&w.project.join("tasks/dds-writer-pool/handoffs")).unwrap();
    let seq: Vec<&str> = names.iter().map(|n| n.agent.as_str()).collect();
    assert_eq!(
        seq,
        vec![
            "pm", "explore", "pm", "plan", "pm", "dev", "pm", "review", "pm", "dev", "pm", "review", "pm"
        ]
    );
    let st = w.state("dds-writer-pool");
    assert_eq!(st["phase"], "COMPLETE");
    assert_eq!(st["lineage"].as_array().unwrap().len(), 13);
    let chain = ok(&run(w.task().args(["log", "dds-writer-pool", "--lineage"])));
    let froms: Vec<&str> = chain.lines().map(|l| l.split_whitespace().nth(3).unwrap()).collect();
    assert_eq!(froms, seq, "{chain}");
    assert!(chain.lines().next().unwrap().contains("pm → explore"), "{chain}");
    assert!(chain.contains("review → pm: COMPLETE"), "{chain}");
    let progress = std::fs::read_to_string(w.project.join("tasks/dds-writer-pool/progress.md")).unwrap();
    assert!(progress.contains("**Phase:** COMPLETE"), "{progress}");
    assert!(
        progress.contains("| review | COMPLETE |") && progress.contains("APPROVED"),
        "{progress}"
    );
    assert!(progress.contains("artifacts/code/demo-change-2.md"), "{progress}");
    // Every lane the run used came free again, and the demo's recommendations follow the roster.
    let lanes = st["lanes"].as_object().unwrap();
    assert_eq!(
        lanes.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["dev", "explore", "plan", "review"]
    );
    for (name, l) in lanes {
        assert!(l["holder"].is_null(), "{name}'s lane is still held: {l}");
        assert_eq!(l["released"]["reason"], "terminal_handoff", "{name}: {l}");
    }
    let log = std::fs::read_to_string(w.project.join("tasks/dds-writer-pool/events.jsonl")).unwrap();
    assert_eq!(log.matches("\"SPAWN_OK\"").count(), 7, "the PM and six spawns: {log}");
    assert!(!log.contains("\"routing\""), "{log}");
}

#[test]
fn text_left_in_the_input_by_an_interrupted_delivery_is_cleared_not_merged() {
    let w = World::new();
    let pane = w.new_task_with_idle_demo("t1", "echo");
    w.wait_demo_prompt(&pane);
    // A paste whose Enter never came (the supervisor was killed in between).
    let o = w.tmux(&["send-keys", "-t", &pane, "-l", "stale half-delivered check-in"]);
    assert!(o.status.success());
    wait_for("the stale text", 5, || {
        w.capture(&pane).contains("demo> stale").then_some(())
    });
    let out = ok(&run(w.task().args([
        "send",
        "t1",
        "echo",
        "--message",
        "fresh message",
    ])));
    assert!(out.starts_with("delivered"), "{out}");
    assert_eq!(w.inbox("t1", "echo"), vec!["fresh message".to_string()]);
}

#[test]
fn the_spawn_gate_refuses_spokes_and_lets_hubs_and_humans_through() {
    let w = World::new();
    w.new_task("t1", "");
    let h = w.handoff("t1", "pm", "IN_PROGRESS").target("dev").write();
    // A human (no TASK_* in the environment) may spawn.
    let v: Value = serde_json::from_str(&ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
        "--runtime",
        "demo",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["reason"], "SPAWN_OK");
    let dev_pane = w.pane("t1", "dev");

    let spawn_test = |c: &mut std::process::Command| {
        run(c
            .env("AO_DEMO_IDLE", "1")
            .args(["spawn", "t1", "test", "--handoff", &h, "--runtime", "demo"]))
    };
    // A spoke, known by the environment its pane was started with: refused, nothing started.
    let o = spawn_test(w.task().env("TASK_AGENT", "dev").env("TASK_ROLE", "spoke"));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("SPAWN_REJECT_SPOKE_CALLER") && stderr(&o).contains("--next"),
        "{}",
        stderr(&o)
    );
    let o =
        run(w
            .task()
            .env("TASK_AGENT", "dev")
            .env("TASK_ROLE", "spoke")
            .args(["send", "t1", "dev", "--message", "hi"]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    // A spoke that cleared its environment is known by the pane it runs in.
    let tmux_var = format!("{},1,0", w.sock.display());
    let o = spawn_test(w.task().env("TMUX", &tmux_var).env("TMUX_PANE", &dev_pane));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(!w.sessions().iter().any(|s| s == "aot-t1-test"), "{:?}", w.sessions());
    // Nor may a spoke stop the whole task.
    let o = run(w
        .task()
        .env("TASK_AGENT", "dev")
        .env("TASK_ROLE", "spoke")
        .args(["stop", "t1"]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(w.sessions().iter().any(|s| s == "aot-t1-dev"), "{:?}", w.sessions());
    let log = std::fs::read_to_string(w.project.join("tasks/t1/events.jsonl")).unwrap();
    assert_eq!(log.matches("SPAWN_REJECT_SPOKE_CALLER").count(), 4, "{log}");

    // The hub may.
    ok(&spawn_test(w.task().env("TASK_AGENT", "pm").env("TASK_ROLE", "hub")));
    assert!(w.sessions().iter().any(|s| s == "aot-t1-test"));
}

#[test]
fn prepare_renders_the_spawn_and_starts_nothing() {
    let w = World::new();
    w.new_task("t1", "");
    let h = w
        .handoff("t1", "pm", "IN_PROGRESS")
        .target("dev")
        .body("## Instructions\nFix the writer pool; keep 'quotes' and $(this) literal.\n")
        .write();
    let before = snapshot(&w.project);
    let out = ok(&run(w.task().args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
        "--runtime",
        "demo",
        "--prepare",
    ])));
    assert!(out.starts_with("PREPARED ONLY: nothing was started"), "{out}");
    assert!(out.contains("aot-t1-dev") && out.contains("demo-agent"), "{out}");
    assert!(
        out.contains("Fix the writer pool; keep 'quotes' and $(this) literal."),
        "{out}"
    );
    assert!(
        out.contains("Do not talk to other agents"),
        "the spoke rules are in the preamble: {out}"
    );
    let v: Value = serde_json::from_str(&ok(&run(w.task().args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        &h,
        "--runtime",
        "demo",
        "--prepare",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["prepared_only"], true);
    assert_eq!(v["session"], "aot-t1-dev");
    assert!(w.sessions().is_empty(), "nothing started: {:?}", w.sessions());
    assert_eq!(snapshot(&w.project), before, "nothing written");
}

/// The permission mode and the agent's own allow rules reach its command line; an unknown
/// mode is refused before anything starts; bypassing every prompt is warned about.
#[test]
fn permission_mode_and_allow_rules_reach_the_agent_and_bad_modes_start_nothing() {
    let w = World::new();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        r#"[runtimes.echo]
argv = ["/bin/sh", "-c", "printf 'mode=%s settings=%s dir=%s\n' \"$0\" \"$1\" \"$2\"; exec cat", "{permission_mode}", "{settings}", "{task_dir}"]
permission_mode = "acceptEdits"
[runtimes.echo.patterns]
ready = ['^mode=']
"#,
    )
    .unwrap();
    ok(&run(w.task().args(["new", "t1"])));
    let md = w.project.join("tasks/t1/task.md");
    let original = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, format!("{original}\n## Agent Config\npermission_mode: yolo\n")).unwrap();
    let o = run(w
        .task()
        .args(["start", "t1", "--runtime", "echo", "--no-daemon", "--no-cron"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown permission_mode \"yolo\""),
        "{}",
        stderr(&o)
    );
    assert!(w.sessions().is_empty(), "{:?}", w.sessions());

    std::fs::write(
        &md,
        format!("{original}\n## Agent Config\npermission_mode: bypassPermissions\n"),
    )
    .unwrap();
    let o = run(w
        .task()
        .args(["start", "t1", "--runtime", "echo", "--no-daemon", "--no-cron"]));
    ok(&o);
    assert!(
        stderr(&o).contains("warning: permission_mode is bypassPermissions"),
        "{}",
        stderr(&o)
    );
    let pane = w.pane("t1", "pm");
    let screen = wait_for("the command line on screen", 10, || {
        let s = w.capture(&pane);
        s.contains("mode=").then_some(s)
    });
    assert!(screen.contains("mode=bypassPermissions"), "{screen}");
    assert!(
        screen.contains("Bash(task spawn:*)") && screen.contains("Bash(task handoff:*)"),
        "the PM may spawn: {screen}"
    );
    assert!(screen.contains("/tasks/t1"), "{screen}");
    // task.md without the key: the profile's mode.
    ok(&run(w.task().args(["stop", "t1"])));
    std::fs::write(&md, &original).unwrap();
    ok(&run(w.task().args([
        "start",
        "t1",
        "--runtime",
        "echo",
        "--no-daemon",
        "--no-cron",
    ])));
    let pane = w.pane("t1", "pm");
    let screen = wait_for("the command line on screen", 10, || {
        let s = w.capture(&pane);
        s.contains("mode=").then_some(s)
    });
    assert!(screen.contains("mode=acceptEdits"), "{screen}");
}

/// task.md's `sandbox:` and rules: a bad value names its line, a sandbox that is required
/// and cannot be had starts nothing, and an agent gets its sandbox and rules in its
/// `--settings`.
#[test]
fn a_required_sandbox_that_cannot_be_had_starts_nothing_and_one_that_can_reaches_the_agent() {
    let w = World::new();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        r#"[runtimes.echo]
argv = ["/bin/sh", "-c", "printf 'settings=%s\n' \"$0\"; exec cat", "{settings}"]
[runtimes.echo.patterns]
ready = ['^settings=']
"#,
    )
    .unwrap();
    ok(&run(w.task().args(["new", "t1"])));
    let md = w.project.join("tasks/t1/task.md");
    let original = std::fs::read_to_string(&md).unwrap();
    let start = |runtime: &str| {
        run(w
            .task()
            .args(["start", "t1", "--runtime", runtime, "--no-daemon", "--no-cron"]))
    };
    std::fs::write(&md, format!("{original}\n## Agent Config\nsandbox: maybe\n")).unwrap();
    let o = start("echo");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("\"maybe\" is not one of on, off, required"),
        "{}",
        stderr(&o)
    );
    assert!(w.sessions().is_empty(), "{:?}", w.sessions());

    std::fs::write(&md, format!("{original}\n## Agent Config\nsandbox-pm: required\n")).unwrap();
    let o = start("demo");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("sandbox: required, but runtime 'demo' has no sandbox"),
        "{}",
        stderr(&o)
    );
    assert!(w.sessions().is_empty(), "nothing started: {:?}", w.sessions());

    std::fs::write(
        &md,
        format!("{original}\n## Agent Config\ndeny: Bash(git push:*), cargo test\n"),
    )
    .unwrap();
    let o = start("echo");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("deny: \"cargo test\" is not a permission rule"),
        "{}",
        stderr(&o)
    );
    assert!(w.sessions().is_empty(), "{:?}", w.sessions());

    std::fs::write(
        &md,
        format!("{original}\n## Agent Config\nsandbox-pm: on\nnetwork: docs.rs\nallow-pm: Bash(make:*)\ndeny: Bash(git push:*)\n"),
    )
    .unwrap();
    let o = start("echo");
    ok(&o);
    assert!(
        stdout(&o).contains("Sandbox: on for architect, dev, pm, review, test (commands run without asking"),
        "{}",
        stdout(&o)
    );
    let pane = w.pane("t1", "pm");
    let screen = wait_for("the command line on screen", 10, || {
        let s = w.capture(&pane);
        s.contains("settings=").then_some(s)
    })
    .replace('\n', "");
    assert!(
        screen.contains(r#""sandbox":{"allowUnsandboxedCommands":false,"autoAllowBashIfSandboxed":true"#),
        "{screen}"
    );
    assert!(screen.contains(r#""allowedDomains":["docs.rs"]"#), "{screen}");
    assert!(screen.contains("/.ssh"), "{screen}");
    assert!(screen.contains(r#""deny":["Bash(git push:*)"]"#), "{screen}");
    assert!(screen.contains(r#""Bash(task permit:*)","Bash(make:*)"]"#), "{screen}");
}
