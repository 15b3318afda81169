//! The fleet: hosts listed once in config.toml, agents placed on them by their slots and
//! labels, the choice said, a full fleet said, a host that goes away seen — over real sshd
//! hosts on loopback (each with its own keys, port and root folder).

mod common;

use std::process::Command;

use common::fleet::Hosts;
use common::*;

struct Fleet {
    w: World,
    net: Hosts,
}

impl Fleet {
    /// `n` hosts `h1`…`hn` (127.0.0.1, each its own port, root, home and tmux server);
    /// `tables` is config.toml's `[hosts.*]` part, `{root}` replaced by each host's root
    /// folder in turn (h1's, h2's …).
    fn new(n: usize, tables: &str) -> Fleet {
        let w = World::new();
        let net = Hosts::start(w.dir.path(), n, |_| "127.0.0.1".to_string());
        let mut tables = tables.to_string();
        for root in &net.roots {
            tables = tables.replacen("{root}", &root.display().to_string(), 1);
        }
        let cfg = w.dir.path().join("config/agent-orchestrator");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(cfg.join("config.toml"), tables).unwrap();
        Fleet { w, net }
    }

    fn task(&self) -> Command {
        let mut c = self.w.task();
        c.envs(self.net.env()).env("AO_DEMO_IDLE", "1");
        c
    }

    /// `task start t1` with an idle demo PM, task.md's Agent Config being `config`.
    fn start(&self, config: &str) {
        let mut start = self.w.start_idle_pm("t1").new_task(config);
        for (k, v) in self.net.env() {
            start = start.env(k, v);
        }
        start.run();
    }

    fn hosts_json(&self) -> serde_json::Value {
        serde_json::from_str(&ok(&run(self.task().args(["hosts", "--json"])))).unwrap()
    }

    /// The PM's handoff to `agent`, then `task spawn` of it (demo runtime).
    fn spawn(&self, agent: &str) -> std::process::Output {
        let h = self.w.handoff("t1", "pm", "IN_PROGRESS").target(agent).write();
        run(self.task().args([
            "spawn",
            "t1",
            agent,
            "--handoff",
            h.trim(),
            "--runtime",
            "demo",
            "--json",
        ]))
    }
}

impl Fleet {
    /// The host (`h1`, …) `agent` of t1 is recorded on.
    fn host_of(&self, agent: &str) -> String {
        let st = self.w.state("t1");
        st["agents"][agent]["host"]
            .as_str()
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_string()
    }

    /// Host `name`'s tmux server (`h1`, …).
    fn tmux(&self, name: &str) -> Command {
        self.net.tmux(name)
    }
}

const TWO: &str = "[hosts.h1]\nssh = \"h1\"\nroot = \"{root}\"\nslots = 1\n\n[hosts.h2]\nssh = \"h2\"\nroot = \"{root}\"\nslots = 2\nlabels = [\"gpu\"]\n";

/// Agents go where slots and labels say, each choice recorded with why; a full fleet is
/// said, not guessed around; `task hosts` shows who runs where.
#[test]
fn agents_are_placed_by_slots_and_labels_and_a_full_fleet_is_said() {
    let f = Fleet::new(2, TWO);
    let hosts = f.hosts_json();
    for h in hosts.as_array().unwrap() {
        assert_eq!(h["reachable"], true, "{h}");
        assert_eq!(h["used"], 0);
        assert!(h["load"].is_number(), "{h}");
        assert!(h["tools"]["tmux"].as_str().unwrap().starts_with("tmux"), "{h}");
    }
    f.start("hosts: any\nhost-review: label:gpu\nremote_agents: dev, architect, review, explore");
    assert!(f.w.state("t1")["agents"]["pm"]["host"] == "local", "the PM stays here");

    let o = f.spawn("review");
    let r: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert!(r["notes"].to_string().contains("placed on host h2"), "{r}");
    let o = f.spawn("dev");
    let r: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert!(
        r["notes"].to_string().contains("placed on host h1"),
        "spread: h1 empty, h2 half full: {r}"
    );
    ok(&f.spawn("architect"));
    let placed = f.w.events_of("t1", "placed");
    let on: Vec<(&str, &str)> = placed
        .iter()
        .map(|e| (e["agent"].as_str().unwrap(), e["data"]["host"].as_str().unwrap()))
        .collect();
    assert_eq!(on, [("review", "h2"), ("dev", "h1"), ("architect", "h2")]);
    assert!(
        placed[2]["data"]["why"].as_str().unwrap().contains("h1: full (1 of 1)"),
        "{placed:?}"
    );
    let dev_host = f.w.state("t1")["agents"]["dev"]["host"].as_str().unwrap().to_string();
    assert!(dev_host.starts_with("h1:"), "{dev_host}");
    // Status says where and why, long after the spawn: the same words as the event.
    let status: serde_json::Value = serde_json::from_str(&ok(&run(f.task().args(["status", "t1", "--json"])))).unwrap();
    let why = |agent: &str| {
        let row = status["task"]["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == agent)
            .cloned();
        row.map(|r| r["placed"].clone()).unwrap_or_default()
    };
    assert_eq!(why("architect"), placed[2]["data"]["why"], "{status}");
    assert!(why("pm").is_null(), "the PM was not placed: {status}");
    let human = ok(&run(f.task().args(["status", "t1"])));
    let said = format!("  architect: {}", placed[2]["data"]["why"].as_str().unwrap());
    assert!(
        human.contains("Placed by the fleet:") && human.contains(&said),
        "{human}"
    );

    let o = f.spawn("explore");
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(
        e.contains("no host of the fleet can take explore")
            && e.contains("h1: full (1 of 1)")
            && e.contains("h2: full (2 of 2)"),
        "{e}"
    );

    let hosts = f.hosts_json();
    let by: std::collections::BTreeMap<String, &serde_json::Value> = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap().to_string(), h))
        .collect();
    assert_eq!(
        (by["h1"]["used"].clone(), by["h1"]["free"].clone()),
        (1.into(), 0.into())
    );
    assert_eq!(by["h2"]["used"], 2);
    assert!(by["h2"]["agents"].to_string().contains("review"), "{}", by["h2"]);
    let text = ok(&run(f.task().args(["hosts"])));
    assert!(
        text.contains("h1") && text.contains("1/1 used") && text.contains("t1/dev"),
        "{text}"
    );
}

/// A host that does not answer is shown unreachable, its check fails with the fix, and it
/// is passed over (named) when an agent is placed.
#[test]
fn an_unreachable_host_is_shown_checked_and_passed_over() {
    let mut f = Fleet::new(2, TWO);
    ok(&run(f.task().args(["hosts", "check"])));
    f.net.sshd[1].stop();
    let hosts = f.hosts_json();
    let h2 = hosts
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "h2")
        .unwrap()
        .clone();
    assert_eq!(h2["reachable"], false, "{h2}");
    let o = run(f.task().args(["hosts", "check", "h2"]));
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("host h2 ssh") && stdout(&o).contains("ssh h2 true"),
        "{}",
        stdout(&o)
    );
    f.start("hosts: any\nremote_agents: dev");
    let r: serde_json::Value = serde_json::from_str(&ok(&f.spawn("dev"))).unwrap();
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("placed on host h1") && notes.contains("h2: unreachable"),
        "{notes}"
    );
}

/// Mistakes in the fleet's settings are named, and nothing starts.
#[test]
fn a_broken_fleet_setting_is_named() {
    let f = Fleet::new(1, "[hosts.h1]\nssh = \"h1\"\nroot = \"relative/path\"\n");
    let o = run(f.task().args(["hosts"]));
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("absolute"), "{}", stderr(&o));
}

/// Agents on two hosts of the fleet: each one's handoff, written there, comes home to the
/// task's ledger (the watch each host gets, as any remote agent has).
#[test]
fn handoffs_written_on_two_hosts_come_home() {
    let f = Fleet::new(2, TWO);
    f.start("hosts: any\nremote_agents: dev, architect");
    ok(&f.spawn("dev"));
    ok(&f.spawn("architect"));
    let placed: Vec<String> =
        f.w.events_of("t1", "placed")
            .iter()
            .map(|e| e["data"]["host"].as_str().unwrap().to_string())
            .collect();
    let mut hosts = placed.clone();
    hosts.sort();
    assert_eq!(hosts, ["h1", "h2"], "spread over both: {placed:?}");
    for (agent, host) in ["dev", "architect"].iter().zip(&placed) {
        let dir = f.w.dir.path().join(host).join("root/tasks/t1/handoffs");
        let name = format!("{agent}-20991231-235959.md");
        let tmp = dir.join(format!(".{agent}.tmp"));
        std::fs::write(
            &tmp,
            format!("# Handoff: {agent}\n**Status:** COMPLETE\n\n## Completed Work\nOn {host}.\n"),
        )
        .unwrap();
        std::fs::rename(&tmp, dir.join(&name)).unwrap();
        wait_for(&format!("{agent}'s handoff from {host} in the ledger"), 20, || {
            f.w.state("t1")["ledger"].get(&name).map(|_| ())
        });
    }
}

/// A spawn with --queue that finds the fleet full waits in its lane and starts by itself
/// when a slot frees (here: the agent on the one host stopped).
#[test]
fn a_queued_spawn_waits_for_a_free_slot_and_starts_when_one_frees() {
    let f = Fleet::new(1, "[hosts.h1]\nssh = \"h1\"\nroot = \"{root}\"\nslots = 1\n");
    f.start("hosts: any\nremote_agents: dev, architect");
    ok(&f.spawn("dev"));
    let h = f.w.handoff("t1", "pm", "IN_PROGRESS").target("architect").write();
    let o = run(f.task().args([
        "spawn",
        "t1",
        "architect",
        "--handoff",
        h.trim(),
        "--runtime",
        "demo",
        "--queue",
        "--json",
    ]));
    let r: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(r["reason"], "SPAWN_QUEUED", "{r}");
    assert!(r["waiting_for"].as_str().unwrap().contains("h1: full (1 of 1)"), "{r}");
    assert_eq!(f.w.events_of("t1", "spawn_queued").len(), 1);
    // The queue holds while the fleet is full (the daemon tries it on its ticks).
    std::thread::sleep(std::time::Duration::from_secs(6));
    assert!(f.w.state("t1")["agents"].get("architect").is_none());
    assert_eq!(f.w.events_of("t1", "spawn_queued").len(), 1, "said once");
    // dev's slot frees: it hands off COMPLETE on its host, the handoff comes home.
    let dir = f.w.dir.path().join("h1/root/tasks/t1/handoffs");
    let tmp = dir.join(".dev.tmp");
    std::fs::write(
        &tmp,
        "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nDone.\n",
    )
    .unwrap();
    std::fs::rename(&tmp, dir.join("dev-20991231-235959.md")).unwrap();
    wait_for("architect started on the freed slot", 40, || {
        (f.w.state("t1")["agents"]["architect"]["status"] == "running").then_some(())
    });
    // Its placed event follows the start's record.
    wait_for("architect's placed event", 10, || {
        f.w.events_of("t1", "placed")
            .iter()
            .any(|e| e["agent"] == "architect")
            .then_some(())
    });
}

/// The daemon looks at remote agents too: one whose session ends on its host is marked
/// dead, reported once and its slot freed.
#[test]
fn a_remote_death_is_noticed_by_the_daemon() {
    let f = Fleet::new(2, TWO);
    f.start("hosts: any\nremote_agents: dev, architect\nhost_timeout: 2s");
    ok(&f.spawn("dev"));
    ok(&f.spawn("architect"));
    let (dev_host, arch_host) = (f.host_of("dev"), f.host_of("architect"));
    assert_ne!(dev_host, arch_host, "spread over both");

    let _ = f.tmux(&dev_host).args(["kill-session", "-t", "=aot-t1-dev"]).output();
    wait_for("dev marked dead", 20, || {
        (f.w.state("t1")["agents"]["dev"]["status"] == "dead").then_some(())
    });
    // The state is saved before the event is appended: wait for the event too.
    let died = wait_for("dev's death reported", 10, || {
        let died = f.w.events_of("t1", "agent_died");
        (!died.is_empty()).then_some(died)
    });
    assert_eq!(died.len(), 1, "{died:?}");
    assert_eq!(
        died[0]["data"]["host"].as_str().unwrap().split(':').next().unwrap(),
        dev_host
    );
    let hosts = f.hosts_json();
    let used: u64 = hosts
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["used"].as_u64().unwrap())
        .sum();
    assert_eq!(used, 1, "dev's slot freed: {hosts}");
}

/// A host that stops answering (its sshd stopped: TCP stays up, as behind a partition) is
/// recorded within its heartbeat's bound, told to the PM past host_timeout, and recorded
/// again when it is back; its agent is never taken for dead meanwhile.
#[test]
fn a_silent_host_is_recorded_told_and_seen_back() {
    let f = Fleet::new(2, TWO);
    f.start("hosts: any\nremote_agents: dev, architect\nhost_timeout: 2s");
    ok(&f.spawn("dev"));
    ok(&f.spawn("architect"));
    let (dev_host, arch_host) = (f.host_of("dev"), f.host_of("architect"));
    assert_ne!(dev_host, arch_host, "spread over both");

    // The daemon's heartbeat on both hosts first (its first answer waits for a login shell).
    wait_for("both hosts' heartbeats answering", 60, || {
        let hosts = f.hosts_json();
        hosts
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["heartbeat"]["answering"] == true)
            .then_some(())
    });
    let i = if arch_host == "h1" { 0 } else { 1 };
    f.net.sshd[i].freeze();
    let t0 = std::time::Instant::now();
    // The heartbeat misses within 2 + 6 s; the actor's next look (every few seconds)
    // records it — nothing on the silent host holds the actor past that.
    wait_for("the silent host recorded", 20, || {
        (!f.w.events_of("t1", "host_unreachable").is_empty()).then_some(())
    });
    eprintln!("recorded after {:?}", t0.elapsed());
    let down = &f.w.events_of("t1", "host_unreachable")[0];
    assert!(down["data"]["agents"].to_string().contains("architect"), "{down}");
    wait_for("the PM told of it", 30, || {
        f.w.inbox("t1", "pm")
            .iter()
            .any(|m| m.contains(&format!("host {arch_host}")) && m.contains("architect"))
            .then_some(())
    });
    eprintln!("told after {:?}", t0.elapsed());
    let hosts = f.hosts_json();
    let silent = hosts
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == arch_host)
        .unwrap();
    assert_eq!(
        silent["heartbeat"]["answering"], false,
        "task hosts shows the heartbeat: {silent}"
    );
    assert_eq!(
        f.w.state("t1")["agents"]["architect"]["status"],
        "running",
        "not taken for dead while silent"
    );
    assert!(
        f.w.state("t1")["agents"]["architect"]["unreachable_since"].is_string(),
        "its agent shows it (status, task ui, the web page)"
    );
    assert!(
        f.w.state("t1")["agents"]["dev"]["unreachable_since"].is_null(),
        "not the other host's"
    );
    f.net.sshd[i].thaw();
    let t1 = std::time::Instant::now();
    wait_for("the host back", 90, || {
        (!f.w.events_of("t1", "host_back").is_empty()).then_some(())
    });
    eprintln!("back after {:?}", t1.elapsed());
    assert_eq!(f.w.events_of("t1", "host_unreachable").len(), 1, "recorded once");
    wait_for("its agent shown reachable again", 30, || {
        f.w.state("t1")["agents"]["architect"]["unreachable_since"]
            .is_null()
            .then_some(())
    });
    assert_eq!(f.w.state("t1")["agents"]["architect"]["status"], "running");
}

/// Failover: a host silent past `failover_after:` has its agent started on another host
/// (the PM told, `agent_moved`); the old run is left alone while its host is silent, and
/// stopped the moment the host answers again — never two runs of one agent — and what it
/// wrote there meanwhile comes home.
#[test]
fn a_lost_hosts_agent_is_started_elsewhere_and_its_old_run_stopped_on_heal() {
    let f = Fleet::new(2, TWO);
    f.start("hosts: any\nremote_agents: dev\nhost_timeout: 2s\nfailover: on\nfailover_after: 3s");
    ok(&f.spawn("dev"));
    let where_dev = || f.w.state("t1")["agents"]["dev"]["host"].as_str().unwrap().to_string();
    let first = where_dev();
    let from = first.split(':').next().unwrap().to_string();
    let to = if from == "h1" { "h2" } else { "h1" };
    wait_for("the heartbeat on dev's host answering", 60, || {
        f.hosts_json()
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"] == from.as_str() && h["heartbeat"]["answering"] == true)
            .then_some(())
    });
    let has_dev = |host: &str| {
        f.tmux(host)
            .args(["has-session", "-t", "=aot-t1-dev"])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(has_dev(&from));

    let i = if from == "h1" { 0 } else { 1 };
    f.net.sshd[i].freeze();
    // The old run writes while its host is silent: nothing of it can come home yet.
    let remote_dir = first.split_once(':').unwrap().1.to_string() + "/tasks/t1/handoffs";
    let late = "dev-20990101-000000.md";
    std::fs::write(
        format!("{remote_dir}/{late}"),
        "# Handoff: dev\n**Status:** IN_PROGRESS\n\n## Completed Work\nWritten while the host was silent.\n",
    )
    .unwrap();
    let moved = wait_for("dev moved", 60, || f.w.events_of("t1", "agent_moved").first().cloned());
    assert_eq!(moved["data"]["to"], to, "{moved}");
    assert!(where_dev().starts_with(&format!("{to}:")), "{}", where_dev());
    assert_eq!(f.w.state("t1")["agents"]["dev"]["status"], "running");
    assert!(has_dev(to), "dev runs on {to}");
    assert!(has_dev(&from), "the old run is left alone while its host is silent");
    assert_eq!(
        f.w.state("t1")["agents"]["dev"]["left_behind"][0]["session"],
        "aot-t1-dev"
    );
    let status: serde_json::Value = serde_json::from_str(&ok(&run(f.task().args(["status", "t1", "--json"])))).unwrap();
    let row = status["task"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "dev")
        .unwrap()
        .clone();
    assert!(row["host"].as_str().unwrap().starts_with(to), "{row}");
    assert!(
        row["left_behind"][0]["host"].as_str().unwrap().starts_with(&from),
        "status shows the run left behind: {row}"
    );
    let human = ok(&run(f.task().args(["status", "t1"])));
    assert!(human.contains(&format!("moved off {from}")), "{human}");
    wait_for("the PM told of the move", 30, || {
        f.w.inbox("t1", "pm")
            .iter()
            .any(|m| m.contains(&format!("dev was started again on host {to}")))
            .then_some(())
    });
    let preamble = std::fs::read_dir(f.w.project.join("tasks/t1").join("scratchpad/dev"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .find(|t| t.contains("You take over as dev"))
        .expect("the new run's preamble says it takes over");
    assert!(preamble.contains(&format!("its run on {first}")), "{preamble}");

    f.net.sshd[i].thaw();
    wait_for("the old run stopped", 60, || (!has_dev(&from)).then_some(()));
    assert!(has_dev(to), "the new run goes on");
    wait_for("the stop recorded", 30, || {
        f.w.events_of("t1", "agent_stopped")
            .iter()
            .any(|e| e["data"]["by"] == "failover" && e["data"]["host"].as_str().unwrap().starts_with(&from))
            .then_some(())
    });
    wait_for("its late handoff home", 30, || {
        f.w.project
            .join("tasks/t1")
            .join("handoffs")
            .join(late)
            .exists()
            .then_some(())
    });
    wait_for("the record dropped", 30, || {
        f.w.state("t1")["agents"]["dev"]["left_behind"].is_null().then_some(())
    });
    assert_eq!(f.w.events_of("t1", "agent_moved").len(), 1, "moved once");
}

/// A local-only role (the default roster's test agent) runs on this machine even when
/// task.md lists it for the fleet; the spawn says why.
#[test]
fn a_local_only_role_is_never_placed_on_a_host() {
    let f = Fleet::new(2, TWO);
    f.start("hosts: any\nremote_agents: dev, test");
    let out = ok(&f.spawn("test"));
    assert!(out.contains("local_only in roster 'default'"), "{out}");
    assert_eq!(f.w.state("t1")["agents"]["test"]["host"], "local");
    assert!(f.w.events_of("t1", "placed").is_empty(), "not placed");
    ok(&f.spawn("dev"));
    assert_ne!(
        f.w.state("t1")["agents"]["dev"]["host"],
        "local",
        "dev still goes to the fleet"
    );
}
