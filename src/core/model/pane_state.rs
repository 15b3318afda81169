//! What an agent's pane is, as `task status` shows it.

use serde::{Deserialize, Serialize};

/// What an agent's pane is now, seen through tmux. `task status --json` prints the word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PaneState {
    /// Its command runs.
    Alive,
    /// Its command exited (the pane is kept, with the exit status).
    Dead,
    /// The pane no longer exists (or belongs to another tmux server now).
    Gone,
    /// The agent was never started.
    NotStarted,
    /// Its host cannot be reached.
    Unreachable,
}

impl PaneState {
    /// The word printed.
    pub fn as_str(self) -> &'static str {
        match self {
            PaneState::Alive => "alive",
            PaneState::Dead => "dead",
            PaneState::Gone => "gone",
            PaneState::NotStarted => "not-started",
            PaneState::Unreachable => "unreachable",
        }
    }
}

impl std::fmt::Display for PaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
