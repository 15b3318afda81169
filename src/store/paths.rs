//! Where this user's per-machine files live (XDG base directories), in one place so the
//! daemon, the CLI and the ssh masters agree without importing each other.

use std::path::PathBuf;

/// The runtime folder: the daemon's socket and lock, and the ssh masters' sockets.
pub fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d).join("agent-orchestrator"),
        // SAFETY: getuid never fails.
        None => PathBuf::from(format!("/tmp/agent-orchestrator-{}", unsafe { libc::getuid() })),
    }
}

/// The control socket.
pub fn socket_path() -> PathBuf {
    runtime_dir().join("daemon.sock")
}

/// The single-instance lock.
pub fn lock_path() -> PathBuf {
    runtime_dir().join("daemon.lock")
}

/// Where the registry of supervised tasks lives (`$XDG_STATE_HOME/agent-orchestrator/`).
pub fn state_dir() -> PathBuf {
    dirs::state_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("agent-orchestrator-state"))
        .join("agent-orchestrator")
}
