//! A task's status with its panes' liveness merged in.
//!
//! `status::task_status` reads only the task folder (fast, no tmux); what the panes say
//! (alive or dead, exit status, idle time, waiting for a human) is asked of tmux here and
//! written over the matching rows, and each lane's staleness is refreshed from it.

use crate::clock;
use crate::session::{self, Ctx, PaneState};
use crate::status::{self, TaskStatus};
use crate::task::Task;

/// The status of `t`, with liveness when any agent has a pane.
pub(crate) fn with_liveness(t: &Task) -> crate::Result<TaskStatus> {
    let mut s = status::task_status(t)?;
    add_liveness(t, &mut s);
    Ok(s)
}

/// Merge the panes' liveness into `s`. Best effort: status must show even when tmux or
/// the state cannot be reached, so any failure here leaves `s` as the folder says.
fn add_liveness(t: &Task, s: &mut TaskStatus) {
    let Ok(st) = t.state() else { return };
    if !st.agents.values().any(|a| a.pane.is_some()) {
        return;
    }
    let Ok(ctx) = Ctx::from_env() else {
        return;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let Ok(live) = rt.block_on(session::liveness(&ctx, &st, clock::now())) else {
        return;
    };
    for l in live {
        if let Some(row) = s.agents.iter_mut().find(|r| r.name == l.agent) {
            row.pane = Some(l.pane);
            row.exit_status = l.exit_status;
            row.exit_signal = l.exit_signal;
            row.idle_secs = l.idle_secs;
            row.waiting_for_human = l.waiting_for_human;
        }
        if let Some(lane) = s.lanes.iter_mut().find(|r| r.agent == l.agent) {
            lane.refresh(l.idle_secs.filter(|_| l.pane == PaneState::Alive));
        }
    }
}
