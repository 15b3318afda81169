//! What a handoff says, as the parser leaves it: the status vocabulary, the known
//! sections, and the few questions every reader asks (its summary, its blockers,
//! whether it rejects). No parsing here, so readers of a handoff depend on its
//! shape, not on how markdown is read.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::text::{is_none_text, one_line};

/// The handoff status vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// The work is done.
    Complete,
    /// The agent cannot go on; also the fallback for a missing or unreadable status.
    Blocked,
    /// The work is done and asks for a review.
    NeedsReview,
    /// Instructions (PM → agent) or an interim report.
    InProgress,
}

impl Status {
    /// Terminal statuses end an agent's turn (and, later, release its lane).
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::InProgress)
    }

    /// The canonical spelling used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Complete => "COMPLETE",
            Status::Blocked => "BLOCKED",
            Status::NeedsReview => "NEEDS_REVIEW",
            Status::InProgress => "IN_PROGRESS",
        }
    }

    /// Parse a canonical or near-canonical spelling; `None` when unrecognised.
    pub fn from_word(word: &str) -> Option<Status> {
        let norm: String = word
            .trim()
            .chars()
            .map(|c| {
                if c == ' ' || c == '-' {
                    '_'
                } else {
                    c.to_ascii_uppercase()
                }
            })
            .collect();
        match norm.as_str() {
            "COMPLETE" | "COMPLETED" | "DONE" => Some(Status::Complete),
            "BLOCKED" => Some(Status::Blocked),
            "NEEDS_REVIEW" => Some(Status::NeedsReview),
            "IN_PROGRESS" => Some(Status::InProgress),
            _ => None,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A gate outcome from `## Gates Honored` (docs/protocol.md#structured-results).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GateResult {
    /// The gate passed.
    Pass,
    /// The gate failed: treated as a blocker by later check-ins.
    Fail,
    /// The gate was skipped.
    Skipped,
    /// Anything else (e.g. `3/4 complete`), kept verbatim.
    Other(String),
}

/// One `- gate: RESULT` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    /// The gate's name.
    pub name: String,
    /// Its outcome.
    pub result: GateResult,
}

/// The known sections (docs/protocol.md#sections); each `None` when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sections {
    pub instructions: Option<String>,
    pub context: Option<String>,
    pub skills_to_load: Option<Vec<String>>,
    pub success_criteria: Option<String>,
    pub completed_work: Option<String>,
    pub artifacts_generated: Option<Vec<String>>,
    pub blockers: Option<String>,
    pub skill_gaps: Option<String>,
    pub gates_honored: Option<Vec<Gate>>,
    pub scope: Option<String>,
    pub next_action: Option<String>,
    pub summary: Option<String>,
    pub outcome: Option<String>,
    /// Sections we do not know, kept in order as (heading, body).
    pub other: Vec<(String, String)>,
}

/// A parsed handoff. Fields come from the header lines (`**Key:** value`);
/// the source agent and time also come from the file name (see [`super::HandoffName`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    /// The agent in the `# Handoff: <agent>` title, when present.
    pub title_agent: Option<String>,
    /// `**Timestamp:**` verbatim.
    pub timestamp: Option<String>,
    /// `**Target:**`.
    pub target: Option<String>,
    /// The effective status (BLOCKED when missing or unknown).
    pub status: Status,
    /// The status text as written, when it was not exactly canonical.
    pub status_written: Option<String>,
    /// `**Recommended Next:**`.
    pub recommended_next: Option<String>,
    /// `Cycle Result:` (PASS | FAIL | BLOCKED; docs/protocol.md#verdicts-and-results), verbatim upper-cased.
    pub cycle_result: Option<String>,
    /// `**Verdict:**` of a review (APPROVED | REJECTED), verbatim upper-cased.
    pub verdict: Option<String>,
    /// `budget_exceeded: true` (docs/protocol.md#structured-results): the hub must re-plan the work.
    #[serde(default)]
    pub budget_exceeded: bool,
    /// `scope_escalation: true`: the agent needs changes outside its scope.
    #[serde(default)]
    pub scope_escalation: bool,
    /// The sections.
    pub sections: Sections,
    /// Every deviation noticed, for logs and `task status`.
    pub warnings: Vec<String>,
}

impl Handoff {
    /// A one-line summary for progress.md and check-ins.
    pub fn summary(&self) -> String {
        let s = &self.sections;
        let src = s
            .summary
            .as_deref()
            .or(s.completed_work.as_deref())
            .or(s.outcome.as_deref())
            .or(s.instructions.as_deref())
            .or(s.blockers.as_deref())
            .unwrap_or("");
        one_line(src, 100)
    }

    /// The blockers text, unless it says there are none.
    pub fn blockers(&self) -> Option<&str> {
        self.sections.blockers.as_deref().filter(|b| !is_none_text(b))
    }

    /// Whether this is a review that rejected the work.
    pub fn is_rejection(&self) -> bool {
        self.verdict.as_deref().is_some_and(|v| v.starts_with("REJECT"))
    }
}
