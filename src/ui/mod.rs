//! `task ui`: a live terminal dashboard that puts "who needs me" first.
//!
//! Layers: [`model`] (pure: Needs-you items, rows, events), [`render`] (pure: the view
//! model onto a ratatui frame), [`keys`] (pure: what each key does), and the I/O edges:
//! [`source`] (task folders read once, then on file watches; panes listed when a pane
//! process ends, when a task changed, and every 5 s),
//! [`subscribe`] (the daemon's stream of changes, when one runs),
//! [`actions`] (send, check-in, attach, stop through the CLI's code paths),
//! [`terminal`] and [`event_loop`].

pub mod actions;
pub mod event_loop;
pub mod keys;
pub mod model;
pub mod render;
pub mod source;
pub mod subscribe;
pub mod terminal;

use crate::core::error::Result;

pub use source::Scope;

/// How `task ui` was asked to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which tasks.
    pub scope: Scope,
    /// No actions (a second screen, a shared terminal).
    pub read_only: bool,
}

/// Run the dashboard until the user quits.
pub fn run(opts: Options) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let daemon = subscribe::start(tx.clone());
    let label = match (&opts.scope, daemon) {
        (Scope::All, _) => "all supervised tasks · daemon + file watches",
        (Scope::Project(_), true) => "daemon + file watches",
        (Scope::Project(_), false) => "file watches (no daemon)",
    };
    let src = source::Source::open(opts.scope, tx)?;
    let ui = keys::UiState {
        read_only: opts.read_only,
        ..Default::default()
    };
    event_loop::run(src, rx, ui, label)
}
