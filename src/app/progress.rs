//! Regenerate progress.md on demand (`task progress`), without checking anything in.

use std::path::PathBuf;

use crate::core::clock;
use crate::store::handoffs;
use crate::store::task::Task;

/// Write progress.md from the handoffs and state as they are now and return its path;
/// handoffs that cannot be read are skipped and reported to `warn`.
pub(crate) fn refresh(t: &Task, warn: &mut dyn FnMut(String)) -> anyhow::Result<PathBuf> {
    let st = t.state()?;
    let listing = handoffs::listing(&t.handoffs())?;
    for s in &listing.skipped {
        warn(format!("skipped handoffs/{}: {}", s.file, s.reason));
    }
    let recent = crate::store::progress::unprocessed(t, &st, &listing)?;
    let open: Vec<String> = st.escalations.iter().map(|e| e.reason.clone()).collect();
    crate::store::progress::write_progress(t, &st, &listing.names, &recent, &open, clock::now())?;
    Ok(t.progress_path())
}
