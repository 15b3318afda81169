//! `task setup-agents`: write the roster's missing agent definitions.

use std::path::Path;

use anyhow::Context as _;

use crate::app::agents;

use crate::cli::output::print_json;

/// Write what is missing for `which` runtime(s) from `roster` in `project` (default: the
/// current folder); say what was added and what was kept.
pub(crate) fn run(project: Option<&Path>, which: agents::Which, roster: &str, json: bool) -> anyhow::Result<()> {
    let root = match project {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().context("reading the current folder")?,
    };
    let roster = crate::store::roster::load(roster)?;
    let report = agents::setup(&root, which, &roster)?;
    if json {
        return print_json(&report);
    }
    for a in &report.added {
        println!("added  {a}");
    }
    for k in &report.kept {
        println!("kept   {k} (already exists)");
    }
    if !report.permissions_added.is_empty() {
        println!(
            "allowed in .claude/settings.json: {}",
            report.permissions_added.join(", ")
        );
    }
    Ok(())
}
