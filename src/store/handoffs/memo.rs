//! Which handoff files a scan may pass over without a `stat`, in a process whose file
//! watcher sees every change to them (the daemon).
//!
//! A scan compares every file of `handoffs/` with the ledger, and every file ever written
//! stays there: after 30 minutes of the soak that was 600 `stat`s per task per scan, several
//! scans per handoff — the part of the daemon's work that grew with the task's age
//! (issue 13). A file found unchanged since the ledger recorded it is remembered here,
//! and skipped by later scans until the watcher reports any event for it (a write, a
//! touch, a rename, a removal) or its trust runs out ([`trust_for`]: [`FRESH_FOR`] on a
//! file system another machine may write, [`LOCAL_FRESH_FOR`] on a local one, or a
//! quarter of the file's age when that is longer — looking again at every file every half
//! minute made the full scans of a long run's folders cost in proportion to its history:
//! at 60 tasks, 450 `stat`s a second at minute 11). The memo is only consulted for a
//! folder the watcher has said it covers ([`watching`]); events lost to an overflow or a
//! watcher error forget everything ([`forget_all`]). A scan that overlapped an event in
//! its folder remembers nothing, so an event can never be overtaken by a stale entry.
//!
//! The same events keep two more things per watched folder. Its listing (readdir, parse
//! and sort of every name: 12 % of the soak daemon at minute 25, 18 % when read once per
//! new handoff) is reused while no event came and the folder's own version (its mtime and
//! ctime) is unchanged; after events, only the names they carry are looked at again (a
//! `stat` each), and the folder is read in full when its version changed with no event (a
//! rename whose event is still on its way), after an overflow, and at least every
//! [`FRESH_FOR`]. A listing read within the kernel's timestamp granularity of a change is
//! kept too (unlike a parsed file's, [`crate::store::parsed`]): a change in that same tick
//! keeps the folder's version, but it cannot go unseen for long, since its event bumps the
//! folder's count before anyone is told of the file, and the kept listing is amended then.
//! Not keeping those reads made every check-in right after a handoff (the usual case: one
//! is started at once) read its folder in full.
//!
//! The last scan's result is reused by the next scan of the same listing against the same
//! ledger (a check-in scans two or three times, and the ledger only changes when one is
//! recorded). And what the scans left open is kept: the names a scan could not skip (new,
//! changed, not a regular file). The next scan of the kept listing looks only at those,
//! at the names events carried since, and at the files whose records the ledger gained
//! since, so a task's thousandth handoff costs what its first did: every other name was
//! skippable and nothing has said otherwise since. A full scan, which looks again at the
//! skips past half their trust, is made when the listing was read in full, when the
//! ledger cannot tell what it gained (it folded its records), and at least every half
//! [`FRESH_FOR`], so no skip is relied on past its trust.

use std::collections::HashMap;

use crate::core::error::Result;
use crate::core::handoff::{HandoffName, Ledger};
use crate::store::fsutil;
use crate::store::parsed::Version;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Listing, Scanned};

/// How long a file is skipped without an event, at least: the bound on how late a change
/// the watcher cannot see (a network filesystem written from another host) is noticed in
/// a file written in the last two minutes.
pub const FRESH_FOR: Duration = Duration::from_secs(30);

/// [`FRESH_FOR`] in a folder on a local file system ([`fsutil::is_local_fs`]): every change
/// there goes through this kernel, so the watcher sees it, and events lost to an overflow
/// forget everything ([`forget_all`]); looking again is insurance only, and ten minutes of
/// it is enough.
pub const LOCAL_FRESH_FOR: Duration = Duration::from_secs(600);

/// How long a file found unchanged may be skipped without an event: its folder's `floor`
/// ([`FRESH_FOR`] or [`LOCAL_FRESH_FOR`]), or a quarter of its age (since its modification
/// time, `mtime_ns`, at `now_ns`; both since the epoch) when that is longer. A handoff is
/// rewritten, if ever, soon after it was written; one untouched for four hours is looked
/// at again after an hour. Pure.
pub fn trust_for(mtime_ns: i64, now_ns: i64, floor: Duration) -> Duration {
    let age = Duration::from_nanos(now_ns.saturating_sub(mtime_ns).max(0) as u64);
    (age / 4).max(floor)
}

#[derive(Debug, Default)]
struct Folder {
    /// The least trust of a skip and the longest a kept listing goes unread in full:
    /// [`FRESH_FOR`] or [`LOCAL_FRESH_FOR`] (set by [`watching`]).
    fresh_for: Duration,
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
    /// What the scans of the kept listing left open (see the module doc).
    open: Option<Open>,
    /// Bumped whenever `open` is dropped: a scan that began on an earlier one leaves none.
    open_epoch: u64,
}

impl Folder {
    fn drop_open(&mut self) {
        self.open = None;
        self.open_epoch += 1;
    }
}

/// The names of the kept listing a scan against `ledger` (or a ledger grown from it) must
/// look at: every other name was skippable against it, and no event has named it since.
#[derive(Debug)]
struct Open {
    ledger: Arc<Ledger>,
    names: std::collections::HashSet<String>,
    /// Until when the skips relied on are within their trust.
    until: Instant,
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

/// A scan of the kept listing, to keep ([`Scan::end_keeping`]).
pub(super) struct ScanOf<'a> {
    pub listing: &'a Arc<Listing>,
    pub ledger: &'a Arc<Ledger>,
    pub result: Arc<Scanned>,
    /// The names it could not skip.
    pub looked: Vec<String>,
}

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
    /// How long after `at` it may be skipped ([`trust_for`]).
    trust: Duration,
}

impl Unchanged {
    /// Whether a full scan at `now` may still skip it: until half its trust, so what the
    /// scan leaves open (relied on for half [`FRESH_FOR`] more) never outlives the trust.
    fn fresh_at(&self, now: Instant) -> bool {
        now.duration_since(self.at) < self.trust / 2
    }
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
    let fresh_for = match fsutil::is_local_fs(dir) {
        Some(true) => LOCAL_FRESH_FOR,
        _ => FRESH_FOR,
    };
    folders().entry(dir.to_path_buf()).or_insert_with(|| Folder {
        fresh_for,
        ..Folder::default()
    });
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
        match &mut f.open {
            Some(o) if o.names.len() < DIRTY_MAX => {
                o.names.insert(name.to_string());
            }
            Some(_) => f.drop_open(),
            None => {}
        }
    }
}

/// How many events the watcher reported in `dir` (0 for a folder not watched).
#[cfg(test)]
pub fn events_in(dir: &Path) -> u64 {
    folders().get(dir).map_or(0, |f| f.events)
}

/// Events were lost: nothing remembered can be trusted.
pub fn forget_all() {
    for f in folders().values_mut() {
        f.events += 1;
        f.unchanged = Arc::default();
        f.listing = None;
        f.dirty.clear();
        f.scanned = None;
        f.drop_open();
    }
}

/// The listing of `dir`: for a watched folder, the kept one, brought up to date by the
/// names events carried since; else `read` (in full; kept for next time when the folder
/// is watched and no event came during the read).
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
            && k.full_at.elapsed() < f.fresh_for
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
        // Read in full: names may appear that no event named, so the next scan is full.
        f.drop_open();
        f.events
    };
    // Read after the version: a change during the read gives the folder a later version
    // (or, in the same tick, an event before anyone hears of it).
    let listing = Arc::new(read()?);
    if let Some(f) = folders().get_mut(dir)
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

/// The names of `listing` (the folder's kept listing) a scan against `ledger` must look
/// at, in the listing's order, when what the last scans left open tells them, with the
/// folder's event count they reflect (the scan's, [`Scan::begin_partial`]); `None`: look
/// at every name.
pub(super) fn open_names(dir: &Path, listing: &Arc<Listing>, ledger: &Arc<Ledger>) -> Option<(Vec<HandoffName>, u64)> {
    let folders = folders();
    let f = folders.get(dir)?;
    let (k, o) = (f.listing.as_ref()?, f.open.as_ref()?);
    if !Arc::ptr_eq(&k.listing, listing) || k.events != f.events || Instant::now() >= o.until {
        return None;
    }
    let gained = if Arc::ptr_eq(&o.ledger, ledger) {
        Vec::new()
    } else {
        ledger.added_since(&o.ledger)?
    };
    let files = o.names.iter().chain(gained.into_iter().map(|(file, _)| file));
    let mut at: Vec<usize> = files.filter_map(|file| super::position(listing, file)).collect();
    at.sort_unstable();
    at.dedup();
    Some((at.into_iter().map(|i| listing.names[i].clone()).collect(), f.events))
}

/// A scan of one folder: what it may skip, and what it found unchanged.
#[derive(Debug)]
pub(super) struct Scan {
    dir: PathBuf,
    /// The folder's event count when the scan began; `None`: not watched, skip nothing.
    events: Option<u64>,
    /// Whether it scans only the names left open ([`open_names`]).
    partial: bool,
    /// The folder's `open_epoch` when it began: what it leaves open is kept only if
    /// nothing dropped what was open meanwhile (a full read of the listing).
    epoch: u64,
    /// Until when what a full scan leaves open may be relied on.
    until: Instant,
    /// The folder's least trust ([`Folder::fresh_for`]).
    fresh_for: Duration,
    /// What the folder knew unchanged when the scan began. A file an event names after
    /// that is still skipped by this scan, but the event's own hint brings a scan that
    /// looks at it (its entry is gone from the folder's map).
    skip: Arc<HashMap<String, Unchanged>>,
    found: Vec<(String, Unchanged)>,
}

impl Scan {
    /// A scan of every name: the skips past half their trust are looked at again, so what
    /// it leaves open may be relied on for another half of [`FRESH_FOR`].
    pub(super) fn begin(dir: &Path) -> Scan {
        Scan::begin_as(dir, None)
    }

    /// A scan that remembers and skips nothing (to compare with, in tests).
    #[cfg(test)]
    pub(super) fn blind(dir: &Path) -> Scan {
        Scan {
            dir: dir.to_path_buf(),
            events: None,
            partial: false,
            epoch: 0,
            until: Instant::now(),
            fresh_for: FRESH_FOR,
            skip: Arc::default(),
            found: Vec::new(),
        }
    }

    /// A scan of only the names left open, as of the folder's event count `events` they
    /// reflect ([`open_names`]): an event since, and it keeps nothing.
    pub(super) fn begin_partial(dir: &Path, events: u64) -> Scan {
        Scan::begin_as(dir, Some(events))
    }

    fn begin_as(dir: &Path, partial: Option<u64>) -> Scan {
        let now = Instant::now();
        let half = FRESH_FOR / 2;
        let (events, epoch, fresh_for, skip) = match folders().get_mut(dir) {
            Some(f) => {
                if partial.is_none() && f.unchanged.values().any(|u| !u.fresh_at(now)) {
                    Arc::make_mut(&mut f.unchanged).retain(|_, u| u.fresh_at(now));
                }
                (
                    Some(partial.unwrap_or(f.events)),
                    f.open_epoch,
                    f.fresh_for,
                    f.unchanged.clone(),
                )
            }
            None => (None, 0, FRESH_FOR, Arc::default()),
        };
        Scan {
            dir: dir.to_path_buf(),
            events,
            partial: partial.is_some(),
            epoch,
            until: now + half,
            fresh_for,
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
            let trust = trust_for(mtime_ns, fsutil::now_ns(), self.fresh_for);
            self.found.push((
                file,
                Unchanged {
                    at,
                    size,
                    mtime_ns,
                    trust,
                },
            ));
        }
    }

    /// Remember what was found, unless an event in the folder came during the scan.
    pub(super) fn end(self) {
        self.end_keeping(None);
    }

    /// [`Scan::end`], and keep the scan of the folder's kept listing for the next ones (on
    /// the same condition): its `result` against `ledger` for [`scanned`], and the names
    /// it `looked` at (could not skip) for [`open_names`].
    pub(super) fn end_keeping(self, kept: Option<ScanOf<'_>>) {
        let Some(events) = self.events else { return };
        let mut folders = folders();
        let Some(f) = folders.get_mut(&self.dir) else { return };
        if f.events != events {
            return;
        }
        if let Some(ScanOf {
            listing,
            ledger,
            result,
            looked,
        }) = kept
        {
            f.scanned = Some(KeptScan {
                events,
                at: Instant::now(),
                listing: listing.clone(),
                ledger: ledger.clone(),
                result,
            });
            // Left open only for the kept listing as of every event the scan knew of (an
            // event between the listing and the scan's start names a file the listing may
            // lack), and only if nothing dropped what was open meanwhile (a full read of
            // the listing: a name no event named may be in the folder).
            let of_kept = f
                .listing
                .as_ref()
                .is_some_and(|k| Arc::ptr_eq(&k.listing, listing) && k.events == events);
            if of_kept && self.epoch == f.open_epoch {
                let names = looked.into_iter().collect();
                match (&mut f.open, self.partial) {
                    (_, false) => {
                        f.open = Some(Open {
                            ledger: ledger.clone(),
                            names,
                            until: self.until,
                        })
                    }
                    (Some(o), true) => {
                        o.ledger = ledger.clone();
                        o.names = names;
                    }
                    (None, true) => {}
                }
            }
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
    fn a_file_is_trusted_for_a_quarter_of_its_age_and_never_less_than_fresh_for() {
        let s = 1_000_000_000i64;
        let now = 1_800_000_000 * s;
        assert_eq!(trust_for(now, now, FRESH_FOR), FRESH_FOR, "just written");
        assert_eq!(trust_for(now - 60 * s, now, FRESH_FOR), FRESH_FOR, "a minute old");
        assert_eq!(
            trust_for(now + 3600 * s, now, FRESH_FOR),
            FRESH_FOR,
            "written in the future"
        );
        assert_eq!(
            trust_for(now - 3600 * s, now, FRESH_FOR),
            Duration::from_secs(900),
            "an hour old"
        );
        assert_eq!(
            trust_for(now - 1800 * s, now, LOCAL_FRESH_FOR),
            LOCAL_FRESH_FOR,
            "half an hour old, on a local disk"
        );
        assert_eq!(
            trust_for(now - 4 * 3600 * s, now, LOCAL_FRESH_FOR),
            Duration::from_secs(3600),
            "four hours old, on a local disk"
        );
        let at = Instant::now();
        let young = Unchanged {
            at,
            size: 1,
            mtime_ns: now,
            trust: trust_for(now, now, FRESH_FOR),
        };
        let old = Unchanged {
            trust: trust_for(now - 3600 * s, now, FRESH_FOR),
            ..young
        };
        let later = at + FRESH_FOR / 2;
        assert!(
            !young.fresh_at(later),
            "a young file is looked at again after half a minute"
        );
        assert!(old.fresh_at(later), "an hour-old one is not");
        assert!(!old.fresh_at(at + Duration::from_secs(450)), "until half its trust");
    }

    #[test]
    fn a_watched_folder_on_a_local_disk_is_trusted_longer_than_one_that_cannot_be_asked() {
        let d = tempfile::tempdir().unwrap();
        let local = d.path().join("handoffs");
        std::fs::create_dir(&local).unwrap();
        let unknown = PathBuf::from("/memo-test/nowhere/handoffs");
        watching(&local);
        watching(&unknown);
        let fresh_for = |dir: &Path| folders().get(dir).map(|f| f.fresh_for);
        assert_eq!(
            fresh_for(&local),
            Some(LOCAL_FRESH_FOR),
            "a temp folder is on a local disk"
        );
        assert_eq!(fresh_for(&unknown), Some(FRESH_FOR), "not known local: the short bound");
        let mut s = Scan::begin(&local);
        s.unchanged("x.md".into(), 1, fsutil::now_ns());
        s.end();
        let trust = folders().get(&local).unwrap().unchanged["x.md"].trust;
        assert_eq!(trust, LOCAL_FRESH_FOR, "a file just written, in the local folder");
        unwatched(&local);
        unwatched(&unknown);
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
