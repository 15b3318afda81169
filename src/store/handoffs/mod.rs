//! The `handoffs/` folder: listing it in timeline order, reading a file under the
//! regular-file rules and the size cap, scanning it against the ledger, deciding when
//! a file being written is final (quiet.rs), and writing a handoff atomically. What a
//! handoff says, and the ledger itself, are the core's ([`crate::core::handoff`]).

mod loads;
pub mod memo;
mod quiet;
pub mod watch_stats;
mod write;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;

pub use quiet::{How, QUIET, Quiet, Ready};
pub use write::write;

use crate::core::error::{Error, Result};
use crate::core::handoff::{Candidate, HandoffName, Ledger, Loaded, Seen, sha256_hex};
use crate::store::fsutil::{self, Skip};

/// Why an entry of `handoffs/` whose name is not a handoff's is skipped.
const NOT_A_NAME: &str = "its name is not {agent}-{YYYYMMDD}-{HHMMSS}.md";

/// Handoffs larger than this are parsed from their head only.
pub const SIZE_CAP: u64 = 1024 * 1024;

/// An entry of `handoffs/` that is not a readable handoff, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file name, lossily decoded.
    pub file: String,
    /// Why it was skipped.
    pub reason: String,
}

/// A folder's handoff names in timeline order, and the entries that are not handoffs.
#[derive(Debug, Default, Clone)]
pub struct Listing {
    /// The handoff file names, in timeline order.
    pub names: Vec<HandoffName>,
    /// Names that do not match the pattern, or are not UTF-8.
    pub skipped: Vec<Skipped>,
    /// How many of `names` each agent wrote: kept with them, so a search for each agent's
    /// latest handoff knows when it has found them all.
    pub agents: std::collections::BTreeMap<String, usize>,
}

impl Listing {
    fn counted(&mut self, agent: &str, by: isize) {
        match self.agents.get_mut(agent) {
            Some(n) if by < 0 && *n <= 1 => {
                self.agents.remove(agent);
            }
            Some(n) => *n = n.saturating_add_signed(by),
            None if by > 0 => {
                self.agents.insert(agent.to_string(), 1);
            }
            None => {}
        }
    }
}

/// What a scan found: the new handoffs, and the files that break the regular-file rules.
#[derive(Debug, Default)]
pub struct Scanned {
    /// The handoffs new to the ledger (or changed since it recorded them), parsed.
    pub cands: Vec<Candidate>,
    /// Files not read, with the reason.
    pub skipped: Vec<Skipped>,
}

/// The folder's [`Listing`], shared: in the daemon, a watched folder's listing is read
/// once per change rather than once per look ([`memo`]).
pub fn listing(dir: &Path) -> Result<Arc<Listing>> {
    memo::listing(dir, || read_listing(dir))
}

/// The handoff file names in a folder, in timeline order. Dot files, temp
/// files and names that do not match the pattern are returned as skipped.
pub fn list(dir: &Path) -> Result<(Vec<HandoffName>, Vec<Skipped>)> {
    let l = listing(dir)?;
    Ok((l.names.clone(), l.skipped.clone()))
}

/// [`Listing`] of `dir` read in full.
fn read_listing(dir: &Path) -> Result<Listing> {
    let mut names = Vec::new();
    let mut skipped = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let os = entry.file_name();
        let Some(file) = os.to_str() else {
            skipped.push(Skipped {
                file: os.to_string_lossy().into_owned(),
                reason: "its name is not UTF-8".into(),
            });
            continue;
        };
        if file.starts_with('.') {
            continue;
        }
        match HandoffName::parse(file) {
            Some(n) => names.push(n),
            None => skipped.push(Skipped {
                file: file.to_string(),
                reason: NOT_A_NAME.into(),
            }),
        }
    }
    names.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    order_same_second(dir, &mut names);
    let mut listing = Listing {
        names,
        skipped,
        ..Listing::default()
    };
    for i in 0..listing.names.len() {
        let agent = listing.names[i].agent.clone();
        listing.counted(&agent, 1);
    }
    Ok(listing)
}

/// Bring `listing` up to date for the entries `files` (names an event carried): each is
/// looked at again (a `stat`), dropped when gone, placed in timeline order when present.
fn amend(listing: &mut Listing, dir: &Path, files: &[String]) {
    let mut seen = std::collections::HashSet::new();
    for file in files.iter().filter(|f| !f.starts_with('.') && seen.insert(f.as_str())) {
        // Found by its second, not by comparing every name of the task's history.
        if let Some(at) = position(listing, file) {
            let gone = listing.names.remove(at);
            listing.counted(&gone.agent, -1);
        }
        listing.skipped.retain(|s| s.file != *file);
        if std::fs::symlink_metadata(dir.join(file)).is_err() {
            continue;
        }
        match HandoffName::parse(file) {
            Some(n) => {
                let at = listing.names.partition_point(|m| m.sort_key() <= n.sort_key());
                listing.counted(&n.agent, 1);
                listing.names.insert(at, n);
            }
            None => listing.skipped.push(Skipped {
                file: file.clone(),
                reason: NOT_A_NAME.into(),
            }),
        }
    }
    // Only the seconds these names fall in: the others were ordered when their files were
    // last looked at, and a `stat` of every file sharing a second with another, at every
    // event, was a quarter of the daemon's work on a task with a long history.
    let stamps: std::collections::HashSet<_> = seen
        .iter()
        .filter_map(|f| HandoffName::parse(f).map(|n| n.stamp))
        .collect();
    order_same_second_in(dir, &mut listing.names, |stamp| stamps.contains(stamp));
}

/// Where `file` is in `listing`'s names, if it is there: they are in time order, and
/// names of one second are ordered among themselves by their files' times.
pub(super) fn position(listing: &Listing, file: &str) -> Option<usize> {
    let second = HandoffName::parse(file)?.sort_key().0;
    let from = listing.names.partition_point(|n| n.sort_key().0 < second);
    listing.names[from..]
        .iter()
        .take_while(|n| n.sort_key().0 == second)
        .position(|n| n.file() == file)
        .map(|i| from + i)
}

/// Names only carry whole seconds; within one second, order by modification
/// time (a PM's instruction and the report it prompts often share a second).
/// Only the files that share a second are stat'ed.
fn order_same_second(dir: &Path, names: &mut [HandoffName]) {
    order_same_second_in(dir, names, |_| true);
}

/// [`order_same_second`] for the seconds `wanted` names only.
fn order_same_second_in(dir: &Path, names: &mut [HandoffName], wanted: impl Fn(&chrono::NaiveDateTime) -> bool) {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() && names[j].stamp == names[i].stamp {
            j += 1;
        }
        if j - i > 1 && wanted(&names[i].stamp) {
            let mtime = |n: &HandoffName| {
                std::fs::symlink_metadata(dir.join(n.file_name()))
                    .map(|m| fsutil::mtime_ns(&m))
                    .unwrap_or(i64::MAX)
            };
            names[i..j].sort_by_cached_key(|n| (mtime(n), n.seq, n.agent.clone()));
        }
        i = j;
    }
}

/// Read and parse one handoff, applying the regular-file rules and the size cap; a file
/// unchanged since this process last parsed it is taken from [`loads`] for one `lstat`.
pub fn load(dir: &Path, name: &HandoffName) -> Result<std::result::Result<Loaded, Skip>> {
    let path = dir.join(name.file_name());
    if let Some(l) = loads::kept(&path) {
        return Ok(Ok(l));
    }
    let read_at = std::time::SystemTime::now();
    let contents = match fsutil::read_regular(&path, SIZE_CAP)? {
        Ok(c) => c,
        Err(skip) => return Ok(Err(skip)),
    };
    let sha = sha256_hex(&contents.bytes);
    let loaded = match loads::same_bytes(&path, contents.version, &sha) {
        Some(l) => l,
        None => loaded_hashed(name, &contents, sha),
    };
    loads::keep(path, contents.version, read_at, &loaded);
    Ok(Ok(loaded))
}

/// Parse what was read for `name` (its content hash already computed), noting a title
/// that disagrees with the file name.
fn loaded_hashed(name: &HandoffName, contents: &fsutil::Contents, sha256: String) -> Loaded {
    Loaded::new(
        name,
        &contents.bytes,
        contents.truncated,
        contents.size,
        contents.mtime_ns,
        sha256,
    )
}

/// Find the new handoffs in `dir` by the ledger: stat each listed name, hash only when
/// the metadata differs from the record, parse only what is new. Files that break the
/// regular-file rules are returned as skipped, never read.
pub fn scan(ledger: &Ledger, dir: &Path, names: &[HandoffName]) -> Result<(Vec<Candidate>, Vec<Skipped>)> {
    let mut memo = memo::Scan::begin(dir);
    let (cands, skipped, _) = scan_with(&mut memo, ledger, dir, names)?;
    memo.end();
    Ok((cands, skipped))
}

/// [`scan`] of a shared listing against a shared ledger: in the daemon, a second scan of
/// the same listing against the same ledger with no event in between is the first's result.
pub fn scan_listing(ledger: &Arc<Ledger>, dir: &Path, listing: &Arc<Listing>) -> Result<Arc<Scanned>> {
    if let Some(r) = memo::scanned(dir, listing, ledger) {
        return Ok(r);
    }
    // Only the names left open, when the last scans tell them (see `memo`).
    let open = memo::open_names(dir, listing, ledger);
    let (mut memo, names) = match &open {
        Some((names, events)) => (memo::Scan::begin_partial(dir, *events), names.as_slice()),
        None => (memo::Scan::begin(dir), listing.names.as_slice()),
    };
    let (cands, skipped, looked) = scan_with(&mut memo, ledger, dir, names)?;
    let result = Arc::new(Scanned { cands, skipped });
    memo.end_keeping(Some(memo::ScanOf {
        listing,
        ledger,
        result: result.clone(),
        looked,
    }));
    Ok(result)
}

/// The scan itself: the candidates, the files skipped with a reason, and the names it
/// could not skip (all but those found as the ledger records them, or gone).
fn scan_with(
    memo: &mut memo::Scan,
    ledger: &Ledger,
    dir: &Path,
    names: &[HandoffName],
) -> Result<(Vec<Candidate>, Vec<Skipped>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut looked = Vec::new();
    for name in names {
        let file = name.file();
        if memo.skips(file, ledger) {
            continue;
        }
        let path = dir.join(file);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(_) => continue, // vanished since listing
        };
        if ledger.quick_check(file, meta.len(), fsutil::mtime_ns(&meta)) != Some(Seen::Unchanged) {
            looked.push(file.to_string());
        }
        if let Err(skip) = fsutil::check_regular(&meta) {
            skipped.push(Skipped {
                file: file.to_string(),
                reason: skip.reason().into(),
            });
            continue;
        }
        if ledger.quick_check(file, meta.len(), fsutil::mtime_ns(&meta)) == Some(Seen::Unchanged) {
            memo.unchanged(file.to_string(), meta.len(), fsutil::mtime_ns(&meta));
            continue;
        }
        let read_at = std::time::SystemTime::now();
        let contents = match fsutil::read_regular(&path, SIZE_CAP)? {
            Ok(c) => c,
            Err(Skip::Raced) => continue,
            Err(skip) => {
                skipped.push(Skipped {
                    file: file.to_string(),
                    reason: skip.reason().into(),
                });
                continue;
            }
        };
        let sha = sha256_hex(&contents.bytes);
        let seen = ledger.classify(file, contents.size, contents.mtime_ns, &sha);
        if !seen.is_new() {
            continue;
        }
        let loaded = loaded_hashed(name, &contents, sha.clone());
        // The next check-in reads it again as its agent's newest (for progress.md).
        loads::keep(path, contents.version, read_at, &loaded);
        out.push(Candidate {
            loaded,
            seen,
            sha256: sha,
        });
    }
    Ok((out, skipped, looked))
}
