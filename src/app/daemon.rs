//! Stopping the supervisor daemon (agents keep running in their tmux server).

use std::time::{Duration, Instant};

use crate::core::error::Error;
use crate::core::wire::{Request, Response};
use crate::io::control;

/// Ask the running daemon to stop and wait (up to 10 s) until it no longer answers.
/// `Ok(false)` when no daemon was running.
pub(crate) fn shutdown() -> anyhow::Result<bool> {
    if !control::running() {
        return Ok(false);
    }
    // The answer may be cut short by the daemon exiting; what counts is that it stops. A
    // refusal (a spoke asked) is said as it is.
    match control::request(&Request::Shutdown) {
        Ok(Some(Response::Refused { refusal })) => return Err(refusal.into()),
        Ok(Some(Response::Error { message, code })) => {
            return Err(crate::core::error::Exit::new(code, message).into());
        }
        _ => {}
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while control::running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if control::running() {
        return Err(Error::Environment("the daemon did not stop within 10 s".into()).into());
    }
    Ok(true)
}
