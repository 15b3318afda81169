//! `task doctor`: every dependency checked, one line each with its fix; exit 1 on a problem.

use std::path::Path;

use crate::app::session::Ctx;
use crate::cli::output::report_checks;

/// Run the checks, print them (or `--json`: `{"schema", "healthy", "checks"}`).
pub(crate) async fn run(project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let ctx = Ctx::from_env()?;
    let checks = crate::app::doctor::run(project, &ctx).await;
    report_checks(&checks, json)
}
