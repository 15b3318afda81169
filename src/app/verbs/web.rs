//! `task web`: the page and its login codes are a human's. Whoever logs in can answer
//! agents' permission requests, so no agent of a supervised task — hub or spoke — may
//! have the page started or a login code made: judged from the CLI's own environment and
//! pane, and again by the daemon from the connecting process.

use crate::app::session::Ctx;
use crate::core::error::{Error, Result};
use crate::core::protocol::gate::{self, Caller};
use crate::core::protocol::reason::{Reason, Refusal};
use crate::core::wire::Supervised;

/// Refuse `caller` when it is an agent of any of `tasks` (by its environment, or by the
/// pane it runs in). Tasks whose folder or state no longer reads are passed over.
fn judge(tasks: &[Supervised], caller: &Caller) -> Result<()> {
    let by_env = caller.agent.clone().or_else(|| caller.role.clone());
    let by_pane = || {
        tasks.iter().find_map(|s| {
            let t = s.task.parse().ok().and_then(|n| super::task(&s.project, &n).ok())?;
            let st = t.state().ok()?;
            gate::is_agent(caller, &st).then(|| format!("an agent of {}", t.name))
        })
    };
    match by_env.or_else(by_pane) {
        None => Ok(()),
        Some(who) => Err(Error::Refused(Refusal {
            reason: Reason::SpawnRejectSpokeCaller,
            message: format!(
                "{}: `task web` is for a human ({who} asked): a login code lets its holder answer the agents' permission requests",
                Reason::SpawnRejectSpokeCaller.code()
            ),
        })),
    }
}

/// In the CLI: let this process go on, or refuse.
pub fn permit_here(ctx: &Ctx) -> Result<()> {
    let caller = Caller::from_vars(|k| std::env::var(k).ok(), &ctx.tmux.socket().path());
    judge(&crate::store::registry::load(), &caller)
}

/// In the daemon: let the process behind `peer` have the page, or refuse.
pub async fn permit(tasks: &[Supervised], peer: Option<u32>) -> Result<()> {
    let ctx = Ctx::from_env()?;
    let caller = crate::app::gate::caller_of(&ctx, peer).await;
    judge(tasks, &caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_agent_is_refused_and_a_person_passes() {
        assert!(judge(&[], &Caller::default()).is_ok());
        for c in [
            Caller {
                agent: Some("pm".into()),
                ..Default::default()
            },
            Caller {
                role: Some("hub".into()),
                ..Default::default()
            },
        ] {
            let e = judge(&[], &c).unwrap_err();
            assert!(matches!(e, Error::Refused(_)), "{e}");
            assert!(e.to_string().contains("for a human"), "{e}");
        }
    }
}
