//! The spawn gate as a use case: the protocol's decision plus what it leaves behind.
//!
//! `protocol::gate` decides (a spoke may neither start nor message agents; a hub or a
//! human may); this module records a refusal where people look for it — the lane's last
//! outcome in pm_state.json (`task status`) and a `spawn_refused` event — and turns it
//! into the refusal exit code.

use crate::app::session::Ctx;
use crate::core::clock;
use crate::core::protocol::gate;
use crate::core::protocol::reason::Refusal;
use crate::store::task::Task;

/// Let the caller (found from the environment) `verb` ("spawn" or "send") `agent`, or
/// refuse with the gate's advice, recorded, as a [`Refusal`] (exit 6).
pub(crate) fn check(t: &Task, ctx: &Ctx, agent: &str, verb: &str) -> anyhow::Result<()> {
    let st = t.state()?;
    let caller = gate::Caller::from_vars(|k| std::env::var(k).ok(), &ctx.tmux.socket().path());
    let roster = crate::store::roster::for_task(t)?;
    let (reason, advice) = gate::decide(&caller, &st, &roster, verb);
    let Some(advice) = advice else { return Ok(()) };
    if verb == "spawn" {
        // `task status` shows the last outcome per lane, refusals included.
        let now = clock::now();
        t.update_state(now, |st| {
            st.lanes.entry(agent.to_string()).or_default().last_reason = Some(reason);
            Ok(())
        })?;
    }
    // The event log is a record, not the refusal: failing to append must not hide it.
    let _ = crate::store::events::append(
        t,
        "spawn_refused",
        Some(agent),
        serde_json::json!({"reason": reason, "verb": verb, "caller": caller.agent}),
        clock::now(),
    );
    Err(Refusal {
        reason,
        message: advice,
    }
    .into())
}
