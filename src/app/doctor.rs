//! `task doctor`: look at everything a supervised task depends on — tmux and the
//! dedicated server, each runtime's program, Claude Code's permissions for the protocol's
//! commands, Claude Code's sandbox, the daemon, the systemd unit and lingering, cron, the remote hosts named in
//! task.md, the notify command — and say, one line each, what is wrong and what fixes it.
//! Nothing here changes anything; every check is bounded in time.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::core::doctor::{self, Check};
use crate::core::model::CwdSpec;
use crate::core::wire::{Request, Response};
use crate::io::{control, cron, permissions, program, remote, runtime};
use crate::store::task;

/// How long one remote host may take to answer (connect + `command -v rsync`).
const REMOTE_TIMEOUT: Duration = Duration::from_secs(15);

/// Every check, in the order printed. `project` names the project (a folder with
/// `tasks/`) whose tasks' hosts and Claude settings are checked; outside one, those
/// checks say so and pass.
pub async fn run(project: Option<&Path>, ctx: &crate::app::context::Ctx) -> Vec<Check> {
    let mut out = vec![tmux()];
    out.push(server(ctx).await);
    out.extend(runtimes(&ctx.task_bin));
    let root = task::find_project_root(project)
        .ok()
        .filter(|r| r.join("tasks").is_dir());
    out.push(claude_permissions(root.as_deref()));
    out.push(sandbox());
    out.push(daemon());
    out.push(service());
    out.push(lingering());
    out.push(cron_check());
    out.push(git(root.as_deref()));
    if let Some(root) = &root {
        out.extend(remotes(root).await);
        out.push(models(root));
    }
    out.push(notify());
    out
}

/// The models the project's tasks used (from each task's usage.json, as read from the
/// transcripts) that the price table has no price or window for.
fn models(root: &Path) -> Check {
    let prices = crate::io::prices::load();
    let mut used = std::collections::BTreeSet::new();
    for t in task::list_tasks(root).unwrap_or_default() {
        let file = crate::store::usage::load(&t);
        for tr in file.agents.values().flat_map(|s| s.values()) {
            used.extend(tr.by_model.keys().filter(|m| m.as_str() != "unknown").cloned());
        }
    }
    let no_price: Vec<String> = used.iter().filter(|m| prices.of(m).is_none()).cloned().collect();
    let no_window: Vec<String> = used.iter().filter(|m| prices.window_of(m).is_none()).cloned().collect();
    doctor::models(&no_price, &no_window)
}

/// git for the agents' worktrees: a problem only when a task of the project asks for them.
fn git(root: Option<&Path>) -> Check {
    let wanted = root.is_some_and(|r| {
        task::list_tasks(r).unwrap_or_default().iter().any(|t| {
            t.spec().is_ok_and(|s| {
                s.settings.iter().any(|(k, v)| {
                    (k == "worktree" || k.starts_with("worktree-"))
                        && !matches!(
                            crate::core::worktree::Isolation::parse(&v.value),
                            Ok(crate::core::worktree::Isolation::Shared)
                        )
                })
            })
        })
    });
    let out = Command::new("git")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success());
    doctor::git_version(
        out.as_ref()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .as_deref(),
        wanted,
    )
}

fn tmux() -> Check {
    let Some(path) = program::which("tmux") else {
        return Check::problem("tmux", "not on PATH", "apt-get install tmux (3.0 or newer)");
    };
    match Command::new(&path).arg("-V").output() {
        Ok(o) if o.status.success() => doctor::tmux_version(&String::from_utf8_lossy(&o.stdout)),
        Ok(o) => Check::problem(
            "tmux",
            format!("`tmux -V` failed: {}", String::from_utf8_lossy(&o.stderr).trim()),
            "reinstall tmux",
        ),
        Err(e) => Check::problem("tmux", format!("cannot run {}: {e}", path.display()), "reinstall tmux"),
    }
}

async fn server(ctx: &crate::app::context::Ctx) -> Check {
    let name = "tmux server";
    let socket = ctx.tmux.socket().path();
    if ctx.tmux.server_running().await {
        Check::ok(name, format!("running on {}", socket.display()))
    } else if socket.exists() {
        Check::warning(
            name,
            format!("{} exists but no server answers (a crashed server)", socket.display()),
            format!("rm {} (the next task start makes a new server)", socket.display()),
        )
    } else {
        Check::ok(
            name,
            format!("not running; the first task starts it on {}", socket.display()),
        )
    }
}

/// Each runtime profile's program: found, and its version when it tells one.
fn runtimes(task_bin: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    for name in runtime::names() {
        let label = format!("runtime {name}");
        let rt = match runtime::resolve(&name) {
            Ok(rt) => rt,
            Err(e) => {
                out.push(Check::problem(
                    label,
                    e.to_string(),
                    "fix the profile in the config file",
                ));
                continue;
            }
        };
        if let Err(e) = rt.ensure_installed(task_bin) {
            let fix = if rt.profile.install.is_empty() {
                "install the program or remove the profile".to_string()
            } else {
                rt.profile.install.clone()
            };
            let detail = format!("{} not on PATH; tasks can use another runtime", rt.profile.argv[0]);
            tracing::debug!(error = %e, "runtime not installed");
            out.push(Check::warning(label, detail, fix));
            continue;
        }
        let program = rt.profile.argv[0].replace("{task_bin}", &task_bin.to_string_lossy());
        let version = if name == "demo" {
            Some(format!("built in ({})", env!("CARGO_PKG_VERSION")))
        } else {
            version_of(&program)
        };
        out.push(Check::ok(
            label,
            format!(
                "{program}: {}",
                version.unwrap_or_else(|| "found (no version printed)".into())
            ),
        ));
    }
    out
}

/// `program --version`'s first line, if it prints one within 5 s.
fn version_of(program: &str) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

fn claude_permissions(root: Option<&Path>) -> Check {
    let Some(root) = root else {
        return Check::ok(
            "claude permissions",
            "no project here; run task doctor in one to check its settings",
        );
    };
    let path = root.join(".claude/settings.json");
    let shown = path.display().to_string();
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return doctor::claude_permissions(&shown, Err(e.to_string())),
    };
    let missing =
        permissions::merge_settings(existing.as_deref(), &permissions::claude_rules(false)).map(|(_, added)| added);
    doctor::claude_permissions(&shown, missing)
}

/// Claude Code's sandbox, which dev, test, review and architect agents get by default: a
/// warning when missing (they then ask before each command), since the demo and the
/// protocol's own commands work without it.
fn sandbox() -> Check {
    match crate::io::sandbox::check(crate::io::sandbox::CLAUDE_TOOLS) {
        Ok(()) => Check::ok("sandbox", "bubblewrap and socat found; a trial sandbox ran"),
        Err(why) => Check::warning(
            "sandbox",
            format!("agents that build and test will ask before each command: {why}"),
            format!(
                "{} (or set sandbox: off in task.md to mean it)",
                crate::io::sandbox::INSTALL
            ),
        ),
    }
}

fn daemon() -> Check {
    let socket = crate::store::paths::socket_path().display().to_string();
    let answer = match control::request(&Request::Ping) {
        Ok(Some(Response::Pong { pid, version, .. })) => Some((pid, version)),
        _ => None,
    };
    doctor::daemon(
        answer.as_ref().map(|(p, v)| (*p, v.as_str())),
        &socket,
        env!("CARGO_PKG_VERSION"),
    )
}

fn service() -> Check {
    let name = "systemd unit";
    match crate::app::service::unit_path() {
        Ok(p) if p.exists() => Check::ok(name, format!("installed: {}", p.display())),
        Ok(p) => Check::warning(
            name,
            format!(
                "not installed ({}); the daemon does not come back after a reboot",
                p.display()
            ),
            "task service install",
        ),
        Err(e) => Check::warning(name, e.to_string(), "set HOME, or run the daemon another way"),
    }
}

fn lingering() -> Check {
    let name = "lingering";
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|u| !u.is_empty()))
        .or_else(|| {
            let o = Command::new("id").arg("-un").output().ok()?;
            Some(String::from_utf8_lossy(&o.stdout).trim().to_string()).filter(|u| !u.is_empty())
        });
    let Some(user) = user else {
        return Check::warning(name, "cannot tell who this user is", "loginctl enable-linger $(id -un)");
    };
    if Path::new("/var/lib/systemd/linger").join(&user).exists() {
        Check::ok(name, format!("enabled for {user}: the daemon runs without a login"))
    } else {
        Check::warning(
            name,
            format!("off for {user}: a user service stops at logout"),
            format!("loginctl enable-linger {user}"),
        )
    }
}

fn cron_check() -> Check {
    if cron::available() {
        Check::ok("cron", "crontab available (for --cron tasks)")
    } else {
        Check::warning(
            "cron",
            "no crontab command; tasks started with cron mode cannot schedule check-ins",
            "apt-get install cron (or use the daemon)",
        )
    }
}

/// Every remote host of the project's tasks (task.md's `cwd:`, and where agents were
/// spawned with `--remote`): reachable over ssh, rsync present.
async fn remotes(root: &Path) -> Vec<Check> {
    let mut specs = Vec::new();
    let mut seen = BTreeSet::new();
    for t in task::list_tasks(root).unwrap_or_default() {
        let mut hosts = crate::app::session::remote_hosts(&t);
        if let Ok(spec) = t.spec() {
            if let Some(CwdSpec::Remote(r)) = &spec.cwd {
                hosts.push(r.clone());
            }
        }
        for r in hosts {
            if seen.insert((r.destination(), r.port)) {
                specs.push(r);
            }
        }
    }
    let mut out = Vec::new();
    for spec in specs {
        let at = match spec.port {
            Some(p) => format!("{}:{p}", spec.destination()),
            None => spec.destination(),
        };
        let label = format!("remote {at}");
        let port = spec.port.map(|p| format!("-p {p} ")).unwrap_or_default();
        let fix = format!("ssh {port}{} true  (keys, host name, network)", spec.destination());
        let check = match tokio::time::timeout(REMOTE_TIMEOUT, remote::Host::connect(&spec)).await {
            Err(_) => Check::problem(label, "no answer within 15 s", fix),
            Ok(Err(e)) => Check::problem(label, e.to_string(), fix),
            Ok(Ok(host)) => {
                if host.has_program("rsync").await {
                    Check::ok(label, "reachable, rsync present")
                } else {
                    Check::warning(
                        label,
                        "reachable, no rsync: handoffs come home over sftp, slower",
                        format!("ssh {} sudo apt-get install -y rsync", spec.destination()),
                    )
                }
            }
        };
        out.push(check);
    }
    remote::close_all().await;
    out
}

fn notify() -> Check {
    let argv = crate::app::escalation::notify_argv();
    match argv.first() {
        None => Check::warning(
            "notify",
            "no notify command: escalations are only logged and shown in task status",
            "add notify = [\"notify-send\", \"{task}\", \"{reason}\"] to the config file",
        ),
        Some(p) if program::which(p).is_some() => Check::ok("notify", format!("{p} found")),
        Some(p) => Check::problem(
            "notify",
            format!("{p} is not on PATH; escalations reach nobody"),
            format!("install {p} or change notify in the config file"),
        ),
    }
}
