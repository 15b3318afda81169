//! Whether this machine can give an agent Claude Code's sandbox: on Linux, bubblewrap and
//! socat on PATH, and a bubblewrap sandbox that actually starts (user namespaces may be
//! off in a container, and then `bwrap` is installed but useless).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The packages that provide the sandbox on Debian and Ubuntu.
pub const INSTALL: &str = "sudo apt-get install bubblewrap socat";

/// How long the trial sandbox may take to start and exit.
const TRIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// What Claude Code's sandbox needs on PATH (bubblewrap, and socat for its network proxy).
pub const CLAUDE_TOOLS: &[&str] = &["bwrap", "socat"];
/// What Codex's sandbox needs on PATH.
pub const CODEX_TOOLS: &[&str] = &["bwrap"];

/// `Ok` when a sandboxed command can run here with `tools`; otherwise why not, with the fix.
pub fn check(tools: &[&str]) -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Err("the supervisor turns the sandbox on only on Linux (bubblewrap)".into());
    }
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|p| crate::io::program::which(p).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{} not found on PATH; install with `{INSTALL}`",
            missing.join(" and ")
        ));
    }
    trial()
}

/// Start `true` in a bubblewrap sandbox shaped like Claude Code's (the root read-only, no
/// network), bounded in time.
fn trial() -> Result<(), String> {
    let mut child = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-net",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run bwrap: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!(
                    "a trial bubblewrap sandbox failed ({status}: {}); unprivileged user namespaces may be off (sysctl kernel.unprivileged_userns_clone=1)",
                    err.trim()
                ));
            }
            Ok(None) if start.elapsed() > TRIAL_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "a trial bubblewrap sandbox did not exit within {TRIAL_TIMEOUT:?}"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("could not wait for bwrap: {e}")),
        }
    }
}
