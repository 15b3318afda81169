//! The signal state our processes start from. A caller (a CI runner, a process
//! supervisor, a shell with `trap`) can hand us a mask with SIGCHLD blocked, and
//! everything we start inherits it: a tmux server started that way never reaps
//! its panes' commands, so a dead pane never gets an exit status and its process
//! stays a zombie; a daemon started that way never hears that its own children
//! ended. Rust's process spawning does not reset the mask, so we do, at the two
//! doors: our own start, and every tmux client (which may start the server).

/// Unblock every signal for the calling thread. Called first thing in `main`,
/// before any thread exists, so every later thread and child starts clean.
pub fn unblock_all() {
    // SAFETY: sigemptyset/pthread_sigmask on a local set; no memory is shared.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Make `cmd`'s child start with no signal blocked, whatever this thread's mask is.
///
/// A thread whose mask is already empty (every thread of ours once [`unblock_all`] ran
/// first in `main`) passes that empty mask on as it is, so no hook is added: a `pre_exec`
/// hook makes Rust fork the whole process instead of using posix_spawn, and forking the
/// supervisor (copying its page tables, then copy-on-write faults) for every tmux client
/// was a large share of its CPU under load.
pub fn clean_child(cmd: &mut tokio::process::Command) {
    if mask_is_empty() {
        return;
    }
    // SAFETY: only async-signal-safe calls (sigemptyset, sigprocmask) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// Whether the calling thread blocks no signal.
fn mask_is_empty() -> bool {
    // SAFETY: reads this thread's mask into a local set; nothing is changed.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) != 0 {
            return false;
        }
        (1..=64).all(|sig| libc::sigismember(&set, sig) != 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_signal_is_seen_and_cleared_for_children() {
        // A thread of its own, so the test harness's threads keep their mask.
        std::thread::spawn(|| {
            unblock_all();
            assert!(mask_is_empty());
            // SAFETY: changes only this thread's mask.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGCHLD);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
            assert!(!mask_is_empty());
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let out = rt.block_on(async {
                let mut c = tokio::process::Command::new("grep");
                c.args(["^SigBlk", "/proc/self/status"]);
                clean_child(&mut c);
                c.output().await.unwrap()
            });
            let line = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(line.trim_end().ends_with(":\t0000000000000000"), "{line:?}");
        })
        .join()
        .unwrap();
    }
}
