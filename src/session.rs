//! Agent sessions: start the PM, spawn agents, send messages, stop, and
//! report liveness. The tmux edge is [`crate::tmux`]; this module decides
//! names, folders, environment, preambles and what is recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::delivery;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::handoff;
use crate::names::AgentName;
use crate::preamble;
use crate::runtime::{self, Runtime, Vars};
use crate::scribe;
use crate::task::{AgentState, CwdSpec, Task};
use crate::tmux::{SessionSpec, Socket, Tmux};

/// Default session-name prefix: sessions are `<prefix>-<task>-<agent>`.
pub const DEFAULT_PREFIX: &str = "ao";

/// What every session operation needs.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The tmux server.
    pub tmux: Tmux,
    /// Session-name prefix (`$AO_SESSION_PREFIX`, default `ao`).
    pub prefix: String,
    /// This `task` binary, for preambles and the demo runtime.
    pub task_bin: PathBuf,
}

impl Ctx {
    /// From the environment.
    pub fn from_env() -> Result<Ctx> {
        let prefix = std::env::var("AO_SESSION_PREFIX").unwrap_or_else(|_| DEFAULT_PREFIX.into());
        crate::names::validate("session prefix", &prefix)?;
        Ok(Ctx {
            tmux: Tmux::from_env()?,
            prefix,
            task_bin: std::env::current_exe().map_err(|e| Error::io("find own binary", "task", e))?,
        })
    }

    /// Which tmux server and session prefix this context drives, so the daemon can
    /// refuse a request meant for another server rather than act on the wrong one.
    pub fn id(&self) -> String {
        format!(
            "tmux {} with session prefix '{}'",
            self.tmux.socket().flags(),
            self.prefix
        )
    }

    /// `<prefix>-<task>-<agent>`.
    pub fn session_name(&self, task: &Task, agent: &str) -> String {
        format!("{}-{}-{}", self.prefix, task.name, agent)
    }

    /// How preambles should spell the binary: `task` when that is what PATH finds, else the full path.
    pub fn task_bin_display(&self) -> String {
        match runtime::which("task") {
            Some(p) if same_file(&p, &self.task_bin) => "task".into(),
            _ => self.task_bin.display().to_string(),
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// The environment every agent pane gets.
fn agent_env(ctx: &Ctx, task: &Task, agent: &str, role: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("TASK_NAME".into(), task.name.to_string()),
        ("TASK_DIR".into(), task.dir().display().to_string()),
        ("TASK_AGENT".into(), agent.to_string()),
        ("TASK_ROLE".into(), role.to_string()),
        ("AO_SESSION_PREFIX".into(), ctx.prefix.clone()),
        (
            "AO_TMUX_SOCKET".into(),
            match ctx.tmux.socket() {
                Socket::Name(n) => n.clone(),
                Socket::Path(p) => p.display().to_string(),
            },
        ),
    ];
    for k in [
        "AO_TMUX_GUARD_DIR",
        "AO_DEMO_PAUSE_MS",
        "AO_DEMO_IDLE",
        "XDG_CONFIG_HOME",
        "PATH",
        "HOME",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    env
}

/// The local folder agents work in: task.md `cwd:` (relative to the project) or the project.
pub fn local_cwd(task: &Task) -> Result<PathBuf> {
    let spec = task.spec()?;
    Ok(match spec.cwd {
        Some(CwdSpec::Local { path }) if path.is_absolute() => path,
        Some(CwdSpec::Local { path }) => task.project.join(path),
        Some(CwdSpec::Remote(_)) | None => task.project.clone(),
    })
}

/// Runtime for a task: `--runtime`, else task.md `runtime:`, else what the PM was started with, else `claude`.
pub fn choose_runtime(task: &Task, flag: Option<&str>) -> Result<Runtime> {
    if let Some(f) = flag {
        return runtime::resolve(f);
    }
    if let Some(r) = task.spec().ok().and_then(|s| s.setting("runtime").map(str::to_string)) {
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

fn save_preamble(task: &Task, agent: &str, text: &str, now: DateTime<Utc>) -> Result<PathBuf> {
    let dir = task.scratchpad().join(agent);
    fsutil::create_dir_all(&dir)?;
    let stamp = now.with_timezone(&chrono::Local).format("%Y%m%d-%H%M%S");
    let mut path = dir.join(format!("preamble-{stamp}.md"));
    let mut n = 2;
    while !fsutil::atomic_create(&path, text.as_bytes())? {
        path = dir.join(format!("preamble-{stamp}-{n}.md"));
        n += 1;
    }
    Ok(path)
}

/// What a start or spawn did.
#[derive(Debug, Clone, Serialize)]
pub struct Started {
    /// The agent.
    pub agent: String,
    /// Its tmux session.
    pub session: String,
    /// Its pane id.
    pub pane: String,
    /// The runtime.
    pub runtime: String,
    /// Where the exact preamble sent is saved.
    pub preamble: PathBuf,
    /// The command line started (argv).
    pub argv: Vec<String>,
    /// `local`, or the remote host it runs on.
    pub host: String,
}

#[allow(clippy::too_many_arguments)] // one call site each for start and spawn; a struct would only rename them
async fn start_agent(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    role: &str,
    rt: &Runtime,
    preamble_text: &str,
    cwd: &Path,
    now: DateTime<Utc>,
    resume_id: Option<&str>,
) -> Result<Started> {
    let session = ctx.session_name(task, agent);
    let session_id = resume_id
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    // Check everything that can fail before anything is created.
    let probe = rt.argv(&Vars {
        agent,
        task: task.name.as_str(),
        session: &session,
        session_id: &session_id,
        prompt: preamble_text,
        prompt_file: Path::new("/dev/null"),
        task_bin: &ctx.task_bin,
    })?;
    drop(probe);
    if !cwd.is_dir() {
        return Err(Error::BadInput(format!(
            "the agents' working folder {} does not exist; create it or fix cwd: in {}",
            cwd.display(),
            task.task_md().display()
        )));
    }
    if ctx.tmux.has_session(&session).await? {
        if agent == "pm" {
            return Err(Error::BadInput(format!(
                "the PM of task '{}' is already running in tmux session {session}; look with `task attach {}`",
                task.name, task.name
            )));
        }
        // The lane was free, so the old session's turn is over (done, dead or reclaimed).
        tracing::info!(agent, session = %session, "replacing the agent's previous session");
        ctx.tmux.kill_session(&session).await?;
    }
    let prompt_file = save_preamble(task, agent, preamble_text, now)?;
    let argv = rt.argv(&Vars {
        agent,
        task: task.name.as_str(),
        session: &session,
        session_id: &session_id,
        prompt: preamble_text,
        prompt_file: &prompt_file,
        task_bin: &ctx.task_bin,
    })?;
    let pane = ctx
        .tmux
        .new_session(&SessionSpec {
            name: &session,
            cwd,
            env: agent_env(ctx, task, agent, role),
            argv: argv.clone(),
        })
        .await?;
    tracing::info!(agent, session = %session, pane = %pane, runtime = %rt.name, preamble_bytes = preamble_text.len(), "agent started");
    let _l = task.lock_state()?;
    let mut st = task.state_for_update(now)?;
    let a = st.agents.entry(agent.to_string()).or_insert_with(AgentState::default);
    a.role = role.into();
    a.host = "local".into();
    a.session = Some(session.clone());
    a.pane = Some(pane.clone());
    a.status = "running".into();
    a.runtime = Some(rt.name.clone());
    a.session_id = Some(session_id);
    a.started_at = Some(now);
    a.last_activity = Some(now);
    task.save_state(&st)?;
    Ok(Started {
        agent: agent.into(),
        session,
        pane,
        runtime: rt.name.clone(),
        preamble: prompt_file,
        argv,
        host: "local".into(),
    })
}

/// Start the task's PM (creating the task when needed).
pub async fn start(ctx: &Ctx, task: &Task, runtime_flag: Option<&str>, now: DateTime<Utc>) -> Result<Started> {
    crate::task::create_or_repair(task, now)?;
    let spec = task.spec()?;
    let rt = choose_runtime(task, runtime_flag)?;
    rt.ensure_installed(&ctx.task_bin)?;
    let checkin = spec.setting("checkin").unwrap_or("10m").to_string();
    let no_progress = spec.setting("no_progress").unwrap_or("30m").to_string();
    let text = preamble::pm(
        task.name.as_str(),
        &scribe::local_time(now),
        &task.dir().display().to_string(),
        &ctx.task_bin_display(),
        &checkin,
        &no_progress,
        &crate::protocol::roster::Roster::for_task(task)?.describe(),
    );
    if ctx.tmux.has_session(&ctx.session_name(task, "pm")).await? {
        return Err(Error::BadInput(format!(
            "task '{}' is already running (session {}); watch it with `task attach {}` or `task status {}`",
            task.name,
            ctx.session_name(task, "pm"),
            task.name,
            task.name
        )));
    }
    let s = start_agent(ctx, task, "pm", "hub", &rt, &text, &task.project, now, None).await?;
    spawn_event(task, "pm", "SPAWN_OK", &s, now)?;
    Ok(s)
}

/// The `spawn` line of events.jsonl, with the reason code.
fn spawn_event(task: &Task, agent: &str, reason: &str, s: &Started, now: DateTime<Utc>) -> Result<()> {
    crate::events::append(
        task,
        "spawn",
        Some(agent),
        serde_json::json!({"reason": reason, "session": s.session, "pane": s.pane, "runtime": s.runtime, "host": s.host}),
        now,
    )
}

/// Restart a dead PM: its dead session is replaced; the conversation is resumed
/// when the runtime has a `resume_argv` and the PM's session id is known (Claude
/// Code `--resume`), else the PM starts afresh with its preamble.
pub async fn restart_pm(ctx: &Ctx, task: &Task, now: DateTime<Utc>) -> Result<Started> {
    let st = task.state()?;
    let pm = st.agents.get("pm").cloned().unwrap_or_default();
    let mut rt = runtime::resolve(pm.runtime.as_deref().unwrap_or("claude"))?;
    let session = pm.session.clone().unwrap_or_else(|| ctx.session_name(task, "pm"));
    ctx.tmux.kill_session(&session).await?;
    let resume = match (&rt.profile.resume_argv, &pm.session_id) {
        (Some(argv), Some(id)) if !argv.is_empty() => {
            rt.profile.argv = argv.clone();
            Some(id.clone())
        }
        _ => None,
    };
    let spec = task.spec()?;
    let text = preamble::pm(
        task.name.as_str(),
        &scribe::local_time(now),
        &task.dir().display().to_string(),
        &ctx.task_bin_display(),
        spec.setting("checkin").unwrap_or("10m"),
        spec.setting("no_progress").unwrap_or("30m"),
        &crate::protocol::roster::Roster::for_task(task)
            .map(|r| r.describe())
            .unwrap_or_default(),
    );
    let s = start_agent(
        ctx,
        task,
        "pm",
        "hub",
        &rt,
        &text,
        &task.project,
        now,
        resume.as_deref(),
    )
    .await?;
    spawn_event(task, "pm", "SPAWN_OK", &s, now)?;
    Ok(s)
}

/// Resolve a `--handoff` argument: absolute, relative to the current folder, or to the task folder.
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

/// How a spawn treats a busy lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnMode {
    /// Refuse (SPAWN_REJECT_ACTIVE_LANE).
    Start,
    /// Hold it in the lane's queue (`--queue`; SPAWN_QUEUED).
    Queue,
    /// The supervisor starting a queued spawn whose lane freed (SPAWN_DEQUEUED).
    Dequeue,
}

/// What a spawn did. `started` is absent when it was queued.
#[derive(Debug, Clone, Serialize)]
pub struct SpawnReport {
    /// SPAWN_OK, SPAWN_QUEUED, SPAWN_DEQUEUED or SPAWN_RECOVERED_STALE.
    pub reason: crate::protocol::lane::Reason,
    /// The agent.
    pub agent: String,
    /// hub or spoke, from the roster.
    pub role: String,
    /// The task's roster.
    pub roster: String,
    /// What was started.
    #[serde(flatten)]
    pub started: Option<Started>,
    /// For a queued spawn: what holds the lane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Things the caller should know (a stale lane reclaimed, a bundle not deployed…).
    pub notes: Vec<String>,
}

/// Spawn `agent` with the PM's handoff (seed 004 §6.1 preamble + the handoff's contents),
/// taking its lane first; a busy lane refuses the spawn.
pub async fn spawn(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    handoff_arg: &Path,
    runtime_flag: Option<&str>,
    now: DateTime<Utc>,
) -> Result<SpawnReport> {
    spawn_with(ctx, task, agent, handoff_arg, runtime_flag, SpawnMode::Start, now).await
}

/// [`spawn`] with a choice of what a busy lane means.
pub async fn spawn_with(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    handoff_arg: &Path,
    runtime_flag: Option<&str>,
    mode: SpawnMode,
    now: DateTime<Utc>,
) -> Result<SpawnReport> {
    use crate::protocol::lane::Reason;
    task.require()?;
    let spec = task.spec()?;
    let roster = crate::protocol::roster::Roster::for_task(task)?;
    let role = roster.role_of(agent.as_str()).as_str();
    let mut notes = Vec::new();
    if agent.as_str() == "pm" {
        return Err(Error::BadInput(format!(
            "the PM is started with `task start {}`, not spawned",
            task.name
        )));
    }
    if roster.member(agent.as_str()).is_none() {
        notes.push(format!(
            "'{agent}' is not in roster '{}'; it runs as a spoke",
            roster.name
        ));
    }
    let remote = remote_for(&spec, agent);
    let (path, contents) = read_spawn_handoff(task, handoff_arg)?;
    let mut warnings = Vec::new();
    let handoff_text = handoff::decode(&contents.bytes, &mut warnings);
    let scope = handoff::parse(&handoff_text).sections.scope;
    let rt = choose_runtime(task, runtime_flag)?;
    let cwd = local_cwd(task)?;
    if remote.is_none() {
        // Everything that can fail before the lane is taken.
        rt.ensure_installed(&ctx.task_bin)?;
        if !cwd.is_dir() {
            return Err(Error::BadInput(format!(
                "the agents' working folder {} does not exist; create it or fix cwd: in {}",
                cwd.display(),
                task.task_md().display()
            )));
        }
    }

    // The lane: taken, queued, or refused with its reason code.
    let key = path.display().to_string();
    let reason = match crate::lanes::take(ctx, task, agent.as_str(), &key, runtime_flag, mode, now).await? {
        crate::lanes::Taken::Queued { waiting_for } => {
            return Ok(SpawnReport {
                reason: Reason::SpawnQueued,
                agent: agent.to_string(),
                role: role.into(),
                roster: roster.name.clone(),
                started: None,
                waiting_for,
                notes,
            });
        }
        crate::lanes::Taken::Acquired { reason, note } => {
            notes.extend(note);
            reason
        }
    };

    // The context bundle (seed 000); a problem with it is reported, it does not stop the agent.
    let plan = BundlePlan::new(task, agent.as_str(), &roster, &path, &handoff_text);
    if let Err(e) = crate::bundle::deploy(&plan.input(task, agent.as_str(), role, now)) {
        tracing::warn!(agent = %agent, error = %e, "context bundle not deployed");
        notes.push(format!("context bundle not deployed: {e}"));
    }

    let started = async {
        if let Some(r) = &remote {
            return spawn_remote(ctx, task, agent, role, r, &rt, &path, &handoff_text, now).await;
        }
        let rel = path
            .strip_prefix(task.dir())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.display().to_string());
        let text = preamble::agent(&preamble::AgentPreamble {
            agent: agent.as_str(),
            role,
            task: task.name.as_str(),
            spawned: &scribe::local_time(now),
            cwd: &cwd.display().to_string(),
            task_dir: &task.dir().display().to_string(),
            task_bin: &ctx.task_bin_display(),
            handoff_file: &rel,
            handoff: &handoff_text,
            scope: scope.as_deref(),
            requires_gates: roster.requires_gates(agent.as_str()),
            remote: None,
        });
        start_agent(ctx, task, agent.as_str(), role, &rt, &text, &cwd, now, None).await
    }
    .await;
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            crate::lanes::give_back(task, agent.as_str(), &key, now)?;
            return Err(e);
        }
    };
    crate::lanes::record_pane(task, agent.as_str(), &started.pane, now)?;
    spawn_event(task, agent.as_str(), reason.code(), &started, now)?;
    Ok(SpawnReport {
        reason,
        agent: agent.to_string(),
        role: role.into(),
        roster: roster.name.clone(),
        started: Some(started),
        waiting_for: None,
        notes,
    })
}

/// What a spawn's context bundle is made from; shared by the spawn and `--prepare`
/// so that what `--prepare` shows is what a spawn deploys.
struct BundlePlan {
    phase: crate::task::Phase,
    handoff: handoff::Handoff,
    file: String,
    agent_md: String,
}

impl BundlePlan {
    fn new(task: &Task, agent: &str, roster: &crate::protocol::roster::Roster, path: &Path, text: &str) -> BundlePlan {
        BundlePlan {
            phase: roster
                .phase_for(agent)
                .unwrap_or_else(|| task.state().map(|s| s.phase).unwrap_or_default()),
            handoff: handoff::parse(text),
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            agent_md: crate::bundle::agent_definition(task, agent, roster),
        }
    }

    fn input<'a>(
        &'a self,
        task: &'a Task,
        agent: &'a str,
        role: &'a str,
        now: DateTime<Utc>,
    ) -> crate::bundle::Deploy<'a> {
        crate::bundle::Deploy {
            task,
            agent,
            role,
            phase: self.phase,
            spawn_handoff: &self.file,
            handoff: &self.handoff,
            agent_md: &self.agent_md,
            now,
        }
    }
}

/// Where `agent` runs: the remote spec when task.md's `cwd:` is remote and the agent's role
/// is one of `remote_agents:`, else `None` (local).
fn remote_for(spec: &crate::task::TaskSpec, agent: &AgentName) -> Option<crate::task::RemoteSpec> {
    match (&spec.cwd, remote_roles(spec).iter().any(|r| r == agent.as_str())) {
        (Some(CwdSpec::Remote(r)), true) => Some(r.clone()),
        _ => None,
    }
}

/// The PM's handoff for a spawn, found and read under the regular-file rules.
fn read_spawn_handoff(task: &Task, handoff_arg: &Path) -> Result<(PathBuf, fsutil::Contents)> {
    let path = find_handoff(task, handoff_arg)?;
    match fsutil::read_regular(&path, handoff::SIZE_CAP)? {
        Ok(c) => Ok((path, c)),
        Err(skip) => Err(Error::BadInput(format!(
            "refusing to read handoff {}: {}",
            path.display(),
            skip.reason()
        ))),
    }
}

/// What `task spawn --prepare` renders: everything a spawn would use, nothing started.
#[derive(Debug, Clone, Serialize)]
pub struct Prepared {
    /// Always true: says in the JSON that this is a rendering, not a start.
    pub prepared_only: bool,
    /// The agent.
    pub agent: String,
    /// The tmux session it would get.
    pub session: String,
    /// `local` or the remote spec.
    pub host: String,
    /// Where it would work.
    pub cwd: String,
    /// The runtime.
    pub runtime: String,
    /// The command line it would run (the prompt file is the one a spawn would save).
    pub argv: Vec<String>,
    /// The exact preamble it would be sent.
    pub preamble: String,
    /// The context bundle it would get: `{"manifest": …, "bundle": …}` (nothing is consumed).
    pub bundle: serde_json::Value,
}

/// Render a spawn without starting anything: no session, no state, no files.
/// Prepare and spawn are two verbs so that one is never mistaken for the other.
pub async fn prepare(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    handoff_arg: &Path,
    runtime_flag: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Prepared> {
    task.require()?;
    let spec = task.spec()?;
    let remote = remote_for(&spec, agent);
    let (path, contents) = read_spawn_handoff(task, handoff_arg)?;
    let handoff_text = handoff::decode(&contents.bytes, &mut Vec::new());
    let scope = handoff::parse(&handoff_text).sections.scope;
    let rt = choose_runtime(task, runtime_flag)?;
    let role = crate::protocol::roster::Roster::for_task(task)?
        .role_of(agent.as_str())
        .as_str();
    let (cwd, task_dir, host, file) = match &remote {
        Some(r) => (
            r.path.clone(),
            format!("{}/tasks/{}", r.path, task.name),
            r.to_string(),
            format!(
                "handoffs/{}",
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
        ),
        None => (
            local_cwd(task)?.display().to_string(),
            task.dir().display().to_string(),
            "local".to_string(),
            path.strip_prefix(task.dir())
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| path.display().to_string()),
        ),
    };
    let dest = remote.as_ref().map(|r| r.destination());
    let text = preamble::agent(&preamble::AgentPreamble {
        agent: agent.as_str(),
        role,
        task: task.name.as_str(),
        spawned: &scribe::local_time(now),
        cwd: &cwd,
        task_dir: &task_dir,
        task_bin: &if remote.is_some() {
            "task".to_string()
        } else {
            ctx.task_bin_display()
        },
        handoff_file: &file,
        handoff: &handoff_text,
        scope: scope.as_deref(),
        requires_gates: crate::protocol::roster::Roster::for_task(task)?.requires_gates(agent.as_str()),
        remote: dest.as_deref().map(|d| (d, cwd.as_str())),
    });
    let session = ctx.session_name(task, agent.as_str());
    let prompt_file = Path::new(&task_dir)
        .join("scratchpad")
        .join(agent.as_str())
        .join(format!(
            "preamble-{}.md",
            now.with_timezone(&chrono::Local).format("%Y%m%d-%H%M%S")
        ));
    let argv = rt.argv(&Vars {
        agent: agent.as_str(),
        task: task.name.as_str(),
        session: &session,
        session_id: "<new uuid>",
        prompt: &text,
        prompt_file: &prompt_file,
        task_bin: &ctx.task_bin,
    })?;
    let roster = crate::protocol::roster::Roster::for_task(task)?;
    let plan = BundlePlan::new(task, agent.as_str(), &roster, &path, &handoff_text);
    let assembled = crate::bundle::assemble(&plan.input(task, agent.as_str(), role, now));
    Ok(Prepared {
        bundle: serde_json::json!({"manifest": assembled.manifest, "bundle": assembled.bundle}),
        prepared_only: true,
        agent: agent.to_string(),
        session,
        host,
        cwd,
        runtime: rt.name.clone(),
        argv,
        preamble: text,
    })
}

/// The roles that run on the remote host when task.md's `cwd:` is remote
/// (`remote_agents: dev, architect` by default; the PM, scribe and test stay local).
pub fn remote_roles(spec: &crate::task::TaskSpec) -> Vec<String> {
    spec.setting("remote_agents")
        .unwrap_or("dev, architect")
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Spawn on a remote host (seed 004 §5.3, §6.2): create the task folders there,
/// push the PM's handoff and the preamble, check the runtime is installed there,
/// then start the agent in the host's own tmux server over the ssh master.
#[allow(clippy::too_many_arguments)]
async fn spawn_remote(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    role: &str,
    spec: &crate::task::RemoteSpec,
    rt: &Runtime,
    handoff_path: &Path,
    handoff_text: &str,
    now: DateTime<Utc>,
) -> Result<Started> {
    let host = crate::remote::Host::connect(spec).await?;
    let cwd = host.cwd().await?;
    let rdir = format!("{cwd}/tasks/{}", task.name);
    let session = ctx.session_name(task, agent.as_str());
    let file_name = handoff_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "handoff.md".into());
    let scope = handoff::parse(handoff_text).sections.scope;
    let text = preamble::agent(&preamble::AgentPreamble {
        agent: agent.as_str(),
        role,
        task: task.name.as_str(),
        spawned: &scribe::local_time(now),
        cwd: &cwd,
        task_dir: &rdir,
        task_bin: "task",
        handoff_file: &format!("handoffs/{file_name}"),
        handoff: handoff_text,
        scope: scope.as_deref(),
        requires_gates: crate::protocol::roster::Roster::for_task(task)?.requires_gates(agent.as_str()),
        remote: Some((&spec.destination(), &cwd)),
    });
    let local_copy = save_preamble(task, agent.as_str(), &text, now)?;
    let prompt_file = format!(
        "{rdir}/scratchpad/{agent}/{}",
        local_copy
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let session_id = uuid::Uuid::new_v4().to_string();
    let mut argv = rt.argv(&Vars {
        agent: agent.as_str(),
        task: task.name.as_str(),
        session: &session,
        session_id: &session_id,
        prompt: &text,
        prompt_file: Path::new(&prompt_file),
        task_bin: &ctx.task_bin,
    })?;
    // The program must exist on the host; the built-in demo agent needs `task` there.
    if argv[0] == ctx.task_bin.display().to_string() && !host.has_program(&argv[0]).await {
        argv[0] = "task".into();
    }
    if !host.has_program(&argv[0]).await {
        return Err(Error::BadInput(format!(
            "`{}` is not installed on {} (runtime {}); install it there or choose another runtime with --runtime — nothing was started",
            argv[0],
            spec.destination(),
            rt.name
        )));
    }
    // Like locally: a missing working folder is a mistake to report, not to create.
    if host
        .run("look for the working folder", &["test", "-d", &cwd], None)
        .await
        .is_err()
    {
        return Err(Error::BadInput(format!(
            "the remote working folder {cwd} does not exist on {}; create it there or fix cwd: in {} — nothing was started",
            spec.destination(),
            task.task_md().display()
        )));
    }
    let mut dirs: Vec<String> = ["handoffs", "scratchpad"]
        .iter()
        .map(|d| format!("{rdir}/{d}"))
        .collect();
    dirs.push(format!("{rdir}/artifacts/{agent}"));
    dirs.push(format!("{rdir}/scratchpad/{agent}"));
    for d in crate::task::ARTIFACT_KINDS {
        dirs.push(format!("{rdir}/artifacts/{d}"));
    }
    let mut mkdir = vec!["mkdir", "-p", "--"];
    mkdir.extend(dirs.iter().map(String::as_str));
    host.run("create the task folders", &mkdir, None).await?;
    // task.md goes along, so the agent sees the goal and `task handoff` there finds the task.
    let task_md = std::fs::read(task.task_md()).map_err(|e| Error::io("read", task.task_md(), e))?;
    host.put(&format!("{rdir}/task.md"), &task_md).await?;
    // The file itself (bytes and mtime), so the next pull sees it unchanged and leaves it.
    let raw = std::fs::read(handoff_path).map_err(|e| Error::io("read", handoff_path, e))?;
    let mtime = std::fs::metadata(handoff_path)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    host.put_with_mtime(&format!("{rdir}/handoffs/{file_name}"), &raw, mtime)
        .await?;
    host.put(&prompt_file, text.as_bytes()).await?;
    // The context bundle goes along, replacing the host's earlier copy whole.
    let bundle = crate::bundle::files(task, agent.as_str())?;
    let remote_bundle = format!("{rdir}/active_agents/{agent}");
    host.run(
        "clear the old context bundle",
        &["rm", "-rf", "--", &remote_bundle],
        None,
    )
    .await?;
    let bundle_dirs: std::collections::BTreeSet<String> = bundle
        .iter()
        .filter_map(|(rel, _)| Path::new(rel).parent().map(|p| format!("{rdir}/{}", p.display())))
        .collect();
    if !bundle_dirs.is_empty() {
        let mut mkdir = vec!["mkdir", "-p", "--"];
        mkdir.extend(bundle_dirs.iter().map(String::as_str));
        host.run("create the bundle folders", &mkdir, None).await?;
    }
    for (rel, bytes) in &bundle {
        host.put(&format!("{rdir}/{rel}"), bytes).await?;
    }

    let tmux = host.tmux()?;
    if tmux.has_session(&session).await? {
        // The lane was free: the old session's turn is over.
        tmux.kill_session(&session).await?;
    }
    let mut env = vec![
        ("TASK_NAME".to_string(), task.name.to_string()),
        ("TASK_DIR".into(), rdir.clone()),
        ("TASK_AGENT".into(), agent.to_string()),
        ("TASK_ROLE".into(), role.to_string()),
    ];
    for k in ["AO_DEMO_PAUSE_MS", "AO_DEMO_IDLE"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.into(), v));
        }
    }
    let pane = tmux
        .new_session(&SessionSpec {
            name: &session,
            cwd: Path::new(&cwd),
            env,
            argv: argv.clone(),
        })
        .await?;
    tracing::info!(agent = %agent, host = %spec.destination(), session = %session, pane = %pane, "remote agent started");
    let _l = task.lock_state()?;
    let mut st = task.state_for_update(now)?;
    let a = st.agents.entry(agent.to_string()).or_insert_with(AgentState::default);
    a.role = role.into();
    a.host = spec.to_string();
    a.session = Some(session.clone());
    a.pane = Some(pane.clone());
    a.status = "running".into();
    a.runtime = Some(rt.name.clone());
    a.session_id = Some(session_id);
    a.started_at = Some(now);
    a.last_activity = Some(now);
    task.save_state(&st)?;
    Ok(Started {
        agent: agent.to_string(),
        session,
        pane,
        runtime: rt.name.clone(),
        preamble: local_copy,
        argv,
        host: spec.destination(),
    })
}

/// The remote hosts this task has agents on (from the state), with the remote task folder.
pub fn remote_hosts(task: &Task) -> Vec<crate::task::RemoteSpec> {
    let Ok(st) = task.state() else { return Vec::new() };
    let mut out: Vec<crate::task::RemoteSpec> = Vec::new();
    for a in st.agents.values() {
        if let Ok(CwdSpec::Remote(r)) = crate::task::taskmd::parse_cwd(&a.host) {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

/// Pull every remote host's handoffs and artifacts of this task into the local folder.
/// An unreachable host is reported and skipped; the others are still pulled.
pub async fn pull_remotes(task: &Task) -> Vec<String> {
    let mut problems = Vec::new();
    let hosts = remote_hosts(task);
    tracing::debug!(task = %task.name, hosts = hosts.len(), "pulling remote hosts");
    for spec in hosts {
        let r = async {
            let host = crate::remote::Host::connect_backoff(&spec).await?;
            let cwd = host.cwd().await?;
            // A pull never holds a check-in hostage: rsync has its own --timeout, SFTP this one.
            tokio::time::timeout(
                Duration::from_secs(120),
                host.pull(&format!("{cwd}/tasks/{}", task.name), &task.dir()),
            )
            .await
            .map_err(|_| {
                Error::BadInput(format!(
                    "pulling from {} took over 120 s; retried next time",
                    spec.destination()
                ))
            })?
        }
        .await;
        if let Err(e) = &r {
            tracing::warn!(host = %spec.destination(), error = %e, "pull failed");
            problems.push(e.to_string());
        }
        if let Err(e) = mark_reachable(task, &spec, r.is_ok()) {
            tracing::warn!(error = %e, "cannot record the host's reachability");
        }
    }
    problems
}

/// Record (or clear) since when a host's agents cannot be reached; writes only on a change.
fn mark_reachable(task: &Task, spec: &crate::task::RemoteSpec, ok: bool) -> Result<()> {
    let host = spec.to_string();
    let changes = |st: &crate::task::PmState| {
        st.agents
            .values()
            .any(|a| a.host == host && a.unreachable_since.is_some() == ok)
    };
    if !changes(&task.state()?) {
        return Ok(());
    }
    let _l = task.lock_state()?;
    let now = crate::clock::now();
    let mut st = task.state_for_update(now)?;
    for a in st.agents.values_mut().filter(|a| a.host == host) {
        match (ok, a.unreachable_since) {
            (true, Some(_)) => a.unreachable_since = None,
            (false, None) => a.unreachable_since = Some(now),
            _ => {}
        }
    }
    task.save_state(&st)
}

/// Deliver a message to a running agent with verified delivery.
pub async fn send(ctx: &Ctx, task: &Task, agent: &str, text: &str) -> Result<delivery::Report> {
    task.require()?;
    let st = task.state()?;
    let a = st.agents.get(agent).filter(|a| a.pane.is_some()).ok_or_else(|| {
        Error::NotRunning(format!(
            "agent '{agent}' of task '{}' has never been started; start it with `task spawn {} {agent} --handoff FILE`",
            task.name, task.name
        ))
    })?;
    let pane = a.pane.clone().unwrap_or_default();
    let tmux = match crate::task::taskmd::parse_cwd(&a.host) {
        Ok(CwdSpec::Remote(r)) => crate::remote::Host::connect(&r).await?.tmux()?,
        _ => ctx.tmux.clone(),
    };
    if tmux.pane(&pane).await?.is_none() {
        return Err(Error::NotRunning(format!(
            "agent '{agent}' of task '{}' is not running (its pane {pane} is gone); start it again with `task spawn`",
            task.name
        )));
    }
    let rt = runtime::resolve(a.runtime.as_deref().unwrap_or("claude"))?;
    delivery::deliver(&tmux, &pane, text, &rt.patterns, &rt.delivery_options()).await
}

/// What `task stop` did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Stopped {
    /// Sessions ended.
    pub ended: Vec<String>,
    /// Sessions that were already gone.
    pub already_gone: Vec<String>,
    /// Remote sessions that could not be reached (still running there; retry `task stop`).
    #[serde(default)]
    pub unreachable: Vec<String>,
}

/// End every session of the task recorded in its state; keep every file. Idempotent.
pub async fn stop(ctx: &Ctx, task: &Task, now: DateTime<Utc>) -> Result<Stopped> {
    task.require()?;
    let _l = task.lock_state()?;
    let mut st = task.state_for_update(now)?;
    let mut out = Stopped::default();
    for a in st.agents.values_mut() {
        let Some(session) = a.session.clone() else { continue };
        if let Ok(CwdSpec::Remote(r)) = crate::task::taskmd::parse_cwd(&a.host) {
            // An unreachable host must not keep the local sessions running: report and go on.
            let ended = async {
                crate::remote::Host::connect(&r)
                    .await?
                    .tmux()?
                    .kill_session(&session)
                    .await
            }
            .await;
            match ended {
                Ok(true) => out.ended.push(format!("{session}@{}", r.destination())),
                Ok(false) => out.already_gone.push(format!("{session}@{}", r.destination())),
                Err(e) => {
                    tracing::warn!(host = %r.destination(), error = %e, "cannot stop a remote agent");
                    out.unreachable.push(format!("{session}@{}", r.destination()));
                    continue;
                }
            }
            a.status = "stopped".into();
            continue;
        }
        if ctx.tmux.kill_session(&session).await? {
            out.ended.push(session);
        } else {
            out.already_gone.push(session);
        }
        if a.status == "running" || a.status.is_empty() {
            a.status = "stopped".into();
        }
    }
    task.save_state(&st)?;
    drop(_l);
    // Every lane comes free and nothing queued starts later; the handoff files stay.
    crate::lanes::release_all(task, now)?;
    if let Err(e) = ctx.tmux.end_if_empty().await {
        tracing::debug!(error = %e, "could not end the empty tmux server");
    }
    Ok(out)
}

/// Liveness of one agent, for `task status`.
#[derive(Debug, Clone, Serialize)]
pub struct Liveness {
    /// Agent name.
    pub agent: String,
    /// alive, dead, gone (no pane), or not-started.
    pub pane: String,
    /// Exit status when dead.
    pub exit_status: Option<i32>,
    /// The signal that killed it, when dead by a signal.
    pub exit_signal: Option<i32>,
    /// Seconds since the pane's last activity.
    pub idle_secs: Option<i64>,
    /// The pane shows a permission or trust dialog.
    pub waiting_for_human: bool,
}

/// Look at every recorded agent's pane (one tmux listing, one capture per live agent).
pub async fn liveness(ctx: &Ctx, st: &crate::task::PmState, now: DateTime<Utc>) -> Result<Vec<Liveness>> {
    // One pane listing per server: the local one, and each remote host's (an unreachable
    // host costs at most a few seconds and marks its agents, never fails the whole view).
    let mut servers: BTreeMap<String, Option<(Tmux, Vec<crate::tmux::PaneInfo>)>> = BTreeMap::new();
    servers.insert("local".into(), Some((ctx.tmux.clone(), ctx.tmux.list_panes().await?)));
    for a in st.agents.values() {
        if servers.contains_key(&a.host) || a.host.is_empty() {
            continue;
        }
        let server = match crate::task::taskmd::parse_cwd(&a.host) {
            Ok(CwdSpec::Remote(r)) => {
                let found = async {
                    let host = tokio::time::timeout(Duration::from_secs(5), crate::remote::Host::connect(&r))
                        .await
                        .map_err(|_| Error::BadInput(format!("{} did not answer within 5 s", r.destination())))??;
                    let tmux = host.tmux()?;
                    let panes = tmux.list_panes().await?;
                    Ok::<_, Error>((tmux, panes))
                }
                .await;
                found
                    .map_err(|e| tracing::warn!(host = %r.destination(), error = %e, "host unreachable"))
                    .ok()
            }
            _ => None,
        };
        servers.insert(a.host.clone(), server);
    }
    let mut out = Vec::new();
    for (name, a) in &st.agents {
        let host = if a.host.is_empty() { "local" } else { a.host.as_str() };
        let Some((tmux, panes)) = servers.get(host).and_then(|s| s.as_ref()) else {
            out.push(Liveness {
                agent: name.clone(),
                pane: "unreachable".into(),
                exit_status: None,
                exit_signal: None,
                idle_secs: None,
                waiting_for_human: false,
            });
            continue;
        };
        let Some(pane_id) = &a.pane else {
            out.push(Liveness {
                agent: name.clone(),
                pane: "not-started".into(),
                exit_status: None,
                exit_signal: None,
                idle_secs: None,
                waiting_for_human: false,
            });
            continue;
        };
        let info = panes.iter().find(|p| &p.pane_id == pane_id);
        let l = match info {
            None => Liveness {
                agent: name.clone(),
                pane: "gone".into(),
                exit_status: None,
                exit_signal: None,
                idle_secs: None,
                waiting_for_human: false,
            },
            Some(p) => {
                let mut waiting = false;
                if !p.dead {
                    if let Ok(rt) = runtime::resolve(a.runtime.as_deref().unwrap_or("claude")) {
                        if let Ok(screen) = tmux.capture(pane_id).await {
                            waiting = matches!(delivery::assess(&screen, &rt.patterns), delivery::Screen::Dialog(_));
                        }
                    }
                }
                Liveness {
                    agent: name.clone(),
                    pane: if p.dead { "dead".into() } else { "alive".into() },
                    exit_status: p.dead_status.filter(|_| p.dead),
                    exit_signal: p.dead_signal.filter(|_| p.dead),
                    idle_secs: (p.activity > 0).then(|| (now.timestamp() - p.activity).max(0)),
                    waiting_for_human: waiting,
                }
            }
        };
        out.push(l);
    }
    Ok(out)
}
