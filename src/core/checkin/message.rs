//! The check-in message, rendered from the state and the evaluation (pure).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use super::signals::Evaluation;
use crate::core::handoff::{self, Loaded, Status};
use crate::core::model::{AgentStatus, PmState};
use crate::core::preamble;
use std::path::Path;

/// One agent in the message's `Agents:` line: a finished run says how it ended
/// (`explore done`); any other adds its last report (`dev running (last handoff IN_PROGRESS)`),
/// which may be from an earlier run.
fn agent_line(name: &str, status: &AgentStatus, last: Option<Status>) -> String {
    let words = status.as_str().replace('_', " ");
    match last {
        Some(s) if !status.is_finished() => {
            format!("{name} {words} (last handoff {s})")
        }
        _ => format!("{name} {words}"),
    }
}

/// A check-in message longer than this is cut: a PM pane pasted 433 KB (8,753 lines) after
/// a rescan is unusable, and progress.md and `task log` hold everything anyway.
/// The cap is on the message as delivered, its `[checkin c-…]` tag line included
/// ([`super::intent::tagged`]); the rendered body leaves this much room for it.
pub const CHECKIN_CAP: usize = 4096;
const TAG_ROOM: usize = 64;
const BODY_CAP: usize = CHECKIN_CAP - TAG_ROOM;

/// The `Agents:` line is cut to this many characters (a big team must not eat the cap).
const AGENTS_CAP: usize = 600;

/// One handoff's lines in the message: its listing line and, for a spoke that
/// recommends a next agent, the `Recommended next:` line that follows the listings.
fn handoff_lines(l: &Loaded, amended: bool) -> (String, Option<String>) {
    let mut line = format!("- {}: {}", l.file, l.handoff.status);
    if amended {
        line = format!("- {}: AMENDED, now {}", l.file, l.handoff.status);
    }
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
    // The hub decides; the spokes only recommend (docs/protocol.md#the-handoff-table).
    let rec = (l.agent() != "pm")
        .then_some(())
        .and(l.handoff.recommended_next.as_ref())
        .map(|n| format!("Recommended next: {n} (by {}, {})", l.agent(), l.file));
    (line, rec)
}

/// The handoffs block from the first `keep` of `new` (those named in `amended` listed
/// apart, as amendments of handoffs already announced); `omitted` more are only counted.
fn new_block(new: &[Loaded], amended: &BTreeSet<String>, keep: usize) -> String {
    let mut out = String::new();
    if new.is_empty() {
        out.push_str("Nothing new since the last check-in.\n");
        return out;
    }
    let shown = &new[..keep.min(new.len())];
    let (fresh, changed): (Vec<&Loaded>, Vec<&Loaded>) = shown.iter().partition(|l| !amended.contains(&l.file));
    let n_changed = new.iter().filter(|l| amended.contains(&l.file)).count();
    let n_fresh = new.len() - n_changed;
    let mut recs = Vec::new();
    for (title, n, group, is_amended) in [
        ("New handoffs", n_fresh, &fresh, false),
        (
            "Amended handoffs (changed after they were announced)",
            n_changed,
            &changed,
            true,
        ),
    ] {
        if n == 0 {
            continue;
        }
        let _ = writeln!(out, "{title} ({n}):");
        for l in group.iter() {
            let (line, rec) = handoff_lines(l, is_amended);
            let _ = writeln!(out, "{line}");
            recs.extend(rec);
        }
    }
    for r in recs {
        let _ = writeln!(out, "{r}");
    }
    out
}

/// The signals block from the first `keep` signals.
fn signals_block(ev: &Evaluation, keep: usize) -> String {
    let mut out = String::new();
    if ev.signals.is_empty() {
        out.push_str("Signals: none.\n");
    } else {
        out.push_str("Signals:\n");
        for s in ev.signals.iter().take(keep) {
            let _ = writeln!(out, "- {}: {} — {}", s.kind.label(), s.agent, s.text);
        }
    }
    for r in &ev.refused_moves {
        let _ = writeln!(out, "- note: {r}");
    }
    out
}

/// The task a check-in message is about: its name and where the PM reads more.
pub struct Place<'a> {
    /// The task's name.
    pub name: &'a str,
    /// progress.md.
    pub progress: &'a Path,
    /// The handoffs folder.
    pub handoffs: &'a Path,
    /// One short line on what the team has cost (empty: none known yet).
    pub cost: &'a str,
}

/// Render the check-in message. `state` must already include the new handoffs
/// ([`super::apply_handoffs`]), so the agent list agrees with what the message reports.
#[cfg(test)]
pub fn render_message(
    task: &Place<'_>,
    state: &PmState,
    new: &[Loaded],
    ev: &Evaluation,
    now: DateTime<Utc>,
) -> String {
    render_checkin(task, state, new, &BTreeSet::new(), ev, now)
}

/// [`render_message`], with the handoffs in `amended` (file names) announced as amended
/// rather than new. Never longer than [`CHECKIN_CAP`] bytes: past it, the message lists
/// what fits (signals first, then handoffs in timeline order) and counts the rest.
pub fn render_checkin(
    task: &Place<'_>,
    state: &PmState,
    new: &[Loaded],
    amended: &BTreeSet<String>,
    ev: &Evaluation,
    now: DateTime<Utc>,
) -> String {
    let full = fill(
        task,
        state,
        ev,
        now,
        &new_block(new, amended, new.len()),
        &signals_block(ev, ev.signals.len()),
    );
    if full.len() <= BODY_CAP {
        return full;
    }
    let capped = |keep_h: usize, keep_s: usize| {
        let mut hb = new_block(new, amended, keep_h);
        let mut sb = signals_block(ev, keep_s);
        let (left_h, left_s) = (new.len() - keep_h, ev.signals.len() - keep_s);
        if left_h > 0 {
            let _ = writeln!(
                hb,
                "… and {left_h} more handoffs not listed (the message is capped at {} KB): read {} and `task log {}`.",
                CHECKIN_CAP / 1024,
                task.progress.display(),
                task.name
            );
        }
        if left_s > 0 {
            let _ = writeln!(
                sb,
                "… and {left_s} more signals not listed: see `task status {}`.",
                task.name
            );
        }
        fill(task, state, ev, now, &hb, &sb)
    };
    // Handoffs give way first (the signals are what needs acting on); the length grows
    // with what is kept, so the most that fits is found by bisection.
    let most = |n: usize, fits: &dyn Fn(usize) -> bool| {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid) { lo = mid } else { hi = mid - 1 }
        }
        lo
    };
    let n_s = ev.signals.len();
    let keep_h = most(new.len(), &|k| capped(k, n_s).len() <= BODY_CAP);
    let keep_s = if keep_h > 0 || capped(0, n_s).len() <= BODY_CAP {
        n_s
    } else {
        most(n_s, &|k| capped(0, k).len() <= BODY_CAP)
    };
    cut(capped(keep_h, keep_s))
}

/// The last resort for a message still over the cap (refusal notes, a huge task name):
/// cut at a character boundary and say so.
fn cut(mut msg: String) -> String {
    const TAIL: &str = "\n… (cut at the check-in size cap)";
    if msg.len() <= BODY_CAP {
        return msg;
    }
    let mut at = BODY_CAP - TAIL.len();
    while !msg.is_char_boundary(at) {
        at -= 1;
    }
    msg.truncate(at);
    msg.push_str(TAIL);
    msg
}

/// The template filled with the blocks.
fn fill(
    task: &Place<'_>,
    state: &PmState,
    ev: &Evaluation,
    now: DateTime<Utc>,
    new_block: &str,
    sig_block: &str,
) -> String {
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
            ("task", task.name),
            ("time", &crate::core::clock::local_time(now)),
            ("phase", ev.phase.as_str()),
            ("new_block", new_block.trim_end()),
            ("signals_block", sig_block.trim_end()),
            (
                "agents",
                &if agents.is_empty() {
                    "none".into()
                } else {
                    handoff::one_line(&agents.join(", "), AGENTS_CAP)
                },
            ),
            (
                "cost",
                &if task.cost.is_empty() {
                    String::new()
                } else {
                    format!("{}\n", handoff::one_line(task.cost, 200))
                },
            ),
            ("progress_path", &task.progress.display().to_string()),
            ("handoffs_dir", &task.handoffs.display().to_string()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::checkin::{Signal, SignalKind};
    use crate::core::model::Phase;

    fn ev(signals: usize) -> Evaluation {
        Evaluation {
            signals: (0..signals)
                .map(|i| Signal {
                    kind: SignalKind::Blocked,
                    agent: format!("a{i}"),
                    file: None,
                    text: "x".repeat(200),
                })
                .collect(),
            phase: Phase::Developing,
            refused_moves: Vec::new(),
            rejections: Default::default(),
        }
    }

    fn place() -> Place<'static> {
        Place {
            name: "t1",
            progress: Path::new("/p/.tasks/t1/progress.md"),
            handoffs: Path::new("/p/.tasks/t1/handoffs"),
            cost: "",
        }
    }

    fn handoffs(n: usize) -> Vec<Loaded> {
        (0..n)
            .map(|i| {
                Loaded::from_text(
                    &format!("dev-20251127-09{:02}{:02}.md", i / 60, i % 60),
                    &format!(
                        "# Handoff: dev\n**Status:** COMPLETE\n## Completed Work\nstep {i}: {}\n",
                        "y".repeat(120)
                    ),
                )
            })
            .collect()
    }

    #[test]
    fn a_big_checkin_is_capped_and_counts_what_it_leaves_out() {
        let task = place();
        let now: DateTime<Utc> = "2025-11-27T10:00:00Z".parse().unwrap();
        let new = handoffs(500);
        let msg = render_checkin(&task, &PmState::default(), &new, &BTreeSet::new(), &ev(3), now);
        assert!(msg.len() <= BODY_CAP, "{} bytes", msg.len());
        let delivered = crate::app::checkin::intent::tagged(&msg, &crate::app::checkin::intent::new_id());
        assert!(delivered.len() <= CHECKIN_CAP, "{} bytes with its tag", delivered.len());
        assert!(msg.contains("New handoffs (500):"), "{msg}");
        assert!(
            msg.contains("dev-20251127-090000.md"),
            "the first ones are listed: {msg}"
        );
        let listed = msg.lines().filter(|l| l.starts_with("- dev-")).count();
        assert!(listed > 5, "as many as fit: {listed}");
        assert!(msg.contains(&format!("… and {} more handoffs", 500 - listed)), "{msg}");
        assert!(msg.contains(&task.progress.display().to_string()), "{msg}");
        assert!(msg.contains("`task log t1`"), "{msg}");
        assert_eq!(msg.matches(": a").count(), 3, "every signal kept: {msg}");
        // Signals are kept before handoffs; too many are counted as well.
        let msg = render_checkin(&task, &PmState::default(), &new, &BTreeSet::new(), &ev(100), now);
        assert!(msg.len() <= BODY_CAP, "{} bytes", msg.len());
        assert!(msg.contains("… and 500 more handoffs"), "{msg}");
        assert!(msg.contains("more signals not listed"), "{msg}");
        // A small one is untouched.
        let small = render_checkin(&task, &PmState::default(), &new[..2], &BTreeSet::new(), &ev(1), now);
        assert_eq!(
            small,
            render_message(&task, &PmState::default(), &new[..2], &ev(1), now)
        );
        assert!(!small.contains("more handoffs"), "{small}");
    }

    #[test]
    fn a_changed_handoff_is_announced_as_amended_not_new() {
        let task = place();
        let now: DateTime<Utc> = "2025-11-27T10:00:00Z".parse().unwrap();
        let new = handoffs(2);
        let amended: BTreeSet<String> = [new[0].file.clone()].into();
        let msg = render_checkin(&task, &PmState::default(), &new, &amended, &ev(0), now);
        assert!(
            msg.contains("New handoffs (1):\n- dev-20251127-090001.md: COMPLETE"),
            "{msg}"
        );
        assert!(
            msg.contains("Amended handoffs (changed after they were announced) (1):\n- dev-20251127-090000.md: AMENDED, now COMPLETE"),
            "{msg}"
        );
    }
}
