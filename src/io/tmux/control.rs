//! One long-lived tmux control-mode client (`tmux -C`) per local server, for the daemon's
//! read-mostly hot path (pane listings, captures, a key press), so a check-in no longer
//! forks a tmux client for each look.
//!
//! Why it is safe to put in front of the one-shot clients:
//! - every answer is a `%begin <time> <number> <flags>` … `%end|%error` block with the same
//!   three words; the body is the command's output as the one-shot client would print it,
//!   byte for byte (captures with escape sequences included: only the asynchronous `%output`
//!   notifications are octal-escaped, and those are turned off with `no-output` and skipped
//!   like every other line outside a block). Blocks with flags `0` are not ours (the attach
//!   command's own) and are dropped;
//! - one exchange in flight per connection (a mutex): a command, or a few written together
//!   and answered in order ([`Control::run_all`]), each on its own line, its arguments
//!   quoted for tmux's own command parser ([`command_line`]), never for sh;
//! - anything unexpected — no server, a closed or dead client, a timeout, a `%error` — makes
//!   the caller run the same command as a one-shot client, so behaviour never gets worse; a
//!   dead connection is replaced on the next use, one that could not attach waits a little
//!   before being tried again;
//! - the client attaches to a session of its own ([`SESSION`], a pane that only sleeps),
//!   never to an agent's, with `ignore-size`, so the agents' windows keep their size. Why:
//!   tmux 3.3a's server crashed (SIGSEGV in `bufferevent_write`, every agent lost) when the
//!   session the control client sat in was killed while the client was being replaced —
//!   exactly what restarting a dead PM does. In a session of its own the client is never
//!   detached by an agent's session ending, so it connects once per daemon, not once per
//!   restart. That session is made only on a server that already has other sessions (a
//!   control client never starts a server for itself), and ended as soon as a pane listing
//!   shows it alone ([`super::Tmux::list_panes`]); [`super::Tmux::end_if_empty`] counts a
//!   server holding only it as empty.
//!
//! Only the daemon turns this on ([`enable`]); one-shot CLI commands keep one-shot clients.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long one answer may take before the connection is given up (and the command run
/// one-shot instead).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed attach (no server, no session), how long to go one-shot before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// [`quote_into`], as a string of its own.
#[cfg(test)]
pub fn quote(arg: &str) -> Option<String> {
    let mut out = String::new();
    quote_into(&mut out, arg)?;
    Some(out)
}

/// Append one argument to `out`, quoted for tmux's command parser: single quotes keep everything literal
/// (`#{…}`, `;`, `$`, `~`, `\`); a quote itself is closed, escaped and reopened. Text with
/// line breaks (a check-in's message) goes in double quotes, where tmux reads `\n`, `\r`
/// and `\t` as those characters and `\\`, `\"`, `\$` and `\~` as the character itself (a
/// bare `$` would expand a variable, and a `~` leading the word the home folder). `None`
/// for what the one-line protocol cannot carry: NUL.
///
/// Runs of plain text are copied whole: a check-in's message is quoted on every delivery,
/// and a push per character was a visible share of the daemon's work.
fn quote_into(out: &mut String, arg: &str) -> Option<()> {
    if arg.contains('\0') {
        return None;
    }
    let (open, special): (char, &[char]) = if arg.contains(['\n', '\r']) {
        ('"', &['\n', '\r', '\t', '\\', '"', '$', '~'])
    } else {
        ('\'', &['\''])
    };
    out.reserve(arg.len() + arg.len() / 16 + 2);
    out.push(open);
    let mut rest = arg;
    while let Some(i) = rest.find(special) {
        out.push_str(&rest[..i]);
        let c = rest[i..].chars().next().expect("found at a char boundary");
        match c {
            '\'' => out.push_str("'\\''"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => {
                out.push('\\');
                out.push(c);
            }
        }
        rest = &rest[i + c.len_utf8()..];
    }
    out.push_str(rest);
    out.push(open);
    Some(())
}

/// The line that runs one command with these arguments, newline included; `None` when an
/// argument cannot be sent this way (or there is no command).
pub fn command_line(args: &[&str]) -> Option<String> {
    if args.is_empty() {
        return None;
    }
    let mut line = String::with_capacity(args.iter().map(|a| a.len() + 3).sum::<usize>() + 1);
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        quote_into(&mut line, a)?;
    }
    line.push('\n');
    Some(line)
}

/// One command's answer: whether it succeeded, and its output (each line with its `\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub ok: bool,
    pub output: Vec<u8>,
}

/// What became of a command sent to the control client.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its answer.
    Answered(Reply),
    /// It never reached a server (no client could attach): run it one-shot.
    NotRun,
    /// Its answer had begun, or never came in time, when the client went away: it may have
    /// run, so a command with an effect must not simply be run again. (A client that leaves
    /// before our block begins — its session ended, the server died — did not run it.)
    Lost,
}

/// What a line read from the client means.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// The answer to one of our commands.
    Reply(Reply),
    /// The client is leaving (`%exit`): its session ended or the server is going.
    Exit,
}

/// Splits the client's output into answers, line by line (lines without their `\n`).
#[derive(Debug, Default)]
pub struct Framer {
    /// Some block was seen: the client attached.
    pub attached: bool,
    /// Inside a block: its guard words (`<time> <number> <flags>`), whether it is ours, its body.
    open: Option<(Vec<u8>, bool, Vec<u8>)>,
}

impl Framer {
    /// Inside one of our blocks: a command of ours has begun to run.
    pub fn ours_open(&self) -> bool {
        matches!(self.open, Some((_, true, _)))
    }

    /// Feed one line; an event when it completes one.
    pub fn push(&mut self, line: &[u8]) -> Option<Event> {
        if let Some((guard, ours, body)) = &mut self.open {
            let closing = [&b"%end "[..], b"%error "]
                .iter()
                .find_map(|p| line.strip_prefix(*p).map(|rest| (p.len() == 5, rest)));
            if let Some((ok, rest)) = closing
                && rest == guard.as_slice()
            {
                let reply = Reply {
                    ok,
                    output: std::mem::take(body),
                };
                let ours = *ours;
                self.open = None;
                return ours.then_some(Event::Reply(reply));
            }
            body.extend_from_slice(line);
            body.push(b'\n');
            return None;
        }
        if let Some(rest) = line.strip_prefix(b"%begin ") {
            self.attached = true;
            // Flags 1: the command came from this client (0: the attach command, hooks).
            let ours = rest.rsplit(|b| *b == b' ').next() == Some(b"1");
            self.open = Some((rest.to_vec(), ours, Vec::new()));
        } else if line == b"%exit" || line.starts_with(b"%exit ") {
            return Some(Event::Exit);
        }
        None
    }
}

/// The session the control client attaches to. No agent's session can be named so
/// (theirs start with the session prefix and carry a task and an agent).
pub const SESSION: &str = "_ao-control";

/// This process's control clients (a process memo: [`crate::store::memo`]).
#[derive(Default)]
struct Clients {
    /// Whether this process uses them ([`enable`]).
    enabled: AtomicBool,
    /// One per server, by its socket file.
    all: Mutex<HashMap<PathBuf, Arc<Control>>>,
}

impl crate::store::memo::Memo for Clients {
    const NAME: &'static str = "tmux control clients";
    fn entries(&self) -> usize {
        self.all.lock().map_or(0, |a| a.len())
    }
}

fn clients() -> &'static Clients {
    crate::store::memo::get::<Clients>()
}

/// Turn control clients on for every local tmux handle made in this process from now on,
/// unless `AO_TMUX_CONTROL=off` (the daemon calls this at start; `off` is the way back to
/// one-shot clients should a tmux build misbehave with control clients).
pub fn enable() {
    let on = !std::env::var("AO_TMUX_CONTROL").is_ok_and(|v| v == "off" || v == "0");
    clients().enabled.store(on, Ordering::Relaxed);
}

/// Whether [`enable`] turned control clients on.
pub(super) fn enabled() -> bool {
    clients().enabled.load(Ordering::Relaxed)
}

/// The one control client of this process for a server (by its socket file), made on first ask.
pub(super) fn shared(socket_file: PathBuf, base: &std::process::Command) -> Arc<Control> {
    let mut all = clients().all.lock().unwrap_or_else(|e| e.into_inner());
    all.entry(socket_file)
        .or_insert_with(|| Arc::new(Control::new(base)))
        .clone()
}

/// A control client for one server, connected on first use and again after it dies.
pub struct Control {
    /// `tmux -S/-L …`, without a command.
    program: PathBuf,
    base_args: Vec<std::ffi::OsString>,
    state: tokio::sync::Mutex<State>,
    /// Held shared while this process starts or ends a session on the server, and alone
    /// from a new client's start until its first answer: tmux before 3.7 crashes (every
    /// agent with it) when a session starts or ends while a control client is still
    /// identifying itself (its issue 4980; a null `control_state` in `control_write`).
    changes: tokio::sync::RwLock<()>,
    answered: AtomicU64,
    connects: AtomicU64,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("program", &self.program)
            .field("args", &self.base_args)
            .field("answered", &self.answered())
            .finish()
    }
}

#[derive(Default)]
struct State {
    conn: Option<Conn>,
    /// No attach is tried before this (the last one failed).
    quiet_until: Option<Instant>,
}

struct Conn {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    framer: Framer,
}

impl Control {
    fn new(base: &std::process::Command) -> Control {
        Control {
            program: base.get_program().into(),
            base_args: base.get_args().map(Into::into).collect(),
            state: Default::default(),
            changes: Default::default(),
            answered: AtomicU64::new(0),
            connects: AtomicU64::new(0),
        }
    }

    /// How many commands this client has answered (for tests and logs).
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// How many control clients this has started (each one attach): one per server, unless
    /// the server or the control session went away.
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Run one command through the control client ([`Outcome`] says whether to run it
    /// one-shot instead).
    pub async fn run(&self, args: &[&str]) -> Outcome {
        self.run_all(&[args]).await.pop().unwrap_or(Outcome::NotRun)
    }

    /// Run commands through the control client in one exchange: written together, their
    /// answers read in order, so a delivery step that needs two or three commands wakes the
    /// daemon once, not once per command. tmux runs them one after another, each with its
    /// own answer, whatever became of the one before. One outcome per command: when the
    /// client goes away part way, those answered keep their answers, the first unanswered
    /// is judged as [`Control::run`] judges a lone command, and any after one that may have
    /// run may have run too ([`Outcome::Lost`]).
    pub async fn run_all(&self, commands: &[&[&str]]) -> Vec<Outcome> {
        let not_run = || commands.iter().map(|_| Outcome::NotRun).collect();
        let Some(lines) = commands
            .iter()
            .map(|a| command_line(a))
            .collect::<Option<Vec<String>>>()
        else {
            return not_run();
        };
        let mut state = self.state.lock().await;
        // Kept until this function returns: past the new client's first answer.
        let mut _connecting = None;
        if state.conn.is_none() {
            if state.quiet_until.is_some_and(|t| Instant::now() < t) {
                return not_run();
            }
            _connecting = Some(self.changes.write().await);
            state.conn = if self.ensure_session().await {
                self.connect()
            } else {
                None
            };
            if state.conn.is_none() {
                state.quiet_until = Some(Instant::now() + RETRY_AFTER);
            }
        }
        let Some(conn) = state.conn.as_mut() else {
            return not_run();
        };
        let mut replies = Vec::with_capacity(lines.len());
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, conn.ask_all(&lines, &mut replies)).await;
        self.answered.fetch_add(replies.len() as u64, Ordering::Relaxed);
        let mut out: Vec<Outcome> = replies.into_iter().map(Outcome::Answered).collect();
        if matches!(answer, Ok(true)) {
            return out;
        }
        let (attached, begun) = (conn.framer.attached, conn.framer.ours_open());
        state.conn = None;
        if !attached {
            state.quiet_until = Some(Instant::now() + RETRY_AFTER);
        }
        let lost = if answer.is_err() {
            tracing::warn!(command = %lines[out.len()].trim_end(), "tmux control client did not answer in time; going one-shot");
            true
        } else {
            tracing::debug!(attached, begun, "tmux control client gone; one-shot for this command");
            begun
        };
        while out.len() < lines.len() {
            out.push(if lost { Outcome::Lost } else { Outcome::NotRun });
        }
        out
    }

    /// Hold off a new control client while this process starts or ends a session (see
    /// `changes`); never taken by a caller that then uses this client.
    pub async fn changing(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.changes.read().await
    }

    /// Let go of the server: its client ends now (a killed server waits for every client
    /// before it goes, and refuses new ones meanwhile); the next command connects again.
    pub async fn disconnect(&self) {
        self.state.lock().await.conn = None;
    }

    /// A one-shot client of the same server (no stdin, output kept).
    fn one_shot(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.base_args)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        crate::io::signals::clean_child(&mut c);
        c
    }

    /// Make [`SESSION`] when the server runs other sessions (never start a server, nor keep
    /// one alive for ourselves); whether there is one to attach to.
    async fn ensure_session(&self) -> bool {
        let Ok(out) = self
            .one_shot(&["list-sessions", "-F", "#{session_name}"])
            .output()
            .await
        else {
            return false;
        };
        if !out.status.success() {
            return false;
        }
        let names = String::from_utf8_lossy(&out.stdout);
        if !names.lines().any(|n| n != SESSION) {
            return false;
        }
        if names.lines().any(|n| n == SESSION) {
            return true;
        }
        let made = self
            .one_shot(&["new-session", "-d", "-s", SESSION, "-c", "/", "sleep", "2147483647"])
            .output()
            .await;
        // Another daemon of this server may have made it first: the attach decides.
        tracing::debug!(
            made = matches!(&made, Ok(o) if o.status.success()),
            "tmux control session"
        );
        true
    }

    fn connect(&self) -> Option<Conn> {
        let target = format!("={SESSION}");
        let mut c = Command::new(&self.program);
        c.args(&self.base_args)
            .args(["-C", "attach-session", "-t", &target, "-f", "ignore-size,no-output"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        crate::io::signals::clean_child(&mut c);
        let mut child = c
            .spawn()
            .inspect_err(|e| tracing::debug!(error = %e, "cannot start a tmux control client"))
            .ok()?;
        self.connects.fetch_add(1, Ordering::Relaxed);
        Some(Conn {
            stdin: child.stdin.take()?,
            stdout: BufReader::new(child.stdout.take()?),
            _child: child,
            framer: Framer::default(),
        })
    }
}

impl Conn {
    /// Send command lines in one write and read their answers in order into `replies`;
    /// `false` (with the answers read so far) on EOF, a write error or `%exit`.
    async fn ask_all(&mut self, lines: &[String], replies: &mut Vec<Reply>) -> bool {
        if self.stdin.write_all(lines.concat().as_bytes()).await.is_err() || self.stdin.flush().await.is_err() {
            return false;
        }
        let mut buf = Vec::new();
        while replies.len() < lines.len() {
            buf.clear();
            match self.stdout.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(_) => {}
            }
            let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
            match self.framer.push(text) {
                Some(Event::Reply(r)) => replies.push(r),
                Some(Event::Exit) => return false,
                None => {}
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for tmux that is slow to identify its control client and logs when it
    /// answered: what the connect lock is about, without a real server's race.
    const SLOW_TMUX: &str = r#"#!/bin/sh
log="$(dirname "$0")/log"
case " $* " in
  *" list-sessions "*) echo agent ;;
  *" new-session "*) ;;
  *" -C "*)
    echo identifying >> "$log"
    sleep 0.4
    echo "%begin 1 1 0"; echo "%end 1 1 0"
    while IFS= read -r line; do
      echo answered >> "$log"
      echo "%begin 2 2 1"; echo "%end 2 2 1"
    done ;;
esac
"#;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_session_change_of_this_process_runs_while_a_new_client_identifies() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("tmux");
        std::fs::write(&fake, SLOW_TMUX).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.path().join("log");
        let control = Arc::new(Control::new(&std::process::Command::new(&fake)));
        let asking = tokio::spawn({
            let control = control.clone();
            async move { control.run(&["list-panes"]).await }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("identifying")) {
            assert!(Instant::now() < deadline, "the control client never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let changing = control.changing().await;
        let seen = std::fs::read_to_string(&log).unwrap();
        assert!(
            seen.contains("answered"),
            "a session change went ahead while the control client was identifying: {seen:?}"
        );
        drop(changing);
        assert!(matches!(asking.await.unwrap(), Outcome::Answered(r) if r.ok));
        assert_eq!(control.connects(), 1);
    }

    /// A stand-in for tmux's control mode that answers each command line with its own block
    /// (the line echoed), `%error` for `bad`, and at `die` leaves: before its block begins,
    /// or (`die-inside`) part way through it.
    const ECHO_TMUX: &str = r#"#!/bin/sh
case " $* " in
  *" list-sessions "*) echo agent ;;
  *" new-session "*) ;;
  *" -C "*)
    echo "%begin 1 1 0"; echo "%end 1 1 0"
    n=2
    while IFS= read -r line; do
      case "$line" in
        *die-inside*) echo "%begin $n $n 1"; echo half; exit 0 ;;
        *die*) exit 0 ;;
      esac
      echo "%begin $n $n 1"; echo "$line"
      case "$line" in *bad*) echo "%error $n $n 1" ;; *) echo "%end $n $n 1" ;; esac
      n=$((n+1))
    done ;;
esac
"#;

    /// Commands written together are answered one by one in order, an error among them
    /// only its own; a client that leaves part way keeps the answers it gave, and the rest
    /// are not run (it left before the next began) or lost (it left inside one: that one
    /// and any after it may have run).
    #[tokio::test]
    async fn commands_written_together_are_answered_in_order_each_on_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("tmux");
        std::fs::write(&fake, ECHO_TMUX).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let control = Control::new(&std::process::Command::new(&fake));
        let answers = |out: &[Outcome]| -> Vec<(bool, String)> {
            out.iter()
                .map(|o| match o {
                    Outcome::Answered(r) => (r.ok, String::from_utf8_lossy(&r.output).trim_end().to_string()),
                    other => (false, format!("{other:?}")),
                })
                .collect()
        };
        let out = control.run_all(&[&["one"], &["bad"], &["three", "x y"]]).await;
        assert_eq!(
            answers(&out),
            [
                (true, "'one'".to_string()),
                (false, "'bad'".to_string()),
                (true, "'three' 'x y'".to_string())
            ]
        );
        assert_eq!(control.answered(), 3);
        assert!(
            matches!(control.run(&["four"]).await, Outcome::Answered(r) if r.ok),
            "the same client goes on"
        );
        assert_eq!(control.connects(), 1);

        let out = control.run_all(&[&["five"], &["die"], &["six"]]).await;
        assert_eq!(answers(&out)[0], (true, "'five'".to_string()));
        assert_eq!(out[1..], [Outcome::NotRun, Outcome::NotRun], "left before they began");

        let control = Control::new(&std::process::Command::new(&fake));
        let out = control.run_all(&[&["seven"], &["die-inside"], &["eight"]]).await;
        assert_eq!(answers(&out)[0], (true, "'seven'".to_string()));
        assert_eq!(
            out[1..],
            [Outcome::Lost, Outcome::Lost],
            "left inside one: it may have run"
        );
    }

    fn feed(f: &mut Framer, text: &[u8]) -> Vec<Event> {
        text.split(|b| *b == b'\n').filter_map(|l| f.push(l)).collect()
    }

    #[test]
    fn arguments_are_quoted_for_tmux() {
        assert_eq!(quote("%3").unwrap(), "'%3'");
        assert_eq!(quote("#{pane_id}|#{pid}").unwrap(), "'#{pane_id}|#{pid}'");
        assert_eq!(quote("a;").unwrap(), "'a;'");
        assert_eq!(quote("it's").unwrap(), "'it'\\''s'");
        assert_eq!(quote("").unwrap(), "''");
        assert_eq!(quote("two\nlines").unwrap(), "\"two\\nlines\"");
        assert_eq!(
            quote("~/a\n$HOME \\ \"q\" 'x' #{p}\t;").unwrap(),
            "\"\\~/a\\n\\$HOME \\\\ \\\"q\\\" 'x' #{p}\\t;\""
        );
        assert_eq!(quote("nul\0"), None);
        // Specials next to each other, at either end, and beside characters of several bytes.
        assert_eq!(quote("''").unwrap(), r#"''\'''\'''"#);
        assert_eq!(quote("é'ü").unwrap(), r#"'é'\''ü'"#);
        assert_eq!(quote("\nü\r~é$").unwrap(), r#""\nü\r\~é\$""#);
        assert_eq!(command_line(&["a", "b\0"]), None);
        assert_eq!(
            command_line(&["capture-pane", "-p", "-t", "%0"]).unwrap(),
            "'capture-pane' '-p' '-t' '%0'\n"
        );
        assert_eq!(command_line(&[]), None);
        assert_eq!(command_line(&["send-keys", "a\rb"]).unwrap(), "'send-keys' \"a\\rb\"\n");
        assert_eq!(command_line(&["send-keys", "a\0b"]), None);
    }

    #[test]
    fn only_our_blocks_are_answers_and_notifications_are_skipped() {
        let mut f = Framer::default();
        let got = feed(
            &mut f,
            b"%begin 17 271 0\n%end 17 271 0\n%session-changed $0 a\n%output %0 x\\033y\n\
              %begin 17 276 1\n%0|0||1|2||3.4|s\n%1|0||1|2||3.4|t\n%end 17 276 1",
        );
        assert_eq!(
            got,
            vec![Event::Reply(Reply {
                ok: true,
                output: b"%0|0||1|2||3.4|s\n%1|0||1|2||3.4|t\n".to_vec()
            })]
        );
    }

    #[test]
    fn output_is_kept_byte_for_byte_and_only_the_matching_guard_closes() {
        let mut f = Framer::default();
        // A capture with escape sequences, a lone %end and another command's guard in it.
        let body = b"\x1b[31mred\x1b[39m \xc3\xbc\t\\x\r\n%end 1 2 1\n%error 9 9 1\n\n";
        let mut text = b"%begin 9 300 1\n".to_vec();
        text.extend_from_slice(body);
        text.extend_from_slice(b"%end 9 300 1");
        let got = feed(&mut f, &text);
        assert_eq!(
            got,
            vec![Event::Reply(Reply {
                ok: true,
                output: body.to_vec()
            })]
        );
    }

    #[test]
    fn a_command_counts_as_begun_only_inside_our_block() {
        let mut f = Framer::default();
        assert!(!f.attached);
        f.push(b"%begin 1 4 0");
        assert!(f.attached && !f.ours_open());
        f.push(b"%end 1 4 0");
        // The client leaving before our block: the command never ran.
        assert_eq!(f.push(b"%exit"), Some(Event::Exit));
        assert!(!f.ours_open());
        f.push(b"%begin 1 5 1");
        assert!(f.ours_open());
    }

    #[test]
    fn errors_empty_answers_and_exit() {
        let mut f = Framer::default();
        let got = feed(
            &mut f,
            b"%begin 1 5 1\ncan't find pane: %9\n%error 1 5 1\n%begin 1 6 1\n%end 1 6 1\n%exit",
        );
        assert_eq!(
            got,
            vec![
                Event::Reply(Reply {
                    ok: false,
                    output: b"can't find pane: %9\n".to_vec()
                }),
                Event::Reply(Reply {
                    ok: true,
                    output: Vec::new()
                }),
                Event::Exit,
            ]
        );
    }
}
