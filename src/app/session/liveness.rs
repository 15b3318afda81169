//! What each recorded agent's pane shows now, for `task status` and the supervisor's look.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ctx;
use crate::core::error::{Error, Result};
use crate::core::model::PaneState;
use crate::io::runtime;
use crate::io::tmux::{PaneInfo, Tmux, find_pane};

/// Liveness of one agent: the state records what was started, this what is true now
/// (`task status`, and the supervisor's look for deaths and dialogs).
#[derive(Debug, Clone, Serialize)]
pub struct Liveness {
    /// Agent name.
    pub agent: String,
    /// What its pane is now.
    pub pane: PaneState,
    /// Exit status when dead.
    pub exit_status: Option<i32>,
    /// The signal that killed it, when dead by a signal.
    pub exit_signal: Option<i32>,
    /// Seconds since the pane's last activity.
    pub idle_secs: Option<i64>,
    /// The pane shows a permission or trust dialog.
    pub waiting_for_human: bool,
    /// What the screen shows, for [`crate::core::attention`].
    #[serde(skip)]
    pub seen: crate::core::attention::Seen,
    /// Whether the screen shows it working or idle, to weigh its client's own reports
    /// against ([`crate::core::turn`]); None when not looked at.
    #[serde(skip)]
    pub activity: Option<crate::core::turn::Activity>,
}

/// Look at every recorded agent's pane (one tmux listing, one capture per live agent),
/// so a status of many agents costs a few tmux calls, not one per question.
pub async fn liveness(ctx: &Ctx, st: &crate::core::model::PmState, now: DateTime<Utc>) -> Result<Vec<Liveness>> {
    // One pane listing per server: the local one, and each remote host's (an unreachable
    // host costs at most a few seconds and marks its agents, never fails the whole view).
    let mut servers: BTreeMap<String, Option<(Tmux, crate::io::tmux::Panes)>> = BTreeMap::new();
    // Running agents are expected alive: a shared recent listing serves when it shows them so.
    let alive: Vec<(&str, Option<&str>)> = st
        .agents
        .values()
        .filter(|a| a.host.is_local() && a.status == crate::core::model::AgentStatus::Running)
        .filter_map(|a| Some((a.pane.as_deref()?, a.tmux_server.as_deref())))
        .collect();
    servers.insert(
        "local".into(),
        Some((ctx.tmux.clone(), ctx.tmux.list_panes_expecting(&alive).await?)),
    );
    for a in st.agents.values() {
        if a.host.is_local() || servers.contains_key(&a.host.to_string()) {
            continue;
        }
        let server = match a.host.remote() {
            Some(r) => {
                let found = async {
                    let host = tokio::time::timeout(Duration::from_secs(5), crate::io::remote::Host::connect(r))
                        .await
                        .map_err(|_| Error::Remote(format!("{} did not answer within 5 s", r.destination())))??;
                    let tmux = host.tmux()?;
                    let panes = tmux.list_panes().await?;
                    Ok::<_, Error>((tmux, std::sync::Arc::new(panes)))
                }
                .await;
                found
                    .map_err(|e| tracing::warn!(host = %r.destination(), error = %e, "host unreachable"))
                    .ok()
            }
            None => None,
        };
        servers.insert(a.host.to_string(), server);
    }
    let mut out = Vec::new();
    for (name, a) in &st.agents {
        let host = a.host.to_string();
        let Some((tmux, panes)) = servers.get(&host).and_then(|s| s.as_ref()) else {
            out.push(Liveness {
                agent: name.clone(),
                pane: PaneState::Unreachable,
                exit_status: None,
                exit_signal: None,
                idle_secs: None,
                waiting_for_human: false,
                seen: crate::core::attention::Seen::Unknown,
                activity: None,
            });
            continue;
        };
        let Some(pane_id) = &a.pane else {
            out.push(Liveness {
                agent: name.clone(),
                pane: PaneState::NotStarted,
                exit_status: None,
                exit_signal: None,
                idle_secs: None,
                waiting_for_human: false,
                seen: crate::core::attention::Seen::Gone,
                activity: None,
            });
            continue;
        };
        let info = find_pane(panes, pane_id, a.tmux_server.as_deref());
        let l = match info {
            None => Liveness {
                agent: name.clone(),
                pane: PaneState::Gone,
                exit_status: None,
                exit_signal: None,
                idle_secs: None,
                waiting_for_human: false,
                seen: crate::core::attention::Seen::Gone,
                activity: None,
            },
            Some(p) => {
                let mut waiting = false;
                let mut activity = None;
                let mut seen = if p.dead {
                    crate::core::attention::Seen::Gone
                } else {
                    crate::core::attention::Seen::Unknown
                };
                if !p.dead {
                    if let Ok(rt) = runtime::resolve(a.runtime.as_deref().unwrap_or("claude")) {
                        if let Ok(screen) = capture_unless_unchanged(tmux, p).await {
                            let assessed = crate::core::screen::assess(&screen, &rt.patterns);
                            waiting = matches!(assessed, crate::core::screen::Screen::Dialog(_));
                            activity = Some(crate::core::turn::activity(rt.patterns.is_busy(&screen), &assessed));
                            seen = crate::core::attention::observe(
                                &screen,
                                &rt.patterns,
                                crate::core::attention::RESUME_TEMPLATE.lines().next().unwrap_or(""),
                            );
                        }
                    }
                }
                Liveness {
                    agent: name.clone(),
                    pane: if p.dead { PaneState::Dead } else { PaneState::Alive },
                    exit_status: p.dead_status.filter(|_| p.dead),
                    exit_signal: p.dead_signal.filter(|_| p.dead),
                    idle_secs: (p.activity > 0).then(|| (now.timestamp() - p.activity).max(0)),
                    waiting_for_human: waiting,
                    seen,
                    activity,
                }
            }
        };
        out.push(l);
    }
    Ok(out)
}

/// A screen captured earlier, with what tmux said of its pane then.
#[derive(Debug, Clone)]
struct Captured {
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

/// The screen of a live local pane, captured again only when tmux shows output since the
/// last capture ([`screen_unchanged`]). The supervisor looks at every agent's screen every
/// few seconds and at every check-in; most agents are idle, and a capture is a tmux client
/// process and work in the server. Remote panes are always captured (their activity time
/// is on another clock).
async fn capture_unless_unchanged(tmux: &Tmux, p: &PaneInfo) -> Result<String> {
    type Screens = std::collections::HashMap<(String, String), Captured>;
    static SCREENS: std::sync::LazyLock<std::sync::Mutex<Screens>> = std::sync::LazyLock::new(Default::default);
    if tmux.is_remote() {
        return tmux.capture(&p.pane_id).await;
    }
    let key = (p.server.0.clone(), p.pane_id.clone());
    let lock = || SCREENS.lock().unwrap_or_else(|e| e.into_inner());
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
