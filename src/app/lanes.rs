//! The lanes' I/O edge: look at a lane holder's agent (its handoffs, its pane),
//! release lanes whose agent is done, dead or (when someone waits) stale, and
//! start the spawn queued behind a lane the moment it frees. The decisions are
//! [`crate::core::protocol::lane`]'s; this module reads tmux and the task folder and
//! writes pm_state.json under the state lock.
//!
//! `settle` runs on every supervisor tick and handoff (the daemon), after each
//! `task checkin` (cron mode), and before each spawn decides, so every release
//! path is taken by whoever looks first and no lane waits on a timer it does
//! not need.

use chrono::{DateTime, Utc};

use crate::app::context::Ctx;
use crate::core::error::Error;
use crate::core::error::Result;
use crate::core::handoff::{HandoffName, Loaded};
use crate::core::model::PmState;
use crate::core::protocol::lane::{self, Decision, Holder, Reason, ReleaseReason, Seen, Timing};
use crate::io::tmux::{Panes, find_pane};
use crate::store::events::Kind as EventKind;
use crate::store::handoffs;
use crate::store::handoffs::Ready;
use crate::store::task::Task;

/// A pane not recorded this long after its lane was acquired belongs to a spawn that died half-way.
const START_GRACE_SECS: i64 = 60;

/// The agent's newest handoff written after `since`, if terminal and `ready`; `names` is
/// the handoff listing (`None`: it could not be read).
pub(crate) fn terminal_since(
    task: &Task,
    names: Option<&[HandoffName]>,
    agent: &str,
    since: DateTime<Utc>,
    ready: Ready<'_>,
) -> Option<Loaded> {
    let names = names?;
    let since_ns = since.timestamp_nanos_opt().unwrap_or(0);
    names
        .iter()
        .rev()
        .filter(|n| n.agent == agent)
        .take(4)
        .filter_map(|n| handoffs::load(&task.handoffs(), n).ok()?.ok())
        .find(|l| l.mtime_ns >= since_ns && l.handoff.status.is_terminal() && ready.accepts(l))
}

/// What [`observe`] reads of the task folder and the tmux server, read once by whoever
/// looks at several lanes (a settle), not once per lane.
pub struct Surroundings {
    /// The handoff listing; `None` when it could not be read.
    pub listing: Option<std::sync::Arc<handoffs::Listing>>,
    /// This server's panes; `Err` (logged by the lane that needs it) when tmux failed.
    pub panes: std::result::Result<Panes, String>,
}

impl Surroundings {
    /// Read the handoff listing and list the panes, once (a listing shared with the
    /// daemon's other looks when it shows every lane holder's pane alive:
    /// [`crate::io::tmux::Tmux::list_panes_expecting`]).
    pub async fn read(ctx: &Ctx, task: &Task, st: &PmState) -> Surroundings {
        let alive: Vec<(&str, Option<&str>)> = st
            .lanes
            .iter()
            .filter_map(|(agent, l)| l.holder.as_ref()?.pane.as_deref().map(|p| (agent, p)))
            .map(|(agent, p)| {
                let a = st.agents.get(agent).filter(|a| a.pane.as_deref() == Some(p));
                (p, a.and_then(|a| a.tmux_server.as_deref()))
            })
            .collect();
        Surroundings {
            listing: handoffs::listing(&task.handoffs()).ok(),
            panes: ctx.tmux.list_panes_expecting(&alive).await.map_err(|e| e.to_string()),
        }
    }
}

/// What the holder's agent has done since it took the lane; `st` is the state the
/// caller just read (the agent's host, status and last activity come from it).
pub async fn observe(
    ctx: &Ctx,
    task: &Task,
    st: &PmState,
    agent: &str,
    h: &Holder,
    ready: Ready<'_>,
    now: DateTime<Utc>,
) -> (Seen, Option<Loaded>) {
    observe_in(&Surroundings::read(ctx, task, st).await, task, st, agent, h, ready, now)
}

/// [`observe`] in surroundings already read.
pub fn observe_in(
    around: &Surroundings,
    task: &Task,
    st: &PmState,
    agent: &str,
    h: &Holder,
    ready: Ready<'_>,
    now: DateTime<Utc>,
) -> (Seen, Option<Loaded>) {
    let a = st.agents.get(agent);
    let terminal = terminal_since(
        task,
        around.listing.as_ref().map(|l| l.names.as_slice()),
        agent,
        h.since,
        ready,
    );
    let mut seen = Seen {
        terminal_handoff: terminal.is_some(),
        pane_dead: false,
        last_sign: a.and_then(|a| a.last_activity),
    };
    let local = a.is_none_or(|a| a.host.is_local());
    match (&h.pane, local) {
        (Some(p), true) => match around.panes.as_ref().map(|panes| {
            find_pane(
                panes,
                p,
                a.filter(|a| a.pane.as_ref() == Some(p))
                    .and_then(|a| a.tmux_server.as_deref()),
            )
        }) {
            Ok(None) => seen.pane_dead = true,
            Ok(Some(info)) => {
                seen.pane_dead = info.dead;
                if let Some(t) = DateTime::from_timestamp(info.activity, 0).filter(|_| info.activity > 0) {
                    seen.last_sign = seen.last_sign.max(Some(t));
                }
            }
            Err(e) => tracing::debug!(agent, error = %e, "cannot look at the lane holder's pane"),
        },
        (None, _) => {
            seen.pane_dead = now.signed_duration_since(h.since).num_seconds() > START_GRACE_SECS;
        }
        // A remote agent's pane is on its host: its handoffs (pulled) and stale recovery free its lane.
        (Some(_), false) => seen.pane_dead = a.is_some_and(|a| a.status.is_gone()),
    }
    (seen, terminal)
}

/// Release `agent`'s lane if it is still held by the holder acquired at `since`;
/// records the event and cleans the agent's bundle. Returns whether it released.
pub fn release(
    task: &Task,
    agent: &str,
    since: Option<DateTime<Utc>>,
    reason: ReleaseReason,
    last: Option<&Loaded>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let released = task.update_state(now, |st| {
        let Some(l) = st.lanes.get_mut(agent) else {
            return Ok(false);
        };
        if l.holder.is_none() || (since.is_some() && l.holder.as_ref().map(|h| h.since) != since) {
            return Ok(false);
        }
        Ok(lane::release(l, reason, now))
    })?;
    if released {
        tracing::info!(task = %task.name, agent, reason = reason.as_str(), "lane released");
        crate::store::events::append(
            task,
            EventKind::LaneReleased,
            Some(agent),
            serde_json::json!({"reason": reason, "handoff": last.map(|l| l.file.clone())}),
            now,
        )?;
        if reason != ReleaseReason::SpawnFailed {
            // The agent's turn is over: its bundle goes to the reviewed queue (never fails).
            crate::store::bundle::cleanup(task, agent, last, now);
        }
    }
    Ok(released)
}

/// What one settle did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Lanes released, with why.
    pub released: Vec<(String, ReleaseReason)>,
    /// Queued spawns started.
    pub dequeued: Vec<String>,
    /// Queued spawns that could not start (the error, also in events.jsonl).
    pub failed: Vec<(String, String)>,
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

/// What taking a lane for a spawn gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The lane is this spawn's: start the agent. `reason` is SPAWN_OK,
    /// SPAWN_DEQUEUED or SPAWN_RECOVERED_STALE; `note` says what was reclaimed.
    Acquired {
        /// The reason code of the start.
        reason: Reason,
        /// For the caller to show.
        note: Option<String>,
    },
    /// Held in the lane's queue until it frees (SPAWN_QUEUED).
    Queued {
        /// What holds the lane.
        waiting_for: Option<String>,
    },
}

/// How long, said the way people say it.
fn spoken(d: std::time::Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s => format!("{} minutes", s / 60),
    }
}

/// Take `agent`'s lane for a spawn of `handoff`: first release what is due (the
/// holder is done or dead), then decide under the state lock. A refusal is an
/// [`Error::Refused`] whose message starts with its reason code; every outcome is
/// recorded in the lane (`last_reason`) and in events.jsonl.
pub async fn take(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    handoff: &str,
    flags: &lane::SpawnFlags,
    mode: SpawnMode,
    now: DateTime<Utc>,
) -> Result<Taken> {
    let timing = Timing::from_spec(task.spec().ok().as_deref());
    let (last_sign, died) = release_before_taking(ctx, task, agent, &timing, now).await?;
    let ask = Asked {
        task,
        agent,
        handoff,
        mode,
        now,
    };
    let (decision, waiting_for) = ask.decide(flags, last_sign, &timing)?;
    ask.outcome(decision, waiting_for, died, &timing)
}

/// Release `agent`'s lane when its holder is done or dead, and record a death the new run
/// would otherwise hide. The holder's newest sign of life (for the stale rule), and the
/// note for the spawn's caller when a death was recorded here.
async fn release_before_taking(
    ctx: &Ctx,
    task: &Task,
    agent: &str,
    timing: &Timing,
    now: DateTime<Utc>,
) -> Result<(Option<DateTime<Utc>>, Option<String>)> {
    let st = task.state()?;
    let Some(h) = st.lanes.get(agent).and_then(|l| l.holder.clone()) else {
        // Released as dead by a check-in's settle moments ago, and this spawn came before
        // the daemon's look: without this, the new run's record would hide the death.
        let died = match dead_run_unrecorded(&st, agent) {
            Some(pane) => died_before_replaced(task, agent, Some(pane), now)?,
            None => None,
        };
        return Ok((None, died));
    };
    let (seen, last) = observe(ctx, task, &st, agent, &h, Ready::All, now).await;
    let mut died = None;
    if let Some(r) = lane::release_due(&h, &seen, false, now, timing)
        && release(task, agent, Some(h.since), r, last.as_ref(), now)?
        && r == ReleaseReason::PaneDied
    {
        died = died_before_replaced(task, agent, h.pane.as_deref(), now)?;
    }
    Ok((seen.last_sign, died))
}

/// One spawn request for a lane, as [`take`] was asked it.
struct Asked<'a> {
    task: &'a Task,
    agent: &'a str,
    handoff: &'a str,
    mode: SpawnMode,
    now: DateTime<Utc>,
}

impl Asked<'_> {
    /// Decide the spawn under the state lock and apply it to the lane (queued, or acquired);
    /// the decision, and who holds the lane (for a refusal's message).
    fn decide(
        &self,
        flags: &lane::SpawnFlags,
        last_sign: Option<DateTime<Utc>>,
        timing: &Timing,
    ) -> Result<(Decision, Option<String>)> {
        let Asked {
            task,
            agent,
            handoff,
            mode,
            now,
        } = *self;
        task.update_state(now, |st| {
            let l = st.lanes.entry(agent.to_string()).or_default();
            let d = lane::decide(l, handoff, mode == SpawnMode::Queue, last_sign, now, timing);
            let waiting_for = l.holder.as_ref().map(|h| {
                format!(
                    "{agent} started {} with {}",
                    crate::core::clock::local_time(h.since),
                    h.handoff
                )
            });
            l.last_reason = Some(match (&d, mode) {
                (Decision::Reject(r), _) => *r,
                (Decision::Queue, _) => Reason::SpawnQueued,
                (Decision::Acquire { stale: true }, _) => Reason::SpawnRecoveredStale,
                (Decision::Acquire { .. }, SpawnMode::Dequeue) => Reason::SpawnDequeued,
                (Decision::Acquire { .. }, _) => Reason::SpawnOk,
            });
            match &d {
                Decision::Reject(_) => {}
                Decision::Queue => {
                    l.queued = Some(lane::Queued {
                        handoff: handoff.to_string(),
                        flags: flags.clone(),
                        at: now,
                    });
                }
                Decision::Acquire { stale } => {
                    if *stale {
                        lane::release(l, ReleaseReason::Stale, now);
                    }
                    lane::acquire(l, handoff, now);
                }
            }
            Ok((d, waiting_for))
        })
    }

    /// What the decision means for the caller, recorded in events.jsonl: a refusal (with
    /// its reason code and what to do), a queued spawn, or the lane taken (with a note when
    /// a stale or dead run was replaced).
    fn outcome(
        &self,
        decision: Decision,
        waiting_for: Option<String>,
        died: Option<String>,
        timing: &Timing,
    ) -> Result<Taken> {
        let Asked {
            task,
            agent,
            handoff,
            mode,
            now,
        } = *self;
        match decision {
            Decision::Reject(r) => {
                let why = match r {
                    Reason::SpawnRejectDuplicate => format!(
                        "the same spawn of {agent} with {handoff} was made moments ago (or is already queued); nothing was started"
                    ),
                    _ => format!(
                        "{agent}'s lane is busy ({}); wait for its handoff, queue this spawn with --queue, message it with `task send`, or end it with `task stop {}`",
                        waiting_for.as_deref().unwrap_or("held"),
                        task.name
                    ),
                };
                crate::store::events::append(
                    task,
                    EventKind::SpawnRefused,
                    Some(agent),
                    serde_json::json!({"reason": r, "handoff": handoff}),
                    now,
                )?;
                Err(Error::Refused(crate::core::protocol::reason::Refusal::new(r, &why)))
            }
            Decision::Queue => {
                crate::store::events::append(
                    task,
                    EventKind::SpawnQueued,
                    Some(agent),
                    serde_json::json!({"reason": Reason::SpawnQueued, "handoff": handoff}),
                    now,
                )?;
                Ok(Taken::Queued { waiting_for })
            }
            Decision::Acquire { stale: true } => {
                crate::store::events::append(
                    task,
                    EventKind::LaneReleased,
                    Some(agent),
                    serde_json::json!({"reason": ReleaseReason::Stale}),
                    now,
                )?;
                crate::store::bundle::cleanup(task, agent, None, now);
                Ok(Taken::Acquired {
                    reason: Reason::SpawnRecoveredStale,
                    note: Some(format!(
                        "{agent}'s previous run showed no sign of life for {}; its lane was reclaimed",
                        spoken(timing.stale)
                    )),
                })
            }
            Decision::Acquire { stale: false } => Ok(Taken::Acquired {
                reason: if mode == SpawnMode::Dequeue {
                    Reason::SpawnDequeued
                } else {
                    Reason::SpawnOk
                },
                note: died,
            }),
        }
    }
}

/// The pane of `agent`'s run whose free lane was last released because that pane died,
/// while its record still says running: a death no one has recorded yet.
fn dead_run_unrecorded<'a>(st: &'a PmState, agent: &str) -> Option<&'a str> {
    let released = st.lanes.get(agent)?.released.as_ref()?;
    let pane = released.pane.as_deref()?;
    let a = st.agents.get(agent)?;
    (released.reason == ReleaseReason::PaneDied
        && a.status == crate::core::model::AgentStatus::Running
        && a.pane.as_deref() == Some(pane))
    .then_some(pane)
}

/// `agent`, whose lane was just released because its pane died, is about to be replaced
/// by a new spawn: its death is recorded now (marked dead, `agent_died` in events.jsonl),
/// since the daemon's look for deaths finds only agents recorded as running, and the new
/// run replaces the record before that look. Nothing when the record is no longer the
/// dead run's (already marked, or replaced). The note for the spawn's caller, when recorded.
pub fn died_before_replaced(
    task: &Task,
    agent: &str,
    pane: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<String>> {
    let server = task.update_state(now, |st| {
        Ok(match st.agents.get_mut(agent) {
            Some(a) if a.status == crate::core::model::AgentStatus::Running && a.pane.as_deref() == pane => {
                a.status = crate::core::model::AgentStatus::Dead;
                Some(a.tmux_server.clone())
            }
            _ => None,
        })
    })?;
    let Some(server) = server else { return Ok(None) };
    let detail = "its pane was found dead when it was started again";
    crate::store::events::agent_died(task, agent, (pane, server.as_deref()), None, detail, now)?;
    Ok(Some(format!(
        "{agent}'s previous run had died before handing off (its pane was dead); the work it was given is not done"
    )))
}

/// A spawn that took the lane failed before its agent started: give the lane
/// back and forget the attempt, so a retry is not taken for a duplicate.
pub fn give_back(task: &Task, agent: &str, handoff: &str, now: DateTime<Utc>) -> Result<()> {
    task.update_state(now, |st| {
        if let Some(l) = st.lanes.get_mut(agent) {
            if l.holder
                .as_ref()
                .is_some_and(|h| h.since == now && h.handoff == handoff)
            {
                lane::release(l, ReleaseReason::SpawnFailed, now);
            }
        }
        Ok(())
    })
}

/// Record the started agent's pane in its lane (how pane death is noticed).
pub fn record_pane(task: &Task, agent: &str, pane: &str, now: DateTime<Utc>) -> Result<()> {
    task.update_state(now, |st| {
        if let Some(h) = st.lanes.get_mut(agent).and_then(|l| l.holder.as_mut()) {
            h.pane = Some(pane.to_string());
        }
        Ok(())
    })
}

/// `task stop`: free every lane and drop what was queued (the handoff files stay).
pub fn release_all(task: &Task, now: DateTime<Utc>) -> Result<Vec<String>> {
    let st = task.state()?;
    let mut freed = Vec::new();
    for (agent, l) in &st.lanes {
        if l.queued.is_some() {
            let dropped = task.update_state(now, |fresh| {
                Ok(fresh.lanes.get_mut(agent).and_then(|l| l.queued.take()))
            })?;
            if let Some(q) = dropped {
                crate::store::events::append(
                    task,
                    EventKind::SpawnQueueDropped,
                    Some(agent),
                    serde_json::json!({"handoff": q.handoff, "why": "task stop"}),
                    now,
                )?;
            }
        }
        if l.holder.is_some() && release(task, agent, None, ReleaseReason::Stopped, None, now)? {
            freed.push(agent.clone());
        }
    }
    Ok(freed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{AgentState, AgentStatus};

    /// dev on record as running in pane %3 of server srv.
    fn dev_running() -> AgentState {
        AgentState {
            status: AgentStatus::Running,
            pane: Some("%3".into()),
            tmux_server: Some("srv".into()),
            ..Default::default()
        }
    }

    /// A task in `d` whose state `f` set up.
    fn task_with(d: &std::path::Path, f: impl FnOnce(&mut PmState)) -> (Task, DateTime<Utc>) {
        let task = Task::new(d, "t1".parse().unwrap()).unwrap();
        let now = chrono::Utc::now();
        crate::store::task::create_or_repair(&task, now).unwrap();
        task.update_state(now, |st| {
            f(st);
            Ok(())
        })
        .unwrap();
        (task, now)
    }

    #[test]
    fn a_run_found_dead_when_started_again_is_marked_and_reported_once() {
        let d = tempfile::tempdir().unwrap();
        let (task, now) = task_with(d.path(), |st| {
            st.agents.insert("dev".into(), dev_running());
        });
        // Another pane's record is not this run's.
        assert_eq!(died_before_replaced(&task, "dev", Some("%4"), now).unwrap(), None);
        let note = died_before_replaced(&task, "dev", Some("%3"), now).unwrap().unwrap();
        assert!(note.contains("dev's previous run had died"), "{note}");
        assert_eq!(task.state().unwrap().agents["dev"].status, AgentStatus::Dead);
        let died = crate::store::events::read(&crate::store::events::path(&task)).unwrap();
        let died: Vec<_> = died.iter().filter(|e| e.kind == "agent_died").collect();
        assert_eq!(died.len(), 1, "{died:?}");
        assert_eq!(died[0].agent.as_deref(), Some("dev"));
        assert_eq!(died[0].data["pane"], "%3");
        assert_eq!(died[0].data["server"], "srv");
        assert!(died[0].data["detail"].as_str().unwrap().contains("found dead"));
        assert!(died[0].data.get("host").is_none(), "a local agent names no host");
        // Already marked: nothing more.
        assert_eq!(died_before_replaced(&task, "dev", Some("%3"), now).unwrap(), None);
    }

    /// A check-in's settle releases a dead run's lane and leaves its death to the daemon's
    /// next look; the PM's spawn moments later must not let the new run's record hide it.
    #[tokio::test]
    async fn a_spawn_in_a_lane_just_released_as_dead_records_the_death_before_replacing_it() {
        let d = tempfile::tempdir().unwrap();
        let (task, now) = task_with(d.path(), |st| {
            st.agents.insert("dev".into(), dev_running());
            let l = st.lanes.entry("dev".into()).or_default();
            lane::acquire(l, "pm-1.md", chrono::Utc::now());
            l.holder.as_mut().unwrap().pane = Some("%3".into());
            lane::release(l, ReleaseReason::PaneDied, chrono::Utc::now());
        });
        let ctx = Ctx {
            tmux: crate::io::tmux::Tmux::new(crate::io::tmux::Socket::Path(d.path().join("sock"))).unwrap(),
            prefix: "ao".into(),
            task_bin: "task".into(),
        };
        let flags = lane::SpawnFlags::default();
        let later = now + chrono::Duration::milliseconds(200);
        let taken = take(&ctx, &task, "dev", "pm-2.md", &flags, SpawnMode::Start, later)
            .await
            .unwrap();
        let Taken::Acquired { note, .. } = taken else {
            panic!("the free lane is taken")
        };
        assert!(note.unwrap().contains("dev's previous run had died"));
        assert_eq!(task.state().unwrap().agents["dev"].status, AgentStatus::Dead);
        let events = crate::store::events::read(&crate::store::events::path(&task)).unwrap();
        let died: Vec<_> = events.iter().filter(|e| e.kind == "agent_died").collect();
        assert_eq!(died.len(), 1, "{died:?}");
        assert_eq!(died[0].data["pane"], "%3");
    }

    #[test]
    fn only_a_free_lane_released_as_dead_with_its_run_still_on_record_names_a_death() {
        let now = chrono::Utc::now();
        let mut st = PmState::default();
        st.agents.insert("dev".into(), dev_running());
        let held = |reason| {
            let mut l = lane::Lane::default();
            lane::acquire(&mut l, "pm-1.md", now);
            l.holder.as_mut().unwrap().pane = Some("%3".into());
            lane::release(&mut l, reason, now);
            l
        };
        st.lanes.insert("dev".into(), held(ReleaseReason::PaneDied));
        assert_eq!(dead_run_unrecorded(&st, "dev"), Some("%3"));
        // Handed off, not dead.
        st.lanes.insert("dev".into(), held(ReleaseReason::TerminalHandoff));
        assert_eq!(dead_run_unrecorded(&st, "dev"), None);
        // Already recorded (the daemon's look came first), or another run on record.
        st.lanes.insert("dev".into(), held(ReleaseReason::PaneDied));
        st.agents.get_mut("dev").unwrap().status = AgentStatus::Dead;
        assert_eq!(dead_run_unrecorded(&st, "dev"), None);
        let a = st.agents.get_mut("dev").unwrap();
        a.status = AgentStatus::Running;
        a.pane = Some("%4".into());
        assert_eq!(dead_run_unrecorded(&st, "dev"), None);
    }
}
