//! The daemon's file watcher: one notify (inotify) watcher over every supervised task's
//! `handoffs/`, turning kernel events into the two hints the supervisor acts on.
//!
//! Events are only hints (the 5 s reconcile scan covers anything missed): a close after
//! writing restarts a handoff's quiet time, a rename into place says it is complete (see
//! [`crate::store::handoffs::Quiet`]). A lost event is never silent: a queue overflow is logged
//! as a warning, counted in `watcher.json` (shown by `task status`) and answered with a
//! rescan of every task. A watcher that fails says why in words a user can act on: which
//! sysctl limit to raise, or which folder is gone.
//!
//! Test hook: `AO_TEST_PAUSE_WATCHER=<file>` makes the watcher's thread stop at its first
//! event until `<file>` exists, so a test can fill the kernel's queue past
//! fs.inotify.max_queued_events and provoke a real overflow.

use std::path::{Path, PathBuf};

use notify::{RecursiveMode, Watcher as _};

use crate::core::error::{Error, Result};
use std::sync::{Arc, Mutex};

use crate::core::model::WatchStats;
use crate::store::handoffs::watch_stats;
use crate::store::handoffs::{How, memo};

/// What the watcher saw, for the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    /// A file in a watched folder was closed after writing or renamed into place: (folder, file name, which).
    Final(PathBuf, String, How),
    /// Events were lost (queue overflow) or the watcher failed: every task should look again.
    Rescan,
    /// A watched folder itself was removed or moved away: its watch is gone (or follows
    /// the moved folder), so nothing in the folder at that path is seen until it is
    /// watched again.
    Lost(PathBuf),
}

/// The watcher; dropping it stops watching.
pub(super) struct Watcher {
    inner: notify::RecommendedWatcher,
    /// Counts changed since they were last saved (a burst of dropped events).
    unsaved: Arc<Mutex<Option<WatchStats>>>,
}

impl Watcher {
    /// Start watching nothing yet; `on` receives what is seen, from notify's own thread
    /// (it must not block), and says whether it could take it: what it could not is
    /// counted ([`WatchStats::dropped`]) and warned about.
    pub(super) fn start(on: impl Fn(Seen) -> bool + Send + 'static) -> Result<Watcher> {
        let mut stats = WatchStats {
            pid: std::process::id(),
            ..WatchStats::default()
        };
        if let Err(e) = watch_stats::save(&stats) {
            tracing::warn!(error = %e, "cannot save the watcher's counts; `task status` will not show overflows");
        }
        let mut pause = crate::io::hooks::get()
            .gate(crate::io::hooks::Point::Watcher)
            .map(Path::to_path_buf);
        let unsaved = Arc::new(Mutex::new(None::<WatchStats>));
        let later = unsaved.clone();
        let pass = move |stats: &mut WatchStats, seen: Seen| {
            if on(seen) {
                return;
            }
            stats.dropped += 1;
            stats.last_drop = Some(crate::core::clock::now());
            // The first drop of a burst is saved and warned at once; the rest of the
            // burst's count is saved by [`Watcher::flush`] (no fsync per dropped event).
            let mut later = later.lock().unwrap_or_else(|e| e.into_inner());
            if later.is_none() {
                tracing::warn!(
                    dropped = stats.dropped,
                    "the daemon is too busy to take the file watcher's events: they are dropped, and the handoffs are found by the rescan every 5 s instead"
                );
                if let Err(e) = watch_stats::save(stats) {
                    tracing::warn!(error = %e, "cannot save the watcher's counts");
                }
            }
            *later = Some(stats.clone());
        };
        let handler = move |res: notify::Result<notify::Event>| {
            if let Some(release) = pause.take() {
                test_pause(&release);
            }
            match res {
                Ok(ev) if ev.need_rescan() => {
                    stats.overflows += 1;
                    stats.last_overflow = Some(crate::core::clock::now());
                    tracing::warn!(
                        overflows = stats.overflows,
                        "the file watcher's event queue overflowed (fs.inotify.max_queued_events): events were lost, every task rescans its handoffs; raise the limit if this repeats"
                    );
                    if let Err(e) = watch_stats::save(&stats) {
                        tracing::warn!(error = %e, "cannot save the watcher's overflow count");
                    }
                    memo::forget_all();
                    pass(&mut stats, Seen::Rescan)
                }
                Ok(ev) if tells_nothing(&ev.kind) => {}
                Ok(ev) => {
                    // Any event, before anyone hears of it: a scan must not skip the file.
                    for p in &ev.paths {
                        memo::touched(p);
                    }
                    if folder_gone(&ev.kind) {
                        for p in ev.paths.iter().filter(|p| memo::is_watched(p)) {
                            // Nothing kept for the folder is trusted from here on.
                            memo::unwatched(p);
                            pass(&mut stats, Seen::Lost(p.clone()));
                        }
                        return;
                    }
                    let Some(how) = final_kind(&ev.kind) else { return };
                    for p in ev.paths {
                        if let Some(seen) = final_handoff(&p, how) {
                            pass(&mut stats, seen);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %cause(&e, None), "file watcher error; every task rescans its handoffs");
                    memo::forget_all();
                    pass(&mut stats, Seen::Rescan);
                }
            }
        };
        let inner = crate::io::watch::watcher(handler)
            .map_err(|e| Error::Environment(format!("cannot start the file watcher: {}", cause(&e, None))))?;
        Ok(Watcher { inner, unsaved })
    }

    /// Save the counts a burst of dropped events left unsaved (the daemon's 5 s tick).
    pub(super) fn flush(&self) {
        let Some(stats) = self.unsaved.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        tracing::warn!(
            dropped = stats.dropped,
            "file watcher events dropped while the daemon was busy"
        );
        if let Err(e) = watch_stats::save(&stats) {
            tracing::warn!(error = %e, "cannot save the watcher's counts");
        }
    }

    /// Watch `dir` (not recursively). A failure is an [`Error::Environment`] naming its
    /// cause; the caller may carry on, since the reconcile scan still covers the folder.
    pub(super) fn watch(&mut self, dir: &Path) -> Result<()> {
        self.inner
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| Error::Environment(format!("cannot watch {}: {}", dir.display(), cause(&e, Some(dir)))))?;
        memo::watching(dir);
        Ok(())
    }

    /// Stop watching `dir` (a folder not watched, or gone, is fine).
    pub(super) fn unwatch(&mut self, dir: &Path) {
        memo::unwatched(dir);
        if let Err(e) = self.inner.unwatch(dir) {
            tracing::debug!(dir = %dir.display(), error = %e, "unwatch");
        }
    }
}

/// The test hook: wait (on notify's thread, so the kernel queue fills) until `release`
/// exists; gives up after two minutes so a broken test cannot hang a daemon forever.
fn test_pause(release: &Path) {
    tracing::info!(release = %release.display(), "test hook: the watcher pauses");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !release.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// An open, should one still come (the kernel is asked for none, `io::watch`): taken as a
/// change, each one made the folder's memo drop the file's skip and the kept scan, so the
/// next scan looked again at what it had just read. Pure.
fn tells_nothing(kind: &notify::EventKind) -> bool {
    matches!(kind, notify::EventKind::Access(notify::event::AccessKind::Open(_)))
}

/// An event that may be about a watched folder itself leaving its path: inotify's
/// DELETE_SELF and MOVE_SELF (a file's removal or rename away has the same kinds, and is
/// told apart by its path). Pure.
fn folder_gone(kind: &notify::EventKind) -> bool {
    use notify::event::{ModifyKind, RenameMode};
    matches!(
        kind,
        notify::EventKind::Remove(_) | notify::EventKind::Modify(ModifyKind::Name(RenameMode::From))
    )
}

/// A close after writing (maybe one of several appends) or a rename into place (complete);
/// creation and each write are not worth a look (the reconcile scan covers the rest).
fn final_kind(kind: &notify::EventKind) -> Option<How> {
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => Some(How::Closed),
        notify::EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both | RenameMode::Any)) => {
            Some(How::Renamed)
        }
        _ => None,
    }
}

/// A file worth telling the task about: a visible `.md` (temp files of atomic writes
/// start with a dot).
fn final_handoff(p: &Path, how: How) -> Option<Seen> {
    let name = p.file_name()?.to_str()?;
    let parent = p.parent()?;
    (!name.starts_with('.') && name.ends_with(".md")).then(|| Seen::Final(parent.to_path_buf(), name.to_string(), how))
}

/// What went wrong, in words a user can act on. Pure.
pub(super) fn cause(e: &notify::Error, dir: Option<&Path>) -> String {
    let dir = dir.or_else(|| e.paths.first().map(PathBuf::as_path));
    match &e.kind {
        notify::ErrorKind::MaxFilesWatch => "the inotify watch limit is reached (fs.inotify.max_user_watches); raise it, e.g. `sudo sysctl fs.inotify.max_user_watches=524288` (and in /etc/sysctl.d/ to keep it)".to_string(),
        notify::ErrorKind::PathNotFound => match dir {
            Some(d) => format!("the folder {} is gone; recreate it or `task stop` the task", d.display()),
            None => "a watched folder is gone".to_string(),
        },
        notify::ErrorKind::Io(io) if io.raw_os_error() == Some(libc::EMFILE) => format!(
            "too many inotify instances for this user (fs.inotify.max_user_instances); raise it, e.g. `sudo sysctl fs.inotify.max_user_instances=1024`, or close other watchers ({io})"
        ),
        notify::ErrorKind::Io(io) if io.raw_os_error() == Some(libc::ENFILE) => {
            format!("the system is out of file handles (fs.file-max): {io}")
        }
        notify::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound => match dir {
            Some(d) => format!("the folder {} is gone; recreate it or `task stop` the task", d.display()),
            None => format!("a watched folder is gone ({io})"),
        },
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_name_the_limit_or_the_folder() {
        let limit = notify::Error::new(notify::ErrorKind::MaxFilesWatch);
        assert!(cause(&limit, None).contains("fs.inotify.max_user_watches"));
        let gone = notify::Error::new(notify::ErrorKind::PathNotFound).add_path("/p/tasks/t1/handoffs".into());
        assert!(cause(&gone, None).contains("/p/tasks/t1/handoffs is gone"));
        let instances = notify::Error::io(std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(cause(&instances, None).contains("fs.inotify.max_user_instances"));
    }

    #[test]
    fn an_open_tells_nothing_and_a_write_a_close_a_rename_or_a_removal_does() {
        use notify::EventKind as K;
        use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RemoveKind, RenameMode};
        assert!(tells_nothing(&K::Access(AccessKind::Open(AccessMode::Any))));
        for k in [
            K::Access(AccessKind::Close(AccessMode::Write)),
            K::Modify(ModifyKind::Any),
            K::Modify(ModifyKind::Name(RenameMode::To)),
            K::Create(CreateKind::File),
            K::Remove(RemoveKind::File),
        ] {
            assert!(!tells_nothing(&k), "{k:?}");
        }
    }

    /// A real watcher of `dir` that keeps everything it sees.
    fn collecting(dir: &Path) -> (Watcher, Arc<Mutex<Vec<Seen>>>) {
        let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
        let into = seen.clone();
        let mut w = Watcher::start(move |s| {
            into.lock().unwrap().push(s);
            true
        })
        .unwrap();
        w.watch(dir).unwrap();
        (w, seen)
    }

    /// Wait until the watcher has told of `name` as final.
    fn wait_seen(seen: &Mutex<Vec<Seen>>, name: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !seen
            .lock()
            .unwrap()
            .iter()
            .any(|s| matches!(s, Seen::Final(_, n, _) if n == name))
        {
            assert!(std::time::Instant::now() < deadline, "{name} never seen");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The daemon's own reads of a handoff leave the folder's memo as it was: only the
    /// events of the files written count (twenty reads would count twenty without the rule).
    #[test]
    fn reading_a_handoff_is_not_a_change_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, seen) = collecting(dir.path());
        let land = |name: &str| {
            let tmp = dir.path().join(format!(".{name}.tmp"));
            std::fs::write(&tmp, "# Handoff\n").unwrap();
            std::fs::rename(&tmp, dir.path().join(name)).unwrap();
            wait_seen(&seen, name);
        };
        land("dev-20251127-090000.md");
        let one = memo::events_in(dir.path());
        land("dev-20251127-090001.md");
        let per_file = memo::events_in(dir.path()) - one;
        let before = memo::events_in(dir.path());
        let read = dir.path().join("dev-20251127-090000.md");
        for _ in 0..20 {
            std::fs::read(&read).unwrap();
        }
        land("dev-20251127-090002.md");
        let counted = memo::events_in(dir.path()) - before;
        assert!(
            counted <= per_file + 2,
            "a landed file counts about {per_file} events; with twenty reads before it, {counted}"
        );
        w.unwatch(dir.path());
    }

    /// A handoff written the product's way (`task handoff`) is one event in the watched
    /// folder, its rename in: its temp file is made, written and closed outside it.
    #[test]
    fn a_handoff_written_by_the_product_is_one_event_in_its_folder() {
        let task = tempfile::tempdir().unwrap();
        let dir = task.path().join("handoffs");
        std::fs::create_dir(&dir).unwrap();
        let (mut w, seen) = collecting(&dir);
        let before = memo::events_in(&dir);
        let from: crate::core::names::AgentName = "dev".parse().unwrap();
        let written = crate::store::handoffs::write(
            &dir,
            &crate::core::handoff::NewHandoff {
                from: &from,
                status: crate::core::handoff::Status::Complete,
                target: None,
                next: None,
                body: "## Completed Work\nstep 1\n",
                now: chrono::Local::now(),
            },
        )
        .unwrap();
        // A marker renamed in from outside, one event: once it is seen, so is everything before it.
        let outside = task.path().join("marker.md");
        std::fs::write(&outside, "# Handoff\n").unwrap();
        std::fs::rename(&outside, dir.join("zz-marker.md")).unwrap();
        wait_seen(&seen, "zz-marker.md");
        wait_seen(&seen, &written.file_name().unwrap().to_string_lossy());
        // One, or two when a memo test forgets every folder meanwhile (the memo is the process's).
        let counted = memo::events_in(&dir) - before - 1;
        assert!(
            counted <= 2,
            "the handoff's write was {counted} events in the watched folder"
        );
        let left: Vec<_> = std::fs::read_dir(task.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".tmp-"))
            .collect();
        assert!(left.is_empty(), "temp files left in the task folder: {left:?}");
        w.unwatch(&dir);
    }

    #[test]
    fn only_visible_markdown_counts() {
        let d = Path::new("/p/tasks/t1/handoffs");
        let c = How::Closed;
        assert_eq!(
            final_handoff(&d.join("dev-20251127-090000.md"), c),
            Some(Seen::Final(d.to_path_buf(), "dev-20251127-090000.md".into(), c))
        );
        assert_eq!(final_handoff(&d.join(".dev-20251127-090000.md.tmp"), c), None);
        assert_eq!(final_handoff(&d.join(".x.md"), c), None);
        assert_eq!(final_handoff(&d.join("notes.txt"), c), None);
    }
}
