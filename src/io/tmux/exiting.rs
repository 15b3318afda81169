//! A tmux server that is exiting, met while starting a session. After `kill-server` (or a
//! SIGTERM) the server closes every new connection ("server exited unexpectedly") until its
//! last client has gone, which is normally a few milliseconds; a PM restarted then would
//! fail, so starting a session waits ([`Patience`]). And one case never ends: a server
//! handed a session after it began to exit — a `new-session` whose client had connected
//! just before, or a hook run by the exit — keeps the socket, refuses every client and
//! holds the late session forever (tmux 3.3a), so no agent could be started on that socket
//! again. A SIGTERM makes it end its sessions once more, and this time it goes; the process
//! to signal is the one listening on the socket ([`finish_exit`]), as tmux cannot be asked.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long starting a session waits for a server that is going away before the failure
/// counts: long enough for its clients to go, well under the PM's restart backoff.
const PATIENCE: Duration = Duration::from_secs(6);
/// How long a server may refuse every client while going away before it is taken for one
/// that never finishes and asked to.
const STUCK_AFTER: Duration = Duration::from_secs(1);

/// Whether tmux's complaint means the server was exiting as the client connected (it
/// closes every new connection then): a wait and a new try will reach a new server.
pub fn refused(detail: &str) -> bool {
    detail.contains("server exited unexpectedly")
}

/// One session start's waiting for a server that is exiting: pauses of 0.1, 0.2, 0.4 s
/// and then 1 s, a SIGTERM to a local server still refusing after a second, 6 s in all.
#[derive(Debug)]
pub struct Patience {
    pause: Duration,
    waited: Duration,
    asked: bool,
}

impl Default for Patience {
    fn default() -> Self {
        Patience {
            pause: Duration::from_millis(100),
            waited: Duration::ZERO,
            asked: false,
        }
    }
}

impl Patience {
    /// Whether another try is worth it.
    pub fn left(&self) -> bool {
        self.waited < PATIENCE
    }

    /// Wait before the next try; past [`STUCK_AFTER`], ask the server listening at
    /// `local` (a local socket) to finish exiting, once.
    pub async fn wait(&mut self, local: Option<PathBuf>, flags: &str) {
        tracing::debug!(
            waited_ms = self.waited.as_millis() as u64,
            "tmux server still going away; starting the session again"
        );
        if let Some(socket) = local
            && !self.asked
            && self.waited >= STUCK_AFTER
        {
            self.asked = true;
            let asked = tokio::task::spawn_blocking(move || finish_exit(&socket))
                .await
                .unwrap_or_default();
            tracing::warn!(
                socket = %flags,
                ?asked,
                "the tmux server refused every client for a second while going away; asked it to finish (SIGTERM)"
            );
        }
        tokio::time::sleep(self.pause).await;
        self.waited += self.pause;
        self.pause = (self.pause * 2).min(Duration::from_secs(1));
    }
}

/// The inodes of the listening unix sockets bound at `path`, read from the text of
/// /proc/net/unix (`Num RefCount Protocol Flags Type St Inode Path`; flag 0x10000 is
/// `__SO_ACCEPTCON`, a listening socket).
pub fn listening_inodes(net_unix: &str, path: &Path) -> Vec<u64> {
    let want = path.as_os_str().as_encoded_bytes();
    net_unix
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut words = line.split_ascii_whitespace();
            let flags = u32::from_str_radix(words.nth(3)?, 16).ok()?;
            let inode: u64 = words.nth(2)?.parse().ok()?;
            // The path is the rest of the line (it may hold spaces).
            let at = line.find(&format!(" {inode} "))? + inode.to_string().len() + 2;
            let bound = line[at..].trim_start();
            (flags & 0x10000 != 0 && bound.as_bytes() == want).then_some(inode)
        })
        .collect()
}

/// Ask the tmux server listening at `path` to finish exiting (SIGTERM); the pids asked.
/// Only a process of this user named `tmux…` that holds the listening socket is signalled.
pub fn finish_exit(path: &Path) -> Vec<u32> {
    let mut paths = vec![path.to_path_buf()];
    if let Ok(real) = path.canonicalize()
        && real != path
    {
        paths.push(real);
    }
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let inodes: Vec<String> = paths
        .iter()
        .flat_map(|p| listening_inodes(&table, p))
        .map(|i| format!("socket:[{i}]"))
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut asked = Vec::new();
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let is_tmux = std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with("tmux"));
        if !is_tmux {
            continue;
        }
        let holds = std::fs::read_dir(e.path().join("fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
            })
        });
        // SAFETY: a signal to a tmux server of this user (its fds were readable) that
        // holds the socket it refuses every client on.
        if holds && unsafe { libc::kill(pid as i32, libc::SIGTERM) } == 0 {
            asked.push(pid);
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 11306593 /tmp/ao x/tmux.sock
0000000000000000: 00000003 00000000 00000000 0001 03 11306600 /tmp/ao x/tmux.sock
0000000000000000: 00000002 00000000 00010000 0001 01 11306601 /tmp/ao x/tmux.sock2
0000000000000000: 00000002 00000000 00010000 0001 01 11306602 @/tmp/.X11-unix/X0
0000000000000000: 00000003 00000000 00000000 0001 03 11306603
";

    #[test]
    fn only_a_server_going_away_is_waited_for() {
        assert!(refused("server exited unexpectedly"));
        assert!(!refused("no server running on /tmp/x/sock"));
        assert!(!refused("duplicate session: aot-t1-pm"));
        assert!(!refused(""));
    }

    #[test]
    fn only_the_socket_listening_at_the_path_is_found() {
        assert_eq!(
            listening_inodes(TABLE, Path::new("/tmp/ao x/tmux.sock")),
            vec![11306593]
        );
        assert_eq!(listening_inodes(TABLE, Path::new("/tmp/ao x/tmux")), Vec::<u64>::new());
        assert_eq!(listening_inodes(TABLE, Path::new("/tmp/nothing")), Vec::<u64>::new());
        assert_eq!(
            listening_inodes("", Path::new("/tmp/ao x/tmux.sock")),
            Vec::<u64>::new()
        );
    }
}
