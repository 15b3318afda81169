//! `task status`: one task, or every task of the project, with the panes' liveness.

use std::path::Path;

use crate::app;
use crate::core::names::TaskName;
use crate::core::status;
use crate::store::task;

use crate::cli::output::print_json;

/// Show `name` (or every task in the project) as text or `--json`.
pub(crate) fn run(project: Option<&Path>, name: Option<&TaskName>, json: bool) -> anyhow::Result<()> {
    let tasks = match name {
        Some(n) => vec![app::locate(project, n)?],
        None => {
            let root = task::find_project_root(project)?;
            let ts = task::list_tasks(&root)?;
            if ts.is_empty() && !json {
                println!(
                    "No tasks in {}/tasks. Create one with `task new <name>`.",
                    root.display()
                );
                return Ok(());
            }
            ts
        }
    };
    let mut all = Vec::new();
    // Copies of corrupt states stay until a human looks: named on every status.
    let mut aside = Vec::new();
    for t in &tasks {
        all.push(app::status::with_liveness(t)?);
        aside.push(task::persist::set_aside_files(&t.dir()));
    }
    if json {
        let flat: Vec<_> = aside.iter().flatten().collect();
        let v = match name {
            Some(_) => {
                serde_json::json!({ "schema": status::JSON_SCHEMA, "task": all.pop(), "state_set_aside": flat })
            }
            None => serde_json::json!({ "schema": status::JSON_SCHEMA, "tasks": all, "state_set_aside": flat }),
        };
        return print_json(&v);
    }
    let text: Vec<String> = all
        .iter()
        .zip(&aside)
        .map(|(s, a)| status::render(s) + &render_set_aside(a))
        .collect();
    print!("{}", text.join("\n"));
    Ok(())
}

/// The lines naming a task's set-aside corrupt states (empty when there are none).
fn render_set_aside(files: &[std::path::PathBuf]) -> String {
    files
        .iter()
        .map(|f| format!("Set aside (corrupt pm_state.json, look then delete): {}\n", f.display()))
        .collect()
}
