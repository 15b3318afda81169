//! Real Gemini CLI as the PM and every spoke, offline: the model behind it is the scripted
//! server in common/model.rs (speaking its API), and nothing else is a stand-in. The
//! project is set up only with what `task setup-agents --runtime gemini` writes.
//!
//! Gemini CLI comes from npm, pinned in tests/gemini.version; scripts/test installs it into target/.

mod common;

use common::claude::*;

/// The example task runs to COMPLETE with real Gemini CLI everywhere; every spoke's handoff
/// reaches the PM exactly once.
#[test]
fn the_example_task_completes_with_real_gemini_and_every_handoff_reaches_the_pm_once() {
    Cc::with_runtime("gemini").assert_example_completes_everywhere("GEMINI.md");
}

#[test]
fn runtime_check_proves_gemini_step_by_step_and_leaves_nothing_running() {
    Cc::with_runtime("gemini").assert_runtime_check_passes();
}
