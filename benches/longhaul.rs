//! The long-haul run (issue 26): eight hours' worth of check-ins and handoffs in minutes,
//! with faults on the way; prints what the run did and how the PM's cost per check-in held.
//!
//!   cargo bench --bench longhaul [-- --rejections N] [--progress N] [--full-secs N] [--no-faults]
//!   ao-bench longhaul [the same options]
//!
//! The example task with real Claude Code as PM and every spoke, against the scripted model
//! server of the tests: the review rejects the work N times (default 25), dev reports
//! IN_PROGRESS before each final handoff (default 2 times), check-ins come every 15 s as
//! well, and the PM's reported context grows with its conversation so it is rotated again
//! and again. Faults, once each: the PM killed, dev killed, a usage limit, the daemon
//! kill -9'd, the task folder's disk full (a tmpfs; needs root) for a minute. Needs the
//! pinned Claude Code that scripts/test installs (or AO_TEST_CLAUDE).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::longhaul::{Haul, run};

fn opt(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number, not {v:?}")))
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("longhaul: a benchmark; run it with `cargo bench --bench longhaul`");
        return;
    }
    let rejections = opt(&args, "--rejections", 25) as usize;
    let haul = Haul {
        rejections,
        progress: opt(&args, "--progress", 2) as usize,
        faults: !args.iter().any(|a| a == "--no-faults"),
        full_for: Duration::from_secs(opt(&args, "--full-secs", 60)),
        window: 4000,
        per_message: 150,
        deadline: Duration::from_secs(600 + 30 * rejections as u64),
    };
    let f = run(&haul);
    f.print();
    let verdict = |ok: bool| if ok { "ok" } else { "FAILED" };
    println!(
        "  targets: check-ins ≥ 50 {}, handoffs ≥ 100 {}, lost 0 {}, told twice 0 {}, ratio ≤ 1.5 {}",
        verdict(f.checkins >= 50),
        verdict(f.handoffs >= 100),
        verdict(f.lost.is_empty()),
        verdict(f.twice.is_empty()),
        verdict(f.ratio() <= 1.5)
    );
}
