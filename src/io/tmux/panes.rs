//! What tmux says of its panes and of itself: one `list-panes` line parsed, and the
//! server's identity (pid and start time), since a new server numbers its panes from
//! `%0` again and a pane id alone does not name one pane for ever.

/// One pane as tmux reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    /// `%N`.
    pub pane_id: String,
    /// Its session.
    pub session: String,
    /// The command exited (kept by remain-on-exit).
    pub dead: bool,
    /// Exit status when dead.
    pub dead_status: Option<i32>,
    /// The signal that killed it, when dead by a signal.
    pub dead_signal: Option<i32>,
    /// Last activity, seconds since the epoch.
    pub activity: i64,
    /// PID of the pane's process.
    pub pid: Option<u32>,
    /// The identity of the server that holds it ([`ServerId`]): pane ids are numbered
    /// from `%0` again by every new server, so an id alone does not name a pane for long.
    pub server: ServerId,
}

/// Which tmux server, as `<pid>.<start time>`: a restarted server (even one that got the
/// same pid back) has another identity, so a pane id recorded under the old server is never
/// taken for a pane of the new one that happens to carry the same number.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId(pub String);

impl std::fmt::Display for ServerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The tmux format of a [`ServerId`].
pub(super) const SERVER_FORMAT: &str = "#{pid}.#{start_time}";

/// Printable separators only: tmux turns a tab into `_` when the client has no UTF-8
/// locale (as over ssh). The session name goes last, so a `|` in a foreign one is harmless.
pub(super) const PANE_FORMAT: &str = "#{pane_id}|#{pane_dead}|#{pane_dead_status}|#{window_activity}|#{pane_pid}|#{pane_dead_signal}|#{pid}.#{start_time}|#{session_name}";

/// The pane an agent was recorded in, among the server's `panes`, or `None` when it is
/// gone. A pane recorded under another server identity is gone even when the new server
/// shows a pane with the same id: a restarted server numbers its panes from `%0` again,
/// and trusting the number would take someone else's pane (or a fresh one) for the
/// agent's. A record without an identity (written before it was kept) is trusted by id.
pub fn find_pane<'a>(panes: &'a [PaneInfo], pane: &str, server: Option<&str>) -> Option<&'a PaneInfo> {
    panes
        .iter()
        .find(|p| p.pane_id == pane && server.is_none_or(|s| p.server.0 == s))
}

/// Dead, but tmux has not collected how it ended.
pub(super) fn unreaped(p: &PaneInfo) -> bool {
    p.dead && p.dead_status.is_none() && p.dead_signal.is_none()
}

pub(super) fn parse_pane(line: &str) -> Option<PaneInfo> {
    let f: Vec<&str> = line.splitn(8, '|').collect();
    if f.len() != 8 || !f[0].starts_with('%') {
        return None;
    }
    Some(PaneInfo {
        pane_id: f[0].to_string(),
        session: f[7].to_string(),
        server: ServerId(f[6].to_string()),
        dead: f[1] == "1",
        dead_status: f[2].parse().ok(),
        dead_signal: f[5].parse().ok(),
        activity: f[3].parse().unwrap_or(0),
        pid: f[4].parse().ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pane_lines_parse() {
        let p = parse_pane("%3|1|2|1764243000|4242||777.1764242000|ao-t-dev").unwrap();
        assert!(p.dead);
        assert_eq!(p.session, "ao-t-dev");
        assert_eq!(p.server, ServerId("777.1764242000".into()));
        assert_eq!(
            parse_pane("%4|0||1764243000|7||1.2|odd|name").unwrap().session,
            "odd|name"
        );
        assert_eq!(p.dead_status, Some(2));
        assert_eq!(p.pid, Some(4242));
        assert_eq!(parse_pane("garbage"), None);
    }

    fn pane(id: &str, server: &str) -> PaneInfo {
        PaneInfo {
            pane_id: id.into(),
            session: "aot-t-pm".into(),
            dead: false,
            dead_status: None,
            dead_signal: None,
            activity: 0,
            pid: None,
            server: ServerId(server.into()),
        }
    }

    #[test]
    fn a_pane_id_counts_only_on_the_server_it_was_recorded_under() {
        let now = [pane("%0", "200.1700000100"), pane("%1", "200.1700000100")];
        assert!(find_pane(&now, "%0", Some("200.1700000100")).is_some());
        // The old server (pid 100) held a %0 too: that one is gone, whatever the new one shows.
        assert!(find_pane(&now, "%0", Some("100.1700000000")).is_none());
        // Same pid back, started later: still another server.
        assert!(find_pane(&now, "%1", Some("200.1700000000")).is_none());
        assert!(find_pane(&now, "%7", Some("200.1700000100")).is_none());
        // Records from before identities were kept are trusted by id.
        assert_eq!(find_pane(&now, "%1", None).map(|p| p.pane_id.as_str()), Some("%1"));
    }
}
