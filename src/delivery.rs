//! Verified delivery of text into an agent's pane.
//!
//! The classic failure of tools in this field is a message pasted but never
//! submitted, submitted twice, or sent before the agent was ready. Delivery is
//! one function: strip control characters, wait until the input area is ready,
//! paste once (bracketed, from a buffer), press Enter, then read the pane until
//! the input area no longer holds the text — pressing Enter again (bounded)
//! while a paste marker is left, never pasting twice — and report delivered,
//! unconfirmed or failed with the reason.
//!
//! One delivery at a time per pane, whoever sends it: the whole sequence runs under the
//! pane's cross-process lock ([`crate::pane_lock`]), and the paste goes only into an
//! input area seen empty on the very capture taken last before it, so a message is never
//! glued to another sender's paste and reported delivered on its own.
//!
//! What "ready", "pending", "busy" and "dialog" look like differs per runtime;
//! those patterns come from the runtime profile (templates/runtimes/*.toml or
//! the user's config), never from code.

use std::time::{Duration, Instant};

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::tmux::Tmux;

/// Screen patterns of one runtime, as written in its profile (regexes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PatternSpec {
    /// The input area is empty and accepting input.
    pub ready: Vec<String>,
    /// The input area holds text that has not been submitted.
    pub pending: Vec<String>,
    /// A collapsed paste is still in the input area (e.g. `[Pasted text #1`).
    pub paste_marker: Vec<String>,
    /// The agent is working.
    pub busy: Vec<String>,
    /// A permission or trust dialog waits for a human.
    pub dialog: Vec<String>,
    /// The agent stopped at a usage or rate limit and will need a nudge once it resets
    /// (see [`crate::attention`]); the matching line is where the reset time is read from.
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
    ready: Vec<Regex>,
    pending: Vec<Regex>,
    paste_marker: Vec<Regex>,
    busy: Vec<Regex>,
    dialog: Vec<Regex>,
    usage_limit: Vec<Regex>,
    usage_limit_menu: Vec<Regex>,
    input_lines: usize,
}

fn compile(list: &[String], what: &str) -> std::result::Result<Vec<Regex>, String> {
    list.iter()
        .map(|p| cached_regex(&format!("(?m){p}")).map_err(|e| format!("{what} pattern {p:?}: {e}")))
        .collect()
}

/// A compiled regex, built once per process for each pattern text. The supervisor resolves
/// a runtime (and so compiles its patterns) for every look at a pane and every delivery;
/// compiling them again each time was a visible share of the daemon's CPU under load. A
/// `Regex` is immutable and cheap to clone, so the same text always gives the same regex.
fn cached_regex(text: &str) -> std::result::Result<Regex, regex::Error> {
    static CACHE: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, Regex>>> =
        std::sync::LazyLock::new(Default::default);
    if let Some(r) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(text) {
        return Ok(r.clone());
    }
    let r = Regex::new(text)?;
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(text.to_string(), r.clone());
    Ok(r)
}

impl PatternSpec {
    /// Compile; an invalid regex names the pattern.
    pub fn compile(&self) -> std::result::Result<Patterns, String> {
        Ok(Patterns {
            ready: compile(&self.ready, "ready")?,
            pending: compile(&self.pending, "pending")?,
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
    /// Input area empty and ready.
    Ready,
    /// Working (and the input area is not recognisably empty).
    Busy,
    /// Nothing recognised (still starting, or an unknown screen).
    Unknown,
}

fn any(list: &[Regex], text: &str) -> bool {
    list.iter().any(|r| r.is_match(text))
}

impl Patterns {
    /// Whether any `busy` pattern matches anywhere on the screen (the agent is working). Pure.
    pub fn is_busy(&self, screen: &str) -> bool {
        any(&self.busy, screen)
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
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    let area = lines[lines.len().saturating_sub(p.input_lines)..].join("\n");
    // Ready before pending: ready patterns describe an empty input line exactly,
    // while a pending pattern may also match a placeholder shown in an empty one.
    if any(&p.paste_marker, &area) {
        Screen::Pending { marker: true }
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

/// The result of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Seen submitted.
    Delivered,
    /// Pasted and Enter pressed, but submission was not seen in time.
    Unconfirmed,
    /// Not pasted (pane gone, never ready, a dialog) or tmux failed.
    Failed,
}

/// What happened, for the CLI, the event log and the check-in ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The outcome.
    pub outcome: Outcome,
    /// Why, in a sentence.
    pub reason: String,
    /// Enter presses used.
    pub enters: u32,
    /// Bytes pasted (after sanitising).
    pub bytes: usize,
}

/// Timing of a delivery.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for the input area to become ready (agent start-up).
    pub ready_timeout: Duration,
    /// How long to wait for the submission to show after Enter.
    pub confirm_timeout: Duration,
    /// Screen polling interval.
    pub poll: Duration,
    /// Extra Enter presses allowed while the text stays in the input area.
    pub enter_retries: u32,
    /// Wait this long after an Enter before pressing it again.
    pub retry_after: Duration,
    /// Enter presses that submit a paste (Kiro 2.11 needs two).
    pub submit_enters: u32,
    /// tmux keys that clear the input area (e.g. `C-c` for Claude Code). Used once per
    /// delivery when unsent text has sat in the input for `stale_after` — the remains of
    /// a delivery interrupted between paste and Enter (a supervisor killed with -9).
    pub clear_keys: Vec<String>,
    /// How long unsent text must sit unchanged before it is cleared.
    pub stale_after: Duration,
    /// How long to wait for another delivery to the same pane to finish before giving up
    /// (not delivered, naming the holder).
    pub lock_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ready_timeout: Duration::from_secs(60),
            confirm_timeout: Duration::from_secs(10),
            poll: Duration::from_millis(20),
            enter_retries: 2,
            retry_after: Duration::from_millis(800),
            submit_enters: 1,
            clear_keys: Vec::new(),
            stale_after: Duration::from_secs(2),
            lock_timeout: Duration::from_secs(120),
        }
    }
}

async fn dead_check(tmux: &Tmux, pane: &str) -> Result<Option<String>> {
    Ok(match tmux.pane(pane).await? {
        None => Some(format!("pane {pane} no longer exists")),
        Some(p) if p.dead => Some(format!(
            "the agent in pane {pane} has exited (status {})",
            p.dead_status.map(|s| s.to_string()).unwrap_or_else(|| "unknown".into())
        )),
        Some(_) => None,
    })
}

/// The longest pause between looks while waiting for a busy agent's input to be ready.
const READY_POLL_MAX: Duration = Duration::from_millis(100);
/// While waiting for the input to be ready, the pane is checked for death this often
/// (and at the first look).
const DEAD_CHECK_EVERY: u32 = 5;

/// The pace of the wait for a ready input area. Pure. An agent that is ready at once is
/// seen at the first look; one that is busy (a PM still working on the last check-in) is
/// looked at less and less often, up to [`READY_POLL_MAX`], and checked for death every
/// [`DEAD_CHECK_EVERY`] looks: every look is a tmux client (a capture, a pane listing), and
/// polling every 20 ms with both was most of the supervisor's CPU under load.
#[derive(Debug, Clone)]
struct ReadyWait {
    looks: u32,
    pause: Duration,
}

impl ReadyWait {
    fn new(poll: Duration) -> ReadyWait {
        ReadyWait { looks: 0, pause: poll }
    }

    /// Whether this look checks the pane for death too; counts the look.
    fn check_dead(&mut self) -> bool {
        let due = self.looks % DEAD_CHECK_EVERY == 0;
        self.looks += 1;
        due
    }

    /// The pause before the next look: half as long again each time, at most [`READY_POLL_MAX`]
    /// (never below the first).
    fn next_sleep(&mut self) -> Duration {
        let now = self.pause;
        self.pause = (self.pause * 3 / 2).min(READY_POLL_MAX.max(now));
        now
    }
}

fn report(outcome: Outcome, reason: impl Into<String>, enters: u32, bytes: usize) -> Report {
    Report {
        outcome,
        reason: reason.into(),
        enters,
        bytes,
    }
}

/// Deliver `text` to `pane` and confirm it was submitted. Never pastes twice.
pub async fn deliver(tmux: &Tmux, pane: &str, text: &str, p: &Patterns, o: &Options) -> Result<Report> {
    let clean = sanitize(text);
    let clean = clean.trim_end_matches('\n');
    if clean.trim().is_empty() {
        return Err(Error::BadInput(
            "the message is empty after removing control characters; nothing was sent".into(),
        ));
    }
    let bytes = clean.len();

    // 0. One delivery at a time per pane, across processes; held until this one is judged.
    let who = crate::pane_lock::this_process();
    let _pane_lock = match crate::pane_lock::acquire(&tmux.address(), pane, &who, o.lock_timeout).await? {
        Ok(lock) => lock,
        Err(why) => return Ok(report(Outcome::Failed, why, 0, bytes)),
    };

    // 1. Wait for an empty, ready input area; the capture that shows it is `before`, so
    //    nothing can slip into the input between the look and the paste but a keystroke.
    let start = Instant::now();
    let mut last: Screen;
    let mut pending_since: Option<(Instant, String)> = None;
    let mut cleared = false;
    let mut wait = ReadyWait::new(o.poll);
    let before = loop {
        if wait.check_dead() {
            if let Some(why) = dead_check(tmux, pane).await? {
                return Ok(report(Outcome::Failed, why, 0, bytes));
            }
        }
        let screen = tmux.capture(pane).await?;
        last = match assess(&screen, p) {
            Screen::Ready => break screen,
            s => s,
        };
        if matches!(last, Screen::Pending { .. }) && !cleared && !o.clear_keys.is_empty() {
            match &pending_since {
                Some((t, s)) if *s == screen && t.elapsed() >= o.stale_after => {
                    tracing::info!(pane, "clearing unsent text left in the input area");
                    for k in &o.clear_keys {
                        tmux.send_key(pane, k).await?;
                    }
                    cleared = true;
                }
                Some((_, s)) if *s == screen => {}
                _ => pending_since = Some((Instant::now(), screen.clone())),
            }
        }
        if start.elapsed() >= o.ready_timeout {
            let why = match last {
                Screen::Dialog(line) => format!("waiting for a human: the agent shows a dialog ({line})"),
                Screen::Pending { .. } => "the input area already holds unsent text; not pasting over it".into(),
                Screen::Busy => "the agent stayed busy".into(),
                _ => "the agent's input prompt never appeared".into(),
            };
            return Ok(report(
                Outcome::Failed,
                format!("not ready after {:.0?}: {why}", o.ready_timeout),
                0,
                bytes,
            ));
        }
        tokio::time::sleep(wait.next_sleep()).await;
    };

    // 2. Paste once, from a uniquely named buffer (deleted by -d).
    let buffer = format!("ao-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple());
    tmux.paste(pane, &buffer, clean).await?;

    // 3. See the paste land (or give up looking after a short while).
    let seen_deadline = Instant::now() + Duration::from_secs(2);
    let mut saw_pending = false;
    while Instant::now() < seen_deadline {
        let screen = tmux.capture(pane).await?;
        if matches!(assess(&screen, p), Screen::Pending { .. }) {
            saw_pending = true;
            break;
        }
        if screen != before {
            // Changed but not recognisably pending: give the renderer one more poll.
            tokio::time::sleep(o.poll).await;
            let again = tmux.capture(pane).await?;
            saw_pending = matches!(assess(&again, p), Screen::Pending { .. });
            break;
        }
        tokio::time::sleep(o.poll).await;
    }

    // 4. Never press Enter into a dialog (it would answer it); then Enter, then confirm,
    //    pressing Enter again only while the text is still there.
    if let Screen::Dialog(line) = assess(&tmux.capture(pane).await?, p) {
        return Ok(report(
            Outcome::Unconfirmed,
            format!("a dialog appeared before Enter ({line}); Enter was not pressed, a human must answer it"),
            0,
            bytes,
        ));
    }
    crate::pane_lock::test_pause("AO_TEST_PAUSE_DELIVERY_ENTER").await;
    let mut enters = 0u32;
    for _ in 0..o.submit_enters.max(1) {
        tmux.send_key(pane, "Enter").await?;
        enters += 1;
    }
    let mut last_enter = Instant::now();
    let deadline = Instant::now() + o.confirm_timeout;
    loop {
        tokio::time::sleep(o.poll).await;
        let screen = tmux.capture(pane).await?;
        match assess(&screen, p) {
            Screen::Ready | Screen::Busy if saw_pending || screen != before => {
                return Ok(report(
                    Outcome::Delivered,
                    "submitted: the input area is clear",
                    enters,
                    bytes,
                ));
            }
            Screen::Dialog(line) => {
                return Ok(report(
                    Outcome::Unconfirmed,
                    format!("a dialog appeared after Enter ({line}); a human must answer it"),
                    enters,
                    bytes,
                ));
            }
            Screen::Pending { .. }
                if last_enter.elapsed() >= o.retry_after && enters < o.submit_enters.max(1) + o.enter_retries =>
            {
                tmux.send_key(pane, "Enter").await?;
                enters += 1;
                last_enter = Instant::now();
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            if let Some(why) = dead_check(tmux, pane).await? {
                return Ok(report(Outcome::Unconfirmed, why, enters, bytes));
            }
            return Ok(report(
                Outcome::Unconfirmed,
                format!(
                    "the text was pasted but not seen submitted within {:.0?} ({enters} Enter presses)",
                    o.confirm_timeout
                ),
                enters,
                bytes,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_for_a_busy_agent_slows_down_and_checks_for_death_now_and_then() {
        let mut w = ReadyWait::new(Duration::from_millis(20));
        let sleeps: Vec<u128> = (0..8).map(|_| w.next_sleep().as_millis()).collect();
        assert_eq!(sleeps, [20, 30, 45, 67, 100, 100, 100, 100]);
        let mut w = ReadyWait::new(Duration::from_millis(20));
        let dead: Vec<bool> = (0..11).map(|_| w.check_dead()).collect();
        assert_eq!(
            dead,
            [true, false, false, false, false, true, false, false, false, false, true]
        );
        // A poll configured slower than the cap stays as configured.
        let mut w = ReadyWait::new(Duration::from_millis(300));
        assert_eq!(w.next_sleep(), Duration::from_millis(300));
        assert_eq!(w.next_sleep(), Duration::from_millis(300));
    }

    fn demo() -> Patterns {
        PatternSpec {
            ready: vec![r"^demo> $".into()],
            pending: vec![r"^demo> \S".into()],
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
        assert_eq!(assess("working…\n", &p), Screen::Busy);
        assert_eq!(assess("", &p), Screen::Unknown);
        assert!(
            matches!(assess("x\n Do you trust the files in this folder?\n", &p), Screen::Dialog(l) if l.contains("trust"))
        );
    }

    fn claude() -> Patterns {
        let text = include_str!("../templates/runtimes/claude.toml");
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
        assert_eq!(
            assess(
                &box_with("❯\u{a0}Press up to edit queued messages", "esc to interrupt"),
                &p
            ),
            Screen::Ready
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
