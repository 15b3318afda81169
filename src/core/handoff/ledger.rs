//! The handoff ledger: which handoffs have been processed.
//!
//! Seed 004 filters handoffs by "mtime > last_checkin", which loses files
//! whose mtime is older than the check-in (rsync preserves mtimes, clocks
//! differ, a file lands during the check-in). The ledger instead records every
//! processed file by name, size, mtime and content hash; anything not recorded
//! is new, exactly once, and a file whose content changes is seen once more.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Loaded;

/// What the ledger remembers of one processed handoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// Size in bytes when processed.
    pub size: u64,
    /// mtime in ns when processed.
    pub mtime_ns: i64,
    /// SHA-256 of the content read (the capped head for oversized files), hex.
    pub sha256: String,
    /// When it was processed (RFC 3339).
    pub processed_at: String,
}

/// How a file on disk compares with the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Never processed.
    New,
    /// Processed before, but its content has changed since.
    Changed,
    /// Processed, and size and mtime are as recorded (content not re-read).
    Unchanged,
    /// Processed; size or mtime moved but the content hash is the same.
    Touched,
}

impl Seen {
    /// Whether this file should be handed to the PM (again).
    pub fn is_new(self) -> bool {
        matches!(self, Seen::New | Seen::Changed)
    }
}

/// The processed-handoff ledger, keyed by file name; on disk one map (its log's lines).
///
/// Held as a shared base and the records added since: every check-in records into a copy
/// of the task's state while the parsed-state cache still holds the original, and a copy
/// that cloned the whole map cost each check-in as much as the task's history (600
/// handoffs after half an hour of a busy soak). A copy shares the base; the records added
/// are folded into a new base every [`FOLD_AT`].
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// Records as read (or last folded), shared by every copy.
    base: Arc<BTreeMap<String, LedgerEntry>>,
    /// Records added since; one here replaces the base's for the same file.
    added: BTreeMap<String, LedgerEntry>,
}

/// How many records are added before they are folded into a new base (a copy of the
/// base then, once per this many records).
pub const FOLD_AT: usize = 64;

impl PartialEq for Ledger {
    fn eq(&self, other: &Ledger) -> bool {
        if Arc::ptr_eq(&self.base, &other.base) && self.added == other.added {
            return true;
        }
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Ledger {}

impl Serialize for Ledger {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Ledger {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ledger, D::Error> {
        Ok(Ledger {
            base: Arc::new(BTreeMap::deserialize(d)?),
            added: BTreeMap::new(),
        })
    }
}

/// A handoff that is new according to the ledger, with what is needed to record it.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The loaded handoff.
    pub loaded: Loaded,
    /// New or Changed.
    pub seen: Seen,
    /// Hash of the bytes read.
    pub sha256: String,
}

/// SHA-256 in lowercase hex. Digits from a table: every new handoff is hashed as soon as
/// it lands, and a `format!` per byte cost as much as the hash.
pub fn sha256_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

impl Ledger {
    /// Number of processed handoffs.
    pub fn len(&self) -> usize {
        self.base.len() + self.added.keys().filter(|f| !self.base.contains_key(*f)).count()
    }

    /// Whether nothing has been processed.
    pub fn is_empty(&self) -> bool {
        self.base.is_empty() && self.added.is_empty()
    }

    /// The record for a file name.
    pub fn get(&self, file: &str) -> Option<&LedgerEntry> {
        self.added.get(file).or_else(|| self.base.get(file))
    }

    /// Every record, by file name (in order).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &LedgerEntry)> {
        let mut base = self.base.iter().peekable();
        let mut added = self.added.iter().peekable();
        std::iter::from_fn(move || match (base.peek(), added.peek()) {
            (Some((b, _)), Some((a, _))) => match b.cmp(a) {
                std::cmp::Ordering::Less => base.next(),
                std::cmp::Ordering::Greater => added.next(),
                std::cmp::Ordering::Equal => {
                    base.next();
                    added.next()
                }
            },
            (Some(_), None) => base.next(),
            (None, _) => added.next(),
        })
    }

    /// The records this ledger has that `earlier` (a ledger it was copied from) lacks or
    /// holds otherwise, when that can be told from the records added since the copy:
    /// `None` when the two no longer share a base (then compare them in full).
    ///
    /// One walk over the two sets of records added, both in name order (every save asks
    /// this of up to [`FOLD_AT`] records; a lookup per record in each was a visible part
    /// of a check-in).
    pub fn added_since<'a>(&'a self, earlier: &Ledger) -> Option<Vec<(&'a String, &'a LedgerEntry)>> {
        if !Arc::ptr_eq(&self.base, &earlier.base) {
            return None;
        }
        let mut before = earlier.added.iter().peekable();
        let mut out = Vec::new();
        for (f, e) in &self.added {
            match before.peek() {
                // A record `earlier` added that this one lacks: not a copy of it.
                Some((g, _)) if *g < f => return None,
                Some((g, old)) if *g == f => {
                    if *old != e {
                        out.push((f, e));
                    }
                    before.next();
                }
                _ => {
                    if earlier.base.get(f) != Some(e) {
                        out.push((f, e));
                    }
                }
            }
        }
        before.next().is_none().then_some(out)
    }

    /// Put a record as it was stored (the ledger's log, replayed).
    pub fn insert(&mut self, file: String, entry: LedgerEntry) {
        if self.added.len() >= FOLD_AT {
            let added = std::mem::take(&mut self.added);
            Arc::make_mut(&mut self.base).extend(added);
        }
        self.added.insert(file, entry);
    }

    /// Decide from metadata alone; `None` means "the content must be hashed to tell".
    pub fn quick_check(&self, file: &str, size: u64, mtime_ns: i64) -> Option<Seen> {
        match self.get(file) {
            None => Some(Seen::New),
            Some(e) if e.size == size && e.mtime_ns == mtime_ns => Some(Seen::Unchanged),
            Some(_) => None,
        }
    }

    /// Full decision given the content hash.
    pub fn classify(&self, file: &str, size: u64, mtime_ns: i64, sha256: &str) -> Seen {
        match self.get(file) {
            None => Seen::New,
            Some(e) if e.sha256 == sha256 => {
                if e.size == size && e.mtime_ns == mtime_ns {
                    Seen::Unchanged
                } else {
                    Seen::Touched
                }
            }
            Some(_) => Seen::Changed,
        }
    }

    /// Record a file as processed (or refresh a touched file's metadata).
    pub fn record(&mut self, file: &str, size: u64, mtime_ns: i64, sha256: &str, at: &str) {
        self.insert(
            file.to_string(),
            LedgerEntry {
                size,
                mtime_ns,
                sha256: sha256.to_string(),
                processed_at: at.to_string(),
            },
        );
    }

    /// Record a candidate as processed.
    pub fn record_candidate(&mut self, c: &Candidate, at: &str) {
        self.record(&c.loaded.file, c.loaded.size, c.loaded.mtime_ns, &c.sha256, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(l: &mut Ledger, file: &str, size: u64) {
        l.record(file, size, 1, "ab", "2026-11-27T10:00:00Z");
    }

    #[test]
    fn the_hash_is_sha256_in_lowercase_hex() {
        // The ledgers on disk hold hashes written by the earlier `format!` rendering: the
        // same digits, or every recorded handoff would read as changed.
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_copy_shares_its_base_and_reads_as_one_map_across_folds() {
        let mut a = Ledger::default();
        for i in 0..(FOLD_AT * 2 + 5) {
            rec(&mut a, &format!("dev-{i:04}.md"), 1);
        }
        // The same file recorded again replaces its record, in the base or the records added.
        rec(&mut a, "dev-0000.md", 9);
        let n = FOLD_AT * 2 + 5;
        assert_eq!(a.len(), n);
        assert_eq!(a.get("dev-0000.md").unwrap().size, 9);
        let names: Vec<&String> = a.iter().map(|(f, _)| f).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "in order, each once");
        assert_eq!(names.len(), n);

        let mut b = a.clone();
        assert!(Arc::ptr_eq(&a.base, &b.base), "a copy does not copy the records");
        rec(&mut b, "dev-9999.md", 1);
        rec(&mut b, "dev-0001.md", 7);
        let new: Vec<&str> = b.added_since(&a).unwrap().iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(new, ["dev-0001.md", "dev-9999.md"]);
        assert_ne!(a, b);
        assert_eq!(a.added_since(&a).unwrap().len(), 0, "nothing added since itself");
        assert!(
            a.added_since(&b).is_none(),
            "lacks what the other added: not a copy of it"
        );
        let mut c = a.clone();
        rec(&mut c, "dev-0000.md", 9);
        rec(&mut c, "aaa-first.md", 1);
        let new: Vec<&str> = c.added_since(&a).unwrap().iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(new, ["aaa-first.md"], "a record made again as it was is not new");

        // Serialised as one map; read back it equals the layered one.
        let json = serde_json::to_string(&b).unwrap();
        let back: Ledger = serde_json::from_str(&json).unwrap();
        assert_eq!(back, b);
        assert_eq!(back.len(), n + 1);
        assert!(back.added_since(&b).is_none(), "no shared base: compared in full");
    }
}
