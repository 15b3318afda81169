//! agent-orchestrator: a supervisor for teams of AI coding agents in tmux.
//!
//! A PM agent (the hub) plans and delegates; spoke agents work in their own
//! tmux sessions and talk only through handoff files; the supervisor watches
//! those files, keeps the PM's state, writes progress.md and wakes the PM with
//! check-ins. This crate is the library behind the thin `task` binary; see
//! DESIGN.md for the module map.

pub mod agents;
pub(crate) mod app;
pub mod attend;
pub mod attention;
pub mod bundle;
pub mod checkin;
pub mod cli;
pub mod clock;
pub mod context;
pub mod cron;
pub mod daemon;
pub mod delivery;
pub mod demo;
pub mod error;
pub mod escalation;
pub mod events;
pub mod fsutil;
pub mod handoff;
pub mod lanes;
pub mod logging;
pub mod names;
pub mod pane_lock;
pub mod paths;
pub mod permissions;
pub mod preamble;
pub mod progress;
pub mod protocol;
pub mod remote;
pub mod runtime;
pub mod schedule;
pub mod scribe;
pub mod service;
pub mod session;
pub mod settle;
pub mod shell;
pub mod signals;
pub mod status;
pub mod task;
pub mod tmux;

pub use error::{Error, Result};
