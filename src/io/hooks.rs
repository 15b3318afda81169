//! Test hooks: every one in the program, in one value. Each is compiled in and inert unless
//! set, so the tests hit a crash window on purpose rather than by luck. The environment is
//! read here and nowhere else ([`Hooks::from_env`], once per process); production code asks
//! [`get`] for a pause point or a shortened limit. A test that runs a daemon inside its own
//! process [`install`]s the value instead of setting variables.
//!
//! Pause points (`AO_TEST_PAUSE_<POINT>=<path>`): at the point the process creates
//! `<path>.reached` (`.waiting` for `DELIVERY_ENTER`) and waits until `<path>` exists (a
//! test kills it there with `kill -9`, or creates `<path>` to let it go on).
//!
//! | variable | where it waits |
//! |---|---|
//! | `AO_TEST_PAUSE_BEFORE_DELIVER` | a check-in: the intent is saved, nothing pasted yet |
//! | `AO_TEST_PAUSE_AFTER_DELIVER` | a check-in: the message is delivered, not yet recorded |
//! | `AO_TEST_PAUSE_WORKTREE_BEFORE_MERGE` | an agent's work is committed on its branch, not merged |
//! | `AO_TEST_PAUSE_DAEMON_START` | the daemon holds its lock and socket, nothing is watched yet |
//! | `AO_TEST_PAUSE_DELIVERY_ENTER` | any delivery has pasted, not pressed Enter (at most 60 s) |
//! | `AO_TEST_PAUSE_WATCHER` | notify's thread, at its first event, so the kernel queue fills (at most 2 min) |
//! | `AO_TEST_PAUSE_SUPERVISOR` | the daemon's loop, at the first event seen, so the watcher's queue overflows (at most 2 min) |
//! | `AO_TEST_PAUSE_REMOTE_WATCH` | the remote watch script, on the host: connected, its watch not yet live |
//! | `AO_TEST_PAUSE_START_REPLACED` | a start that replaces a session (a restart, a rotation, a spoke's next run): the old one ended, the new one not begun |
//!
//! Limits and marks:
//!
//! | variable | what it changes |
//! |---|---|
//! | `AO_TEST_PULL_EVERY_SECS` | how often remote hosts are pulled (default 2 s): a test proves a handoff came by the watch |
//! | `AO_TEST_CONTROL_QUIET_SECS` | how long the CLI waits on a silent daemon (default 30 s) |
//! | `AO_TEST_PANE_LOCK_TIMEOUT_MS` | how long a delivery waits for its pane's lock |
//! | `AO_TEST_PANE_LOCK_WAITING=<dir>` | a sender that finds its pane locked leaves a file there |
//! | `AO_TEST_TASK_BIN=<path>` | the `task` binary agents run (a daemon inside a test process is not one) |

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where a test can stop the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Point {
    BeforeDeliver,
    AfterDeliver,
    WorktreeBeforeMerge,
    DaemonStart,
    DeliveryEnter,
    Watcher,
    Supervisor,
    RemoteWatch,
    StartReplaced,
}

impl Point {
    const ALL: [Point; 9] = [
        Point::BeforeDeliver,
        Point::AfterDeliver,
        Point::WorktreeBeforeMerge,
        Point::DaemonStart,
        Point::DeliveryEnter,
        Point::Watcher,
        Point::Supervisor,
        Point::RemoteWatch,
        Point::StartReplaced,
    ];

    /// Its name in `AO_TEST_PAUSE_<NAME>`.
    pub fn name(self) -> &'static str {
        match self {
            Point::BeforeDeliver => "BEFORE_DELIVER",
            Point::AfterDeliver => "AFTER_DELIVER",
            Point::WorktreeBeforeMerge => "WORKTREE_BEFORE_MERGE",
            Point::DaemonStart => "DAEMON_START",
            Point::DeliveryEnter => "DELIVERY_ENTER",
            Point::Watcher => "WATCHER",
            Point::Supervisor => "SUPERVISOR",
            Point::RemoteWatch => "REMOTE_WATCH",
            Point::StartReplaced => "START_REPLACED",
        }
    }
}

/// Every test hook of the process; the default is none set.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// Pause point → the file whose existence lets it go on.
    pub pauses: BTreeMap<Point, PathBuf>,
    /// How often remote hosts are pulled.
    pub pull_every: Option<Duration>,
    /// How long the CLI waits on a daemon that says nothing.
    pub control_quiet: Option<Duration>,
    /// How long a delivery waits for its pane's lock.
    pub pane_lock_timeout: Option<Duration>,
    /// Where a sender that finds its pane locked leaves a file.
    pub pane_lock_waiting: Option<PathBuf>,
    /// The `task` binary that agents, preambles and the demo runtime run, instead of this
    /// process's own executable (a test binary running the daemon in its own process).
    pub task_bin: Option<PathBuf>,
}

impl Hooks {
    /// The hooks the environment sets: the one place `AO_TEST_*` is read.
    pub fn from_env() -> Hooks {
        Hooks::from_vars(|k| std::env::var_os(k))
    }

    /// The hooks `var` names (a variable's value, or None). Pure.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Hooks {
        let num = |k: &str| var(k).and_then(|v| v.to_str()?.trim().parse::<u64>().ok());
        Hooks {
            pauses: Point::ALL
                .into_iter()
                .filter_map(|p| Some((p, PathBuf::from(var(&format!("AO_TEST_PAUSE_{}", p.name()))?))))
                .collect(),
            pull_every: num("AO_TEST_PULL_EVERY_SECS").map(Duration::from_secs),
            control_quiet: num("AO_TEST_CONTROL_QUIET_SECS").map(Duration::from_secs),
            pane_lock_timeout: num("AO_TEST_PANE_LOCK_TIMEOUT_MS").map(Duration::from_millis),
            pane_lock_waiting: var("AO_TEST_PANE_LOCK_WAITING").map(PathBuf::from),
            task_bin: var("AO_TEST_TASK_BIN").map(PathBuf::from),
        }
    }

    /// The release file of a pause point that is set.
    pub fn gate(&self, p: Point) -> Option<&Path> {
        self.pauses.get(&p).map(PathBuf::as_path)
    }
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// The process's hooks: the installed value, else the environment's, read at first use.
pub fn get() -> &'static Hooks {
    HOOKS.get_or_init(Hooks::from_env)
}

/// Use `h` for this process (before anything asked for the hooks); gives it back when the
/// hooks were already fixed.
pub fn install(h: Hooks) -> Result<(), Hooks> {
    HOOKS.set(h)
}

/// Wait at `p` when it is set: mark the point reached, then wait for its release file (at
/// most 60 s at a delivery's Enter, where a broken test must not hold a pane for ever).
pub async fn pause(p: Point) {
    let Some(gate) = get().gate(p) else {
        return;
    };
    let (mark, limit) = match p {
        Point::DeliveryEnter => (".waiting", Some(Duration::from_secs(60))),
        _ => (".reached", None),
    };
    let mut reached = gate.as_os_str().to_owned();
    reached.push(mark);
    if let Err(e) = std::fs::write(&reached, b"") {
        tracing::warn!(point = p.name(), error = %e, "test hook cannot mark its point");
    }
    tracing::info!(point = p.name(), gate = %gate.display(), "test hook: waiting");
    let deadline = limit.map(|l| Instant::now() + l);
    while !gate.exists() && deadline.is_none_or(|d| Instant::now() < d) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_set_is_a_hook() {
        let vars: BTreeMap<&str, &str> = [
            ("AO_TEST_PAUSE_AFTER_DELIVER", "/t/gate"),
            ("AO_TEST_PULL_EVERY_SECS", "60"),
            ("AO_TEST_PANE_LOCK_TIMEOUT_MS", "not a number"),
        ]
        .into();
        let h = Hooks::from_vars(|k| vars.get(k).map(OsString::from));
        assert_eq!(h.gate(Point::AfterDeliver), Some(Path::new("/t/gate")));
        assert_eq!(h.gate(Point::BeforeDeliver), None);
        assert_eq!(h.pull_every, Some(Duration::from_secs(60)));
        assert_eq!(h.pane_lock_timeout, None, "a bad number sets nothing");
        assert!(Hooks::from_vars(|_| None).pauses.is_empty());
    }
}
