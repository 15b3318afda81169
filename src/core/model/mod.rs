//! The models every layer shares: the PM's state and its parts, what task.md says, an
//! agent's host and status. Plain data with their pure rules (phase transitions, schema
//! migration, task.md parsing); no I/O.

mod agent_host;
mod agent_role;
mod agent_status;
mod pane_state;
pub mod state;
pub mod taskmd;
mod watch_stats;

pub use agent_host::AgentHost;
pub use agent_role::AgentRole;
pub use agent_status::AgentStatus;
pub use pane_state::PaneState;
pub use state::{AgentState, Escalation, LineageEntry, Phase, PmState};
pub use taskmd::{CwdSpec, RemoteSpec, TaskSpec};
pub use watch_stats::WatchStats;
