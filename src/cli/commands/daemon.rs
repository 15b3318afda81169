//! `task daemon` (the supervisor in the foreground) and `task shutdown` / `task daemon --stop`.

use anyhow::Context as _;

use crate::app;

/// Run the supervisor until it is asked to stop (what the systemd unit runs).
///
/// On one thread: its work is one task's check-in at a time, waiting on tmux and the
/// disk, and two workers cost more in waking each other than they ever ran side by side
/// (about a tenth of the daemon's CPU with 360 agents, and 10 MiB). The rule that keeps it
/// safe: nothing blocks across an await — the state's lock (a blocking flock) is only held
/// in plain code, never while a session is ended or a host dialled (`session::stop`).
pub(crate) fn run() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(crate::daemon::run())?;
    Ok(())
}

/// Stop the running daemon; agents keep running.
pub(crate) fn shutdown() -> anyhow::Result<()> {
    if app::daemon::shutdown()? {
        println!("Daemon stopped; agents keep running.");
    } else {
        println!("No daemon is running.");
    }
    Ok(())
}
