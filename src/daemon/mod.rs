//! The supervisor daemon: `task daemon`.
//!
//! One process per user (an flock on `daemon.lock`, not a pid file) holds
//! every registered task. Each task has one actor (a tokio task that owns the
//! task's check-ins; nothing mutable is shared across awaits) fed by:
//! - one notify watcher over every task's `handoffs/` (registered before the
//!   startup scan, so nothing lands in a gap); events are only hints: a handoff
//!   is final once renamed into place, or once the daemon has seen it unchanged
//!   for `handoff::QUIET` (its own clock, never the file's mtime), never
//!   half-written; an event queue overflow is a logged, counted rescan;
//! - a reconcile scan every 5 s regardless (network filesystems give no events);
//! - the task's schedule (`checkin:` in task.md), kept by the actor as the
//!   `next_checkin` saved in pm_state.json, so a restart neither delays nor
//!   doubles a scheduled check-in;
//! - a liveness poll of the task's panes (dead agents become signals).
//!
//! A final handoff that wakes the PM is checked in at once; those that land while
//! one is delivered go into the next, so a burst costs at most two check-ins
//! (`timing.rs`). Every check-in the actor runs goes through one method
//! (`Actor::check_in`, with why: asked, schedule, handoff, deaths, attention).
//! State stays in the task folders (pm_state.json with
//! its ledger), so a `kill -9` of the daemon loses and repeats nothing.
//!
//! Control socket: `$XDG_RUNTIME_DIR/agent-orchestrator/daemon.sock`, or
//! `/tmp/agent-orchestrator-<uid>/daemon.sock` when XDG_RUNTIME_DIR is unset;
//! folder 0700, socket 0600, the peer's uid checked.

mod actor;
mod deaths;
mod server;
mod state_guard;
mod subscribe;
mod timing;
mod watcher;
mod watches;

pub use server::run;
