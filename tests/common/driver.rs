//! For tests that call the tmux driver directly: a runtime to run it on, and a session spec.

use agent_orchestrator::io::tmux::SessionSpec;

/// A current-thread tokio runtime for the driver's async calls.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A session `name` in `cwd` running `argv`, with no extra environment.
pub fn spec<'a>(name: &'a str, cwd: &'a std::path::Path, argv: &[&str]) -> SessionSpec<'a> {
    SessionSpec {
        name,
        cwd,
        env: vec![],
        argv: argv.iter().map(|s| s.to_string()).collect(),
    }
}
