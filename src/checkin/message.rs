//! The check-in message, rendered from the state and the evaluation (pure).

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::signals::Evaluation;
use crate::handoff::{self, Loaded, Status};
use crate::preamble;
use crate::task::{PmState, Task};

/// One agent in the message's `Agents:` line: a finished run says how it ended
/// (`explore done`); any other adds its last report (`dev running (last handoff IN_PROGRESS)`),
/// which may be from an earlier run.
fn agent_line(name: &str, status: &str, last: Option<Status>) -> String {
    let words = status.replace('_', " ");
    match last {
        Some(s) if !matches!(status, "done" | "blocked" | "needs_review") => {
            format!("{name} {words} (last handoff {s})")
        }
        _ => format!("{name} {words}"),
    }
}

/// Render the check-in message. `state` must already include the new handoffs
/// ([`super::apply_handoffs`]), so the agent list agrees with what the message reports.
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
        // The hub decides; the spokes only recommend (docs/protocol.md#the-handoff-table).
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
        .map(|(n, a)| {
            let mut s = agent_line(n, &a.status, a.last_status);
            if let Some(at) = &a.attention {
                let _ = write!(s, " [{}]", at.describe());
            }
            s
        })
        .collect();
    preamble::fill(
        preamble::CHECKIN_TEMPLATE,
        &[
            ("task", task.name.as_str()),
            ("time", &crate::clock::local_time(now)),
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
