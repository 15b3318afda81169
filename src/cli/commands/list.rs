//! `task list`: the project's tasks, one row each.

use std::path::Path;

use crate::status;
use crate::task;

use crate::cli::output::print_json;

/// List the tasks of the project found from `project`.
pub(crate) fn run(project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let root = task::find_project_root(project)?;
    let rows = status::list(&root)?;
    if json {
        return print_json(&serde_json::json!({
            "schema": status::JSON_SCHEMA,
            "project": root,
            "tasks": rows,
        }));
    }
    print!("{}", status::render_list(&root, &rows));
    Ok(())
}
