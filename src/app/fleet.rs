//! The fleet as a use case: the hosts of config.toml looked at over their masters (answering
//! or not, load, memory, the tools agents need), their slots counted from every supervised
//! task's agents, and an agent placed on one ([`place`]) when its task asks for the fleet.
//! The choice itself is `core::fleet`'s, pure.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::core::error::{Error, Result};
use crate::core::fleet::{self, Choice, Host, Placement, Standing, Wanted};
use crate::core::model::{AgentStatus, RemoteSpec, TaskSpec};
use crate::store::task::Task;

/// How long one host may take to answer a look (a login shell's rc files can take
/// seconds; a silent host's master gives up after 15 s anyway).
const LOOK_TIMEOUT: Duration = Duration::from_secs(20);

/// One placement at a time in this process: the choice counts the running agents recorded
/// in the tasks' states, so two placed at once (failover moving several agents of several
/// tasks) would each see the same free slot. Held from the choice until the start is recorded.
#[derive(Default)]
struct Turn(tokio::sync::Mutex<()>);

impl crate::store::memo::Memo for Turn {
    const NAME: &'static str = "fleet placement turn";
    fn entries(&self) -> usize {
        0
    }
}

/// Wait for this process's placement turn ([`Turn`]).
pub async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    crate::store::memo::get::<Turn>().0.lock().await
}

/// Whether an agent's recorded host is `spec` (same destination and port).
fn same_host(a: &RemoteSpec, b: &RemoteSpec) -> bool {
    a.destination() == b.destination() && a.port == b.port
}

/// One agent somewhere on the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Placed {
    pub task: String,
    pub agent: String,
}

/// The running agents of every supervised task (and `also`), per host name.
pub fn agents_on(hosts: &[Host], also: Option<&Task>) -> BTreeMap<String, Vec<Placed>> {
    let mut tasks: Vec<Task> = crate::store::registry::load()
        .into_iter()
        .filter_map(|s| Task::new(std::path::Path::new(&s.project), s.task.parse().ok()?).ok())
        .collect();
    if let Some(t) = also {
        if !tasks.iter().any(|x| x.project == t.project && x.name == t.name) {
            tasks.push(t.clone());
        }
    }
    let specs: Vec<(String, RemoteSpec)> = hosts
        .iter()
        .filter_map(|h| Some((h.name.clone(), h.spec().ok()?)))
        .collect();
    let mut out: BTreeMap<String, Vec<Placed>> = BTreeMap::new();
    for t in tasks {
        let Ok(st) = t.state() else { continue };
        for (name, a) in &st.agents {
            if !matches!(a.status, AgentStatus::Running) {
                continue;
            }
            let Some(r) = a.host.remote() else { continue };
            if let Some((h, _)) = specs.iter().find(|(_, s)| same_host(s, r)) {
                out.entry(h.clone()).or_default().push(Placed {
                    task: t.name.to_string(),
                    agent: name.clone(),
                });
            }
        }
    }
    out
}

/// What a look at one host found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Look {
    pub reachable: bool,
    /// Why not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub load: Option<f64>,
    pub mem_total_mib: Option<u64>,
    pub mem_available_mib: Option<u64>,
    /// `tmux -V`, `rsync --version`, `git --version` and the agent programs' and `task`'s
    /// `--version`: their first lines ("" when missing).
    pub tools: BTreeMap<String, String>,
    /// The daemon's heartbeat on the host, while it has agents there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<crate::io::health::Known>,
}

/// The script a look runs on the host (sh, no user text in it): each answer on a line of
/// its own, tagged.
const LOOK_SCRIPT: &str = "echo \"load $(cut -d' ' -f1 /proc/loadavg 2>/dev/null)\"; \
    echo \"memtotal $(awk '/^MemTotal:/{print $2}' /proc/meminfo 2>/dev/null)\"; \
    echo \"memavail $(awk '/^MemAvailable:/{print $2}' /proc/meminfo 2>/dev/null)\"";

/// What `task hosts` adds to a look: the tools' versions (an agent program can take a
/// second to say its own, so a spawn's placement does not ask).
const TOOLS_SCRIPT: &str = "echo \"tmux $(tmux -V 2>/dev/null | head -n1)\"; \
    echo \"rsync $(rsync --version 2>/dev/null | head -n1)\"; \
    echo \"git $(git --version 2>/dev/null | head -n1)\"; \
    for p in claude kiro-cli codex gemini task; do echo \"$p $($p --version 2>/dev/null </dev/null | head -n1)\"; done";

/// The look's answer read (pure).
fn read_look(out: &str) -> Look {
    let mut l = Look {
        reachable: true,
        ..Default::default()
    };
    for line in out.lines() {
        let (k, v) = line.split_once(' ').unwrap_or((line, ""));
        let v = v.trim();
        match k {
            "load" => l.load = v.parse().ok(),
            "memtotal" => l.mem_total_mib = v.parse::<u64>().ok().map(|k| k / 1024),
            "memavail" => l.mem_available_mib = v.parse::<u64>().ok().map(|k| k / 1024),
            "tmux" | "rsync" | "git" | "claude" | "kiro-cli" | "codex" | "gemini" | "task" => {
                l.tools.insert(k.to_string(), v.to_string());
            }
            _ => {}
        }
    }
    l
}

/// Look at one host over its master, bounded by [`LOOK_TIMEOUT`]; `tools`: their versions too.
pub async fn look(h: &Host, tools: bool) -> Look {
    let spec = match h.spec() {
        Ok(s) => s,
        Err(e) => {
            return Look {
                problem: Some(e),
                ..Default::default()
            };
        }
    };
    let key = crate::io::remote::key(&spec);
    let heartbeat = crate::io::health::last_known(&key);
    // This process's heartbeat already knows: a silent host is not dialled (a dial to it
    // waits out its bound).
    if let Some(since) = crate::io::health::silent_since(&key) {
        return Look {
            problem: Some(crate::io::health::silent_error("look at the host", since)),
            heartbeat,
            ..Default::default()
        };
    }
    let asked = async {
        let host = crate::io::remote::Host::connect(&spec).await?;
        let script = if tools {
            format!("{LOOK_SCRIPT}; {TOOLS_SCRIPT}")
        } else {
            LOOK_SCRIPT.to_string()
        };
        host.run("look at the host", &["sh", "-c", &script], None).await
    };
    let look = match tokio::time::timeout(LOOK_TIMEOUT, asked).await {
        Ok(Ok(out)) => read_look(&out),
        Ok(Err(e)) => Look {
            problem: Some(e.to_string()),
            ..Default::default()
        },
        Err(_) => Look {
            problem: Some(format!("no answer within {} s", LOOK_TIMEOUT.as_secs())),
            ..Default::default()
        },
    };
    Look { heartbeat, ..look }
}

/// Whether the host's root exists (made when missing) and can be written.
pub async fn root_writable(h: &Host) -> Result<()> {
    let spec = h.spec().map_err(Error::BadInput)?;
    let host = crate::io::remote::Host::connect(&spec).await?;
    // The root is data: quoted as one word by the remote runner, never spliced into a script.
    host.run(
        "make the root",
        &["sh", "-c", "mkdir -p -- \"$1\" && test -w \"$1\"", "sh", &h.config.root],
        None,
    )
    .await
    .map(|_| ())
}

/// Every host looked at (at once; `tools`: their versions too) with its agents counted.
pub async fn survey(
    hosts: &[Host],
    also: Option<&Task>,
    tools: bool,
) -> (BTreeMap<String, Look>, BTreeMap<String, Vec<Placed>>) {
    let looks = futures_util::future::join_all(hosts.iter().map(|h| look(h, tools))).await;
    let looks = hosts.iter().map(|h| h.name.clone()).zip(looks).collect();
    (looks, agents_on(hosts, also))
}

/// What the task asks of the fleet for `agent`: `host-<agent>:`, else `hosts:`; `None` when
/// it asks nothing (the agent goes where `cwd:` says).
pub fn wanted(spec: &TaskSpec, agent: &str) -> Result<Option<(Wanted, Placement)>> {
    let Some(v) = spec.setting(&format!("host-{agent}")).or_else(|| spec.setting("hosts")) else {
        return Ok(None);
    };
    let w = Wanted::parse(v).map_err(Error::BadInput)?;
    let p = match spec.setting("placement") {
        Some(p) => Placement::parse(p).map_err(Error::BadInput)?,
        None => Placement::default(),
    };
    Ok(Some((w, p)))
}

/// Where the fleet puts an agent.
#[derive(Debug, Clone)]
pub enum Placing {
    /// Its task does not ask for the fleet, or its role stays here: `cwd:` says.
    NotAsked,
    /// On this host, for this reason.
    On(RemoteSpec, Choice),
    /// No host can take it now; why each could not.
    NoRoom(String),
}

impl Placing {
    /// The refusal for a spawn that may not wait.
    pub fn no_room(agent: &str, why: &str) -> Error {
        Error::Remote(format!(
            "no host of the fleet can take {agent} now ({why}); spawn it with --queue to start it when a slot frees, free one (task stop, or an agent's COMPLETE), or add a host in config.toml [hosts]"
        ))
    }
}

/// Where `agent` of `task` runs when its task asks for the fleet and its role may run
/// remotely (`remote_agents:`): the host chosen now and why, or why none can take it.
pub async fn place(task: &Task, spec: &TaskSpec, agent: &str, remote_roles: &[String]) -> Result<Placing> {
    let Some((wanted, placement)) = wanted(spec, agent)? else {
        return Ok(Placing::NotAsked);
    };
    if !remote_roles.iter().any(|r| r == agent) {
        return Ok(Placing::NotAsked);
    }
    let hosts = crate::app::settings::hosts()?;
    if hosts.is_empty() {
        return Err(Error::BadInput(format!(
            "task.md asks for the fleet (hosts:) but config.toml has no [hosts.<name>]; add one, or remove hosts: to run {agent} here"
        )));
    }
    let (looks, agents) = survey(&hosts, Some(task), false).await;
    let standing: BTreeMap<String, Standing> = hosts
        .iter()
        .map(|h| {
            let l = looks.get(&h.name).cloned().unwrap_or_default();
            (
                h.name.clone(),
                Standing {
                    reachable: l.reachable,
                    used: agents.get(&h.name).map_or(0, |v| v.len() as u32),
                    load: l.load,
                },
            )
        })
        .collect();
    match fleet::choose(&hosts, &standing, &wanted, placement) {
        Ok(None) => Ok(Placing::NotAsked),
        Ok(Some(c)) => {
            let h = hosts.iter().find(|h| h.name == c.host).expect("chosen from these");
            let spec = h.spec().map_err(Error::BadInput)?;
            // The root is the fleet's to keep: made on first use.
            root_writable(h).await?;
            Ok(Placing::On(spec, c))
        }
        Err(why) => Ok(Placing::NoRoom(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_is_read_line_by_line_and_missing_tools_are_empty() {
        let l = read_look(
            "load 0.42\nmemtotal 2048000\nmemavail 1024000\ntmux tmux 3.3a\nrsync \ngit git version 2.39.5\n",
        );
        assert!(l.reachable);
        assert_eq!(l.load, Some(0.42));
        assert_eq!((l.mem_total_mib, l.mem_available_mib), (Some(2000), Some(1000)));
        assert_eq!(l.tools["tmux"], "tmux 3.3a");
        assert_eq!(l.tools["rsync"], "");
        let l = read_look("load \n");
        assert_eq!(l.load, None);
    }
}
