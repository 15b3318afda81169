//! The library's one error type.
//!
//! Every variant carries enough to tell the user what happened, to what, and
//! what to do; `exit_code` maps it onto the documented process exit codes so
//! scripts (cron, CI, the PM agent) can branch without parsing text.

use std::path::PathBuf;

/// Exit code for success.
pub const EXIT_OK: i32 = 0;
/// Exit code for a failure while doing the work (I/O, tmux, a runtime).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for bad input: a refused name, a malformed task.md, a bad flag.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code when the named task (or agent session) does not exist.
pub const EXIT_NOT_FOUND: i32 = 3;
/// Exit code when pm_state.json is corrupt or from a newer version.
pub const EXIT_STATE: i32 = 4;
/// Exit code when the protocol refused a spawn or send (a `SPAWN_REJECT_*` code says why).
pub const EXIT_REFUSED: i32 = 6;

/// Library-wide result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the library can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A task or agent name outside the allowlist; nothing has touched the disk.
    #[error("invalid {kind} name {shown}: {rule}")]
    InvalidName {
        kind: &'static str,
        shown: String,
        rule: &'static str,
    },

    /// Input that is well-typed but unusable (a remote spec starting with `-`, a body that is not UTF-8…).
    #[error("{0}")]
    BadInput(String),

    /// task.md parsed but something in it is malformed.
    #[error("{path}:{line}: {msg}")]
    TaskMd { path: PathBuf, line: usize, msg: String },

    /// The task folder does not exist where we looked.
    #[error("no task named '{name}' under {searched}; create it with `task new {name}` or pass --project DIR")]
    TaskNotFound { name: String, searched: String },

    /// pm_state.json could not be understood; the file is left exactly where it is.
    #[error(
        "{path} is corrupt ({detail}); it was left untouched — run `task new {task}` in the project to set it aside and start a fresh state"
    )]
    CorruptState {
        path: PathBuf,
        task: String,
        detail: String,
    },

    /// pm_state.json was written by a newer release whose schema we cannot read.
    #[error(
        "{path} has schema version {found}, newer than this build understands ({supported}); upgrade agent-orchestrator"
    )]
    StateTooNew { path: PathBuf, found: u64, supported: u32 },

    /// A tmux command failed.
    #[error("tmux could not {what} (server {socket}): {detail}")]
    Tmux {
        what: String,
        detail: String,
        socket: String,
    },

    /// The task (or agent) has no running session.
    #[error("{0}")]
    NotRunning(String),

    /// The hub-and-spoke protocol refused a spawn or send; the message starts with its reason code.
    #[error("{0}")]
    Refused(String),

    /// An I/O operation on a specific path failed.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Build an [`Error::Io`] naming the action and the path it was applied to.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// The process exit code a CLI should use for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::InvalidName { .. } | Error::BadInput(_) | Error::TaskMd { .. } => EXIT_BAD_INPUT,
            Error::TaskNotFound { .. } | Error::NotRunning(_) => EXIT_NOT_FOUND,
            Error::CorruptState { .. } | Error::StateTooNew { .. } => EXIT_STATE,
            Error::Io { .. } | Error::Tmux { .. } => EXIT_FAILURE,
            Error::Refused(_) => EXIT_REFUSED,
        }
    }
}
