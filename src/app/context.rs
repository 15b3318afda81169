//! What every agent operation needs: the tmux server it drives, the session-name prefix,
//! and this `task` binary. One value, built from the environment once and passed down, so
//! the daemon and the CLI drive the same server the same way.

use std::path::PathBuf;

use crate::core::error::{Error, Result};
use crate::io::tmux::Tmux;
use crate::store::task::Task;

/// Default session-name prefix: sessions are `<prefix>-<task>-<agent>`.
pub const DEFAULT_PREFIX: &str = "ao";

/// What every session operation needs.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The tmux server.
    pub tmux: Tmux,
    /// Session-name prefix (`$AO_SESSION_PREFIX`, default `ao`).
    pub prefix: String,
    /// This `task` binary, for preambles and the demo runtime.
    pub task_bin: PathBuf,
}

impl Ctx {
    /// From the environment.
    pub fn from_env() -> Result<Ctx> {
        let prefix = std::env::var("AO_SESSION_PREFIX").unwrap_or_else(|_| DEFAULT_PREFIX.into());
        crate::core::names::validate("session prefix", &prefix)?;
        Ok(Ctx {
            tmux: Tmux::from_env()?,
            prefix,
            task_bin: match &crate::io::hooks::get().task_bin {
                Some(bin) => bin.clone(),
                None => std::env::current_exe().map_err(|e| Error::io("find own binary", "task", e))?,
            },
        })
    }

    /// This process's context on `tmux`: the prefix and binary are read from the
    /// environment once (the daemon asks for a context on every tick of every task).
    pub fn on(tmux: &Tmux) -> Result<Ctx> {
        static BASE: std::sync::OnceLock<std::result::Result<(String, PathBuf), String>> = std::sync::OnceLock::new();
        let base = BASE.get_or_init(|| {
            Ctx::from_env()
                .map(|c| (c.prefix, c.task_bin))
                .map_err(|e| e.to_string())
        });
        match base {
            Ok((prefix, task_bin)) => Ok(Ctx {
                tmux: tmux.clone(),
                prefix: prefix.clone(),
                task_bin: task_bin.clone(),
            }),
            Err(e) => Err(Error::Environment(e.clone())),
        }
    }

    /// Which tmux server and session prefix this context drives, so the daemon can
    /// refuse a request meant for another server rather than act on the wrong one.
    pub fn id(&self) -> String {
        format!(
            "tmux {} with session prefix '{}'",
            self.tmux.socket().flags(),
            self.prefix
        )
    }

    /// `<prefix>-<task>-<agent>`.
    pub fn session_name(&self, task: &Task, agent: &str) -> String {
        format!("{}-{}-{}", self.prefix, task.name, agent)
    }
}
