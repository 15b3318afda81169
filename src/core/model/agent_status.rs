//! Where an agent's run stands, as a value. pm_state.json keeps the snake_case words
//! (`running`, `done`, …), so files written by any build still load; a word this build
//! does not know is kept as it was, never rewritten to something else.

use serde::{Deserialize, Serialize};

/// An agent's status in pm_state.json.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum AgentStatus {
    /// Never seen running (or an empty field from an old file).
    #[default]
    Unknown,
    /// Its session was started and has not ended.
    Running,
    /// `task stop` ended it.
    Stopped,
    /// Its pane died.
    Dead,
    /// Its run ended with a COMPLETE handoff.
    Done,
    /// Its run ended with a BLOCKED handoff.
    Blocked,
    /// Its run ended with a NEEDS_REVIEW handoff.
    NeedsReview,
    /// A word written by another build, kept verbatim.
    Other(String),
}

impl AgentStatus {
    /// The word stored and printed.
    pub fn as_str(&self) -> &str {
        match self {
            AgentStatus::Unknown => "unknown",
            AgentStatus::Running => "running",
            AgentStatus::Stopped => "stopped",
            AgentStatus::Dead => "dead",
            AgentStatus::Done => "done",
            AgentStatus::Blocked => "blocked",
            AgentStatus::NeedsReview => "needs_review",
            AgentStatus::Other(s) => s,
        }
    }

    /// Whether its run has ended for good (stopped or dead): nothing more will come from it.
    pub fn is_gone(&self) -> bool {
        matches!(self, AgentStatus::Stopped | AgentStatus::Dead)
    }

    /// Whether its run ended by its own terminal handoff.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            AgentStatus::Done | AgentStatus::Blocked | AgentStatus::NeedsReview
        )
    }
}

impl From<&str> for AgentStatus {
    fn from(s: &str) -> Self {
        match s {
            "" | "unknown" => AgentStatus::Unknown,
            "running" => AgentStatus::Running,
            "stopped" => AgentStatus::Stopped,
            "dead" => AgentStatus::Dead,
            "done" => AgentStatus::Done,
            "blocked" => AgentStatus::Blocked,
            "needs_review" => AgentStatus::NeedsReview,
            other => AgentStatus::Other(other.to_string()),
        }
    }
}

super::stored_as_word!(AgentStatus);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_and_unknown_words_are_kept() {
        for w in [
            "unknown",
            "running",
            "stopped",
            "dead",
            "done",
            "blocked",
            "needs_review",
            "paused_by_v9",
        ] {
            let s = AgentStatus::from(w);
            assert_eq!(serde_json::to_value(&s).unwrap(), serde_json::json!(w));
            assert_eq!(serde_json::from_value::<AgentStatus>(serde_json::json!(w)).unwrap(), s);
        }
        assert_eq!(AgentStatus::from(""), AgentStatus::Unknown, "an old file's empty field");
        assert!(AgentStatus::Dead.is_gone() && !AgentStatus::Done.is_gone());
        assert!(AgentStatus::NeedsReview.is_finished() && !AgentStatus::Running.is_finished());
    }
}
