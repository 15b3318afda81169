//! `task progress`: regenerate progress.md and print its path.

use std::path::Path;

use crate::app;
use crate::core::names::TaskName;

use crate::cli::output::warn;

/// Rewrite the task's progress.md (nothing is marked as checked in).
pub(crate) fn run(project: Option<&Path>, name: &TaskName) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let path = app::progress::refresh(&t, &mut warn)?;
    println!("{}", path.display());
    Ok(())
}
