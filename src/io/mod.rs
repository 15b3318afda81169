//! The edges: tmux, verified delivery, ssh (master, pull, watch), cron, the daemon's
//! control socket, the test hooks, other processes (/proc), config.toml, the runtimes' profiles and permissions, signals and logging. Thin
//! wrappers over the outside world, each tested end to end against the real thing.

pub(crate) mod config;
pub(crate) mod control;
pub(crate) mod cron;
pub(crate) mod delivery;
pub(crate) mod git;
pub(crate) mod health;
pub mod hooks;
pub(crate) mod logging;
pub(crate) mod pane_lock;
pub(crate) mod permissions;
pub(crate) mod prices;
pub(crate) mod process;
pub mod program;
pub mod remote;
pub(crate) mod runtime;
pub(crate) mod sandbox;
pub(crate) mod schedule;
pub(crate) mod signals;
pub mod tmux;
pub(crate) mod watch;
pub(crate) mod webhook;
