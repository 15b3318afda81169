//! A mixed team, every member a real agent CLI, offline: the PM on Claude Code, dev on
//! Codex CLI, review on Gemini CLI (task.md's `runtime-<agent>:`), the others on the PM's
//! runtime. The scripted model server answers each in its own API; nothing else is a
//! stand-in.

mod common;

use common::claude::*;
use common::model::ROUTE;
use common::*;

#[test]
fn a_team_of_claude_codex_and_gemini_completes_the_task_with_every_handoff_told_once() {
    let cc = Cc::with_programs("claude", &["claude", "codex", "gemini"]);
    cc.ok(&["new", TASK]);
    let md = std::fs::read_to_string(repo().join("tasks.example").join(TASK).join("task.md")).unwrap();
    std::fs::write(
        cc.task_dir().join("task.md"),
        format!("{md}runtime-dev: codex\nruntime-review: gemini\n"),
    )
    .unwrap();
    for rt in ["claude", "codex", "gemini"] {
        cc.ok(&["setup-agents", "--runtime", rt]);
    }
    cc.ok(&["start", TASK, "--runtime", "claude"]);
    cc.wait_phase("COMPLETE", 300);
    cc.assert_each_handoff_told_once();
    let st = cc.state();
    for a in ROUTE.iter().chain(["pm"].iter()) {
        let want = match *a {
            "dev" => "codex",
            "review" => "gemini",
            _ => "claude",
        };
        assert_eq!(st["agents"][a]["runtime"], want, "{a}\n{}", cc.dump());
    }
}
