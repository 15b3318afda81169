//! PM rotation ([`crate::core::rotation`]): when it is due, whether the moment is quiet,
//! the resume block gathered from the task folder, and the rotation itself. The daemon
//! looks at every liveness tick and rotates between its own check-ins; `task rotate` asks
//! for one by hand. A rotation holds the check-in lock, so no check-in is being delivered
//! to the PM while its conversation is replaced: one that comes due stands down and is
//! delivered, once, to the new PM.

use crate::core::error::{Error, Result};
use crate::core::rotation::{self, Parts, Policy, Rotated, Why};
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;
use chrono::{DateTime, Utc};

/// task.md's rotation policy; an unreadable setting turns rotation off (and says why).
pub fn policy(task: &Task) -> std::result::Result<Policy, String> {
    let spec = task.spec().map_err(|e| e.to_string())?;
    Policy::parse(|k| spec.setting(k).map(str::to_string))
}

/// Whether the PM's conversation is due for a rotation now, from its context fill (read
/// from its transcript; unknown fills never rotate by size) and its check-in count.
pub fn due(task: &Task, now: DateTime<Utc>) -> Option<Why> {
    let p = policy(task).ok()?;
    if p.at_percent.is_none() && p.every.is_none() {
        return None;
    }
    let st = task.state().ok()?;
    let pm = st.agents.get("pm")?;
    if pm.status != crate::core::model::AgentStatus::Running
        || pm.pane.is_none()
        || st.phase == crate::core::model::Phase::Complete
    {
        return None;
    }
    let fill = match p.at_percent {
        Some(_) if crate::app::cost::usage_readable(pm) => crate::app::cost::context_fills(task, &st, now)
            .remove("pm")
            .and_then(|c| Some((c.percent?, c.tokens))),
        _ => None,
    };
    rotation::due(&p, fill, pm.checkins)
}

/// Whether the PM sits idle at its input (not working, no dialog): the quiet moment a
/// rotation waits for.
pub async fn pm_idle(ctx: &crate::app::session::Ctx, task: &Task) -> bool {
    let Ok(st) = task.state() else { return false };
    let Some(pm) = st.agents.get("pm") else { return false };
    let (Some(pane), Ok(rt)) = (
        pm.pane.as_deref(),
        crate::io::runtime::resolve(pm.runtime.as_deref().unwrap_or("claude")),
    ) else {
        return false;
    };
    let Ok(screen) = ctx.tmux.capture(pane).await else {
        return false;
    };
    let assessed = crate::core::screen::assess(&screen, &rt.patterns);
    crate::core::turn::activity(rt.patterns.is_busy(&screen), &assessed) == crate::core::turn::Activity::Idle
}

/// The resume block's parts, from the task folder only.
fn parts(task: &Task, why: &Why, now: DateTime<Utc>) -> Result<Parts> {
    let st = task.state()?;
    let dir = task.dir();
    let decisions_path = dir.join("scratchpad").join("pm").join("decisions.md");
    let progress_path = dir.join("progress.md");
    let read = |p: &std::path::Path| {
        std::fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let lanes = st
        .lanes
        .iter()
        .filter_map(|(agent, l)| {
            rotation::lane_line(
                agent,
                l.holder.as_ref().map(|h| (&h.since, file_name(&h.handoff))),
                l.queued.as_ref().map(|q| file_name(&q.handoff)),
            )
        })
        .collect();
    // Only what the PM was told: a handoff still waiting for its check-in reaches the new
    // conversation there, once, as news it acts on. Listed here too, the new PM would act on
    // it from its memory and the check-in after would tell it again (or, the task completed
    // meanwhile, never).
    let (mut names, _) = crate::store::handoffs::list(&task.handoffs())?;
    names.retain(|n| st.ledger.get(n.file()).is_some());
    let last_handoffs = crate::store::progress::latest_by_agent(&task.handoffs(), &names)?
        .iter()
        .map(|l| {
            let next = l
                .handoff
                .recommended_next
                .as_deref()
                .map(|n| format!(", next: {n}"))
                .unwrap_or_default();
            format!(
                "{}: {} {}{next} — {}",
                l.agent(),
                l.file,
                l.handoff.status,
                crate::core::handoff::one_line(&l.handoff.summary(), 160)
            )
        })
        .collect();
    let mut waiting: Vec<String> = crate::store::permits::pending(task)?
        .iter()
        .map(|r| {
            format!(
                "permission request {}: {} wants to run {:?} (answer: task permit {} {} allow|deny)",
                r.id,
                r.agent,
                crate::store::permits::shown(&r.command).0,
                task.name,
                r.id
            )
        })
        .collect();
    waiting.extend(st.escalations.iter().map(|e| format!("needs a human: {}", e.reason)));
    let started = st
        .lineage
        .first()
        .map(|e| e.time)
        .or_else(|| st.agents.get("pm").and_then(|a| a.started_at))
        .unwrap_or(now);
    Ok(Parts {
        task_started: crate::core::clock::local_time(started),
        why: why.describe(),
        phase: st.phase.to_string(),
        decisions_path: decisions_path.display().to_string(),
        decisions: read(&decisions_path),
        lanes,
        last_handoffs,
        waiting,
        progress_path: progress_path.display().to_string(),
        progress: read(&progress_path),
    })
}

/// How long a rotation waits for the PM's turn to be over (the new PM's first, or a check-in's).
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Wait until the PM's turn begun at `since` is over: after a rotation (still holding the
/// check-in lock), so that a check-in due meanwhile reaches the new PM as a turn of its own
/// rather than typed into a client still starting up; after a check-in, before rotating. A
/// Claude Code PM says so through its Stop hook; a PM without hooks is taken as done once
/// its screen is idle. Bounded by [`TURN_WAIT`]; logged when it runs out.
async fn turn_over(ctx: &crate::app::session::Ctx, task: &Task, since: DateTime<Utc>) -> bool {
    let hooked = task
        .state()
        .ok()
        .and_then(|st| st.agents.get("pm").and_then(|a| a.runtime.clone()))
        .and_then(|r| crate::io::runtime::resolve(&r).ok())
        .is_some_and(|rt| rt.sandbox_kind() == Some(crate::io::runtime::SandboxKind::Claude));
    let started = std::time::Instant::now();
    while started.elapsed() < TURN_WAIT {
        let over = if hooked {
            crate::store::turns::all(task).get("pm").is_some_and(|r| {
                r.at >= since
                    && matches!(
                        r.said,
                        crate::core::turn::Said::Ended | crate::core::turn::Said::Failed { .. }
                    )
            })
        } else {
            pm_idle(ctx, task).await
        };
        if over {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tracing::warn!(task = %task.name, secs = TURN_WAIT.as_secs(), "the PM's turn did not end in time; going on");
    false
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Rotate the PM now: under the check-in lock (None when a check-in holds it: try again
/// shortly), its conversation replaced by a fresh one with the resume block; a
/// `pm_rotated` event.
pub async fn rotate(
    ctx: &crate::app::session::Ctx,
    task: &Task,
    why: Why,
    now: DateTime<Utc>,
) -> Result<Option<Rotated>> {
    let Some(_lock) = task.try_lock_checkin()? else {
        return Ok(None);
    };
    let st = task.state()?;
    let Some(pm) = st.agents.get("pm") else {
        return Err(Error::BadInput(format!(
            "task '{}' has no PM to rotate; start it with `task start {}`",
            task.name, task.name
        )));
    };
    if pm.host.remote().is_some() {
        return Err(Error::BadInput(format!(
            "task '{}': a remote PM is not rotated",
            task.name
        )));
    }
    let (old_session, old_pane) = (pm.session_id.clone(), pm.pane.clone());
    let block = rotation::resume_block(&parts(task, &why, now)?);
    let begun = crate::core::clock::now();
    let (started, preamble_bytes) = match crate::app::session::rotate_pm(ctx, task, &block, now).await {
        Ok(r) => r,
        Err(e) => return Err(restart_if_ended(ctx, task, old_pane.as_deref(), e, now).await),
    };
    let new_session = task.state()?.agents.get("pm").and_then(|a| a.session_id.clone());
    turn_over(ctx, task, begun).await;
    let r = Rotated {
        task: task.name.to_string(),
        old_session,
        new_session,
        why,
        preamble_bytes,
        session: started.session,
    };
    crate::store::events::append(
        task,
        EventKind::PmRotated,
        Some("pm"),
        serde_json::to_value(&r).expect("a rotation serialises"),
        now,
    )?;
    tracing::info!(task = %task.name, why = %r.why.describe(), bytes = preamble_bytes, "PM rotated into a fresh conversation");
    Ok(Some(r))
}

/// A rotation that failed after it ended the old PM's session (tmux refused the new one:
/// no pty, the session's name taken meanwhile) leaves the task without a PM. The PM is
/// started again at once, as the death path would do a tick later (its old conversation
/// resumed where the runtime can), but without a death in the record: none happened. The
/// rotation's error says what came of it. `old_pane` is the PM's pane before the rotation.
async fn restart_if_ended(
    ctx: &crate::app::session::Ctx,
    task: &Task,
    old_pane: Option<&str>,
    e: Error,
    now: DateTime<Utc>,
) -> Error {
    let ended = match old_pane {
        Some(p) => ctx.tmux.pane(p).await.is_ok_and(|look| look.is_none_or(|l| l.dead)),
        None => false,
    };
    if !ended {
        return e;
    }
    tracing::warn!(task = %task.name, error = %e, "the rotation ended the old PM but could not start the new one; starting the PM again");
    let after = match crate::app::session::restart_pm(ctx, task, now).await {
        Ok(s) => format!(
            "the PM was started again in session {} (its old conversation where the runtime resumes one)",
            s.session
        ),
        Err(again) => {
            format!("starting the PM again failed too ({again}); the supervisor restarts it at its next look")
        }
    };
    match e {
        Error::Tmux { what, detail, socket } => Error::Tmux {
            what,
            detail: format!("{detail}; {after}"),
            socket,
        },
        Error::BadInput(m) => Error::BadInput(format!("{m}; {after}")),
        Error::Environment(m) => Error::Environment(format!("{m}; {after}")),
        other => other,
    }
}

/// How often the daemon reads the PM's fill again when no check-in happened since.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// How long after its `failures`-th failure in a row a rotation is tried again: 5 s, then
/// twice as long each time, at most a minute. A rotation fails before it ends the old
/// session (say the disk is full), so the PM works on in its full conversation meanwhile:
/// a short wait first, since that conversation keeps growing; a longer one as it lasts, so
/// a failure that stays is not retried at every look (a rotation that ended the old
/// session and could not start the new one starts the PM again, see
/// [`restart_if_ended`]). Pure.
fn retry_after_failure(failures: u32) -> std::time::Duration {
    let first = std::time::Duration::from_secs(5);
    first
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(std::time::Duration::from_secs(60))
}

/// The daemon's rotation watch over one task, ticked with its liveness look: the fill is
/// read again after each check-in (the PM grows when it answers) or every 30 s, and a due
/// rotation waits for a quiet moment.
#[derive(Debug, Default)]
pub struct Watch {
    wanted: Option<Why>,
    looked: Option<(Option<DateTime<Utc>>, std::time::Instant)>,
    /// When the last rotation failed, and how many in a row had.
    failed: Option<(std::time::Instant, u32)>,
}

impl Watch {
    /// Whether the last rotation failed less than [`retry_after_failure`] ago: nothing is
    /// tried until then, whatever asks.
    fn resting(&self) -> bool {
        self.failed.is_some_and(|(t, n)| t.elapsed() < retry_after_failure(n))
    }

    /// Right before a check-in: a PM already past its rotation point (by the fill its last
    /// turn left) is rotated first when it sits idle, so the check-in goes to the fresh
    /// conversation rather than grow the full one. The quiet moment the liveness tick waits
    /// for rarely comes in a busy team, whose next handoff lands while the PM still works;
    /// this is the moment that always comes. A PM at work keeps the rotation wanted, for
    /// [`Watch::after_checkin`].
    pub async fn before_checkin(&mut self, ctx: &crate::app::session::Ctx, task: &Task) -> Option<Rotated> {
        if self.resting() {
            return None;
        }
        if self.wanted.is_none() {
            self.wanted = due(task, crate::core::clock::now());
        }
        let why = self.wanted.clone()?;
        if !pm_idle(ctx, task).await {
            return None;
        }
        self.attempt(ctx, task, why).await
    }

    /// Right after a check-in was delivered: when a rotation is wanted (by the fill read
    /// before it, [`Watch::before_checkin`]), wait for that check-in's turn to be over and
    /// rotate then, so a team whose handoffs never pause still gets its PM rotated.
    ///
    /// A turn that ended after the check-in was sent may be the one it was queued behind:
    /// the client then submits the check-in as the next turn, and a rotation at that moment
    /// would take it away unread. So the PM must also sit idle at its prompt; if not, the
    /// rotation stays wanted for the next quiet moment.
    pub async fn after_checkin(&mut self, ctx: &crate::app::session::Ctx, task: &Task, sent_at: DateTime<Utc>) {
        if self.resting() {
            return;
        }
        let Some(why) = self.wanted.clone() else {
            return;
        };
        if !turn_over(ctx, task, sent_at).await || !pm_idle(ctx, task).await {
            self.wanted = Some(why);
            return;
        }
        self.attempt(ctx, task, why).await;
    }

    /// Rotate now for `why`: done (forget it), not now (a check-in holds the lock: keep it
    /// wanted), or failed (try again after [`retry_after_failure`]).
    async fn attempt(&mut self, ctx: &crate::app::session::Ctx, task: &Task, why: Why) -> Option<Rotated> {
        match rotate(ctx, task, why.clone(), crate::core::clock::now()).await {
            Ok(Some(r)) => {
                self.wanted = None;
                self.looked = None;
                self.failed = None;
                Some(r)
            }
            Ok(None) => {
                self.wanted = Some(why);
                None
            }
            Err(e) => {
                let failures = self.failed.map_or(0, |(_, n)| n) + 1;
                let retry = retry_after_failure(failures);
                tracing::warn!(task = %task.name, error = %e, failures, retry_secs = retry.as_secs(), "PM rotation failed; trying again later");
                self.failed = Some((std::time::Instant::now(), failures));
                self.wanted = None;
                None
            }
        }
    }

    /// Look, and rotate when due and `quiet` (no check-in due or pending in the actor) and
    /// the PM idle. Returns the rotation when one was made.
    pub async fn tick(
        &mut self,
        ctx: &crate::app::session::Ctx,
        task: &Task,
        quiet: impl FnOnce() -> bool,
    ) -> Option<Rotated> {
        if self.resting() {
            return None;
        }
        let last_checkin = task.state().ok()?.last_checkin;
        let stale = self
            .looked
            .is_none_or(|(seen, at)| seen != last_checkin || at.elapsed() >= LOOK_EVERY);
        if self.wanted.is_none() && stale {
            self.wanted = due(task, crate::core::clock::now());
            self.looked = Some((last_checkin, std::time::Instant::now()));
        }
        let why = self.wanted.clone()?;
        if !quiet() {
            tracing::debug!(task = %task.name, "PM rotation due; waiting for the check-ins to settle");
            return None;
        }
        if !pm_idle(ctx, task).await {
            tracing::debug!(task = %task.name, "PM rotation due; waiting for the PM to be idle");
            return None;
        }
        self.attempt(ctx, task, why).await
    }
}

/// How long `task rotate` waits for a check-in being delivered to finish.
const ASKED_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `task rotate`: rotate the PM now, for `by`, once no check-in is being delivered.
pub async fn asked(ctx: &crate::app::session::Ctx, task: &Task, by: &str) -> Result<Rotated> {
    let started = std::time::Instant::now();
    loop {
        let why = Why::Asked { by: by.to_string() };
        if let Some(r) = rotate(ctx, task, why, crate::core::clock::now()).await? {
            return Ok(r);
        }
        if started.elapsed() >= ASKED_WAIT {
            return Err(Error::Environment(format!(
                "task '{}': a check-in held the PM for {} s; nothing was rotated. Try again",
                task.name,
                ASKED_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Spokes whose context filled up (each local Claude Code spoke working on a PM handoff):
/// asked once for a checkpoint handoff (verified delivery), then continued in a fresh
/// session in the same lane and folder from that checkpoint, or, after
/// `checkpoint_grace:` with none, from what it last said. Runs under the check-in lock (a
/// rotation, like a check-in, must not overlap one). Returns the signals for the PM.
pub async fn tend_spokes(
    ctx: &crate::app::session::Ctx,
    task: &Task,
    now: DateTime<Utc>,
) -> Vec<crate::core::checkin::signals::Signal> {
    let Ok(p) = policy(task) else { return Vec::new() };
    let Ok(st) = task.state() else { return Vec::new() };
    let spokes = spokes_to_tend(&st);
    if spokes.is_empty() || (p.at_percent.is_none() && spokes.iter().all(|n| st.agents[n].checkpoint_asked.is_none())) {
        return Vec::new();
    }
    let Some(_lock) = task.try_lock_checkin().ok().flatten() else {
        return Vec::new();
    };
    let fills: std::collections::BTreeMap<String, u64> = crate::app::cost::context_fills(task, &st, now)
        .into_iter()
        .filter_map(|(agent, c)| Some((agent, c.percent?)))
        .collect();
    let grace = checkpoint_grace(task);
    let mut out = Vec::new();
    for agent in spokes {
        let Ok(st) = task.state() else { break };
        let Some(a) = st.agents.get(&agent) else { continue };
        let holds_lane = st.lanes.get(&agent).is_some_and(|l| l.holder.is_some());
        let checkpoint = a.checkpoint_asked.and_then(|t| checkpoint_since(task, &agent, t));
        let percent = fills.get(&agent).copied();
        let step = rotation::spoke_step(
            p.at_percent,
            percent,
            a.checkpoint_asked,
            holds_lane,
            checkpoint.as_ref().map(|(f, _)| f.as_str()),
            grace,
            now,
        );
        match step {
            rotation::SpokeStep::Nothing => {}
            rotation::SpokeStep::Forget => set_asked(task, &agent, None, now),
            rotation::SpokeStep::Ask { percent } => ask_checkpoint(ctx, task, &agent, percent, now).await,
            rotation::SpokeStep::FromCheckpoint { .. } | rotation::SpokeStep::FromTranscript => {
                out.extend(continue_fresh(ctx, task, &agent, a, checkpoint, percent, now).await);
            }
        }
    }
    out
}

/// The local spokes running a PM handoff (holding a lane) or already asked for a
/// checkpoint: the ones whose context is watched (pure).
fn spokes_to_tend(st: &crate::core::model::PmState) -> Vec<String> {
    st.agents
        .iter()
        .filter(|(n, a)| {
            n.as_str() != "pm"
                && a.host.remote().is_none()
                && a.status == crate::core::model::AgentStatus::Running
                && (a.checkpoint_asked.is_some() || st.lanes.get(n.as_str()).is_some_and(|l| l.holder.is_some()))
        })
        .map(|(n, _)| n.clone())
        .collect()
}

/// How long a spoke asked for a checkpoint has to write one (task.md's `checkpoint_grace:`).
fn checkpoint_grace(task: &Task) -> std::time::Duration {
    task.spec()
        .ok()
        .and_then(|s| {
            s.setting("checkpoint_grace")
                .and_then(crate::core::clock::parse_duration)
        })
        .unwrap_or(rotation::CHECKPOINT_GRACE)
}

/// Ask `agent`, whose context is `percent` full, for a checkpoint handoff, and remember it
/// was asked once the request was typed.
async fn ask_checkpoint(ctx: &crate::app::session::Ctx, task: &Task, agent: &str, percent: u64, now: DateTime<Utc>) {
    let text = rotation::checkpoint_message(task.name.as_str(), agent, "task", percent);
    let sent =
        crate::app::session::send_with(ctx, task, agent, &text, Some(std::time::Duration::from_secs(15)), true).await;
    let delivered = matches!(&sent, Ok(r) if r.outcome == crate::core::report::Outcome::Delivered);
    // Typed but not confirmed (a busy client keeps it queued) counts as asked
    // too: asking again would queue a second request behind the first.
    let typed = delivered || matches!(&sent, Ok(r) if r.enters > 0);
    if typed {
        set_asked(task, agent, Some(now), now);
    }
    let _ = crate::store::events::append(
        task,
        EventKind::CheckpointAsked,
        Some(agent),
        serde_json::json!({"percent": percent, "delivered": delivered}),
        now,
    );
    tracing::info!(task = %task.name, %agent, percent, delivered, "asked a spoke with a full context for a checkpoint");
}

/// Continue `agent` in a fresh session in its lane, from its `checkpoint` (file, body) or,
/// without one, from what it last said; the signal for the PM when it started.
async fn continue_fresh(
    ctx: &crate::app::session::Ctx,
    task: &Task,
    agent: &str,
    a: &crate::core::model::AgentState,
    checkpoint: Option<(String, String)>,
    percent: Option<u64>,
    now: DateTime<Utc>,
) -> Option<crate::core::checkin::signals::Signal> {
    let said = match &checkpoint {
        Some(_) => None,
        None => last_said(task, a),
    };
    let block = rotation::continue_block(
        checkpoint.as_ref().map(|(f, b)| (f.as_str(), b.as_str())),
        said.as_deref(),
    );
    let started = match crate::app::session::respawn_in_lane(ctx, task, agent, &block, now).await {
        Ok(started) => started,
        Err(e) => {
            tracing::warn!(task = %task.name, %agent, error = %e, "could not continue the spoke in a fresh session");
            set_asked(task, agent, None, now);
            return None;
        }
    };
    set_asked(task, agent, None, now);
    let file = checkpoint.map(|(f, _)| f);
    let _ = crate::store::events::append(
        task,
        EventKind::SpokeRotated,
        Some(agent),
        serde_json::json!({"percent": percent, "checkpoint": file, "session": started.session}),
        now,
    );
    tracing::info!(task = %task.name, %agent, checkpoint = ?file, "spoke continued in a fresh session");
    Some(rotated_signal(agent, file, percent))
}

/// What the PM is told of a spoke continued in a fresh session (pure).
fn rotated_signal(agent: &str, file: Option<String>, percent: Option<u64>) -> crate::core::checkin::signals::Signal {
    let at = percent.map(|p| format!(" at {p}%")).unwrap_or_default();
    let text = match &file {
        Some(f) => format!(
            "rotated: {agent}{at} goes on in a fresh session from its checkpoint {f}; nothing to do, wait for its handoff"
        ),
        None => format!(
            "rotated: {agent}{at} wrote no checkpoint in time and goes on in a fresh session from what it last said; wait for its handoff"
        ),
    };
    crate::core::checkin::signals::Signal {
        kind: crate::core::checkin::signals::SignalKind::Rotated,
        agent: agent.to_string(),
        file,
        text,
    }
}

fn set_asked(task: &Task, agent: &str, asked: Option<DateTime<Utc>>, now: DateTime<Utc>) {
    let r = task.update_state(now, |st| {
        if let Some(a) = st.agents.get_mut(agent) {
            a.checkpoint_asked = asked;
        }
        Ok(())
    });
    if let Err(e) = r {
        tracing::warn!(task = %task.name, agent, error = %e, "cannot record the checkpoint request");
    }
}

/// `agent`'s newest handoff, when it is IN_PROGRESS and was written after `since`: its
/// checkpoint (file name, body).
fn checkpoint_since(task: &Task, agent: &str, since: DateTime<Utc>) -> Option<(String, String)> {
    let (names, _) = crate::store::handoffs::list(&task.handoffs()).ok()?;
    let latest = crate::store::progress::latest_by_agent(&task.handoffs(), &names).ok()?;
    let l = latest.into_iter().find(|l| l.agent() == agent)?;
    if l.handoff.status != crate::core::handoff::Status::InProgress {
        return None;
    }
    let path = task.handoffs().join(&l.file);
    let written: DateTime<Utc> = std::fs::metadata(&path).ok()?.modified().ok()?.into();
    if written + chrono::Duration::seconds(1) < since {
        return None;
    }
    let body = std::fs::read_to_string(&path).ok()?;
    Some((l.file.clone(), rotation::tail(&body, rotation::PART_MAX)))
}

/// What a spoke last said, from its current conversation's transcript.
fn last_said(task: &Task, a: &crate::core::model::AgentState) -> Option<String> {
    let id = a.session_id.as_deref()?;
    let projects = crate::app::cost::claude_projects()?;
    let cwd = a
        .worktree
        .as_ref()
        .map(|w| w.path.join(&w.cwd))
        .or_else(|| crate::app::session::local_cwd(task).ok())?;
    let path = crate::app::cost::transcript_path(&projects, &cwd, id);
    let bytes = std::fs::read(path).ok()?;
    let from = bytes.len().saturating_sub(256 * 1024);
    let text = String::from_utf8_lossy(&bytes[from..]);
    Some(rotation::assistant_tail(&text, 3000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_rotation_is_tried_again_soon_then_less_often() {
        let secs = |n| retry_after_failure(n).as_secs();
        assert_eq!([1, 2, 3, 4, 5, 6, 40].map(secs), [5, 10, 20, 40, 60, 60, 60]);
    }
}
