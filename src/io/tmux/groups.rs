//! What is left of a killed session's panes, ended.

/// End what is left of the process groups of a killed session's panes: SIGTERM to any
/// group still there, then SIGKILL to one that outlives 2 s. Each pane's program leads its
/// own group (tmux starts it with setsid), so this reaches the agent and its children and
/// nothing else; a program that exited on tmux's SIGHUP is not signalled at all.
pub(super) async fn end_groups(groups: &[i32]) {
    // SAFETY: kill(2) with a negative pid signals one process group; signal 0 only asks.
    // A leader that is a zombie (exited, not yet reaped by tmux) counts as gone.
    let alive = |g: i32| {
        (unsafe { libc::kill(-g, 0) }) == 0
            && !std::fs::read_to_string(format!("/proc/{g}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let left: Vec<i32> = groups.iter().copied().filter(|g| alive(*g)).collect();
    if left.is_empty() {
        return;
    }
    for g in &left {
        // SAFETY: as above.
        unsafe { libc::kill(-g, libc::SIGTERM) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while left.iter().any(|g| alive(*g)) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for g in left.iter().filter(|g| alive(**g)) {
        tracing::warn!(group = g, "an agent outlived SIGHUP and SIGTERM; killing it");
        // SAFETY: as above.
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
}
