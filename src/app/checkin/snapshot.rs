//! The first locked phase of a check-in: read once, under the state lock, everything it
//! needs — the state, the handoff listing, the new handoffs (parsed once), the artifacts,
//! task.md — and from that one snapshot evaluate, open the escalations, write progress.md
//! and render the message. Delivery happens after the lock is released (see `run_with`).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::record::apply_handoffs;
use crate::core::attention::Attention;
use crate::core::checkin::message::{Place, render_checkin};
use crate::core::checkin::signals::{
    Evaluation, Signal, SignalKind, attention_signals, budget_escalation, budget_signals, evaluate, settle_budgets,
    to_escalate,
};
use crate::core::cost::budget::{Level, Standing};
use crate::core::error::Result;
use crate::core::handoff::{self, Candidate, Loaded};
use crate::core::model::{PmState, TaskSpec};
use crate::core::protocol::roster::Roster;
use crate::core::scribe::Artifact;
use crate::store::handoffs;
use crate::store::handoffs::Ready;
use crate::store::task::{self, Task};

/// What one check-in reads, once.
pub(super) struct Snapshot {
    /// pm_state.json as read under the lock: the one copy the check-in makes of it, kept
    /// as read while the caller's state opens escalations, then made the preview that
    /// progress.md and the message show.
    pub state: PmState,
    /// task.md, when readable.
    pub spec: Option<std::sync::Arc<TaskSpec>>,
    /// The handoff listing (timeline order).
    pub listing: std::sync::Arc<handoffs::Listing>,
    /// Every handoff the ledger has not seen, parsed, ready or not.
    pub unseen: Vec<Loaded>,
    /// The new handoffs this check-in takes (those `ready` accepts).
    pub cands: Vec<Candidate>,
    /// The files under artifacts/.
    pub artifacts: Vec<Artifact>,
}

impl Snapshot {
    /// Read the task folder around `state` (read by the caller, under the state lock).
    pub fn read(task: &Task, state: &PmState, ready: Ready<'_>) -> Result<Snapshot> {
        let spec = task.spec().ok();
        let dir = task.handoffs();
        let listing = handoffs::listing(&dir)?;
        let found = handoffs::scan_listing(&state.ledger, &dir, &listing)?;
        for s in &found.skipped {
            tracing::warn!(file = %s.file, reason = %s.reason, "handoff skipped");
        }
        let unseen: Vec<Loaded> = found.cands.iter().map(|c| c.loaded.clone()).collect();
        let cands: Vec<Candidate> = found
            .cands
            .iter()
            .filter(|c| {
                let r = ready.accepts(&c.loaded);
                if !r {
                    tracing::debug!(file = %c.loaded.file, "handoff still being written; left for later");
                }
                r
            })
            .cloned()
            .collect();
        let artifacts = task::list_artifacts(task)?;
        Ok(Snapshot {
            state: state.clone(),
            spec,
            listing,
            unseen,
            cands,
            artifacts,
        })
    }

    /// The new handoffs, in timeline order.
    pub fn new_handoffs(&self) -> Vec<Loaded> {
        self.cands.iter().map(|c| c.loaded.clone()).collect()
    }

    /// A task.md setting.
    fn setting(&self, key: &str) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.setting(key))
    }

    /// Whether a scheduled check-in with nothing to say stays unsent (`quiet_checkins`).
    pub fn quiet(&self) -> bool {
        self.setting("quiet_checkins") != Some("false")
    }

    /// The no-progress threshold (`no_progress`, default 30 minutes).
    pub fn no_progress(&self) -> Duration {
        self.setting("no_progress")
            .and_then(crate::core::clock::parse_duration)
            .unwrap_or(Duration::from_secs(30 * 60))
    }

    /// Time since the last sign of progress: a handoff, an artifact, an agent's start, a
    /// recorded handoff.
    pub fn idle_for(&self, new: &[Loaded], now: DateTime<Utc>) -> Option<Duration> {
        let newest_ns = self
            .artifacts
            .iter()
            .map(|a| a.mtime_ns)
            .chain(new.iter().map(|l| l.mtime_ns))
            .chain(
                self.state
                    .agents
                    .values()
                    .filter_map(|a| a.started_at)
                    .filter_map(|t| t.timestamp_nanos_opt()),
            )
            .chain(self.state.lineage.last().and_then(|e| e.time.timestamp_nanos_opt()))
            .max();
        newest_ns.and_then(|ns| {
            let now_ns = now.timestamp_nanos_opt()?;
            (now_ns > ns).then(|| Duration::from_nanos((now_ns - ns) as u64))
        })
    }
}

/// What a check-in says about spending: its one line, and the budgets' standing.
#[derive(Debug, Clone, Default)]
pub(crate) struct CostNote {
    /// The message's line (empty: nothing to say).
    pub line: String,
    /// Each budget's standing.
    pub standings: Vec<Standing>,
    /// Whether usage was gathered at all (if not, nothing is concluded about budgets).
    pub gathered: bool,
    /// progress.md's `## Cost` section (None: usage not gathered; the one already in
    /// progress.md is kept).
    pub block: Option<String>,
}

/// The PM's pane, runtime and attention episode, as the state records them.
pub(super) type PmPane = (String, Option<String>, Option<Attention>);

/// What the first phase decided, for delivery and recording.
pub(super) struct Plan {
    /// The new handoffs taken.
    pub cands: Vec<Candidate>,
    /// The evaluation.
    pub ev: Evaluation,
    /// The message for the PM.
    pub message: String,
    /// Where the PM is (`None`: not running).
    pub pm: Option<PmPane>,
    /// See [`Snapshot::quiet`].
    pub quiet: bool,
    /// Escalations this check-in opened (already in the state; to announce).
    pub escalated: Vec<String>,
}

/// The first locked phase, on the state read under the lock: snapshot, evaluate, open
/// the escalations in `state` (saved by the caller), write progress.md once, render
/// the message. `extra` signals (agent deaths) join those computed from handoffs;
/// `cost` is the message's one line on spending (gathered before the lock: reading
/// transcripts must not hold the state).
pub(super) fn evaluate_locked(
    task: &Task,
    state: &mut PmState,
    ready: Ready<'_>,
    extra: Vec<Signal>,
    cost: &CostNote,
    now: DateTime<Utc>,
) -> Result<Plan> {
    let snap = Snapshot::read(task, state, ready)?;
    let new = snap.new_handoffs();
    let no_progress = snap.no_progress();
    // A roster broken mid-task must not silence the check-ins: the default applies, and the PM is told.
    let (roster, roster_problem) = match crate::store::roster::for_task(task) {
        Ok(r) => (r, None),
        Err(e) => (
            std::borrow::Cow::Borrowed(Roster::builtin_shared("default").expect("default roster")),
            Some(e.to_string()),
        ),
    };
    let mut ev = evaluate(&snap.state, &roster, &new, snap.idle_for(&new, now), no_progress);
    if let Some(p) = roster_problem {
        tracing::warn!(task = %task.name, problem = %p, "roster unusable; the default applies");
        ev.refused_moves.push(format!(
            "the task's roster cannot be used ({p}); the default roster applies until it is fixed"
        ));
    }
    ev.signals.extend(extra);
    // Budgets a human raised are settled first: their escalation closes, warnings re-arm.
    // Nothing has changed `state` yet: settled, it is the budgets' view.
    if cost.gathered {
        settle_budgets(state, &cost.standings);
    }
    ev.signals.extend(budget_signals(state, &cost.standings));
    let pm_patterns = snap
        .state
        .agents
        .get("pm")
        .and_then(|a| crate::io::runtime::resolve(a.runtime.as_deref().unwrap_or("claude")).ok());
    ev.signals.extend(attention_signals(
        task.name.as_str(),
        &snap.state,
        pm_patterns.as_ref().map(|r| &r.patterns),
    ));
    // The no-progress reminder is rate-limited: at most once per threshold.
    let reminded = snap.state.reminders.get("no_progress").is_some_and(|t| {
        now.signed_duration_since(*t)
            .to_std()
            .map(|d| d < no_progress)
            .unwrap_or(true)
    });
    if reminded {
        ev.signals.retain(|s| s.kind != SignalKind::NoProgress);
    }

    // Escalations are opened now, whether or not the message is delivered.
    let used_up = cost
        .standings
        .iter()
        .filter(|b| b.level == Level::Exceeded)
        .map(budget_escalation);
    let escalated: Vec<String> = to_escalate(&snap.state, &new, &ev)
        .into_iter()
        .chain(used_up)
        .filter(|r| crate::app::escalation::record(state, r, now))
        .collect();
    let open: Vec<String> = state.escalations.iter().map(|e| e.reason.clone()).collect();

    let pm = snap
        .state
        .agents
        .get("pm")
        .and_then(|a| a.pane.clone().map(|p| (p, a.runtime.clone(), a.attention.clone())));
    let quiet = snap.quiet();
    let mut preview = snap.state;
    preview.phase = ev.phase;
    apply_handoffs(&mut preview, &new, now);
    let latest = crate::store::progress::latest_by_agent_reusing(
        &task.handoffs(),
        &snap.listing.names,
        &snap.unseen,
        Some(snap.listing.agents.len()),
    )?;
    crate::store::progress::write_gathered(
        task,
        &preview,
        &latest,
        &snap.artifacts,
        &new,
        &open,
        cost.block.as_deref(),
        now,
    )?;
    // A handoff the ledger knows by name whose content changed is an amendment, not news.
    let amended = snap
        .cands
        .iter()
        .filter(|c| c.seen == handoff::Seen::Changed)
        .map(|c| c.loaded.file.clone())
        .collect();
    let (progress, handoffs) = (task.progress_path(), task.handoffs());
    let place = Place {
        name: task.name.as_str(),
        progress: &progress,
        handoffs: &handoffs,
        cost: &cost.line,
    };
    let message = render_checkin(&place, &preview, &new, &amended, &ev, now);
    Ok(Plan {
        quiet,
        cands: snap.cands,
        ev,
        message,
        pm,
        escalated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::Phase;

    #[test]
    fn one_snapshot_opens_the_escalation_and_writes_progress_once_with_it() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        let now: DateTime<Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
        task::create_or_repair(&task, now).unwrap();
        std::fs::write(
            task.handoffs().join("review-20261123-085900.md"),
            "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** REJECTED\n**Recommended Next:** dev\n",
        )
        .unwrap();
        // Still being written: not taken, but not lost either.
        std::fs::write(
            task.handoffs().join("dev-20261123-085930.md"),
            "# Handoff: dev\n**Status:** IN_PROGRESS\n",
        )
        .unwrap();
        // The daemon saw review's renamed in; dev's only now, so it is not quiet yet.
        let quiet = crate::store::handoffs::Quiet::default();
        let dir = task.handoffs();
        quiet.saw(&dir, "review-20261123-085900.md", crate::store::handoffs::How::Renamed);
        let ready = Ready::Final(&quiet, &dir);
        let mut st = PmState {
            phase: Phase::Reviewing,
            ..Default::default()
        };
        st.review_rejections.insert("dev".into(), 2);

        let plan = evaluate_locked(&task, &mut st, ready, Vec::new(), &CostNote::default(), now).unwrap();
        let files: Vec<&str> = plan.cands.iter().map(|c| c.loaded.file.as_str()).collect();
        assert_eq!(files, ["review-20261123-085900.md"]);
        assert_eq!(plan.ev.phase, Phase::Iterate);
        assert_eq!(plan.escalated.len(), 1, "{:?}", plan.escalated);
        assert!(plan.escalated[0].contains("rejected 3 times"), "{:?}", plan.escalated);
        // The escalation is in the state the caller saves; the check-in itself is not recorded yet.
        assert_eq!(st.escalations.len(), 1);
        assert_eq!(st.phase, Phase::Reviewing);
        assert!(st.lineage.is_empty() && st.last_checkin.is_none());
        // progress.md, written once, already shows the new phase and the open escalation.
        let progress = std::fs::read_to_string(task.progress_path()).unwrap();
        assert!(progress.contains("ITERATE"), "{progress}");
        assert!(progress.contains(&plan.escalated[0]), "{progress}");
        assert!(plan.message.contains("review-20261123-085900.md"), "{}", plan.message);
        assert!(!plan.message.contains("dev-20261123-085930.md"), "{}", plan.message);

        // The same evaluation again (the delivery failed): the escalation is already open.
        let plan = evaluate_locked(&task, &mut st, ready, Vec::new(), &CostNote::default(), now).unwrap();
        assert!(plan.escalated.is_empty(), "{:?}", plan.escalated);
        assert_eq!(st.escalations.len(), 1);
    }
}
