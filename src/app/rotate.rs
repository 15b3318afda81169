//! PM rotation ([`crate::core::rotation`]): when it is due, whether the moment is quiet,
//! the resume block gathered from the task folder, and the rotation itself. The daemon
//! looks at every liveness tick and rotates between its own check-ins; `task rotate` asks
//! for one by hand. A rotation holds the check-in lock, so no check-in is being delivered
//! to the PM while its conversation is replaced: one that comes due stands down and is
//! delivered, once, to the new PM.

use crate::core::error::{Error, Result};
use crate::core::rotation::{self, Parts, Policy, Rotated, Why};
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
        Some(_) => crate::app::cost::gather(task, &st, now)
            .map_err(|e| tracing::debug!(task = %task.name, error = %e, "the PM's context fill cannot be read"))
            .ok()
            .and_then(|v| v.agents.into_iter().find(|a| a.agent == "pm"))
            .and_then(|a| a.context)
            .and_then(|c| Some((c.percent?, c.tokens))),
        None => None,
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
    let (names, _) = crate::store::handoffs::list(&task.handoffs())?;
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
    let old_session = pm.session_id.clone();
    let block = rotation::resume_block(&parts(task, &why, now)?);
    let (started, preamble_bytes) = crate::app::session::rotate_pm(ctx, task, &block, now).await?;
    let new_session = task.state()?.agents.get("pm").and_then(|a| a.session_id.clone());
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
        "pm_rotated",
        Some("pm"),
        serde_json::to_value(&r).expect("a rotation serialises"),
        now,
    )?;
    tracing::info!(task = %task.name, why = %r.why.describe(), bytes = preamble_bytes, "PM rotated into a fresh conversation");
    Ok(Some(r))
}

/// How often the daemon reads the PM's fill again when no check-in happened since.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// After a failed rotation, the next try waits this long (the PM, if it died in it, is
/// restarted into its old conversation by the death path meanwhile).
const RETRY_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(60);

/// The daemon's rotation watch over one task, ticked with its liveness look: the fill is
/// read again after each check-in (the PM grows when it answers) or every 30 s, and a due
/// rotation waits for a quiet moment.
#[derive(Debug, Default)]
pub struct Watch {
    wanted: Option<Why>,
    looked: Option<(Option<DateTime<Utc>>, std::time::Instant)>,
    failed: Option<std::time::Instant>,
}

impl Watch {
    /// Look, and rotate when due and `quiet` (no check-in due or pending in the actor) and
    /// the PM idle. Returns the rotation when one was made.
    pub async fn tick(
        &mut self,
        ctx: &crate::app::session::Ctx,
        task: &Task,
        quiet: impl FnOnce() -> bool,
    ) -> Option<Rotated> {
        if self.failed.is_some_and(|t| t.elapsed() < RETRY_AFTER_FAILURE) {
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
        match rotate(ctx, task, why, crate::core::clock::now()).await {
            Ok(Some(r)) => {
                self.wanted = None;
                self.looked = None;
                Some(r)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(task = %task.name, error = %e, "PM rotation failed; trying again in a minute");
                self.failed = Some(std::time::Instant::now());
                self.wanted = None;
                None
            }
        }
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
