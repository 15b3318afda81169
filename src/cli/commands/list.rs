//! `task list`: the project's tasks, one row each.

use std::path::Path;

use crate::store::task;

use crate::cli::output::print_json;

/// List the tasks of the project found from `project`.
pub(crate) fn run(project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let root = task::find_project_root(project)?;
    let rows = crate::app::status::list(&root)?;
    if json {
        return print_json(&serde_json::json!({
            "schema": crate::core::status::JSON_SCHEMA,
            "project": root,
            "tasks": rows,
        }));
    }
    print!("{}", crate::core::status::render_list(&root, &rows));
    Ok(())
}
