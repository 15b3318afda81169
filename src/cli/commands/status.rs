//! `task status`: one task, or every task of the project, with the panes' liveness.

use std::path::Path;

use crate::app;
use crate::names::TaskName;
use crate::status;
use crate::task;

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
    for t in &tasks {
        all.push(app::status::with_liveness(t)?);
    }
    if json {
        let v = match name {
            Some(_) => serde_json::json!({ "schema": status::JSON_SCHEMA, "task": all.pop() }),
            None => serde_json::json!({ "schema": status::JSON_SCHEMA, "tasks": all }),
        };
        return print_json(&v);
    }
    let text: Vec<String> = all.iter().map(status::render).collect();
    print!("{}", text.join("\n"));
    Ok(())
}
