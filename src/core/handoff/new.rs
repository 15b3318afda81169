//! A new handoff rendered as markdown, in the format the parser reads back.

use chrono::{DateTime, Local};

use crate::core::names::AgentName;

use super::Status;

/// Everything `task handoff` needs to write one file.
#[derive(Debug, Clone)]
pub struct NewHandoff<'a> {
    /// The writing agent.
    pub from: &'a AgentName,
    /// Its status.
    pub status: Status,
    /// Who it is for; spokes default to `pm`.
    pub target: Option<&'a AgentName>,
    /// The agent it recommends the hub run next.
    pub next: Option<&'a AgentName>,
    /// Markdown body (sections); may be empty.
    pub body: &'a str,
    /// The time to stamp (the caller's clock).
    pub now: DateTime<Local>,
}

/// Render the file content: title, header lines, blank line, body.
pub fn render(h: &NewHandoff<'_>) -> String {
    let mut s = format!(
        "# Handoff: {}\n**Timestamp:** {}\n",
        h.from,
        h.now.format("%Y-%m-%d %H:%M:%S %Z")
    );
    let target = h
        .target
        .map(|t| t.as_str())
        .or(if h.from.as_str() == "pm" { None } else { Some("pm") });
    if let Some(t) = target {
        s.push_str(&format!("**Target:** {t}\n"));
    }
    s.push_str(&format!("**Status:** {}\n", h.status));
    if let Some(n) = h.next {
        s.push_str(&format!("**Recommended Next:** {n}\n"));
    }
    let body = h.body.trim_matches('\n');
    if !body.is_empty() {
        s.push('\n');
        s.push_str(body);
        s.push('\n');
    }
    s
}
