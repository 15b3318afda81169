//! Agents that cannot go on by themselves, end to end: the real binary and daemon, a real
//! tmux server on a private socket, a demo PM, and a fake agent — a runtime profile from the
//! user config running a shell script that shows a dialog or Claude Code's usage-limit
//! screen and then reads its input like an agent.

mod common;

use common::*;
use serde_json::Value;

/// A user config with the notify command and two fake runtimes: `asker` shows a permission
/// dialog until a human answers it, `limited` shows Claude Code's session-limit screen
/// (reset: the current minute, as Claude Code prints it) with the menu subscribers get,
/// which Escape closes, and then takes messages.
fn fake_runtimes(w: &World) {
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    let asker = w.dir.path().join("asker.sh");
    std::fs::write(
        &asker,
        "#!/bin/sh\n\
         printf 'Bash command\\n  task handoff t1 --from dev\\n\\nDo you want to proceed?\\n> 1. Yes\\n  2. No\\n'\n\
         read answer\n\
         printf '\\033[2J\\033[H'\n\
         while true; do printf 'fake> '; IFS= read -r line || exit 0; printf 'got: %s\\n' \"$line\"; done\n",
    )
    .unwrap();
    let limited = w.dir.path().join("limited.sh");
    std::fs::write(
        &limited,
        "#!/bin/sh\n\
         printf '* Working on it\\n'\n\
         printf \"  ⎿  You've hit your session limit · resets %s (UTC)\\n\" \"$(date -u +%-I:%M%P)\"\n\
         printf '     /upgrade to increase your usage limit.\\n'\n\
         printf 'What do you want to do?\\n> 1. Stop and wait for limit to reset\\n  2. Upgrade your plan\\n'\n\
         old=$(stty -g); stty raw -echo; k=$(dd bs=1 count=1 2>/dev/null); stty \"$old\"\n\
         [ \"$k\" = \"$(printf '\\033')\" ] && echo Escape >> \"$TASK_DIR/limited-keys.txt\"\n\
         printf '\\033[3A\\033[J'\n\
         while true; do printf 'fake> '; IFS= read -r line || exit 0; printf '%s\\n' \"$line\" >> \"$TASK_DIR/limited-inbox.txt\"; done\n",
    )
    .unwrap();
    // Shows a dialog for 0.8 s once told to (a PermissionRequest hook answering it).
    let flasher = w.dir.path().join("flasher.sh");
    std::fs::write(
        &flasher,
        "#!/bin/sh\n\
         printf 'fake> '\n\
         while [ ! -e \"$TASK_DIR/flash\" ]; do sleep 0.02; done\n\
         printf '\\033[2J\\033[HDo you want to proceed?\\n> 1. Yes\\n  2. No\\n'\n\
         sleep 0.8\n\
         printf '\\033[2J\\033[H'\n\
         while true; do printf 'fake> '; IFS= read -r line || exit 0; done\n",
    )
    .unwrap();
    let pats = "ready = ['^fake> $']\npending = ['^fake> \\S']\ndialog = ['^Do you want to proceed\\?']\nusage_limit = [\"You've hit your [^\\\\n]*limit\"]\nusage_limit_menu = ['Stop and wait for limit to reset']\ninput_lines = 1\n";
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "notify = [\"sh\", \"-c\", \"echo \\\"$0\\\" >> {dir}/NOTIFIED\", \"{{reason}}\"]\n\
             [runtimes.asker]\nargv = [\"/bin/sh\", \"{asker}\"]\nready_timeout_secs = 5\n[runtimes.asker.patterns]\n{pats}\n\
             [runtimes.limited]\nargv = [\"/bin/sh\", \"{limited}\"]\nready_timeout_secs = 5\nusage_limit_menu_keys = [\"Escape\"]\n[runtimes.limited.patterns]\n{pats}\n\
             [runtimes.flasher]\nargv = [\"/bin/sh\", \"{flasher}\"]\nready_timeout_secs = 5\n[runtimes.flasher.patterns]\n{pats}",
            dir = w.dir.path().display(),
            asker = asker.display(),
            limited = limited.display(),
            flasher = flasher.display(),
        ),
    )
    .unwrap();
}

fn spawn(w: &World, task: &str, agent: &str, runtime: &str) -> String {
    let h = w
        .handoff(task, "pm", "IN_PROGRESS")
        .target(agent)
        .body("## Instructions\nWork.\n")
        .write();
    w.spawn(task, agent, &h, runtime);
    w.pane(task, agent)
}

/// Task t1 in cron mode (no daemon), its dialogs escalated after 1 s, its demo PM idle
/// at its prompt.
fn cron_task() -> World {
    let w = World::new();
    fake_runtimes(&w);
    ok(&run(w.task().args(["new", "t1"])));
    std::fs::write(
        w.project.join("tasks/t1/task.md"),
        "# Task: t1\n\n## Agent Config\nattention_after: 1s\n",
    )
    .unwrap();
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
        "--no-daemon",
    ])));
    w.wait_demo_prompt(&w.pane("t1", "pm"));
    w
}

fn status_json(w: &World, task: &str) -> Value {
    serde_json::from_str(&ok(&run(w.task().args(["status", task, "--json"])))).unwrap()
}

fn agent_row(v: &Value, agent: &str) -> Value {
    v["task"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == agent)
        .cloned()
        .unwrap_or(Value::Null)
}

fn notified(w: &World) -> String {
    std::fs::read_to_string(w.dir.path().join("NOTIFIED")).unwrap_or_default()
}

#[test]
fn a_dialog_is_escalated_once_after_its_grace_survives_a_restart_and_ends_when_answered() {
    let w = World::new();
    fake_runtimes(&w);
    w.start_idle_pm("t1").new_task("attention_after: 1s").run();
    let pane = spawn(&w, "t1", "dev", "asker");
    wait_for("the dialog", 10, || {
        w.capture(&pane).contains("Do you want to proceed?").then_some(())
    });

    // Seen, then escalated once the grace is over: event, notify, state, status, progress.md.
    let esc = wait_for("the escalation", 30, || {
        w.events_of("t1", "escalation").first().cloned()
    });
    let reason = esc["data"]["reason"].as_str().unwrap().to_string();
    assert!(
        reason.starts_with("dev needs a human: permission prompt \"Do you want to proceed?\""),
        "{reason}"
    );
    let began = w.events_of("t1", "needs_human");
    assert_eq!(began.len(), 1, "{began:?}");
    assert_eq!(began[0]["agent"], "dev");
    assert_eq!(began[0]["data"]["line"], "Do you want to proceed?");
    wait_for("the notify command", 10, || {
        notified(&w).contains("dev needs a human").then_some(())
    });
    let row = agent_row(&status_json(&w, "t1"), "dev");
    assert_eq!(row["attention"]["kind"], "needs_human", "{row}");
    assert_eq!(row["attention"]["reason"], "permission prompt");
    assert_eq!(row["attention"]["line"], "Do you want to proceed?");
    assert!(
        row["attention"]["since"].is_string() && row["attention"]["escalated_at"].is_string(),
        "{row}"
    );
    assert_eq!(row["waiting_for_human"], true);
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(
        human.contains("NEEDS A HUMAN: dev needs a human: permission prompt"),
        "{human}"
    );
    assert!(human.contains("Attention:\n  dev  needs a human since"), "{human}");
    let progress = std::fs::read_to_string(w.project.join("tasks/t1/progress.md")).unwrap();
    assert!(
        progress.contains("## Needs a Human\n- dev needs a human: permission prompt"),
        "{progress}"
    );
    // The PM's check-in names the agent and the dialog.
    let told = wait_for("the PM to be told", 20, || {
        w.inbox("t1", "pm")
            .into_iter()
            .find(|m| m.contains("needs a human: dev"))
    });
    assert!(told.contains("permission prompt \"Do you want to proceed?\""), "{told}");
    wait_for("the check-in to be recorded as telling it", 10, || {
        (w.state("t1")["agents"]["dev"]["attention"]["announced"] == true).then_some(())
    });

    // A restarted daemon looks again and neither calls a human twice nor forgets.
    let log = w.dir.path().join("daemon2.log");
    w.kill_daemon(None);
    let mut child = w.start_daemon(Some(&log));
    wait_for("the new daemon's look at the screens", 20, || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("looked at the agents' screens")
            .then_some(())
    });
    assert_eq!(w.events_of("t1", "escalation").len(), 1);
    assert_eq!(w.events_of("t1", "needs_human").len(), 1);
    assert_eq!(notified(&w).lines().count(), 1, "{}", notified(&w));
    assert_eq!(w.state("t1")["agents"]["dev"]["attention"]["escalated_at"], esc["time"]);

    // A human answers: the episode ends, its escalation closes, and a new one could begin.
    w.tmux(&["send-keys", "-t", &pane, "1", "Enter"]);
    let cleared = wait_for("attention_cleared", 20, || {
        w.events_of("t1", "attention_cleared").first().cloned()
    });
    assert_eq!(cleared["agent"], "dev");
    // The event is written first; the state and progress.md follow in the same tick.
    wait_for(
        "the episode and its escalation closed, progress.md refreshed",
        10,
        || {
            let st = w.state("t1");
            let progress = std::fs::read_to_string(w.project.join("tasks/t1/progress.md")).unwrap();
            (st["agents"]["dev"]["attention"].is_null()
                && st["escalations"].as_array().map(Vec::len) == Some(0)
                && !progress.contains("Needs a Human"))
            .then_some(())
        },
    );
    assert!(agent_row(&status_json(&w, "t1"), "dev")["attention"].is_null());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_usage_limit_pauses_the_agent_and_it_is_resumed_after_the_reset() {
    let w = World::new();
    fake_runtimes(&w);
    // The reset shown is the current minute; the resume is due 4 s after it.
    w.start_idle_pm("t1")
        .new_task("attention_after: 1s\nresume_delay: 4s")
        .run();
    let pane = spawn(&w, "t1", "dev", "limited");
    wait_for("the limit screen", 10, || {
        w.capture(&pane).contains("resets").then_some(())
    });

    let paused = wait_for("the pause", 30, || w.events_of("t1", "paused").first().cloned());
    assert_eq!(paused["agent"], "dev");
    assert_eq!(paused["data"]["reset_parsed"], true, "{paused}");
    let resets_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(paused["data"]["resets_at"].clone()).unwrap();
    let seen: chrono::DateTime<chrono::Utc> = serde_json::from_value(paused["time"].clone()).unwrap();
    assert!(
        resets_at <= seen && seen - resets_at < chrono::Duration::seconds(70),
        "the reset is the minute on screen: {resets_at} vs {seen}"
    );

    // At the reset plus the delay: the continue message, delivered and logged.
    let resumed = wait_for("the resume", 30, || w.events_of("t1", "resumed").first().cloned());
    assert_eq!(resumed["data"]["outcome"], "delivered", "{resumed}");
    let got = std::fs::read_to_string(w.project.join("tasks/t1/limited-inbox.txt")).unwrap();
    assert_eq!(got, "The usage limit has reset: continue where you left off.\n");
    let keys = std::fs::read_to_string(w.project.join("tasks/t1/limited-keys.txt")).unwrap();
    assert_eq!(keys, "Escape\n", "the menu over the limit was closed first, once");
    let at: chrono::DateTime<chrono::Utc> = serde_json::from_value(resumed["time"].clone()).unwrap();
    assert!(
        at >= resets_at + chrono::Duration::seconds(4),
        "not before the reset plus the delay"
    );
    // The limit is no longer the latest thing on screen: the episode ends, once.
    let cleared = wait_for("attention_cleared", 20, || {
        w.events_of("t1", "attention_cleared").first().cloned()
    });
    assert_eq!(cleared["data"]["resumed"], true, "{cleared}");
    assert_eq!(w.events_of("t1", "resumed").len(), 1);
    assert!(
        w.events_of("t1", "escalation").is_empty(),
        "a pause is not a human's problem"
    );
    assert!(notified(&w).is_empty());
    let st = w.state("t1");
    assert!(st["agents"]["dev"]["attention"].is_null(), "{st}");
    assert!(st["agents"]["dev"]["last_resume"].is_string(), "{st}");
}

/// Claude Code shows its permission dialog while the PermissionRequest hook runs, and the
/// broker's rules answer it within milliseconds, before any request is on record (seen
/// once in CI: a look in that window began a needs_human episode). A dialog seen for the
/// first time is looked at again a second later, and one gone by then calls nobody.
#[test]
fn a_dialog_gone_within_a_second_calls_nobody() {
    let w = cron_task();
    let pane = spawn(&w, "t1", "dev", "flasher");
    std::fs::write(w.project.join("tasks/t1/flash"), "").unwrap();
    wait_for("the dialog", 10, || {
        w.capture(&pane).contains("Do you want to proceed?").then_some(())
    });
    run(w.task().args(["checkin", "t1"]));
    wait_for("the dialog gone", 10, || {
        (!w.capture(&pane).contains("Do you want to proceed?")).then_some(())
    });
    run(w.task().args(["checkin", "t1"]));
    assert!(
        w.events_of("t1", "needs_human").is_empty(),
        "{:?}",
        w.events_of("t1", "needs_human")
    );
    assert!(w.state("t1")["agents"]["dev"]["attention"].is_null());
}

#[test]
fn cron_mode_check_ins_notice_a_dialog_and_call_a_human_without_a_daemon() {
    let w = cron_task();
    let pane = spawn(&w, "t1", "dev", "asker");
    assert!(w.daemon_pid().is_none(), "cron mode: no daemon");
    wait_for("the dialog", 10, || {
        w.capture(&pane).contains("Do you want to proceed?").then_some(())
    });
    // What cron runs, again and again: the first sees it, one after the grace calls a human.
    wait_for("an escalation from `task checkin`", 20, || {
        run(w.task().args(["checkin", "t1"]));
        w.events_of("t1", "escalation").first().cloned()
    });
    assert_eq!(w.events_of("t1", "needs_human").len(), 1);
    wait_for("the notify command", 10, || {
        notified(&w).contains("dev needs a human").then_some(())
    });
    for _ in 0..2 {
        run(w.task().args(["checkin", "t1"]));
    }
    assert_eq!(w.events_of("t1", "escalation").len(), 1, "once per episode");
    // Stopping the task ends the episode and closes its call for a human.
    ok(&run(w.task().args(["stop", "t1"])));
    let st = w.state("t1");
    assert!(st["agents"]["dev"]["attention"].is_null(), "{st}");
    assert_eq!(st["escalations"].as_array().map(Vec::len), Some(0), "{st}");
    let cleared = w.events_of("t1", "attention_cleared");
    assert_eq!(cleared.len(), 1);
    assert_eq!(cleared[0]["data"]["stopped"], true);
}

#[test]
fn a_remote_agent_at_a_dialog_is_noticed_over_ssh_and_called_once() {
    let w = World::new();
    let sshd = common::sshd::Sshd::start(w.dir.path());
    let rdir = w.dir.path().join("remote-work");
    std::fs::create_dir_all(&rdir).unwrap();
    let rsock = w.dir.path().join("remote-tmux.sock");
    let rtmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&rsock)
            .args(args)
            .output()
            .unwrap()
    };
    struct KillRemote<'a>(&'a dyn Fn(&[&str]) -> std::process::Output);
    impl Drop for KillRemote<'_> {
        fn drop(&mut self) {
            let _ = (self.0)(&["kill-server"]);
        }
    }
    let _cleanup = KillRemote(&rtmux);
    let task = || {
        let mut c = w.task();
        c.env("AO_SSH_CONFIG", &sshd.config)
            .env("AO_REMOTE_TMUX_SOCKET", &rsock);
        c
    };
    fake_runtimes(&w);
    ok(&run(task().args(["new", "t1"])));
    std::fs::write(
        w.project.join("tasks/t1/task.md"),
        format!(
            "# Task: t1\n\n## Agent Config\ncwd: aoremote:{}\nattention_after: 1s\n",
            rdir.display()
        ),
    )
    .unwrap();
    let h = ok(&run_with_stdin(
        task().args([
            "handoff",
            "t1",
            "--from",
            "pm",
            "--status",
            "IN_PROGRESS",
            "--body-file",
            "-",
        ]),
        b"## Instructions\nWork.\n",
    ));
    ok(&run(task().args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        h.trim(),
        "--runtime",
        "asker",
    ])));
    assert_ne!(w.state("t1")["agents"]["dev"]["host"], "local");
    let pane = w.pane("t1", "dev");
    wait_for("the remote dialog", 15, || {
        let o = rtmux(&["capture-pane", "-p", "-t", &pane]);
        String::from_utf8_lossy(&o.stdout)
            .contains("Do you want to proceed?")
            .then_some(())
    });
    // Cron-mode check-ins (no PM runs: they fail to deliver, but they look first).
    wait_for("an escalation for the remote agent", 30, || {
        run(task().args(["checkin", "t1"]));
        w.events_of("t1", "escalation").first().cloned()
    });
    let row = agent_row(&status_json(&w, "t1"), "dev");
    assert_eq!(row["attention"]["kind"], "needs_human", "{row}");
    assert_eq!(row["attention"]["line"], "Do you want to proceed?");
    wait_for("the notify command", 10, || {
        notified(&w).contains("dev needs a human").then_some(())
    });
    rtmux(&["send-keys", "-t", &pane, "1", "Enter"]);
    wait_for("the episode to end", 30, || {
        run(task().args(["checkin", "t1"]));
        w.events_of("t1", "attention_cleared").first().cloned()
    });
    assert_eq!(w.events_of("t1", "escalation").len(), 1);
    assert_eq!(w.state("t1")["escalations"].as_array().map(Vec::len), Some(0));
}

/// What an agent's client reports through its hooks is checked against its screen: a turn
/// said to be under way while the screen shows the agent idle (an interrupt runs no Stop
/// hook) is set aside once and logged; so is a report from before the agent started.
#[test]
fn a_turn_report_the_screen_contradicts_is_set_aside_once_and_logged() {
    let w = World::new();
    w.start_idle_pm("t1")
        .new_task("")
        .env("RUST_LOG", "agent_orchestrator=debug")
        .run();
    let looks = || w.daemon_log().matches("looked at the agents' screens").count();
    // The hook as Claude Code runs it: `task hook prompt-submit` with its JSON on stdin.
    let mut hook = w.task();
    hook.args(["hook", "prompt-submit"])
        .env("TASK_NAME", "t1")
        .env("TASK_AGENT", "pm")
        .stdin(std::process::Stdio::piped());
    let mut child = hook.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"hook_event_name":"UserPromptSubmit","prompt":"go"}"#)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let row = agent_row(&status_json(&w, "t1"), "pm");
    assert_eq!(row["turn"]["state"], "working", "{row}");
    assert_eq!(row["turn"]["set_aside"], false, "{row}");

    // Once settled (10 s), the daemon's look at the idle screen sets it aside, once.
    let corrected = wait_for("the correction", 40, || {
        w.events_of("t1", "turn_corrected").first().cloned()
    });
    assert_eq!(corrected["agent"], "pm");
    assert!(
        corrected["data"]["why"].as_str().unwrap().contains("idle"),
        "{corrected}"
    );
    let row = agent_row(&status_json(&w, "t1"), "pm");
    assert_eq!(row["turn"]["set_aside"], true, "{row}");
    let human = ok(&run(w.task().args(["status", "t1"])));
    assert!(human.contains("working") && human.contains("ago, set aside"), "{human}");

    // A usage limit reported before the agent started is stale: no pause, set aside.
    let started = w.state("t1")["agents"]["pm"]["started_at"]
        .as_str()
        .unwrap()
        .to_string();
    let started: chrono::DateTime<chrono::Utc> = started.parse().unwrap();
    let stale = serde_json::json!({
        "state": "failed", "error": "rate_limit", "text": "You've hit your session limit · resets 3pm (UTC)",
        "at": started - chrono::Duration::seconds(5),
    });
    std::fs::write(w.project.join("tasks/t1/turns/pm.json"), stale.to_string()).unwrap();
    wait_for("the second correction", 20, || {
        let c = w.events_of("t1", "turn_corrected");
        (c.len() == 2).then(|| c[1].clone())
    });
    let c = w.events_of("t1", "turn_corrected");
    assert!(c[1]["data"]["why"].as_str().unwrap().starts_with("stale"), "{c:?}");
    assert!(w.events_of("t1", "paused").is_empty());
    // Set aside means set aside: later looks neither believe nor correct it again.
    let seen = looks();
    wait_for("two more looks", 30, || (looks() >= seen + 2).then_some(()));
    assert_eq!(w.events_of("t1", "turn_corrected").len(), 2);
}
