//! The signals (docs/protocol.md#signals) and the phase (docs/protocol.md#phases), as pure functions of the state
//! and the new handoffs: what the check-in reports, what needs a human, and whether the
//! PM is told at all.

use std::time::Duration;

use serde::Serialize;

use crate::core::handoff::{self, Loaded, Status};
use crate::core::model::{Phase, PmState};
use crate::core::protocol::results::{self, Finding};
use crate::core::protocol::roster::Roster;

/// Rejections of the same work after which a human is asked (docs/protocol.md#signals).
pub const ESCALATE_AFTER_REJECTIONS: u32 = 3;

/// The kinds of signal (docs/protocol.md#signals, failed gates included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// An agent finished a subtask.
    Completed,
    /// An agent asks for review.
    ReviewRequested,
    /// An agent reports a blocker.
    Blocked,
    /// Nothing new for the no-progress threshold.
    NoProgress,
    /// A review rejected the work.
    ReviewRejected,
    /// The same work was rejected too often: escalate to a human.
    RepeatedRejections,
    /// A gate in `## Gates Honored` failed, or `Cycle Result:` says FAIL (docs/protocol.md#structured-results: treat as blocked).
    GateFailed,
    /// A required `## Gates Honored` is missing (docs/protocol.md#structured-results: a warning).
    GovernanceWarning,
    /// A spoke reports `budget_exceeded` (docs/protocol.md#structured-results).
    BudgetExceeded,
    /// A spoke reports `scope_escalation`.
    ScopeEscalation,
    /// A recommendation the roster's handoff table does not allow.
    Routing,
    /// An agent shows a dialog only a human can answer (escalated).
    NeedsHuman,
    /// An agent is paused by a usage limit until its reset.
    Paused,
    /// A budget is 80 % used (task.md `budget:`); told once per budget.
    BudgetWarning,
    /// A budget is used up: new spawns are refused; told once per budget.
    BudgetReached,
    /// An agent's worktree branch was merged into the task branch (told once).
    Merged,
    /// An agent's worktree branch conflicts with the task branch: the merge was aborted and
    /// the task branch is unchanged (told once; the PM sends the agent back or hands it on).
    MergeConflict,
    /// An agent asks for a permission no rule decides; the PM answers with `task permit`
    /// (told at every check-in until answered).
    PermissionRequest,
    /// A spoke whose context filled up goes on in a fresh session, in its lane, from its
    /// checkpoint (told once).
    Rotated,
    /// An agent whose host stopped answering was started again on another host (failover;
    /// told once), or could not be.
    Moved,
}

/// How a permission request's line in a check-in begins, before its id.
pub const PERMIT_MARK: &str = "request";

impl SignalKind {
    /// The label used in check-ins and progress.md.
    pub fn label(self) -> &'static str {
        match self {
            SignalKind::Completed => "completed",
            SignalKind::ReviewRequested => "review requested",
            SignalKind::Blocked => "blocked",
            SignalKind::NoProgress => "no progress",
            SignalKind::ReviewRejected => "review rejected",
            SignalKind::RepeatedRejections => "repeated rejections (needs a human)",
            SignalKind::GateFailed => "gate failed",
            SignalKind::GovernanceWarning => "governance warning",
            SignalKind::BudgetExceeded => "budget exceeded",
            SignalKind::ScopeEscalation => "scope escalation",
            SignalKind::Routing => "recommendation not in the roster",
            SignalKind::NeedsHuman => "needs a human",
            SignalKind::Paused => "paused",
            SignalKind::BudgetWarning => "budget warning",
            SignalKind::BudgetReached => "budget used up",
            SignalKind::Merged => "merged",
            SignalKind::MergeConflict => "merge conflict",
            SignalKind::PermissionRequest => "permission",
            SignalKind::Rotated => "rotated",
            SignalKind::Moved => "moved to another host",
        }
    }
}

/// One signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Signal {
    /// Its kind.
    pub kind: SignalKind,
    /// The agent it concerns.
    pub agent: String,
    /// The handoff behind it.
    pub file: Option<String>,
    /// What the PM should read.
    pub text: String,
}

/// The outcome of evaluating new handoffs against the state: pure data.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Signals, in handoff order.
    pub signals: Vec<Signal>,
    /// The phase after these handoffs.
    pub phase: Phase,
    /// Phase changes that the diagram does not allow (ignored, reported).
    pub refused_moves: Vec<String>,
    /// Rejection counters after these handoffs.
    pub rejections: std::collections::BTreeMap<String, u32>,
}

/// Evaluate new handoffs (timeline order). `idle_for` is the time since the
/// last sign of progress; `no_progress` the threshold for that signal.
pub fn evaluate(
    state: &PmState,
    roster: &Roster,
    new: &[Loaded],
    idle_for: Option<Duration>,
    no_progress: Duration,
) -> Evaluation {
    let mut signals = Vec::new();
    let mut phase = state.phase;
    let mut refused = Vec::new();
    let mut rejections = state.review_rejections.clone();
    let mut move_to = |to: Phase, phase: &mut Phase, why: &str| {
        if phase.can_move_to(to) {
            *phase = to;
        } else {
            refused.push(format!(
                "{} → {} ({why}) is not a move of the PM state machine",
                phase, to
            ));
        }
    };
    for l in new {
        let h = &l.handoff;
        let agent = l.agent().to_string();
        let sig = |kind, text: String| Signal {
            kind,
            agent: agent.clone(),
            file: Some(l.file.clone()),
            text,
        };
        if agent == "pm" {
            match h.status {
                Status::InProgress => {
                    if let Some(p) = h.target.as_deref().and_then(|t| roster.phase_for(t)) {
                        move_to(p, &mut phase, &l.file);
                    }
                }
                Status::Complete => move_to(Phase::Complete, &mut phase, &l.file),
                Status::Blocked => move_to(Phase::Blocked, &mut phase, &l.file),
                Status::NeedsReview => move_to(Phase::Reviewing, &mut phase, &l.file),
            }
            continue;
        }
        for f in results::assess(l, roster) {
            let kind = match f {
                Finding::GateFailed { .. } | Finding::ResultFailed { .. } => SignalKind::GateFailed,
                Finding::MissingGates => SignalKind::GovernanceWarning,
                Finding::BudgetExceeded => SignalKind::BudgetExceeded,
                Finding::ScopeEscalation => SignalKind::ScopeEscalation,
                Finding::Disallowed { .. } | Finding::UnknownAgent { .. } => SignalKind::Routing,
            };
            signals.push(sig(kind, f.text(&agent, roster)));
        }
        if h.is_rejection() {
            let work = h.recommended_next.clone().unwrap_or_else(|| "work".into());
            let n = rejections.entry(work.clone()).or_insert(0);
            *n += 1;
            signals.push(sig(
                SignalKind::ReviewRejected,
                format!(
                    "rejection #{n} of {work}'s work: {}; start {work} again with the feedback",
                    h.summary()
                ),
            ));
            if *n >= ESCALATE_AFTER_REJECTIONS {
                signals.push(sig(
                    SignalKind::RepeatedRejections,
                    format!("{work}'s work was rejected {n} times: escalate to a human or replan"),
                ));
            }
            move_to(Phase::Iterate, &mut phase, &l.file);
            continue;
        }
        match h.status {
            Status::Complete => {
                if agent == "review" {
                    if let Some(work) = h.recommended_next.as_deref().or(Some("work")) {
                        rejections.remove(work);
                    }
                }
                signals.push(sig(SignalKind::Completed, h.summary()))
            }
            Status::NeedsReview => signals.push(sig(SignalKind::ReviewRequested, h.summary())),
            Status::Blocked => {
                let why = h
                    .blockers()
                    .map(|b| handoff::one_line(b, 120))
                    .or_else(|| h.warnings.first().cloned())
                    .unwrap_or_else(|| "no reason given".into());
                signals.push(sig(SignalKind::Blocked, why));
            }
            Status::InProgress => {}
        }
    }
    if new.is_empty() {
        if let Some(idle) = idle_for.filter(|d| *d >= no_progress) {
            if !matches!(phase, Phase::Complete | Phase::Blocked) {
                signals.push(Signal {
                    kind: SignalKind::NoProgress,
                    agent: "task".into(),
                    file: None,
                    text: format!("no new handoff or artifact for {} minutes", idle.as_secs() / 60),
                });
            }
        }
    }
    Evaluation {
        signals,
        phase,
        refused_moves: refused,
        rejections,
    }
}

/// The reminder key that marks a budget signal as told (in `PmState::reminders`), or
/// `None` for other kinds.
pub fn budget_reminder(s: &Signal) -> Option<String> {
    match s.kind {
        SignalKind::BudgetWarning => Some(format!("budget_warning:{}", s.agent)),
        SignalKind::BudgetReached => Some(format!("budget_reached:{}", s.agent)),
        _ => None,
    }
}

/// Budget signals the PM has not been told: at 80 % a warning, at 100 % that the budget
/// is used up, each once per budget (a warning is not sent after the budget is used up).
pub fn budget_signals(state: &PmState, standings: &[crate::core::cost::budget::Standing]) -> Vec<Signal> {
    use crate::core::cost::budget::Level;
    standings
        .iter()
        .filter_map(|b| {
            let (kind, text) = match (b.level, b.percent) {
                (Level::Warning, Some(p)) => (
                    SignalKind::BudgetWarning,
                    format!("{p}% of the {} budget ({}) is used; plan to finish within it", b.scope, b.limit),
                ),
                (Level::Exceeded, Some(p)) => (
                    SignalKind::BudgetReached,
                    format!(
                        "{p}% of the {} budget ({}) is used: new spawns are refused (SPAWN_REJECT_BUDGET) and a human is asked; running agents were told to wrap up",
                        b.scope, b.limit
                    ),
                ),
                _ => return None,
            };
            let s = Signal {
                kind,
                agent: b.scope.clone(),
                file: None,
                text,
            };
            let told = |k: &str| state.reminders.contains_key(k);
            let key = budget_reminder(&s)?;
            let reached_told = told(&format!("budget_reached:{}", b.scope));
            // A warning after the budget is used up would only repeat the worse news.
            let stale_warning = kind == SignalKind::BudgetWarning && reached_told;
            (!told(&key) && !stale_warning).then_some(s)
        })
        .collect()
}

/// How every budget escalation starts, so one that no longer holds can be closed.
pub const BUDGET_ESCALATION: &str = "budget used up: ";

/// The escalation text for a used-up budget: stable for one budget, so it is raised once.
pub fn budget_escalation(b: &crate::core::cost::budget::Standing) -> String {
    format!(
        "{BUDGET_ESCALATION}the {} budget ({}); new spawns are refused: raise it in task.md or spawn with `task spawn --over-budget`",
        b.scope, b.limit
    )
}

/// Forget what was told about budgets that no longer hold (a human raised one): their
/// escalations close, and their warnings are told again when the new limit nears. Pure.
pub fn settle_budgets(state: &mut PmState, standings: &[crate::core::cost::budget::Standing]) {
    use crate::core::cost::budget::Level;
    let open: Vec<String> = standings
        .iter()
        .filter(|b| b.level == Level::Exceeded)
        .map(budget_escalation)
        .collect();
    state
        .escalations
        .retain(|e| !e.reason.starts_with(BUDGET_ESCALATION) || open.contains(&e.reason));
    for b in standings.iter().filter(|b| b.level != Level::Unknown) {
        if b.level != Level::Exceeded {
            state.reminders.remove(&format!("budget_reached:{}", b.scope));
        }
        if b.level == Level::Ok {
            state.reminders.remove(&format!("budget_warning:{}", b.scope));
        }
    }
}

/// What needs a human after these handoffs: repeated rejections, and a task
/// the PM declared BLOCKED (there is no next step without one).
pub fn to_escalate(state: &PmState, new: &[Loaded], ev: &Evaluation) -> Vec<String> {
    let mut out: Vec<String> = ev
        .signals
        .iter()
        .filter(|s| s.kind == SignalKind::RepeatedRejections)
        .map(|s| s.text.clone())
        .collect();
    if ev.phase == Phase::Blocked && state.phase != Phase::Blocked {
        let why = new
            .iter()
            .rev()
            .find(|l| l.agent() == "pm" && l.handoff.status == Status::Blocked)
            .and_then(|l| l.handoff.blockers().map(|b| handoff::one_line(b, 120)))
            .unwrap_or_else(|| "no reason given".into());
        out.push(format!("the PM declared the task BLOCKED: {why}"));
    }
    out
}

/// Why this check-in's message goes to no one, or `None` to deliver it. Once the
/// PM has declared the task COMPLETE or BLOCKED there is no next step for it to
/// decide: a message would only spend one of its turns. It is told again when an
/// agent's handoff is among the new ones, whenever it was written: a new handoff is one
/// the PM was never told of, so one written just before its declaration (a review it
/// declared COMPLETE without, say a rejection) is as much news as a late one.
pub fn undeliverable(new: &[Loaded], phase: Phase) -> Option<String> {
    if !matches!(phase, Phase::Complete | Phase::Blocked) {
        return None;
    }
    if new.iter().any(|l| l.agent() != "pm") {
        return None;
    }
    let pm_final = new
        .iter()
        .rposition(|l| l.agent() == "pm" && matches!(l.handoff.status, Status::Complete | Status::Blocked));
    Some(match pm_final {
        Some(i) => format!(
            "the PM declared the task {phase} ({}); nothing for it to decide",
            new[i].file
        ),
        None => format!("the task is {phase} and no agent has reported since; nothing for the PM to decide"),
    })
}

/// Signals for episodes the PM has not been told of: a dialog once a human was called,
/// a pause at once. Told once per episode (see `announced`), so a long pause does not make
/// every scheduled check-in worth sending.
pub fn attention_signals(task: &str, state: &PmState, pm: Option<&crate::core::screen::Patterns>) -> Vec<Signal> {
    use crate::core::attention::Kind;
    state
        .agents
        .iter()
        .filter_map(|(name, a)| {
            let at = a.attention.as_ref().filter(|at| !at.announced)?;
            let kind = match at.kind {
                Kind::NeedsHuman if at.escalated_at.is_some() => SignalKind::NeedsHuman,
                Kind::Paused if name != "pm" => SignalKind::Paused,
                _ => return None,
            };
            Some(Signal {
                kind,
                agent: name.clone(),
                file: None,
                text: crate::core::attention::mention(task, name, at, pm),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cost::budget::{Limit, Spent, standing};

    #[test]
    fn budget_signals_are_told_once_each_and_a_warning_never_follows_the_used_up_news() {
        let mut st = PmState::default();
        let warn = [standing("task", Limit::Tokens(100), Spent { tokens: 85, usd: None })];
        let s = budget_signals(&st, &warn);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kind, SignalKind::BudgetWarning);
        assert!(
            s[0].text.starts_with("85% of the task budget (100 tokens)"),
            "{}",
            s[0].text
        );
        // Recorded with the check-in: not told again.
        st.reminders.insert(budget_reminder(&s[0]).unwrap(), chrono::Utc::now());
        assert!(budget_signals(&st, &warn).is_empty());
        let over = [
            standing("task", Limit::Tokens(100), Spent { tokens: 120, usd: None }),
            standing("dev", Limit::Tokens(1000), Spent { tokens: 10, usd: None }),
        ];
        let s = budget_signals(&st, &over);
        assert_eq!(
            s.iter().map(|s| s.kind).collect::<Vec<_>>(),
            [SignalKind::BudgetReached]
        );
        assert!(s[0].text.contains("SPAWN_REJECT_BUDGET"), "{}", s[0].text);
        st.reminders.insert(budget_reminder(&s[0]).unwrap(), chrono::Utc::now());
        assert!(budget_signals(&st, &over).is_empty());
        // The escalation text is the same each time, so a human is called once per budget.
        assert_eq!(budget_escalation(&over[0]), budget_escalation(&over[0].clone()));
        // A human raises the budget: the escalation closes and the warnings can come again.
        st.escalations.push(crate::core::model::Escalation {
            time: chrono::Utc::now(),
            reason: budget_escalation(&over[0]),
        });
        let raised = [standing("task", Limit::Tokens(1000), Spent { tokens: 120, usd: None })];
        settle_budgets(&mut st, &raised);
        assert!(
            st.escalations.is_empty() && st.reminders.is_empty(),
            "{:?}",
            st.reminders
        );
        assert!(budget_signals(&st, &raised).is_empty(), "12% is nothing to say");
        // A dollar budget with unpriced spending is not judged, so nothing is said.
        let unknown = [standing("task", Limit::Usd(1.0), Spent { tokens: 10, usd: None })];
        assert!(budget_signals(&PmState::default(), &unknown).is_empty());
    }
}
