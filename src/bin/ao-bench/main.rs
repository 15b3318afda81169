//! Benchmarks of the `task` binary, each beside a floor measured in the same run: the
//! verbs and their flags are in usage.txt (`ao-bench --help`).
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

/// What `ao-bench --help` prints: each benchmark, its flags, and its floor.
const USAGE: &str = include_str!("usage.txt");
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
    // Every verb runs with its defaults when given no flags: a `--help` must not start one.
    if args.is_empty() || args.iter().any(|a| a == "--help" || a == "-h" || a == "help") {
        print!("{USAGE}");
        std::process::exit(if args.is_empty() { 2 } else { 0 });
    }
    match args[0].as_str() {
        "status" => status::bench_status(&args),
        "tmux" => tmux::bench_tmux(&args),
        "daemon" => daemon::bench_daemon(&args),
        "remote" => remote::bench_remote(&args),
        "fleet" => fleet::bench_fleet(&args),
        "soak" => soak::bench_soak(&args),
        "permit" => permit::bench_permit(&args),
        "ui" => ui::bench_ui(&args),
        "usage" => usage::bench_usage(&args),
        "worktree" => worktree::bench_worktree(&args),
        "web" => web::bench_web(&args),
        "longhaul" => longhaul(&args[1..]),
        "generate" => {
            let dir = PathBuf::from(args.get(1).expect("ao-bench generate DIR"));
            std::fs::create_dir_all(&dir).unwrap();
            let d = status::generate(&dir, arg(&args, "--handoffs", 10_000), arg(&args, "--artifacts", 2_000));
            println!("{}", d.display());
        }
        other => {
            eprint!("ao-bench: no benchmark named {other:?}\n\n{USAGE}");
            std::process::exit(2);
        }
    }
}
