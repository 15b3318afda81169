//! A remote agent's usage, read on its host over the SSH master: only what was appended
//! since the last look, a torn last line left for next time. The host is a loopback sshd;
//! the transcript is written where the test points the remote reader
//! (`AO_REMOTE_CLAUDE_PROJECTS`), never into the machine's own ~/.claude.

mod common;

use std::path::Path;
use std::process::Command;

use common::sshd::Sshd;
use common::*;

fn answer(id: &str, input: u64, output: u64) -> String {
    format!(
        "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"claude-sonnet-4-5\",\"usage\":{{\"input_tokens\":{input},\"output_tokens\":{output},\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}}}}}}\n"
    )
}

fn slug(p: &Path) -> String {
    p.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

#[test]
fn a_remote_agents_usage_is_read_on_its_host_incrementally() {
    let w = World::new();
    let sshd = Sshd::start(w.dir.path());
    let rdir = w.dir.path().join("remote-work");
    std::fs::create_dir_all(&rdir).unwrap();
    let rsock = w.dir.path().join("remote-tmux.sock");
    let projects = w.dir.path().join("remote-claude-projects");
    let task = |args: &[&str]| {
        let mut c = w.task();
        c.env("AO_SSH_CONFIG", &sshd.config)
            .env("AO_REMOTE_TMUX_SOCKET", &rsock)
            .env("AO_REMOTE_CLAUDE_PROJECTS", &projects)
            .env("AO_DEMO_IDLE", "1")
            .args(args);
        c
    };
    ok(&run(&mut task(&["new", "t1"])));
    std::fs::write(
        w.project.join("tasks/t1/task.md"),
        format!(
            "# Task: remote\n\n## Goal\nTry it.\n\n## Agent Config\ncwd: aoremote:{}\n",
            rdir.display()
        ),
    )
    .unwrap();
    let h = ok(&run_with_stdin(
        &mut task(&[
            "handoff",
            "t1",
            "--from",
            "pm",
            "--status",
            "IN_PROGRESS",
            "--body-file",
            "-",
        ]),
        b"## Instructions\nWait.\n",
    ));
    ok(&run(&mut task(&[
        "spawn",
        "t1",
        "dev",
        "--handoff",
        h.trim(),
        "--runtime",
        "demo",
    ])));
    // The demo runtime keeps no usage record: unknown, not zero.
    let status =
        || -> serde_json::Value { serde_json::from_str(&ok(&run(&mut task(&["status", "t1", "--json"])))).unwrap() };
    let dev = |st: &serde_json::Value| {
        st["task"]["cost"]["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == "dev")
            .cloned()
            .unwrap()
    };
    let st = status();
    assert_eq!(dev(&st)["known"], false, "{st}");
    assert_eq!(st["task"]["cost"]["unknown"][0], "dev");

    // Say dev is Claude Code with a session whose transcript is on the host.
    let state_path = w.project.join("tasks/t1/pm_state.json");
    let mut state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    state["agents"]["dev"]["runtime"] = "claude".into();
    state["agents"]["dev"]["session_id"] = "s-remote".into();
    std::fs::write(&state_path, state.to_string()).unwrap();
    let dir = projects.join(slug(&rdir));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s-remote.jsonl");
    let torn = answer("m3", 1000, 1);
    std::fs::write(
        &file,
        format!("{}{}{}", answer("m1", 10, 1), answer("m2", 20, 2), &torn[..30]),
    )
    .unwrap();
    let st = status();
    let d = dev(&st);
    assert_eq!(d["known"], true, "{st}");
    assert_eq!(
        (d["tokens"]["input"].as_u64(), d["answers"].as_u64()),
        (Some(30), Some(2)),
        "{d}"
    );

    // The line completes: counted once, from where the last read stopped.
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap()
        .write_all(&torn.as_bytes()[30..])
        .unwrap();
    let st = status();
    assert_eq!(dev(&st)["tokens"]["input"], 1030, "{st}");
    assert_eq!(dev(&st)["answers"], 3);
    let usage: serde_json::Value =
        serde_json::from_slice(&std::fs::read(w.project.join("tasks/t1/usage.json")).unwrap()).unwrap();
    let offset = usage["agents"]["dev"]["s-remote"]["offset"].as_u64().unwrap();
    assert_eq!(offset, std::fs::metadata(&file).unwrap().len());
    assert_eq!(
        status()["task"]["cost"]["total_tokens"],
        1034,
        "the same total when nothing was added"
    );

    let _ = Command::new("tmux").arg("-S").arg(&rsock).arg("kill-server").output();
}
