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
    // The dialog's line from the screen, or the client's own words when its Notification
    // hook was looked at before the dialog was drawn.
    assert!(
        reason.starts_with("explore needs a human: permission prompt \"Do you want to proceed?\"")
            || reason.starts_with("explore needs a human: permission prompt \"Claude needs your permission"),
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
    // 2.1.197's wording, then 2.1.332's.
    assert!(
        line.contains("You've hit your session limit · resets") || line.contains("Usage limit reached · limit resets"),
        "{line}"
    );
    assert_eq!(paused["data"]["reset_parsed"], true, "{paused}");
    let resets_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(paused["data"]["resets_at"].clone()).unwrap();
    assert_eq!(resets_at.timestamp() as u64, reset_secs, "{line}");
    let st = cc.state();
    assert_eq!(st["agents"]["explore"]["attention"]["kind"], "paused", "{st}");
    let resumed = cc.wait_event("resumed", 120);
    assert_eq!(resumed["data"]["outcome"], "delivered", "{resumed}\n{}", cc.dump());
    let at: chrono::DateTime<chrono::Utc> = serde_json::from_value(resumed["time"].clone()).unwrap();
    assert!(at.timestamp() as u64 > reset_secs, "not before the reset: {at}");
    // The continue message reached explore's model as a new turn (the request follows the
    // confirmed delivery by a moment: waited for, then counted), and the task completes.
    wait_for("the continue message at explore's model", 60, || {
        (!cc.model.turns_saying("explore", "The usage limit has reset").is_empty()).then_some(())
    });
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

fn agent_in(status: &serde_json::Value, agent: &str) -> serde_json::Value {
    status["task"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == agent)
        .cloned()
        .unwrap_or_default()
}

/// The claude runtime as built in, but with the screen `patterns` named empty (blind to
/// usage limits, or to dialogs): only the client's own hooks can tell of one. Added to the
/// user's config file (after `notify_to_file`, which writes it anew).
fn claude_blind_to(cc: &Cc, patterns: &str) {
    let profile = std::fs::read_to_string(repo().join("templates/runtimes/claude.toml")).unwrap();
    let start = profile.find(&format!("\n{patterns} = [")).unwrap() + 1;
    let end = start + profile[start..].find("]\n").unwrap() + 2;
    let profile = format!("{}{patterns} = []\n{}", &profile[..start], &profile[end..])
        .replace("[patterns]", "[runtimes.claude.patterns]");
    let cfg = cc.w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    let before = std::fs::read_to_string(cfg.join("config.toml")).unwrap_or_default();
    std::fs::write(
        cfg.join("config.toml"),
        format!("{before}\n[runtimes.claude]\n{profile}"),
    )
    .unwrap();
}

#[test]
fn a_usage_limit_the_screen_cannot_see_is_known_from_the_clients_stop_failure_hook() {
    let cc = Cc::new();
    claude_blind_to(&cc, "usage_limit");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let reset_secs = (now / 60 + 1) * 60;
    cc.model
        .limit_next("explore", UNIX_EPOCH + Duration::from_secs(reset_secs));
    cc.start_example_with("resume_delay: 1s\n");
    let failed = wait_for("the turn failure", 120, || {
        events(&cc.task_dir(), "turn_failed").into_iter().next()
    });
    assert_eq!(failed["agent"], "explore", "{failed}");
    assert_eq!(failed["data"]["error"], "rate_limit", "{failed}");
    let paused = wait_for("the pause", 30, || events(&cc.task_dir(), "paused").into_iter().next());
    assert_eq!(paused["agent"], "explore");
    // Read from the hook's text: the reset to the minute.
    assert_eq!(paused["data"]["reset_parsed"], true, "{paused}");
    let resets_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(paused["data"]["resets_at"].clone()).unwrap();
    assert_eq!(resets_at.timestamp() as u64, reset_secs, "{paused}");
    let st = cc.state();
    assert_eq!(st["agents"]["explore"]["attention"]["kind"], "paused", "{st}");
    let status: serde_json::Value = serde_json::from_str(&cc.ok(&["status", TASK, "--json"])).unwrap();
    let explore = agent_in(&status, "explore");
    assert_eq!(explore["turn"]["state"], "failed", "{explore}");
    assert_eq!(explore["turn"]["error"], "rate_limit", "{explore}");
    let resumed = cc.wait_event("resumed", 120);
    assert_eq!(resumed["data"]["outcome"], "delivered", "{resumed}\n{}", cc.dump());
    cc.wait_phase("COMPLETE", 240);
    assert!(events(&cc.task_dir(), "escalation").is_empty(), "{}", cc.dump());
    assert!(events(&cc.task_dir(), "turn_corrected").is_empty(), "{}", cc.dump());
    // Every agent's client reported its turns: the PM's last one ended or is under way.
    let status: serde_json::Value = serde_json::from_str(&cc.ok(&["status", TASK, "--json"])).unwrap();
    let pm = agent_in(&status, "pm");
    assert!(
        ["ended", "working"].contains(&pm["turn"]["state"].as_str().unwrap_or("")),
        "{pm}"
    );
    cc.assert_each_handoff_told_once();
}

#[test]
fn a_dialog_the_screen_patterns_do_not_know_is_known_from_the_clients_notification_hook() {
    let cc = Cc::new();
    let notified = cc.notify_to_file();
    claude_blind_to(&cc, "dialog");
    cc.model.ask_first("explore", "curl -s http://127.0.0.1:9/");
    cc.start_example_with("attention_after: 1s\nbroker: off\n");
    let began = wait_for("the episode", 120, || {
        events(&cc.task_dir(), "needs_human").into_iter().next()
    });
    assert_eq!(began["agent"], "explore", "{began}");
    assert_eq!(began["data"]["reason"], "permission prompt", "{began}");
    assert!(
        began["data"]["line"]
            .as_str()
            .unwrap()
            .contains("needs your permission"),
        "the client's own words: {began}"
    );
    wait_for("the notify command", 30, || {
        std::fs::read_to_string(&notified)
            .unwrap_or_default()
            .contains("explore needs a human")
            .then_some(())
    });
    // A human answers "Yes": the client works again, the wait is over, the task goes on.
    cc.w.tmux(&["send-keys", "-t", &session(&cc, "explore"), "1"]);
    wait_for("attention_cleared", 60, || {
        events(&cc.task_dir(), "attention_cleared").into_iter().next()
    });
    cc.wait_phase("COMPLETE", 240);
    assert_eq!(events(&cc.task_dir(), "escalation").len(), 1, "{}", cc.dump());
    // An answered wait is not a contradiction.
    assert!(events(&cc.task_dir(), "turn_corrected").is_empty(), "{}", cc.dump());
}
