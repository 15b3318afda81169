//! The stores: the task folder and what lives in it (state, ledger scans, events,
//! handoffs, bundles, progress.md) and the daemon's registry. Every write is atomic
//! (temp file, fsync, rename); nothing here knows tmux or ssh.

pub(crate) mod bundle;
pub(crate) mod events;
pub(crate) mod fsutil;
pub mod handoffs;
pub mod memo;
pub(crate) mod parsed;
pub(crate) mod paths;
pub(crate) mod permits;
pub(crate) mod progress;
pub(crate) mod registry;
pub(crate) mod roster;
pub(crate) mod spare;
pub mod task;
pub(crate) mod turns;
pub mod usage;
