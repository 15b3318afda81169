//! `task spawn`: take the agent's lane, deploy its context bundle, start it here or on
//! its remote host, and record what was done; a failed start gives the lane back.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::launch::{Begin, start_agent};
use super::preamble::{Place, spoke_preamble};
use super::remote_spawn::spawn_remote;
use super::{Ctx, SpawnMode, choose_runtime, find_handoff, local_cwd, remote_for, require_cwd, spawn_event};
use crate::core::error::{Error, Result};
use crate::core::handoff;
use crate::core::names::AgentName;
use crate::core::report::SpawnReport;
use crate::store::fsutil;
use crate::store::task::Task;

/// Spawn `agent` with the PM's handoff (the spoke preamble, then the handoff itself),
/// taking its lane first so two agents never work one lane. The mode says what a busy lane means: the gate's `--queue` waits for the
/// lane, and a queued spawn started later by the settle must not queue again.
/// A spawn no host of the fleet can take now, held in its lane's queue (`--queue`, or a
/// queued spawn tried again): the daemon's settling starts it once a slot frees. Said once,
/// when first held; a retry that still finds no room leaves it as it was, quietly.
#[allow(clippy::too_many_arguments)] // the spawn's own values, passed on
fn hold_for_fleet(
    task: &Task,
    agent: &str,
    role: &str,
    roster: &str,
    path: &Path,
    flags: &crate::core::protocol::lane::SpawnFlags,
    why: &str,
    mode: SpawnMode,
    now: DateTime<Utc>,
) -> Result<SpawnReport> {
    use crate::core::protocol::lane::Reason;
    let handoff = path.display().to_string();
    task.update_state(now, |st| {
        let l = st.lanes.entry(agent.to_string()).or_default();
        if l.queued.is_none() {
            l.queued = Some(crate::core::protocol::lane::Queued {
                handoff: handoff.clone(),
                flags: flags.clone(),
                at: now,
            });
        }
        l.last_reason = Some(Reason::SpawnQueued);
        Ok(())
    })?;
    let waiting_for = format!("a free slot on the fleet ({why})");
    if mode == SpawnMode::Queue {
        crate::store::events::append(
            task,
            crate::store::events::Kind::SpawnQueued,
            Some(agent),
            serde_json::json!({"reason": Reason::SpawnQueued, "handoff": handoff, "waiting_for": waiting_for}),
            now,
        )?;
    }
    Ok(SpawnReport {
        reason: Reason::SpawnQueued,
        agent: agent.to_string(),
        role: role.into(),
        roster: roster.into(),
        started: None,
        waiting_for: Some(waiting_for),
        notes: Vec::new(),
    })
}

pub async fn spawn_with(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    handoff_arg: &Path,
    flags: &crate::core::protocol::lane::SpawnFlags,
    mode: SpawnMode,
    now: DateTime<Utc>,
) -> Result<SpawnReport> {
    let runtime_flag = flags.runtime.as_deref();
    use crate::core::protocol::lane::Reason;
    task.require()?;
    let spec = task.spec()?;
    let roster = crate::store::roster::for_task(task)?;
    let role = roster.role_of(agent.as_str()).as_str();
    let mut notes = spawnable(task, agent, &roster)?;
    let (path, contents) = read_spawn_handoff(task, handoff_arg)?;
    // A local-only role stays here whatever task.md says; the fleet places an agent whose
    // task asks for it (`hosts:`); otherwise `cwd:` says.
    let local_only = roster.member(agent.as_str()).is_some_and(|m| m.local_only);
    let roles: Vec<String> = if local_only {
        Vec::new()
    } else {
        super::remote_roles(&spec)
    };
    if local_only && super::remote_roles(&spec).iter().any(|r| r == agent.as_str()) {
        notes.push(format!(
            "{agent} runs on this machine: it is local_only in roster '{}'",
            roster.name
        ));
    }
    let _turn = match crate::app::fleet::wanted(&spec, agent.as_str())? {
        Some(_) if roles.iter().any(|r| r == agent.as_str()) => Some(crate::app::fleet::turn().await),
        _ => None,
    };
    let fleet = match crate::app::fleet::place(task, &spec, agent.as_str(), &roles).await? {
        crate::app::fleet::Placing::NoRoom(why) if mode != SpawnMode::Start => {
            return hold_for_fleet(task, agent.as_str(), role, &roster.name, &path, flags, &why, mode, now);
        }
        crate::app::fleet::Placing::NoRoom(why) => {
            return Err(crate::app::fleet::Placing::no_room(agent.as_str(), &why));
        }
        crate::app::fleet::Placing::On(r, c) => Some((r, c)),
        crate::app::fleet::Placing::NotAsked => None,
    };
    if let Some((_, c)) = &fleet {
        notes.push(format!("placed on host {}: {}", c.host, c.why));
    }
    let placed_by = fleet.as_ref().map(|(_, c)| c.clone());
    let remote = match fleet {
        Some((r, _)) => Some(r),
        None if local_only => None,
        None => remote_for(&spec, agent),
    };
    let mut warnings = Vec::new();
    let handoff_text = handoff::decode(&contents.bytes, &mut warnings);
    let rt = choose_runtime(task, agent.as_str(), runtime_flag)?;
    let cwd = local_cwd(task)?;
    let isolation = crate::app::worktree::isolation_for(task, agent.as_str(), flags.isolation)?;
    if remote.is_none() {
        // Everything that can fail before the lane is taken.
        rt.ensure_installed(&ctx.task_bin)?;
        require_cwd(task, &cwd)?;
    }

    // The lane: taken, queued, or refused with its reason code.
    let key = path.display().to_string();
    let reason = match crate::app::lanes::take(ctx, task, agent.as_str(), &key, flags, mode, now).await? {
        crate::app::lanes::Taken::Queued { waiting_for } => {
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
        crate::app::lanes::Taken::Acquired { reason, note } => {
            notes.extend(note);
            reason
        }
    };

    let start = Start {
        roster: &roster,
        role,
        remote: remote.as_ref(),
        rt: &rt,
        path: &path,
        handoff_text: &handoff_text,
        isolation,
        cwd: &cwd,
    };
    let started = launch(ctx, task, agent, &start, &mut notes, now).await;
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            crate::app::lanes::give_back(task, agent.as_str(), &key, now)?;
            return Err(e);
        }
    };
    record_start(task, agent.as_str(), reason, &started, placed_by.as_ref(), now)?;
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

/// Whether `agent` may be spawned at all (the PM is started, not spawned), and what the
/// report should say of its place in the roster.
fn spawnable(task: &Task, agent: &AgentName, roster: &crate::core::protocol::roster::Roster) -> Result<Vec<String>> {
    if agent.as_str() == "pm" {
        return Err(Error::BadInput(format!(
            "the PM is started with `task start {}`, not spawned",
            task.name
        )));
    }
    Ok(if roster.member(agent.as_str()).is_none() {
        vec![format!(
            "'{agent}' is not in roster '{}'; it runs as a spoke",
            roster.name
        )]
    } else {
        Vec::new()
    })
}

/// What a spawn whose lane is taken starts the agent with.
struct Start<'a> {
    roster: &'a crate::core::protocol::roster::Roster,
    role: &'a str,
    /// The host it runs on (None: this machine).
    remote: Option<&'a crate::core::model::RemoteSpec>,
    rt: &'a crate::io::runtime::Runtime,
    /// The PM's handoff that starts it, and its text.
    path: &'a Path,
    handoff_text: &'a str,
    isolation: crate::core::worktree::Isolation,
    /// The task's working folder on this machine.
    cwd: &'a Path,
}

/// Start the agent once its lane is taken: its worktree placed, its context bundle deployed
/// (a problem with it is a note, not a failure), then the agent itself, here or on its host.
async fn launch(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    s: &Start<'_>,
    notes: &mut Vec<String>,
    now: DateTime<Utc>,
) -> Result<crate::core::report::Started> {
    // Its own worktree, when it is to have one: made (or given back) once the lane is its.
    let placed = match s.remote {
        None => crate::app::worktree::place(task, agent.as_str(), s.isolation, s.cwd, now).await?,
        Some(r) => crate::app::worktree::place_on(task, agent.as_str(), s.isolation, r, now).await?,
    };
    // The context bundle (docs/protocol.md#context-bundles).
    let mut plan = BundlePlan::new(task, agent.as_str(), s.roster, s.path, s.handoff_text);
    plan.worktree = placed.as_ref().map(crate::app::worktree::Placement::note);
    if let Err(e) = crate::store::bundle::deploy(&plan.input(task, agent.as_str(), s.role, now)) {
        tracing::warn!(agent = %agent, error = %e, "context bundle not deployed");
        notes.push(format!("context bundle not deployed: {e}"));
    }
    if let Some(r) = s.remote {
        return spawn_remote(
            ctx,
            task,
            agent,
            s.roster,
            r,
            s.rt,
            s.path,
            s.handoff_text,
            placed.as_ref(),
            now,
        )
        .await;
    }
    let cwd = placed.as_ref().map_or_else(|| s.cwd.to_path_buf(), |p| p.cwd.clone());
    let block = placed.as_ref().map(crate::app::worktree::Placement::preamble_block);
    let place = Place::Local {
        cwd: &cwd,
        worktree: block.as_deref(),
    };
    let text = spoke_preamble(task, agent.as_str(), s.roster, &place, s.path, s.handoff_text, now);
    start_agent(ctx, task, agent.as_str(), s.role, s.rt, &text, &cwd, now, Begin::New).await
}

/// A start on record: its pane in the lane, the spawn event, and where the fleet placed it.
fn record_start(
    task: &Task,
    agent: &str,
    reason: crate::core::protocol::lane::Reason,
    started: &crate::core::report::Started,
    placed_by: Option<&crate::core::fleet::Choice>,
    now: DateTime<Utc>,
) -> Result<()> {
    crate::app::lanes::record_pane(task, agent, &started.pane, now)?;
    task.update_state(now, |st| {
        if let Some(a) = st.agents.get_mut(agent) {
            a.placed = placed_by.map(|c| c.why.clone());
        }
        Ok(())
    })?;
    spawn_event(task, agent, reason.code(), started, now)?;
    if let Some(c) = placed_by {
        crate::store::events::append(
            task,
            crate::store::events::Kind::Placed,
            Some(agent),
            serde_json::json!({"host": c.host, "why": c.why}),
            now,
        )?;
    }
    Ok(())
}

/// What a spawn's context bundle is made from; shared by the spawn and `--prepare`
/// so that what `--prepare` shows is what a spawn deploys.
pub(super) struct BundlePlan {
    phase: crate::core::model::Phase,
    handoff: handoff::Handoff,
    file: String,
    agent_md: String,
    /// Its worktree, once placed.
    pub(super) worktree: Option<crate::core::worktree::WorktreeNote>,
}

impl BundlePlan {
    pub(super) fn new(
        task: &Task,
        agent: &str,
        roster: &crate::core::protocol::roster::Roster,
        path: &Path,
        text: &str,
    ) -> BundlePlan {
        BundlePlan {
            phase: roster
                .phase_for(agent)
                .unwrap_or_else(|| task.state().map(|s| s.phase).unwrap_or_default()),
            handoff: handoff::parse(text),
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            agent_md: crate::store::bundle::agent_definition(task, agent, roster),
            worktree: None,
        }
    }

    pub(super) fn input<'a>(
        &'a self,
        task: &'a Task,
        agent: &'a str,
        role: &'a str,
        now: DateTime<Utc>,
    ) -> crate::store::bundle::Deploy<'a> {
        crate::store::bundle::Deploy {
            task,
            agent,
            role,
            phase: self.phase,
            spawn_handoff: &self.file,
            handoff: &self.handoff,
            agent_md: &self.agent_md,
            worktree: self.worktree.as_ref(),
            now,
        }
    }
}

/// The PM's handoff for a spawn, found and read under the regular-file rules.
pub(super) fn read_spawn_handoff(task: &Task, handoff_arg: &Path) -> Result<(PathBuf, fsutil::Contents)> {
    let path = find_handoff(task, handoff_arg)?;
    match fsutil::read_regular(&path, crate::store::handoffs::SIZE_CAP)? {
        Ok(c) => Ok((path, c)),
        Err(skip) => Err(Error::BadInput(format!(
            "refusing to read handoff {}: {}",
            path.display(),
            skip.reason()
        ))),
    }
}

/// Start `agent` again in a fresh conversation, in the lane it holds and the folder (its
/// worktree's, reused) it worked in: a spoke whose context filled up
/// ([`crate::app::rotate`]). Its preamble is the spoke preamble with its original PM
/// handoff followed by `continue_from` (its checkpoint, or what it last said). The lane is
/// never released: its holder only gets the new pane. The caller holds the check-in lock,
/// so no check-in's lane settling sees the old pane gone in between.
pub async fn respawn_in_lane(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    continue_from: &str,
    now: DateTime<Utc>,
) -> Result<crate::core::report::Started> {
    let c = Continuing::read(task, agent, continue_from, "continue")?;
    if c.was.host.remote().is_some() {
        return Err(Error::BadInput(format!(
            "task '{}': {agent} runs on a remote host; it is not restarted in place",
            task.name
        )));
    }
    let roster = crate::store::roster::for_task(task)?;
    let role = roster.role_of(agent).as_str().to_string();
    let cwd = local_cwd(task)?;
    let placed = crate::app::worktree::place(task, agent, c.isolation, &cwd, now).await?;
    let cwd = placed.as_ref().map_or_else(|| cwd.clone(), |p| p.cwd.clone());
    let block = placed.as_ref().map(crate::app::worktree::Placement::preamble_block);
    let place = Place::Local {
        cwd: &cwd,
        worktree: block.as_deref(),
    };
    let text = spoke_preamble(task, agent, &roster, &place, &c.path, &c.handoff_text, now);
    if let Some(s) = &c.was.session {
        ctx.tmux.kill_session(s).await?;
    }
    let started = start_agent(ctx, task, agent, &role, &c.rt, &text, &cwd, now, Begin::New).await?;
    crate::app::lanes::record_pane(task, agent, &started.pane, now)?;
    spawn_event(task, agent, "SPAWN_OK", &started, now)?;
    Ok(started)
}

/// What a run started again in its lane goes on from: the PM's handoff that started it
/// (the lane holder's) followed by `continue_from`, and how it ran.
struct Continuing {
    /// Its record before the new run.
    was: crate::core::model::AgentState,
    path: PathBuf,
    handoff_text: String,
    rt: crate::io::runtime::Runtime,
    isolation: crate::core::worktree::Isolation,
}

impl Continuing {
    /// `what` names the deed for the error when `agent` holds no lane.
    fn read(task: &Task, agent: &str, continue_from: &str, what: &str) -> Result<Continuing> {
        let st = task.state()?;
        let holder = st.lanes.get(agent).and_then(|l| l.holder.clone()).ok_or_else(|| {
            Error::BadInput(format!(
                "task '{}': {agent} holds no lane; nothing to {what}",
                task.name
            ))
        })?;
        let was = st.agents.get(agent).cloned().unwrap_or_default();
        let (path, contents) = read_spawn_handoff(task, Path::new(&holder.handoff))?;
        let mut warnings = Vec::new();
        let handoff_text = format!(
            "{}\n\n{}",
            handoff::decode(&contents.bytes, &mut warnings).trim_end(),
            continue_from.trim()
        );
        let rt =
            std::sync::Arc::unwrap_or_clone(crate::io::runtime::resolve(was.runtime.as_deref().unwrap_or("claude"))?);
        let isolation = was
            .worktree
            .as_ref()
            .map(|w| w.isolation)
            .unwrap_or(crate::core::worktree::Isolation::Shared);
        Ok(Continuing {
            was,
            path,
            handoff_text,
            rt,
            isolation,
        })
    }
}

/// Start `agent` again on another host of the fleet, in the lane it holds, from the PM's
/// handoff that started it followed by `continue_from`: its host stopped answering
/// ([`crate::app::failover`]). The lost host does not answer, so placement passes it over.
/// Returns the start and where it went and why.
pub async fn start_elsewhere(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    continue_from: &str,
    now: DateTime<Utc>,
) -> Result<(crate::core::report::Started, crate::core::fleet::Choice)> {
    let c = Continuing::read(task, agent, continue_from, "move")?;
    let spec = task.spec()?;
    let _turn = crate::app::fleet::turn().await;
    let (remote, choice) = match crate::app::fleet::place(task, &spec, agent, &super::remote_roles(&spec)).await? {
        crate::app::fleet::Placing::On(r, c) => (r, c),
        crate::app::fleet::Placing::NoRoom(why) => return Err(crate::app::fleet::Placing::no_room(agent, &why)),
        crate::app::fleet::Placing::NotAsked => {
            return Err(Error::BadInput(format!(
                "task '{}': {agent} is not placed by the fleet (hosts:); it is not moved",
                task.name
            )));
        }
    };
    let name: AgentName = agent
        .parse()
        .map_err(|e| Error::BadInput(format!("agent name {agent:?}: {e}")))?;
    let roster = crate::store::roster::for_task(task)?;
    let placed = crate::app::worktree::place_on(task, agent, c.isolation, &remote, now).await?;
    let started = spawn_remote(
        ctx,
        task,
        &name,
        &roster,
        &remote,
        &c.rt,
        &c.path,
        &c.handoff_text,
        placed.as_ref(),
        now,
    )
    .await?;
    crate::app::lanes::record_pane(task, agent, &started.pane, now)?;
    crate::store::events::append(
        task,
        crate::store::events::Kind::Placed,
        Some(agent),
        serde_json::json!({"host": choice.host, "why": choice.why}),
        now,
    )?;
    Ok((started, choice))
}
