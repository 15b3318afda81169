//! `task service`: the systemd user unit that runs the daemon.

use anyhow::Context as _;

use crate::cli::ServiceAction;
use crate::cli::output::print_json;

/// Install, uninstall or inspect the unit; print its notes or `--json` report.
pub(crate) fn run(action: ServiceAction, json: bool) -> anyhow::Result<()> {
    let r = match action {
        ServiceAction::Install => {
            crate::app::service::install(&std::env::current_exe().context("finding own binary")?)?
        }
        ServiceAction::Uninstall => crate::app::service::uninstall()?,
        ServiceAction::Status => crate::app::service::status()?,
    };
    if json {
        print_json(&r)
    } else {
        for n in &r.notes {
            println!("{n}");
        }
        Ok(())
    }
}
