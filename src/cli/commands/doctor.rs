//! `task doctor`: every dependency checked, one line each with its fix; exit 1 on a problem.

use std::path::Path;

use crate::app::session::Ctx;
use crate::core::doctor;
use crate::core::error::{EXIT_FAILURE, Exit};

use crate::cli::output::print_json;

/// Run the checks, print them (or `--json`: `{"schema", "healthy", "checks"}`).
pub(crate) async fn run(project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let ctx = Ctx::from_env()?;
    let checks = crate::app::doctor::run(project, &ctx).await;
    let healthy = doctor::healthy(&checks);
    if json {
        print_json(&serde_json::json!({ "schema": 1, "healthy": healthy, "checks": checks }))?;
    } else {
        print!("{}", doctor::render(&checks));
    }
    if healthy {
        Ok(())
    } else {
        let n = checks.iter().filter(|c| c.level == doctor::Level::Problem).count();
        Err(Exit::new(
            EXIT_FAILURE,
            format!("{n} problem(s) found; each line above names its fix"),
        )
        .into())
    }
}
