//! `task service install|uninstall|status`: the daemon as a systemd user unit
//! (templates/agent-orchestrator.service). Needs a running user manager for
//! enable/start; without one the unit file is still written and the commands
//! to run are printed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::core::error::{Error, Result};
use crate::store::fsutil;

/// The unit template.
pub const UNIT_TEMPLATE: &str = include_str!("../../templates/agent-orchestrator.service");
/// The unit's name.
pub const UNIT: &str = "agent-orchestrator.service";

/// `$XDG_CONFIG_HOME/systemd/user/agent-orchestrator.service`.
pub fn unit_path() -> Result<PathBuf> {
    dirs::config_dir()
        .map(|d| d.join("systemd").join("user").join(UNIT))
        .ok_or_else(|| Error::Environment("cannot find the config folder ($XDG_CONFIG_HOME or ~/.config)".into()))
}

/// Render the unit for this binary.
pub fn render(task_bin: &Path, path_env: &str) -> String {
    crate::core::preamble::fill(
        UNIT_TEMPLATE,
        &[
            ("task_bin", &task_bin.display().to_string()),
            ("path", path_env),
            ("readme", concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")),
        ],
    )
}

fn systemctl(args: &[&str]) -> std::result::Result<String, String> {
    match Command::new("systemctl").arg("--user").args(args).output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(format!("systemctl: {e}")),
    }
}

/// What install/uninstall did, in lines for the user.
#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    /// The unit file.
    pub unit: PathBuf,
    /// Whether systemctl accepted the change.
    pub systemctl: bool,
    /// What happened and what to do.
    pub notes: Vec<String>,
}

/// Write the unit and enable it (`systemctl --user enable --now`).
pub fn install(task_bin: &Path) -> Result<Report> {
    let unit = unit_path()?;
    if let Some(d) = unit.parent() {
        fsutil::create_dir_all(d)?;
    }
    let path_env = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    fsutil::atomic_write(&unit, render(task_bin, &path_env).as_bytes())?;
    let mut r = Report {
        unit: unit.clone(),
        ..Default::default()
    };
    r.notes.push(format!("wrote {}", unit.display()));
    match systemctl(&["daemon-reload"]).and_then(|_| systemctl(&["enable", "--now", UNIT])) {
        Ok(_) => {
            r.systemctl = true;
            r.notes.push(format!("enabled and started {UNIT}"));
        }
        Err(e) => r.notes.push(format!(
            "systemctl --user could not enable it ({e}); in a session with a user manager run: systemctl --user daemon-reload && systemctl --user enable --now {UNIT}"
        )),
    }
    r.notes.push(
        "for agents that must outlive your logout: loginctl enable-linger $USER; for ssh agents: systemctl --user import-environment SSH_AUTH_SOCK".into(),
    );
    Ok(r)
}

/// Disable the unit and remove its file.
pub fn uninstall() -> Result<Report> {
    let unit = unit_path()?;
    let mut r = Report {
        unit: unit.clone(),
        ..Default::default()
    };
    match systemctl(&["disable", "--now", UNIT]) {
        Ok(_) => {
            r.systemctl = true;
            r.notes
                .push(format!("disabled and stopped {UNIT} (agents keep running)"));
        }
        Err(e) => r.notes.push(format!("systemctl --user could not disable it ({e})")),
    }
    match std::fs::remove_file(&unit) {
        Ok(()) => r.notes.push(format!("removed {}", unit.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => r.notes.push("no unit file was installed".into()),
        Err(e) => return Err(Error::io("remove", &unit, e)),
    }
    let _ = systemctl(&["daemon-reload"]);
    Ok(r)
}

/// The unit file's presence and what systemctl says.
pub fn status() -> Result<Report> {
    let unit = unit_path()?;
    let mut r = Report {
        unit: unit.clone(),
        ..Default::default()
    };
    r.notes.push(if unit.exists() {
        format!("unit file: {}", unit.display())
    } else {
        "unit file: not installed (task service install)".into()
    });
    match systemctl(&["is-active", UNIT]) {
        Ok(s) => {
            r.systemctl = true;
            r.notes.push(format!("service: {}", s.trim()));
        }
        Err(e) => r.notes.push(format!("service: unknown ({e})")),
    }
    r.notes.push(format!(
        "daemon socket: {}",
        if crate::io::control::running() {
            "answering"
        } else {
            "no daemon answering"
        }
    ));
    Ok(r)
}
