//! One actor per supervised task: the only code in the daemon that runs the
//! task's check-ins, so two never overlap and no state is shared.
//!
//! The actor also keeps the task's schedule. It sleeps until the `next_checkin`
//! saved in pm_state.json, never a timer counted from its own start: a daemon
//! restarted every few minutes still checks in on time, and a check-in missed
//! while it was down runs as soon as it is back.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::deaths::{deaths, handle_pm_death};
use super::state_guard::Guard;
use super::timing::{DEBOUNCE, LIVENESS_EVERY, handoff_due, hold_until, pass_over_pull};
use crate::app::checkin;
use crate::core::checkin::Signal;
use crate::core::clock;
use crate::core::handoff;
use crate::core::report::Outcome;
use crate::core::report::Trigger;
use crate::io::schedule::{self, Schedule};
use crate::io::tmux::Tmux;
use crate::store::handoffs;
use crate::store::task::Task;

/// How often remote hosts are pulled: the fallback for a missed remote watch event
/// ([`crate::io::remote::watch`] pulls as soon as a remote handoff is written). A test
/// makes it long to prove a handoff came by the watch.
fn pull_every() -> Duration {
    crate::io::hooks::get().pull_every.unwrap_or(Duration::from_secs(2))
}
/// After an undelivered check-in, try again this soon.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Messages an actor understands.
#[derive(Debug)]
pub enum Msg {
    /// Something may have changed in handoffs/ (the reconcile tick, a rescan).
    Hint,
    /// The named handoff was closed after writing or renamed into place.
    Final(String, handoffs::How),
    /// Check in now and send back the report as JSON.
    CheckinNow(oneshot::Sender<crate::core::wire::Response>),
    /// An agent was spawned (maybe on a remote host, to be watched and pulled).
    Spawned,
    /// Rotate the PM now for the caller named (`task rotate`), and send back the answer.
    RotateNow(String, oneshot::Sender<crate::core::wire::Response>),
}

/// A cheap handle on a running actor.
#[derive(Debug, Clone)]
pub struct Handle {
    /// Its mailbox.
    pub tx: mpsc::Sender<Msg>,
}

/// Start the actor for `task`.
pub fn spawn(task: Task, tmux: Tmux) -> (Handle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(64);
    let join = tokio::spawn(run(task, tmux, rx));
    (Handle { tx }, join)
}

/// Whether a new handoff is worth an immediate check-in: a terminal status, the PM's
/// own included (its COMPLETE or BLOCKED is what moves the task's phase, and a check-in
/// is what records it).
fn wakes_the_pm(l: &handoff::Loaded) -> bool {
    l.handoff.status.is_terminal()
}

/// What a look at the handoffs not yet in the ledger found.
#[derive(Debug, Default)]
struct Pending {
    /// A final handoff that wakes the PM is among them.
    wake: bool,
    /// When each of the others still settling becomes final, if it stays as it is.
    settling: Vec<Instant>,
}

/// Look at every handoff not yet in the ledger. Each one is observed, terminal or not, so
/// the quiet time of a file no event announced (written while no daemon watched: before a
/// start, during a restart) runs from the first scan after the start, not from the
/// check-in that would otherwise leave it out.
fn pending(task: &Task, quiet: &handoffs::Quiet) -> Pending {
    let Ok(st) = task.state() else {
        return Pending::default();
    };
    let dir = task.handoffs();
    let Ok(listing) = handoffs::listing(&dir) else {
        return Pending::default();
    };
    let Ok(found) = handoffs::scan_listing(&st.ledger, &dir, &listing) else {
        return Pending::default();
    };
    let mut p = Pending::default();
    for c in &found.cands {
        if quiet.ready(&dir, &c.loaded) {
            p.wake |= wakes_the_pm(&c.loaded);
        } else if let Some(t) = quiet.settles_at(&c.loaded.file) {
            p.settling.push(t.into());
        }
    }
    p
}

/// The task's schedule from task.md `checkin:` (read each time, so an edit applies
/// without a restart). A bad one turns scheduled check-ins off for the task;
/// handoffs still wake the PM.
fn schedule_of(task: &Task) -> std::result::Result<Schedule, String> {
    let setting = task.spec().ok().and_then(|s| s.setting("checkin").map(str::to_string));
    Schedule::parse(setting.as_deref())
}

/// When the next scheduled check-in is due, from what pm_state.json saved
/// (see [`Schedule::resume`]); `None` when the task has no usable schedule,
/// which is logged once per distinct problem (`warned`), not at every look.
fn next_due(
    task: &Task,
    now: chrono::DateTime<chrono::Utc>,
    warned: &mut Option<String>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let sched = match schedule_of(task) {
        Ok(s) => {
            *warned = None;
            s
        }
        Err(e) => {
            if warned.as_deref() != Some(e.as_str()) {
                tracing::warn!(task = %task.name, error = %e, "bad check-in schedule; scheduled check-ins are off for this task");
                *warned = Some(e);
            }
            return None;
        }
    };
    let st = task.state().ok()?;
    sched.resume(st.next_checkin, st.last_checkin, now)
}

/// The tokio instant for a wall-clock time (now when it is past).
fn instant_at(due: chrono::DateTime<chrono::Utc>) -> Instant {
    Instant::now() + schedule::until(due, clock::now())
}

/// Why the actor checks in. Every check-in it runs goes through [`Actor::check_in`]
/// with one of these: the one place that says what follows a check-in of each kind.
enum Why {
    /// `task checkin` asked the daemon; the report (or the error) goes back.
    Asked,
    /// The task's schedule came due.
    Schedule,
    /// A final handoff the PM must hear of (or a retry of one not delivered).
    Handoff,
    /// Agents died: their signals.
    Deaths(Vec<Signal>),
    /// Someone needs a human or a spoke is paused or rotated: the signals, if any.
    Attention(Vec<Signal>),
}

/// What one task's actor owns and decides with; nothing here is shared.
struct Actor {
    task: Task,
    tmux: Tmux,
    /// The task's handoffs/ folder.
    dir: std::path::PathBuf,
    /// What the watcher said of each handoff, for when it is final.
    quiet: handoffs::Quiet,
    /// When to look at the pending handoffs (a hint, a final handoff, a retry).
    due: Option<Instant>,
    /// Whether the coming look was already held once for handoffs still settling.
    held: bool,
    /// When the last handoff check-in began (the coalescing window runs from there).
    last_start: Option<Instant>,
    /// When the schedule's next check-in is due.
    next_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The schedule problem last logged (each is logged once).
    warned: Option<String>,
    /// Deaths already reported (per agent, server and pane), and hosts found silent.
    reported: BTreeSet<String>,
    /// When to try the PM's restart again.
    pm_retry: Option<Instant>,
    /// When the PM was last seen dead: its restart's backoff counts from there.
    pm_death: Option<chrono::DateTime<chrono::Utc>>,
    guard: Guard,
    watches: super::watches::Watches,
    /// Whether the task has (or may have) remote agents: without any, the pull tick sleeps
    /// rather than read the state every 2 s. The liveness tick sets it from the state.
    remote: bool,
    /// The last periodic pull was passed over for a fresh one ([`Actor::on_pull_tick`]).
    pull_passed_over: bool,
    rotation: crate::app::rotate::Watch,
    /// When this actor last pulled the remote hosts and looked at the screens: a
    /// handoff's check-in skips what was done moments ago.
    lately: crate::app::recent::Lately,
}

impl Actor {
    fn new(task: Task, tmux: Tmux) -> Actor {
        let mut warned = None;
        // The schedule resumes from the saved time, which is saved again if it had to be computed.
        let next_at = next_due(&task, clock::now(), &mut warned);
        if task.state().is_ok_and(|st| st.next_checkin != next_at) {
            if let Err(e) = checkin::save_next_checkin(&task, next_at, clock::now()) {
                tracing::warn!(task = %task.name, error = %e, "cannot save the next check-in time");
            }
        }
        tracing::info!(task = %task.name, next = ?next_at, "check-in schedule");
        Actor {
            dir: task.handoffs(),
            guard: Guard::new(&task),
            task,
            tmux,
            quiet: handoffs::Quiet::default(),
            due: Some(Instant::now()),
            held: false,
            last_start: None,
            next_at,
            warned,
            reported: BTreeSet::new(),
            pm_retry: None,
            pm_death: None,
            watches: super::watches::Watches::default(),
            remote: true,
            pull_passed_over: false,
            rotation: crate::app::rotate::Watch::default(),
            lately: crate::app::recent::Lately::default(),
        }
    }

    /// The schedule's next time, from what pm_state.json says now.
    fn reschedule(&mut self) {
        self.next_at = next_due(&self.task, clock::now(), &mut self.warned);
    }

    /// Run one check-in for `why`, and what follows it: a handoff check-in opens the
    /// coalescing window, is retried when it was not delivered and lets a due PM rotation
    /// run once delivered; a scheduled one that stood down looks again shortly rather
    /// than fire in a loop; every one picks up the schedule's next time.
    async fn check_in(&mut self, why: Why) -> crate::core::error::Result<crate::core::report::CheckinReport> {
        let (trigger, extra) = match why {
            Why::Asked => (Trigger::Manual, Vec::new()),
            Why::Schedule => (Trigger::Schedule, Vec::new()),
            Why::Handoff => (Trigger::Handoff, Vec::new()),
            Why::Deaths(sigs) => (Trigger::Death, sigs),
            Why::Attention(sigs) => (Trigger::Attention, sigs),
        };
        if matches!(trigger, Trigger::Handoff | Trigger::Schedule) {
            // News for the PM never lands in a conversation already past its rotation point.
            if let Ok(ctx) = crate::app::session::Ctx::on(&self.tmux) {
                self.rotation.before_checkin(&ctx, &self.task).await;
            }
        }
        let sent_at = clock::now();
        if trigger == Trigger::Handoff {
            self.last_start = Some(Instant::now());
        }
        let sched = schedule_of(&self.task).ok();
        let ready = handoffs::Ready::Final(&self.quiet, &self.dir);
        let r = checkin::run_with(
            &self.task,
            &self.tmux,
            sent_at,
            trigger,
            extra,
            ready,
            &self.lately,
            sched.as_ref(),
        )
        .await;
        match &r {
            Ok(r) => tracing::info!(
                task = %self.task.name,
                trigger = ?trigger,
                new = r.new_handoffs.len(),
                outcome = ?r.delivery.as_ref().map(|d| d.outcome),
                skipped = r.skipped,
                next = ?r.next_checkin,
                "check-in"
            ),
            Err(e) => tracing::warn!(task = %self.task.name, error = %e, "check-in failed"),
        }
        let delivered = r
            .as_ref()
            .is_ok_and(|r| r.delivery.as_ref().is_some_and(|d| d.outcome == Outcome::Delivered));
        match trigger {
            Trigger::Handoff => {
                // A failed check-in (the state could not be saved, say) is retried too;
                // checkin::storage paces the attempts and calls a human once.
                let retry = match &r {
                    Ok(r) => !r.skipped && !delivered,
                    Err(_) => true,
                };
                if retry {
                    self.due = Some(Instant::now() + RETRY_AFTER);
                }
                // A team that never pauses still gets its PM rotated: once this
                // check-in's turn is over, when a rotation is due.
                if delivered {
                    if let Ok(ctx) = crate::app::session::Ctx::on(&self.tmux) {
                        self.rotation.after_checkin(&ctx, &self.task, sent_at).await;
                    }
                }
                self.reschedule();
            }
            Trigger::Schedule => {
                // One that stood down (another was running) or failed saved no new time.
                let now = clock::now();
                self.next_at = next_due(&self.task, now, &mut self.warned)
                    .map(|t| t.max(now + chrono::Duration::from_std(RETRY_AFTER).expect("fits")));
            }
            Trigger::Manual => self.reschedule(),
            _ => {}
        }
        r
    }

    /// The pending handoffs looked at: a check-in when one wakes the PM, held once (at
    /// most the quiet time) for handoffs about to settle; then the next look.
    async fn on_due(&mut self) {
        self.due = None;
        let found = pending(&self.task, &self.quiet);
        let hold = if found.wake {
            hold_until(&found.settling, Instant::now(), self.held)
        } else {
            None
        };
        self.held = hold.is_some();
        if let Some(t) = hold {
            self.due = Some(t);
        } else if found.wake {
            let _ = self.check_in(Why::Handoff).await;
        }
        // A handoff still settling is looked at again the moment it may be final.
        if self.due.is_none() {
            self.due = self.quiet.next_due().map(Instant::from_std);
        }
    }

    /// A message from the server.
    async fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Spawned => self.remote = true,
            Msg::Hint => {
                if self.due.is_none() {
                    self.due = Some(Instant::now() + DEBOUNCE);
                }
            }
            Msg::Final(file, how) => {
                // Renamed in: final now. Closed after writing: the look at `due` finds
                // it settling and waits for its quiet time. A look held for handoffs
                // still settling waits for them: a second event for the same rename
                // (inotify reports it to and both ways) must not cut that short.
                self.quiet.saw(&self.dir, &file, how);
                if !self.held {
                    self.due = Some(handoff_due(Instant::now(), self.last_start, self.due));
                }
            }
            Msg::RotateNow(by, reply) => {
                let answer = match crate::app::session::Ctx::on(&self.tmux) {
                    Ok(ctx) => crate::app::rotate::asked(&ctx, &self.task, &by).await,
                    Err(e) => Err(e),
                };
                let _ = reply.send(answer.map_or_else(
                    |e| crate::core::wire::Response::error(&e),
                    |r| crate::core::wire::Response::Rotated { rotated: Box::new(r) },
                ));
            }
            Msg::CheckinNow(reply) => {
                let r = self.check_in(Why::Asked).await;
                let _ = reply.send(r.map_or_else(
                    |e| crate::core::wire::Response::error(&e),
                    |r| crate::core::wire::Response::Checkin { report: Box::new(r) },
                ));
            }
        }
    }

    /// A remote handoff was written: the hosts it was written on pulled (not every host of
    /// the task: the others' watches say when they change), then looked at at once (the
    /// watch already folded a burst into one pull: no debounce on top). In this turn, not
    /// the loop's next: a liveness tick or the periodic pull that came round during the
    /// pull would otherwise go first about as often as not, and a remote look at the
    /// screens or a second pull is a remote session each (a fifth of a second here).
    async fn on_remote_change(&mut self, hosts: Vec<crate::core::model::RemoteSpec>) {
        let pulled = crate::app::session::pull_hosts(&self.task, &hosts, &self.lately).await;
        handoffs::Ready::Final(&self.quiet, &self.dir).saw_renamed(&pulled.arrived);
        self.on_due().await;
    }

    /// The periodic pull: the fallback for a missed remote watch event. Passed over once
    /// when a clean pull of the task began within the period (a watch's, a check-in's):
    /// that pull brought what this one would, and a remote handoff's check-in, due the
    /// moment its watch's pull ends, would otherwise wait behind a second pull whenever the
    /// period came round meanwhile. Never twice in a row (a watch's pull brings only its
    /// own host), so a missed event is still caught within two periods.
    async fn on_pull_tick(&mut self) {
        self.watches.refresh(&self.task);
        self.remote = !crate::app::session::remote_hosts(&self.task).is_empty();
        let pass_over = pass_over_pull(self.pull_passed_over, self.lately.pulled.within(pull_every()));
        self.pull_passed_over = self.remote && pass_over;
        if self.remote && !pass_over {
            let pulled = crate::app::session::pull_remotes(&self.task, &self.lately).await;
            handoffs::Ready::Final(&self.quiet, &self.dir).saw_renamed(&pulled.arrived);
            if self.due.is_none() {
                self.due = Some(Instant::now() + DEBOUNCE);
            }
        }
    }

    /// Every few seconds: the state's health, the lanes, deaths, the PM's restart,
    /// dialogs and usage limits, rotations.
    async fn on_liveness(&mut self) {
        let task = &self.task;
        // First: a corrupt state is set aside and reported before anyone else meets it.
        let view = self.guard.look(task, clock::now());
        // A remote agent spawned since the last pull is watched (and pulled) from now on.
        self.remote = view
            .as_ref()
            .is_none_or(|v| v.state.agents.values().any(|a| a.host.remote().is_some()));
        if self.remote {
            self.watches.refresh(task);
        }
        checkin::settle_lanes(
            task,
            &self.tmux,
            handoffs::Ready::Final(&self.quiet, &self.dir),
            clock::now(),
        )
        .await;
        let mut pm_died = None;
        let mut sigs = deaths(task, &self.tmux, view.as_ref(), &mut self.reported, &mut pm_died).await;
        if self.remote {
            let failover = crate::app::failover::wait(task);
            let found =
                super::deaths::remote_deaths(task, view.as_ref(), &mut self.reported, &self.lately, failover).await;
            sigs.extend(found.signals);
            if let Ok(ctx) = crate::app::session::Ctx::on(&self.tmux) {
                for (host, agents, since) in &found.to_move {
                    sigs.extend(crate::app::failover::move_off(&ctx, task, host, agents, *since, clock::now()).await);
                }
            }
            for spec in &found.answering_with_left {
                sigs.extend(crate::app::failover::stop_left_behind(task, spec, clock::now()).await);
            }
            if !found.to_move.is_empty() {
                // A moved agent's new host is watched from now, not from the next tick.
                self.watches.refresh(task);
            }
        }
        if !sigs.is_empty() {
            let _ = self.check_in(Why::Deaths(sigs)).await;
        }
        // Pick up a time saved by someone else (`task start`) or a changed task.md.
        self.reschedule();
        // A restart that cannot be recorded (a newer version's state) is not made.
        if let (Some(t), true) = (pm_died, view.as_ref().is_some_and(|v| v.writable)) {
            self.pm_death = Some(t);
            self.pm_retry = handle_pm_death(&self.task, &self.tmux, t).await;
        }
        // Dialogs and usage limits: the PM hears of a called human or a paused spoke at once.
        if checkin::tend_attention(&self.task, &self.tmux, clock::now(), &self.lately)
            .await
            .worth_a_checkin()
        {
            let _ = self.check_in(Why::Attention(Vec::new())).await;
        }
        // A PM conversation grown past rotate_at is replaced between check-ins (this
        // actor delivers none meanwhile), when no handoff waits to be told or settles.
        if let Ok(ctx) = crate::app::session::Ctx::on(&self.tmux) {
            let calm = || {
                let found = pending(&self.task, &self.quiet);
                self.pm_retry.is_none() && !found.wake && found.settling.is_empty()
            };
            self.rotation.tick(&ctx, &self.task, calm).await;
            // Spokes whose context filled up: a checkpoint, then a fresh session.
            let sigs = crate::app::rotate::tend_spokes(&ctx, &self.task, clock::now()).await;
            if !sigs.is_empty() {
                let _ = self.check_in(Why::Attention(sigs)).await;
            }
        }
    }

    /// The PM's restart, tried again once its backoff has run.
    async fn on_pm_retry(&mut self) {
        self.pm_retry = match self.pm_death {
            Some(t) => handle_pm_death(&self.task, &self.tmux, t).await,
            None => None,
        };
    }
}

/// Whether a look set for `due` is taken without waiting for a timer: when it is due
/// already, unless the last turn of the loop was such a look. Pure.
fn look_now(due: Option<Instant>, now: Instant, looked_at_once: bool) -> bool {
    !looked_at_once && due.is_some_and(|d| d <= now)
}

/// What woke the actor's loop: each is one turn.
enum Turn {
    Due,
    Msg(Msg),
    Schedule,
    RemoteChange(Vec<crate::core::model::RemoteSpec>),
    PullTick,
    Liveness,
    PmRetry,
}

async fn run(task: Task, tmux: Tmux, mut rx: mpsc::Receiver<Msg>) {
    let mut a = Actor::new(task, tmux);
    let mut liveness = tokio::time::interval(LIVENESS_EVERY);
    liveness.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pulls = tokio::time::interval(pull_every());
    pulls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(task = %a.task.name, dir = %a.task.dir().display(), "supervising");
    let mut looked_at_once = false;
    loop {
        // A look due already (a handoff renamed in) is taken now: a timer set for an
        // instant past still waits for the timer wheel's next millisecond and wakes the
        // thread once more for it. Never twice in a row, so a look that leaves another
        // due at once cannot keep the other tasks from the thread.
        looked_at_once = look_now(a.due, Instant::now(), looked_at_once);
        let turn = if looked_at_once {
            Turn::Due
        } else {
            let look_at = a.due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let scheduled = a.next_at.map_or_else(Instant::now, instant_at);
            let restart_at = a.pm_retry.unwrap_or_else(Instant::now);
            tokio::select! {
                msg = rx.recv() => match msg {
                    None => break,
                    Some(m) => Turn::Msg(m),
                },
                _ = tokio::time::sleep_until(scheduled), if a.next_at.is_some() => Turn::Schedule,
                _ = tokio::time::sleep_until(look_at), if a.due.is_some() => Turn::Due,
                hosts = a.watches.changed() => Turn::RemoteChange(hosts),
                _ = pulls.tick(), if a.remote => Turn::PullTick,
                _ = liveness.tick() => Turn::Liveness,
                // A host's heartbeat changed: its agents' task records it now, not at the next tick.
                () = crate::io::health::changed(), if a.remote => Turn::Liveness,
                _ = tokio::time::sleep_until(restart_at), if a.pm_retry.is_some() => Turn::PmRetry,
            }
        };
        // Each turn reads in a pass of its own: what woke it is read afresh, and a check
        // made moments ago in it answers for the turn's next asks ([`crate::store::parsed`]).
        let pass = crate::store::parsed::Pass::open();
        a.task = a.task.in_pass(&pass);
        match turn {
            Turn::Due => a.on_due().await,
            Turn::Msg(m) => a.on_msg(m).await,
            Turn::Schedule => {
                let _ = a.check_in(Why::Schedule).await;
            }
            Turn::RemoteChange(hosts) => a.on_remote_change(hosts).await,
            Turn::PullTick => a.on_pull_tick().await,
            Turn::Liveness => a.on_liveness().await,
            Turn::PmRetry => a.on_pm_retry().await,
        }
        pass.close();
    }
    tracing::info!(task = %a.task.name, "no longer supervised");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_due_already_is_taken_at_once_but_never_twice_in_a_row() {
        let now = Instant::now();
        let later = now + Duration::from_millis(1);
        assert!(look_now(Some(now), now, false));
        assert!(look_now(Some(now), later, false));
        assert!(!look_now(Some(later), now, false), "not due yet: the timer");
        assert!(!look_now(None, now, false));
        assert!(!look_now(Some(now), later, true), "the second in a row waits its turn");
    }
}
