//! Delivery, the stage that types into the PM's pane. The intent is saved first, so a
//! crash between paste and record is settled rather than repeated ([`super::recover`]);
//! when it cannot be saved nothing is delivered. No state lock is held: the PM may run
//! `task spawn` at once.

use super::decide::pm_pane;
use super::intent;
use super::snapshot::Plan;
use crate::core::error::Result;
use crate::core::report::Report;
use crate::io::delivery;
use crate::io::hooks::{Point, pause};
use crate::io::tmux::Tmux;
use crate::store::task::Task;

/// Deliver the plan's message (under `reuse_id` when an unfinished intent never reached
/// the PM) and report how it went, with the id the message carried; a PM that cannot take
/// it gets nothing typed (and no id).
pub(super) async fn deliver(
    task: &Task,
    tmux: &Tmux,
    plan: &Plan,
    reuse_id: Option<String>,
) -> Result<(Report, Option<String>)> {
    let (pane, runtime) = match pm_pane(&plan.pm, task.name.as_str(), plan.message.len()) {
        Ok(p) => p,
        Err(report) => return Ok((report, None)),
    };
    let rt = crate::io::runtime::resolve(runtime.unwrap_or("claude"))?;
    let id = reuse_id.unwrap_or_else(intent::new_id);
    intent::save(
        task,
        &intent::Intent {
            id: id.clone(),
            files: plan.cands.iter().map(|c| c.loaded.file.clone()).collect(),
        },
    )?;
    pause(Point::BeforeDeliver).await;
    let tagged = intent::tagged(&plan.message, &id);
    let d = delivery::deliver(tmux, pane, &tagged, &rt.patterns, &rt.delivery_options()).await?;
    pause(Point::AfterDeliver).await;
    Ok((d, Some(id)))
}
