//! Acting on attention episodes: look at every agent's pane, run the pure decision of
//! [`crate::core::attention`], record the episode, and do what it says (events, a human called
//! through the notify command, the resume message with verified delivery). Run by the
//! daemon's liveness tick and by every check-in, so cron mode is covered too.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::core::attention::*;
use crate::core::error::Result;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// Resume messages wait at most this long for the input to be ready (the tick must go on).
const RESUME_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long after the broker's decision a dialog still on screen is taken as closing.
const BROKER_SETTLE: Duration = Duration::from_secs(10);

/// How long a dialog seen for the first time is given to go away before it is called a
/// human's: Claude Code shows its permission dialog while the PermissionRequest hook runs,
/// and the broker's rules answer within milliseconds, before any request is on record.
const FIRST_SEEN_GRACE: Duration = Duration::from_secs(1);

/// What [`tend`] did, by agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tended {
    /// New episodes (needs_human or paused).
    pub began: Vec<String>,
    /// Of those, the ones paused by a usage limit.
    pub paused: Vec<String>,
    /// Escalated to a human now.
    pub escalated: Vec<String>,
    /// Sent the resume message (confirmed).
    pub resumed: Vec<String>,
    /// Episodes that ended.
    pub cleared: Vec<String>,
}

impl Tended {
    /// Whether the PM should hear of it at once (a check-in now rather than at the next
    /// one): a human was called, or a spoke was paused. A dialog within its grace is not
    /// news yet, and a paused PM cannot be told.
    pub fn worth_a_checkin(&self) -> bool {
        !self.escalated.is_empty() || self.paused.iter().any(|a| a != "pm")
    }
}

/// One agent's episode changed: (agent, before, after, what to do).
type Change = (String, Option<Attention>, Option<Attention>, Vec<Action>);

/// Look at every agent's pane, decide, record, and act: events, escalations, resumes.
/// Idempotent: run as often as wanted (the daemon's tick, every check-in).
pub async fn tend(ctx: &crate::app::session::Ctx, task: &Task, now: DateTime<Utc>) -> Result<Tended> {
    let st = task.state()?;
    if !st.agents.values().any(|a| a.pane.is_some()) {
        return Ok(Tended::default());
    }
    let live = look(ctx, task, &st, now).await?;
    let timing = Timing::from_spec(task.spec().ok().as_deref());
    // A dialog the broker is waiting on an answer for is its, not a human's yet: the hook
    // runs while Claude Code shows the dialog, and the PM answers first; once answered,
    // the dialog takes a moment to close.
    let brokered = crate::store::permits::brokered_agents(task, now, BROKER_SETTLE).unwrap_or_default();
    // What each agent's client said through its hooks, weighed against its screen.
    let reports = crate::store::turns::all(task);
    let mut corrected: Vec<(String, crate::core::turn::Report, crate::core::turn::Correction)> = Vec::new();

    let step = |a: &crate::core::model::AgentState, agent: &String, seen: &Seen, activity| {
        let look = crate::core::turn::Look {
            seen: seen.clone(),
            activity,
        };
        agent_step(a, look, reports.get(agent), brokered.contains(agent), &timing, now)
    };
    // Most looks change nothing (no dialog, no limit, no episode open): decided on the
    // state already read, they need neither the state lock nor a fresh read.
    let changes = live.iter().any(|l| {
        st.agents
            .get(&l.agent)
            .is_some_and(|a| step(a, &l.agent, &l.seen, l.activity).changes(a))
    });
    if !changes {
        return Ok(Tended::default());
    }
    // Decide and record under the state lock, on a fresh read.
    let todo: Vec<Change> = task.update_state(now, |fresh| {
        let mut todo: Vec<Change> = Vec::new();
        for l in &live {
            let Some(a) = fresh.agents.get_mut(&l.agent) else {
                continue;
            };
            let Step {
                correction,
                decision: d,
            } = step(a, &l.agent, &l.seen, l.activity);
            if let Some((r, c)) = correction {
                a.turn_set_aside = Some(r.at);
                corrected.push((l.agent.clone(), r, c));
            }
            // A due resume leaves the episode as it is (it changes once delivered), so
            // the actions count on their own.
            if d.next != a.attention || !d.actions.is_empty() {
                let prev = std::mem::replace(&mut a.attention, d.next.clone());
                todo.push((l.agent.clone(), prev, d.next, d.actions));
            }
        }
        // An ended episode's escalation is no longer open.
        for (agent, prev, _, actions) in &todo {
            if let (Some(p), true) = (prev, actions.contains(&Action::Cleared)) {
                fresh.close_attention_escalation(agent, p);
            }
        }
        Ok(todo)
    })?;

    report_corrections(task, corrected, now)?;

    act(ctx, task, todo, now).await
}

/// What one look at one agent decides: its client's report set aside (with why), and the
/// attention decision on what is left.
struct Step {
    correction: Option<(crate::core::turn::Report, crate::core::turn::Correction)>,
    decision: Decision,
}

impl Step {
    /// Whether recording it would change the agent or act: a report set aside, an episode
    /// begun, moved on or ended, or an action due.
    fn changes(&self, a: &crate::core::model::AgentState) -> bool {
        self.correction.is_some() || self.decision.next != a.attention || !self.decision.actions.is_empty()
    }
}

/// Weigh the agent's client report against its screen, then decide on its episode. Pure:
/// run once on the state already read (does anything change?) and again under the lock.
fn agent_step(
    a: &crate::core::model::AgentState,
    look: crate::core::turn::Look,
    report: Option<&crate::core::turn::Report>,
    brokered: bool,
    timing: &Timing,
    now: DateTime<Utc>,
) -> Step {
    let known = crate::core::turn::Known {
        since: a.started_at.max(a.last_resume),
        session: a.session_id.as_deref(),
        set_aside: a.turn_set_aside,
    };
    let weighed = crate::core::turn::weigh(report, &look, &known, now);
    let correction = match (weighed.correction, report) {
        (Some(c), Some(r)) => Some((r.clone(), c)),
        _ => None,
    };
    let seen = match weighed.seen {
        Seen::Dialog(_) if brokered => Seen::Unknown,
        s => s,
    };
    Step {
        correction,
        decision: decide(a.attention.as_ref(), &seen, a.last_resume, now, timing),
    }
}

/// Send the resume message; record it when confirmed. Returns whether it was delivered.
///
/// A confirmed resume ends the episode there and then (`attention_cleared`, resumed): the
/// agent has its turn back, which is what the next look would conclude anyway (the resume
/// line below the limit's, see [`observe`]), and a task may finish before that look comes
/// (a PM told "paused" about an agent that has long handed off). A limit that comes back
/// prints a new line below the resume and begins a new episode, nudged no sooner than
/// [`PAUSE_ESCALATE_AFTER`] after this one (`last_resume`).
async fn resume(
    ctx: &crate::app::session::Ctx,
    task: &Task,
    agent: &str,
    ep: &Attention,
    now: DateTime<Utc>,
) -> Result<bool> {
    let text = RESUME_TEMPLATE.trim();
    let report = match crate::app::session::send_with(ctx, task, agent, text, Some(RESUME_READY_TIMEOUT), true).await {
        Ok(r) => r,
        Err(e) => crate::core::report::Report {
            outcome: crate::core::report::Outcome::Failed,
            reason: e.to_string(),
            enters: 0,
            bytes: 0,
        },
    };
    let delivered = report.outcome == crate::core::report::Outcome::Delivered;
    let mut ended = false;
    if delivered {
        task.update_state(now, |fresh| {
            if let Some(a) = fresh.agents.get_mut(agent) {
                a.last_resume = Some(now);
                ended = a.attention.as_ref().is_some_and(|x| x.since == ep.since);
                if ended {
                    a.attention = None;
                }
            }
            if ended {
                fresh.close_attention_escalation(agent, ep);
            }
            Ok(())
        })?;
    }
    crate::store::events::append(
        task,
        if delivered {
            EventKind::Resumed
        } else {
            EventKind::ResumeFailed
        },
        Some(agent),
        serde_json::json!({"resets_at": ep.resets_at, "outcome": report.outcome, "reason": report.reason, "bytes": text.len()}),
        now,
    )?;
    if ended {
        crate::store::events::append(
            task,
            EventKind::AttentionCleared,
            Some(agent),
            serde_json::json!({"kind": ep.kind, "reason": ep.reason, "since": ep.since, "resumed": true}),
            now,
        )?;
    }
    if delivered {
        tracing::info!(task = %task.name, agent, "usage limit reset; agent resumed");
    } else {
        tracing::warn!(task = %task.name, agent, reason = %report.reason, "could not resume the agent; trying again next time");
    }
    Ok(delivered)
}

/// The agents' screens, with a dialog no episode knows yet looked at once more after a
/// moment and taken as a human's only if it is still there (or the broker took it up meanwhile).
async fn look(
    ctx: &crate::app::session::Ctx,
    task: &Task,
    st: &crate::core::model::PmState,
    now: DateTime<Utc>,
) -> Result<Vec<crate::app::session::Liveness>> {
    let mut live = crate::app::session::liveness(ctx, st, now).await?;
    tracing::debug!(task = %task.name, agents = live.len(), "looked at the agents' screens");
    // A dialog no episode knows yet: looked at once more after a moment, and taken as a
    // human's only if it is still there (or the broker took it up meanwhile).
    let new_dialog = |seen: &Seen, agent: &str| {
        matches!(seen, Seen::Dialog(_)) && st.agents.get(agent).is_some_and(|a| a.attention.is_none())
    };
    if live.iter().any(|l| new_dialog(&l.seen, &l.agent)) {
        tokio::time::sleep(FIRST_SEEN_GRACE).await;
        let again = crate::app::session::liveness(ctx, st, now).await?;
        for l in live.iter_mut().filter(|l| new_dialog(&l.seen, &l.agent)) {
            if let Some(now_seen) = again.iter().find(|a| a.agent == l.agent)
                && !matches!(now_seen.seen, Seen::Dialog(_))
            {
                tracing::debug!(task = %task.name, agent = %l.agent, "a dialog went away within its first second");
                *l = now_seen.clone();
            }
        }
    }
    Ok(live)
}

/// Each client report set aside against its screen: a contradiction is an event and a
/// warning, the rest a debug line.
fn report_corrections(
    task: &Task,
    corrected: Vec<(String, crate::core::turn::Report, crate::core::turn::Correction)>,
    now: DateTime<Utc>,
) -> Result<()> {
    for (agent, r, c) in corrected {
        if c.contradiction {
            tracing::warn!(task = %task.name, %agent, said = ?r.said, at = %r.at, why = %c.why, "the client's turn report is contradicted by its screen; set aside");
            crate::store::events::append(
                task,
                EventKind::TurnCorrected,
                Some(&agent),
                serde_json::json!({"said": r.said, "at": r.at, "why": c.why}),
                now,
            )?;
        } else {
            tracing::debug!(task = %task.name, %agent, why = %c.why, "turn report set aside");
        }
    }

    Ok(())
}

/// Carry out what the looks decided: events for episodes begun and ended, escalations
/// raised, due resumes delivered; progress.md refreshed when an escalated one closed.
async fn act(ctx: &crate::app::session::Ctx, task: &Task, todo: Vec<Change>, now: DateTime<Utc>) -> Result<Tended> {
    let mut out = Tended::default();
    let mut closed_any = false;
    for (agent, prev, next, actions) in todo {
        for act in actions {
            match (act, &prev, &next) {
                (Action::Cleared, Some(p), _) => {
                    closed_any |= p.escalated_at.is_some();
                    crate::store::events::append(
                        task,
                        EventKind::AttentionCleared,
                        Some(&agent),
                        serde_json::json!({"kind": p.kind, "reason": p.reason, "since": p.since, "resumed": p.resumed_at.is_some()}),
                        now,
                    )?;
                    tracing::info!(task = %task.name, %agent, kind = ?p.kind, "attention episode ended");
                    out.cleared.push(agent.clone());
                }
                (Action::Began, _, Some(n)) => {
                    let kind = match n.kind {
                        Kind::NeedsHuman => EventKind::NeedsHuman,
                        Kind::Paused => EventKind::Paused,
                    };
                    crate::store::events::append(
                        task,
                        kind,
                        Some(&agent),
                        serde_json::json!({"reason": n.reason, "line": n.line, "resets_at": n.resets_at, "reset_parsed": n.reset_parsed}),
                        now,
                    )?;
                    tracing::warn!(task = %task.name, %agent, %kind, line = %n.line, "agent cannot go on by itself");
                    out.began.push(agent.clone());
                    if n.kind == Kind::Paused {
                        out.paused.push(agent.clone());
                    }
                }
                (Action::Escalate, _, Some(n)) => {
                    crate::app::escalation::raise(task, &escalation_reason(task.name.as_str(), &agent, n), now)?;
                    out.escalated.push(agent.clone());
                }
                (Action::Resume, _, Some(n)) if resume(ctx, task, &agent, n, now).await? => {
                    closed_any |= n.escalated_at.is_some();
                    out.resumed.push(agent.clone());
                    out.cleared.push(agent.clone());
                }
                _ => {}
            }
        }
    }
    if closed_any {
        crate::app::escalation::refresh_progress(task, now)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::AgentState;
    use crate::core::turn::Look;

    fn look(seen: Seen) -> Look {
        Look { seen, activity: None }
    }

    #[test]
    fn a_clear_screen_with_no_episode_changes_nothing_and_a_dialog_does() {
        let now = chrono::Utc::now();
        let t = Timing::default();
        let a = AgentState::default();
        assert!(!agent_step(&a, look(Seen::Clear), None, false, &t, now).changes(&a));
        assert!(!agent_step(&a, look(Seen::Unknown), None, false, &t, now).changes(&a));
        assert!(agent_step(&a, look(Seen::Dialog("Allow?".into())), None, false, &t, now).changes(&a));
        // A dialog the broker is answering is not the human's yet.
        assert!(!agent_step(&a, look(Seen::Dialog("Allow?".into())), None, true, &t, now).changes(&a));
        // An open episode whose screen cleared ends: a change.
        let began = agent_step(&a, look(Seen::UsageLimit("limit reached".into())), None, false, &t, now);
        let open = AgentState {
            attention: began.decision.next.clone(),
            ..AgentState::default()
        };
        assert!(open.attention.is_some());
        assert!(agent_step(&open, look(Seen::Clear), None, false, &t, now).changes(&open));
    }
}
