//! Opt-in: a real Claude Code accepts the spawn command line and a `task send`.
//!
//! Runs only when `AO_TEST_CLAUDE` points at a `claude` binary
//! (`npm install @anthropic-ai/claude-code` brings one). No network is needed:
//! a throwaway HOME marks onboarding done and the project trusted, so Claude
//! Code reaches its input box ("Not logged in") offline.

mod common;

use common::*;

#[test]
fn claude_code_accepts_spawn_and_send() {
    let Some(claude) = std::env::var_os("AO_TEST_CLAUDE") else {
        eprintln!("skipped: set AO_TEST_CLAUDE=/path/to/claude to run");
        return;
    };
    let claude = std::path::PathBuf::from(claude);
    let w = World::new();
    let home = w.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cfg = serde_json::json!({
        "hasCompletedOnboarding": true,
        "projects": { w.project.to_string_lossy(): { "hasTrustDialogAccepted": true } },
    });
    std::fs::write(home.join(".claude.json"), cfg.to_string()).unwrap();
    let path = format!(
        "{}:{}:{}",
        w.bin_dir.display(),
        claude.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cmd = |args: &[&str]| {
        let mut c = w.task();
        c.env("PATH", &path)
            .env("HOME", &home)
            .env("DISABLE_AUTOUPDATER", "1")
            .args(args);
        c
    };
    ok(&run(&mut cmd(&["new", "t1"])));
    ok(&run(&mut cmd(&["setup-agents", "--runtime", "claude"])));
    let h = ok(&run_with_stdin(
        &mut cmd(&[
            "handoff",
            "t1",
            "--from",
            "pm",
            "--target",
            "dev",
            "--status",
            "IN_PROGRESS",
            "--body-file",
            "-",
        ]),
        b"## Instructions\nSay hello.\n",
    ));
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&mut cmd(&[
        "spawn",
        "t1",
        "dev",
        "--handoff",
        h.trim(),
        "--runtime",
        "claude",
        "--json",
    ]))))
    .unwrap();
    let argv: Vec<&str> = v["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&argv[..5], &["claude", "--agent", "dev", "-n", "aot-t1-dev"]);
    let pane = v["pane"].as_str().unwrap().to_string();
    wait_for("Claude Code's input box", 90, || {
        w.capture(&pane).contains("❯\u{a0}").then_some(())
    });
    // Claude Code is running, not exited: the command line (--agent, -n, --session-id, prompt) was accepted.
    // (Offline and not logged in, it does not submit the positional prompt; with a login it does.)
    assert!(!w.capture(&pane).contains("not found"), "{}", w.capture(&pane));
    let o = run(&mut cmd(&[
        "send",
        "t1",
        "dev",
        "--message",
        "hello from the opt-in test; $(not executed)",
    ]));
    let out = ok(&o);
    assert!(out.starts_with("delivered"), "{out}");
    let screen = wait_for("the message in the history", 30, || {
        let s = w.capture(&pane);
        s.contains("❯ hello from the opt-in test").then_some(s)
    });
    assert!(screen.contains("$(not executed)"), "{screen}");
}
