//! What a check-in changes in pm_state.json: the agents' records after their handoffs,
//! and the ledger, lineage, phase and counters once a check-in is recorded (pure).

use chrono::{DateTime, Utc};

use crate::core::checkin::signals::{Evaluation, SignalKind};
use crate::core::handoff::{Candidate, Loaded, Status};
use crate::core::model::{AgentStatus, LineageEntry, PmState};

/// What a spoke's recorded status becomes after a handoff it wrote, or `None`
/// to keep it. A terminal handoff ends the agent's run — the same rule that
/// releases its lane — so a running (or never-seen) agent becomes `done`,
/// `blocked` or `needs_review`; a dead or stopped one keeps saying so, and an
/// IN_PROGRESS report changes nothing. The PM is not a spoke: its session lasts
/// the whole task (and the daemon restarts it only while it is `running`).
pub fn status_after(agent: &str, current: &AgentStatus, status: Status) -> Option<AgentStatus> {
    if agent == "pm" || !matches!(current, AgentStatus::Running | AgentStatus::Unknown) {
        return None;
    }
    match status {
        Status::Complete => Some(AgentStatus::Done),
        Status::Blocked => Some(AgentStatus::Blocked),
        Status::NeedsReview => Some(AgentStatus::NeedsReview),
        Status::InProgress => None,
    }
}

/// Bring the agents' records up to date with new handoffs (timeline order): last
/// status, handoff and activity, and a run ended by its terminal handoff. A
/// handoff older than the agent's current run (it was spawned again since)
/// does not end that run. Pure; used for the message and for what is saved, so
/// both say the same.
pub fn apply_handoffs(state: &mut PmState, new: &[Loaded], now: DateTime<Utc>) {
    for l in new {
        let a = state.agents.entry(l.agent().to_string()).or_default();
        a.last_status = Some(l.handoff.status);
        a.last_handoff = Some(l.file.clone());
        a.last_activity = Some(now);
        if a.role == crate::core::model::AgentRole::Unset {
            a.role = crate::core::model::AgentRole::of_agent(l.agent());
        }
        let this_run = a
            .started_at
            .and_then(|t| t.timestamp_nanos_opt())
            .is_none_or(|started| l.mtime_ns >= started);
        match status_after(l.agent(), &a.status, l.handoff.status) {
            Some(s) if this_run => a.status = s,
            _ => {}
        }
    }
}

pub(super) fn record(state: &mut PmState, cands: &[Candidate], ev: &Evaluation, now: DateTime<Utc>) {
    let at = now.to_rfc3339();
    for c in cands {
        let l = &c.loaded;
        // The ledger and the lineage are committed together, so a file the ledger never
        // recorded has no lineage record either: only a changed one is looked for, not
        // every handoff of the task's history at every check-in.
        let known = state.ledger.get(&l.file).is_some();
        std::sync::Arc::make_mut(&mut state.ledger).record_candidate(c, &at);
        if !known || !state.lineage.iter().any(|e| e.file == l.file) {
            std::sync::Arc::make_mut(&mut state.lineage).push(LineageEntry {
                file: l.file.clone(),
                from: l.agent().to_string(),
                target: l.handoff.target.clone(),
                recommended_next: l.handoff.recommended_next.clone(),
                status: l.handoff.status,
                time: now,
            });
        }
    }
    let new: Vec<Loaded> = cands.iter().map(|c| c.loaded.clone()).collect();
    apply_handoffs(state, &new, now);
    state.phase = ev.phase;
    state.review_rejections = ev.rejections.clone();
    state.last_checkin = Some(now);
    if let Some(pm) = state.agents.get_mut("pm") {
        pm.checkins += 1;
    }
    for key in ev
        .signals
        .iter()
        .filter_map(crate::core::checkin::signals::budget_reminder)
    {
        state.reminders.insert(key, now);
    }
    if ev.signals.iter().any(|s| s.kind == SignalKind::NoProgress) {
        state.reminders.insert("no_progress".into(), now);
    }
    for s in ev
        .signals
        .iter()
        .filter(|s| matches!(s.kind, SignalKind::NeedsHuman | SignalKind::Paused))
    {
        if let Some(at) = state.agents.get_mut(&s.agent).and_then(|a| a.attention.as_mut()) {
            at.announced = true;
        }
    }
    for s in ev
        .signals
        .iter()
        .filter(|s| matches!(s.kind, SignalKind::Merged | SignalKind::MergeConflict))
    {
        if let Some(w) = state.agents.get_mut(&s.agent).and_then(|a| a.worktree.as_mut()) {
            w.announced = true;
        }
    }
}
