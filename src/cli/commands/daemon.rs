//! `task daemon` (the supervisor in the foreground) and `task shutdown` / `task daemon --stop`.

use anyhow::Context as _;

use crate::app;

/// Run the supervisor until it is asked to stop (what the systemd unit runs).
pub(crate) fn run() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
