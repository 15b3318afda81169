//! Write a handoff for an agent (`task handoff`): well-formed and atomic, so the
//! supervisor never reads half of one.

use std::path::PathBuf;

use crate::core::handoff::{self, NewHandoff};
use crate::store::handoffs;
use crate::store::task::Task;

/// Write `h` into the task's handoffs/ (creating the folder if it went missing) and
/// return its path. A body that repeats a header line (`**Status:**` …) is written as
/// given; each repeat is reported to `warn` first, since the parser keeps only one.
pub(crate) fn write(t: &Task, h: &NewHandoff<'_>, warn: &mut dyn FnMut(String)) -> anyhow::Result<PathBuf> {
    if !t.handoffs().is_dir() {
        crate::store::fsutil::create_dir_all(&t.handoffs())?;
    }
    for w in handoff::parse(&handoff::render(h))
        .warnings
        .iter()
        .filter(|w| w.contains("twice"))
    {
        warn(format!("the body repeats a header line: {w}"));
    }
    Ok(handoffs::write(&t.handoffs(), h)?)
}
