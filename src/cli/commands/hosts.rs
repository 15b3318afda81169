//! `task hosts`: the fleet at a glance, and each host checked.

use serde_json::json;

use crate::app::fleet;
use crate::core::doctor::Check;

use crate::cli::output::{print_json, report_checks};

fn none_configured() -> anyhow::Result<()> {
    println!("No hosts: add [hosts.<name>] tables (ssh, root, slots, labels) to config.toml; see `task hosts --help`.");
    Ok(())
}

/// Every host: answering or not, slots, load, memory, tools, labels, agents.
pub(crate) async fn list(json_out: bool) -> anyhow::Result<()> {
    let hosts = crate::app::settings::hosts()?;
    if hosts.is_empty() && !json_out {
        return none_configured();
    }
    let (looks, agents) = fleet::survey(&hosts, None, true).await;
    let rows: Vec<serde_json::Value> = hosts
        .iter()
        .map(|h| {
            let l = looks.get(&h.name).cloned().unwrap_or_default();
            let on = agents.get(&h.name).cloned().unwrap_or_default();
            let used = on.len() as u32;
            json!({
                "name": h.name,
                "ssh": h.config.ssh,
                "root": h.config.root,
                "labels": h.config.labels,
                "slots": h.config.slots,
                "used": used,
                "free": h.config.slots.saturating_sub(used),
                "reachable": l.reachable,
                "problem": l.problem,
                "load": l.load,
                "mem_total_mib": l.mem_total_mib,
                "mem_available_mib": l.mem_available_mib,
                "tools": l.tools,
                "heartbeat": l.heartbeat,
                "agents": on,
            })
        })
        .collect();
    if json_out {
        return print_json(&rows);
    }
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    t.set_header([
        "HOST", "SSH", "STATE", "SLOTS", "LOAD", "MEMORY", "TMUX", "RSYNC", "GIT", "LABELS", "AGENTS",
    ]);
    for r in &rows {
        let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
        let tool = |k: &str| {
            let v = r["tools"][k].as_str().unwrap_or("");
            if v.is_empty() {
                "-".to_string()
            } else {
                v.split_whitespace()
                    .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
                    .unwrap_or(v)
                    .to_string()
            }
        };
        let mut state = if r["reachable"].as_bool() == Some(true) {
            "reachable".to_string()
        } else {
            format!("unreachable: {}", s("problem"))
        };
        if r["heartbeat"]["answering"] == false {
            state.push_str(&format!(
                " (the daemon's heartbeat: silent since {})",
                r["heartbeat"]["since"].as_str().unwrap_or("?")
            ));
        }
        let mem = match (r["mem_available_mib"].as_u64(), r["mem_total_mib"].as_u64()) {
            (Some(a), Some(t)) => format!("{a}/{t} MiB free"),
            _ => "-".into(),
        };
        let agents: Vec<String> = r["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                format!(
                    "{}/{}",
                    a["task"].as_str().unwrap_or(""),
                    a["agent"].as_str().unwrap_or("")
                )
            })
            .collect();
        t.add_row([
            s("name"),
            s("ssh"),
            state,
            format!("{}/{} used", r["used"], r["slots"]),
            r["load"].as_f64().map_or("-".into(), |l| format!("{l:.2}")),
            mem,
            tool("tmux"),
            tool("rsync"),
            tool("git"),
            ["claude", "kiro-cli", "codex", "gemini", "task"]
                .into_iter()
                .filter(|p| r["tools"][*p].as_str().is_some_and(|v| !v.is_empty()))
                .collect::<Vec<_>>()
                .join(","),
            r["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join(","),
            if agents.is_empty() {
                "-".into()
            } else {
                agents.join(" ")
            },
        ]);
    }
    println!("{t}");
    Ok(())
}

/// Each host (or `name`) checked; exit 1 on a problem.
pub(crate) async fn check(name: Option<&str>, json_out: bool) -> anyhow::Result<()> {
    let mut hosts = crate::app::settings::hosts()?;
    if let Some(n) = name {
        hosts.retain(|h| h.name == n);
        if hosts.is_empty() {
            anyhow::bail!("no host {n:?} in config.toml's [hosts]; `task hosts` lists them");
        }
    }
    if hosts.is_empty() {
        return none_configured();
    }
    let (looks, _) = fleet::survey(&hosts, None, true).await;
    let mut checks = Vec::new();
    for h in &hosts {
        let l = looks.get(&h.name).cloned().unwrap_or_default();
        let label = |what: &str| format!("host {} {what}", h.name);
        if !l.reachable {
            checks.push(Check::problem(
                label("ssh"),
                l.problem.unwrap_or_else(|| "no answer".into()),
                format!("ssh {} true  (keys, host name, network)", h.config.ssh),
            ));
            continue;
        }
        checks.push(Check::ok(label("ssh"), format!("reachable as {}", h.config.ssh)));
        let tool = |k: &str| l.tools.get(k).cloned().unwrap_or_default();
        checks.push(if tool("tmux").is_empty() {
            Check::problem(
                label("tmux"),
                "not installed: agents cannot run there",
                format!("ssh {} sudo apt-get install -y tmux", h.config.ssh),
            )
        } else {
            Check::ok(label("tmux"), tool("tmux"))
        });
        checks.push(if tool("rsync").is_empty() {
            Check::warning(
                label("rsync"),
                "not installed: handoffs come home over sftp, slower",
                format!("ssh {} sudo apt-get install -y rsync", h.config.ssh),
            )
        } else {
            Check::ok(label("rsync"), tool("rsync"))
        });
        checks.push(if tool("git").is_empty() {
            Check::warning(
                label("git"),
                "not installed: agents there get no worktree",
                format!("ssh {} sudo apt-get install -y git", h.config.ssh),
            )
        } else {
            Check::ok(label("git"), tool("git"))
        });
        checks.push(match fleet::root_writable(h).await {
            Ok(()) => Check::ok(label("root"), format!("{} is writable", h.config.root)),
            Err(e) => Check::problem(
                label("root"),
                e.to_string(),
                format!("ssh {} mkdir -p {}", h.config.ssh, h.config.root),
            ),
        });
    }
    crate::io::remote::close_all().await;
    report_checks(&checks, json_out)
}
