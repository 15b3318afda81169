//! The built-in scribe: progress.md from handoffs and artifacts (docs/protocol.md#progress-and-lineage).
//!
//! Rendering is a pure function of its input, so the same files and clock
//! give a byte-identical progress.md; gathering the input is the only I/O.

use std::fmt::Write as _;

use chrono::{DateTime, Local, TimeZone, Utc};

use crate::core::clock::local_time;
use crate::core::handoff::{self, Loaded, Status};
use crate::core::model::state::{LineageEntry, Phase, PmState};

/// Everything progress.md is made from.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// Task name.
    pub task: &'a str,
    /// "Last Updated".
    pub now: DateTime<Utc>,
    /// "Last Check-in": the check-in before this update.
    pub last_checkin: Option<DateTime<Utc>>,
    /// Current phase.
    pub phase: Phase,
    /// Handoffs new since the last check-in, timeline order.
    pub recent: &'a [Loaded],
    /// The latest handoff of each agent, timeline order.
    pub latest: &'a [Loaded],
    /// All artifacts, by path.
    pub artifacts: &'a [Artifact],
    /// Escalations waiting for a human (one line each).
    pub escalations: &'a [String],
    /// The `## Cost` section, when usage has been read (rendered by `core::cost::view`).
    pub cost: Option<&'a str>,
}

/// The handoff chain in the style of docs/protocol.md#progress-and-lineage, one line per handoff:
/// `09:30 - explore-20251127-093000.md  explore → pm: COMPLETE (next: plan)`. Pure.
pub fn render_lineage(entries: &[LineageEntry]) -> String {
    let width = entries.iter().map(|e| e.file.len()).max().unwrap_or(0);
    let mut out = String::new();
    for e in entries {
        let to = e.target.as_deref().unwrap_or(if e.from == "pm" { "?" } else { "pm" });
        let next = e
            .recommended_next
            .as_deref()
            .map(|n| format!(" (next: {n})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{} - {:width$}  {} → {}: {}{}\n",
            e.time.with_timezone(&Local).format("%H:%M"),
            e.file,
            e.from,
            to,
            e.status,
            next,
        ));
    }
    out
}

/// One file under `artifacts/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Path relative to the task folder, e.g. `artifacts/code/x.py`.
    pub path: String,
    /// mtime in ns.
    pub mtime_ns: i64,
}

/// Format an mtime (ns) in local time, minute precision.
pub fn local_mtime(ns: i64) -> String {
    Utc.timestamp_nanos(ns)
        .with_timezone(&Local)
        .format("%Y-%m-%d %H:%M")
        .to_string()
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Render progress.md.
pub fn render(i: &Input<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Task Progress: {}", i.task);
    let _ = writeln!(s, "**Last Updated:** {}", local_time(i.now));
    let _ = writeln!(
        s,
        "**Last Check-in:** {}",
        i.last_checkin.map(local_time).unwrap_or_else(|| "never".into())
    );
    let _ = writeln!(s, "**Phase:** {}", i.phase);
    s.push('\n');

    if !i.escalations.is_empty() {
        s.push_str("## Needs a Human\n");
        for e in i.escalations {
            let _ = writeln!(s, "- {e}");
        }
        s.push('\n');
    }

    s.push_str("## Recent Activity (since last check-in)\n");
    let since_ns = i.last_checkin.and_then(|t| t.timestamp_nanos_opt());
    let new_artifacts: Vec<&Artifact> = i
        .artifacts
        .iter()
        .filter(|a| since_ns.is_none_or(|t| a.mtime_ns > t))
        .collect();
    if i.recent.is_empty() && new_artifacts.is_empty() {
        s.push_str("- Nothing new.\n");
    }
    for h in i.recent {
        let mut line = format!("- {}: {}", h.file, h.handoff.status);
        let summary = h.handoff.summary();
        if !summary.is_empty() {
            let _ = write!(line, " — {summary}");
        }
        if let Some(t) = &h.handoff.target {
            if h.agent() == "pm" {
                let _ = write!(line, " (to {t})");
            }
        }
        if let Some(n) = &h.handoff.recommended_next {
            let _ = write!(line, " (recommends {n})");
        }
        let _ = writeln!(s, "{line}");
    }
    for a in &new_artifacts {
        let _ = writeln!(s, "- New artifact: {}", a.path);
    }
    s.push('\n');

    s.push_str("## Milestone Summary\n");
    s.push_str("| Milestone | Status | Last Handoff | Notes |\n");
    s.push_str("|-----------|--------|--------------|-------|\n");
    let mut any = false;
    for h in i.latest.iter().filter(|h| h.agent() != "pm") {
        any = true;
        let mut notes = h.handoff.summary();
        if let Some(v) = &h.handoff.verdict {
            notes = format!("{v}: {notes}");
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            h.agent(),
            h.handoff.status,
            h.file,
            cell(&notes)
        );
    }
    if !any {
        s.push_str("| (none yet) | | | |\n");
    }
    s.push('\n');

    s.push_str("## Current Blockers\n");
    let mut blocked = false;
    for h in i.latest.iter().filter(|h| h.handoff.status == Status::Blocked) {
        blocked = true;
        let why = h
            .handoff
            .blockers()
            .map(|b| handoff::one_line(b, 120))
            .filter(|b| !b.is_empty())
            .or_else(|| h.handoff.warnings.first().cloned())
            .unwrap_or_else(|| "no details given".into());
        let _ = writeln!(s, "- {} ({}): {}", h.agent(), h.file, why);
    }
    if !blocked {
        s.push_str("None\n");
    }
    s.push('\n');

    if let Some(c) = i.cost {
        s.push_str(c.trim_end());
        s.push_str("\n\n");
    }

    s.push_str("## Artifacts Generated\n");
    if i.artifacts.is_empty() {
        s.push_str("None yet.\n");
    }
    for a in i.artifacts {
        let _ = writeln!(s, "- {} ({})", a.path, local_mtime(a.mtime_ns));
    }
    s
}

/// progress.md for a brand-new task.
pub fn render_empty(task: &str, state: &PmState, now: DateTime<Utc>) -> String {
    render(&Input {
        task,
        now,
        last_checkin: state.last_checkin,
        phase: state.phase,
        recent: &[],
        latest: &[],
        artifacts: &[],
        escalations: &[],
        cost: None,
    })
}

#[cfg(test)]
mod lineage_tests {
    use super::*;
    use crate::core::handoff::Status;
    use crate::core::model::LineageEntry;

    #[test]
    fn lineage_reads_like_appendix_b() {
        let t: DateTime<Utc> = "2025-11-27T09:30:00Z".parse().unwrap();
        let e = |file: &str, from: &str, target: Option<&str>, status, next: Option<&str>| LineageEntry {
            file: file.into(),
            from: from.into(),
            target: target.map(str::to_string),
            recommended_next: next.map(str::to_string),
            status,
            time: t,
        };
        let out = render_lineage(&[
            e("pm-20251127-090000.md", "pm", Some("explore"), Status::InProgress, None),
            e(
                "explore-20251127-093000.md",
                "explore",
                None,
                Status::Complete,
                Some("plan"),
            ),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].ends_with("pm-20251127-090000.md       pm → explore: IN_PROGRESS"),
            "{out}"
        );
        assert!(
            lines[1].ends_with("explore-20251127-093000.md  explore → pm: COMPLETE (next: plan)"),
            "{out}"
        );
    }
}
