//! A test fleet: real sshd hosts on this machine, each on a loopback address of its own
//! (127.0.0.0/8 is all this machine's: nothing leaves loopback) with its own root folder
//! and its own tmux server, as separate machines would have; and the scale scenario over
//! eight of them that `tests/fleet_scale.rs` checks and `ao-bench fleet` measures (included
//! there by path).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::sshd::Sshd;
use super::wait_for;

/// `n` hosts `h1`…`hn`: their sshd, one ssh config naming them all, and their tmux socket
/// (`{host}` standing for the name, as `AO_REMOTE_TMUX_SOCKET` takes it).
pub struct Hosts {
    pub sshd: Vec<Sshd>,
    pub ssh_config: PathBuf,
    pub rsock: String,
    /// Each host's root folder (`[hosts.hN] root`).
    pub roots: Vec<PathBuf>,
}

impl Hosts {
    /// Start `n` hosts under `dir`, host `i` (from 0) listening on `addr(i)`.
    pub fn start(dir: &Path, n: usize, addr: impl Fn(usize) -> String) -> Hosts {
        let mut sshd = Vec::new();
        let mut config = String::new();
        let mut roots = Vec::new();
        for i in 0..n {
            let d = dir.join(format!("h{}", i + 1));
            let s = Sshd::start_host(&d, &addr(i));
            config.push_str(
                &std::fs::read_to_string(&s.config)
                    .unwrap()
                    .replace("Host aoremote", &format!("Host h{}", i + 1)),
            );
            roots.push(d.join("root"));
            sshd.push(s);
        }
        let ssh_config = dir.join("fleet_ssh_config");
        std::fs::write(&ssh_config, config).unwrap();
        Hosts {
            sshd,
            ssh_config,
            rsock: dir.join("tmux-{host}.sock").display().to_string(),
            roots,
        }
    }

    /// What a `task` process needs to reach them.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("AO_SSH_CONFIG", self.ssh_config.display().to_string()),
            ("AO_REMOTE_TMUX_SOCKET", self.rsock.clone()),
        ]
    }

    /// config.toml's `[hosts.*]`: `slots` each, `labels(i)` for host `i`.
    pub fn tables(&self, slots: u32, labels: impl Fn(usize) -> Vec<&'static str>) -> String {
        let mut t = String::new();
        for (i, root) in self.roots.iter().enumerate() {
            t.push_str(&format!(
                "[hosts.h{n}]\nssh = \"h{n}\"\nroot = \"{}\"\nslots = {slots}\nlabels = {:?}\n\n",
                root.display(),
                labels(i),
                n = i + 1
            ));
        }
        t
    }

    /// Host `name`'s tmux server (`h1`, …).
    pub fn tmux(&self, name: &str) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(self.rsock.replace("{host}", name));
        c
    }

    /// The sessions on host `name`'s tmux server.
    pub fn sessions(&self, name: &str) -> Vec<String> {
        let out = self
            .tmux(name)
            .args(["list-sessions", "-F", "#{session_name}"])
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect())
            .unwrap_or_default()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for s in &self.sshd {
            s.thaw();
        }
        for i in 1..=self.sshd.len() {
            let _ = self.tmux(&format!("h{i}")).arg("kill-server").output();
        }
    }
}

/// The scale scenario's world: the hosts, the project, where config.toml goes and how to
/// run `task` there (the hosts' environment included).
pub struct Scale<'a> {
    pub hosts: &'a Hosts,
    pub project: &'a Path,
    pub config_dir: &'a Path,
    pub task: &'a dyn Fn(&[&str]) -> Command,
    /// Tasks, each with one PM and `ROLES` on the fleet.
    pub tasks: usize,
    /// Handoffs each remote agent writes.
    pub rounds: usize,
}

/// The roles each task puts on the fleet; `review` only on hosts labelled `gpu`.
pub const ROLES: [&str; 5] = ["review", "dev", "architect", "explore", "plan"];
/// Slots per host.
pub const SLOTS: u32 = 6;
/// How long a silent host may be before the PM is told, and before failover moves its agents.
pub const HOST_TIMEOUT_SECS: u64 = 10;
pub const FAILOVER_AFTER_SECS: u64 = 10;

/// What the scenario measured (it panics on anything wrong).
pub struct Figures {
    pub agents: usize,
    pub spawn_total: Duration,
    /// Agents per host after placement.
    pub placed: BTreeMap<String, usize>,
    /// Remote handoff written → named in its PM's check-in, one per handoff.
    pub latencies: Vec<Duration>,
    /// The five slowest, by (task, file).
    pub slowest: Vec<((String, String), Duration)>,
    pub handoffs: usize,
    /// Handoffs told more than once, and never told.
    pub twice: usize,
    pub lost: usize,
    /// The partitioned host and its agents.
    pub partitioned: String,
    pub partitioned_agents: usize,
    /// Stopped → recorded unreachable in every task with agents there.
    pub unreachable_after: Duration,
    /// Stopped → every agent there moved.
    pub moved_after: Duration,
    /// Healed → every run left behind stopped.
    pub healed_after: Duration,
    /// Runs of one (task, agent) on more than one host after the heal (must be 0).
    pub duplicates: usize,
}

fn state(project: &Path, task: &str) -> serde_json::Value {
    let p = project.join("tasks").join(task).join("pm_state.json");
    serde_json::from_slice(&std::fs::read(p).unwrap_or_default()).unwrap_or_default()
}

fn events_of(project: &Path, task: &str, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(project.join("tasks").join(task).join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == kind)
        .collect()
}

/// The host name (`h3`) an agent is recorded on, when remote.
fn host_of(project: &Path, task: &str, agent: &str) -> Option<String> {
    let st = state(project, task);
    let h = st["agents"][agent]["host"].as_str()?;
    (h != "local").then(|| h.split(':').next().unwrap_or(h).to_string())
}

fn ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{:?} failed: {}{}",
        c,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Which handoffs each PM was told of, read from the PMs' inboxes by a thread.
#[derive(Default)]
struct Told {
    written: HashMap<(String, String), Instant>,
    told: BTreeMap<(String, String), usize>,
    latency: Vec<Duration>,
    /// Each handoff's latency, by (task, file).
    each: Vec<((String, String), Duration)>,
    read: HashMap<String, usize>,
}

impl Told {
    fn read(&mut self, project: &Path, tasks: &[String]) {
        for t in tasks {
            let p = project.join("tasks").join(t).join("scratchpad/pm/inbox.jsonl");
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            let from = self.read.get(t).copied().unwrap_or(0).min(lines.len());
            for line in &lines[from..] {
                let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
                let msg = v["text"].as_str().unwrap_or("");
                for l in msg.lines().filter(|l| l.starts_with("- ") && !l.contains("amended")) {
                    let key = (t.clone(), l[2..].split(':').next().unwrap_or("").to_string());
                    if let Some(at) = self.written.get(&key) {
                        let n = self.told.entry(key.clone()).or_insert(0);
                        if *n == 0 {
                            self.latency.push(at.elapsed());
                            self.each.push((key.clone(), at.elapsed()));
                        }
                        *n += 1;
                    }
                }
            }
            self.read.insert(t.clone(), lines.len());
        }
    }
}

/// Eight tasks of five fleet roles on the hosts: placement by slots and labels; a host
/// stopped (SIGSTOP: TCP stays up, as behind a partition) recorded and its agents moved, and
/// after the heal one run of each agent; then a handoff from every agent where it now runs,
/// each told to its PM once.
pub fn run(s: &Scale) -> Figures {
    let names: Vec<String> = (1..=s.tasks).map(|i| format!("s{i}")).collect();
    std::fs::create_dir_all(s.config_dir).unwrap();
    std::fs::write(
        s.config_dir.join("config.toml"),
        s.hosts.tables(SLOTS, |i| if i < 2 { vec!["gpu"] } else { vec![] }),
    )
    .unwrap();
    let config = format!(
        "hosts: any\nhost-review: label:gpu\nremote_agents: {}\nhost_timeout: {HOST_TIMEOUT_SECS}s\nfailover: on\nfailover_after: {FAILOVER_AFTER_SECS}s",
        ROLES.join(", ")
    );
    for t in &names {
        ok((s.task)(&["new", t]));
        std::fs::write(
            s.project.join("tasks").join(t).join("task.md"),
            format!("# Task: {t}\n\n## Agent Config\n{config}\n"),
        )
        .unwrap();
        let mut c = (s.task)(&["start", t, "--runtime", "demo"]);
        c.env("AO_DEMO_IDLE", "1");
        ok(c);
    }

    // Placement: one spawn after another, as a PM's come.
    let began = Instant::now();
    for t in &names {
        for role in ROLES {
            let h = ok((s.task)(&[
                "handoff",
                t,
                "--from",
                "pm",
                "--status",
                "IN_PROGRESS",
                "--target",
                role,
            ]));
            let mut c = (s.task)(&["spawn", t, role, "--handoff", h.trim(), "--runtime", "demo"]);
            c.env("AO_DEMO_IDLE", "1");
            ok(c);
        }
    }
    let spawn_total = began.elapsed();
    let mut placed: BTreeMap<String, usize> = BTreeMap::new();
    for t in &names {
        for role in ROLES {
            let h = host_of(s.project, t, role).unwrap_or_else(|| panic!("{t}/{role} placed on the fleet"));
            if role == "review" {
                assert!(h == "h1" || h == "h2", "{t}/review on a gpu host, not {h}");
            }
            *placed.entry(h).or_default() += 1;
        }
    }
    for (h, n) in &placed {
        assert!(
            *n as u32 <= SLOTS,
            "{h} holds {n} agents, over its {SLOTS} slots: {placed:?}"
        );
    }
    let agents = s.tasks * ROLES.len();

    // A partition: the non-gpu host with the most agents stops answering.
    let (victim, on_victim) = placed
        .iter()
        .filter(|(h, _)| *h != "h1" && *h != "h2")
        .max_by_key(|(_, n)| **n)
        .map(|(h, n)| (h.clone(), *n))
        .unwrap();
    let i: usize = victim[1..].parse::<usize>().unwrap() - 1;
    let affected: Vec<(String, String)> = names
        .iter()
        .flat_map(|t| ROLES.iter().map(move |r| (t.clone(), r.to_string())))
        .filter(|(t, r)| host_of(s.project, t, r).as_deref() == Some(victim.as_str()))
        .collect();
    assert_eq!(affected.len(), on_victim);
    // The daemon's heartbeat on it first (its first answer waits for a login shell).
    wait_for("the heartbeat on the host answering", 60, || {
        let hosts: serde_json::Value = serde_json::from_str(&ok((s.task)(&["hosts", "--json"]))).unwrap();
        hosts
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"] == victim.as_str() && h["heartbeat"]["answering"] == true)
            .then_some(())
    });
    let stopped_at = Instant::now();
    s.hosts.sshd[i].freeze();
    let tasks_there: Vec<String> = {
        let mut v: Vec<String> = affected.iter().map(|(t, _)| t.clone()).collect();
        v.dedup();
        v
    };
    wait_for("the partitioned host recorded", 60, || {
        tasks_there
            .iter()
            .all(|t| !events_of(s.project, t, "host_unreachable").is_empty())
            .then_some(())
    });
    let unreachable_after = stopped_at.elapsed();
    wait_for("its agents moved", 180, || {
        affected
            .iter()
            .all(|(t, r)| host_of(s.project, t, r).is_some_and(|h| h != victim))
            .then_some(())
    });
    let moved_after = stopped_at.elapsed();
    // The new host is in the state once the agent is started there; the event follows
    // when the move is done (and a task's other moved agents may come first).
    wait_for("agent_moved recorded in every task whose agent moved", 60, || {
        affected
            .iter()
            .all(|(t, _)| !events_of(s.project, t, "agent_moved").is_empty())
            .then_some(())
    });
    let healed = Instant::now();
    s.hosts.sshd[i].thaw();
    wait_for("the runs left behind stopped", 120, || {
        let left = s.hosts.sessions(&victim).iter().filter(|n| !n.contains("-pm")).count();
        (left == 0).then_some(())
    });
    let healed_after = healed.elapsed();

    // One run of every agent, on the host its state names.
    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in 1..=s.hosts.sshd.len() {
        let h = format!("h{n}");
        for session in s.hosts.sessions(&h) {
            runs.entry(session).or_default().push(h.clone());
        }
    }
    let duplicates = runs.values().filter(|v| v.len() > 1).count();
    assert_eq!(duplicates, 0, "one run per agent after the heal: {runs:?}");
    for t in &names {
        for role in ROLES {
            let h = host_of(s.project, t, role).unwrap();
            assert!(
                runs.iter()
                    .any(|(name, hs)| name.ends_with(&format!("-{t}-{role}")) && hs == &vec![h.clone()]),
                "{t}/{role} runs on {h}, where its state says: {runs:?}"
            );
        }
    }
    // Then handoffs from every agent, on the host it now runs on (moved ones included),
    // renamed into place there as `task handoff` does; each is told to its PM once.
    let told = Arc::new(Mutex::new(Told::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (told, stop, project, names) = (told.clone(), stop.clone(), s.project.to_path_buf(), names.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                told.lock().unwrap().read(&project, &names);
                std::thread::sleep(Duration::from_millis(10));
            }
            told.lock().unwrap().read(&project, &names);
        })
    };
    let remote_dir = |t: &str, role: &str| {
        let st = state(s.project, t);
        let h = st["agents"][role]["host"].as_str().unwrap().to_string();
        PathBuf::from(h.split_once(':').unwrap().1)
            .join("tasks")
            .join(t)
            .join("handoffs")
    };
    let mut handoffs = 0;
    for r in 0..s.rounds {
        for t in &names {
            for role in ROLES {
                let name = format!("{role}-20990101-0000{r:02}.md");
                let dir = remote_dir(t, role);
                let tmp = dir.join(format!(".{name}.tmp"));
                std::fs::write(
                    &tmp,
                    format!("# Handoff: {role}\n**Status:** COMPLETE\n\n## Completed Work\nround {r}\n"),
                )
                .unwrap();
                told.lock()
                    .unwrap()
                    .written
                    .insert((t.clone(), name.clone()), Instant::now());
                std::fs::rename(&tmp, dir.join(&name)).unwrap();
                handoffs += 1;
                // A spread of arrivals, as forty agents' are; not a synchronisation.
                std::thread::sleep(Duration::from_millis(40));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let t = told.lock().unwrap();
        if t.told.len() == t.written.len() {
            break;
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = t.written.keys().filter(|k| !t.told.contains_key(*k)).collect();
            let inbox = std::fs::read_to_string(
                s.project
                    .join("tasks")
                    .join(&missing[0].0)
                    .join("scratchpad/pm/inbox.jsonl"),
            )
            .unwrap_or_default();
            panic!(
                "{} of {} handoffs never told, e.g. {:?}; that PM's inbox:\n{inbox}\nits ledger: {}",
                missing.len(),
                t.written.len(),
                &missing[..missing.len().min(5)],
                state(s.project, &missing[0].0)["ledger"]
            );
        }
        drop(t);
        std::thread::sleep(Duration::from_millis(50));
    }

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    let t = told.lock().unwrap();
    let twice = t.told.values().filter(|n| **n > 1).count();
    let lost = t.written.len() - t.told.len();
    assert_eq!(lost, 0, "every handoff told");
    assert_eq!(twice, 0, "no handoff told twice");
    Figures {
        agents,
        spawn_total,
        placed,
        latencies: t.latency.clone(),
        slowest: {
            let mut e = t.each.clone();
            e.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
            e.truncate(5);
            e
        },
        handoffs,
        twice,
        lost,
        partitioned: victim,
        partitioned_agents: on_victim,
        unreachable_after,
        moved_after,
        healed_after,
        duplicates,
    }
}
