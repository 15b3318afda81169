//! The real terminal: raw mode and the alternate screen while the UI runs, given back
//! while a child (tmux attach, `$PAGER`) has it, and always restored on the way out.

use std::io::{Stdout, stdout};

use crossterm::{
    cursor, execute,
    terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
};
use ratatui::{Terminal, backend::CrosstermBackend};

use crate::core::error::{Error, Result};

/// The terminal in UI mode; dropping it puts the terminal back as it was.
pub struct Term {
    /// The ratatui terminal drawing to stdout.
    pub t: Terminal<CrosstermBackend<Stdout>>,
}

fn io(e: std::io::Error) -> Error {
    Error::io("set up the terminal", "stdout", e)
}

fn enter() -> Result<()> {
    enable_raw_mode().map_err(io)?;
    execute!(stdout(), EnterAlternateScreen, cursor::Hide).map_err(io)
}

fn leave() {
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, cursor::Show);
}

impl Term {
    /// Raw mode and the alternate screen.
    pub fn enter() -> Result<Term> {
        enter()?;
        let t = Terminal::new(CrosstermBackend::new(stdout())).map_err(io)?;
        Ok(Term { t })
    }

    /// Give the terminal to `child` (attach, pager) until it ends, then take it back.
    pub fn lend<T>(&mut self, child: impl FnOnce() -> T) -> Result<T> {
        leave();
        let out = child();
        enter()?;
        self.t.clear().map_err(io)?;
        Ok(out)
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        leave();
    }
}
