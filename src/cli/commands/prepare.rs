//! `task spawn --prepare`: show everything a spawn would use; start nothing.

use std::path::Path;

use crate::app;
use crate::app::session::Ctx;
use crate::core::names::{AgentName, TaskName};

use crate::cli::output::print_json;

/// Render the spawn of `agent` (session, host, command line, preamble, context bundle).
pub(crate) async fn run(
    project: Option<&Path>,
    name: &TaskName,
    agent: &AgentName,
    handoff: &Path,
    runtime: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    let ctx = Ctx::from_env()?;
    let p = app::verbs::spawn::prepare(&t, &ctx, agent, handoff, runtime).await?;
    if json {
        return print_json(&p);
    }
    println!("PREPARED ONLY: nothing was started (run the same command without --prepare to start it).");
    println!(
        "Agent:    {} ({} runtime) in tmux session {}",
        p.agent, p.runtime, p.session
    );
    println!("Host:     {}", p.host);
    println!("Cwd:      {}", p.cwd);
    println!("Command:  {}", crate::core::shell::shell_join(&p.argv));
    println!("--- preamble ({} bytes) ---", p.preamble.len());
    print!("{}", p.preamble);
    let present: Vec<&str> = p.bundle["manifest"]["sources"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, r)| r["present"] == true)
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default();
    println!(
        "--- context bundle (would go to active_agents/{}/; sources present: {}) ---",
        p.agent,
        if present.is_empty() {
            "none".to_string()
        } else {
            present.join(", ")
        }
    );
    println!("{}", serde_json::to_string_pretty(&p.bundle["bundle"])?);
    Ok(())
}
