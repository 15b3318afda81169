//! Escalation to a human: recorded in pm_state.json (shown by `task status`
//! and in progress.md under "Needs a Human"), logged in events.jsonl, and
//! announced by the user's notify command and webhook (`[webhook]` in config.toml, a JSON
//! POST carrying the link to the task on the web page; see `app::settings`).
//!
//! The command is an argv in `$XDG_CONFIG_HOME/agent-orchestrator/config.toml`,
//! never a shell string:
//!
//! ```toml
//! notify = ["notify-send", "agent-orchestrator: {task}", "{reason}"]
//! ```

use std::process::{Command, Stdio};

use chrono::{DateTime, Utc};

use crate::core::error::Result;
use crate::core::model::{Escalation, PmState};
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;

/// The configured notify argv (empty when none). A config that does not read is logged
/// and means no command: the escalation it would announce must not fail for it.
pub fn notify_argv() -> Vec<String> {
    match crate::io::config::value() {
        Ok(Some((_, v))) => v
            .get("notify")
            .and_then(|n| n.clone().try_into::<Vec<String>>().ok())
            .unwrap_or_default(),
        Ok(None) => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "no notify command: the config does not read");
            Vec::new()
        }
    }
}

/// Fill `{task}`, `{reason}` and `{dir}` in each argument.
pub fn fill_argv(argv: &[String], task: &Task, reason: &str) -> Vec<String> {
    argv.iter()
        .map(|a| {
            a.replace("{task}", task.name.as_str())
                .replace("{dir}", &task.dir().display().to_string())
                .replace("{reason}", reason)
        })
        .collect()
}

/// Rewrite progress.md so "Needs a Human" lists exactly the open escalations.
pub fn refresh_progress(task: &Task, now: DateTime<Utc>) -> Result<()> {
    let st = task.state()?;
    let listing = crate::store::handoffs::listing(&task.handoffs())?;
    let recent = crate::store::progress::unprocessed(task, &st, &listing)?;
    let open: Vec<String> = st.escalations.iter().map(|e| e.reason.clone()).collect();
    crate::store::progress::write_progress(task, &st, &listing.names, &recent, &open, now).map(|_| ())
}

/// Open an escalation in the state unless the same reason is already open (no I/O).
/// Returns whether it was new.
pub fn record(state: &mut PmState, reason: &str, now: DateTime<Utc>) -> bool {
    if state.escalations.iter().any(|e| e.reason == reason) {
        return false;
    }
    state.escalations.push(Escalation {
        time: now,
        reason: reason.to_string(),
    });
    true
}

/// Raise an escalation unless the same reason is already open. Returns whether it was new.
pub fn raise(task: &Task, reason: &str, now: DateTime<Utc>) -> Result<bool> {
    if !task.update_state(now, |st| Ok(record(st, reason, now)))? {
        return Ok(false);
    }
    crate::store::events::append(
        task,
        EventKind::Escalation,
        None,
        serde_json::json!({"reason": reason}),
        now,
    )?;
    // progress.md shows it under "Needs a Human" at once, not at the next check-in.
    refresh_progress(task, now)?;
    notify(task, reason);
    Ok(true)
}

/// Raise an escalation about the disk itself: recorded when the state can be saved, and
/// announced (log, notify command) even when it cannot, since that is exactly when a
/// human is needed. The caller makes sure this happens once per episode.
pub fn raise_even_unsaved(task: &Task, reason: &str, now: DateTime<Utc>) {
    match raise(task, reason, now) {
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(task = %task.name, error = %e, "the escalation could not be recorded; announcing it anyway");
            notify(task, reason);
        }
    }
}

/// Announce an escalation already [`record`]ed in the state, and shown in progress.md by
/// whoever recorded it: the event, the log, the notify command.
/// A full events.jsonl does not silence the human: the failure is logged, the notify runs.
pub fn announce(task: &Task, reason: &str, now: DateTime<Utc>) -> Result<()> {
    if let Err(e) = crate::store::events::append(
        task,
        EventKind::Escalation,
        None,
        serde_json::json!({"reason": reason}),
        now,
    ) {
        tracing::warn!(task = %task.name, error = %e, "cannot append the escalation to events.jsonl");
    }
    notify(task, reason);
    Ok(())
}

/// Log the escalation and start the notify command (never waited for, never fatal).
fn notify(task: &Task, reason: &str) {
    tracing::warn!(task = %task.name, reason, "escalated to a human");
    let argv = fill_argv(&notify_argv(), task, reason);
    if let Some((prog, args)) = argv.split_first() {
        match Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(mut child) => {
                // Reap it without blocking the caller.
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
            }
            Err(e) => tracing::warn!(program = %prog, error = %e, "notify command failed to start"),
        }
    }
    if let Some(h) = crate::app::settings::webhook() {
        let project = task.project.display().to_string();
        let link = crate::app::settings::web()
            .ok()
            .and_then(|w| crate::app::settings::base_url(&w))
            .map(|b| {
                format!(
                    "{b}{}#needs",
                    crate::app::settings::task_path(&project, task.name.as_str())
                )
            });
        let body = crate::io::webhook::payload(&project, task.name.as_str(), reason, link.as_deref());
        crate::io::webhook::send(
            crate::io::webhook::Hook {
                url: h.url,
                timeout: std::time::Duration::from_secs(h.timeout_secs.max(1)),
                retries: h.retries,
            },
            body,
        );
    }
}
