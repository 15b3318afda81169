//! Waiting for something to happen, the one way every test and the remote benchmark do
//! it (included by path from src/bin/ao-bench/remote.rs, so it needs nothing else here).

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Poll `f` every 50 ms until it returns Some, or panic after `secs`.
pub fn wait_for<T>(what: &str, secs: u64, f: impl FnMut() -> Option<T>) -> T {
    wait_until(
        what,
        Duration::from_secs(secs),
        Duration::from_millis(50),
        f,
        String::new,
    )
}

/// Poll `f` every `every` until it returns Some; after `timeout`, panic with `what` and
/// what `dump` shows (logs, screens) for the failure message.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
    dump: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}\n{}", dump());
        }
        std::thread::sleep(every);
    }
}
