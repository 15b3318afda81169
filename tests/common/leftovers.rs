//! The last resort of cleanup, shared by the tests' worlds and the benchmarks: whatever a
//! run started that its orderly cleanup missed is killed, so nothing it left behind loads
//! the next run.

use std::path::Path;

/// SIGKILL every process of this user that names `dir/` in its command line or environment
/// (a tmux server or client on the run's socket, a daemon or its orphaned control client
/// after a `kill -9`, an agent with the run's folders), but this one. What an orderly
/// cleanup can miss: a server started again by a command that was in flight while it ran
/// (a daemon restarting a PM it saw die).
pub fn kill_leftovers(dir: &Path) {
    let me = std::process::id();
    let mut needle = dir.as_os_str().as_encoded_bytes().to_vec();
    needle.push(b'/');
    let Ok(procs) = std::fs::read_dir("/proc") else { return };
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let names_dir = ["cmdline", "environ"].iter().any(|f| {
            std::fs::read(e.path().join(f)).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_slice()))
        });
        if names_dir {
            // SAFETY: a process this run started (it names the run's folder).
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
    }
}
