//! Regenerate progress.md on demand (`task progress`), without checking anything in.

use std::path::PathBuf;

use crate::clock;
use crate::handoff;
use crate::task::Task;

/// Write progress.md from the handoffs and state as they are now and return its path;
/// handoffs that cannot be read are skipped and reported to `warn`.
pub(crate) fn refresh(t: &Task, warn: &mut dyn FnMut(String)) -> anyhow::Result<PathBuf> {
    let st = t.state()?;
    let (names, skipped) = handoff::list(&t.handoffs())?;
    for s in &skipped {
        warn(format!("skipped handoffs/{}: {}", s.file, s.reason));
    }
    let recent = crate::progress::unprocessed(t, &st, &names)?;
    let open: Vec<String> = st.escalations.iter().map(|e| e.reason.clone()).collect();
    crate::progress::write_progress(t, &st, &names, &recent, &open, clock::now())?;
    Ok(t.progress_path())
}
