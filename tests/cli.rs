//! End to end on the built binary in temp dirs: new / handoff / status / list /
//! progress / setup-agents, JSON checked, bad input refused with the folder unchanged.

mod common;

use common::*;
use serde_json::Value;

const EXAMPLE: &str = "dds-writer-pool";

#[test]
fn new_creates_layout_and_is_idempotent() {
    let d = tempfile::tempdir().unwrap();
    let out = ok(&run(task(d.path()).args(["new", "demo"])));
    assert!(out.contains("Created task 'demo'"), "{out}");
    let t = d.path().join("tasks/demo");
    for p in [
        "task.md",
        "pm_state.json",
        "progress.md",
        "handoffs",
        "artifacts/analysis",
        "artifacts/design",
        "artifacts/code",
        "artifacts/tests",
        "artifacts/reviews",
        "scratchpad",
    ] {
        assert!(t.join(p).exists(), "{p} missing");
    }
    let md = std::fs::read_to_string(t.join("task.md")).unwrap();
    assert!(md.contains("demo") && !md.contains("{task}"), "template filled: {md}");
    let state: Value = serde_json::from_slice(&std::fs::read(t.join("pm_state.json")).unwrap()).unwrap();
    assert_eq!(state["version"], 4);
    assert_eq!(state["phase"], "PLANNING");

    // User edits survive; a second run changes nothing.
    std::fs::write(t.join("task.md"), "# Task: mine\n").unwrap();
    let before = snapshot(d.path());
    let out = ok(&run(task(d.path()).args(["new", "demo"])));
    assert!(out.contains("nothing to repair"), "{out}");
    assert_eq!(snapshot(d.path()), before);

    // A missing folder is repaired, nothing else touched.
    std::fs::remove_dir(t.join("artifacts/code")).unwrap();
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["new", "demo", "--json"])))).unwrap();
    assert_eq!(v["created"], serde_json::json!(["artifacts/code/"]));
    assert_eq!(std::fs::read_to_string(t.join("task.md")).unwrap(), "# Task: mine\n");
}

#[test]
fn bad_names_are_refused_before_touching_disk() {
    let d = tempfile::tempdir().unwrap();
    copy_example(d.path(), EXAMPLE);
    let before = snapshot(d.path());
    let long = "a".repeat(64);
    for bad in [
        "../x", "/abs", "a/b", ".hidden", "-rf", "a;b", "a:b", "a.b", "a b", "a\nb", "é", "", &long, "Upper",
    ] {
        for args in [
            vec!["new", bad],
            vec!["handoff", bad, "--from", "dev", "--status", "COMPLETE"],
            vec!["handoff", EXAMPLE, "--from", bad, "--status", "COMPLETE"],
            vec![
                "handoff", EXAMPLE, "--from", "dev", "--status", "COMPLETE", "--next", bad,
            ],
            vec!["status", bad],
            vec!["progress", bad],
        ] {
            let o = run(task(d.path()).args(&args));
            assert_eq!(o.status.code(), Some(2), "{args:?} must exit 2; stderr: {}", stderr(&o));
            let err = stderr(&o);
            if !bad.is_empty() && !bad.starts_with('-') {
                assert!(
                    err.contains("lower-case a-z"),
                    "{args:?}: message states the rule: {err}"
                );
            }
        }
    }
    assert_eq!(snapshot(d.path()), before, "the project is byte-for-byte unchanged");
}

#[test]
fn handoff_writes_atomically_with_collision_suffix() {
    let d = tempfile::tempdir().unwrap();
    ok(&run(task(d.path()).args(["new", "t1"])));
    let body = "## Completed Work\nBuilt it.\n\n## Artifacts Generated\n- artifacts/code/x.py\n";
    let mut paths = Vec::new();
    for _ in 0..3 {
        let o = run_with_stdin(
            task(d.path()).env("SOURCE_DATE_EPOCH", "1764243000").args([
                "handoff",
                "t1",
                "--from",
                "dev",
                "--status",
                "needs_review",
                "--next",
                "review",
                "--body-file",
                "-",
            ]),
            body.as_bytes(),
        );
        paths.push(ok(&o).trim().to_string());
    }
    assert!(
        paths[0].ends_with("tasks/t1/handoffs/dev-20251127-113000.md"),
        "{}",
        paths[0]
    );
    assert!(paths[1].ends_with("dev-20251127-113000-2.md"), "{}", paths[1]);
    assert!(paths[2].ends_with("dev-20251127-113000-3.md"), "{}", paths[2]);
    let text = std::fs::read_to_string(&paths[0]).unwrap();
    assert_eq!(
        text,
        "# Handoff: dev\n**Timestamp:** 2025-11-27 11:30:00 +00:00\n**Target:** pm\n**Status:** NEEDS_REVIEW\n**Recommended Next:** review\n\n## Completed Work\nBuilt it.\n\n## Artifacts Generated\n- artifacts/code/x.py\n"
    );
    let entries: Vec<_> = std::fs::read_dir(d.path().join("tasks/t1/handoffs")).unwrap().collect();
    assert_eq!(entries.len(), 3, "no temp files left behind");

    // Body from a file, --json output.
    std::fs::write(d.path().join("body.md"), "## Instructions\nExplore.\n").unwrap();
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args([
        "handoff",
        "t1",
        "--from",
        "pm",
        "--target",
        "explore",
        "--status",
        "IN_PROGRESS",
        "--body-file",
        "body.md",
        "--json",
    ]))))
    .unwrap();
    let p = v["path"].as_str().unwrap();
    let text = std::fs::read_to_string(p).unwrap();
    assert!(
        text.contains("**Target:** explore\n**Status:** IN_PROGRESS\n"),
        "{text}"
    );
}

#[test]
fn handoff_bad_input_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    ok(&run(task(d.path()).args(["new", "t1"])));
    let before = snapshot(d.path());
    let cases: Vec<(Vec<&str>, &[u8], i32)> = vec![
        (vec!["--status", "DONE-ISH"], b"x", 2),
        (
            vec!["--status", "COMPLETE", "--body-file", "-"],
            b"\xff\xfe bad utf8",
            2,
        ),
        (vec!["--status", "COMPLETE", "--body-file", "-"], b"nul\0byte", 2),
        (
            vec!["--status", "COMPLETE", "--body-file", "/nonexistent/body.md"],
            b"",
            1,
        ),
    ];
    for (extra, input, code) in cases {
        let mut args = vec!["handoff", "t1", "--from", "dev"];
        args.extend(extra.iter().copied());
        let o = run_with_stdin(task(d.path()).args(&args), input);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("error:") || stderr(&o).contains("error"),
            "{}",
            stderr(&o)
        );
    }
    let big = vec![b'x'; 2 * 1024 * 1024];
    let o = run_with_stdin(
        task(d.path()).args([
            "handoff",
            "t1",
            "--from",
            "dev",
            "--status",
            "COMPLETE",
            "--body-file",
            "-",
        ]),
        &big,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cap"));
    let o = run(task(d.path()).args(["handoff", "nosuch", "--from", "dev", "--status", "COMPLETE"]));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("task new nosuch"),
        "says what to do: {}",
        stderr(&o)
    );
    assert_eq!(snapshot(d.path()), before);
}

#[test]
fn agents_find_their_task_from_task_dir() {
    let d = tempfile::tempdir().unwrap();
    ok(&run(task(d.path()).args(["new", "t1"])));
    let elsewhere = tempfile::tempdir().unwrap();
    let o = run(task(elsewhere.path())
        .env("TASK_NAME", "t1")
        .env("TASK_DIR", d.path().join("tasks/t1"))
        .args(["handoff", "t1", "--from", "dev", "--status", "COMPLETE"]));
    let p = ok(&o);
    assert!(
        p.trim()
            .starts_with(d.path().join("tasks/t1/handoffs").to_str().unwrap()),
        "{p}"
    );
    // From a subfolder of the project, the task is found by walking up.
    let sub = d.path().join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    ok(&run(task(&sub).args(["status", "t1"])));
}

#[test]
fn status_and_list_on_the_example() {
    let d = tempfile::tempdir().unwrap();
    copy_example(d.path(), EXAMPLE);
    let before = snapshot(d.path());
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["status", EXAMPLE, "--json"])))).unwrap();
    assert_eq!(v["schema"], 1);
    let t = &v["task"];
    assert_eq!(t["task"], EXAMPLE);
    assert_eq!(t["title"], "Optimize DDS writer pool");
    assert_eq!(t["phase"], "PLANNING");
    assert_eq!(t["handoffs"], 8);
    assert_eq!(t["handoffs_unprocessed"], 8);
    assert_eq!(t["artifacts"], 4);
    let agents: Vec<(&str, &str)> = t["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["last_status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        agents,
        vec![
            ("pm", "IN_PROGRESS"),
            ("explore", "COMPLETE"),
            ("plan", "COMPLETE"),
            ("dev", "NEEDS_REVIEW"),
            ("review", "COMPLETE")
        ]
    );
    assert_eq!(t["blockers"], serde_json::json!([]));

    let human = ok(&run(task(d.path()).args(["status", EXAMPLE])));
    assert!(human.contains("Phase:         PLANNING"), "{human}");
    assert!(human.contains("NEEDS_REVIEW"), "{human}");
    for line in human.lines() {
        assert!(line.chars().count() <= 100, "line over 100 columns: {line:?}");
    }

    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["list", "--json"])))).unwrap();
    assert_eq!(v["tasks"][0]["task"], EXAMPLE);
    assert_eq!(v["tasks"][0]["handoffs"], 8);
    assert_eq!(v["tasks"][0]["agents"], 5);
    let human = ok(&run(task(d.path()).args(["list"])));
    assert!(human.contains(EXAMPLE) && human.contains("PLANNING"), "{human}");
    assert_eq!(snapshot(d.path()), before, "status and list are read-only");
}

#[test]
fn blocked_handoff_shows_as_blocker() {
    let d = tempfile::tempdir().unwrap();
    ok(&run(task(d.path()).args(["new", "t1"])));
    let o = run_with_stdin(
        task(d.path()).args([
            "handoff",
            "t1",
            "--from",
            "dev",
            "--status",
            "BLOCKED",
            "--body-file",
            "-",
        ]),
        b"## Blockers\nThe board is offline.\n",
    );
    ok(&o);
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(v["task"]["blockers"][0]["agent"], "dev");
    assert_eq!(v["task"]["blockers"][0]["text"], "The board is offline.");
    let human = ok(&run(task(d.path()).args(["status", "t1"])));
    assert!(
        human.contains("dev (dev-") && human.contains("The board is offline."),
        "{human}"
    );
}

#[test]
fn progress_matches_expected_file_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    copy_example(d.path(), EXAMPLE);
    let run_progress = || {
        ok(&run(task(d.path())
            .env("SOURCE_DATE_EPOCH", "1764246600")
            .args(["progress", EXAMPLE])))
    };
    let path = run_progress();
    assert!(path.trim().ends_with("tasks/dds-writer-pool/progress.md"));
    let first = std::fs::read(path.trim()).unwrap();
    if std::env::var_os("UPDATE_EXPECTED").is_some() {
        std::fs::write(repo().join("tests/expected/progress-dds-writer-pool.md"), &first).unwrap();
    }
    let expected = std::fs::read(repo().join("tests/expected/progress-dds-writer-pool.md")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&expected),
        "progress.md differs from tests/expected (UPDATE_EXPECTED=1 rewrites it after a deliberate change)"
    );
    run_progress();
    assert_eq!(std::fs::read(path.trim()).unwrap(), first, "same input, same bytes");
}

#[test]
fn corrupt_state_is_reported_kept_and_set_aside_only_on_repair() {
    let d = tempfile::tempdir().unwrap();
    ok(&run(task(d.path()).args(["new", "t1"])));
    let sp = d.path().join("tasks/t1/pm_state.json");
    std::fs::write(&sp, b"{ not json").unwrap();
    let before = snapshot(d.path());
    let o = run(task(d.path()).args(["status", "t1"]));
    assert_eq!(o.status.code(), Some(4));
    assert!(
        stderr(&o).contains("pm_state.json") && stderr(&o).contains("corrupt"),
        "{}",
        stderr(&o)
    );
    let o = run(task(d.path()).args(["progress", "t1"]));
    assert_eq!(o.status.code(), Some(4));
    let out = ok(&run(task(d.path()).args(["list"])));
    assert!(out.contains("STATE UNREADABLE"), "{out}");
    assert_eq!(
        snapshot(d.path()),
        before,
        "read-only commands leave the corrupt file alone"
    );

    let o = run(task(d.path()).args(["new", "t1"]));
    ok(&o);
    assert!(stderr(&o).contains("corrupt-"), "{}", stderr(&o));
    let aside: Vec<_> = std::fs::read_dir(d.path().join("tasks/t1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pm_state.json.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read(d.path().join("tasks/t1").join(&aside[0])).unwrap(),
        b"{ not json"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&sp).unwrap()).unwrap();
    assert_eq!(v["version"], 4);
}

#[test]
fn malformed_agent_config_is_reported_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    ok(&run(task(d.path()).args(["new", "t1"])));
    std::fs::write(
        d.path().join("tasks/t1/task.md"),
        "# Task: t\n\n## Agent Config\ncwd: -oProxyCommand=touch:/tmp/x\n",
    )
    .unwrap();
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["status", "t1", "--json"])))).unwrap();
    let p = v["task"]["problems"][0].as_str().unwrap();
    assert!(p.contains("task.md:4:") && p.contains("'-'"), "{p}");
}

#[test]
fn setup_agents_adds_missing_only() {
    let d = tempfile::tempdir().unwrap();
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["setup-agents", "--json"])))).unwrap();
    assert_eq!(v["added"].as_array().unwrap().len(), 16);
    let dev = std::fs::read_to_string(d.path().join(".claude/agents/dev.md")).unwrap();
    assert!(dev.starts_with("---\nname: dev\n"), "{dev}");
    let k: Value = serde_json::from_slice(&std::fs::read(d.path().join(".kiro/agents/dev.json")).unwrap()).unwrap();
    assert_eq!(k["name"], "dev");
    assert!(k["prompt"].as_str().unwrap().len() > 200);
    assert!(k["tools"].as_array().unwrap().iter().any(|t| t == "write"));

    std::fs::write(d.path().join(".claude/agents/dev.md"), "mine").unwrap();
    std::fs::remove_file(d.path().join(".kiro/agents/review.json")).unwrap();
    let out = ok(&run(task(d.path()).args(["setup-agents"])));
    assert!(out.contains("added  .kiro/agents/review.json"), "{out}");
    assert!(out.contains("kept   .claude/agents/dev.md"), "{out}");
    assert_eq!(
        std::fs::read_to_string(d.path().join(".claude/agents/dev.md")).unwrap(),
        "mine"
    );
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args([
        "setup-agents",
        "--runtime",
        "claude",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["added"].as_array().unwrap().len(), 0);
    assert_eq!(v["kept"].as_array().unwrap().len(), 8);
}

#[test]
fn setup_agents_writes_another_rosters_agents() {
    let d = tempfile::tempdir().unwrap();
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args([
        "setup-agents",
        "--roster",
        "hub-and-spoke",
        "--runtime",
        "claude",
        "--json",
    ]))))
    .unwrap();
    // pm (playing the coordinator) and seed 001's other 13 agents.
    assert_eq!(v["added"].as_array().unwrap().len(), 14, "{v}");
    let ex = std::fs::read_to_string(d.path().join(".claude/agents/executor.md")).unwrap();
    assert!(ex.starts_with("---\nname: executor\n") && ex.contains("spoke"), "{ex}");
    assert!(
        !d.path().join(".claude/agents/coordinator.md").exists(),
        "the PM plays it"
    );
    let o = run(task(d.path()).args(["setup-agents", "--roster", "nope"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown roster 'nope'"), "{}", stderr(&o));
}

#[test]
fn help_teaches_names_and_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let out = ok(&run(task(d.path()).args(["--help"])));
    assert!(out.contains("Exit codes:") && out.contains("lower-case"), "{out}");
    let o = run(task(d.path()).args(["frobnicate"]));
    assert_eq!(o.status.code(), Some(2));
}

/// Each verb's line in `task --help` is its own: clap falls back to the doc of a
/// flattened struct when a verb has none, which once gave `setup-agents` the
/// `--project` text and `start` the setup-agents text.
#[test]
fn help_lists_each_verb_with_its_own_description() {
    let d = tempfile::tempdir().unwrap();
    let out = ok(&run(task(d.path()).args(["--help"])));
    let commands: Vec<(String, String)> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let l = l.trim_start();
            let (verb, desc) = l.split_once(char::is_whitespace)?;
            Some((verb.to_string(), desc.trim().to_string()))
        })
        .collect();
    let expected = [
        ("new", "Create tasks/<name>/"),
        ("handoff", "Write a well-formed handoff"),
        ("status", "Show a task's phase"),
        ("list", "List the project's tasks"),
        ("progress", "Regenerate progress.md"),
        ("start", "Start the task's PM in tmux"),
        ("spawn", "Start an agent in its own tmux session"),
        ("send", "Type a message into a running agent"),
        ("permit", "Answer a permission request"),
        ("rotate", "Replace the PM's conversation by a fresh one now"),
        ("checkin", "One check-in"),
        ("watch", "Run check-ins in the foreground"),
        ("stop", "End the task's agent sessions"),
        ("attach", "Attach your terminal to an agent's tmux session"),
        ("ui", "A live dashboard: who needs you first"),
        ("web", "The team on a phone"),
        ("hosts", "The fleet"),
        ("daemon", "Run the supervisor daemon in the foreground"),
        ("shutdown", "Stop the running daemon cleanly"),
        ("service", "Install, remove or inspect the systemd user unit"),
        ("doctor", "Check everything tasks depend on"),
        ("runtime", "Runtime profiles"),
        ("log", "Show a task's event log"),
        ("setup-agents", "Write the default agent definitions"),
        ("help", "Print this message"),
    ];
    let verbs: Vec<&str> = commands.iter().map(|(v, _)| v.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        {
            let mut v = verbs.clone();
            v.sort();
            v
        },
        {
            let mut w = want.clone();
            w.sort();
            w
        },
        "{out}"
    );
    for (verb, start) in expected {
        let desc = &commands.iter().find(|(v, _)| v == verb).unwrap().1;
        assert!(desc.starts_with(start), "`{verb}` is described as {desc:?}\n{out}");
    }
    let mut descs: Vec<&str> = commands.iter().map(|(_, d)| d.as_str()).collect();
    descs.sort();
    descs.dedup();
    assert_eq!(descs.len(), commands.len(), "two verbs share a description:\n{out}");
    assert!(!out.contains("shared by most verbs"), "{out}");
}

#[test]
fn setup_agents_merges_the_allow_rules_and_refuses_a_malformed_settings_file() {
    let d = tempfile::tempdir().unwrap();
    let settings = d.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        r#"{"model": "opus", "permissions": {"allow": ["Bash(cargo test:*)", "Bash(task status:*)"], "deny": ["Read(.env)"]}}"#,
    )
    .unwrap();
    let out = ok(&run(task(d.path()).args(["setup-agents", "--runtime", "claude"])));
    assert!(
        out.contains("allowed in .claude/settings.json: Bash(task handoff:*), Bash(task log:*), Bash(task progress:*)"),
        "{out}"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    assert_eq!(v["model"], "opus");
    assert_eq!(v["permissions"]["deny"][0], "Read(.env)");
    let allow: Vec<&str> = v["permissions"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(allow[0], "Bash(cargo test:*)");
    assert_eq!(allow.len(), 5, "{allow:?}");
    assert!(
        !allow.iter().any(|a| a.contains("spawn")),
        "only the rules every agent needs"
    );
    // Again: nothing to add, nothing rewritten.
    let v: Value = serde_json::from_str(&ok(&run(task(d.path()).args(["setup-agents", "--json"])))).unwrap();
    assert_eq!(v["permissions_added"].as_array().unwrap().len(), 0);
    // Kiro's agents trust the same commands; the PM's also spawn and send.
    let k: Value = serde_json::from_slice(&std::fs::read(d.path().join(".kiro/agents/pm.json")).unwrap()).unwrap();
    let cmds = k["toolsSettings"]["shell"]["allowedCommands"].to_string();
    assert!(
        cmds.contains("^task handoff( .*)?$") && cmds.contains("^task spawn( .*)?$"),
        "{cmds}"
    );
    let k: Value = serde_json::from_slice(&std::fs::read(d.path().join(".kiro/agents/dev.json")).unwrap()).unwrap();
    assert!(
        !k["toolsSettings"]["shell"]["allowedCommands"]
            .to_string()
            .contains("spawn")
    );
    assert!(k["allowedTools"].to_string().contains("write"));

    // A malformed file is refused, named, and left byte for byte.
    let e = tempfile::tempdir().unwrap();
    let bad = e.path().join(".claude/settings.json");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::write(&bad, b"{\"permissions\": {\"allow\": [\"Bash(ls)\",]}").unwrap();
    let before = snapshot(e.path());
    let o = run(task(e.path()).args(["setup-agents", "--runtime", "claude"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("settings.json cannot be merged: it is not valid JSON")
            && stderr(&o).contains("not changed"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(e.path()), before, "nothing written, no agent file either");
}

#[test]
fn runtime_check_passes_for_demo_and_shows_the_screen_when_a_pattern_does_not_match() {
    let w = World::new();
    w.new_task("t1", "");
    let out = ok(&run(w.task().args(["runtime", "check", "demo"])));
    for step in RUNTIME_CHECK_STEPS {
        assert!(
            out.lines().any(|l| l.starts_with("ok") && l.contains(step)),
            "{step}:\n{out}"
        );
    }
    assert!(w.sessions().is_empty(), "nothing left running: {:?}", w.sessions());

    // A profile whose ready pattern never matches fails at `ready`, with the screen and the fix.
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[runtimes.broken]\nargv = [\"{task_bin}\", \"demo-agent\", \"--prompt-file\", \"{prompt_file}\"]\n\
         max_prompt_arg = 0\nfile_prompt = \"{prompt_file}\"\nready_timeout_secs = 2\n\
         [runtimes.broken.patterns]\nready = ['^never> $']\n",
    )
    .unwrap();
    let o = run(w.task().args(["runtime", "check", "broken"]));
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("problem") && l.contains("ready")),
        "{out}"
    );
    assert!(
        out.contains("fix: make patterns.ready of [runtimes.broken] match"),
        "{out}"
    );
    assert!(
        out.contains("The screen when it failed:") && out.contains("demo> "),
        "{out}"
    );
    assert!(stderr(&o).contains("the ready step failed"), "{}", stderr(&o));
    assert!(w.sessions().is_empty(), "nothing left running: {:?}", w.sessions());

    // An unknown runtime fails at the profile, naming the ones there are.
    let o = run(w.task().args(["runtime", "check", "nosuch", "--json"]));
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(v["steps"][0]["name"], "profile");
    assert!(v["steps"][0]["detail"].as_str().unwrap().contains("demo"), "{v}");
}

/// `task hook permission-request`, as Claude Code runs it: the request's text is only ever
/// parsed, never run, and kept escaped (cut) in the event log; what the rules allow is
/// answered with Claude Code's hook JSON, what they deny with the reason; the rest waits
/// for `task permit` (the hub or a human; a spoke is refused), decided exactly once, or is
/// denied at the deadline; bad input never fails the hook.
#[test]
fn the_permission_hook_decides_by_rules_waits_for_one_answer_and_never_runs_what_it_reads() {
    let w = World::new();
    ok(&run(w.task().args(["new", "t1"])));
    let md = w.project.join("tasks/t1/task.md");
    let original = std::fs::read_to_string(&md).unwrap();
    std::fs::write(
        &md,
        format!("{original}\n## Agent Config\nallow-dev: Bash(cargo test:*)\ndeny: Bash(git push:*)\npermit_timeout: 30s\npermit_deadline: 2s\n"),
    )
    .unwrap();
    let hook_cmd = |agent: &str| {
        let mut c = w.task();
        c.args(["hook", "permission-request"])
            .env("TASK_NAME", "t1")
            .env("TASK_DIR", w.project.join("tasks/t1"))
            .env("TASK_AGENT", agent);
        c
    };
    let hook = |agent: &str, input: &[u8]| {
        let o = run_with_stdin(&mut hook_cmd(agent), input);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    let behavior = |out: &str| -> Value {
        let v: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        v["hookSpecificOutput"]["decision"].clone()
    };
    let req = |cmd: &str| {
        serde_json::to_vec(&serde_json::json!({"tool_name": "Bash", "tool_input": {"command": cmd}})).unwrap()
    };
    let marker = w.dir.path().join("RAN");
    let m = marker.display();

    // By rule: allowed when every part is, denied when any part is.
    let d = behavior(&hook("dev", &req("cargo test -q && task status t1 2>&1 | task log t1")));
    assert_eq!(d["behavior"], "allow", "{d}");
    let d = behavior(&hook("dev", &req("cargo test && git push origin main")));
    assert_eq!(d["behavior"], "deny", "{d}");
    assert!(d["message"].as_str().unwrap().contains("`git push origin main`"), "{d}");

    // No rule (the dev's rule is not review's): nobody answers within the deadline.
    let d = behavior(&hook("review", &req("cargo test")));
    assert_eq!(d["behavior"], "deny", "{d}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("nobody approved `cargo test` within 2 s"),
        "{d}"
    );
    // Hostile text is parsed, never run, and kept cut.
    let hostile = format!(
        "task status t1 \"$(touch {m})\" `touch {m}`; echo '\n' > {m}\n{}",
        "x".repeat(100_000)
    );
    assert_eq!(behavior(&hook("dev", &req(&hostile)))["behavior"], "deny");
    assert!(!marker.exists(), "the hook ran the request");

    // Answered: a spoke may not; the hub may, once; the hook goes on with the answer.
    std::fs::write(
        &md,
        format!("{original}\n## Agent Config\npermit_timeout: 30s\npermit_deadline: 60s\n"),
    )
    .unwrap();
    let mut waiting = hook_cmd("review");
    let mut child = waiting
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&req("make lint")).unwrap();
    }
    let id = wait_for("the request on file", 20, || {
        std::fs::read_dir(w.project.join("tasks/t1/permissions"))
            .ok()?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".request.json").map(str::to_string))
            .find(|id| {
                !w.project
                    .join(format!("tasks/t1/permissions/{id}.decision.json"))
                    .exists()
            })
    });
    let permit = |agent: Option<&str>, answer: &str| {
        let mut c = w.task();
        c.args(["permit", "t1", &id, answer, "--reason", "not today"]);
        match agent {
            Some(a) => c.env("TASK_AGENT", a).env("TASK_NAME", "t1"),
            None => c.env_remove("TASK_AGENT"),
        };
        run(&mut c)
    };
    // `task status` shows it, text and JSON, until it is answered.
    let st: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    let waiting = st["task"]["permissions"].as_array().cloned().unwrap_or_default();
    assert_eq!(waiting.len(), 1, "{st}");
    assert_eq!(
        (&waiting[0]["id"], &waiting[0]["agent"], &waiting[0]["command"]),
        (&id.clone().into(), &"review".into(), &"make lint".into())
    );
    let text = ok(&run(w.task().args(["status", "t1"])));
    assert!(
        text.contains(&format!(
            "WAITING FOR PERMISSION: {id} review wants to run \"make lint\""
        )),
        "{text}"
    );
    let o = permit(Some("dev"), "allow");
    assert_eq!(o.status.code(), Some(6), "a spoke answered: {}", stderr(&o));
    assert!(stderr(&o).contains("only its hub (pm) or a human"), "{}", stderr(&o));
    let o = permit(Some("pm"), "allow");
    assert!(stdout(&o).contains(": allow by pm"), "{}{}", stdout(&o), stderr(&o));
    let o = permit(None, "deny");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("already decided: allow by pm"), "{}", stderr(&o));
    let out = child.wait_with_output().unwrap();
    assert_eq!(behavior(&String::from_utf8_lossy(&out.stdout))["behavior"], "allow");
    let st: Value = serde_json::from_str(&ok(&run(w.task().args(["status", "t1", "--json"])))).unwrap();
    assert_eq!(st["task"]["permissions"].as_array().map(Vec::len), Some(0), "{st}");
    let o = run(w.task().args(["permit", "t1", "p-../../x", "allow"]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // Bad input: not JSON, too large, not an agent's session: nothing printed, exit 0.
    assert_eq!(hook("dev", b"not json {"), "");
    assert_eq!(hook("dev", &vec![b' '; (1 << 20) + 10]), "");
    let o = run_with_stdin(
        w.task().args(["hook", "permission-request"]).env_remove("TASK_NAME"),
        &req("cargo test"),
    );
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), ""), "{}", stderr(&o));

    let by = |e: &Value| {
        format!(
            "{}/{}",
            e["data"]["decision"].as_str().unwrap(),
            e["data"]["by"].as_str().unwrap()
        )
    };
    let decided: Vec<String> = w.events_of("t1", "permission_decision").iter().map(by).collect();
    assert_eq!(
        decided,
        [
            "allow/rules",
            "deny/rules",
            "deny/deadline",
            "deny/deadline",
            "allow/pm"
        ]
    );
    let asked = w.events_of("t1", "permission_request");
    assert_eq!(asked.len(), 3, "{asked:?}");
    let kept = asked[1]["data"]["command"].as_str().unwrap();
    assert!(kept.len() < 1000 && asked[1]["data"]["truncated"] == true, "{kept}");
    assert!(kept.contains("$(touch"), "{kept}");
}
