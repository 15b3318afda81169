//! The models every layer shares: the PM's state and its parts, what task.md says, an
//! agent's host and status. Plain data with their pure rules (phase transitions, schema
//! migration, task.md parsing); no I/O.

/// The conversions of a value pm_state.json stores as a word, given its `as_str` and
/// `From<&str>` (which keeps a word it does not know): from a `String` as serde reads
/// it, back to the word as serde writes it, and printed as the word.
macro_rules! stored_as_word {
    ($ty:ident) => {
        impl From<String> for $ty {
            fn from(s: String) -> Self {
                $ty::from(s.as_str())
            }
        }

        impl From<$ty> for String {
            fn from(v: $ty) -> Self {
                v.as_str().to_string()
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use stored_as_word;

mod agent_host;
mod agent_role;
mod agent_status;
mod lineage;
mod pane_state;
pub mod state;
pub mod taskmd;
mod watch_stats;

pub use agent_host::AgentHost;
pub use agent_role::AgentRole;
pub use agent_status::AgentStatus;
pub use lineage::Lineage;
pub use pane_state::PaneState;
pub use state::{AgentState, Escalation, LeftBehind, LineageEntry, Phase, PmState};
pub use taskmd::{CwdSpec, RemoteSpec, TaskSpec};
pub use watch_stats::WatchStats;
