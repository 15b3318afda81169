//! Output shared by several verbs: JSON on stdout, warnings on stderr, and the one-line
//! renderings of a delivery and a check-in, so every verb says them the same way.

use std::io::Write;

use crate::core::report::CheckinReport;
use crate::core::report::Outcome;

/// Print `v` as pretty JSON on stdout (the `--json` shapes of docs/json.md).
pub(super) fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

/// Tell the user about something that did not stop the command (stderr).
pub(super) fn warn(msg: String) {
    eprintln!("warning: {msg}");
}

/// A delivery outcome as one lower-case word: delivered, unconfirmed, failed.
pub(super) fn outcome_word(o: Outcome) -> String {
    format!("{o:?}").to_lowercase()
}

/// One line for a check-in run in this process (`task checkin`, `task watch`).
pub(super) fn print_checkin(r: &CheckinReport) {
    match &r.delivery {
        None if r.skipped => println!(
            "{}: check-in recorded, not sent to the PM: {}; phase {}.",
            r.task,
            r.skip_reason.as_deref().unwrap_or("nothing new, no signal"),
            r.phase
        ),
        None => println!("{}: another check-in is running; this one stood down.", r.task),
        Some(d) => {
            let what = if r.new_handoffs.is_empty() {
                "nothing new".to_string()
            } else {
                format!("{} new handoff(s): {}", r.new_handoffs.len(), r.new_handoffs.join(", "))
            };
            println!(
                "{}: {what}; {} signal(s); phase {}; check-in {}: {}",
                r.task,
                r.signals.len(),
                r.phase,
                outcome_word(d.outcome),
                d.reason
            );
        }
    }
}

/// Print checks as `task doctor` does (or `--json`: `{"schema", "healthy", "checks"}`) and
/// fail with exit 1 when one is a problem.
pub(super) fn report_checks(checks: &[crate::core::doctor::Check], json: bool) -> anyhow::Result<()> {
    use crate::core::doctor;
    let healthy = doctor::healthy(checks);
    if json {
        print_json(&serde_json::json!({ "schema": 1, "healthy": healthy, "checks": checks }))?;
    } else {
        print!("{}", doctor::render(checks));
    }
    if healthy {
        return Ok(());
    }
    let n = checks.iter().filter(|c| c.level == doctor::Level::Problem).count();
    Err(crate::core::error::Exit::new(
        crate::core::error::EXIT_FAILURE,
        format!("{n} problem(s) found; each line above names its fix"),
    )
    .into())
}
