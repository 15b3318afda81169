//! Remote handoffs as they happen. Pulling every 2 s puts a remote handoff up to 2 s
//! behind a local one; instead, one long-running command per host and task, over the
//! host's master, prints a line whenever the remote `handoffs/` folder changes, and each
//! line asks the daemon for a pull at once. The periodic pull stays as the fallback
//! (a missed event, a host without the watch).
//!
//! The remote side is plain POSIX sh: `inotifywait -m` when the host has it (a line per
//! close or rename), else a 200 ms poll of the folder's listing; dot files (an agent's
//! temp file before its rename) are not changes. Each (re)connection pulls once the watch
//! is live — `ready` when inotifywait says its watch is established, the poll's first
//! `changed` after its first listing — never before: a handoff written between a pull and
//! the watch would be seen by neither (issue 31).
//!
//! Test hook: `AO_TEST_PAUSE_REMOTE_WATCH=<path>` makes the remote script, before it
//! watches, create `<path>.reached` and wait until `<path>` exists (the test's remote host
//! shares its filesystem). Either way it prints a heartbeat every
//! few seconds, so when our ssh client goes away the remote side ends (the write fails,
//! SIGPIPE being ignored so the shell lives to `kill 0` the inotifywait pipeline)
//! instead of lingering; our ssh client dies with the daemon
//! (PR_SET_PDEATHSIG), so a kill -9 leaves nothing behind on either end.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::Host;
use crate::core::error::{Error, Result};
use crate::core::model::RemoteSpec;
use crate::core::shell::shell_join;

/// After the watch ends (host down, ssh killed), start it again this much later.
const RESTART_AFTER: Duration = Duration::from_secs(2);

/// What a line from the remote watch means.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The folder changed: pull now.
    Changed,
    /// Still watching (the heartbeat).
    Alive,
    /// The watch is live from now on: pull what came before it.
    Ready,
}

/// Read one line of the remote watch's output.
pub fn parse_line(line: &str) -> Option<Line> {
    match line.trim() {
        "changed" => Some(Line::Changed),
        "alive" => Some(Line::Alive),
        "ready" => Some(Line::Ready),
        _ => None,
    }
}

/// The command the remote shell runs to watch `dir` (quoted: it is user-derived); `pause`
/// is the test hook's gate. inotifywait's stderr joins its names so that "Watches
/// established." can say `ready`; its other lines (setting up, an error) only cause a pull.
pub fn script(dir: &str, pause: Option<&str>) -> String {
    let d = shell_join(&[dir]);
    let hook = pause.map_or_else(String::new, |g| {
        format!(
            "g={}; : > \"$g.reached\"; n=0; while [ ! -e \"$g\" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; ",
            shell_join(&[g])
        )
    });
    format!(
        "trap '' PIPE; d={d}; mkdir -p -- \"$d\" || exit 1; echo alive; {hook}\
if command -v inotifywait >/dev/null 2>&1; then \
inotifywait -m -e close_write -e moved_to --format %f -- \"$d\" 2>&1 | \
while IFS= read -r f; do case $f in 'Watches established.') echo ready 2>/dev/null || exit 0;; 'Setting up watches.'*|.*) ;; \
*) echo changed 2>/dev/null || exit 0;; esac; done & \
while :; do sleep 5; echo alive 2>/dev/null || break; done; kill 0; \
else p=; n=0; \
while :; do c=$( (ls -l --full-time -- \"$d\" 2>/dev/null || ls -l -- \"$d\") | cksum); \
if [ \"$c\" != \"$p\" ]; then p=$c; echo changed 2>/dev/null || exit 0; fi; \
n=$((n+1)); if [ $n -ge 25 ]; then n=0; echo alive 2>/dev/null || exit 0; fi; sleep 0.2; done; fi"
    )
}

/// Watch `task`'s handoffs on the host of `spec` until `tx` closes: one `()` per change
/// (and one after each (re)connection, for what changed while nobody watched).
pub async fn run(spec: RemoteSpec, task: String, tx: mpsc::Sender<RemoteSpec>) {
    while !tx.is_closed() {
        if let Err(e) = once(&spec, &task, &tx).await {
            tracing::debug!(host = %spec.destination(), error = %e, "remote watch ended; the periodic pull covers it");
        }
        tokio::time::sleep(RESTART_AFTER).await;
    }
}

async fn once(spec: &RemoteSpec, task: &str, tx: &mpsc::Sender<RemoteSpec>) -> Result<()> {
    let host = Host::connect_backoff(spec).await?;
    let cwd = host.cwd().await?;
    let dir = format!("{cwd}/tasks/{task}/handoffs");
    let prefix = host.ssh_prefix();
    let pause = crate::io::hooks::get()
        .gate(crate::io::hooks::Point::RemoteWatch)
        .map(|p| p.to_string_lossy().into_owned());
    let mut c = Command::new(&prefix[0]);
    c.args(&prefix[1..])
        .arg(script(&dir, pause.as_deref()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    // SAFETY: prctl between fork and exec: the ssh client dies with us, even on kill -9.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = c.spawn().map_err(|e| Error::io("run", "ssh", e))?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| Error::Remote("the remote watch has no output".into()))?;
    let mut lines = BufReader::new(out).lines();
    tracing::debug!(host = %spec.destination(), %dir, "watching remote handoffs");
    while let Some(line) = lines.next_line().await.map_err(|e| Error::io("read", "ssh", e))? {
        let pull = matches!(parse_line(&line), Some(Line::Changed | Line::Ready));
        tracing::debug!(host = %spec.destination(), line = %line.trim(), pull, "remote watch");
        if pull && tx.send(spec.clone()).await.is_err() {
            return Ok(());
        }
    }
    let _ = child.wait().await;
    Err(Error::Remote(format!("the watch on {} ended", spec.destination())))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::process::CommandExt;

    #[test]
    fn lines_are_read_strictly() {
        assert_eq!(parse_line("changed\n"), Some(Line::Changed));
        assert_eq!(parse_line("alive"), Some(Line::Alive));
        assert_eq!(parse_line("ready"), Some(Line::Ready));
        assert_eq!(parse_line("changedx"), None);
        assert_eq!(parse_line(""), None);
    }

    #[test]
    fn the_folder_is_quoted_and_the_script_runs_in_sh() {
        let hostile = "/tmp/it's; rm -rf ~/$(x) `y`\n";
        let s = script(hostile, Some(hostile));
        let out = std::process::Command::new("sh")
            .args(["-n", "-c", &s])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        // The folder arrives in $d exactly as given.
        let assign = s.split("; mkdir").next().unwrap().trim_start_matches("trap '' PIPE; ");
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("{assign}; printf %s \"$d\"")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), hostile);
    }

    #[test]
    fn the_poll_reports_a_change_and_dies_when_nobody_reads() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("handoffs");
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", &script(&dir.to_string_lossy(), None)])
            // Only the POSIX tools: the poll path, whether or not this machine has inotifywait.
            .env("PATH", poll_only_path(d.path()))
            .stdout(std::process::Stdio::piped())
            // Its own process group, as under sshd: the watch ends with `kill 0`.
            .process_group(0)
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "alive");
        assert_eq!(
            lines.next().unwrap().unwrap(),
            "changed",
            "the first listing counts as a change"
        );
        std::fs::write(dir.join("dev-20250101-000000.md"), "x").unwrap();
        let next = lines.find(|l| l.as_deref().ok() == Some("changed"));
        assert!(next.is_some(), "a new file is reported");
        drop(lines);
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while child.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "the loop outlived its reader");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn inotifywait_reports_a_rename_not_the_temp_file_and_ends_with_its_reader() {
        let Some(inotifywait) = crate::io::program::which("inotifywait") else {
            panic!("inotifywait is missing: scripts/test installs inotify-tools");
        };
        let d = tempfile::tempdir().unwrap();
        let bin = poll_only_path(d.path());
        std::os::unix::fs::symlink(inotifywait, bin.join("inotifywait")).unwrap();
        let dir = d.path().join("handoffs");
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", &script(&dir.to_string_lossy(), None)])
            .env("PATH", &bin)
            .stdout(std::process::Stdio::piped())
            // Its own process group, as under sshd: the watch ends with `kill 0`.
            .process_group(0)
            .spawn()
            .unwrap();
        use std::io::BufRead;
        let (tx, rx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                if tx.send(l.unwrap()).is_err() {
                    break;
                }
            }
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "alive");
        // `ready` only once the watch is live: a file renamed in after it is reported.
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "ready");
        let tmp = dir.join(".dev.tmp");
        std::fs::write(&tmp, "x").unwrap();
        std::fs::rename(&tmp, dir.join("dev-1.md")).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).as_deref(), Ok("changed"));
        std::fs::write(dir.join(".only-a-temp"), "x").unwrap();
        let quiet = rx.recv_timeout(Duration::from_millis(500));
        assert!(quiet.is_err() || quiet.as_deref() == Ok("changed"), "{quiet:?}");
        drop(rx);
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while child.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "the watch outlived its reader");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = reader.join();
    }

    /// A PATH of links to the tools the poll uses, and no inotifywait.
    fn poll_only_path(root: &std::path::Path) -> std::path::PathBuf {
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for tool in ["mkdir", "ls", "cksum", "sleep", "kill"] {
            let real = crate::io::program::which(tool).unwrap();
            std::os::unix::fs::symlink(real, bin.join(tool)).unwrap();
        }
        bin
    }
}
