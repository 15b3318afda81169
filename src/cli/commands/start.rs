//! `task start`: the task's PM in tmux, and who will check it in.

use std::path::Path;

use crate::app::{self, start::Mode};
use crate::core::names::TaskName;

use crate::cli::output::{print_json, warn};

/// Start the PM of task `name` and say how to watch it.
pub(crate) async fn run(
    name: &TaskName,
    project: Option<&Path>,
    runtime: Option<&str>,
    mode: Mode,
    json: bool,
) -> anyhow::Result<()> {
    let set_aside = repair_first(name, project)?;
    if let Some(aside) = &set_aside {
        warn(format!(
            "pm_state.json of task '{name}' was corrupt; it was set aside as {} and a fresh state was started (look at it, then delete it; `task status {name}` lists such copies)",
            aside.display()
        ));
    }
    let s = app::start::start(name, project, runtime, mode, &mut warn).await?;
    let no_daemon = mode.no_daemon;
    if json {
        return print_json(
            &serde_json::json!({ "started": s.started, "state_set_aside": set_aside, "cron_line": s.cron_line, "cron": s.cron_note, "daemon": !no_daemon, "next_checkin": s.next_checkin,
                "sandbox": s.sandboxes.iter().map(|(a, st)| (a.clone(), serde_json::json!({"state": st.as_str(), "why": st.why()}))).collect::<serde_json::Map<_, _>>() }),
        );
    }
    println!(
        "Started the PM of task '{name}' ({} runtime) in tmux session {} (pane {}).",
        s.started.runtime, s.started.session, s.started.pane
    );
    println!("Preamble saved to {}", s.started.preamble.display());
    if let Some(line) = sandbox_line(&s.sandboxes) {
        println!("{line}");
    }
    if let Some(n) = &s.daemon_note {
        println!("Supervisor: {n}.");
    }
    match (&s.cron_line, s.cron_note.as_deref()) {
        _ if !no_daemon => println!(
            "Check-ins: the daemon checks in at once on every handoff, and on schedule (next {}).",
            s.next_checkin.map_or_else(
                || "never: no usable schedule".to_string(),
                crate::core::clock::local_time
            )
        ),
        (Some(_), Some("installed")) => {
            println!("Check-ins: crontab line installed (`crontab -l` shows it; `task stop {name}` removes it).")
        }
        (Some(l), Some(note)) => println!("Check-ins: {note}:\n  {l}"),
        _ => println!(
            "Check-ins: no crontab line; run `task watch {name}` or `task checkin {name}` from your scheduler."
        ),
    }
    println!(
        "Watch it: task status {name}   |   task attach {name}   (tmux {} ls)",
        s.tmux_flags
    );
    Ok(())
}

/// Create or repair the task folder before starting, so a corrupt pm_state.json set aside
/// on the way is said out loud (the start itself repairs silently). `None` when the state
/// was fine, or when the project folder does not exist (the start says why).
fn repair_first(name: &TaskName, project: Option<&Path>) -> anyhow::Result<Option<std::path::PathBuf>> {
    let project = crate::store::task::find_project(project, name)?;
    if !project.is_dir() {
        return Ok(None);
    }
    let t = crate::store::task::Task::new(&project, name.clone())?;
    Ok(crate::store::task::create_or_repair(&t, crate::core::clock::now())?.state_set_aside)
}

/// One line on which agents run their commands in the sandbox (without asking, confined to
/// their folders) and which do not; `None` when none has one or wanted one (a runtime
/// without a sandbox, such as the demo, is not worth a line).
fn sandbox_line(all: &[(String, crate::core::sandbox::State)]) -> Option<String> {
    use crate::core::sandbox::State;
    let of = |want: fn(&State) -> bool| -> String {
        let v: Vec<&str> = all.iter().filter(|(_, s)| want(s)).map(|(a, _)| a.as_str()).collect();
        v.join(", ")
    };
    let mut parts = Vec::new();
    let on = of(|s| *s == State::On);
    if !on.is_empty() {
        parts.push(format!(
            "on for {on} (commands run without asking, confined to their folders)"
        ));
    }
    let unavailable = of(|s| matches!(s, State::Unavailable(_)));
    if let Some(why) = all.iter().find_map(|(_, s)| s.why()) {
        parts.push(format!("wanted but not available for {unavailable}: {why}"));
    }
    if parts.is_empty() {
        return None;
    }
    let off = of(|s| *s == State::Off);
    if !off.is_empty() {
        parts.push(format!("off for {off} (they ask as usual)"));
    }
    Some(format!("Sandbox: {}.", parts.join("; ")))
}
