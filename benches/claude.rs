//! Real Claude Code: a spoke's handoff written → the PM's check-in reaching the model.
//!
//!   cargo bench --bench claude            (AO_BENCH_RUNS=N example tasks, default 3)
//!
//! Each run is the example task with real Claude Code as PM and every spoke, against the
//! scripted model server of the tests (nothing else is a stand-in). Beside it, in the same
//! run and the same PM pane: the floor — raw `tmux send-keys` of a line and Enter → the
//! request reaching the model, which is Claude Code's own share of the path — and
//! `task send` (verified delivery) → the request, and → the command's return (the confirm
//! wait after Enter is in that figure, not in the request's). Needs the pinned Claude Code
//! that scripts/test installs (or AO_TEST_CLAUDE).

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::claude::{Cc, TASK};
use common::*;

fn p(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

/// Wait until the PM's pane is idle (its previous answer done), so a probe is not queued.
fn idle(cc: &Cc, pane: &str) {
    wait_for("the PM to be idle", 60, || {
        let s = cc.w.capture(pane);
        (s.contains("❯\u{a0}") && !s.contains("esc to interrupt")).then_some(())
    });
}

/// Time from `act` to the model seeing a PM turn that contains `probe`.
fn probe(cc: &Cc, probe: &str, act: impl FnOnce()) -> Duration {
    let t0 = Instant::now();
    act();
    at_model(cc, probe, t0)
}

/// Time from `t0` to the model seeing a PM turn that contains `probe`.
fn at_model(cc: &Cc, probe: &str, t0: Instant) -> Duration {
    wait_for("the probe at the model", 60, || {
        (!cc.model.turns_saying("pm", probe).is_empty()).then_some(())
    });
    t0.elapsed()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("claude: a benchmark; run it with `cargo bench --bench claude`");
        return;
    }
    let runs: usize = std::env::var("AO_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let (mut checkin, mut floor, mut send, mut sent) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        let cc = Cc::new();
        cc.start_example();
        cc.wait_phase("COMPLETE", 240);
        for f in cc.spoke_handoffs() {
            let written = std::fs::metadata(cc.task_dir().join("handoffs").join(&f))
                .and_then(|m| m.modified())
                .unwrap();
            let told = cc
                .model
                .turns_saying("pm", &f)
                .into_iter()
                .next()
                .expect("each handoff reached the PM");
            checkin.push(told.at.duration_since(written).unwrap_or_default());
        }
        let pane = cc.state()["agents"]["pm"]["pane"].as_str().unwrap().to_string();
        for i in 0..5 {
            idle(&cc, &pane);
            let line = format!("floor probe {r}-{i}");
            floor.push(probe(&cc, &line, || {
                cc.w.tmux(&["send-keys", "-t", &pane, "-l", &line]);
                cc.w.tmux(&["send-keys", "-t", &pane, "Enter"]);
            }));
            idle(&cc, &pane);
            let line = format!("send probe {r}-{i}");
            // The command runs beside the look at the model: it returns only once its
            // delivery is confirmed, which may be after the request went out.
            let t0 = Instant::now();
            let child = cc
                .task(&["send", TASK, "pm", "--message", &line])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            send.push(at_model(&cc, &line, t0));
            assert!(child.wait_with_output().unwrap().status.success(), "task send failed");
            sent.push(t0.elapsed());
        }
        eprintln!("run {}/{runs} done", r + 1);
    }
    let f50 = p(&mut floor, 0.5);
    println!(
        "Real Claude Code {} ({runs} example tasks)",
        std::fs::read_to_string(common::repo().join("tests/claude-code.version"))
            .unwrap()
            .trim()
    );
    println!("| measurement | n | p50 | max | p50 vs floor | target |");
    println!("|---|---|---|---|---|---|");
    let row = |name: &str, v: &mut [Duration], target: &str| {
        let (p50, max) = (p(v, 0.5), p(v, 1.0));
        println!(
            "| {name} | {} | {} | {} | {:.1}x | {target} |",
            v.len(),
            ms(p50),
            ms(max),
            p50.as_secs_f64() / f50.as_secs_f64()
        );
    };
    row(
        "floor: `tmux send-keys` line + Enter → request at the model",
        &mut floor,
        "",
    );
    row("`task send` → request at the model", &mut send, "");
    row("`task send` → its verified delivery returns", &mut sent, "");
    row(
        "spoke handoff written → PM's check-in at the model",
        &mut checkin,
        "p50 < 150 ms",
    );
}
