//! agent-orchestrator: a supervisor for teams of AI coding agents in tmux.
//!
//! A PM agent (the hub) plans and delegates; spoke agents work in their own
//! tmux sessions and talk only through handoff files; the supervisor watches
//! those files, keeps the PM's state, writes progress.md and wakes the PM with
//! check-ins. This crate is the library behind the thin `task` binary; see
//! DESIGN.md for the module map.

pub(crate) mod app;
pub mod cli;
pub mod core;
pub mod daemon;
pub mod io;
pub(crate) mod runtimes;
pub mod store;
pub(crate) mod ui;
pub(crate) mod web;

pub use core::error::{Error, Result};
