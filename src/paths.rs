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
