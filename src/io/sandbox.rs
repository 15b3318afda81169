//! Whether this machine can give an agent Claude Code's sandbox: on Linux, bubblewrap and
//! socat on PATH, and a bubblewrap sandbox that actually starts (user namespaces may be
//! off in a container, and then `bwrap` is installed but useless).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
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
    tried_and_started()
}

/// The bubblewrap binaries whose trial sandbox started in this process, with the identity
/// each had then (a process memo: [`crate::store::memo`]). A launch in the daemon (a PM
/// restart, a rotation) ran the trial every time, in plain code, holding every other
/// task for its milliseconds; a binary that started one sandbox starts the next. A failure
/// is not kept, so a fix (a package installed, a sysctl set) is seen at the next launch.
#[derive(Default)]
struct Trials(Mutex<HashMap<PathBuf, Identity>>);

/// What tells a binary replaced on disk from the one tried: device, inode, size, mtime.
type Identity = (u64, u64, u64, i64);

impl crate::store::memo::Memo for Trials {
    const NAME: &'static str = "sandbox trials";
    fn entries(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn identity(path: &std::path::Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.size(), m.mtime()))
}

/// [`trial`], unless the same bubblewrap binary already passed it in this process.
fn tried_and_started() -> Result<(), String> {
    let Some(path) = crate::io::program::which("bwrap") else {
        return trial();
    };
    let id = identity(&path);
    crate::store::memo::get::<Trials>().unless_passed(path, id, trial)
}

impl Trials {
    /// `trial`, unless the binary at `path` passed it with the identity `id` it has now.
    /// A success is kept for that identity; a failure, or a binary whose identity could
    /// not be read, is not.
    fn unless_passed(
        &self,
        path: PathBuf,
        id: Option<Identity>,
        trial: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let trials = || self.0.lock().unwrap_or_else(|e| e.into_inner());
        if id.is_some() && trials().get(&path) == id.as_ref() {
            return Ok(());
        }
        trial()?;
        if let Some(id) = id {
            trials().insert(path, id);
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::store::memo::Memo;

    #[test]
    fn a_binary_whose_trial_started_is_not_tried_again_until_replaced_and_a_failure_is_not_kept() {
        let trials = Trials::default();
        let bwrap = PathBuf::from("/usr/bin/bwrap");
        let (tried, replaced): (Identity, Identity) = ((1, 2, 100, 7), (1, 3, 120, 8));
        let runs = Cell::new(0);
        let pass = || {
            runs.set(runs.get() + 1);
            Ok(())
        };
        let fail = || {
            runs.set(runs.get() + 1);
            Err("user namespaces are off".to_string())
        };

        assert_eq!(trials.unless_passed(bwrap.clone(), Some(tried), pass), Ok(()));
        assert_eq!(
            (runs.get(), trials.entries()),
            (1, 1),
            "the first launch runs the trial"
        );
        assert_eq!(trials.unless_passed(bwrap.clone(), Some(tried), fail), Ok(()));
        assert_eq!(runs.get(), 1, "the same binary is not tried again");

        // Replaced on disk (a new inode, size, mtime): tried again, and its failure is told.
        assert_eq!(
            trials.unless_passed(bwrap.clone(), Some(replaced), fail),
            Err("user namespaces are off".to_string())
        );
        assert_eq!(runs.get(), 2);
        // The failure is not kept: the next launch tries again and sees the fix.
        assert_eq!(trials.unless_passed(bwrap.clone(), Some(replaced), pass), Ok(()));
        assert_eq!((runs.get(), trials.entries()), (3, 1));
        assert_eq!(trials.unless_passed(bwrap.clone(), Some(replaced), fail), Ok(()));
        assert_eq!(runs.get(), 3, "the replacement's success is kept in its place");

        // A binary whose identity cannot be read is tried every time, and nothing is kept.
        let unread = PathBuf::from("/opt/bwrap");
        assert_eq!(trials.unless_passed(unread.clone(), None, pass), Ok(()));
        assert_eq!(trials.unless_passed(unread, None, pass), Ok(()));
        assert_eq!((runs.get(), trials.entries()), (5, 1));
    }
}
