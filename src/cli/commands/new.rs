//! `task new`: create a task folder, or repair the parts it is missing.

use std::path::Path;

use anyhow::Context as _;

use crate::core::clock;
use crate::core::error::Error;
use crate::core::names::TaskName;
use crate::store::task::{self, Task};

use crate::cli::output::{print_json, warn};

/// Create or repair tasks/<name>/ in `project` (default: the current folder).
pub(crate) fn run(name: &TaskName, project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let project = match project {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().context("reading the current folder")?,
    };
    if !project.is_dir() {
        return Err(Error::BadInput(format!(
            "project folder {} does not exist; create it first or pass --project DIR",
            project.display()
        ))
        .into());
    }
    let t = Task::new(&project, name.clone())?;
    let report = task::create_or_repair(&t, clock::now())?;
    if let Some(aside) = &report.state_set_aside {
        warn(format!(
            "{} was corrupt; it was moved to {} and a fresh state was written (handoffs will be checked in again)",
            t.state_path().display(),
            aside.display()
        ));
    }
    if json {
        return print_json(&serde_json::json!({
            "task": name.as_str(),
            "dir": t.dir(),
            "created": report.created,
            "state_set_aside": report.state_set_aside,
        }));
    }
    if report.created.is_empty() {
        println!("Task '{name}' is complete at {}; nothing to repair.", t.dir().display());
    } else if report.created.iter().any(|c| c == ".") {
        println!("Created task '{name}' at {}", t.dir().display());
        println!(
            "Next: describe the goal in {}, then run `task start {name}`.",
            t.task_md().display()
        );
    } else {
        println!(
            "Repaired task '{name}' at {}: added {}",
            t.dir().display(),
            report.created.join(", ")
        );
    }
    Ok(())
}
