//! Issue 25 with real Claude Code (the pinned binary, offline, against the scripted model
//! server): agents that build and test run their commands inside Claude Code's sandbox
//! (bubblewrap and socat, installed by scripts/test) without a prompt, and what those
//! commands can touch is confined: not the user's home, not their keys, not another task;
//! and a long handoff body, written as the preambles teach, asks nobody. Everything but
//! the model is real.

mod common;

use common::claude::*;
use common::*;

/// `make test` builds and tests, then tries what a sandboxed command must not manage.
const MAKEFILE: &str = "test:\n\
\techo built and tested > test-ran.txt\n\
\t-touch $(HOME)/escaped\n\
\t-cat $(HOME)/.ssh/id_test > ssh-read.txt\n\
\t-touch tasks/other/escaped\n";

const SECRET: &str = "PRIVATE-KEY-THAT-MUST-NOT-BE-READ";

/// A project with a Makefile, a key in the (throwaway) home, and another task's folder.
fn project_with_a_makefile(cc: &Cc) {
    std::fs::write(cc.w.project.join("Makefile"), MAKEFILE).unwrap();
    std::fs::create_dir_all(cc.home.join(".ssh")).unwrap();
    std::fs::write(cc.home.join(".ssh/id_test"), SECRET).unwrap();
    std::fs::create_dir_all(cc.w.project.join("tasks/other")).unwrap();
}

fn spawn_of(cc: &Cc, agent: &str) -> serde_json::Value {
    events(&cc.task_dir(), "spawn")
        .into_iter()
        .find(|e| e["agent"] == agent)
        .unwrap_or_else(|| panic!("no spawn of {agent}\n{}", cc.dump()))
}

#[test]
fn a_dev_agent_runs_make_test_in_the_sandbox_with_no_prompt_and_touches_nothing_outside_it() {
    let cc = Cc::new();
    project_with_a_makefile(&cc);
    // A command no allow rule covers: without the sandbox, Claude Code would ask.
    cc.model.ask_first("dev", "make test");
    cc.start_example_with("attention_after: 2s\n");
    cc.wait_phase("COMPLETE", 300);
    let ran = std::fs::read_to_string(cc.w.project.join("test-ran.txt")).unwrap_or_default();
    assert_eq!(ran.trim(), "built and tested", "{}", cc.dump());
    // Nobody was asked, and nothing waited at a dialog.
    assert!(events(&cc.task_dir(), "needs_human").is_empty(), "{}", cc.dump());
    assert!(events(&cc.task_dir(), "escalation").is_empty(), "{}", cc.dump());
    // Confined: the home, the keys and the other task are out of reach.
    assert!(
        !cc.home.join("escaped").exists(),
        "a sandboxed command wrote in the home"
    );
    let read = std::fs::read_to_string(cc.w.project.join("ssh-read.txt")).unwrap_or_default();
    assert!(!read.contains(SECRET), "a sandboxed command read ~/.ssh: {read:?}");
    assert!(
        !cc.w.project.join("tasks/other/escaped").exists(),
        "a sandboxed command wrote in another task"
    );
    // Dev and review ran sandboxed; the PM and explore (no commands of their own) did not.
    assert_eq!(spawn_of(&cc, "dev")["data"]["sandbox"], "on");
    assert_eq!(spawn_of(&cc, "review")["data"]["sandbox"], "on");
    assert_eq!(spawn_of(&cc, "explore")["data"]["sandbox"], "off");
    assert_eq!(spawn_of(&cc, "pm")["data"]["sandbox"], "off");
    // The refusals came from the sandbox, and the model was shown them.
    let out = cc
        .tool_output("dev", "built and tested")
        .unwrap_or_else(|| panic!("make test's output never reached dev's model\n{}", cc.dump()));
    assert!(out.contains("escaped': Read-only file system"), "{out}");
    assert!(out.contains("tasks/other/escaped': Read-only file system"), "{out}");
    cc.assert_each_handoff_told_once();
}

#[test]
fn with_the_sandbox_off_the_same_command_goes_to_the_broker_and_the_pm_allows_it() {
    let cc = Cc::new();
    project_with_a_makefile(&cc);
    cc.model.ask_first("dev", "make test");
    cc.start_example_with("attention_after: 2s\nsandbox: off\n");
    cc.wait_phase("COMPLETE", 300);
    let asked = events(&cc.task_dir(), "permission_request");
    assert_eq!(asked.len(), 1, "{asked:?}\n{}", cc.dump());
    assert_eq!(
        (&asked[0]["agent"], &asked[0]["data"]["asked"]),
        (&"dev".into(), &"pm".into())
    );
    let decided = events(&cc.task_dir(), "permission_decision");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        (&decided[0]["data"]["decision"], &decided[0]["data"]["by"]),
        (&"allow".into(), &"pm".into())
    );
    // Unsandboxed, nothing confined it: it is the PM's yes that let it run.
    let ran = std::fs::read_to_string(cc.w.project.join("test-ran.txt")).unwrap_or_default();
    assert_eq!(ran.trim(), "built and tested", "{}", cc.dump());
    assert!(
        events(&cc.task_dir(), "needs_human").is_empty(),
        "no dialog: {}",
        cc.dump()
    );
    assert_eq!(spawn_of(&cc, "dev")["data"]["sandbox"], "off");
    cc.assert_each_handoff_told_once();
}

/// Nobody's rules cover a request, and the PM does not answer: past `permit_timeout:` a
/// human is called, once; past `permit_deadline:` it is denied, and the agent is told why
/// and what to do.
#[test]
fn a_request_the_pm_leaves_unanswered_calls_a_human_once_then_is_denied_at_the_deadline() {
    let cc = Cc::new();
    let notified = cc.notify_to_file();
    cc.model.silent_on_permits();
    cc.model.ask_first("explore", "curl -s http://127.0.0.1:9/");
    cc.start_example_with("attention_after: 2s\npermit_timeout: 2s\npermit_deadline: 6s\n");
    cc.wait_phase("COMPLETE", 300);
    let esc = events(&cc.task_dir(), "escalation");
    assert_eq!(esc.len(), 1, "{esc:?}\n{}", cc.dump());
    let reason = esc[0]["data"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("explore asks permission (p-"), "{reason}");
    let told = std::fs::read_to_string(&notified).unwrap_or_default();
    assert_eq!(told.lines().count(), 1, "{told}");
    let decided = events(&cc.task_dir(), "permission_decision");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        (&decided[0]["data"]["decision"], &decided[0]["data"]["by"]),
        (&"deny".into(), &"deadline".into())
    );
    let out = cc.tool_output("explore", "").unwrap_or_default();
    assert!(
        out.contains("nobody approved `curl -s http://127.0.0.1:9/` within 6 s; hand off BLOCKED"),
        "{out}"
    );
    // And the agent, told so, handed off BLOCKED with the reason.
    let blocked = std::fs::read_dir(cc.task_dir().join("handoffs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .find(|t| t.starts_with("# Handoff: explore"))
        .unwrap_or_default();
    assert!(
        blocked.contains("**Status:** BLOCKED") && blocked.contains("nobody approved"),
        "{blocked}"
    );
    // The escalation closed with the decision.
    assert_eq!(
        cc.state()["escalations"].as_array().map(Vec::len),
        Some(0),
        "{}",
        cc.state()
    );
}

/// A 200-line handoff body written the way the preambles teach (the client's Write tool
/// into the scratchpad, then a short `task handoff … --body-file <file>`) goes through
/// with nobody asked; the same body inline, as one long heredoc command, is where Claude
/// Code 2.1.197 gives up analysing the command and asks (measured: a command of 7.9 KB
/// passes, 9.9 KB asks; the preambles inline only bodies up to about 40 lines).
#[test]
fn a_long_handoff_body_goes_through_as_a_file_and_inline_through_the_broker_with_no_prompt() {
    let cc = Cc::new();
    cc.model.long_bodies("pm", 200);
    cc.start_example_with("attention_after: 2s\n");
    cc.wait_phase("COMPLETE", 300);
    assert!(events(&cc.task_dir(), "needs_human").is_empty(), "{}", cc.dump());
    let wrote = cc
        .model
        .seen()
        .iter()
        .filter(|s| s.answer.starts_with("write: "))
        .count();
    assert_eq!(wrote, 4, "one Write per delegation\n{}", cc.dump());
    let first = std::fs::read_dir(cc.task_dir().join("handoffs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("pm-"))
        .min()
        .unwrap();
    let text = std::fs::read_to_string(&first).unwrap();
    assert!(
        text.contains("- detail 200: check `src/explore.rs` line 200, keep \"quotes\" and $VARS"),
        "{text}"
    );
    cc.assert_each_handoff_told_once();
    drop(cc);

    let cc = Cc::new();
    let body: String = (1..=200)
        .map(|i| format!("- detail {i}: check `src/explore.rs` line {i}, keep \"quotes\" and $VARS as they are\n"))
        .collect();
    cc.model.ask_first(
        "pm",
        &format!("task handoff {TASK} --from pm --target explore --status IN_PROGRESS --body-file - <<'EOF'\n## Instructions\n{body}EOF"),
    );
    cc.start_example_with("attention_after: 1s\n");
    // Claude Code gives up on it and would ask; the broker's parser does not: one plain
    // `task handoff`, which the PM's rules allow.
    let allowed = wait_for("the broker's decision", 120, || {
        events(&cc.task_dir(), "permission_decision").into_iter().next()
    });
    assert_eq!(
        (&allowed["agent"], &allowed["data"]["by"]),
        (&"pm".into(), &"rules".into()),
        "{allowed}"
    );
    assert_eq!(allowed["data"]["decision"], "allow", "{allowed}");
    assert!(
        allowed["data"]["command"].as_str().unwrap().starts_with("task handoff"),
        "{allowed}"
    );
    // It ran: its handoff is on disk, with the whole body.
    let written = wait_for("the inline handoff", 60, || {
        std::fs::read_dir(cc.task_dir().join("handoffs"))
            .ok()?
            .flatten()
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .find(|t| t.contains("- detail 200: check"))
    });
    assert!(written.contains("- detail 1: check"), "{written}");
    assert!(events(&cc.task_dir(), "permission_request").is_empty(), "{}", cc.dump());
}

/// task.md's rules, in Claude Code's syntax, are the agent's own: a command they allow runs
/// without a prompt, one they deny is refused without anyone asked (the agent is told, and
/// goes on), deny winning over allow.
#[test]
fn task_md_rules_allow_and_deny_commands_without_asking_anyone() {
    let cc = Cc::new();
    // explore is not sandboxed by default: without a rule, this would be a prompt.
    cc.model.ask_first("explore", "touch allowed-by-rule.txt");
    cc.model.ask_first("plan", "touch denied-by-rule.txt");
    cc.start_example_with(
        "attention_after: 2s\nallow: Bash(touch allowed-by-rule.txt), Bash(touch denied-by-rule.txt)\ndeny-plan: Bash(touch denied-by-rule.txt)\n",
    );
    cc.wait_phase("COMPLETE", 300);
    assert!(events(&cc.task_dir(), "needs_human").is_empty(), "{}", cc.dump());
    assert!(cc.w.project.join("allowed-by-rule.txt").exists(), "{}", cc.dump());
    assert!(!cc.w.project.join("denied-by-rule.txt").exists(), "{}", cc.dump());
    let refused = cc.tool_output("plan", "").unwrap_or_default();
    assert!(
        refused.contains("has been denied"),
        "plan was told of the refusal: {refused}"
    );
    cc.assert_each_handoff_told_once();
}

/// The broker's first rung (Claude Code's PermissionRequest hook → `task hook
/// permission-request`): a PM that delegates in one compound command Claude Code cannot
/// analyse (`h=$(task handoff …) && task spawn … --handoff "$h"`) is allowed at once,
/// because a shell parser finds only commands the PM's rules allow; `task status … &&
/// curl …` is not, and, being the PM's own, goes to a human; both are on record.
#[test]
fn compound_protocol_commands_are_allowed_by_the_broker_and_anything_else_is_left_to_a_human() {
    let cc = Cc::new();
    cc.model.compound_delegation("pm");
    cc.start_example_with("attention_after: 2s\n");
    cc.wait_phase("COMPLETE", 300);
    assert!(events(&cc.task_dir(), "needs_human").is_empty(), "{}", cc.dump());
    let allowed: Vec<_> = events(&cc.task_dir(), "permission_decision")
        .into_iter()
        .filter(|e| e["agent"] == "pm" && e["data"]["decision"] == "allow")
        .collect();
    assert_eq!(allowed.len(), 4, "one per delegation\n{}", cc.dump());
    assert!(
        allowed[0]["data"]["command"]
            .as_str()
            .unwrap()
            .starts_with("h=$(task handoff"),
        "{}",
        allowed[0]
    );
    cc.assert_each_handoff_told_once();
    drop(cc);

    let cc = Cc::new();
    cc.model
        .ask_first("pm", &format!("task status {TASK} && curl -s http://127.0.0.1:9/"));
    cc.start_example_with("attention_after: 1s\n");
    let req = wait_for("the request", 120, || {
        events(&cc.task_dir(), "permission_request").into_iter().next()
    });
    assert_eq!(req["agent"], "pm", "{req}");
    assert_eq!(
        req["data"]["why"], "no rule allows `curl -s http://127.0.0.1:9/`",
        "{req}"
    );
    assert_eq!(req["data"]["asked"], "human", "{req}");
}
