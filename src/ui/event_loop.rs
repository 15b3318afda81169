//! The loop of `task ui`: wait for a key or a change, read only what changed, draw.
//!
//! It wakes every 200 ms to drain the file watches and check in /proc that every agent's
//! pane process still runs (a death shows within a wake, no process started); `tmux list-panes` runs only when one ended, when a task changed, and every
//! 5 s for idle times. It draws once a second (the clock) or when something changed.

use std::collections::BTreeSet;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyEventKind};

use crate::core::error::{Error, Result};

use super::actions;
use super::keys::{Action, Focus, UiState};
use super::model;
use super::render::{self, Theme, View};
use super::source::{Change, Source};
use super::terminal::Term;

/// How often panes are listed anyway (activity, for idle times and stale lanes).
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// The longest wait for a key before the watches are drained.
const WAKE_EVERY: Duration = Duration::from_millis(200);

fn io(e: std::io::Error) -> Error {
    Error::io("read the terminal", "stdin", e)
}

/// Run until `q`: `src` keeps the data fresh, `rx` says what changed on disk.
pub fn run(mut src: Source, rx: Receiver<Change>, mut ui: UiState, label: &str) -> Result<()> {
    let theme = Theme::from_env();
    let mut term = Term::enter()?;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut redraw = true;
    let mut last_look = Instant::now();
    let mut last_second = 0;
    let (mut needs, mut rows) = (Vec::new(), Vec::new());
    loop {
        let now = crate::core::clock::now();
        if now.timestamp() != last_second {
            if last_second != 0 {
                src.age(now.timestamp() - last_second);
            }
            last_second = now.timestamp();
            redraw = true;
        }
        // Everything that changes the lists sets `redraw`; in between they are kept.
        if redraw {
            needs = model::needs(&src.views, &seen);
            rows = model::rows(&src.views, &ui.filter);
        }
        let view = View {
            tasks: &src.views,
            needs: &needs,
            rows: &rows,
            source: label,
            now,
        };
        let lens = view.lens(&ui);
        ui.clamp(lens);
        if redraw {
            term.t
                .draw(|f| render::draw(f, &view, &ui, theme))
                .map_err(|e| Error::io("draw", "terminal", e))?;
            redraw = false;
        }
        let mut action = None;
        let wait = WAKE_EVERY;
        if event::poll(wait).map_err(io)? {
            match event::read().map_err(io)? {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    ui.note = None;
                    action = ui.key(k, lens);
                }
                Event::Resize(..) => redraw = true,
                _ => {}
            }
        }
        match action {
            None => {}
            Some(Action::Quit) => return Ok(()),
            Some(Action::Redraw) => redraw = true,
            Some(a) => {
                // What to act on is taken from this frame's view before the data moves.
                let sel = Selection::of(&view, &ui, &needs);
                redraw = true;
                act(&mut src, &mut term, &mut ui, a, sel, &mut seen)?;
                // The action may have written to the screen (or lent it): paint it all again.
                term.t.clear().map_err(|e| Error::io("draw", "terminal", e))?;
            }
        }
        // Drain the watches: read again only the tasks that changed.
        let mut dirty = BTreeSet::new();
        let mut rescan = false;
        loop {
            match rx.try_recv() {
                Ok(Change::Task(i)) => {
                    dirty.insert(i);
                }
                Ok(Change::Tasks) => rescan = true,
                Ok(Change::Named { project, task }) => dirty.extend(src.index_of(&project, &task)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => break,
            }
        }
        if rescan {
            if let Err(e) = src.rescan() {
                ui.note = Some(format!("cannot list the tasks again: {e}"));
            }
            redraw = true;
        } else if !dirty.is_empty() {
            for i in dirty {
                src.reload(i);
            }
            src.look_at_panes();
            redraw = true;
        }
        if last_look.elapsed() >= LOOK_EVERY || src.a_pane_ended() {
            last_look = Instant::now();
            redraw |= src.look_at_panes();
        }
    }
}

/// What the cursor was on when a key was pressed.
struct Selection {
    /// The agent actions apply to: (task index, agent name).
    agent: Option<(usize, String)>,
    /// The task shown in Events.
    task: Option<usize>,
    /// The cursor is in Events.
    on_event: bool,
    /// The handoff the selected event names.
    event_file: Option<String>,
    /// The selected Needs-you item's key.
    need_key: Option<String>,
    /// The selected Needs-you item's permission request: (task index, id).
    permit: Option<(usize, String)>,
}

impl Selection {
    /// What the cursor is on in `view`.
    fn of(view: &View, ui: &UiState, needs: &[model::Need]) -> Selection {
        let task = view.selected_task(ui);
        Selection {
            agent: view.selected_agent(ui),
            task,
            on_event: ui.focus == Focus::Events,
            event_file: task.and_then(|i| {
                model::events(&view.tasks[i], &ui.filter)
                    .get(ui.cursor[2])
                    .and_then(|e| model::event_handoff(e))
            }),
            need_key: (ui.focus == Focus::Needs)
                .then(|| needs.get(ui.cursor[0]).map(model::Need::key))
                .flatten(),
            permit: (ui.focus == Focus::Needs)
                .then(|| needs.get(ui.cursor[0]).and_then(|n| n.permit.clone()))
                .flatten(),
        }
    }
}

/// Run one action on the selected agent or task; its outcome goes to the bottom line.
fn act(
    src: &mut Source,
    term: &mut Term,
    ui: &mut UiState,
    a: Action,
    sel: Selection,
    seen: &mut BTreeSet<String>,
) -> Result<()> {
    let nothing = || "nothing selected".to_string();
    let note = match a {
        Action::Seen => match sel.need_key {
            Some(k) => {
                seen.insert(k);
                "marked seen; it comes back if it changes".into()
            }
            None => "select a Needs-you item to mark it seen".into(),
        },
        Action::Enter => match (sel.on_event, sel.event_file, sel.task, sel.agent) {
            (true, Some(file), Some(i), _) => {
                let p = src.tasks[i].handoffs().join(&file);
                pager(term, &p)?
            }
            (true, None, _, _) => "this event names no handoff; Tab to an agent to attach".into(),
            (false, _, _, Some((i, agent))) => {
                let t = &src.tasks[i];
                let same = actions::inside_same_tmux(src.ctx());
                let mut c = actions::attach_command(t, &agent, same);
                let status = if same { c.status() } else { term.lend(|| c.status())? };
                match status {
                    Ok(s) if s.success() && same => {
                        format!(
                            "switched to {}/{agent}; tmux's last-session (prefix L) comes back",
                            t.name
                        )
                    }
                    Ok(s) if s.success() => format!("back from {}/{agent}", t.name),
                    Ok(_) => format!(
                        "could not attach to {}/{agent} (is it running? see `task status {}`)",
                        t.name, t.name
                    ),
                    Err(e) => format!("could not run task attach: {e}"),
                }
            }
            _ => nothing(),
        },
        Action::Progress => match sel.task {
            Some(i) => {
                let p = src.tasks[i].dir().join("progress.md");
                pager(term, &p)?
            }
            None => nothing(),
        },
        Action::Send(text) => match sel.agent {
            Some((i, agent)) => {
                busy(&format!("sending to {agent}…"));
                let t = src.tasks[i].clone();
                src.block_on(actions::send(&t, src.ctx(), &agent, &text))
            }
            None => nothing(),
        },
        Action::Checkin => match sel.task {
            Some(i) => {
                busy("checking in…");
                let t = src.tasks[i].clone();
                src.block_on(actions::checkin(&t, src.ctx()))
            }
            None => nothing(),
        },
        Action::Stop => match sel.agent {
            Some((i, agent)) => {
                let t = src.tasks[i].clone();
                let out = src.block_on(actions::stop_agent(&t, src.ctx(), &agent, "task ui"));
                src.reload(i);
                out
            }
            None => nothing(),
        },
        Action::Permit(allow) => match sel.permit {
            Some((i, id)) => {
                let out = actions::permit(&src.tasks[i], &id, allow);
                src.reload(i);
                out
            }
            None => "select a permit row under Needs you to answer it".into(),
        },
        Action::Quit | Action::Redraw => return Ok(()),
    };
    ui.note = Some(note);
    Ok(())
}

/// Show `what` on the bottom line at once (a delivery can take seconds); written past
/// ratatui, which repaints the whole screen after the action.
fn busy(what: &str) {
    use crossterm::{cursor::MoveTo, style::Print, terminal};
    let rows = terminal::size().map(|(_, h)| h).unwrap_or(24);
    let _ = crossterm::execute!(
        std::io::stdout(),
        MoveTo(0, rows.saturating_sub(1)),
        terminal::Clear(terminal::ClearType::CurrentLine),
        Print(what)
    );
}

/// The pager is given a copy taken now, not the file: the daemon writes each new
/// progress.md into the inode of the version before last (`store::spare`), and a pager
/// that reads lazily as the user scrolls would meet a later version part-way.
fn pager(term: &mut Term, p: &std::path::Path) -> Result<String> {
    let text = match std::fs::read(p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(format!("{} does not exist yet", p.display()));
        }
        Err(e) => return Ok(format!("cannot read {}: {e}", p.display())),
    };
    let copy = tempfile::Builder::new()
        .prefix("progress-")
        .suffix(".md")
        .tempfile()
        .and_then(|mut f| std::io::Write::write_all(&mut f, &text).map(|()| f));
    let copy = match copy {
        Ok(f) => f,
        Err(e) => return Ok(format!("cannot copy {} for the pager: {e}", p.display())),
    };
    let mut c = actions::pager_command(copy.path());
    Ok(match term.lend(|| c.status())? {
        Ok(_) => format!("closed {}", p.display()),
        Err(e) => format!("cannot run $PAGER on {}: {e} (set PAGER)", p.display()),
    })
}
