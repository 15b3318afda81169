//! Reading an agent's screen: the patterns of one runtime (ready, queued, pending, busy,
//! dialog, usage limit, paste marker) and what a captured screen says by them. Pure, so
//! every profile's screens are unit-tested from captures; delivery and attention act on
//! the verdicts.

use std::sync::Arc;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// Screen patterns of one runtime, as written in its profile (regexes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PatternSpec {
    /// The input area is empty and accepting input.
    pub ready: Vec<String>,
    /// The input area holds text that has not been submitted.
    pub pending: Vec<String>,
    /// The input area is empty but a message waits in the agent's own queue behind its
    /// running turn (Claude Code's "Press up to edit queued messages"). Such a message is
    /// not submitted yet: the agent takes it later, or hands it back into the input (Esc,
    /// Up), so delivery keeps watching instead of calling it delivered. Optional.
    pub queued: Vec<String>,
    /// A collapsed paste is still in the input area (e.g. `[Pasted text #1`).
    pub paste_marker: Vec<String>,
    /// The agent is working.
    pub busy: Vec<String>,
    /// A permission or trust dialog waits for a human.
    pub dialog: Vec<String>,
    /// The agent stopped at a usage or rate limit and will need a nudge once it resets
    /// (see [`crate::core::attention`]); the matching line is where the reset time is read from.
    pub usage_limit: Vec<String>,
    /// A menu the agent opens over a usage limit (Claude Code's "What do you want to do?"
    /// with "Stop and wait for limit to reset"); it holds the input, so it is closed with the
    /// profile's `usage_limit_menu_keys` before the resume message is typed.
    pub usage_limit_menu: Vec<String>,
    /// How many of the last non-empty screen lines form the input area (default 8).
    pub input_lines: Option<usize>,
}

/// Compiled [`PatternSpec`].
#[derive(Debug, Clone)]
pub struct Patterns {
    ready: Vec<Arc<Regex>>,
    pending: Vec<Arc<Regex>>,
    queued: Vec<Arc<Regex>>,
    paste_marker: Vec<Arc<Regex>>,
    busy: Vec<Arc<Regex>>,
    dialog: Vec<Arc<Regex>>,
    usage_limit: Vec<Arc<Regex>>,
    usage_limit_menu: Vec<Arc<Regex>>,
    input_lines: usize,
}

fn compile(list: &[String], what: &str) -> std::result::Result<Vec<Arc<Regex>>, String> {
    list.iter()
        .map(|p| {
            Regex::new(&format!("(?m){p}"))
                .map(Arc::new)
                .map_err(|e| format!("{what} pattern {p:?}: {e}"))
        })
        .collect()
}

impl PatternSpec {
    /// Compile; an invalid regex names the pattern.
    pub fn compile(&self) -> std::result::Result<Patterns, String> {
        Ok(Patterns {
            ready: compile(&self.ready, "ready")?,
            pending: compile(&self.pending, "pending")?,
            queued: compile(&self.queued, "queued")?,
            paste_marker: compile(&self.paste_marker, "paste_marker")?,
            busy: compile(&self.busy, "busy")?,
            dialog: compile(&self.dialog, "dialog")?,
            usage_limit: compile(&self.usage_limit, "usage_limit")?,
            usage_limit_menu: compile(&self.usage_limit_menu, "usage_limit_menu")?,
            input_lines: self.input_lines.unwrap_or(8).max(1),
        })
    }
}

/// What the screen shows, judged by the patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    /// A dialog needs a human; the matching line.
    Dialog(String),
    /// Unsubmitted input; `marker` when it is a collapsed paste.
    Pending { marker: bool },
    /// Input area empty, a message waiting in the agent's queue behind its running turn.
    Queued,
    /// Input area empty and ready.
    Ready,
    /// Working (and the input area is not recognisably empty).
    Busy,
    /// Nothing recognised (still starting, or an unknown screen).
    Unknown,
}

fn any(list: &[Arc<Regex>], text: &str) -> bool {
    list.iter().any(|r| r.is_match(text))
}

impl Patterns {
    /// Whether any `busy` pattern matches anywhere on the screen (the agent is working). Pure.
    pub fn is_busy(&self, screen: &str) -> bool {
        any(&self.busy, screen)
    }

    /// Whether the runtime can hold a message in a queue of its own (it has `queued` patterns).
    pub fn queues(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Whether the screen shows the menu an agent opens over a usage limit. Pure.
    pub fn usage_limit_menu(&self, screen: &str) -> bool {
        any(&self.usage_limit_menu, screen)
    }

    /// The last line of `screen` that a `usage_limit` pattern matches, with the byte
    /// offset where that line ends (what comes after it tells whether the limit is still
    /// the latest thing on screen). Pure.
    pub fn last_usage_limit<'a>(&self, screen: &'a str) -> Option<(usize, &'a str)> {
        let mut best: Option<(usize, usize)> = None;
        for r in &self.usage_limit {
            if let Some(m) = r.find_iter(screen).last() {
                let start = screen[..m.start()].rfind('\n').map_or(0, |i| i + 1);
                let end = screen[m.start()..].find('\n').map_or(screen.len(), |i| m.start() + i);
                if best.is_none_or(|(s, _)| start > s) {
                    best = Some((start, end));
                }
            }
        }
        best.map(|(s, e)| (e, &screen[s..e]))
    }
}

/// Judge a captured screen. Pure, so every runtime's screens are unit-tested.
pub fn assess(screen: &str, p: &Patterns) -> Screen {
    for r in &p.dialog {
        if let Some(m) = r.find(screen) {
            // The line holding the match's first visible character: a pattern starting with
            // `^\s*` may begin its match on the blank line above (`\s` takes the newline).
            let start = m.start() + m.as_str().find(|c: char| !c.is_whitespace()).unwrap_or(0);
            let line = screen[..start].rsplit('\n').next().unwrap_or("").to_string()
                + screen[start..].split('\n').next().unwrap_or("");
            return Screen::Dialog(line.trim().to_string());
        }
    }
    // The last `input_lines` lines that are not blank, taken from the bottom: a screen is
    // judged at every look, and walking all of it to keep its last line was most of the work.
    let mut tail: Vec<&str> = screen
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(p.input_lines)
        .collect();
    tail.reverse();
    let area = tail.join("\n");
    // Queued and ready before pending: they describe an empty input line exactly, while
    // a pending pattern may also match a placeholder shown in an empty one.
    if any(&p.paste_marker, &area) {
        Screen::Pending { marker: true }
    } else if any(&p.queued, &area) {
        Screen::Queued
    } else if any(&p.ready, &area) {
        Screen::Ready
    } else if any(&p.pending, &area) {
        Screen::Pending { marker: false }
    } else if any(&p.busy, screen) {
        Screen::Busy
    } else {
        Screen::Unknown
    }
}

/// Where a message's text (a check-in's id) shows on a captured screen. See [`sighting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sighting {
    /// Not on the screen.
    Nowhere,
    /// Only in the input area, unsent: pasted, and Enter never pressed (a supervisor killed
    /// between the two). Pressing Enter submits it; pasting it again would glue a copy to it.
    Unsent,
    /// Elsewhere on the screen: echoed above the input (submitted), or waiting in the
    /// agent's queue (accepted; see [`at_deadline`]).
    Submitted,
}

/// Where `needle` shows on `screen` (with scrollback), judged by the runtime's input area.
/// Pure.
///
/// It is unsent only when the screen is pending (text in the input, not a collapsed paste,
/// which shows no text) and every sighting lies in the input area at or below its last
/// line that starts an input (a `pending` pattern): an echo of a submitted message can sit
/// inside the last `input_lines` lines too, above the input line, and is not in the input.
pub fn sighting(screen: &str, needle: &str, p: &Patterns) -> Sighting {
    if needle.is_empty() || !screen.contains(needle) {
        return Sighting::Nowhere;
    }
    if assess(screen, p) != (Screen::Pending { marker: false }) {
        return Sighting::Submitted;
    }
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    let area = lines.len().saturating_sub(p.input_lines);
    let input = (area..lines.len()).rev().find(|&i| any(&p.pending, lines[i]));
    match input {
        Some(start) if lines[..start].iter().all(|l| !l.contains(needle)) => {
            if lines[start..].iter().any(|l| l.contains(needle)) {
                Sighting::Unsent
            } else {
                // Split across lines above the input line (a wrapped echo): not in the input.
                Sighting::Submitted
            }
        }
        _ => Sighting::Submitted,
    }
}

/// What one look after Enter says about a pasted message. See [`after_enter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterEnter {
    /// The agent took it: the input area is clear and no message waits in its queue.
    /// `was_queued` when it waited in the queue first (taken into or after a running turn).
    Submitted { was_queued: bool },
    /// It waits in the agent's queue behind a running turn: not submitted yet, keep looking.
    Queued,
    /// The text is in the input area, unsent: Enter has not taken yet, or (`handed_back`)
    /// the agent gave a queued message back into the input. Pressing Enter submits it.
    Unsent { handed_back: bool },
    /// A dialog appeared: a human must answer it.
    Dialog(String),
    /// Nothing to conclude from this look.
    Unclear,
}

/// Judge one look after Enter. Pure. `changed`: the paste was seen in the input area, or
/// the screen differs from the one the paste went into (so a clear input is not simply
/// the screen before it). `was_queued`: an earlier look saw the message queued.
///
/// A queued message is not delivered: Claude Code takes it at its next tool call or when
/// the turn ends, but Esc or Up hand it back into the input, where it sits unsent. Only a
/// clear input with nothing queued counts as submitted.
pub fn after_enter(screen: Screen, changed: bool, was_queued: bool) -> AfterEnter {
    match screen {
        Screen::Dialog(line) => AfterEnter::Dialog(line),
        Screen::Queued => AfterEnter::Queued,
        Screen::Pending { .. } => AfterEnter::Unsent {
            handed_back: was_queued,
        },
        Screen::Ready | Screen::Busy if changed || was_queued => AfterEnter::Submitted { was_queued },
        Screen::Ready | Screen::Busy | Screen::Unknown => AfterEnter::Unclear,
    }
}

/// What the last look after Enter makes of a delivery when its wait ends. Pure.
///
/// A message still in the agent's queue was accepted: the agent submits it at its running
/// turn's next tool call or when the turn ends, and only a human (Esc, Up at the pane) can
/// hand it back. Calling it unconfirmed made callers send it again (the budget wrap-up at
/// every check-in), and the agent then got it twice once its queue drained (issue 13).
/// Anything else that has not been seen submitted by then is unconfirmed.
pub fn at_deadline(look: &AfterEnter) -> crate::core::report::Outcome {
    use crate::core::report::Outcome;
    match look {
        AfterEnter::Queued | AfterEnter::Submitted { .. } => Outcome::Delivered,
        AfterEnter::Unsent { .. } | AfterEnter::Dialog(_) | AfterEnter::Unclear => Outcome::Unconfirmed,
    }
}

/// Remove what must never reach a pane: C0 controls (ESC included, so an
/// embedded `\e[201~` cannot end the paste), DEL and C1 controls. Newlines are
/// kept (CRLF and CR become LF); tabs become spaces (a tab may trigger completion).
pub fn sanitize(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    text.chars()
        .filter_map(|c| match c {
            '\n' => Some('\n'),
            '\t' => Some(' '),
            c if (c as u32) < 0x20 || c == '\u{7f}' || ('\u{80}'..='\u{9f}').contains(&c) => None,
            c => Some(c),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Patterns {
        PatternSpec {
            ready: vec![r"^demo> $".into()],
            pending: vec![r"^demo> \S".into()],
            queued: vec![r"^demo> \(1 queued\)$".into()],
            paste_marker: vec![r"\[pasted \d+ chars\]".into()],
            busy: vec!["working…".into()],
            dialog: vec!["Do you trust the files".into()],
            usage_limit: Vec::new(),
            usage_limit_menu: Vec::new(),
            input_lines: Some(1),
        }
        .compile()
        .unwrap()
    }

    #[test]
    fn screens_are_judged() {
        let p = demo();
        assert_eq!(assess("hello\ndemo> \n\n", &p), Screen::Ready);
        assert_eq!(assess("demo> [pasted 12 chars]", &p), Screen::Pending { marker: true });
        assert_eq!(assess("demo> hi", &p), Screen::Pending { marker: false });
        assert_eq!(assess("working…\ndemo> (1 queued)", &p), Screen::Queued);
        assert_eq!(assess("working…\n", &p), Screen::Busy);
        assert_eq!(assess("", &p), Screen::Unknown);
        assert!(
            matches!(assess("x\n Do you trust the files in this folder?\n", &p), Screen::Dialog(l) if l.contains("trust"))
        );
    }

    #[test]
    fn the_input_area_is_the_last_lines_that_are_not_blank() {
        let mut p = demo();
        p.input_lines = 2;
        // Blank lines between and below do not count; a line above the area does not match.
        let screen = "demo> (1 queued)\n\nnotes\n  \n\ndemo> \n\n\n";
        assert_eq!(assess(screen, &p), Screen::Ready);
        assert_eq!(assess("demo> \n\nnotes\n\ndemo> (1 queued)\n \n", &p), Screen::Queued);
        p.input_lines = 1;
        assert_eq!(assess("demo> \nnotes\n\n", &p), Screen::Unknown);
        assert_eq!(assess("\n\n\n", &p), Screen::Unknown);
    }

    fn claude() -> Patterns {
        let text = include_str!("../../templates/runtimes/claude.toml");
        let v: toml::Value = toml::from_str(text).unwrap();
        let spec: PatternSpec = v["patterns"].clone().try_into().unwrap();
        spec.compile().unwrap()
    }

    #[test]
    fn claude_screens_from_docs_runtimes() {
        let p = claude();
        let rule = "─".repeat(60);
        let box_with = |line: &str, footer: &str| format!("● reply\n\n{rule}\n{line}\n{rule}\n  {footer}\n");
        assert_eq!(assess(&box_with("❯\u{a0}", "? for shortcuts"), &p), Screen::Ready);
        // A message sent while busy waits in Claude Code's queue; the placeholder is not input.
        assert_eq!(
            assess(
                &box_with("❯\u{a0}Press up to edit queued messages", "esc to interrupt"),
                &p
            ),
            Screen::Queued
        );
        let queued = format!(
            "* Actualizing…\n  ❯ probe-one while the first turn is held\n{rule}\n❯\u{a0}Press up to edit queued messages\n{rule}\n  ⏵⏵ accept edits on (shift+tab to cycle) · esc to interrupt · ← for agents\n"
        );
        assert_eq!(assess(&queued, &p), Screen::Queued);
        // Taken into the running turn: echoed above a clear input while the turn goes on.
        let taken = format!(
            "❯ probe-one while the first turn is held\n  Bash(task spawn t1 explore)\n  ⎿  Running…\n✶ Actualizing… (10s · ↓ 57 tokens)\n{rule}\n❯\u{a0}\n{rule}\n  ⏵⏵ accept edits on (shift+tab to cycle) · esc to interrupt · ← for agents\n"
        );
        assert_eq!(assess(&taken, &p), Screen::Ready);
        // Handed back by Esc: the text is in the input again.
        assert_eq!(
            assess(
                &box_with("❯\u{a0}probe-one while the first turn is held", "esc to interrupt"),
                &p
            ),
            Screen::Pending { marker: false }
        );
        assert_eq!(
            assess(&box_with("❯\u{a0}hello world", "ctrl+g to edit in Vim"), &p),
            Screen::Pending { marker: false }
        );
        assert_eq!(
            assess(
                &box_with("❯\u{a0}[Pasted text #1 +4 lines]", "paste again to expand"),
                &p
            ),
            Screen::Pending { marker: true }
        );
        // A history echo uses a plain space and is not the input line.
        assert_eq!(assess(&format!("❯ old message\n{rule}\n"), &p), Screen::Unknown);
        let perm = " Do you want to proceed?\n ❯ 1. Yes\n   2. No\n\n Esc to cancel · Tab to amend\n";
        assert!(matches!(assess(perm, &p), Screen::Dialog(_)));
        assert!(matches!(
            assess(" Quick safety check:\n ❯ 1. Yes, I trust this folder\n", &p),
            Screen::Dialog(_)
        ));
        // Claude Code 2.1.332 on an --add-dir folder outside the trusted project, as drawn.
        let add_dir = " Adding a new directory:\n /tmp/x/tasks/t1\n This session hasn't worked here before. \
                       Is this a directory you created or one you trust?\n Claude Code'll be able to read, edit, \
                       and execute files here.\n Security guide\n ❯ No, exit\n   Yes, add it\n Enter to confirm · Esc to cancel\n";
        match assess(add_dir, &p) {
            Screen::Dialog(line) => assert_eq!(crate::core::attention::classify(&line), "trust prompt", "{line}"),
            s => panic!("{s:?}"),
        }
        // Wrapped narrow, the menu line alone still tells it.
        assert!(matches!(
            assess(
                " Is this a directory you created or one\n you trust?\n ❯ No, exit\n   Yes, add it\n",
                &p
            ),
            Screen::Dialog(_)
        ));
    }

    #[test]
    fn after_enter_calls_nothing_submitted_while_it_waits_in_the_queue_or_sits_in_the_input() {
        use AfterEnter::*;
        assert_eq!(after_enter(Screen::Queued, true, false), Queued);
        assert_eq!(after_enter(Screen::Queued, true, true), Queued);
        // Taken from the queue: the hint is gone and the input is clear, busy or not.
        assert_eq!(after_enter(Screen::Ready, false, true), Submitted { was_queued: true });
        assert_eq!(after_enter(Screen::Busy, true, true), Submitted { was_queued: true });
        assert_eq!(after_enter(Screen::Ready, true, false), Submitted { was_queued: false });
        // Back in the input after being queued: handed back, not delivered.
        assert_eq!(
            after_enter(Screen::Pending { marker: false }, true, true),
            Unsent { handed_back: true }
        );
        assert_eq!(
            after_enter(Screen::Pending { marker: true }, true, false),
            Unsent { handed_back: false }
        );
        // The screen the paste went into, unchanged, proves nothing.
        assert_eq!(after_enter(Screen::Ready, false, false), Unclear);
        assert_eq!(after_enter(Screen::Unknown, true, true), Unclear);
        assert_eq!(
            after_enter(Screen::Dialog("Do you want to proceed?".into()), true, true),
            Dialog("Do you want to proceed?".into())
        );
    }

    #[test]
    fn an_id_only_in_the_input_is_unsent_and_one_echoed_or_queued_was_submitted() {
        let id = "[checkin c-abc123]";
        let d = demo();
        assert_eq!(sighting("demo> \n", id, &d), Sighting::Nowhere);
        assert_eq!(
            sighting(&format!("demo: idle\ndemo> …decide.⏎{id}"), id, &d),
            Sighting::Unsent
        );
        // A collapsed paste shows no text; an echo above the input was submitted.
        assert_eq!(sighting("demo> [pasted 900 chars]", id, &d), Sighting::Nowhere);
        assert_eq!(
            sighting(&format!("demo> Check-in {id}\ndemo: received\ndemo> "), id, &d),
            Sighting::Submitted
        );
        let p = claude();
        let rule = "─".repeat(60);
        // Pasted but not submitted: the tag ends the text in the input box.
        let unsent = format!(
            "● reply\n{rule}\n❯\u{a0}Check-in for task t1.\n  Decide.\n  {id}\n{rule}\n  ctrl+g to edit in Vim\n"
        );
        assert_eq!(sighting(&unsent, id, &p), Sighting::Unsent);
        // Echoed in the history just above the box, with other text typed in the input.
        let echoed = format!("❯ Check-in for task t1.\n  {id}\n● ok\n{rule}\n❯\u{a0}typed by a human\n{rule}\n  x\n");
        assert_eq!(sighting(&echoed, id, &p), Sighting::Submitted);
        // Waiting in Claude Code's queue: accepted, not to be sent again.
        let queued = format!(
            "* Working…\n  ❯ Check-in for task t1. {id}\n{rule}\n❯\u{a0}Press up to edit queued messages\n{rule}\n  esc to interrupt\n"
        );
        assert_eq!(sighting(&queued, id, &p), Sighting::Submitted);
        // The same id both echoed and in the input is never submitted again.
        let both = format!("❯ {id}\n{rule}\n❯\u{a0}{id}\n{rule}\n");
        assert_eq!(sighting(&both, id, &p), Sighting::Submitted);
    }

    #[test]
    fn a_message_still_queued_when_the_wait_ends_was_accepted_and_is_not_sent_again() {
        use crate::core::report::Outcome;
        assert_eq!(at_deadline(&AfterEnter::Queued), Outcome::Delivered);
        assert_eq!(
            at_deadline(&AfterEnter::Submitted { was_queued: true }),
            Outcome::Delivered
        );
        // Handed back into the input, or never seen taken: it may sit there unsent.
        assert_eq!(
            at_deadline(&AfterEnter::Unsent { handed_back: true }),
            Outcome::Unconfirmed
        );
        assert_eq!(
            at_deadline(&AfterEnter::Unsent { handed_back: false }),
            Outcome::Unconfirmed
        );
        assert_eq!(at_deadline(&AfterEnter::Unclear), Outcome::Unconfirmed);
        assert_eq!(at_deadline(&AfterEnter::Dialog("x".into())), Outcome::Unconfirmed);
    }

    #[test]
    fn sanitize_strips_controls_and_paste_end() {
        assert_eq!(sanitize("a\x1b[201~b"), "a[201~b");
        assert_eq!(sanitize("x\r\ny\rz"), "x\ny\nz");
        assert_eq!(sanitize("t\tu\x07\x7f\u{9b}v"), "t uv");
        assert_eq!(sanitize("ünï 日本"), "ünï 日本");
        assert_eq!(sanitize("$(touch /tmp/x); `rm`"), "$(touch /tmp/x); `rm`");
    }

    #[test]
    fn bad_regex_is_named() {
        let e = PatternSpec {
            ready: vec!["(".into()],
            ..Default::default()
        }
        .compile()
        .unwrap_err();
        assert!(e.contains("ready pattern"), "{e}");
    }
}
