//! Writing handoffs, so agents and the PM never hand-format names or headers.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Local};

use crate::error::{Error, Result};
use crate::fsutil;
use crate::names::AgentName;

use super::{HandoffName, Status};

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

/// Write a handoff into `dir` atomically under a fresh name; returns its path.
/// A same-second collision takes the next suffix (`-2`, `-3`, …), never overwriting.
pub fn write(dir: &Path, h: &NewHandoff<'_>) -> Result<PathBuf> {
    if h.body.len() as u64 > super::SIZE_CAP {
        return Err(Error::BadInput(format!(
            "the handoff body is {} bytes, over the {} byte cap; put large content in artifacts/ and list it under '## Artifacts Generated'",
            h.body.len(),
            super::SIZE_CAP
        )));
    }
    let content = render(h);
    for seq in 1..=1000 {
        let name = HandoffName {
            agent: h.from.to_string(),
            stamp: h.now.naive_local(),
            seq,
        };
        let path = dir.join(name.file_name());
        if fsutil::atomic_create(&path, content.as_bytes())? {
            return Ok(path);
        }
    }
    Err(Error::BadInput(format!(
        "more than 1000 handoffs from {} in one second in {}; refusing to write more",
        h.from,
        dir.display()
    )))
}
