//! `task shutdown`: the daemon stops (the agents keep running). Not for a spoke: a spoke
//! of any task the daemon supervises is refused, as it is for `task stop`.

use crate::app::session::Ctx;
use crate::core::error::Result;
use crate::core::protocol::gate::Verb;
use crate::core::wire::Supervised;

/// In the daemon: let the caller behind `peer` stop it, or refuse (recorded in the task
/// whose spoke it is). A task whose folder is gone (or whose name no longer reads) has no
/// say.
pub async fn permit(tasks: &[Supervised], peer: Option<u32>) -> Result<()> {
    let ctx = Ctx::from_env()?;
    let caller = crate::app::gate::caller_of(&ctx, peer).await;
    for s in tasks {
        let Some(t) = s.task.parse().ok().and_then(|name| super::task(&s.project, &name).ok()) else {
            continue;
        };
        crate::app::gate::check_caller(&t, &caller, None, Verb::Shutdown)?;
    }
    Ok(())
}
