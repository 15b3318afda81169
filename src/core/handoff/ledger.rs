//! The handoff ledger: which handoffs have been processed.
//!
//! Seed 004 filters handoffs by "mtime > last_checkin", which loses files
//! whose mtime is older than the check-in (rsync preserves mtimes, clocks
//! differ, a file lands during the check-in). The ledger instead records every
//! processed file by name, size, mtime and content hash; anything not recorded
//! is new, exactly once, and a file whose content changes is seen once more.

use std::collections::BTreeMap;

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

/// The processed-handoff ledger, keyed by file name. Stored in pm_state.json.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ledger {
    entries: BTreeMap<String, LedgerEntry>,
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

/// SHA-256 in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

impl Ledger {
    /// Number of processed handoffs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing has been processed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The record for a file name.
    pub fn get(&self, file: &str) -> Option<&LedgerEntry> {
        self.entries.get(file)
    }

    /// Every record, by file name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &LedgerEntry)> {
        self.entries.iter()
    }

    /// Put a record as it was stored (the ledger's log, replayed).
    pub fn insert(&mut self, file: String, entry: LedgerEntry) {
        self.entries.insert(file, entry);
    }

    /// Decide from metadata alone; `None` means "the content must be hashed to tell".
    pub fn quick_check(&self, file: &str, size: u64, mtime_ns: i64) -> Option<Seen> {
        match self.entries.get(file) {
            None => Some(Seen::New),
            Some(e) if e.size == size && e.mtime_ns == mtime_ns => Some(Seen::Unchanged),
            Some(_) => None,
        }
    }

    /// Full decision given the content hash.
    pub fn classify(&self, file: &str, size: u64, mtime_ns: i64, sha256: &str) -> Seen {
        match self.entries.get(file) {
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
        self.entries.insert(
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
