//! The spawn gate as a use case: the protocol's decision plus what it leaves behind.
//!
//! `protocol::gate` decides (a spoke may neither start nor message agents; a hub or a
//! human may); this module records a refusal where people look for it — the lane's last
//! outcome in pm_state.json (`task status`) and a `spawn_refused` event — and turns it
//! into the refusal exit code. The CLI asks it from its own environment; the daemon asks it
//! again for the requests it serves, from the process that connected ([`caller_of`]).

use crate::app::session::Ctx;
use crate::core::clock;
use crate::core::error::{Error, Result};
use crate::core::protocol::gate::{self, Verb};
use crate::core::protocol::reason::Refusal;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// Who the gate let through.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Permit {
    /// No agent of the task: a human (whose decisions, such as going over a budget, an
    /// agent cannot make).
    pub human: bool,
}

/// Let the caller (found from the environment) `verb` `agent` (or the whole task, when
/// `None`), or refuse with the gate's advice, recorded, as a [`Refusal`] (exit 6).
pub(crate) fn check(t: &Task, ctx: &Ctx, agent: Option<&str>, verb: Verb) -> anyhow::Result<Permit> {
    let caller = gate::Caller::from_vars(|k| std::env::var(k).ok(), &ctx.tmux.socket().path());
    check_caller(t, &caller, agent, verb).map_err(|e| match e {
        Error::Refused(r) => r.into(),
        e => anyhow::Error::new(e),
    })
}

/// The caller of a request the daemon serves, from the connecting process itself (`pid`,
/// the socket's peer credentials): the agent pane it runs under (its ancestry against the
/// panes of the supervisor's tmux server) and the environment it was started with. A
/// request names no caller, and a spoke that clears its own environment before calling is
/// still under its pane. A process that left its pane's process tree (a double fork
/// reparented to init) is known only by the environment it started with.
pub(crate) async fn caller_of(ctx: &Ctx, pid: Option<u32>) -> gate::Caller {
    let Some(pid) = pid else {
        return gate::Caller::default();
    };
    let env = crate::io::process::environ(pid);
    let var = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let up = crate::io::process::ancestors(pid);
    let pane = match ctx.tmux.list_panes().await {
        Ok(panes) => panes
            .into_iter()
            .find(|p| p.pid.is_some_and(|x| up.contains(&x)))
            .map(|p| p.pane_id),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the panes to find a request's caller; judged by its environment");
            None
        }
    };
    gate::Caller {
        agent: var("TASK_AGENT"),
        role: var("TASK_ROLE"),
        pane,
    }
}

/// Let `caller` `verb` `agent` (the whole task when `None`), or refuse (recorded) with
/// [`Error::Refused`].
pub(crate) fn check_caller(t: &Task, caller: &gate::Caller, agent: Option<&str>, verb: Verb) -> Result<Permit> {
    // Stopping must work on a task whose state or roster is broken (what a human does
    // about it first): judged then by the caller's environment and the default roster,
    // as check-ins go on with it. Starting or messaging agents waits for a roster that reads.
    let ending = matches!(verb, Verb::Stop | Verb::Shutdown);
    let st = match t.state() {
        Err(e) if ending => {
            tracing::warn!(task = %t.name, error = %e, "the state cannot be read; the gate judges by the caller's environment");
            std::sync::Arc::default()
        }
        st => st?,
    };
    let roster = match crate::store::roster::for_task(t) {
        Err(e) if ending => {
            tracing::warn!(task = %t.name, error = %e, "the roster cannot be used; the gate uses the default one");
            std::borrow::Cow::Borrowed(
                crate::core::protocol::roster::Roster::builtin_shared("default").expect("the default roster"),
            )
        }
        r => r?,
    };
    let (reason, advice) = gate::decide(caller, &st, &roster, verb);
    let Some(advice) = advice else {
        return Ok(Permit {
            human: !gate::is_agent(caller, &st),
        });
    };
    if let (Verb::Spawn, Some(agent)) = (verb, agent) {
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
        EventKind::SpawnRefused,
        agent,
        serde_json::json!({"reason": reason, "verb": verb, "caller": caller.agent}),
        clock::now(),
    );
    Err(Error::Refused(Refusal {
        reason,
        message: advice,
    }))
}
