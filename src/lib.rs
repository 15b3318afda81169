//! agent-orchestrator: a supervisor for teams of AI coding agents in tmux.
//!
//! A PM agent (the hub) plans and delegates; spoke agents work in their own
//! tmux sessions and talk only through handoff files; the supervisor watches
//! those files, keeps the PM's state, writes progress.md and wakes the PM with
//! check-ins. This crate is the library behind the thin `task` binary; see
//! DESIGN.md for the module map.

pub(crate) mod agents;
pub(crate) mod app;
pub(crate) mod attend;
pub(crate) mod attention;
pub(crate) mod bundle;
pub(crate) mod checkin;
pub mod cli;
pub(crate) mod clock;
pub(crate) mod context;
pub(crate) mod cron;
pub(crate) mod daemon;
pub mod delivery;
pub(crate) mod demo;
pub(crate) mod error;
pub(crate) mod escalation;
pub(crate) mod events;
pub(crate) mod fsutil;
pub mod handoff;
pub(crate) mod lanes;
pub(crate) mod logging;
pub mod names;
pub(crate) mod pane_lock;
pub(crate) mod paths;
pub(crate) mod permissions;
pub(crate) mod preamble;
pub(crate) mod progress;
pub(crate) mod protocol;
pub mod remote;
pub(crate) mod runtime;
pub(crate) mod schedule;
pub(crate) mod scribe;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod settle;
pub mod shell;
pub(crate) mod signals;
pub(crate) mod status;
pub mod task;
pub mod tmux;
pub(crate) mod ui;

pub use error::{Error, Result};
