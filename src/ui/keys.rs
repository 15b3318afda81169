//! What each key does in `task ui`: the screen's state (focus, selection, input line)
//! moved by a pure function that returns the action to run, so keys are tested without a
//! terminal and the help screen lists exactly what is bound.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Which list the cursor is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Focus {
    /// "Needs you".
    #[default]
    Needs,
    /// "Tasks and agents".
    Tasks,
    /// "Events" of the selected task.
    Events,
}

/// What the bottom line is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Mode {
    /// Keys are commands.
    #[default]
    Normal,
    /// Typing a filter (`/`).
    Filter,
    /// Typing a message to the selected agent (`m`).
    Message(String),
    /// Asked "stop this agent?" (`x`); y confirms.
    ConfirmStop,
    /// The key list (`?`).
    Help,
}

/// The screen's own state, apart from the data it shows.
#[derive(Debug, Clone, Default)]
pub struct UiState {
    /// Which list the cursor is in.
    pub focus: Focus,
    /// The cursor in each list (Needs, Tasks, Events).
    pub cursor: [usize; 3],
    /// The bottom line's mode.
    pub mode: Mode,
    /// The filter (`/`), applied to tasks, agents and events.
    pub filter: String,
    /// The outcome of the last action, shown on the bottom line.
    pub note: Option<String>,
    /// Actions are refused (`--read-only`).
    pub read_only: bool,
}

/// What the event loop should do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Leave the UI.
    Quit,
    /// Attach to the selected agent (or open the selected event's handoff).
    Enter,
    /// Send this message to the selected agent.
    Send(String),
    /// Run a check-in of the selected task now.
    Checkin,
    /// Stop the selected agent (already confirmed).
    Stop,
    /// Open the selected task's progress.md in `$PAGER`.
    Progress,
    /// Hide the selected "Needs you" item until it changes.
    Seen,
    /// Answer the selected permission request as a human: allow (`true`) or deny.
    Permit(bool),
    /// Something on screen changed; draw again.
    Redraw,
}

/// Every key, as the help screen shows it (the README copies this list).
pub const HELP: &[(&str, &str)] = &[
    ("Tab / Shift-Tab", "move between Needs you, Tasks and agents, Events"),
    ("j k / Down Up", "move the cursor"),
    (
        "Enter",
        "attach (detach to come back); on an event: its handoff in $PAGER",
    ),
    ("m", "message the agent (verified delivery; the outcome is shown)"),
    ("c", "check in the task now"),
    ("x", "stop the agent (asks first)"),
    ("p", "progress.md of the task in $PAGER"),
    ("s", "mark the Needs-you item seen (it comes back if it changes)"),
    ("a / d", "allow / deny the selected permission request (as a human)"),
    ("/", "filter tasks, agents and events (Esc clears)"),
    ("?", "this help"),
    ("q / Ctrl-C", "quit"),
];

impl UiState {
    fn idx(&self) -> usize {
        self.focus as usize
    }

    /// Move the cursor in the focused list, kept within `len`.
    pub fn clamp(&mut self, lens: [usize; 3]) {
        for (c, l) in self.cursor.iter_mut().zip(lens) {
            *c = (*c).min(l.saturating_sub(1));
        }
    }

    fn refuse_if_read_only(&mut self, a: Action) -> Option<Action> {
        if self.read_only {
            self.note = Some("read-only: actions are off (started with --read-only)".into());
            Some(Action::Redraw)
        } else {
            Some(a)
        }
    }

    /// Apply `key`; the action to run, if any. `lens` are the lists' lengths.
    pub fn key(&mut self, key: KeyEvent, lens: [usize; 3]) -> Option<Action> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Some(Action::Quit);
        }
        match std::mem::take(&mut self.mode) {
            Mode::Help => Some(Action::Redraw),
            Mode::Filter => {
                match key.code {
                    KeyCode::Esc => self.filter.clear(),
                    KeyCode::Enter => {}
                    KeyCode::Backspace => {
                        self.filter.pop();
                        self.mode = Mode::Filter;
                    }
                    KeyCode::Char(c) => {
                        self.filter.push(c);
                        self.mode = Mode::Filter;
                    }
                    _ => self.mode = Mode::Filter,
                }
                self.cursor = [0; 3];
                Some(Action::Redraw)
            }
            Mode::Message(mut text) => match key.code {
                KeyCode::Esc => {
                    self.note = Some("message not sent".into());
                    Some(Action::Redraw)
                }
                KeyCode::Enter if !text.trim().is_empty() => Some(Action::Send(text)),
                KeyCode::Backspace => {
                    text.pop();
                    self.mode = Mode::Message(text);
                    Some(Action::Redraw)
                }
                KeyCode::Char(c) => {
                    text.push(c);
                    self.mode = Mode::Message(text);
                    Some(Action::Redraw)
                }
                _ => {
                    self.mode = Mode::Message(text);
                    None
                }
            },
            Mode::ConfirmStop => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => Some(Action::Stop),
                _ => {
                    self.note = Some("not stopped".into());
                    Some(Action::Redraw)
                }
            },
            Mode::Normal => self.normal(key, lens),
        }
    }

    fn normal(&mut self, key: KeyEvent, lens: [usize; 3]) -> Option<Action> {
        let i = self.idx();
        match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                Some(Action::Redraw)
            }
            KeyCode::Tab => {
                self.focus = match self.focus {
                    Focus::Needs => Focus::Tasks,
                    Focus::Tasks => Focus::Events,
                    Focus::Events => Focus::Needs,
                };
                Some(Action::Redraw)
            }
            KeyCode::BackTab => {
                self.focus = match self.focus {
                    Focus::Needs => Focus::Events,
                    Focus::Tasks => Focus::Needs,
                    Focus::Events => Focus::Tasks,
                };
                Some(Action::Redraw)
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.cursor[i] = (self.cursor[i] + 1).min(lens[i].saturating_sub(1));
                Some(Action::Redraw)
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.cursor[i] = self.cursor[i].saturating_sub(1);
                Some(Action::Redraw)
            }
            KeyCode::Char('?') => {
                self.mode = Mode::Help;
                Some(Action::Redraw)
            }
            KeyCode::Char('/') => {
                self.mode = Mode::Filter;
                Some(Action::Redraw)
            }
            KeyCode::Char('s') => Some(Action::Seen),
            KeyCode::Char('p') => Some(Action::Progress),
            KeyCode::Enter => Some(Action::Enter),
            KeyCode::Char('c') => self.refuse_if_read_only(Action::Checkin),
            KeyCode::Char('a') => self.refuse_if_read_only(Action::Permit(true)),
            KeyCode::Char('d') => self.refuse_if_read_only(Action::Permit(false)),
            KeyCode::Char('m') => {
                let a = self.refuse_if_read_only(Action::Redraw);
                if !self.read_only {
                    self.mode = Mode::Message(String::new());
                }
                a
            }
            KeyCode::Char('x') => {
                let a = self.refuse_if_read_only(Action::Redraw);
                if !self.read_only {
                    self.mode = Mode::ConfirmStop;
                }
                a
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn code(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn a_message_is_typed_then_sent_with_enter() {
        let mut s = UiState::default();
        s.key(k('m'), [1, 1, 1]);
        for c in "hi there".chars() {
            s.key(k(c), [1, 1, 1]);
        }
        assert_eq!(
            s.key(code(KeyCode::Enter), [1, 1, 1]),
            Some(Action::Send("hi there".into()))
        );
        assert_eq!(s.mode, Mode::Normal);
    }

    #[test]
    fn stop_asks_first_and_only_y_confirms() {
        let mut s = UiState::default();
        s.key(k('x'), [1, 1, 1]);
        assert_eq!(s.mode, Mode::ConfirmStop);
        assert_eq!(s.key(k('n'), [1, 1, 1]), Some(Action::Redraw));
        assert_eq!(s.note.as_deref(), Some("not stopped"));
        s.key(k('x'), [1, 1, 1]);
        assert_eq!(s.key(k('y'), [1, 1, 1]), Some(Action::Stop));
    }

    #[test]
    fn a_and_d_answer_a_permission_request() {
        let mut s = UiState::default();
        assert_eq!(s.key(k('a'), [1, 1, 1]), Some(Action::Permit(true)));
        assert_eq!(s.key(k('d'), [1, 1, 1]), Some(Action::Permit(false)));
    }

    #[test]
    fn read_only_refuses_every_action_but_looking() {
        let mut s = UiState {
            read_only: true,
            ..Default::default()
        };
        for c in ['m', 'x', 'c', 'a', 'd'] {
            assert_eq!(s.key(k(c), [1, 1, 1]), Some(Action::Redraw));
            assert_eq!(s.mode, Mode::Normal);
            assert!(s.note.as_deref().unwrap().contains("read-only"));
        }
        assert_eq!(s.key(k('p'), [1, 1, 1]), Some(Action::Progress));
    }

    #[test]
    fn the_cursor_stays_in_its_list_and_filter_resets_it() {
        let mut s = UiState::default();
        for _ in 0..5 {
            s.key(k('j'), [3, 0, 0]);
        }
        assert_eq!(s.cursor[0], 2);
        s.key(code(KeyCode::Tab), [3, 0, 0]);
        assert_eq!(s.focus, Focus::Tasks);
        s.key(k('/'), [3, 0, 0]);
        s.key(k('d'), [3, 0, 0]);
        s.key(code(KeyCode::Enter), [3, 0, 0]);
        assert_eq!((s.filter.as_str(), s.cursor), ("d", [0, 0, 0]));
        s.key(code(KeyCode::Esc), [3, 0, 0]);
        assert_eq!(s.filter, "");
    }
}
