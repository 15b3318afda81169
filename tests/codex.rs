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
