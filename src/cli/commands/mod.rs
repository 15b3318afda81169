//! One file per verb: the arguments it needs → a call into the application layer
//! ([`crate::app`]) → what the user sees (text, or the `--json` of docs/json.md).

pub(crate) mod attach;
pub(crate) mod checkin;
pub(crate) mod daemon;
pub(crate) mod doctor;
pub(crate) mod handoff;
pub(crate) mod hook;
pub(crate) mod hosts;
pub(crate) mod list;
pub(crate) mod log;
pub(crate) mod new;
pub(crate) mod permit;
pub(crate) mod prepare;
pub(crate) mod progress;
pub(crate) mod rotate;
pub(crate) mod runtime;
pub(crate) mod send;
pub(crate) mod service;
pub(crate) mod setup_agents;
pub(crate) mod spawn;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod stop;
pub(crate) mod ui;
pub(crate) mod watch;
pub(crate) mod web;
