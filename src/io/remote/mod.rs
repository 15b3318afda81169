//! Remote hosts over SSH: one multiplexed master per host (the openssh crate),
//! reused by every remote command, by the remote tmux driver and by rsync.
//!
//! Nothing user-supplied reaches a remote shell unquoted: ssh joins its
//! arguments into one string for the remote shell, so every word goes through
//! [`crate::core::shell::shell_join`]; rsync gets `--secluded-args` (`-s`) so remote paths are not
//! split either. Host specs were validated when task.md was parsed (no leading
//! `-`, no shell metacharacters), and `--` precedes every user path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openssh::{KnownHosts, Session, SessionBuilder};
use tokio::process::Command;
use tokio::sync::Mutex;

use crate::core::error::{Error, Result};
use crate::core::model::RemoteSpec;
use crate::core::shell::shell_join;
use crate::io::tmux::{Socket, Tmux};

pub mod heartbeat;
pub mod sftp;
pub mod transcript;
pub mod watch;

/// How long to wait for a host before calling it unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a whole dial (connect, handshake, login, master up) may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(20);
/// The master's heartbeat: a host that answers none of three in a row (15 s) is given up,
/// so every command waiting on it fails rather than hangs, and the host counts as silent.
/// (A stopped or partitioned host keeps its TCP connection: only this notices.)
const SERVER_ALIVE: Duration = Duration::from_secs(5);
/// Pulls at once per host. One: three at once measured no better in `ao-bench fleet`, and
/// every pull is a session on the host's one master, where sshd allows ten (`MaxSessions`)
/// beside each task's watch and the heartbeat.
const PULLS_PER_HOST: usize = 1;
/// A master with no client for this long ends by itself (no ssh left behind after a kill).
const IDLE_PERSIST: Duration = Duration::from_secs(10);
/// The tmux socket name used on remote hosts (`AO_REMOTE_TMUX_SOCKET` overrides: a name or a
/// path, where `{host}` stands for the host's name).
const REMOTE_SOCKET_NAME: &str = "agent-orchestrator";

/// A connected host: the spec it was reached by and its master connection.
#[derive(Clone)]
pub struct Host {
    /// What task.md said (`[user@]host[:port]:/path`).
    pub spec: RemoteSpec,
    session: Arc<Session>,
}

/// What this process knows of each host, by [`key`] (a process memo: [`crate::store::memo`]).
#[derive(Default)]
struct Hosts {
    /// The master connection, one slot per host: a slow or silent host holds its own slot
    /// while it is checked or dialled, never another host's.
    masters: std::sync::Mutex<HashMap<String, Slot>>,
    /// Whether it has rsync (see [`Host::has_rsync`]).
    rsync: std::sync::Mutex<HashMap<String, bool>>,
    /// Consecutive connection failures and when the next attempt is allowed, so an
    /// unreachable host is retried with backoff (2 s, 4 s, … 60 s), not hammered.
    backoff: std::sync::Mutex<HashMap<String, (u32, std::time::Instant)>>,
    /// Its pull turns: at most [`PULLS_PER_HOST`] pulls per host at a time.
    pulls: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
    /// Its home folder as the master that asked found it (see [`Host::cwd`]).
    homes: std::sync::Mutex<HashMap<String, (std::sync::Weak<Session>, String)>>,
}

impl crate::store::memo::Memo for Hosts {
    const NAME: &'static str = "remote hosts";
    fn entries(&self) -> usize {
        self.backoff
            .lock()
            .map_or(0, |b| b.len())
            .max(self.rsync.lock().map_or(0, |r| r.len()))
    }
}

fn hosts() -> &'static Hosts {
    crate::store::memo::get::<Hosts>()
}

/// One host's master, when it has one.
type Slot = Arc<Mutex<Option<Arc<Session>>>>;

/// `spec`'s slot (made empty on first use).
fn slot(spec: &RemoteSpec) -> Slot {
    hosts()
        .masters
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key(spec))
        .or_default()
        .clone()
}

/// A host's key in the process's memos and in [`crate::io::health`]: destination and port.
pub fn key(spec: &RemoteSpec) -> String {
    format!("{}:{}", spec.destination(), spec.port.unwrap_or(0))
}

fn rsync_hosts() -> &'static std::sync::Mutex<HashMap<String, bool>> {
    &hosts().rsync
}

/// An ssh config file to use instead of `~/.ssh/config` (`AO_SSH_CONFIG`).
fn config_file() -> Option<PathBuf> {
    std::env::var_os("AO_SSH_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn backoff() -> &'static std::sync::Mutex<HashMap<String, (u32, std::time::Instant)>> {
    &hosts().backoff
}

/// The wait after `failures` consecutive failures. Pure.
pub fn backoff_delay(failures: u32) -> Duration {
    Duration::from_secs((2u64 << failures.saturating_sub(1).min(5)).min(60))
}

impl Host {
    /// This host's key in the process's memos and in [`crate::io::health`].
    pub fn key(&self) -> String {
        key(&self.spec)
    }

    /// Like [`Host::connect`], but refuses at once while a failed host is backing off or
    /// its heartbeat finds it silent.
    pub async fn connect_backoff(spec: &RemoteSpec) -> Result<Host> {
        let k = key(spec);
        if let Some(since) = crate::io::health::silent_since(&k) {
            return Err(Error::Remote(crate::io::health::silent_error(
                &format!("reach {}", spec.destination()),
                since,
            )));
        }
        if let Some((n, next)) = backoff().lock().expect("not poisoned").get(&k).copied() {
            if std::time::Instant::now() < next {
                return Err(Error::Remote(format!(
                    "{} is unreachable ({n} failed attempts); retrying after a pause",
                    spec.destination()
                )));
            }
        }
        let r = Host::connect(spec).await;
        let mut b = backoff().lock().expect("not poisoned");
        match &r {
            Ok(_) => {
                b.remove(&k);
            }
            Err(_) => {
                let n = b.get(&k).map_or(0, |e| e.0) + 1;
                b.insert(k, (n, std::time::Instant::now() + backoff_delay(n)));
            }
        }
        r
    }

    /// The master for `spec`'s host, connecting (BatchMode: keys or agent only) when there
    /// is none or the old one died. One per host per process.
    pub async fn connect(spec: &RemoteSpec) -> Result<Host> {
        let slot = slot(spec);
        let mut held = slot.lock().await;
        if let Some(s) = held.as_ref() {
            if s.check().await.is_ok() {
                return Ok(Host {
                    spec: spec.clone(),
                    session: s.clone(),
                });
            }
            *held = None;
        }
        let dir = crate::store::paths::runtime_dir().join("ssh");
        crate::store::fsutil::create_dir_all(&dir)?;
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let mut b = SessionBuilder::default();
        b.known_hosts_check(KnownHosts::Add)
            .connect_timeout(CONNECT_TIMEOUT)
            .server_alive_interval(SERVER_ALIVE)
            .control_directory(&dir)
            .control_persist(openssh::ControlPersist::IdleFor(
                std::num::NonZeroUsize::new(IDLE_PERSIST.as_secs() as usize).expect("non-zero"),
            ));
        if let Some(u) = &spec.user {
            b.user(u.clone());
        }
        if let Some(p) = spec.port {
            b.port(p);
        }
        if let Some(f) = config_file() {
            b.config_file(f);
        }
        // Bounded here, for every caller: a host whose sshd accepts the connection and then
        // says nothing (stopped, or behind a partition) would otherwise hold the dialler.
        let session = match tokio::time::timeout(DIAL_TIMEOUT, b.connect(&spec.host)).await {
            Ok(r) => r.map_err(|e| {
                Error::Remote(format!(
                    "cannot reach {} over ssh: {e}; check that `ssh {}` works without a password prompt (keys or ssh-agent), then retry — nothing was started",
                    spec.destination(),
                    spec.destination()
                ))
            })?,
            Err(_) => {
                return Err(Error::Remote(format!(
                    "{} did not finish the ssh handshake within {} s; check that `ssh {}` answers — nothing was started",
                    spec.destination(),
                    DIAL_TIMEOUT.as_secs(),
                    spec.destination()
                )));
            }
        };
        let session = Arc::new(session);
        *held = Some(session.clone());
        Ok(Host {
            spec: spec.clone(),
            session,
        })
    }

    /// The argv prefix that runs one command on this host over the master
    /// (append one already-quoted command string).
    pub fn ssh_prefix(&self) -> Vec<String> {
        let mut v = vec![
            "ssh".to_string(),
            "-S".into(),
            self.session.control_socket().display().to_string(),
            "-o".into(),
            "ControlMaster=no".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-T".into(),
        ];
        if let Some(f) = config_file() {
            v.push("-F".into());
            v.push(f.display().to_string());
        }
        if let Some(p) = self.spec.port {
            v.push("-p".into());
            v.push(p.to_string());
        }
        if let Some(u) = &self.spec.user {
            v.push("-l".into());
            v.push(u.clone());
        }
        v.push("--".into());
        v.push(self.spec.host.clone());
        v
    }

    /// Run `words` on the host; stdout on success, an error naming `what` otherwise.
    pub async fn run(&self, what: &str, words: &[&str], stdin: Option<&[u8]>) -> Result<String> {
        let (code, stdout, stderr) = self.output(words, stdin).await?;
        if code == 0 {
            Ok(stdout)
        } else {
            Err(Error::Remote(format!(
                "{what} on {} failed: {}",
                self.spec.destination(),
                stderr.trim()
            )))
        }
    }

    /// Run `words` on the host whatever its exit: (exit code, stdout, stderr). ssh's own
    /// failure to reach the host is exit 255.
    pub async fn output(&self, words: &[&str], stdin: Option<&[u8]>) -> Result<(i32, String, String)> {
        let what = format!("run {} on {}", words.first().unwrap_or(&""), self.spec.destination());
        crate::io::health::until_silent(&self.key(), &what, self.output_unguarded(words, stdin)).await
    }

    async fn output_unguarded(&self, words: &[&str], stdin: Option<&[u8]>) -> Result<(i32, String, String)> {
        let prefix = self.ssh_prefix();
        let mut c = Command::new(&prefix[0]);
        c.args(&prefix[1..])
            .arg(shell_join(words))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        c.stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        });
        let mut child = c.spawn().map_err(|e| Error::io("run", "ssh", e))?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use tokio::io::AsyncWriteExt;
            pipe.write_all(data)
                .await
                .map_err(|e| Error::io("write to", "ssh", e))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| Error::io("wait for", "ssh", e))?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// `GIT_SSH_COMMAND` for git to reach this host over the master: git appends the host
    /// and its command, so the prefix stops before them.
    pub fn git_ssh_command(&self) -> String {
        let mut p = self.ssh_prefix();
        p.truncate(p.len().saturating_sub(2)); // "--" and the host
        shell_join(&p)
    }

    /// The `ssh://` URL of the repository at `path` (absolute) on this host.
    pub fn git_url(&self, path: &str) -> String {
        let user = self.spec.user.as_ref().map(|u| format!("{u}@")).unwrap_or_default();
        let port = self.spec.port.map(|p| format!(":{p}")).unwrap_or_default();
        format!("ssh://{user}{}{port}{path}", self.spec.host)
    }

    /// The remote working folder, with a leading `~` resolved on the host.
    ///
    /// Asked once per master, not at every pull, watch, cost look and spawn: each ask is a
    /// session on the host, and the session (its login shell) was most of what the kept
    /// SFTP channel took off a pull. Kept only while the master that asked lives (a new
    /// master asks again), which is as long as the process trusts anything else it learnt
    /// of the host.
    pub async fn cwd(&self) -> Result<String> {
        let Some(rest) = self.spec.path.strip_prefix('~') else {
            return Ok(self.spec.path.clone());
        };
        if let Some(home) = self.home_known() {
            return Ok(format!("{home}{rest}"));
        }
        let home = self
            .run("find the home folder", &["sh", "-c", "printf %s \"$HOME\""], None)
            .await?;
        tracing::debug!(host = %self.spec.destination(), %home, "asked the host for its home folder");
        hosts()
            .homes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(self.key(), (Arc::downgrade(&self.session), home.clone()));
        Ok(format!("{home}{rest}"))
    }

    /// The home folder this host's master found, if this master asked. A `Weak` keeps the
    /// master's allocation, so its address names that master and no later one.
    fn home_known(&self) -> Option<String> {
        let homes = hosts().homes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (master, home) = homes.get(&self.key())?;
        std::ptr::eq(master.as_ptr(), Arc::as_ptr(&self.session)).then(|| home.clone())
    }

    /// The tmux server on the host (its own socket, never the user's default).
    pub fn tmux(&self) -> Result<Tmux> {
        // `{host}` in the override stands for the host as task.md names it: hosts that are
        // one machine (the test fleet) then keep a tmux server each, as real ones do.
        let socket = match std::env::var("AO_REMOTE_TMUX_SOCKET").map(|s| s.replace("{host}", &self.spec.host)) {
            Ok(s) if s.contains('/') => Socket::Path(PathBuf::from(s)),
            Ok(s) if !s.is_empty() => Socket::Name(s),
            _ => Socket::Name(REMOTE_SOCKET_NAME.into()),
        };
        Tmux::remote(socket, self.ssh_prefix(), &self.key())
    }

    /// Write `data` to `path` on the host atomically (temp file in the same folder, then rename).
    pub async fn put(&self, path: &str, data: &[u8]) -> Result<()> {
        self.put_with_mtime(path, data, None).await
    }

    /// [`Host::put`], giving the file the local copy's mtime (seconds since the epoch), so
    /// the next pull sees the same file and does not copy it back.
    pub async fn put_with_mtime(&self, path: &str, data: &[u8], mtime: Option<i64>) -> Result<()> {
        let tmp = format!("{path}.ao-tmp");
        let stamp = mtime.map(|m| format!("@{m}")).unwrap_or_default();
        let script = "cat > \"$1\" && { [ -z \"$3\" ] || touch -d \"$3\" -- \"$1\"; } && mv -f -- \"$1\" \"$2\"";
        self.run(
            &format!("write {path}"),
            &["sh", "-c", script, "sh", &tmp, path, &stamp],
            Some(data),
        )
        .await
        .map(|_| ())
    }

    /// Whether the host has rsync, asked once per host (every pull would otherwise pay
    /// an extra round trip for it) and again after a failed pull.
    async fn has_rsync(&self) -> bool {
        if let Some(known) = rsync_hosts().lock().expect("not poisoned").get(&key(&self.spec)) {
            return *known;
        }
        let has = self.has_program("rsync").await;
        rsync_hosts().lock().expect("not poisoned").insert(key(&self.spec), has);
        has
    }

    /// Whether `program` is found on the host's PATH (or exists, for a path).
    pub async fn has_program(&self, program: &str) -> bool {
        self.run(
            "look for a program",
            &["sh", "-c", "command -v -- \"$1\" >/dev/null", "sh", program],
            None,
        )
        .await
        .is_ok()
    }

    /// Copy the remote `tasks/<task>/{handoffs,artifacts}` into the local task folder:
    /// over the host's kept SFTP channel ([`sftp`]: no new session on the host), else —
    /// no channel, a failed one, files too big for it — with rsync over the master. Either
    /// way mtimes are kept, partial files kept outside the watched folders and renamed into
    /// place at the end, deletions not propagated, symlinks never followed (and never read
    /// later: local scans skip them). Returns the handoffs it brought (file names in
    /// `handoffs/`): each is in place, whole, when this returns, so the daemon takes it as
    /// renamed in without waiting for the watcher to say so.
    ///
    /// `AO_PULL_WITH=rsync` or `=sftp` pulls only that way (tests, benches).
    pub async fn pull(&self, remote_task_dir: &str, local_task_dir: &Path) -> Result<Vec<String>> {
        let what = format!("pull {}:{remote_task_dir}", self.spec.destination());
        crate::io::health::until_silent(&self.key(), &what, self.pull_unguarded(remote_task_dir, local_task_dir)).await
    }

    async fn pull_unguarded(&self, remote_task_dir: &str, local_task_dir: &Path) -> Result<Vec<String>> {
        // Tasks sharing a host take turns pulling from it (see PULLS_PER_HOST).
        let gate = {
            let mut g = hosts().pulls.lock().expect("not poisoned");
            g.entry(key(&self.spec))
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(PULLS_PER_HOST)))
                .clone()
        };
        let _turn = gate
            .acquire()
            .await
            .map_err(|_| Error::Remote("pull turns closed".into()))?;
        let mut arrived = Vec::new();
        if std::env::var_os("AO_PULL_WITH").is_none() {
            match self.pull_kept(remote_task_dir, local_task_dir).await {
                Some(c) if c.left == 0 => return Ok(c.arrived),
                Some(c) => arrived = c.arrived,
                None => {}
            }
        }
        let mut more = self.pull_whole(remote_task_dir, local_task_dir).await?;
        arrived.append(&mut more);
        Ok(arrived)
    }

    /// Pull with rsync, or a channel of SFTP's own when rsync is missing on either end.
    async fn pull_whole(&self, remote_task_dir: &str, local_task_dir: &Path) -> Result<Vec<String>> {
        let forced = std::env::var("AO_PULL_WITH").is_ok_and(|v| v == "sftp");
        if forced || crate::io::program::which("rsync").is_none() || !self.has_rsync().await {
            return self.pull_sftp(remote_task_dir, local_task_dir).await;
        }
        let partial = local_task_dir.join(".pull-partial");
        let prefix = self.ssh_prefix();
        let ssh = shell_join(&prefix[..prefix.len() - 2]);
        for sub in ["handoffs", "artifacts"] {
            crate::store::fsutil::create_dir_all(&local_task_dir.join(sub))?;
        }
        // rsync creates neither, and silently discards files when the partial dir is missing.
        crate::store::fsutil::create_dir_all(&partial.join("keep"))?;
        crate::store::fsutil::create_dir_all(&partial.join("tmp"))?;
        // One rsync for both folders (one round of the protocol, not two).
        let srcs = [
            format!("{}:{remote_task_dir}/handoffs", self.spec.host),
            format!(":{remote_task_dir}/artifacts"),
        ];
        let out = Command::new("rsync")
            .args(["-a", "-s", "--safe-links", "--delay-updates", "--timeout=30"])
            .arg(format!("--partial-dir={}", partial.join("keep").display()))
            .arg(format!("--temp-dir={}", partial.join("tmp").display()))
            .arg("--exclude=.*")
            .arg("--out-format=%n")
            .arg("-e")
            .arg(&ssh)
            .arg("--")
            .args(&srcs)
            .arg(format!("{}/", local_task_dir.display()))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| Error::Environment(format!("cannot run rsync ({e}); install it (apt-get install rsync)")))?;
        tracing::debug!(status = ?out.status, stderr = %String::from_utf8_lossy(&out.stderr).trim(), "rsync pull");
        // 23/24: some files vanished or could not be read mid-transfer; the next pull retries.
        if !out.status.success() && !matches!(out.status.code(), Some(23 | 24)) {
            // Whether the host has rsync is asked again next time (it may be what failed).
            rsync_hosts().lock().expect("not poisoned").remove(&key(&self.spec));
            return Err(Error::Remote(format!(
                "pulling {}:{remote_task_dir} failed: {}",
                self.spec.destination(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(arrived_handoffs(&String::from_utf8_lossy(&out.stdout)))
    }
}

/// The handoffs an rsync pull brought, from its `--out-format=%n` lines (`handoffs/NAME`;
/// the folder itself, artifacts and dot names are not handoffs). Pure.
pub fn arrived_handoffs(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.strip_prefix("handoffs/"))
        .filter(|n| !n.is_empty() && !n.contains('/') && !n.starts_with('.'))
        .map(str::to_string)
        .collect()
}

/// Replace this process with `ssh -t <host> tmux … attach-session -t =<session>`
/// (a terminal needs its own ssh, not the multiplexed master's pipes).
pub fn attach_exec(spec: &RemoteSpec, tmux: &Tmux, session: &str) -> Error {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new("ssh");
    c.arg("-t");
    if let Some(f) = config_file() {
        c.arg("-F").arg(f);
    }
    if let Some(p) = spec.port {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(u) = &spec.user {
        c.arg("-l").arg(u);
    }
    let mut words = vec!["tmux".to_string(), "-u".to_string()];
    match tmux.socket() {
        Socket::Name(n) => words.extend(["-L".to_string(), n.clone()]),
        Socket::Path(p) => words.extend(["-S".to_string(), p.display().to_string()]),
    }
    words.extend(["attach-session".into(), "-t".into(), format!("={session}")]);
    c.arg("--").arg(&spec.host).arg(shell_join(&words));
    Error::io("run ssh to attach", &spec.host, c.exec())
}

/// End every master this process opened (daemon shutdown, end of a CLI command).
pub async fn close_all() {
    sftp::close_kept().await;
    let slots: Vec<Slot> = hosts()
        .masters
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .map(|(_, s)| s)
        .collect();
    let mut sessions = Vec::new();
    for slot in slots {
        sessions.extend(slot.lock().await.take());
    }
    for s in sessions {
        if let Ok(s) = Arc::try_unwrap(s) {
            let _ = s.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pulls_listing_names_only_the_handoffs_it_brought() {
        let listing = "handoffs/\nhandoffs/dev-20250101-000000.md\nartifacts/analysis/x.md\nhandoffs/.dev-1.md.tmp\nartifacts/handoffs/y.md\nhandoffs/sub/z.md\nhandoffs/pm-20250101-000001.md\n";
        assert_eq!(
            arrived_handoffs(listing),
            ["dev-20250101-000000.md", "pm-20250101-000001.md"]
        );
        assert!(arrived_handoffs("").is_empty());
    }

    #[test]
    fn reconnects_back_off_to_a_minute() {
        let d: Vec<u64> = (1..=8).map(|n| backoff_delay(n).as_secs()).collect();
        assert_eq!(d, vec![2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        assert_eq!(shell_join(&["tmux", "-L", "x"]), "tmux -L x");
        // What a shell makes of the joined line is exactly the words, whatever they hold.
        let words = [
            "printf",
            "%s\\n",
            "a;b",
            "$(id)",
            "it's",
            "`x`",
            "-rf",
            "",
            "two words",
            "new\nline",
            "\"q\"",
        ];
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(shell_join(&words))
            .output()
            .unwrap();
        let got: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .split('\n')
            .map(str::to_string)
            .collect();
        let want: Vec<String> = words[2..]
            .iter()
            .flat_map(|w| w.split('\n'))
            .map(str::to_string)
            .chain([String::new()])
            .collect();
        assert_eq!(got, want);
    }
}
