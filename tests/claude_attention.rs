//! Issue 11 items 2 and 3 with real Claude Code (the pinned binary, offline, against the
//! scripted model server of common/model.rs): a permission prompt a spoke cannot get past
//! calls a human through the notify command, and a subscription usage limit is paused and
//! resumed after its reset without one. Everything but the model is real.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::claude::*;
use common::*;

fn session(cc: &Cc, agent: &str) -> String {
    format!("={}:", cc.state()["agents"][agent]["session"].as_str().unwrap())
}

#[test]
fn a_permission_prompt_in_real_claude_code_calls_a_human_and_the_task_goes_on_once_answered() {
    let cc = Cc::new();
    let notified = cc.notify_to_file();
    // A command no allow rule covers: Claude Code asks before running it.
    cc.model.ask_first("explore", "curl -s http://127.0.0.1:9/");
    // Without the broker, what no rule decides is Claude Code's own dialog.
    cc.start_example_with("attention_after: 1s\nbroker: off\n");
    let esc = wait_for("the escalation", 120, || {
        events(&cc.task_dir(), "escalation").into_iter().next()
    });
    let reason = esc["data"]["reason"].as_str().unwrap().to_string();
    assert!(
        reason.starts_with("explore needs a human: permission prompt \"Do you want to proceed?\""),
        "{reason}\n{}",
        cc.dump()
    );
    wait_for("the notify command", 10, || {
        std::fs::read_to_string(&notified)
            .unwrap_or_default()
            .contains("explore needs a human")
            .then_some(())
    });
    let st = cc.state();
    assert_eq!(st["agents"]["explore"]["attention"]["kind"], "needs_human", "{st}");
    // The PM is told, by name and dialog, in a check-in that reached its model.
    wait_for("the PM's check-in naming explore", 60, || {
        cc.model
            .turns_saying("pm", "needs a human: explore — permission prompt")
            .into_iter()
            .next()
    });
    // A human answers "Yes": the episode ends and the task carries on to COMPLETE.
    cc.w.tmux(&["send-keys", "-t", &session(&cc, "explore"), "1"]);
    wait_for("attention_cleared", 60, || {
        events(&cc.task_dir(), "attention_cleared").into_iter().next()
    });
    cc.wait_phase("COMPLETE", 240);
    assert_eq!(events(&cc.task_dir(), "escalation").len(), 1, "{}", cc.dump());
    assert_eq!(cc.state()["escalations"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_usage_limit_in_real_claude_code_is_paused_and_resumed_after_its_reset_with_no_human() {
    let cc = Cc::new();
    let notified = cc.notify_to_file();
    // The reset on the next minute boundary (Claude Code shows it to the minute).
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let reset_secs = (now / 60 + 1) * 60;
    let reset = UNIX_EPOCH + Duration::from_secs(reset_secs);
    cc.model.limit_next("explore", reset);
    cc.start_example_with("resume_delay: 1s\n");
    let paused = wait_for("the pause", 120, || events(&cc.task_dir(), "paused").into_iter().next());
    assert_eq!(paused["agent"], "explore");
    let line = paused["data"]["line"].as_str().unwrap();
    assert!(line.contains("You've hit your session limit · resets"), "{line}");
    assert_eq!(paused["data"]["reset_parsed"], true, "{paused}");
    let resets_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(paused["data"]["resets_at"].clone()).unwrap();
    assert_eq!(resets_at.timestamp() as u64, reset_secs, "{line}");
    let st = cc.state();
    assert_eq!(st["agents"]["explore"]["attention"]["kind"], "paused", "{st}");
    let resumed = wait_until(
        "the resume",
        Duration::from_secs(120),
        Duration::from_millis(100),
        || events(&cc.task_dir(), "resumed").into_iter().next(),
        || cc.dump(),
    );
    assert_eq!(resumed["data"]["outcome"], "delivered", "{resumed}\n{}", cc.dump());
    let at: chrono::DateTime<chrono::Utc> = serde_json::from_value(resumed["time"].clone()).unwrap();
    assert!(at.timestamp() as u64 > reset_secs, "not before the reset: {at}");
    // The continue message reached explore's model as a new turn, and the task completes.
    assert_eq!(
        cc.model.turns_saying("explore", "The usage limit has reset").len(),
        1,
        "{}",
        cc.dump()
    );
    cc.wait_phase("COMPLETE", 240);
    assert!(events(&cc.task_dir(), "escalation").is_empty(), "{}", cc.dump());
    assert!(std::fs::read_to_string(&notified).unwrap_or_default().is_empty());
    assert_eq!(events(&cc.task_dir(), "attention_cleared").len(), 1, "{}", cc.dump());
    cc.assert_each_handoff_told_once();
}
