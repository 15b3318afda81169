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
//! A message sent to a busy agent may wait in the agent's own queue (the profile's
//! `queued` patterns). Delivery keeps looking, up to `queued_timeout`, until the agent
//! takes it (the input clear, nothing queued), and presses Enter again (bounded) when the
//! agent hands it back into the input unsent. One still queued when that wait ends is
//! delivered: the agent accepted it and will take it, so sending it again (what an
//! "unconfirmed" invites) would give it twice once the queue drains (issue 13).
//!
//! One delivery at a time per pane, whoever sends it: the whole sequence runs under the
//! pane's cross-process lock ([`crate::io::pane_lock`]), and the paste goes only into an
//! input area seen empty on the very capture taken last before it, so a message is never
//! glued to another sender's paste and reported delivered on its own.
//!
//! What "ready", "pending", "busy" and "dialog" look like differs per runtime;
//! those patterns come from the runtime profile (templates/runtimes/*.toml or
//! the user's config), never from code, and are judged by [`crate::core::screen`].

use std::time::{Duration, Instant};

use crate::core::error::{Error, Result};
use crate::core::report::{Outcome, Report};
use crate::core::screen::{
    AfterEnter, Patterns, Screen, Sighting, after_enter, assess, at_deadline, sanitize, sighting,
};
use crate::io::tmux::Tmux;

/// Timing of a delivery.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for the input area to become ready (agent start-up).
    pub ready_timeout: Duration,
    /// How long to wait for the submission to show after Enter.
    pub confirm_timeout: Duration,
    /// How long to keep looking once the message waits in the agent's queue behind a
    /// running turn (it is taken at the turn's next tool call or when the turn ends).
    pub queued_timeout: Duration,
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
            queued_timeout: Duration::from_secs(60),
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
    Ok(death(pane, tmux.pane(pane).await?))
}

/// Why a pane looked at can take nothing (`None`: it is alive). Pure.
fn death(pane: &str, look: Option<crate::io::tmux::PaneInfo>) -> Option<String> {
    match look {
        None => Some(format!("pane {pane} no longer exists")),
        Some(p) if p.dead => Some(format!(
            "the agent in pane {pane} has exited (status {})",
            p.dead_status.map(|s| s.to_string()).unwrap_or_else(|| "unknown".into())
        )),
        Some(_) => None,
    }
}

/// How many times a message handed back from the agent's queue into its input is
/// submitted again before delivery gives up on it (unconfirmed, the text left unsent).
const RESUBMITS: u32 = 3;

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
    let who = crate::io::pane_lock::this_process();
    let _pane_lock = match crate::io::pane_lock::acquire(&tmux.address(), pane, &who, o.lock_timeout).await? {
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
        // The death check and the capture in one exchange (the capture is taken again
        // only where that could not give it).
        let screen = if wait.check_dead() {
            let (look, screen) = tmux.pane_and_capture(pane).await?;
            if let Some(why) = death(pane, look) {
                return Ok(report(Outcome::Failed, why, 0, bytes));
            }
            match screen {
                Some(s) => s,
                None => tmux.capture(pane).await?,
            }
        } else {
            tmux.capture(pane).await?
        };
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
                Screen::Queued => "a message already waits in the agent's queue behind its running turn".into(),
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

    // 3. See the paste land: the text in the input (or give up looking after a short
    //    while). Only the text counts, never a screen that changed: Claude Code takes a
    //    paste in asynchronously and an Enter at once, and pressed before the text shows,
    //    the Enter lands on an empty input and the text stays unsent — seen mid-turn
    //    (> 0.5 s late, the spinner moving meanwhile) and into a PM just started, whose
    //    first turn began to draw as the check-in went in. A screen that moved without
    //    the text showing moves by itself: the agent is judged as a working one. The first
    //    look waits a poll too: no agent has read the paste and drawn it within the tmux
    //    round trip after it, so a look at once cost a capture and a wake-up for nothing.
    let seen_deadline = Instant::now() + Duration::from_secs(2);
    let (mut saw_pending, mut moved) = (false, false);
    while Instant::now() < seen_deadline {
        tokio::time::sleep(o.poll).await;
        let screen = tmux.capture(pane).await?;
        if matches!(assess(&screen, p), Screen::Pending { .. }) {
            saw_pending = true;
            break;
        }
        moved |= screen != before;
    }

    let mut w = Watch::new(p.is_busy(&before) || moved, saw_pending, o);
    // The look that saw the text is the look before Enter: `assess` finds a dialog before
    // anything in the input, so it showed none, and a second capture a tmux round trip
    // later would cost the daemon and the tmux server a screen for nothing.
    w.dialog_ruled_out = saw_pending;
    submit(tmux, pane, p, o, &before, w, bytes).await
}

/// Submit a message an interrupted delivery left in the input area: pasted, Enter never
/// pressed (a supervisor killed between the two, found again by `needle`, a check-in's
/// id). It is finished as delivery would have finished it — Enter, then confirmed — and
/// never pasted again: a second paste would be glued to it and reach the agent twice.
/// Failed, with nothing pressed, when the input no longer holds it on the look taken under
/// the pane's lock.
pub async fn submit_unsent(tmux: &Tmux, pane: &str, needle: &str, p: &Patterns, o: &Options) -> Result<Report> {
    let who = crate::io::pane_lock::this_process();
    let _pane_lock = match crate::io::pane_lock::acquire(&tmux.address(), pane, &who, o.lock_timeout).await? {
        Ok(lock) => lock,
        Err(why) => return Ok(report(Outcome::Failed, why, 0, 0)),
    };
    if let Some(why) = dead_check(tmux, pane).await? {
        return Ok(report(Outcome::Failed, why, 0, 0));
    }
    let screen = tmux.capture(pane).await?;
    if sighting(&screen, needle, p) != Sighting::Unsent {
        return Ok(report(
            Outcome::Failed,
            format!("{needle} is no longer unsent in the input area; nothing was pressed"),
            0,
            0,
        ));
    }
    let w = Watch::new(p.is_busy(&screen), true, o);
    submit(tmux, pane, p, o, &screen, w, 0).await
}

/// How long an input seen clear after Enter must stay clear before it counts as submitted,
/// for an agent that queues messages and was mid-turn when the text went in. There the
/// message is most likely queued, and the agent draws the cleared input before the queue
/// under it: a frame later on an idle machine, hundreds of milliseconds later on a loaded
/// one (a PM's machine running its tests). Called submitted in that gap, a queued message
/// was no longer watched, and one handed back into the input sat there unsent.
const QUEUE_DRAW_GRACE: Duration = Duration::from_millis(500);

/// Whether `looks` clear looks in a row, the first `clear_for` ago, show the message
/// submitted. Pure. An agent without a queue: the first clear look. One with a queue: the
/// second look in a row (the queue may follow the cleared input by a frame) and, when it
/// was mid-turn and the message was not seen queued yet, [`QUEUE_DRAW_GRACE`] after the
/// first.
fn clear_enough(looks: u32, clear_for: Duration, queues: bool, mid_turn: bool) -> bool {
    !queues || (looks >= 2 && (!mid_turn || clear_for >= QUEUE_DRAW_GRACE))
}

/// What the confirm wait after Enter knows between its looks.
struct Watch {
    /// The agent was working when the text went in, or its screen moved by itself before
    /// the text showed: a changed screen says nothing of the message.
    mid_turn: bool,
    /// The text was seen in the input, before Enter or after: only then does a clear
    /// input mean something on a working agent's screen.
    text_seen: bool,
    /// The look just before Enter was taken (it saw the text, so no dialog): no other.
    dialog_ruled_out: bool,
    /// A look saw the message in the agent's queue; `queued_now`: the last look did.
    was_queued: bool,
    queued_now: bool,
    /// How often the message came back from the queue into the input.
    handed_back: u32,
    /// Clear looks in a row and when the first of them was taken (see `clear_enough`).
    clear_looks: u32,
    clear_since: Option<Instant>,
    enters: u32,
    last_enter: Instant,
    deadline: Instant,
}

impl Watch {
    fn new(mid_turn: bool, text_seen: bool, o: &Options) -> Watch {
        Watch {
            mid_turn,
            text_seen,
            dialog_ruled_out: false,
            was_queued: false,
            queued_now: false,
            handed_back: 0,
            clear_looks: 0,
            clear_since: None,
            enters: 0,
            last_enter: Instant::now(),
            deadline: Instant::now() + o.confirm_timeout,
        }
    }

    /// Press Enter, counted.
    async fn enter(&mut self, tmux: &Tmux, pane: &str) -> Result<()> {
        tmux.send_key(pane, "Enter").await?;
        self.enters += 1;
        self.last_enter = Instant::now();
        Ok(())
    }

    /// Judge one look after Enter, counting clear looks in a row.
    fn judge(&mut self, screen: &str, before: &str, p: &Patterns) -> AfterEnter {
        let now = assess(screen, p);
        self.text_seen |= matches!(now, Screen::Pending { .. });
        let changed = self.text_seen || (!self.mid_turn && screen != before);
        let look = after_enter(now, changed, self.was_queued);
        if matches!(look, AfterEnter::Submitted { .. }) {
            self.clear_looks += 1;
            self.clear_since.get_or_insert_with(Instant::now);
        } else {
            (self.clear_looks, self.clear_since) = (0, None);
        }
        look
    }

    /// Whether the clear looks so far show the message submitted.
    fn clear_long_enough(&self, p: &Patterns) -> bool {
        let clear_for = self.clear_since.map_or(Duration::ZERO, |t| t.elapsed());
        clear_enough(
            self.clear_looks,
            clear_for,
            p.queues(),
            self.mid_turn && !self.was_queued,
        )
    }
}

/// Steps 4 on of a delivery: Enter into a pane whose input holds the text, then confirm.
/// `before`: the screen the text went into; `w`: what is known of it so far (see `Watch`).
async fn submit(
    tmux: &Tmux,
    pane: &str,
    p: &Patterns,
    o: &Options,
    before: &str,
    mut w: Watch,
    bytes: usize,
) -> Result<Report> {
    // 4. Never press Enter into a dialog (it would answer it); then Enter, then confirm,
    //    pressing Enter again only while the text is still there.
    if !w.dialog_ruled_out
        && let Screen::Dialog(line) = assess(&tmux.capture(pane).await?, p)
    {
        return Ok(report(
            Outcome::Unconfirmed,
            format!("a dialog appeared before Enter ({line}); Enter was not pressed, a human must answer it"),
            0,
            bytes,
        ));
    }
    crate::io::hooks::pause(crate::io::hooks::Point::DeliveryEnter).await;
    // The confirm wait is counted from the first Enter.
    w.deadline = Instant::now() + o.confirm_timeout;
    for _ in 0..o.submit_enters.max(1) {
        w.enter(tmux, pane).await?;
    }
    loop {
        tokio::time::sleep(o.poll).await;
        let screen = tmux.capture(pane).await?;
        let look = w.judge(&screen, before, p);
        match &look {
            // Not yet: the queue may still be drawn under the cleared input.
            AfterEnter::Submitted { .. } if !w.clear_long_enough(p) => {}
            AfterEnter::Submitted { was_queued } => {
                let reason = if *was_queued {
                    "submitted: taken from the agent's queue, the input area is clear"
                } else {
                    "submitted: the input area is clear"
                };
                return Ok(report(Outcome::Delivered, reason, w.enters, bytes));
            }
            AfterEnter::Dialog(line) => {
                return Ok(report(
                    Outcome::Unconfirmed,
                    format!("a dialog appeared after Enter ({line}); a human must answer it"),
                    w.enters,
                    bytes,
                ));
            }
            AfterEnter::Queued => {
                if !w.queued_now {
                    tracing::info!(pane, "the message waits in the agent's queue behind its running turn");
                    w.deadline = w.deadline.max(Instant::now() + o.queued_timeout);
                }
                w.was_queued = true;
            }
            AfterEnter::Unsent { handed_back: true } if w.queued_now && w.handed_back < RESUBMITS => {
                tracing::info!(
                    pane,
                    "the agent handed the queued message back into its input; submitting it again"
                );
                w.enter(tmux, pane).await?;
                w.handed_back += 1;
            }
            AfterEnter::Unsent { .. }
                if w.last_enter.elapsed() >= o.retry_after
                    && w.enters < o.submit_enters.max(1) + o.enter_retries + w.handed_back =>
            {
                w.enter(tmux, pane).await?;
            }
            _ => {}
        }
        w.queued_now = look == AfterEnter::Queued;
        if Instant::now() >= w.deadline {
            if let Some(why) = dead_check(tmux, pane).await? {
                return Ok(report(Outcome::Unconfirmed, why, w.enters, bytes));
            }
            return Ok(when_the_wait_ends(&look, &w, o, bytes));
        }
    }
}

/// What a delivery not seen submitted reports when its wait ends, from its last look. Pure.
fn when_the_wait_ends(look: &AfterEnter, w: &Watch, o: &Options, bytes: usize) -> Report {
    let enters = w.enters;
    // Still queued when the wait ends: the agent accepted it (see `at_deadline`).
    if at_deadline(look) == Outcome::Delivered {
        let reason = if *look == AfterEnter::Queued {
            format!(
                "queued: the agent accepted the message into its queue behind its running turn \
                 and still holds it there after {:.0?}; it takes it at the turn's next tool call \
                 or when the turn ends ({enters} Enter presses)",
                o.queued_timeout
            )
        } else {
            "submitted: the input area is clear".to_string()
        };
        return report(Outcome::Delivered, reason, enters, bytes);
    }
    let why = match look {
        AfterEnter::Unsent { handed_back: true } => format!(
            "the agent handed the queued message back into its input {} times; \
             it sits there unsent ({enters} Enter presses)",
            w.handed_back
        ),
        _ => format!(
            "the text was pasted but not seen submitted within {:.0?} ({enters} Enter presses)",
            o.confirm_timeout
        ),
    };
    report(Outcome::Unconfirmed, why, enters, bytes)
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

    #[test]
    fn a_clear_input_counts_at_once_without_a_queue_and_after_the_grace_when_the_agent_was_mid_turn() {
        let ms = Duration::from_millis;
        // No queue of its own: the first clear look.
        assert!(clear_enough(1, ms(0), false, true));
        // A queue: the second look in a row, at once when the agent was idle.
        assert!(!clear_enough(1, ms(0), true, false));
        assert!(clear_enough(2, ms(20), true, false));
        // Mid-turn: still not on the second look, nor on the tenth, before the grace.
        assert!(!clear_enough(2, ms(20), true, true));
        assert!(!clear_enough(10, QUEUE_DRAW_GRACE - ms(1), true, true));
        assert!(clear_enough(10, QUEUE_DRAW_GRACE, true, true));
        // The grace never stands in for the second look.
        assert!(!clear_enough(1, ms(5000), true, true));
    }
}
