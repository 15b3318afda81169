//! Which handoff files a scan may pass over without a `stat`, in a process whose file
//! watcher sees every change to them (the daemon).
//!
//! A scan compares every file of `handoffs/` with the ledger, and every file ever written
//! stays there: after 30 minutes of the soak that was 600 `stat`s per task per scan, several
//! scans per handoff — the part of the daemon's work that grew with the task's age
//! (issue 13). A file found unchanged since the ledger recorded it is remembered here,
//! and skipped by later scans until the watcher reports any event for it (a write, a
//! touch, a rename, a removal) or [`FRESH_FOR`] passes. The memo is only consulted for a
//! folder the watcher has said it covers ([`watching`]); events lost to an overflow or a
//! watcher error forget everything ([`forget_all`]). A scan that overlapped an event in
//! its folder remembers nothing, so an event can never be overtaken by a stale entry.
//!
//! The same events keep two more things per watched folder. Its listing (readdir, parse
//! and sort of every name: 12 % of the soak daemon at minute 25, 18 % when read once per
//! new handoff) is reused while no event came and the folder's own version (its mtime and
//! ctime, read [`crate::store::parsed::SETTLED`] after its last change) is unchanged; after
//! events, only the names they carry are looked at again (a `stat` each), and the folder
//! is read in full when its version changed with no event (a rename whose event is still
//! on its way), after an overflow, and at least every [`FRESH_FOR`]. And the last scan's
//! result is reused by the next scan of the same listing against the same ledger (a
//! check-in scans two or three times, and the ledger only changes when one is recorded).

use std::collections::HashMap;

use crate::core::error::Result;
use crate::core::handoff::Ledger;
use crate::store::parsed::Version;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use super::{Listing, Scanned};

/// How long a file is skipped without an event: the bound on how late a change the
/// watcher cannot see (a network filesystem written from another host) is noticed.
pub const FRESH_FOR: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
struct Folder {
    /// Bumped by every event in the folder.
    events: u64,
    /// Files found as the ledger recorded them: when, and the recorded size and mtime.
    /// Shared with the scans under way (each takes it once, not a lock per file); an
    /// event copies it only while one holds it.
    unchanged: Arc<HashMap<String, Unchanged>>,
    /// The folder's listing, kept up to date by the names events carry.
    listing: Option<Kept>,
    /// The names events carried since the kept listing was last brought up to date.
    dirty: Vec<String>,
    /// The last scan's result, with what it was computed from.
    scanned: Option<KeptScan>,
}

/// A listing and what it reflects.
#[derive(Debug)]
struct Kept {
    /// The folder's event count it includes.
    events: u64,
    /// The folder's version when it was last brought up to date.
    version: Version,
    /// When the folder was last read in full.
    full_at: Instant,
    listing: Arc<Listing>,
}

/// Past this many names waiting to be looked at, the folder is read in full instead.
const DIRTY_MAX: usize = 256;

/// A scan's result and what it depends on: the event count, the listing and the ledger
/// (held, so neither address can be reused by another value while it is kept).
#[derive(Debug)]
struct KeptScan {
    events: u64,
    at: Instant,
    listing: Arc<Listing>,
    ledger: Arc<Ledger>,
    result: Arc<Scanned>,
}

/// A file found as the ledger recorded it.
#[derive(Debug, Clone, Copy)]
struct Unchanged {
    at: Instant,
    size: u64,
    mtime_ns: i64,
}

/// Every handoffs/ folder this process listed (a process memo: [`crate::store::memo`]).
#[derive(Default)]
struct Folders(Mutex<HashMap<PathBuf, Folder>>);

impl crate::store::memo::Memo for Folders {
    const NAME: &'static str = "handoffs/ listings";
    fn entries(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn folders() -> MutexGuard<'static, HashMap<PathBuf, Folder>> {
    crate::store::memo::get::<Folders>()
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The watcher covers `dir` from now on: its events reach [`touched`].
pub fn watching(dir: &Path) {
    folders().entry(dir.to_path_buf()).or_default();
}

/// Whether the watcher covers `dir` (see [`watching`]).
pub fn is_watched(dir: &Path) -> bool {
    folders().contains_key(dir)
}

/// The watcher no longer covers `dir`: scans `stat` every file again.
pub fn unwatched(dir: &Path) {
    folders().remove(dir);
}

/// The watcher reported an event (any kind) for `path`.
pub fn touched(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    if let Some(f) = folders().get_mut(dir) {
        f.events += 1;
        if f.unchanged.contains_key(name) {
            Arc::make_mut(&mut f.unchanged).remove(name);
        }
        if f.listing.is_some() {
            if f.dirty.len() < DIRTY_MAX {
                f.dirty.push(name.to_string());
            } else {
                f.listing = None;
                f.dirty.clear();
            }
        }
    }
}

/// Events were lost: nothing remembered can be trusted.
pub fn forget_all() {
    for f in folders().values_mut() {
        f.events += 1;
        f.unchanged = Arc::default();
        f.listing = None;
        f.dirty.clear();
        f.scanned = None;
    }
}

/// The listing of `dir`: for a watched folder, the kept one, brought up to date by the
/// names events carried since; else `read` (in full; kept for next time when the folder
/// is watched and its version settled).
pub(super) fn listing(dir: &Path, read: impl FnOnce() -> Result<Listing>) -> Result<Arc<Listing>> {
    let Ok(meta) = std::fs::metadata(dir) else {
        return read().map(Arc::new);
    };
    let version = Version::of(&meta);
    let events = {
        let mut folders = folders();
        let Some(f) = folders.get_mut(dir) else {
            drop(folders);
            return read().map(Arc::new);
        };
        if let Some(k) = &mut f.listing
            && k.full_at.elapsed() < FRESH_FOR
        {
            if k.events == f.events && k.version == version {
                return Ok(k.listing.clone());
            }
            if k.events != f.events {
                // The kept scan holds the listing too: it is stale now, and without it
                // the listing is usually amended in place rather than copied.
                f.scanned = None;
                let names = std::mem::take(&mut f.dirty);
                super::amend(Arc::make_mut(&mut k.listing), dir, &names);
                k.events = f.events;
                k.version = version;
                return Ok(k.listing.clone());
            }
            // The folder changed with no event yet: an entry whose event is on its way.
        }
        f.events
    };
    // Read after the version: a change during the read gives the folder a later version.
    let read_at = SystemTime::now();
    let listing = Arc::new(read()?);
    if version.settled_by(read_at)
        && let Some(f) = folders().get_mut(dir)
        && f.events == events
    {
        f.listing = Some(Kept {
            events,
            version,
            full_at: Instant::now(),
            listing: listing.clone(),
        });
        f.dirty.clear();
    }
    Ok(listing)
}

/// The result of the last scan of `dir`, if it scanned this very listing against this
/// very ledger and no event came since.
pub(super) fn scanned(dir: &Path, listing: &Arc<Listing>, ledger: &Arc<Ledger>) -> Option<Arc<Scanned>> {
    let folders = folders();
    let f = folders.get(dir)?;
    let k = f.scanned.as_ref()?;
    (k.events == f.events
        && k.at.elapsed() < FRESH_FOR
        && Arc::ptr_eq(&k.listing, listing)
        && Arc::ptr_eq(&k.ledger, ledger))
    .then(|| k.result.clone())
}

/// A scan of one folder: what it may skip, and what it found unchanged.
#[derive(Debug)]
pub(super) struct Scan {
    dir: PathBuf,
    /// The folder's event count when the scan began; `None`: not watched, skip nothing.
    events: Option<u64>,
    /// What the folder knew unchanged when the scan began. A file an event names after
    /// that is still skipped by this scan, but the event's own hint brings a scan that
    /// looks at it (its entry is gone from the folder's map).
    skip: Arc<HashMap<String, Unchanged>>,
    found: Vec<(String, Unchanged)>,
}

impl Scan {
    pub(super) fn begin(dir: &Path) -> Scan {
        let now = Instant::now();
        let (events, skip) = match folders().get_mut(dir) {
            Some(f) => {
                if f.unchanged.values().any(|u| now.duration_since(u.at) >= FRESH_FOR) {
                    Arc::make_mut(&mut f.unchanged).retain(|_, u| now.duration_since(u.at) < FRESH_FOR);
                }
                (Some(f.events), f.unchanged.clone())
            }
            None => (None, Arc::default()),
        };
        Scan {
            dir: dir.to_path_buf(),
            events,
            skip,
            found: Vec::new(),
        }
    }

    /// Whether `file` is known to be as `ledger` records it (no `stat` needed): found so,
    /// and the ledger's record is still the one it was found against (a ledger replaced by
    /// a fresh one has no record, so the file is looked at).
    pub(super) fn skips(&self, file: &str, ledger: &Ledger) -> bool {
        self.skip.get(file).is_some_and(|u| {
            ledger
                .get(file)
                .is_some_and(|e| e.size == u.size && e.mtime_ns == u.mtime_ns)
        })
    }

    /// `file` was found as the ledger recorded it (`size`, `mtime_ns`).
    pub(super) fn unchanged(&mut self, file: String, size: u64, mtime_ns: i64) {
        if self.events.is_some() {
            let at = Instant::now();
            self.found.push((file, Unchanged { at, size, mtime_ns }));
        }
    }

    /// Remember what was found, unless an event in the folder came during the scan.
    pub(super) fn end(self) {
        self.end_keeping(None);
    }

    /// [`Scan::end`], and keep the scan's `result` of a `listing` against a `ledger` for
    /// [`scanned`] (on the same condition).
    pub(super) fn end_keeping(self, result: Option<(&Arc<Listing>, &Arc<Ledger>, Arc<Scanned>)>) {
        let Some(events) = self.events else { return };
        let mut folders = folders();
        let Some(f) = folders.get_mut(&self.dir) else { return };
        if f.events != events {
            return;
        }
        if let Some((listing, ledger, result)) = result {
            f.scanned = Some(KeptScan {
                events,
                at: Instant::now(),
                listing: listing.clone(),
                ledger: ledger.clone(),
                result,
            });
        }
        if self.found.is_empty() {
            return;
        }
        drop(self.skip);
        Arc::make_mut(&mut f.unchanged).extend(self.found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(files: &[&str]) -> Ledger {
        let mut l = Ledger::default();
        for f in files {
            l.record(f, 1, 2, "ab", "t");
        }
        l
    }

    fn scan(dir: &Path, files: &[&str]) -> Vec<String> {
        scan_against(dir, files, &ledger(files))
    }

    fn scan_against(dir: &Path, files: &[&str], ledger: &Ledger) -> Vec<String> {
        let mut s = Scan::begin(dir);
        let mut statted = Vec::new();
        for f in files {
            if !s.skips(f, ledger) {
                statted.push(f.to_string());
                s.unchanged(f.to_string(), 1, 2);
            }
        }
        s.end();
        statted
    }

    #[test]
    fn a_file_is_skipped_until_an_event_names_it_and_only_in_a_watched_folder() {
        let dir = PathBuf::from("/memo-test/a/handoffs");
        assert_eq!(
            scan(&dir, &["x.md", "y.md"]).len(),
            2,
            "not watched: every file is looked at"
        );
        assert_eq!(scan(&dir, &["x.md", "y.md"]).len(), 2);
        watching(&dir);
        assert_eq!(scan(&dir, &["x.md", "y.md"]).len(), 2);
        assert!(scan(&dir, &["x.md", "y.md"]).is_empty(), "both remembered");
        touched(&dir.join("y.md"));
        assert_eq!(scan(&dir, &["x.md", "y.md"]), ["y.md"]);
        assert_eq!(
            scan_against(&dir, &["x.md", "y.md"], &ledger(&["y.md"])),
            ["x.md"],
            "a ledger without the record (a fresh state) is looked at again"
        );
        forget_all();
        assert_eq!(scan(&dir, &["x.md", "y.md"]).len(), 2);
        unwatched(&dir);
        assert_eq!(scan(&dir, &["x.md", "y.md"]).len(), 2);
        assert_eq!(scan(&dir, &["x.md", "y.md"]).len(), 2);
    }

    #[test]
    fn a_scan_overlapping_an_event_remembers_nothing() {
        let dir = PathBuf::from("/memo-test/b/handoffs");
        watching(&dir);
        let mut s = Scan::begin(&dir);
        s.unchanged("x.md".into(), 1, 2);
        // The file changes after its stat, before the scan ends.
        touched(&dir.join("x.md"));
        s.end();
        assert_eq!(scan(&dir, &["x.md"]), ["x.md"]);
        unwatched(&dir);
    }
}
