//! Agent sessions: start the PM, spawn agents, send messages, stop, and
//! report liveness. The tmux edge is [`crate::io::tmux`]; this module decides
//! names, folders, environment, preambles and what is recorded.
//!
//! One file per thing a caller asks for: [`start()`] and [`restart_pm`] (start.rs),
//! [`spawn()`] (spawn.rs; remote_spawn.rs when the agent runs on another host),
//! [`prepare()`] (prepare.rs), [`send()`] (send.rs), [`stop()`] (stop.rs),
//! [`liveness()`] (liveness.rs), [`pull_remotes`] (pull.rs). Both preambles are built
//! in preamble.rs only, so a spawn, a remote spawn and `--prepare` cannot drift apart;
//! launch.rs starts a local pane and records it.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::core::error::{Error, Result};
use crate::core::model::CwdSpec;
use crate::core::names::AgentName;
use crate::core::report::Started;
use crate::io::runtime::{self, Runtime};
use crate::store::events::Kind as EventKind;
use crate::store::fsutil;
use crate::store::task::Task;

mod launch;
pub(crate) use launch::{Begin, start_agent};
mod liveness;
mod preamble;
mod prepare;
mod pull;
mod remote_spawn;
mod send;
mod spawn;
mod start;
mod stop;

pub use crate::app::context::Ctx;
pub use crate::app::lanes::SpawnMode;
pub use liveness::{Liveness, liveness};
pub use prepare::{Prepared, prepare};
pub use pull::{
    mark_reachable, pull_from, pull_hosts, pull_remotes, pull_remotes_unless_fresh, remote_hosts, watched_hosts,
};
pub use send::{send, send_with};
pub use spawn::{respawn_in_lane, spawn_with, start_elsewhere};
pub use start::{restart_pm, rotate_pm, start};
pub use stop::stop;

/// One agent's launch as a runtime's argv sees it. The start probe, the real start, a
/// remote start and `--prepare` fill the runtime's variables through this one place, so
/// what `--prepare` shows is what a start runs.
struct Launch<'a> {
    task: &'a Task,
    agent: &'a str,
    session: &'a str,
    session_id: &'a str,
    /// The task folder as the agent sees it (a remote path on a remote host).
    task_dir: &'a str,
    /// The agent runs on another host (whose sandbox support is not checked from here).
    remote: bool,
}

/// An agent's command line, and the sandbox it gets.
struct Built {
    argv: Vec<String>,
    sandbox: crate::core::sandbox::State,
}

impl Launch<'_> {
    /// The argv that starts the agent with `prompt` (saved at `prompt_file`). It carries
    /// what the agent may do unasked: the permission mode, its own allow rules as Claude
    /// Code settings (hubs, and spokes the roster lets spawn, may also run `task spawn`
    /// and `task send`; the gate still decides) with task.md's `allow:`/`deny:` rules for
    /// it, and its sandbox ([`Launch::sandbox`]).
    fn argv(&self, ctx: &Ctx, rt: &Runtime, prompt: &str, prompt_file: &Path) -> Result<Built> {
        let spec = self.task.spec()?;
        let mode = rt.permission_mode(&spec)?;
        let may_spawn = crate::store::roster::for_task(self.task)?.may_spawn(self.agent);
        let (sandbox, policy) = self.sandbox(&spec, rt)?;
        let home = dirs::home_dir().unwrap_or_else(|| PathBuf::from("/nonexistent"));
        let sandbox_settings = policy
            .as_ref()
            .filter(|_| rt.sandbox_kind() == Some(runtime::SandboxKind::Claude))
            .map(|p| crate::core::sandbox::claude_settings(p, &other_tasks(self.task), &home));
        let codex = crate::core::sandbox::codex_sandbox(
            policy
                .as_ref()
                .filter(|_| rt.sandbox_kind() == Some(runtime::SandboxKind::Codex)),
            self.task_dir,
            &home,
        );
        let rules = crate::core::rules::for_agent(self.agent, |k| spec.setting(k).map(str::to_string))
            .map_err(|e| Error::BadInput(format!("task '{}': {e} (task.md, Agent Config)", self.task.name)))?;
        let hook = crate::core::shell::shell_join(&[
            ctx.task_bin.display().to_string().as_str(),
            "hook",
            "permission-request",
        ]);
        // task.md `broker: off` leaves every undecided request to Claude Code's own dialog;
        // so does a remote host, where this `task` binary and the task folder are not.
        let broker = match spec.setting("broker").unwrap_or("on") {
            "on" if self.remote => None,
            "on" => Some((hook.as_str(), crate::core::rules::Timing::of(&spec).hook_timeout_secs())),
            "off" => None,
            other => {
                return Err(Error::BadInput(format!(
                    "task '{}': broker: {other:?} is not on or off (task.md, Agent Config)",
                    self.task.name
                )));
            }
        };
        // The turn hooks need this `task` binary and the task folder at hand: local agents only.
        let turn_hooks = [ctx.task_bin.display().to_string(), "hook".to_string()];
        let turn_hooks = (!self.remote).then_some(&turn_hooks[..]);
        let settings =
            crate::io::permissions::claude_session_settings(may_spawn, &rules, sandbox_settings, broker, turn_hooks);
        let argv = rt.argv(&runtime::Vars {
            agent: self.agent,
            task: self.task.name.as_str(),
            session: self.session,
            session_id: self.session_id,
            prompt,
            prompt_file,
            task_bin: &ctx.task_bin,
            task_dir: self.task_dir,
            permission_mode: &mode,
            settings: &settings,
            codex: &codex,
        })?;
        Ok(Built { argv, sandbox })
    }

    fn sandbox(
        &self,
        spec: &crate::core::model::TaskSpec,
        rt: &Runtime,
    ) -> Result<(crate::core::sandbox::State, Option<crate::core::sandbox::Policy>)> {
        sandbox_of(self.task, spec, self.agent, rt, self.remote)
    }
}

/// An agent's sandbox (see [`crate::core::sandbox`]): its policy from task.md, whether the
/// runtime takes one (Claude Code's or Codex's, [`Runtime::sandbox_kind`]) and whether this
/// machine can give it; with the policy to turn it on when it is on. Writable beyond the
/// agent's working folder and the task folder: the build caches task.md lists; for Claude
/// Code, other tasks' folders stay read-only even inside the working folder. `Err` when the
/// agent requires a sandbox it cannot have: it must not start.
fn sandbox_of(
    task: &Task,
    spec: &crate::core::model::TaskSpec,
    agent: &str,
    rt: &Runtime,
    remote: bool,
) -> Result<(crate::core::sandbox::State, Option<crate::core::sandbox::Policy>)> {
    use crate::core::sandbox;
    let policy = sandbox::policy(agent, |k| spec.setting(k).map(str::to_string))
        .map_err(|e| Error::BadInput(format!("task '{}': {e} (task.md, Agent Config)", task.name)))?;
    let kind = rt.sandbox_kind();
    let machine = match kind {
        _ if remote => Err("sandboxes on remote hosts are not set up yet".to_string()),
        _ if policy.mode == sandbox::Mode::Off => Ok(()),
        Some(k) => crate::io::sandbox::check(k.tools()),
        None => Ok(()),
    };
    let state = sandbox::decide(&policy, &rt.name, kind.is_some(), machine)
        .map_err(|e| Error::BadInput(format!("cannot start {agent} of task '{}': {e}", task.name)))?;
    Ok(match state {
        sandbox::State::On => (state, Some(policy)),
        _ => (state, None),
    })
}

/// The sandbox every agent of the task's roster would get if started now, for `task start`
/// to say. `Err` when one requires a sandbox it cannot have: then nothing should start.
pub fn sandboxes(task: &Task, pm_runtime: Option<&str>) -> Result<Vec<(String, crate::core::sandbox::State)>> {
    let spec = task.spec()?;
    let roster = crate::store::roster::for_task(task)?;
    let mut out = Vec::new();
    for agent in roster.agents.keys() {
        let flag = pm_runtime.filter(|_| agent == &roster.primary_hub);
        let rt = choose_runtime(task, agent, flag)?;
        let remote = agent
            .parse::<AgentName>()
            .ok()
            .is_some_and(|a| remote_for(&spec, &a).is_some());
        out.push((agent.clone(), sandbox_of(task, &spec, agent, &rt, remote)?.0));
    }
    Ok(out)
}

/// The folders of the project's other tasks: a sandboxed agent may not write there.
fn other_tasks(task: &Task) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(task.project.join("tasks")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != task.name.as_str())
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The warning `task start` prints when agents will run every command unasked: the
/// person who chose `bypassPermissions` must see what it means before it matters.
pub fn permission_warning(task: &Task, runtime: &str) -> Option<String> {
    let rt = runtime::resolve(runtime).ok()?;
    let mode = rt.permission_mode(&*task.spec().ok()?).ok()?;
    (rt.uses_permission_mode() && mode == crate::io::permissions::BYPASS).then(|| {
        format!(
            "permission_mode is {mode}: every agent of task '{}' runs any command without asking. Use it only in a throwaway sandbox; Claude Code asks once to confirm (answer it with `task attach {}`)",
            task.name, task.name
        )
    })
}

/// The local folder agents work in: task.md `cwd:` (relative to the project) or the project.
/// One rule, so the folder a spawn checks, the one it starts in and the one `--prepare`
/// shows are the same.
pub fn local_cwd(task: &Task) -> Result<PathBuf> {
    let spec = task.spec()?;
    Ok(match &spec.cwd {
        Some(CwdSpec::Local { path }) if path.is_absolute() => path.clone(),
        Some(CwdSpec::Local { path }) => task.project.join(path),
        Some(CwdSpec::Remote(_)) | None => task.project.clone(),
    })
}

/// Runtime for `agent` of a task: `--runtime`, else task.md `runtime-<agent>:` (a mixed team:
/// dev on Codex, review on Gemini), else `runtime:`, else what the PM was started with,
/// else `claude`, so that agents spawned later run what the task was started with unless
/// told otherwise.
pub fn choose_runtime(task: &Task, agent: &str, flag: Option<&str>) -> Result<Runtime> {
    // A copy of its own: a spawn may change the argv.
    choose_shared(task, agent, flag).map(std::sync::Arc::unwrap_or_clone)
}

fn choose_shared(task: &Task, agent: &str, flag: Option<&str>) -> Result<std::sync::Arc<Runtime>> {
    if let Some(f) = flag {
        return runtime::resolve(f);
    }
    let spec = task.spec().ok();
    let setting = |k: &str| spec.as_ref().and_then(|s| s.setting(k).map(str::to_string));
    if let Some(r) = setting(&format!("runtime-{agent}")).or_else(|| setting("runtime")) {
        return runtime::resolve(&r);
    }
    if let Some(r) = task
        .state()
        .ok()
        .and_then(|s| s.agents.get("pm").and_then(|a| a.runtime.clone()))
    {
        return runtime::resolve(&r);
    }
    runtime::resolve("claude")
}

/// The `spawn` line of events.jsonl, with the reason code.
fn spawn_event(task: &Task, agent: &str, reason: &str, s: &Started, now: DateTime<Utc>) -> Result<()> {
    crate::store::events::append(
        task,
        EventKind::Spawn,
        Some(agent),
        serde_json::json!({"reason": reason, "session": s.session, "pane": s.pane, "runtime": s.runtime, "host": s.host, "sandbox": s.sandbox, "sandbox_why": s.sandbox_why}),
        now,
    )
}

/// Resolve a `--handoff` argument: absolute, relative to the current folder, or to the task folder,
/// since a PM names the file it just wrote in whichever of these forms comes to hand.
pub fn find_handoff(task: &Task, arg: &Path) -> Result<PathBuf> {
    let candidates = if arg.is_absolute() {
        vec![arg.to_path_buf()]
    } else {
        vec![fsutil::absolute(arg)?, task.dir().join(arg), task.handoffs().join(arg)]
    };
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        Error::BadInput(format!(
            "handoff file {} not found (looked in the current folder and {}); write it with `task handoff {} --from pm …`",
            arg.display(),
            task.dir().display(),
            task.name
        ))
    })
}

/// Refuse a working folder that does not exist: a typo in task.md's `cwd:` must be
/// reported before a lane is taken or a session made, not created as an empty folder.
fn require_cwd(task: &Task, cwd: &Path) -> Result<()> {
    if !cwd.is_dir() {
        return Err(Error::BadInput(format!(
            "the agents' working folder {} does not exist; create it or fix cwd: in {}",
            cwd.display(),
            task.task_md().display()
        )));
    }
    Ok(())
}

/// Where `agent` runs: the remote spec when task.md's `cwd:` is remote and the agent's role
/// is one of `remote_agents:`, else `None` (local).
fn remote_for(spec: &crate::core::model::TaskSpec, agent: &AgentName) -> Option<crate::core::model::RemoteSpec> {
    match (&spec.cwd, remote_roles(spec).iter().any(|r| r == agent.as_str())) {
        (Some(CwdSpec::Remote(r)), true) => Some(r.clone()),
        _ => None,
    }
}

/// The roles that run on the remote host when task.md's `cwd:` is remote
/// (`remote_agents: dev, architect` by default): the PM, scribe and test stay local, beside
/// the task folder the supervisor reads.
pub fn remote_roles(spec: &crate::core::model::TaskSpec) -> Vec<String> {
    spec.setting("remote_agents")
        .unwrap_or("dev, architect")
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
