//! The control-socket protocol: one JSON object per line each way, versioned.
//!
//! Kept apart from the server so the CLI (client) and the daemon share one
//! definition, as pueue does with its Request/Response enums.

use serde::{Deserialize, Serialize};

/// Protocol version; a request with another version gets an error response.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line accepted (bytes); longer lines get an error and the connection is closed.
pub const MAX_REQUEST: usize = 1024 * 1024;

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
    /// Start an agent (`task spawn`); answered with [`Response::Done`] holding what was started.
    Spawn {
        /// Project folder.
        project: String,
        /// Task name.
        task: String,
        /// Agent name.
        agent: String,
        /// The PM's handoff, resolved to an absolute path by the CLI.
        handoff: String,
        /// Runtime override.
        runtime: Option<String>,
        /// Hold the spawn in the agent's lane when it is busy (`--queue`).
        #[serde(default)]
        queue: bool,
        /// The tmux server and session prefix the CLI was asked to use ([`crate::session::Ctx::id`]).
        tmux: String,
    },
    /// Type a message into an agent (`task send`); answered with the delivery report.
    Send {
        /// Project folder.
        project: String,
        /// Task name.
        task: String,
        /// Agent name.
        agent: String,
        /// The message.
        text: String,
        /// As for `Spawn`.
        tmux: String,
    },
    /// End a task's sessions and stop supervising it (`task stop`).
    Stop {
        /// Project folder.
        project: String,
        /// Task name.
        task: String,
        /// As for `Spawn`.
        tmux: String,
    },
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
    /// A verb's result, as its `--json` prints it.
    Done { report: serde_json::Value },
    /// The request failed; the daemon keeps serving. `code` is the exit code the CLI should use.
    Error {
        message: String,
        #[serde(default = "default_code")]
        code: i32,
    },
}

fn default_code() -> i32 {
    crate::error::EXIT_FAILURE
}

impl Response {
    /// An error answer carrying the library error's exit code.
    pub fn error(e: &crate::error::Error) -> Response {
        Response::Error {
            message: e.to_string(),
            code: e.exit_code(),
        }
    }

    /// An error answer for a failure of the daemon itself.
    pub fn failure(message: impl Into<String>) -> Response {
        Response::Error {
            message: message.into(),
            code: crate::error::EXIT_FAILURE,
        }
    }
}
