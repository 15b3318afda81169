//! Handoff files: names, what a handoff says (model.rs, with text.rs's helpers),
//! fault-tolerant parsing, atomic writing, and the ledger that decides which
//! handoffs are new.

mod ledger;
mod model;
mod name;
mod parse;
mod quiet;
mod text;
pub mod watch_stats;
mod write;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use ledger::{Candidate, Ledger, LedgerEntry, Seen};
pub use model::{Gate, GateResult, Handoff, Sections, Status};
pub use name::HandoffName;
pub use parse::{parse, parse_bytes};
pub use quiet::{How, QUIET, Quiet};
pub use text::{decode, is_none_text, one_line};
pub use write::{NewHandoff, render, write};

use crate::error::{Error, Result};
use crate::fsutil::{self, Skip};

/// Handoffs larger than this are parsed from their head only.
pub const SIZE_CAP: u64 = 1024 * 1024;

/// One handoff file as found in `handoffs/`: its name, what was read, and the parse.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file name (no folder).
    pub file: String,
    /// Parsed name (agent, timestamp, suffix).
    pub name: HandoffName,
    /// Size from fstat.
    pub size: u64,
    /// mtime in ns.
    pub mtime_ns: i64,
    /// SHA-256 (hex) of the bytes read: what "unchanged" and "amended" are judged by.
    pub sha256: String,
    /// The parsed document, with warnings (including a title/file-name agent mismatch).
    pub handoff: Handoff,
}

impl Loaded {
    /// The source agent: the file name is authoritative (the supervisor wrote or validated it).
    pub fn agent(&self) -> &str {
        &self.name.agent
    }

    /// A handoff as if read from `file` with `text` in it, for unit tests of the decisions.
    #[cfg(test)]
    pub(crate) fn from_text(file: &str, text: &str) -> Loaded {
        Loaded {
            file: file.into(),
            name: HandoffName::parse(file).expect("a valid handoff file name"),
            size: text.len() as u64,
            mtime_ns: 0,
            sha256: ledger::sha256_hex(text.as_bytes()),
            handoff: parse(text),
        }
    }
}

/// An entry of `handoffs/` that is not a readable handoff, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file name, lossily decoded.
    pub file: String,
    /// Why it was skipped.
    pub reason: String,
}

/// The handoff file names in a folder, in timeline order. Dot files, temp
/// files and names that do not match the pattern are returned as skipped.
pub fn list(dir: &Path) -> Result<(Vec<HandoffName>, Vec<Skipped>)> {
    let mut names = Vec::new();
    let mut skipped = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((names, skipped)),
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
                reason: "its name is not {agent}-{YYYYMMDD}-{HHMMSS}.md".into(),
            }),
        }
    }
    names.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    order_same_second(dir, &mut names);
    Ok((names, skipped))
}

/// Names only carry whole seconds; within one second, order by modification
/// time (a PM's instruction and the report it prompts often share a second).
/// Only the files that share a second are stat'ed.
fn order_same_second(dir: &Path, names: &mut [HandoffName]) {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() && names[j].stamp == names[i].stamp {
            j += 1;
        }
        if j - i > 1 {
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

/// Read and parse one handoff, applying the regular-file rules and the size cap.
pub fn load(dir: &Path, name: &HandoffName) -> Result<std::result::Result<Loaded, Skip>> {
    let path = dir.join(name.file_name());
    let contents = match fsutil::read_regular(&path, SIZE_CAP)? {
        Ok(c) => c,
        Err(skip) => return Ok(Err(skip)),
    };
    Ok(Ok(loaded_from(name, &contents)))
}

/// Parse what was read for `name`, noting a title that disagrees with the file name.
pub(crate) fn loaded_from(name: &HandoffName, contents: &fsutil::Contents) -> Loaded {
    loaded_hashed(name, contents, ledger::sha256_hex(&contents.bytes))
}

/// [`loaded_from`] with the content hash already computed.
fn loaded_hashed(name: &HandoffName, contents: &fsutil::Contents, sha256: String) -> Loaded {
    let mut handoff = parse_bytes(&contents.bytes, contents.truncated);
    if let Some(t) = &handoff.title_agent {
        if t != &name.agent {
            handoff.warnings.push(format!(
                "title names agent {t:?} but the file name says {:?}",
                name.agent
            ));
        }
    }
    Loaded {
        file: name.file_name(),
        name: name.clone(),
        size: contents.size,
        mtime_ns: contents.mtime_ns,
        sha256,
        handoff,
    }
}
