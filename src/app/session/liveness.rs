//! What each recorded agent's pane shows now, for `task status` and the supervisor's look.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ctx;
use crate::core::error::{Error, Result};
use crate::core::model::PaneState;
use crate::io::runtime;
use crate::io::tmux::{Tmux, find_pane};

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
    let mut resolved = runtime::Resolver::default();
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
                    if let Ok(rt) = resolved.get(a.runtime.as_deref().unwrap_or("claude")) {
                        if let Ok(screen) = tmux.capture_unless_unchanged(p).await {
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
