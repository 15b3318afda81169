//! `task rotate`: the PM's conversation replaced by a fresh one now. The task's actor in
//! the daemon does the work between its check-ins ([`crate::app::rotate`]); here is who
//! may ask for it.

use crate::app::session::Ctx;
use crate::core::error::Result;
use crate::core::protocol::gate::Verb;
use crate::core::wire::Supervised;

/// Who asks for a PM rotation (the caller behind `peer`), once the gate lets them: the
/// agent's name, or "a human".
pub async fn caller(s: &Supervised, peer: Option<u32>) -> Result<String> {
    let t = super::task(&s.project, &s.task.parse()?)?;
    let ctx = Ctx::from_env()?;
    let caller = crate::app::gate::caller_of(&ctx, peer).await;
    crate::app::gate::check_caller(&t, &caller, Some("pm"), Verb::Rotate)?;
    Ok(caller.agent.unwrap_or_else(|| "a human".into()))
}
