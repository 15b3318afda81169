//! The fleet at scale, over eight real sshd hosts on 127.0.0.11 … 127.0.0.18 (each its own
//! root folder and tmux server): 40 demo agents of 8 tasks placed by slots and labels,
//! every remote handoff told to its PM once, a host stopped and its agents moved, and after
//! the heal one run of each agent. The same scenario is `ao-bench fleet`'s, which prints
//! the figures; here it must only hold.

mod common;

use common::fleet::{Hosts, Scale};
use common::*;

#[test]
fn forty_agents_on_eight_hosts_survive_one_going_away() {
    let w = World::new();
    let hosts = Hosts::start(w.dir.path(), 8, |i| format!("127.0.0.{}", 11 + i));
    let task = |a: &[&str]| {
        let mut c = w.task();
        c.args(a).envs(hosts.env());
        c
    };
    let f = common::fleet::run(&Scale {
        hosts: &hosts,
        project: &w.project,
        config_dir: &w.dir.path().join("config/agent-orchestrator"),
        task: &task,
        tasks: std::env::var("AO_SCALE_TASKS").map_or(8, |v| v.parse().unwrap()),
        rounds: 2,
    });
    eprintln!(
        "{} agents placed {:?} in {:?}; {} handoffs, slowest told after {:?}; {} stopped: recorded after {:?}, {} agents moved after {:?}, healed after {:?}",
        f.agents,
        f.placed,
        f.spawn_total,
        f.handoffs,
        f.latencies.iter().max(),
        f.partitioned,
        f.unreachable_after,
        f.partitioned_agents,
        f.moved_after,
        f.healed_after
    );
    let mut l = f.latencies.clone();
    l.sort();
    eprintln!(
        "told: p50 {:?} p99 {:?}; slowest {:?}",
        l[l.len() / 2],
        l[(l.len() * 99 / 100).min(l.len() - 1)],
        f.slowest
    );
    assert!(
        f.unreachable_after.as_secs() <= common::fleet::HOST_TIMEOUT_SECS,
        "recorded within host_timeout"
    );
}
