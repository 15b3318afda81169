//! Check-ins: take the new handoffs from the ledger, compute the signals of
//! seed 004 §7.1 and the phase of §7.2, refresh progress.md, and deliver the
//! message to the PM with verified delivery.
//!
//! The state (ledger, last_checkin, phase, lineage) is saved only after the
//! PM's pane confirms the message was submitted, so an undelivered check-in
//! is retried next time rather than lost. Two check-ins of one task never
//! overlap: the later one finds the check-in lock held and stands down.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::delivery::{self, Outcome};
use crate::error::Result;
use crate::handoff::{self, Candidate, Loaded, Status};
use crate::preamble;
use crate::protocol::results::{self, Finding};
use crate::protocol::roster::Roster;
use crate::scribe;
use crate::task::{self, LineageEntry, Phase, PmState, Task};
use crate::tmux::Tmux;

/// Rejections of the same work after which a human is asked (seed 004 §7.1).
pub const ESCALATE_AFTER_REJECTIONS: u32 = 3;

/// The kinds of signal (seed 004 §7.1, plus seed 003's failed gates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    /// A gate in `## Gates Honored` failed, or `Cycle Result:` says FAIL (seed 003: treat as blocked).
    GateFailed,
    /// A required `## Gates Honored` is missing (seed 003: a warning).
    GovernanceWarning,
    /// A spoke reports `budget_exceeded` (seed 001 Worker limits).
    BudgetExceeded,
    /// A spoke reports `scope_escalation`.
    ScopeEscalation,
    /// A recommendation the roster's handoff table does not allow.
    Routing,
}

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
        }
    }
}

/// One signal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// Render the check-in message.
pub fn render_message(task: &Task, state: &PmState, new: &[Loaded], ev: &Evaluation, now: DateTime<Utc>) -> String {
    let mut new_block = String::new();
    if new.is_empty() {
        new_block.push_str("Nothing new since the last check-in.\n");
    } else {
        let _ = writeln!(new_block, "New handoffs ({}):", new.len());
        for l in new {
            let mut line = format!("- {}: {}", l.file, l.handoff.status);
            let s = l.handoff.summary();
            if !s.is_empty() {
                let _ = write!(line, " — {s}");
            }
            if let Some(n) = &l.handoff.recommended_next {
                let _ = write!(line, " (recommends {n})");
            }
            // Seed 003's `## Next Action` (e.g. `await_operator`), when the agent gave one.
            if let Some(a) = l
                .handoff
                .sections
                .next_action
                .as_deref()
                .filter(|a| !handoff::is_none_text(a))
            {
                let _ = write!(line, "; next action: {}", handoff::one_line(a, 80));
            }
            let _ = writeln!(new_block, "{line}");
        }
        // The hub decides; the spokes only recommend (seed 001).
        for l in new.iter().filter(|l| l.agent() != "pm") {
            if let Some(n) = &l.handoff.recommended_next {
                let _ = writeln!(new_block, "Recommended next: {n} (by {}, {})", l.agent(), l.file);
            }
        }
    }
    let mut sig_block = String::new();
    if ev.signals.is_empty() {
        sig_block.push_str("Signals: none.\n");
    } else {
        sig_block.push_str("Signals:\n");
        for s in &ev.signals {
            let _ = writeln!(sig_block, "- {}: {} — {}", s.kind.label(), s.agent, s.text);
        }
    }
    for r in &ev.refused_moves {
        let _ = writeln!(sig_block, "- note: {r}");
    }
    let agents: Vec<String> = state
        .agents
        .iter()
        .map(|(n, a)| match a.last_status {
            Some(s) => format!("{n} {} ({s})", a.status),
            None => format!("{n} {}", a.status),
        })
        .collect();
    preamble::fill(
        preamble::CHECKIN_TEMPLATE,
        &[
            ("task", task.name.as_str()),
            ("time", &scribe::local_time(now)),
            ("phase", ev.phase.as_str()),
            ("new_block", new_block.trim_end()),
            ("signals_block", sig_block.trim_end()),
            (
                "agents",
                &if agents.is_empty() {
                    "none".into()
                } else {
                    agents.join(", ")
                },
            ),
            ("progress_path", &task.progress_path().display().to_string()),
            ("handoffs_dir", &task.handoffs().display().to_string()),
        ],
    )
}

/// What caused a check-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// `task checkin` (cron or a human).
    Manual,
    /// A new terminal handoff (the daemon's watcher).
    Handoff,
    /// The task's schedule.
    Schedule,
    /// An agent's pane died.
    Death,
}

/// What a check-in did.
#[derive(Debug, Clone, Serialize)]
pub struct CheckinReport {
    /// What caused it.
    pub trigger: Trigger,
    /// A scheduled check-in with nothing new and no signal: recorded, not sent.
    pub skipped: bool,
    /// The task.
    pub task: String,
    /// New handoffs taken from the ledger.
    pub new_handoffs: Vec<String>,
    /// Signals computed.
    pub signals: Vec<Signal>,
    /// Phase after the check-in.
    pub phase: Phase,
    /// Delivery to the PM (`None` when another check-in was running).
    pub delivery: Option<delivery::Report>,
    /// Whether the state (ledger, last_checkin) was saved.
    pub recorded: bool,
}

/// Parse a duration like `30m`, `10m`, `90s`, `2h`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "s" | "sec" | "secs" => n,
        "m" | "min" | "mins" => n * 60,
        "h" | "hr" | "hours" => n * 3600,
        _ => return None,
    };
    (secs > 0).then(|| Duration::from_secs(secs))
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

fn record(state: &mut PmState, cands: &[Candidate], ev: &Evaluation, now: DateTime<Utc>) {
    let at = now.to_rfc3339();
    for c in cands {
        state.ledger.record_candidate(c, &at);
        let l = &c.loaded;
        if !state.lineage.iter().any(|e| e.file == l.file) {
            state.lineage.push(LineageEntry {
                file: l.file.clone(),
                from: l.agent().to_string(),
                target: l.handoff.target.clone(),
                recommended_next: l.handoff.recommended_next.clone(),
                status: l.handoff.status,
                time: now,
            });
        }
        let a = state.agents.entry(l.agent().to_string()).or_default();
        a.last_status = Some(l.handoff.status);
        a.last_handoff = Some(l.file.clone());
        a.last_activity = Some(now);
        if a.role.is_empty() {
            a.role = if l.agent() == "pm" {
                "hub".into()
            } else {
                "spoke".into()
            };
        }
        if a.host.is_empty() {
            a.host = "local".into();
        }
        if a.status.is_empty() {
            a.status = "unknown".into();
        }
    }
    state.phase = ev.phase;
    state.review_rejections = ev.rejections.clone();
    state.last_checkin = Some(now);
    if ev.signals.iter().any(|s| s.kind == SignalKind::NoProgress) {
        state.reminders.insert("no_progress".into(), now);
    }
}

/// Settle the task's lanes on this tmux server (see [`crate::lanes::settle`]).
pub async fn settle_lanes(task: &Task, tmux: &Tmux, ready: &(dyn Fn(&Loaded) -> bool + Sync), now: DateTime<Utc>) {
    match crate::session::Ctx::from_env() {
        Ok(c) => {
            let ctx = crate::session::Ctx {
                tmux: tmux.clone(),
                ..c
            };
            let s = crate::lanes::settle(&ctx, task, ready, now).await;
            if s != crate::lanes::Settled::default() {
                tracing::info!(task = %task.name, released = ?s.released, dequeued = ?s.dequeued, failed = ?s.failed, "lanes settled");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot settle lanes"),
    }
}

/// Run one check-in: scribe, signals, message, verified delivery, then record.
/// `extra` signals (agent deaths) are added to those computed from handoffs.
/// A scheduled check-in with nothing to say is recorded in events.jsonl but not
/// sent, unless task.md sets `quiet_checkins: false`.
pub async fn run(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
    trigger: Trigger,
    extra: Vec<Signal>,
) -> Result<CheckinReport> {
    run_with(task, tmux, now, trigger, extra, &|_| true).await
}

/// [`run`], taking only the new handoffs `ready` accepts; the rest stay new
/// for a later check-in. The daemon uses it to leave alone a file that is
/// still being written (no close or rename seen, modified moments ago).
pub async fn run_with(
    task: &Task,
    tmux: &Tmux,
    now: DateTime<Utc>,
    trigger: Trigger,
    extra: Vec<Signal>,
    ready: &(dyn Fn(&Loaded) -> bool + Sync),
) -> Result<CheckinReport> {
    let Some(_checkin_lock) = task.try_lock_checkin()? else {
        let st = task.state()?;
        return Ok(CheckinReport {
            trigger,
            skipped: false,
            task: task.name.to_string(),
            new_handoffs: Vec::new(),
            signals: Vec::new(),
            phase: st.phase,
            delivery: None,
            recorded: false,
        });
    };

    // Remote agents' handoffs and artifacts first (an unreachable host is skipped, not fatal).
    for problem in crate::session::pull_remotes(task).await {
        tracing::warn!(task = %task.name, problem = %problem, "remote pull before the check-in failed");
    }

    // Lanes: free those whose agent is done or dead, start what waited for them.
    settle_lanes(task, tmux, ready, now).await;

    // A: evaluate under the state lock.
    let (state, cands, ev, message, pm, quiet) = {
        let _l = task.lock_state()?;
        let state = task.state_for_update(now)?;
        let spec = task.spec().ok();
        let quiet = spec.as_ref().and_then(|s| s.setting("quiet_checkins")) != Some("false");
        let no_progress = spec
            .as_ref()
            .and_then(|s| s.setting("no_progress"))
            .and_then(parse_duration)
            .unwrap_or(Duration::from_secs(30 * 60));
        let (names, _) = handoff::list(&task.handoffs())?;
        let (mut cands, skipped) = state.ledger.scan(&task.handoffs(), &names)?;
        for s in &skipped {
            tracing::warn!(file = %s.file, reason = %s.reason, "handoff skipped");
        }
        cands.retain(|c| {
            let r = ready(&c.loaded);
            if !r {
                tracing::debug!(file = %c.loaded.file, "handoff still being written; left for later");
            }
            r
        });
        let new: Vec<Loaded> = cands.iter().map(|c| c.loaded.clone()).collect();
        let artifacts = task::list_artifacts(task)?;
        let newest_ns = artifacts
            .iter()
            .map(|a| a.mtime_ns)
            .chain(new.iter().map(|l| l.mtime_ns))
            .chain(
                state
                    .agents
                    .values()
                    .filter_map(|a| a.started_at)
                    .filter_map(|t| t.timestamp_nanos_opt()),
            )
            .chain(state.lineage.last().and_then(|e| e.time.timestamp_nanos_opt()))
            .max();
        let idle_for = newest_ns.and_then(|ns| {
            let now_ns = now.timestamp_nanos_opt()?;
            (now_ns > ns).then(|| Duration::from_nanos((now_ns - ns) as u64))
        });
        // A roster broken mid-task must not silence the check-ins: the default applies, and the PM is told.
        let (roster, roster_problem) = match Roster::for_task(task) {
            Ok(r) => (r, None),
            Err(e) => (Roster::builtin("default").expect("default roster"), Some(e.to_string())),
        };
        let mut ev = evaluate(&state, &roster, &new, idle_for, no_progress);
        if let Some(p) = roster_problem {
            tracing::warn!(task = %task.name, problem = %p, "roster unusable; the default applies");
            ev.refused_moves.push(format!(
                "the task's roster cannot be used ({p}); the default roster applies until it is fixed"
            ));
        }
        ev.signals.extend(extra);
        // The no-progress reminder is rate-limited: at most once per threshold.
        let reminded = state.reminders.get("no_progress").is_some_and(|t| {
            now.signed_duration_since(*t)
                .to_std()
                .map(|d| d < no_progress)
                .unwrap_or(true)
        });
        if reminded {
            ev.signals.retain(|s| s.kind != SignalKind::NoProgress);
        }
        let mut preview = state.clone();
        preview.phase = ev.phase;
        let mut escalations: Vec<String> = state.escalations.iter().map(|e| e.reason.clone()).collect();
        for r in to_escalate(&state, &new, &ev) {
            if !escalations.contains(&r) {
                escalations.push(r);
            }
        }
        scribe::write_progress(task, &preview, &names, &new, &escalations, now)?;
        let message = render_message(task, &preview, &new, &ev, now);
        let pm = state
            .agents
            .get("pm")
            .and_then(|a| a.pane.clone().map(|p| (p, a.runtime.clone())));
        (state, cands, ev, message, pm, quiet)
    };

    for reason in to_escalate(&state, &cands.iter().map(|c| c.loaded.clone()).collect::<Vec<_>>(), &ev) {
        crate::escalation::raise(task, &reason, now)?;
    }

    if trigger == Trigger::Schedule && quiet && cands.is_empty() && ev.signals.is_empty() {
        crate::events::append(
            task,
            "checkin_skipped",
            Some("pm"),
            serde_json::json!({"trigger": trigger, "why": "nothing new"}),
            now,
        )?;
        return Ok(CheckinReport {
            trigger,
            skipped: true,
            task: task.name.to_string(),
            new_handoffs: Vec::new(),
            signals: Vec::new(),
            phase: ev.phase,
            delivery: None,
            recorded: false,
        });
    }

    // B: deliver without holding the state lock (the PM may run `task spawn` at once).
    let delivery = match pm {
        None => delivery::Report {
            outcome: Outcome::Failed,
            reason: format!("the PM is not running; start it with `task start {}`", task.name),
            enters: 0,
            bytes: message.len(),
        },
        Some((pane, runtime)) => {
            let rt = crate::runtime::resolve(runtime.as_deref().unwrap_or("claude"))?;
            delivery::deliver(tmux, &pane, &message, &rt.patterns, &rt.delivery_options()).await?
        }
    };

    // C: record only a confirmed delivery, on a fresh read of the state.
    let recorded = delivery.outcome == Outcome::Delivered;
    if recorded {
        let _l = task.lock_state()?;
        let mut fresh = task.state_for_update(now)?;
        record(&mut fresh, &cands, &ev, now);
        task.save_state(&fresh)?;
    }
    let _ = state;
    crate::events::append(
        task,
        "checkin",
        Some("pm"),
        serde_json::json!({
            "trigger": trigger,
            "new_handoffs": cands.len(),
            "files": cands.iter().map(|c| c.loaded.file.as_str()).collect::<Vec<_>>(),
            "signals": ev.signals.iter().map(|s| s.kind).collect::<Vec<_>>(),
            "outcome": delivery.outcome,
            "enters": delivery.enters,
            "bytes": delivery.bytes,
            "recorded": recorded,
        }),
        now,
    )?;
    Ok(CheckinReport {
        trigger,
        skipped: false,
        task: task.name.to_string(),
        new_handoffs: cands.iter().map(|c| c.loaded.file.clone()).collect(),
        signals: ev.signals,
        phase: ev.phase,
        delivery: Some(delivery),
        recorded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(file: &str, text: &str) -> Loaded {
        Loaded::from_text(file, text)
    }

    fn kinds(ev: &Evaluation) -> Vec<SignalKind> {
        ev.signals.iter().map(|s| s.kind).collect()
    }

    #[test]
    fn appendix_b_sequence_moves_the_phase() {
        let mut st = PmState::default();
        let steps: Vec<(Loaded, Phase, Vec<SignalKind>)> = vec![
            (
                l(
                    "pm-20251127-090000.md",
                    "# Handoff: pm\n**Target:** explore\n**Status:** IN_PROGRESS\n",
                ),
                Phase::Exploring,
                vec![],
            ),
            (
                l(
                    "explore-20251127-093000.md",
                    "# Handoff: explore\n**Status:** COMPLETE\n## Completed Work\nFound 3 modules\n",
                ),
                Phase::Exploring,
                vec![SignalKind::Completed],
            ),
            (
                l(
                    "pm-20251127-103500.md",
                    "# Handoff: pm\n**Target:** dev\n**Status:** IN_PROGRESS\n",
                ),
                Phase::Developing,
                vec![],
            ),
            (
                l("dev-20251127-113000.md", "# Handoff: dev\n**Status:** NEEDS_REVIEW\n"),
                Phase::Developing,
                vec![SignalKind::ReviewRequested],
            ),
            (
                l(
                    "pm-20251127-113500.md",
                    "# Handoff: pm\n**Target:** review\n**Status:** IN_PROGRESS\n",
                ),
                Phase::Reviewing,
                vec![],
            ),
            (
                l(
                    "review-20251127-120000.md",
                    "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** REJECTED\n**Recommended Next:** dev\n",
                ),
                Phase::Iterate,
                vec![SignalKind::ReviewRejected],
            ),
            (
                l(
                    "pm-20251127-120500.md",
                    "# Handoff: pm\n**Target:** dev\n**Status:** IN_PROGRESS\n",
                ),
                Phase::Developing,
                vec![],
            ),
            (
                l(
                    "pm-20251127-123000.md",
                    "# Handoff: pm\n**Target:** review\n**Status:** IN_PROGRESS\n",
                ),
                Phase::Reviewing,
                vec![],
            ),
            (
                l(
                    "review-20251127-125000.md",
                    "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** APPROVED\n",
                ),
                Phase::Reviewing,
                vec![SignalKind::Completed],
            ),
            (
                l("pm-20251127-130000.md", "# Handoff: pm\n**Status:** COMPLETE\n"),
                Phase::Complete,
                vec![],
            ),
        ];
        for (h, phase, sigs) in steps {
            let ev = evaluate(
                &st,
                &Roster::builtin("default").unwrap(),
                std::slice::from_ref(&h),
                None,
                Duration::from_secs(1800),
            );
            assert_eq!(ev.phase, phase, "after {}", h.file);
            assert_eq!(kinds(&ev), sigs, "after {}", h.file);
            assert!(ev.refused_moves.is_empty(), "{:?}", ev.refused_moves);
            st.phase = ev.phase;
            st.review_rejections = ev.rejections;
        }
    }

    #[test]
    fn three_rejections_escalate() {
        let mut st = PmState {
            phase: Phase::Reviewing,
            ..Default::default()
        };
        let rej = l(
            "review-20251127-120000.md",
            "# Handoff: review\n**Status:** COMPLETE\n**Verdict:** REJECTED\n**Recommended Next:** dev\n",
        );
        for n in 1..=3 {
            let ev = evaluate(
                &st,
                &Roster::builtin("default").unwrap(),
                std::slice::from_ref(&rej),
                None,
                Duration::from_secs(1800),
            );
            assert_eq!(ev.rejections["dev"], n);
            assert_eq!(
                ev.signals.iter().any(|s| s.kind == SignalKind::RepeatedRejections),
                n >= 3
            );
            st.review_rejections = ev.rejections;
            st.phase = Phase::Reviewing;
        }
    }

    #[test]
    fn blocked_gate_and_no_progress() {
        let st = PmState::default();
        let b = l(
            "dev-20251127-113000.md",
            "# Handoff: dev\n**Status:** BLOCKED\n## Blockers\nNo board.\n## Gates Honored\n- build: FAIL\n",
        );
        let ev = evaluate(
            &st,
            &Roster::builtin("default").unwrap(),
            &[b],
            None,
            Duration::from_secs(1800),
        );
        assert_eq!(kinds(&ev), vec![SignalKind::GateFailed, SignalKind::Blocked]);
        assert_eq!(ev.signals[1].text, "No board.");
        let ev = evaluate(
            &st,
            &Roster::builtin("default").unwrap(),
            &[],
            Some(Duration::from_secs(31 * 60)),
            Duration::from_secs(1800),
        );
        assert_eq!(kinds(&ev), vec![SignalKind::NoProgress]);
        let ev = evaluate(
            &st,
            &Roster::builtin("default").unwrap(),
            &[],
            Some(Duration::from_secs(29 * 60)),
            Duration::from_secs(1800),
        );
        assert!(ev.signals.is_empty());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0m"), None);
        assert_eq!(parse_duration("m"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
    }
}
