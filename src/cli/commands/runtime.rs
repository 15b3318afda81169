//! `task runtime check`: a runtime profile proved against the real program, step by step.

use std::path::Path;

use crate::app::session::Ctx;
use crate::core::doctor;
use crate::core::error::{EXIT_FAILURE, Exit};
use crate::store::task;

use crate::cli::output::print_json;

/// Run the check in the project (or the current folder); print each step, the screen of
/// a failed one, or `--json` (`{"schema", "runtime", "passed", "steps", "screen"}`).
pub(crate) async fn check(runtime: &str, project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let ctx = Ctx::from_env()?;
    let cwd = task::find_project_root(project)?;
    let r = crate::app::runtime_check::check(&ctx, runtime, &cwd).await;
    let passed = r.steps.iter().all(|s| s.level == doctor::Level::Ok);
    if json {
        print_json(&serde_json::json!({
            "schema": 1,
            "runtime": runtime,
            "passed": passed,
            "steps": r.steps,
            "screen": r.screen,
        }))?;
    } else {
        print!("{}", doctor::render(&r.steps));
        if let Some(screen) = &r.screen {
            println!("\nThe screen when it failed:\n{}", indent(screen));
        }
    }
    if passed {
        Ok(())
    } else {
        let failed = r
            .steps
            .iter()
            .find(|s| s.level != doctor::Level::Ok)
            .map(|s| s.name.clone());
        Err(Exit::new(
            EXIT_FAILURE,
            format!("runtime {runtime}: the {} step failed", failed.unwrap_or_default()),
        )
        .into())
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}
