//! `ao-bench fleet`: the fleet scenario of tests/fleet_scale.rs over eight sshd hosts on
//! 127.0.0.11 … 127.0.0.18 — placement, a handoff from every agent told to its PM, a host
//! stopped and its agents moved, the heal — with its figures. The baseline, measured in the
//! same run on the same hosts, is the same scenario with one task (5 agents): the ratios say
//! what forty agents cost over five.

use std::time::Duration;

use crate::daemon::Env;
use crate::{arg, ms};

#[path = "../../../tests/common/fleet.rs"]
mod scenario;

// What the scenario reaches as `super::…`: the sshd and the wait of `ao-bench remote`.
use crate::remote::{sshd, wait_for};

fn pct(v: &[Duration], q: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// One run of the scenario with `tasks` tasks on fresh hosts, a fresh daemon and project.
fn once(tasks: usize, rounds: usize) -> scenario::Figures {
    let e = Env::new();
    let hosts = scenario::Hosts::start(&e.root, 8, |i| format!("127.0.0.{}", 11 + i));
    let task = |a: &[&str]| {
        let mut c = e.task(a);
        c.envs(hosts.env())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let f = scenario::run(&scenario::Scale {
        hosts: &hosts,
        project: &e.project,
        config_dir: &e.root.join("config/agent-orchestrator"),
        task: &task,
        tasks,
        rounds,
    });
    let _ = task(&["shutdown"]).output();
    f
}

pub(crate) fn bench_fleet(args: &[String]) {
    let tasks = arg(args, "--tasks", 8);
    let rounds = arg(args, "--rounds", 2);
    eprintln!("baseline: 1 task (5 agents) on 8 hosts …");
    let base = once(1, rounds);
    eprintln!("fleet: {tasks} tasks ({} agents) on 8 hosts …", tasks * 5);
    let f = once(tasks, rounds);
    println!(
        "\nfleet of 8 sshd hosts (127.0.0.11-18, {} slots each, 2 labelled gpu): {} agents of {tasks} tasks; baseline 5 agents of 1 task, same run\n",
        scenario::SLOTS,
        f.agents
    );
    println!("| measurement | baseline | fleet | ratio | target |\n|---|---|---|---|---|");
    let line = |name: &str, b: Duration, x: Duration, target: &str| {
        println!(
            "| {name} | {} | {} | {:.1}x | {target} |",
            ms(b),
            ms(x),
            x.as_secs_f64() / b.as_secs_f64().max(1e-9)
        );
    };
    line(
        "a spawn placed and started (mean)",
        base.spawn_total / base.agents as u32,
        f.spawn_total / f.agents as u32,
        "-",
    );
    line(
        "remote handoff → told to its PM, p50",
        pct(&base.latencies, 0.5),
        pct(&f.latencies, 0.5),
        "-",
    );
    line(
        "remote handoff → told to its PM, p99",
        pct(&base.latencies, 0.99),
        pct(&f.latencies, 0.99),
        "< 1 s",
    );
    line(
        "host stopped → recorded unreachable",
        base.unreachable_after,
        f.unreachable_after,
        &format!("< host_timeout ({} s)", scenario::HOST_TIMEOUT_SECS),
    );
    line(
        "host stopped → its agents moved",
        base.moved_after,
        f.moved_after,
        &format!("failover_after ({} s) + a start", scenario::FAILOVER_AFTER_SECS),
    );
    line(
        "host back → runs left there stopped",
        base.healed_after,
        f.healed_after,
        "-",
    );
    println!(
        "\nplaced: {:?}; {} handoffs, lost {}, told twice {}; {} agents on the stopped host {} moved; duplicates after the heal: {}",
        f.placed, f.handoffs, f.lost, f.twice, f.partitioned_agents, f.partitioned, f.duplicates
    );
    println!("slowest told: {:?}", f.slowest);
}
