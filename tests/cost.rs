//! What the team costs, with real Claude Code against the scripted model server: the
//! server reports known usage in every answer, and `task status --json` must show their
//! exact sums per agent and for the task, and money at the configured prices; a budget
//! set low warns the PM in its check-in first, then refuses the next spawn with
//! SPAWN_REJECT_BUDGET and calls a human exactly once.

mod common;

use std::time::Duration;

use common::claude::*;
use common::model::Usage;
use common::*;

/// The model every answer names, priced in the test's config.
const MODEL: &str = "claude-cost-test";
/// The PM's answers: 1,000 tokens each.
const PM: Usage = [600, 100, 200, 100];
/// Each spoke's answers: 10 tokens each.
const SPOKE: Usage = [4, 3, 2, 1];
/// USD per million tokens: input, output, cache write, cache read.
const PRICE: [f64; 4] = [3.0, 15.0, 3.75, 0.3];

fn usd(u: Usage, answers: u64) -> f64 {
    answers as f64 * (0..4).map(|i| u[i] as f64 * PRICE[i]).sum::<f64>() / 1e6
}

/// The main answers the model gave `agent` (a usage-limit refusal is no answer).
fn answers(cc: &Cc, agent: &str) -> u64 {
    cc.model
        .seen()
        .iter()
        .filter(|s| s.main && s.agent.as_deref() == Some(agent) && !s.answer.starts_with("429"))
        .count() as u64
}

fn status(cc: &Cc) -> serde_json::Value {
    serde_json::from_str(&cc.ok(&["status", TASK, "--json"])).unwrap()
}

#[test]
fn usage_is_summed_exactly_priced_and_a_low_budget_warns_then_refuses_the_next_spawn() {
    let cc = Cc::new();
    let cfg = cc.w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    let notified = cc.w.dir.path().join("NOTIFIED");
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "notify = [\"sh\", \"-c\", \"echo \\\"$0\\\" >> {}\", \"{{reason}}\"]\n\
             [prices.\"{MODEL}\"]\ninput = {}\noutput = {}\ncache_write = {}\ncache_read = {}\n\
             [context_windows]\n\"{MODEL}\" = 4000\n",
            notified.display(),
            PRICE[0],
            PRICE[1],
            PRICE[2],
            PRICE[3]
        ),
    )
    .unwrap();
    cc.model.answer_as(MODEL);
    // Two content blocks per tool call: two transcript lines with one message id, each
    // answer still counted once.
    cc.model.preface_tools("Running the protocol command.");
    cc.model.usage_for("pm", PM);
    for a in common::model::ROUTE {
        cc.model.usage_for(a, SPOKE);
    }
    // The PM's first three answers (handoff, spawn explore, "started") are 3,000 tokens:
    // explore's check-in finds 86 % of 3,500 used; the PM's next two answers pass 100 %.
    cc.start_example_with("budget: 3500 tokens\n");

    let refused = wait_for("a spawn refused for the budget", 240, || {
        events(&cc.task_dir(), "spawn_refused")
            .into_iter()
            .find(|e| e["data"]["reason"] == "SPAWN_REJECT_BUDGET")
    });
    // Usage is read from Claude Code's transcript, which it writes a moment after the
    // answer: on a loaded machine the PM's handoff answer may not be there yet when its
    // `task spawn plan` runs 0.1 s later, and the next spawn (dev) is the one refused.
    assert!(
        ["plan", "dev"].contains(&refused["agent"].as_str().unwrap_or("")),
        "{refused}\n{}",
        cc.dump()
    );
    // The rest goes on with the spoke refused (plan, or dev when plan got in first).
    let who = refused["agent"].as_str().unwrap().to_string();

    // The PM heard the warning first, in the check-in that told it of explore's handoff.
    let warned = cc
        .model
        .turns_saying("pm", "budget warning")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no check-in carried the budget warning\n{}", cc.dump()));
    assert!(warned.said.contains("explore-"), "{}", warned.said);
    assert!(warned.said.contains("Cost so far: "), "{}", warned.said);
    // And how full the conversations are: the PM's latest answer, 1,000 of its 4,000.
    assert!(
        warned.said.contains("context: ") && warned.said.contains("pm 25%"),
        "{}",
        warned.said
    );
    let t: chrono::DateTime<chrono::Utc> = refused["time"].as_str().unwrap().parse().unwrap();
    assert!(warned.at < std::time::SystemTime::from(t));

    // A human spawning now is refused too (exit 6), and told how to go over.
    let pm_handoff = std::fs::read_dir(cc.task_dir().join("handoffs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("pm-"))
        .max()
        .unwrap();
    let h = pm_handoff.display().to_string();
    let o = run(&mut cc.task(&["spawn", TASK, &who, "--handoff", &h]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("SPAWN_REJECT_BUDGET") && stderr(&o).contains("--over-budget"),
        "{}",
        stderr(&o)
    );

    // The exact sums: every answer the model gave, at the numbers it reported.
    let expect = |agent: &str, u: Usage| answers(&cc, agent) * u.iter().sum::<u64>();
    let st = wait_for("status to show every answer", 30, || {
        let st = status(&cc);
        let agents = st["task"]["cost"]["agents"].as_array()?.clone();
        let of = |n: &str| {
            agents
                .iter()
                .find(|a| a["agent"] == n)
                .map_or(Some(0), |a| a["total_tokens"].as_u64())
        };
        // Every spoke that answered (plan too, when its spawn got in before the budget did).
        let spokes = common::model::ROUTE.iter().all(|a| of(a) == Some(expect(a, SPOKE)));
        (of("pm")? == expect("pm", PM) && of("explore")? > 0 && spokes).then_some(st)
    });
    let cost = &st["task"]["cost"];
    let pm = cost["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "pm")
        .unwrap();
    let n = answers(&cc, "pm");
    assert!(n >= 5, "{n}");
    assert_eq!(pm["tokens"]["input"], n * PM[0]);
    assert_eq!(
        pm["tokens"]["output"],
        n * PM[1],
        "the final output count, once per answer"
    );
    assert_eq!(pm["tokens"]["cache_creation"], n * PM[2]);
    assert_eq!(pm["tokens"]["cache_read"], n * PM[3]);
    assert_eq!(pm["answers"], n);
    // Its context: the latest answer's 1,000 tokens against the window the config gives.
    assert_eq!(
        pm["context"],
        serde_json::json!({"model": MODEL, "tokens": 1000, "window": 4000, "percent": 25}),
        "{pm}"
    );
    assert!((pm["usd"].as_f64().unwrap() - usd(PM, n)).abs() < 1e-9, "{pm}");
    let e: u64 = common::model::ROUTE.iter().map(|a| answers(&cc, a)).sum();
    let total = n * 1000 + e * 10;
    assert_eq!(cost["total_tokens"], total, "{cost}");
    assert!(
        (cost["usd"].as_f64().unwrap() - usd(PM, n) - usd(SPOKE, e)).abs() < 1e-9,
        "{cost}"
    );
    assert_eq!(cost["budgets"][0]["level"], "exceeded", "{cost}");
    assert!(
        cost["supervisor"]["checkins_delivered"].as_u64().unwrap() >= 1,
        "{cost}"
    );
    let lines = transcript_lines_per_id(&cc);
    assert!(
        lines.values().any(|n| *n >= 2),
        "some answer was written in several lines: {lines:?}"
    );
    let text = cc.ok(&["status", TASK]);
    assert!(text.contains("Cost:") && text.contains("new spawns refused"), "{text}");
    assert!(text.contains("· context 25% of 4000"), "{text}");
    let progress = std::fs::read_to_string(cc.task_dir().join("progress.md")).unwrap();
    assert!(progress.contains("## Cost"), "{progress}");

    // One human call for the used-up budget, however many spawns and check-ins see it.
    cc.ok(&["checkin", TASK]);
    wait_for("the notify command", 10, || {
        std::fs::read_to_string(&notified).ok().filter(|s| !s.is_empty())
    });
    let calls = std::fs::read_to_string(&notified).unwrap();
    assert_eq!(calls.lines().filter(|l| l.contains("budget")).count(), 1, "{calls}");

    // A human decides to spend more; the refused spoke's first answer is held, so it is still running
    // when the next check-in tells it, once, to wrap up. The message waits in Claude Code's
    // queue until the turn ends, and counts as delivered only once taken: the hold ends well
    // within the wrap-up's 15 s wait.
    // Not the PM: going over a budget is a human's decision, and the daemon that serves the
    // spawn finds the PM behind the request.
    let o = run(cc
        .task(&["spawn", TASK, &who, "--handoff", &h, "--over-budget"])
        .env("TASK_AGENT", "pm")
        .env("TASK_ROLE", "hub"));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("SPAWN_REJECT_BUDGET"), "{}", stderr(&o));
    cc.model.hold(&who, std::time::Duration::from_secs(6), 1);
    let out = cc.ok(&["spawn", TASK, &who, "--handoff", &h, "--over-budget"]);
    assert!(out.contains("SPAWN_OK"), "{out}");
    wait_for("the spoke to ask the model", 60, || {
        (!cc.model.turns(&who).is_empty()).then_some(())
    });
    let told = || {
        events(&cc.task_dir(), "supervisor_message")
            .into_iter()
            .filter(|e| e["agent"] == who.as_str() && e["data"]["outcome"] == "delivered")
            .count()
    };
    cc.ok(&["checkin", TASK]);
    assert_eq!(told(), 1, "{}", cc.dump());
    cc.ok(&["checkin", TASK]);
    assert_eq!(told(), 1, "told once per run\n{}", cc.dump());
    // Typed while it was busy: Claude Code shows it in its conversation, once.
    let session = cc.state()["agents"][who.as_str()]["session"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = wait_until(
        "the wrap-up message in the spoke's conversation",
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(200),
        || {
            let screen = cc.w.capture(&format!("={session}:"));
            screen.contains("budget of task").then_some(screen)
        },
        || cc.dump(),
    );
    assert_eq!(
        shown.matches("is used up. Finish what you are doing").count(),
        1,
        "{shown}"
    );
    let calls = std::fs::read_to_string(&notified).unwrap();
    assert_eq!(calls.lines().filter(|l| l.contains("budget")).count(), 1, "{calls}");
    let st = status(&cc);
    assert!(
        st["task"]["cost"]["supervisor"]["messages_delivered"].as_u64() >= Some(1),
        "{st}"
    );
}

/// How many transcript lines each assistant message id has, over every transcript.
fn transcript_lines_per_id(cc: &Cc) -> std::collections::BTreeMap<String, usize> {
    let mut n = std::collections::BTreeMap::new();
    for d in std::fs::read_dir(cc.home.join(".claude/projects")).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap_or_default();
            for l in text
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            {
                if l["type"] == "assistant" {
                    if let Some(id) = l["message"]["id"].as_str() {
                        *n.entry(id.to_string()).or_insert(0) += 1;
                    }
                }
            }
        }
    }
    n
}

/// Every answer names [`MODEL`], whose context window is `window` tokens.
fn with_window(cc: &Cc, window: u64) {
    cc.with_window(MODEL, window);
}

/// Issue 26: a PM whose conversation fills its context past `rotate_at:` is replaced by a
/// fresh conversation, which starts from the task folder and finishes the task; every
/// spoke's handoff is told once across the rotation.
#[test]
fn a_pm_past_rotate_at_is_rotated_into_a_fresh_conversation_that_finishes_the_task() {
    let cc = Cc::new();
    with_window(&cc, 4000);
    // 150 tokens a message: 60% of 4,000 is passed at the 16th message, in the PM's turn
    // on plan's handoff, which starts dev. Dev's handoff waits for the rotation, so the
    // new PM hears of it.
    cc.model.usage_grows("pm", 150);
    let dir = cc.task_dir();
    cc.model.hold_until("dev", "tool: task handoff", move || {
        !events(&dir, "pm_rotated").is_empty()
    });
    cc.start_example_with("rotate_at: 60%\n");
    let rotated = cc.wait_event("pm_rotated", 240);
    assert_eq!(rotated["data"]["trigger"], "context", "{rotated}");
    assert!(rotated["data"]["percent"].as_u64().unwrap() >= 60, "{rotated}");
    let old = rotated["data"]["old_session"].as_str().unwrap().to_string();
    let new = rotated["data"]["new_session"].as_str().unwrap().to_string();
    assert_ne!(old, new);
    cc.wait_phase("COMPLETE", 240);
    // The new conversation began with the resume block (a long first prompt is read from
    // its file) and nothing of the old one: no check-in in it.
    let history = cc.first_request_with("pm", "## You are taking over");
    assert!(
        !history.contains("Check-in for task"),
        "history carried over: {history}"
    );
    assert!(history.contains("Phase: "), "{history}");
    assert!(history.contains("plan: plan-"), "{history}");
    assert!(history.contains("- dev: running since"), "{history}");
    // The new PM heard of dev's handoff in a check-in, and finished the task.
    let dev_told = cc
        .model
        .seen()
        .into_iter()
        .filter(|s| {
            s.agent.as_deref() == Some("pm")
                && s.new_turn
                && s.said.contains("Check-in for task")
                && s.said.contains("dev-")
        })
        .count();
    assert_eq!(dev_told, 1, "{}", cc.dump());
    assert_eq!(events(&cc.task_dir(), "pm_rotated").len(), 1, "{}", cc.dump());
    // Bounded: the PM's context at the latest check-in is below where it was rotated.
    let trend = status(&cc)["task"]["cost"]["supervisor"]["pm_context_trend"].clone();
    let at_rotation = rotated["data"]["tokens"].as_u64().unwrap();
    assert!(
        trend["last"].as_u64().unwrap() < at_rotation,
        "{trend} vs {at_rotation}"
    );
    assert!(trend["first"].as_u64().unwrap() > 0, "{trend}");
    // Both conversations' cost is counted: the old one is among the PM's past sessions.
    let st = cc.state();
    assert!(
        st["agents"]["pm"]["past_sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == old.as_str()),
        "{st}"
    );
    assert!(events(&cc.task_dir(), "agent_died").is_empty(), "{}", cc.dump());
    cc.assert_each_handoff_told_once();
}

/// A conversation compacted by the client itself is counted and logged (the transcript's
/// `compact_boundary`), here by `/compact` typed into the idle PM of a finished task.
#[test]
fn a_compaction_by_the_client_is_counted_and_logged() {
    let cc = Cc::new();
    cc.start_example();
    cc.wait_phase("COMPLETE", 240);
    let session = format!("={}:", cc.state()["agents"]["pm"]["session"].as_str().unwrap());
    cc.w.tmux(&["send-keys", "-t", &session, "-l", "/compact"]);
    cc.w.tmux(&["send-keys", "-t", &session, "Enter"]);
    let st = wait_until(
        "the compaction counted",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || {
            let st = status(&cc);
            let pm = st["task"]["cost"]["agents"]
                .as_array()?
                .iter()
                .find(|a| a["agent"] == "pm")?
                .clone();
            (pm["compactions"] == 1).then_some(st)
        },
        || cc.dump(),
    );
    let _ = st;
    let logged = events(&cc.task_dir(), "compacted");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["agent"], "pm");
    assert_eq!(logged[0]["data"]["trigger"], "manual", "{:?}", logged[0]);
    // The models the pinned Claude Code asked for by default are priced and windowed:
    // `task doctor` finds nothing missing, and the task's money is known.
    let o = run(&mut cc.task(&["doctor", "--json"]));
    let checks: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let models = checks
        .as_array()
        .or_else(|| checks["checks"].as_array())
        .unwrap()
        .iter()
        .find(|c| c["name"] == "models")
        .cloned()
        .unwrap_or_else(|| panic!("no models check: {checks}"));
    assert_eq!(models["level"], "ok", "{models}");
    let st = status(&cc);
    assert!(st["task"]["cost"]["usd"].is_number(), "{}", st["task"]["cost"]);
    let defaults: Vec<serde_json::Value> = st["task"]["cost"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["context"].as_object().cloned())
        .filter(|c| {
            let m = c["model"].as_str().unwrap_or("");
            m.starts_with("claude-opus-4-8") || m.starts_with("claude-sonnet-5")
        })
        .map(serde_json::Value::Object)
        .collect();
    assert!(!defaults.is_empty(), "{}", st["task"]["cost"]);
    for c in defaults {
        assert_eq!(c["window"], 1_000_000, "{c}");
    }
}

/// Issue 26 item 4: a spoke whose context fills up is asked for a checkpoint, writes it,
/// and goes on in a fresh session in the same lane, from that checkpoint; the PM is told,
/// and the task completes with every step's handoff told once.
#[test]
fn a_spoke_past_rotate_at_checkpoints_and_goes_on_in_a_fresh_session_in_its_lane() {
    let cc = Cc::new();
    with_window(&cc, 4000);
    // Dev's first conversation is 75% full and reads rather than hands off.
    cc.model.full_first("dev", 3000);
    cc.start_example_with("rotate_at: 60%\n");
    let asked = cc.wait_event("checkpoint_asked", 240);
    assert_eq!(asked["agent"], "dev", "{asked}");
    assert_eq!(asked["data"]["percent"], 75, "{asked}");
    let old_session = cc.state()["agents"]["dev"]["session_id"].as_str().unwrap().to_string();
    let rotated = cc.wait_event("spoke_rotated", 120);
    let checkpoint = rotated["data"]["checkpoint"].as_str().unwrap().to_string();
    assert!(checkpoint.starts_with("dev-"), "{rotated}");
    // The lane was never released in between: no release, no new spawn through the gate.
    let st = cc.state();
    assert_eq!(
        st["lanes"]["dev"]["holder"]["pane"], st["agents"]["dev"]["pane"],
        "{st}"
    );
    assert_ne!(st["agents"]["dev"]["session_id"].as_str().unwrap(), old_session);
    assert!(
        st["agents"]["dev"]["past_sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == old_session.as_str())
    );
    cc.wait_phase("COMPLETE", 240);
    let released: Vec<_> = events(&cc.task_dir(), "lane_released")
        .into_iter()
        .filter(|e| e["agent"] == "dev")
        .collect();
    assert_eq!(released.len(), 1, "released once, at its final handoff: {released:?}");
    // The fresh session started from the original instructions and the checkpoint.
    let m = cc.first_request_with("dev", "## Continue from your checkpoint");
    assert!(
        m.contains("the fix is half written") && m.contains("Do the dev step of the task"),
        "{m}"
    );
    assert!(!m.contains("write a checkpoint handoff now"), "no history: {m}");
    // The PM was told, once.
    let told = cc.model.turns_saying("pm", "rotated: dev at 75%");
    assert_eq!(told.len(), 1, "{}", cc.dump());
    assert_eq!(events(&cc.task_dir(), "checkpoint_asked").len(), 1);
    assert_eq!(events(&cc.task_dir(), "spoke_rotated").len(), 1);
}

/// Issue 26, a long run in small: the review rejects the work six times, so the PM's one
/// conversation would grow through sixteen check-ins; it is rotated whenever it passes
/// 60% of its window, each new conversation goes on from the files, every handoff is told
/// once across the rotations, and the task completes.
#[test]
fn a_long_run_rotates_the_pm_again_and_again_and_tells_every_handoff_once() {
    let cc = Cc::new();
    with_window(&cc, 9000);
    // ~900 tokens a check-in: 60% of 9,000 is passed every six or so.
    cc.model.usage_grows("pm", 150);
    cc.model.reject_reviews(6);
    cc.start_example_with("rotate_at: 60%\n");
    cc.wait_phase("COMPLETE", 600);
    let rotations = events(&cc.task_dir(), "pm_rotated");
    assert!(rotations.len() >= 2, "{} rotations\n{}", rotations.len(), cc.dump());
    let reviews = cc.spoke_handoffs().iter().filter(|f| f.starts_with("review-")).count();
    assert_eq!(reviews, 7, "six rejections, then the approval");
    cc.assert_every_handoff_told_once();
    // Bounded: no check-in found the PM's conversation much past where it is rotated.
    let contexts: Vec<u64> = events(&cc.task_dir(), "checkin")
        .iter()
        .filter_map(|e| e["data"]["pm_context"].as_u64())
        .collect();
    assert!(contexts.len() >= 14, "{contexts:?}");
    let max = *contexts.iter().max().unwrap();
    assert!(max < 5400 + 2000, "{contexts:?}");
}

/// Issue 26 item 4, the fallback: a spoke that writes no checkpoint within
/// `checkpoint_grace:` goes on in a fresh session from the last things it said.
#[test]
fn a_spoke_that_writes_no_checkpoint_goes_on_from_what_it_last_said() {
    let cc = Cc::new();
    with_window(&cc, 4000);
    cc.model.full_first("dev", 3000);
    cc.model.no_checkpoint("dev");
    cc.start_example_with("rotate_at: 60%\ncheckpoint_grace: 3s\n");
    let rotated = cc.wait_event("spoke_rotated", 240);
    assert_eq!(rotated["agent"], "dev", "{rotated}");
    assert!(rotated["data"]["checkpoint"].is_null(), "{rotated}");
    cc.wait_phase("COMPLETE", 240);
    let m = cc.first_request_with("dev", "## Continue where your previous session stopped");
    assert!(m.contains("still leaks a handle"), "what it last said: {m}");
    assert!(!m.contains("write a checkpoint handoff now"), "no history: {m}");
    assert_eq!(
        cc.model.turns_saying("pm", "wrote no checkpoint in time").len(),
        1,
        "{}",
        cc.dump()
    );
    cc.assert_each_handoff_told_once();
}
