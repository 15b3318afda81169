//! Real Gemini CLI as the PM and every spoke, offline: the model behind it is the scripted
//! server in common/model.rs (speaking its API), and nothing else is a stand-in. The
//! project is set up only with what `task setup-agents --runtime gemini` writes.
//!
//! Gemini CLI comes from npm, pinned in tests/gemini.version; scripts/test installs it into target/.

mod common;

use common::claude::*;
use common::model::ROUTE;
use common::*;

/// The example task runs to COMPLETE with real Gemini CLI everywhere; every spoke's handoff
/// reaches the PM exactly once.
#[test]
fn the_example_task_completes_with_real_gemini_and_every_handoff_reaches_the_pm_once() {
    let cc = Cc::with_runtime("gemini");
    cc.start_example();
    assert!(cc.w.project.join("GEMINI.md").exists(), "setup-agents wrote GEMINI.md");
    cc.wait_phase("COMPLETE", 300);
    cc.assert_each_handoff_told_once();
    let st = cc.state();
    for a in ROUTE.iter().chain(["pm"].iter()) {
        assert_eq!(st["agents"][a]["runtime"], "gemini", "{a}");
    }
    // Every tool call ran and came back with `task`'s answer, not a refusal.
    for s in cc.model.seen().iter().filter(|s| s.main && !s.new_turn) {
        assert!(
            !s.last_user.contains("command not found") && !s.last_user.contains("rejected"),
            "{}",
            s.last_user
        );
    }
}

#[test]
fn runtime_check_proves_gemini_step_by_step_and_leaves_nothing_running() {
    let cc = Cc::with_runtime("gemini");
    cc.ok(&["setup-agents", "--runtime", "gemini"]);
    let o = run(&mut cc.task(&["runtime", "check", "gemini", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(o.status.code(), Some(0), "{v}\n{}\n{}", stderr(&o), cc.dump());
    assert_eq!(v["passed"], true, "{v}");
    assert!(
        cc.model
            .seen()
            .iter()
            .any(|s| s.main && s.last_user.contains("the probe message")),
        "{}",
        cc.dump()
    );
    assert!(
        cc.w.sessions().is_empty(),
        "the scratch session is gone: {:?}",
        cc.w.sessions()
    );
}
