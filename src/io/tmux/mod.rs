//! The tmux driver: sessions, panes, buffers — always on a named server.
//!
//! Every call names its server: `-L agent-orchestrator` by default (reach it
//! by hand with `tmux -L agent-orchestrator ls`), `$AO_TMUX_SOCKET` to choose
//! another (a path means `-S`, a bare name `-L`). The user's default server is
//! never touched. With `$AO_TMUX_GUARD_DIR` set (tests set it), any socket
//! outside that folder is refused loudly, so a test can never reach a real
//! server by accident.
//!
//! The base `tmux -L/-S` invocation is built with tmux_interface; its
//! per-command builders take a shell string for the pane command, which we
//! refuse (agents start from an argv, never a shell string), so the verbs are
//! argument lists built here, each known tmux trap handled:
//! - an argument ending in `;` ends the tmux command → [`escape_arg`];
//! - text starting with `-` is taken as a flag → `--` before argv, and text
//!   goes through buffers on stdin, never `send-keys`;
//! - `-t name` prefix-matches (`task1` hits `task10`) → `=name` or pane ids;
//! - `new-session -c /missing` silently falls back → the folder is checked first;
//! - a pane whose command exits vanishes → `remain-on-exit on`, so its exit
//!   status can be reported;
//! - tmux 3.3a can miss the SIGCHLD of a command that exits at once: the pane
//!   shows dead with no status and the process stays a zombie until the next
//!   child of the server ends → [`Tmux::list_panes`] runs `run-shell true`
//!   once when it sees such a pane, which makes the server reap;
//! - a tmux server keeps the signal mask of the client that started it, and a
//!   blocked SIGCHLD means no pane is ever reaped → [`crate::io::signals`];
//! - a server going away (`kill-server`) refuses new clients until its last client
//!   has gone, and one handed a session after it began never goes → starting a
//!   session waits, lets go of the control client, and asks such a server to
//!   finish ([`exiting`]).

mod control;
mod exiting;
mod groups;
mod listing;
mod panes;
mod screens;

use groups::end_groups;

use panes::SERVER_FORMAT;
pub use panes::{PaneInfo, ServerId, find_pane};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::core::error::{Error, Result};

/// Default server name (`tmux -L agent-orchestrator`).
pub const DEFAULT_SOCKET_NAME: &str = "agent-orchestrator";

/// Which tmux server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Socket {
    /// `-L name` (a socket in tmux's per-user folder).
    Name(String),
    /// `-S path`.
    Path(PathBuf),
}

impl Socket {
    /// The flags for plain tmux, for messages and the README.
    /// The socket file: the path, or where tmux puts a named socket
    /// (`$TMUX_TMPDIR` or /tmp, then `tmux-<uid>/<name>`), as `$TMUX` spells it.
    pub fn path(&self) -> PathBuf {
        match self {
            Socket::Path(p) => p.clone(),
            Socket::Name(n) => {
                let base = std::env::var_os("TMUX_TMPDIR")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/tmp"));
                // SAFETY: getuid never fails.
                base.join(format!("tmux-{}", unsafe { libc::getuid() })).join(n)
            }
        }
    }

    pub fn flags(&self) -> String {
        match self {
            Socket::Name(n) => format!("-L {n}"),
            Socket::Path(p) => format!("-S {}", p.display()),
        }
    }
}

/// A handle on one tmux server. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: Socket,
    /// When set, every tmux call runs on a remote host through this ssh prefix
    /// (the multiplexed master of [`crate::io::remote`]); arguments are shell-quoted.
    via: Option<std::sync::Arc<Vec<String>>>,
    /// The remote host's key in [`crate::io::health`]: its commands end when it falls silent.
    host: Option<std::sync::Arc<str>>,
    /// The process's control-mode client for this (local) server, when the daemon turned
    /// them on ([`control::enable`]): the hot path's reads go through it.
    control: Option<std::sync::Arc<control::Control>>,
    /// The last full pane listing and when it was asked, shared by every clone
    /// ([`Tmux::list_panes_expecting`]).
    recent: std::sync::Arc<std::sync::Mutex<Option<Listing>>>,
    /// Screens captured before, shared by every clone ([`Tmux::capture_unless_unchanged`]).
    screens: std::sync::Arc<std::sync::Mutex<screens::Screens>>,
}

use listing::Listing;
pub use listing::{Panes, RECENT};

pub use control::enable as use_control_mode;

/// Escape an argument so tmux's command parser takes it literally: a trailing
/// `;` would otherwise end the command.
pub fn escape_arg(s: &str) -> Cow<'_, str> {
    if let Some(head) = s.strip_suffix(';') {
        let mut out = head.to_string();
        out.push_str("\\;");
        Cow::Owned(out)
    } else {
        Cow::Borrowed(s)
    }
}

/// What to start in a new session.
#[derive(Debug, Clone)]
pub struct SessionSpec<'a> {
    /// Session name (exact; validated names only).
    pub name: &'a str,
    /// Working directory; must exist.
    pub cwd: &'a Path,
    /// Environment for the pane.
    pub env: Vec<(String, String)>,
    /// The program and its arguments (no shell).
    pub argv: Vec<String>,
}

impl Tmux {
    /// A handle on `socket`, refused when the test guard says it is not ours.
    pub fn new(socket: Socket) -> Result<Tmux> {
        if let Some(guard) = std::env::var_os("AO_TMUX_GUARD_DIR") {
            let guard = PathBuf::from(guard);
            let ok = matches!(&socket, Socket::Path(p) if p.starts_with(&guard));
            if !ok {
                return Err(Error::BadInput(format!(
                    "refusing to use tmux server '{}': AO_TMUX_GUARD_DIR={} allows only sockets inside it (a test would have reached a real server)",
                    socket.flags(),
                    guard.display()
                )));
            }
        }
        let t = Tmux {
            socket,
            via: None,
            host: None,
            control: None,
            recent: Default::default(),
            screens: Default::default(),
        };
        Ok(if control::enabled() { t.with_control() } else { t })
    }

    /// This handle with the process's control-mode client for its server (made on first
    /// ask, shared by every handle on the server); a remote server keeps one-shot clients.
    pub fn with_control(mut self) -> Tmux {
        if self.via.is_none() {
            let base = self.command(&[]);
            self.control = Some(control::shared(self.socket.path(), base.as_std()));
        }
        self
    }

    /// How many commands the control client has answered (0 without one).
    pub fn control_answers(&self) -> u64 {
        self.control.as_ref().map_or(0, |c| c.answered())
    }

    /// How many control clients were started for this server (0 without one).
    pub fn control_connects(&self) -> u64 {
        self.control.as_ref().map_or(0, |c| c.connects())
    }

    /// Held around this process's session starts and ends so that no control client of
    /// it is identifying meanwhile ([`control::Control::changing`]); nothing without one.
    async fn changing(&self) -> Option<tokio::sync::RwLockReadGuard<'_, ()>> {
        match &self.control {
            Some(c) => Some(c.changing().await),
            None => None,
        }
    }

    /// A command of the hot path: through the control client when there is one and it
    /// answers with success, else exactly the one-shot [`Tmux::run`] (so an error reads the
    /// same as ever). A command with an effect (`once`) whose answer was lost is not run
    /// again: the error says so.
    async fn run_hot(&self, what: &str, args: &[&str], once: bool) -> Result<String> {
        if let Some(c) = &self.control {
            match c.run(args).await {
                control::Outcome::Answered(r) if r.ok => return Ok(String::from_utf8_lossy(&r.output).into_owned()),
                control::Outcome::Lost if once => return Err(self.lost(what)),
                _ => {}
            }
        }
        self.run(what, args).await
    }

    /// A command with an effect whose answer the control client lost: it may have run, so it
    /// is not run again.
    fn lost(&self, what: &str) -> Error {
        Error::Tmux {
            what: what.to_string(),
            detail: "the tmux control client went away before answering".into(),
            socket: self.socket.flags(),
        }
    }

    /// The same kind of handle for a tmux server on a remote host: `ssh` is the
    /// argv prefix that runs one command there (ending in the destination).
    pub fn remote(socket: Socket, ssh: Vec<String>, host: &str) -> Result<Tmux> {
        let mut t = Tmux::new(socket)?;
        t.via = Some(std::sync::Arc::new(ssh));
        t.host = Some(host.into());
        t.control = None;
        Ok(t)
    }

    /// Whether this server is on a remote host.
    pub fn is_remote(&self) -> bool {
        self.via.is_some()
    }

    /// The server from `$AO_TMUX_SOCKET` (path → `-S`, name → `-L`), default `-L agent-orchestrator`.
    pub fn from_env() -> Result<Tmux> {
        let socket = match std::env::var("AO_TMUX_SOCKET") {
            Ok(s) if s.contains('/') => Socket::Path(PathBuf::from(s)),
            Ok(s) if !s.is_empty() => Socket::Name(s),
            _ => Socket::Name(DEFAULT_SOCKET_NAME.into()),
        };
        Tmux::new(socket)
    }

    /// Which server this is.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    /// Where this server is, as one string (the ssh prefix of a remote one included): the
    /// key of per-pane delivery locks, so pane `%0` of two servers never shares a lock.
    /// (Its identity over restarts is [`Tmux::server_id`].)
    pub fn address(&self) -> String {
        let socket = self.socket.path().display().to_string();
        match &self.via {
            Some(ssh) => format!("{} {socket}", ssh.join(" ")),
            None => socket,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let base = match &self.socket {
            Socket::Name(n) => tmux_interface::Tmux::new().socket_name(n.as_str()),
            Socket::Path(p) => tmux_interface::Tmux::new().socket_path(p.to_string_lossy()),
        };
        let mut c = match &self.via {
            None => {
                let mut c = Command::from(base.into_command());
                c.args(args);
                // This client may start the server, which keeps the mask it was born with.
                crate::io::signals::clean_child(&mut c);
                c
            }
            Some(ssh) => {
                // ssh joins its arguments into one string for the remote shell: quote each.
                let local = base.into_command();
                // -u: an ssh session usually has no UTF-8 locale, and tmux would then show
                // every non-ASCII character of the agents' screens as `_`.
                let mut words: Vec<String> = vec![local.get_program().to_string_lossy().into_owned(), "-u".into()];
                words.extend(local.get_args().map(|a| a.to_string_lossy().into_owned()));
                words.extend(args.iter().map(|a| a.to_string()));
                let mut c = Command::new(&ssh[0]);
                c.args(&ssh[1..]).arg(crate::core::shell::shell_join(&words));
                c
            }
        };
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Run one tmux invocation; stdout on success, an error naming `what` otherwise.
    pub async fn run(&self, what: &str, args: &[&str]) -> Result<String> {
        self.run_command(what, self.command(args)).await
    }

    /// Run `c`; on a remote host, ended the moment its heartbeat finds it silent.
    async fn output(&self, mut c: Command) -> std::io::Result<std::process::Output> {
        match &self.host {
            None => c.output().await,
            Some(k) => crate::io::health::race(k, c.output()).await.unwrap_or_else(|since| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    crate::io::health::silent_error("tmux", since),
                ))
            }),
        }
    }

    async fn run_command(&self, what: &str, c: Command) -> Result<String> {
        let out = self.output(c).await.map_err(|e| tmux_missing(what, e))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::Tmux {
                what: what.to_string(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                socket: self.socket.flags(),
            })
        }
    }

    /// Whether a server is running on this socket.
    pub async fn server_running(&self) -> bool {
        self.output(self.command(&["list-sessions"]))
            .await
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Start a detached session running `argv` in `cwd`; returns its pane id.
    /// The folder is checked first (tmux would silently use another), and the
    /// server keeps dead panes so exit statuses can be reported.
    pub async fn new_session(&self, spec: &SessionSpec<'_>) -> Result<String> {
        let cwd_ok = match &self.via {
            None => spec.cwd.is_dir(),
            Some(ssh) => {
                let mut c = Command::new(&ssh[0]);
                c.args(&ssh[1..])
                    .arg(crate::core::shell::shell_join(&[
                        "test",
                        "-d",
                        &spec.cwd.to_string_lossy(),
                    ]))
                    .stdin(Stdio::null())
                    .kill_on_drop(true);
                c.status().await.map(|s| s.success()).unwrap_or(false)
            }
        };
        if !cwd_ok {
            return Err(Error::BadInput(format!(
                "working folder {} does not exist (tmux would silently start elsewhere); create it or fix cwd: in task.md",
                spec.cwd.display()
            )));
        }
        if spec.argv.is_empty() {
            return Err(Error::BadInput("no command to start".into()));
        }
        let cwd = spec.cwd.to_string_lossy();
        let mut args: Vec<Cow<'_, str>> = vec![
            "new-session".into(),
            "-d".into(),
            "-P".into(),
            "-F".into(),
            "#{pane_id}".into(),
            "-s".into(),
            spec.name.into(),
            "-x".into(),
            "200".into(),
            "-y".into(),
            "50".into(),
            "-c".into(),
            escape_arg(&cwd).into_owned().into(),
        ];
        for (k, v) in &spec.env {
            args.push("-e".into());
            args.push(escape_arg(&format!("{k}={v}")).into_owned().into());
        }
        args.push("--".into());
        for a in &spec.argv {
            args.push(escape_arg(a).into_owned().into());
        }
        // Same invocation, so the options are in place before the command can exit.
        for extra in [
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "set-option",
            "-g",
            "exit-empty",
            "off",
        ] {
            args.push(extra.into());
        }
        let argv: Vec<&str> = args.iter().map(|a| a.as_ref()).collect();
        let mut patience = exiting::Patience::default();
        let out = loop {
            let mut c = self.command(&argv);
            if self.via.is_none() {
                // tmux gives a new pane the PATH of the client that asked for it, over `-e PATH=…`.
                if let Some((_, path)) = spec.env.iter().find(|(k, _)| k == "PATH") {
                    c.env("PATH", path);
                }
            }
            let changing = self.changing().await;
            let started = self.run_command("start session", c).await;
            drop(changing);
            match started {
                Err(Error::Tmux { detail, .. }) if exiting::refused(&detail) && patience.left() => {
                    // A killed server refuses new clients until its last client has gone;
                    // this process's control client may be that one, so it lets go first.
                    if let Some(control) = &self.control {
                        control.disconnect().await;
                    }
                    let local = self.via.is_none().then(|| self.socket.path());
                    patience.wait(local, &self.socket.flags()).await;
                }
                done => break done?,
            }
        };
        let pane = out.lines().next().unwrap_or("").trim().to_string();
        if !pane.starts_with('%') {
            return Err(Error::Tmux {
                what: "start session".into(),
                detail: format!("tmux printed {pane:?} instead of a pane id"),
                socket: self.socket.flags(),
            });
        }
        Ok(pane)
    }

    /// End the server when it holds no session any more (it is kept alive with
    /// `exit-empty off`, so it would otherwise linger after the last `task stop`).
    pub async fn end_if_empty(&self) -> Result<bool> {
        let out = self
            .output(self.command(&["list-sessions", "-F", "#{session_name}"]))
            .await;
        match out {
            Ok(o)
                if o.status.success()
                    && String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .all(|n| n.trim().is_empty() || n == control::SESSION) =>
            {
                let _changing = self.changing().await;
                self.run("end the empty server", &["kill-server"]).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether a session with exactly this name exists (no prefix matching).
    pub async fn has_session(&self, name: &str) -> Result<bool> {
        let target = format!("={name}");
        match self.output(self.command(&["has-session", "-t", &target])).await {
            Ok(o) => Ok(o.status.success()),
            Err(e) => Err(tmux_missing("look for a session", e)),
        }
    }

    /// Kill a session by exact name; `false` when it did not exist.
    pub async fn kill_session(&self, name: &str) -> Result<bool> {
        if !self.has_session(name).await? {
            return Ok(false);
        }
        let target = format!("={name}");
        // The panes' process groups, for programs that outlive the SIGHUP tmux sends
        // (Gemini CLI's node keeps running): asked before the session is gone.
        let groups: Vec<i32> = if self.via.is_none() {
            self.run(
                "list the session's panes",
                &["list-panes", "-s", "-t", &target, "-F", "#{pane_pid}"],
            )
            .await
            .map(|out| {
                out.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .filter(|p| *p > 1)
                    .collect()
            })
            .unwrap_or_default()
        } else {
            Vec::new()
        };
        {
            let _changing = self.changing().await;
            self.run("stop session", &["kill-session", "-t", &target]).await?;
        }
        end_groups(&groups).await;
        Ok(true)
    }

    /// One pane by id on the server it was recorded under ([`find_pane`]); `None` when it
    /// no longer exists there (a pane with that id on a newer server is someone else's).
    pub async fn pane_on(&self, pane_id: &str, server: Option<&str>) -> Result<Option<PaneInfo>> {
        Ok(find_pane(&self.list_panes().await?, pane_id, server).cloned())
    }

    /// The identity of the server holding `pane_id` (asked right after starting a pane, so
    /// the record names the server as well as the pane).
    pub async fn server_id(&self, pane_id: &str) -> Result<ServerId> {
        let out = self
            .run_hot(
                "ask the server's identity",
                &["display-message", "-p", "-t", pane_id, SERVER_FORMAT],
                false,
            )
            .await?;
        Ok(ServerId(out.trim().to_string()))
    }

    /// The visible screen of a pane, as text (no escapes).
    pub async fn capture(&self, pane_id: &str) -> Result<String> {
        self.run_hot("read pane", &capture_args(pane_id), false).await
    }

    /// Paste `text` into a pane as one bracketed paste: the buffer set (`set-buffer`, the
    /// text as one quoted argument, instead of a `tmux load-buffer` process per delivery),
    /// then `paste-buffer -p -d` to the pane id, the two in one exchange with the control
    /// client when there is one. Whatever it did not do is done the one-shot way (setting a
    /// buffer twice is harmless); a paste whose answer was lost is not made again: the
    /// error says so. The caller strips control characters first
    /// ([`crate::core::screen::sanitize`]).
    pub async fn paste(&self, pane_id: &str, buffer: &str, text: &str) -> Result<()> {
        let paste = ["paste-buffer", "-p", "-d", "-b", buffer, "-t", pane_id];
        let mut set = false;
        if let Some(c) = &self.control {
            let out = c.run_all(&[&["set-buffer", "-b", buffer, "--", text], &paste]).await;
            set = matches!(out.first(), Some(control::Outcome::Answered(r)) if r.ok);
            match out.get(1) {
                Some(control::Outcome::Answered(r)) if r.ok => return Ok(()),
                Some(control::Outcome::Lost) => return Err(self.lost("paste")),
                _ => {}
            }
        }
        if !set {
            self.load_buffer(buffer, text).await?;
        }
        self.run_hot("paste", &paste, true).await.map(|_| ())
    }

    /// `load-buffer` from stdin by a one-shot client: no argument parsing at all.
    async fn load_buffer(&self, buffer: &str, text: &str) -> Result<()> {
        let mut child = self
            .command(&["load-buffer", "-b", buffer, "-"])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| tmux_missing("load buffer", e))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(text.as_bytes())
                .await
                .map_err(|e| Error::io("write to tmux load-buffer", "tmux", e))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| Error::io("wait for tmux load-buffer", "tmux", e))?;
        if !out.status.success() {
            return Err(Error::Tmux {
                what: "load buffer".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
                socket: self.socket.flags(),
            });
        }
        Ok(())
    }

    /// Press a key (tmux key name such as `Enter`) in a pane.
    pub async fn send_key(&self, pane_id: &str, key: &str) -> Result<()> {
        self.run_hot("send key", &["send-keys", "-t", pane_id, key], true)
            .await
            .map(|_| ())
    }

    /// Attach (or switch when already inside tmux) to a session; replaces this process.
    pub fn attach_exec(&self, session: &str) -> Error {
        use std::os::unix::process::CommandExt;
        let inside = std::env::var_os("TMUX").is_some();
        let mut c = std::process::Command::new("tmux");
        match &self.socket {
            Socket::Name(n) => c.args(["-L", n]),
            Socket::Path(p) => c.arg("-S").arg(p),
        };
        let target = format!("={session}");
        if inside {
            c.args(["switch-client", "-t", &target]);
        } else {
            c.args(["attach-session", "-t", &target]);
        }
        let e = c.exec();
        Error::io("run tmux attach", "tmux", e)
    }
}

fn tmux_missing(what: &str, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::Environment(format!(
            "cannot {what}: tmux is not installed (apt-get install tmux, or your system's package)"
        ))
    } else {
        Error::io("run tmux", "tmux", e)
    }
}

/// The capture of a pane's screen as the daemon reads it (joined lines, no escapes).
fn capture_args(pane_id: &str) -> [&str; 5] {
    ["capture-pane", "-p", "-J", "-t", pane_id]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_semicolon_is_escaped() {
        assert_eq!(escape_arg("a;"), "a\\;");
        assert_eq!(escape_arg("a;b"), "a;b");
        assert_eq!(escape_arg(";"), "\\;");
        assert_eq!(escape_arg("plain"), "plain");
    }
}
