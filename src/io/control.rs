//! The CLI's side of the control socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::core::error::{Error, Result};

use crate::core::wire::{Envelope, PROTOCOL_VERSION, Request, Response};

/// How long the daemon may say nothing before the CLI gives up on a request. It sends a
/// blank line every [`crate::core::wire::KEEPALIVE`] while it works on one, so only a
/// daemon that is stuck or gone goes quiet this long, however long the work takes (a
/// delivery can wait minutes for an agent's input area and its pane lock). A test shortens
/// it to show a request outlasting it.
fn quiet_limit() -> Duration {
    crate::io::hooks::get().control_quiet.unwrap_or(Duration::from_secs(30))
}

/// Send one request; `Ok(None)` when no daemon is listening.
pub fn request(req: &Request) -> Result<Option<Response>> {
    let path = crate::store::paths::socket_path();
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    let quiet = quiet_limit();
    let _ = stream.set_read_timeout(Some(quiet));
    let mut line = serde_json::to_vec(&Envelope {
        v: PROTOCOL_VERSION,
        body: req.clone(),
    })
    .expect("serialises");
    line.push(b'\n');
    stream.write_all(&line).map_err(|e| Error::io("write to", &path, e))?;
    let mut reader = BufReader::new(stream);
    let mut resp = String::new();
    loop {
        resp.clear();
        match reader.read_line(&mut resp) {
            Ok(0) => {
                return Err(Error::Environment(format!(
                    "the daemon closed the connection without an answer (it may have been stopped or crashed); whether the request was carried out shows in `task status`, and why in its log ({})",
                    crate::store::paths::state_dir().join("daemon.log").display()
                )));
            }
            // A keep-alive: the daemon is still at work on it.
            Ok(_) if resp.trim().is_empty() => continue,
            Ok(_) => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(Error::Environment(format!(
                    "the daemon said nothing for {} s while carrying out this request (a working daemon says something every {} s): it may be stuck, or may still finish it; see `task status` and its log ({})",
                    quiet.as_secs(),
                    crate::core::wire::KEEPALIVE.as_secs(),
                    crate::store::paths::state_dir().join("daemon.log").display()
                )));
            }
            Err(e) => return Err(Error::io("read from", &path, e)),
        }
    }
    let env: Envelope<Response> = serde_json::from_str(&resp).map_err(|e| {
        Error::Environment(format!(
            "the daemon answered something unreadable ({e}); restart it with `task shutdown` then `task daemon`"
        ))
    })?;
    Ok(Some(env.body))
}

/// Whether a daemon answers on the socket.
pub fn running() -> bool {
    matches!(request(&Request::Ping), Ok(Some(Response::Pong { .. })))
}

/// Start `task daemon` in the background (its own session, logs to the state dir) and wait until it answers.
pub fn spawn_background() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe().map_err(|e| Error::io("find own binary", "task", e))?;
    let dir = crate::store::paths::state_dir();
    crate::store::fsutil::create_dir_all(&dir)?;
    let log_path = dir.join("daemon.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::io("open", &log_path, e))?;
    let log2 = log.try_clone().map_err(|e| Error::io("open", &log_path, e))?;
    let mut c = Command::new(exe);
    c.arg("daemon").stdin(Stdio::null()).stdout(log).stderr(log2);
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid in the child before exec, so the daemon outlives this terminal;
    // and an empty signal mask, so it hears its children end (see crate::io::signals).
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    c.spawn().map_err(|e| Error::io("start", "task daemon", e))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if running() {
            return Ok(log_path);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(Error::Environment(format!(
        "the background daemon did not answer within 10 s; see {}",
        log_path.display()
    )))
}
