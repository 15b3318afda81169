//! The application layer: one small module per use case (start, spawn, send, stop,
//! check-in, watch, …), written once and called by the CLI (and, as it moves over,
//! the daemon).
//!
//! A use case takes typed arguments, calls the library (task folder, session, check-in,
//! daemon client) and returns what happened; it never parses arguments and never
//! prints, so the CLI stays "parse → call → render" and a second front end cannot
//! drift from it. Warnings that must reach the user while the work goes on are passed
//! to a `warn` callback, in the order they arise.

pub(crate) mod agents;
pub(crate) mod attach;
pub(crate) mod attend;
pub(crate) mod broker;
pub(crate) mod checkin;
pub(crate) mod context;
pub mod cost;
pub(crate) mod daemon;
pub(crate) mod dispatch;
pub(crate) mod doctor;
pub(crate) mod escalation;
pub(crate) mod failover;
pub(crate) mod fleet;
pub(crate) mod gate;
pub(crate) mod handoff;
pub(crate) mod lanes;
pub(crate) mod progress;
pub(crate) mod recent;
pub(crate) mod rotate;
pub(crate) mod runtime_check;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod settings;
pub(crate) mod settle;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod turn;
pub(crate) mod verbs;
pub(crate) mod watch;
pub(crate) mod worktree;

use std::path::Path;

use crate::core::names::TaskName;
use crate::store::task::{self, Task};

/// The existing task `name`, in `project` or wherever it is found from there (see
/// [`task::find_project`]); every verb that works on a task starts here, so "no such
/// task" reads the same everywhere.
pub(crate) fn locate(project: Option<&Path>, name: &TaskName) -> crate::Result<Task> {
    let p = task::find_project(project, name)?;
    let t = Task::new(&p, name.clone())?;
    t.require()?;
    Ok(t)
}
