//! `task attach`: the user's terminal on an agent's tmux session.

use std::path::Path;

use crate::app;
use crate::core::names::{AgentName, TaskName};

/// Attach to `agent` (default: pm) of task `name`; returns only on failure.
pub(crate) fn run(project: Option<&Path>, name: &TaskName, agent: Option<&AgentName>) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let agent = agent.map(|a| a.as_str()).unwrap_or("pm");
    match app::attach::attach(&t, agent)? {}
}
