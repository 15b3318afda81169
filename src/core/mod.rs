//! The pure core: names, clock, shell quoting, the models, the protocol's decisions,
//! the handoff format, check-in signals and message, rendering. Nothing here touches
//! the filesystem, tmux, ssh, the environment or tokio, so all of it is unit-tested
//! without any of them; every layer above builds on it.

pub(crate) mod agent_file;
pub(crate) mod attention;
pub(crate) mod checkin;
pub(crate) mod clock;
pub(crate) mod compound;
pub mod cost;
pub(crate) mod doctor;
pub mod error;
pub(crate) mod fleet;
pub mod handoff;
pub mod model;
pub mod names;
pub(crate) mod preamble;
pub(crate) mod protocol;
pub(crate) mod report;
pub(crate) mod rotation;
pub(crate) mod rules;
pub(crate) mod sandbox;
pub mod screen;
pub(crate) mod scribe;
pub mod shell;
pub(crate) mod status;
pub(crate) mod turn;
pub(crate) mod wire;
pub mod worktree;
