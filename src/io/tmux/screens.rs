//! Screens kept between looks: the supervisor looks at every agent's screen every few
//! seconds and at every check-in, and most agents are idle. A screen is captured again
//! only when tmux's activity time shows output since the last capture.

use std::time::Duration;

use super::{PaneInfo, Tmux};
use crate::core::error::Result;

/// The screens one handle (and its clones) captured, by server and pane.
pub(super) type Screens = std::collections::HashMap<(String, String), Captured>;

/// A screen captured earlier, with what tmux said of its pane then.
#[derive(Debug, Clone)]
pub(super) struct Captured {
    /// The pane's activity time (whole seconds) in the listing the capture followed.
    activity: i64,
    /// The second (epoch, this machine's clock) in which the capture was asked for.
    asked_secs: i64,
    /// When, on the monotonic clock.
    at: std::time::Instant,
    screen: String,
}

/// A screen is taken again at least this often, whatever tmux says of the pane.
const SCREEN_MAX_AGE: Duration = Duration::from_secs(60);

/// Whether an earlier capture still shows the pane, from tmux's activity time, which every
/// output moves (in whole seconds). Pure. The time must be the one recorded with the capture
/// and lie in a second before the capture was asked for: output after the capture then
/// moves it to that second or later, so an unchanged time means no output since. A capture
/// asked for in the same second as the activity proves nothing (output later in that second
/// leaves the time as it is) and is taken again.
fn screen_unchanged(activity_then: i64, asked_secs: i64, activity_now: i64, age: Duration) -> bool {
    activity_now > 0 && activity_now == activity_then && activity_then < asked_secs && age < SCREEN_MAX_AGE
}

impl Tmux {
    /// The screen of a live local pane, captured again only when tmux shows output since the
    /// last capture ([`screen_unchanged`]). The supervisor looks at every agent's screen every
    /// few seconds and at every check-in; most agents are idle, and a capture is a tmux client
    /// process and work in the server. Remote panes are always captured (their activity time
    /// is on another clock). The screens are kept with this handle, shared by its clones.
    pub async fn capture_unless_unchanged(&self, p: &PaneInfo) -> Result<String> {
        let tmux = self;
        if tmux.is_remote() {
            return tmux.capture(&p.pane_id).await;
        }
        let key = (p.server.0.clone(), p.pane_id.clone());
        let lock = || self.screens.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = lock().get(&key) {
            if screen_unchanged(c.activity, c.asked_secs, p.activity, c.at.elapsed()) {
                return Ok(c.screen.clone());
            }
        }
        // The system clock, as tmux's (never the pinned `SOURCE_DATE_EPOCH` of crate::clock).
        let asked_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let at = std::time::Instant::now();
        let screen = tmux.capture(&p.pane_id).await?;
        let mut screens = lock();
        if screens.len() > 4096 {
            screens.retain(|_, c| c.at.elapsed() < SCREEN_MAX_AGE);
        }
        screens.insert(
            key,
            Captured {
                activity: p.activity,
                asked_secs,
                at,
                screen: screen.clone(),
            },
        );
        Ok(screen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_is_reused_only_when_no_output_can_have_followed_it() {
        let fresh = Duration::from_secs(3);
        // Last output at 100, captured in second 101, still 100: nothing since.
        assert!(screen_unchanged(100, 101, 100, fresh));
        // Output since: the time moved.
        assert!(!screen_unchanged(100, 101, 102, fresh));
        assert!(!screen_unchanged(100, 101, 101, fresh));
        // Captured in the second of the last output: more may have come in that second.
        assert!(!screen_unchanged(100, 100, 100, fresh));
        // Too old, or no activity time at all: taken again.
        assert!(!screen_unchanged(100, 101, 100, SCREEN_MAX_AGE));
        assert!(!screen_unchanged(0, 101, 0, fresh));
    }
}
