//! The library's one error type.
//!
//! Every variant carries enough to tell the user what happened, to what, and
//! what to do; `exit_code` maps it onto the documented process exit codes so
//! scripts (cron, CI, the PM agent) can branch without parsing text.

use std::path::PathBuf;

/// Exit code for success.
pub const EXIT_OK: i32 = 0;
/// Exit code for a failure while doing the work (I/O, tmux, a runtime, the environment,
/// a remote host, the file watcher, the scheduler).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for bad input: a refused name, a malformed task.md, a bad flag.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code when the named task (or agent session) does not exist.
pub const EXIT_NOT_FOUND: i32 = 3;
/// Exit code when pm_state.json is corrupt or from a newer version.
pub const EXIT_STATE: i32 = 4;
/// Exit code when a message or check-in was not confirmed delivered (it will be retried).
pub const EXIT_UNDELIVERED: i32 = 5;
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

    /// Something around the work failed, not its input: a program or folder the machine
    /// lacks, a daemon that does not answer, the file watcher (inotify), the scheduler
    /// (crontab). The message says what to fix; exits 1, not 2.
    #[error("{0}")]
    Environment(String),

    /// A remote host could not do its part: ssh unreachable, a remote command, an rsync
    /// or SFTP pull. Exits 1: retrying (or fixing the host) helps, editing the input does not.
    #[error("{0}")]
    Remote(String),

    /// The hub-and-spoke protocol refused a spawn or send; its reason code is a value.
    #[error("{0}")]
    Refused(crate::core::protocol::reason::Refusal),

    /// An I/O operation on a specific path failed. The cause is in the message (logs show
    /// it through `Display`) and not also a `source`, which the CLI's error chain would
    /// print a second time.
    #[error("{action} {path}: {cause}")]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
}

impl Error {
    /// Build an [`Error::Io`] naming the action and the path it was applied to.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            cause: source,
        }
    }

    /// The process exit code a CLI should use for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::InvalidName { .. } | Error::BadInput(_) | Error::TaskMd { .. } => EXIT_BAD_INPUT,
            Error::TaskNotFound { .. } | Error::NotRunning(_) => EXIT_NOT_FOUND,
            Error::CorruptState { .. } | Error::StateTooNew { .. } => EXIT_STATE,
            Error::Io { .. } | Error::Tmux { .. } | Error::Environment(_) | Error::Remote(_) => EXIT_FAILURE,
            Error::Refused(_) => EXIT_REFUSED,
        }
    }
}

/// An error that carries its own exit code: a delivery that was not confirmed, a refusal
/// by the spawn gate, or an error the daemon answered with (its code crossed the socket).
/// Its message is already the final text, so it is not an [`Error`] variant; the CLI
/// finds it anywhere in an error's chain and exits with its code.
#[derive(Debug)]
pub struct Exit {
    /// The process exit code (one of the `EXIT_*` constants).
    pub code: i32,
    /// What to tell the user.
    pub message: String,
}

impl Exit {
    /// An error that exits with `code` and says `message`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Exit {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_2_and_a_failed_environment_or_host_is_1() {
        assert_eq!(Error::BadInput("x".into()).exit_code(), EXIT_BAD_INPUT);
        assert_eq!(Error::Environment("x".into()).exit_code(), EXIT_FAILURE);
        assert_eq!(Error::Remote("x".into()).exit_code(), EXIT_FAILURE);
        let refused = crate::core::protocol::reason::Refusal::new(
            crate::core::protocol::reason::Reason::SpawnRejectDuplicate,
            "x",
        );
        assert_eq!(Error::Refused(refused).exit_code(), EXIT_REFUSED);
    }

    #[test]
    fn an_io_error_says_its_cause_once_even_through_the_clis_chain() {
        let e = Error::io(
            "write",
            "/p/.tmp-x",
            std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device"),
        );
        let shown = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(shown, "write /p/.tmp-x: No space left on device");
    }
}
