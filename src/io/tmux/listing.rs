//! The server's panes, listed: the one question the daemon asks of tmux most often.

use super::control;
use super::panes::{PANE_FORMAT, parse_pane, unreaped};
use super::{PaneInfo, Tmux, find_pane, tmux_missing};
use crate::core::error::Result;

/// A pane listing as shared between the daemon's looks ([`Tmux::list_panes_expecting`]).
pub type Panes = std::sync::Arc<Vec<PaneInfo>>;

/// A pane listing and when it was asked.
pub(super) type Listing = (std::time::Instant, Panes);

/// How old a shared pane listing may be ([`Tmux::list_panes_expecting`]).
pub const RECENT: std::time::Duration = std::time::Duration::from_secs(1);

impl Tmux {
    /// A pane listing shared with every clone of this handle when it is under [`RECENT`]
    /// old and shows every pane of `alive` (pane id, recorded server) there and alive; a
    /// fresh [`Tmux::list_panes`] otherwise. Why: the daemon looks at each task's panes on
    /// every tick (deaths, lanes, attention), so 50 tasks listed a whole server ten times a
    /// second. Why it cannot hide a death or invent one: a pane missing or dead is only ever
    /// concluded from a fresh listing (anything a caller expects alive and does not find
    /// makes one), and one found alive was alive at most [`RECENT`] ago.
    pub async fn list_panes_expecting(&self, alive: &[(&str, Option<&str>)]) -> Result<Panes> {
        {
            let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, panes)) = recent.as_ref()
                && at.elapsed() < RECENT
                && alive
                    .iter()
                    .all(|(id, server)| find_pane(panes, id, *server).is_some_and(|p| !p.dead))
            {
                return Ok(panes.clone());
            }
        }
        let asked = std::time::Instant::now();
        let panes = std::sync::Arc::new(self.list_panes_fresh().await?);
        *self.recent.lock().unwrap_or_else(|e| e.into_inner()) = Some((asked, panes.clone()));
        Ok(panes)
    }

    /// Every pane on the server, in one call (two when tmux has a pane to reap).
    /// Empty when no server runs.
    pub async fn list_panes(&self) -> Result<Vec<PaneInfo>> {
        let asked = std::time::Instant::now();
        let panes = self.list_panes_fresh().await?;
        *self.recent.lock().unwrap_or_else(|e| e.into_inner()) = Some((asked, std::sync::Arc::new(panes.clone())));
        Ok(panes)
    }

    async fn list_panes_fresh(&self) -> Result<Vec<PaneInfo>> {
        let mut panes = self.list_panes_once().await?.unwrap_or_default();
        if panes.iter().any(|p| p.session == control::SESSION) {
            if self.control.is_some() && panes.iter().all(|p| p.session == control::SESSION) {
                // Nothing left to watch: the server should end as it would without us.
                let _changing = self.changing().await;
                let _ = self
                    .run(
                        "end the control session",
                        &["kill-session", "-t", &format!("={}", control::SESSION)],
                    )
                    .await;
            }
            panes.retain(|p| p.session != control::SESSION);
        }
        if !panes.iter().any(unreaped) {
            return Ok(panes);
        }
        // A child of the server ending makes it reap every zombie (see the module doc).
        // Bounded: a server that cannot reap at all (SIGCHLD blocked) never ends the job.
        let nudge = self.output(self.command(&["run-shell", "true"]));
        let nudged = tokio::time::timeout(std::time::Duration::from_secs(2), nudge).await;
        if !matches!(nudged, Ok(Ok(ref o)) if o.status.success()) {
            return Ok(panes);
        }
        let mut again = self.list_panes_once().await?.unwrap_or(panes);
        again.retain(|p| p.session != control::SESSION);
        Ok(again)
    }

    /// `None` when list-panes fails (no server).
    async fn list_panes_once(&self) -> Result<Option<Vec<PaneInfo>>> {
        let args = ["list-panes", "-a", "-F", PANE_FORMAT];
        if let Some(c) = &self.control
            && let control::Outcome::Answered(reply) = c.run(&args).await
            && reply.ok
        {
            return Ok(Some(
                String::from_utf8_lossy(&reply.output)
                    .lines()
                    .filter_map(parse_pane)
                    .collect(),
            ));
        }
        let out = self
            .output(self.command(&args))
            .await
            .map_err(|e| tmux_missing("list panes", e))?;
        if !out.status.success() {
            tracing::debug!(stderr = %String::from_utf8_lossy(&out.stderr).trim(), "list-panes failed (no server?)");
            return Ok(None);
        }
        Ok(Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(parse_pane)
                .collect(),
        ))
    }

    /// One pane by id; `None` when it no longer exists.
    pub async fn pane(&self, pane_id: &str) -> Result<Option<PaneInfo>> {
        // One pane asked for by id costs one line, not a listing of every pane on a
        // server that may hold hundreds. Only "alive" is taken from it: a pane missing,
        // dead or not yet reaped is concluded from a full listing, as everywhere else.
        if let Ok(out) = self.run_hot("look at a pane", &look_args(pane_id), false).await
            && let Some(p) = alive_in(&out, pane_id)
        {
            return Ok(Some(p));
        }
        Ok(self.list_panes().await?.into_iter().find(|p| p.pane_id == pane_id))
    }

    /// [`Tmux::pane`], and the pane's screen when it is alive: the look and the capture in
    /// one exchange with the control client, so delivery's first look at a pane wakes the
    /// daemon once. The screen is `None` when it could not be had that way (no control
    /// client, or the look did not find the pane alive): the caller captures it itself.
    pub async fn pane_and_capture(&self, pane_id: &str) -> Result<(Option<PaneInfo>, Option<String>)> {
        if let Some(c) = &self.control {
            let out = c.run_all(&[&look_args(pane_id), &super::capture_args(pane_id)]).await;
            let answer = |i: usize| match out.get(i) {
                Some(control::Outcome::Answered(r)) if r.ok => Some(String::from_utf8_lossy(&r.output).into_owned()),
                _ => None,
            };
            if let Some(p) = answer(0).and_then(|out| alive_in(&out, pane_id)) {
                return Ok((Some(p), answer(1)));
            }
        }
        Ok((self.pane(pane_id).await?, None))
    }
}

/// The one-line look at a pane by id ([`Tmux::pane`]).
fn look_args(pane_id: &str) -> [&str; 5] {
    ["display-message", "-p", "-t", pane_id, PANE_FORMAT]
}

/// `pane_id`, alive, in the answer to [`look_args`]; `None` says nothing for sure (a missing,
/// dead or not yet reaped pane is concluded from a full listing).
fn alive_in(out: &str, pane_id: &str) -> Option<PaneInfo> {
    parse_pane(out.trim_end()).filter(|p| p.pane_id == pane_id && !p.dead)
}
