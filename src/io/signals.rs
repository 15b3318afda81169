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
pub fn clean_child(cmd: &mut tokio::process::Command) {
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
