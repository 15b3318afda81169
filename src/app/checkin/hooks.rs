//! Test hooks: every one in the program, documented here. Each is compiled in and inert
//! unless its environment variable is set, so the tests hit a crash window on purpose
//! rather than by luck.
//!
//! | variable | where the check-in waits |
//! |---|---|
//! | `AO_TEST_PAUSE_BEFORE_DELIVER=<path>` | the intent is saved, nothing pasted yet |
//! | `AO_TEST_PAUSE_AFTER_DELIVER=<path>` | the message is delivered, not yet recorded |
//! | `AO_TEST_PAUSE_WORKTREE_BEFORE_MERGE=<path>` | an agent's work is committed on its branch, not merged |
//! | `AO_TEST_PAUSE_DAEMON_START=<path>` | (the daemon, not a check-in) it holds its lock and socket, nothing is watched yet |
//! | `AO_TEST_PAUSE_REMOTE_WATCH=<path>` | (the remote watch script, on the host) connected, its watch not yet live (see `io::remote::watch`) |
//! | `AO_TEST_PAUSE_DELIVERY_ENTER=<path>` | any delivery has pasted, not pressed Enter (in `io::pane_lock::test_pause`: it marks `<path>.waiting` and waits at most 60 s) |
//!
//! At the point, the process creates `<path>.reached` and waits until `<path>` exists
//! (a test kills it there with `kill -9`, or creates `<path>` to let it go on). Once
//! `<path>` exists the hook no longer waits.

use std::time::Duration;

/// Wait at `point` when its variable is set (see the module table).
pub async fn pause(point: &str) {
    let Some(p) = std::env::var_os(format!("AO_TEST_PAUSE_{point}")) else {
        return;
    };
    let gate = std::path::PathBuf::from(p);
    let mut reached = gate.clone().into_os_string();
    reached.push(".reached");
    if let Err(e) = std::fs::write(&reached, b"") {
        tracing::warn!(point, error = %e, "test hook cannot mark its point");
    }
    tracing::info!(point, gate = %gate.display(), "test hook: waiting");
    while !gate.exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
