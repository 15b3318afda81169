//! Benchmarks of the `task` binary, each beside a floor measured in the same run.
//!
//!   ao-bench status [--handoffs N] [--artifacts N] [--runs N]
//!       `task status` and `task progress` on a generated task, beside `cat` of the same files.
//!   ao-bench tmux [--runs N]
//!       spawn latency (command → agent prompt on screen) and send latency (command →
//!       message confirmed submitted), beside raw `tmux new-session` / `tmux send-keys`.
//!   ao-bench daemon [--handoffs N] [--bursts N] [--tasks N] [--idle-secs N]
//!       handoff written → check-in confirmed in the PM pane (p50/p99), beside
//!       `inotifywait` + `tmux send-keys` in a shell loop; bursts of 10 handoffs in
//!       100 ms (check-ins per burst, the last file's latency); then an idle daemon with
//!       N tasks: CPU seconds and RSS.
//!   ao-bench soak [--tasks N] [--minutes N] [--every-ms N] [--deaths N] [--daemon-kills N]
//!       N tasks × 5 demo agents under one daemon with a handoff every few seconds per
//!       task, random agent deaths and daemon kill -9s: handoffs lost and told twice,
//!       check-in p50/p99 under load, daemon CPU and RSS, tmux server CPU.
//!   ao-bench ui [--tasks N] [--idle-secs N]
//!       `task ui` left alone with N tasks (an idle demo PM each): its CPU, with the
//!       tmux calls it makes, and the agents' tmux server's.
//!   ao-bench usage [--agents N] [--mb N] [--runs N]
//!       token usage from N Claude Code transcripts of M MB: the first read and the
//!       incremental update after one new answer, beside a raw read and a full re-read.
//!   ao-bench worktree [--files N] [--runs N]
//!       agents in git worktrees in a repository of N files: the spawn beside a shared one
//!       and a raw `git worktree add`; the check-in that merges (fast-forward, merge commit)
//!       beside one with nothing to merge and the same git commands run raw.
//!   ao-bench permit [--runs N]
//!       the permission broker: a request decided by rule (the whole hook) beside
//!       `task --version`; a request to the PM's check-in beside a handoff's check-in.
//!   ao-bench web [--handoffs N] [--idle-secs N]
//!       the web page: a handoff → visible on an open page (its event stream, then the page
//!       fetched again) beside the daemon's own check-in of it; the idle daemon's CPU with
//!       no page and with five pages open.
//!   ao-bench longhaul [--rejections N] [--progress N] [--full-secs N] [--no-faults]
//!       issue 26's long-haul run (real Claude Code against the tests' scripted model,
//!       faults on the way): runs `cargo bench --bench longhaul` in the source tree, since
//!       the scripted model server lives with the tests.
//!   ao-bench generate DIR [--handoffs N] [--artifacts N]
//!       only write the generated task (DIR/tasks/bench).
//!
//! Build with `cargo build --release` first; the figures go in docs/benchmarks.md (headlines in README.md's Performance section).

mod daemon;
mod fleet;
mod permit;
mod remote;
mod soak;
mod status;
mod tmux;
mod ui;
mod usage;
mod web;
mod worktree;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn task_bin() -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    me.parent().expect("bin dir").join("task")
}

fn time_cmd(mut c: Command) -> Duration {
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let t = Instant::now();
    let s = c.status().expect("run");
    assert!(s.success(), "{c:?} failed");
    t.elapsed()
}

struct Stats {
    p50: Duration,
    p90: Duration,
    min: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        p50: at(0.5),
        p90: at(0.9),
        min: v[0],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, s: &Stats, floor: &Stats, target: &str) {
    println!(
        "| {name:<34} | {:>10} | {:>10} | {:>10} | {:>7.1}x | {target:<8} |",
        ms(s.p50),
        ms(s.p90),
        ms(s.min),
        s.p50.as_secs_f64() / floor.p50.as_secs_f64()
    );
}

fn header() {
    println!(
        "| {:<34} | {:>10} | {:>10} | {:>10} | {:>8} | {:<8} |",
        "measurement", "p50", "p90", "min", "vs floor", "target"
    );
    println!(
        "|{}|{}|{}|{}|{}|{}|",
        "-".repeat(36),
        "-".repeat(12),
        "-".repeat(12),
        "-".repeat(12),
        "-".repeat(10),
        "-".repeat(10)
    );
}

fn runtime_has(prog: &str) -> bool {
    agent_orchestrator::io::program::which(prog).is_some()
}

/// The long-haul run is a cargo bench beside the tests (it needs their scripted model
/// server): run it in the tree this binary was built from, and exit with its status.
fn longhaul(args: &[String]) {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let status = Command::new("cargo")
        .args(["bench", "--bench", "longhaul", "--manifest-path"])
        .arg(&manifest)
        .arg("--")
        .args(args)
        .status()
        .unwrap_or_else(|e| {
            eprintln!(
                "ao-bench: cannot run cargo for the long-haul bench ({e}); run `cargo bench --bench longhaul` in {}",
                manifest.parent().unwrap().display()
            );
            std::process::exit(2);
        });
    std::process::exit(status.code().unwrap_or(1));
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !task_bin().exists() {
        eprintln!(
            "ao-bench: {} not found; run `cargo build --release` first",
            task_bin().display()
        );
        std::process::exit(2);
    }
    match args.first().map(String::as_str) {
        Some("status") => status::bench_status(&args),
        Some("tmux") => tmux::bench_tmux(&args),
        Some("daemon") => daemon::bench_daemon(&args),
        Some("remote") => remote::bench_remote(&args),
        Some("fleet") => fleet::bench_fleet(&args),
        Some("soak") => soak::bench_soak(&args),
        Some("permit") => permit::bench_permit(&args),
        Some("ui") => ui::bench_ui(&args),
        Some("usage") => usage::bench_usage(&args),
        Some("worktree") => worktree::bench_worktree(&args),
        Some("web") => web::bench_web(&args),
        Some("longhaul") => longhaul(&args[1..]),
        Some("generate") => {
            let dir = PathBuf::from(args.get(1).expect("ao-bench generate DIR"));
            std::fs::create_dir_all(&dir).unwrap();
            let d = status::generate(&dir, arg(&args, "--handoffs", 10_000), arg(&args, "--artifacts", 2_000));
            println!("{}", d.display());
        }
        _ => {
            eprintln!(
                "usage: ao-bench status [--handoffs N] [--artifacts N] [--runs N] | tmux [--runs N] | daemon | remote [--handoffs N] [--runs N] | fleet [--tasks N] [--rounds N] | soak [--tasks N] [--minutes N] | permit [--runs N] | ui [--tasks N] [--idle-secs N] | usage [--agents N] [--mb N] | worktree [--files N] [--runs N] | longhaul [--rejections N] | generate DIR"
            );
            std::process::exit(2);
        }
    }
}
