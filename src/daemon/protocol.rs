//! The control-socket protocol: one JSON object per line each way, versioned.
//!
//! Kept apart from the server so the CLI (client) and the daemon share one
//! definition, as pueue does with its Request/Response enums.

use serde::{Deserialize, Serialize};

/// Protocol version; a request with another version gets an error response.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line accepted (bytes); longer lines get an error and the connection is closed.
pub const MAX_REQUEST: usize = 64 * 1024;

/// A request from the CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon alive? Answered with [`Response::Pong`].
    Ping,
    /// Supervise a task (after `task start`).
    Register { project: String, task: String },
    /// Stop supervising a task (after `task stop`).
    Unregister { project: String, task: String },
    /// Run a check-in now and answer with its report.
    Checkin { project: String, task: String },
    /// The supervised tasks.
    Tasks,
    /// Stop the daemon cleanly (agents keep running).
    Shutdown,
}

/// An envelope carrying the version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// Protocol version.
    pub v: u32,
    /// The payload.
    #[serde(flatten)]
    pub body: T,
}

/// One supervised task, as the daemon sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supervised {
    /// Project folder.
    pub project: String,
    /// Task name.
    pub task: String,
}

/// A response from the daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    /// Alive.
    Pong { pid: u32, version: String },
    /// Done.
    Ok,
    /// The tasks supervised.
    Tasks { tasks: Vec<Supervised> },
    /// A check-in report (as `task checkin --json` prints it).
    Checkin { report: serde_json::Value },
    /// The request failed; the daemon keeps serving.
    Error { message: String },
}
