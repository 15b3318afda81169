//! Real Codex CLI as the PM and every spoke, offline: the model behind it is the scripted
//! server in common/model.rs (speaking its API), and nothing else is a stand-in. The
//! project is set up only with what `task setup-agents --runtime codex` writes.
//!
//! Codex CLI comes from npm, pinned in tests/codex.version; scripts/test installs it into target/.

mod common;

use common::claude::*;

/// The example task runs to COMPLETE with real Codex CLI everywhere; every spoke's handoff
/// reaches the PM exactly once.
#[test]
fn the_example_task_completes_with_real_codex_and_every_handoff_reaches_the_pm_once() {
    Cc::with_runtime("codex").assert_example_completes_everywhere("AGENTS.md");
}

#[test]
fn runtime_check_proves_codex_step_by_step_and_leaves_nothing_running() {
    Cc::with_runtime("codex").assert_runtime_check_passes();
}

/// Issue 25, item 4: with Codex's own sandbox (workspace-write, approvals never) a dev
/// agent runs `make test`, which no rule names, with no prompt; a write to the home fails
/// inside the sandbox and the model is shown why. (Codex's sandbox confines writes and the
/// network, not reads: README's runtime table says so.)
#[test]
fn a_codex_dev_runs_make_test_in_codex_s_sandbox_with_no_prompt_and_cannot_write_home() {
    let cc = Cc::with_runtime("codex");
    std::fs::write(
        cc.w.project.join("Makefile"),
        "test:\n\techo built and tested > test-ran.txt\n\t-touch $(HOME)/escaped\n",
    )
    .unwrap();
    cc.model.ask_first("dev", "make test");
    cc.start_example_with("attention_after: 2s\n");
    cc.wait_phase("COMPLETE", 300);
    let ran = std::fs::read_to_string(cc.w.project.join("test-ran.txt")).unwrap_or_default();
    assert_eq!(ran.trim(), "built and tested", "{}", cc.dump());
    assert!(
        !cc.home.join("escaped").exists(),
        "a sandboxed command wrote in the home"
    );
    assert!(events(&cc.task_dir(), "needs_human").is_empty(), "{}", cc.dump());
    let spawns = events(&cc.task_dir(), "spawn");
    let sandbox = |a: &str| {
        spawns
            .iter()
            .find(|e| e["agent"] == a)
            .map(|e| e["data"]["sandbox"].clone())
            .unwrap_or_default()
    };
    assert_eq!((sandbox("dev"), sandbox("pm")), ("on".into(), "off".into()));
    let out = cc
        .tool_output("dev", "built and tested")
        .unwrap_or_else(|| panic!("make test's output never reached dev's model\n{}", cc.dump()));
    assert!(out.contains("escaped': Read-only file system"), "{out}");
    cc.assert_each_handoff_told_once();
}
